// Must NOT compile: a revising schedule (LLaDA 2.1's token editing) with a cache that recomputes one
// sub-block only: the edits need every filled slot's row.
#include <dlm/dlm.hpp>
#include <dlm/testing/scripted_model.hpp>

int main() {
    dlm::testing::scripted_model m(8, 7, {6}, false, {});
    dlm::decoder<dlm::testing::scripted_model, dlm::aligned_block_diffusion_mask, dlm::sub_block_cache, dlm::llada21_schedule,
                 dlm::greedy_sampler>
        d(m);
    (void)d;
}
