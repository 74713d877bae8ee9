// Must NOT compile: a revising schedule (LLaDA 2.1's token editing) on the device decoder, whose fused
// kernels select masked slots only (it runs with dlm::decoder).
#include <dlm/schedule/editing.hpp>

#include "cuda_model.cuh"

int main() {
    fake_device_model m;
    dlm::cuda::device_decoder<fake_device_model, dlm::aligned_block_diffusion_mask, dlm::prefix_cache, dlm::llada21_schedule,
                              dlm::categorical_sampler>
        d(m);
    (void)d;
}
