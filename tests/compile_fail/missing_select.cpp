// Must NOT compile: the schedule has no select hook. The ctest entry checks that the compiler's
// message names the missing hook.
#include <dlm/dlm.hpp>
#include <dlm/testing/scripted_model.hpp>

struct my_schedule {
    // forgot: void select(const dlm::step_context&, std::span<const dlm::candidate>, std::vector<dlm::index_t>&) const;
    double tau = 0.9;
};

int main() {
    dlm::testing::scripted_model m(8, 7, {6}, false, {});
    dlm::decoder<dlm::testing::scripted_model, dlm::block_causal_mask, dlm::prefix_cache, my_schedule, dlm::greedy_sampler> d(m);
    (void)d;
}
