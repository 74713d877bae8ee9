// Must NOT compile: the mask names the optional hook align_blocks but as a function, not the bool the
// decoder reads, so it would never take effect. The ctest entry checks the message.
#include <dlm/dlm.hpp>
#include <dlm/testing/scripted_model.hpp>

struct my_mask : dlm::block_causal_mask {
    void align_blocks() const {}
};

int main() {
    dlm::testing::scripted_model m(8, 7, {6}, false, {});
    dlm::decoder<dlm::testing::scripted_model, my_mask, dlm::prefix_cache, dlm::threshold_schedule, dlm::greedy_sampler> d(m);
    (void)d;
}
