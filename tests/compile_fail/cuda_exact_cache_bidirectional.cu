// Must NOT compile: an exact KV cache under a bidirectional mask, on the device decoder.
#include "cuda_model.cuh"

int main() {
    fake_device_model m;
    dlm::cuda::device_decoder<fake_device_model, dlm::semi_ar_mask, dlm::prefix_cache, dlm::threshold_schedule, dlm::greedy_sampler> d(m);
    (void)d;
}
