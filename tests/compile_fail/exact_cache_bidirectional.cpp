// Must NOT compile: an exact KV cache under a bidirectional mask.
#include <dlm/dlm.hpp>
#include <dlm/testing/scripted_model.hpp>

int main() {
    dlm::testing::scripted_model m(8, 7, {6}, false, {});
    dlm::decoder<dlm::testing::scripted_model, dlm::semi_ar_mask, dlm::prefix_cache, dlm::threshold_schedule, dlm::greedy_sampler> d(m);
    (void)d;
}
