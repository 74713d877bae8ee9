// A stand-in for dlm::cuda::transformer with the device decoder's interface and no dependencies, so the
// CUDA compile-fail cases compile quickly and fail only where they mean to.
#pragma once
#include <dlm/cuda/device_decoder.cuh>

struct fake_device_model {
    struct kv_cache {};
    dlm::index_t vocab_size() const { return 8; }
    dlm::token_id mask_id() const { return 7; }
    std::span<const dlm::token_id> eos_ids() const { return {}; }
    bool logits_shift() const { return false; }
    dlm::index_t max_context() const { return 64; }
    kv_cache make_kv_cache(dlm::index_t) const { return {}; }
    template <class Mask>
    void forward(std::span<const dlm::forward_request<kv_cache>>, const Mask&, std::span<float>) {}
    template <class Mask>
    const float* forward_device(std::span<const dlm::forward_request<kv_cache>>, const Mask&) { return nullptr; }
    cudaStream_t stream() const { return nullptr; }
};
