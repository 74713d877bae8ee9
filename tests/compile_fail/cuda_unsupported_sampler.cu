// Must NOT compile: a sampler without a device implementation, on the device decoder.
#include "cuda_model.cuh"

struct my_sampler {
    dlm::slot_choice sample(std::span<const float>, const dlm::random_key&, std::span<const dlm::token_id>) const { return {}; }
};

int main() {
    fake_device_model m;
    dlm::cuda::device_decoder<fake_device_model, dlm::block_causal_mask, dlm::prefix_cache, dlm::threshold_schedule, my_sampler> d(m);
    (void)d;
}
