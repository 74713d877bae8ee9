// Must NOT compile: the schedule's early stop is misspelled (stop_after_blocks), so the decoder would
// never call it. The ctest entry checks that the message names the known schedule hooks.
#include <dlm/dlm.hpp>
#include <dlm/testing/scripted_model.hpp>

struct my_schedule : dlm::threshold_schedule {
    bool stop_after_blocks(const dlm::step_context&, std::span<const dlm::token_id>) const { return true; }  // stop_after_block
};

int main() {
    dlm::testing::scripted_model m(8, 7, {6}, false, {});
    dlm::decoder<dlm::testing::scripted_model, dlm::block_causal_mask, dlm::prefix_cache, my_schedule, dlm::greedy_sampler> d(m);
    (void)d;
}
