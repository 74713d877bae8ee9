// dlm/cuda/kv_cache.cuh — the device-resident KV cache of one sequence, and the per-sequence view of a
// batched forward that the kernels read.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "../core/plan.hpp"
#include "../model/request_check.hpp"
#include "element.cuh"
#include "runtime.cuh"

namespace dlm::cuda {

/// Per-sequence K/V store for `capacity` canvas positions, in device memory, in the model's storage
/// type T: for every layer and KV head, `capacity` rows of `head_dim` post-RoPE keys, and the same for
/// values. Zeroed when made, so a position never written reads as 0, never as NaN. `stored` (host)
/// records which positions hold K/V, so a forward that needs a missing key is refused before it runs.
/// Move-only (it owns device memory).
template <storage_element T>
class kv_cache {
public:
    index_t capacity = 0, layers = 0, kv_heads = 0, head_dim = 0;
    std::vector<unsigned char> stored;

    kv_cache() = default;
    /// Zeroed on `stream`, the stream of the model that will write and read it: in order with its
    /// forwards (a memset on the legacy default stream is not ordered with a non-blocking stream, and
    /// could land after the first forward's stores).
    kv_cache(index_t capacity_, index_t layers_, index_t kv_heads_, index_t head_dim_, cudaStream_t stream)
        : capacity(capacity_), layers(layers_), kv_heads(kv_heads_), head_dim(head_dim_),
          stored(static_cast<std::size_t>(capacity_), 0) {
        const std::size_t n = elements();
        if (n) {
            keys_.reserve(n, "the KV cache (keys)");
            values_.reserve(n, "the KV cache (values)");
            keys_.zero(stream, "the KV cache (keys)");
            values_.zero(stream, "the KV cache (values)");
        }
    }

    /// Elements of the key (or value) store: layers · kv_heads · capacity · head_dim.
    [[nodiscard]] std::size_t elements() const noexcept {
        return static_cast<std::size_t>(layers) * kv_heads * static_cast<std::size_t>(capacity) * head_dim;
    }
    /// Device bytes held (keys and values).
    [[nodiscard]] std::size_t bytes() const noexcept { return bytes_for(capacity, layers, kv_heads, head_dim); }
    /// The device bytes of a store of this shape (keys and values), without making one.
    [[nodiscard]] static std::uint64_t bytes_for(index_t capacity, index_t layers, index_t kv_heads, index_t head_dim) noexcept {
        const auto n = [](index_t v) { return static_cast<std::uint64_t>(std::max<index_t>(v, 0)); };
        return 2 * n(capacity) * n(layers) * n(kv_heads) * n(head_dim) * sizeof(T);
    }
    /// Device pointers: element (layer, kv head g, position, dim) at
    /// [((layer · kv_heads + g) · capacity + position) · head_dim + dim].
    [[nodiscard]] T* keys() noexcept { return keys_.data(); }
    [[nodiscard]] T* values() noexcept { return values_.data(); }
    [[nodiscard]] const T* keys() const noexcept { return keys_.data(); }
    [[nodiscard]] const T* values() const noexcept { return values_.data(); }
    /// Forget everything stored (the device memory keeps its values; they are never read unstored).
    void clear() noexcept { std::fill(stored.begin(), stored.end(), 0); }

private:
    device_buffer<T> keys_, values_;
};

/// Copies the stored K/V of positions [src_begin, src_begin + count) of `src` to positions
/// [dst_begin, dst_begin + count) of `dst` on `stream` and marks them stored (the prompt cache's hook,
/// as cpu::copy_kv; keys are post-RoPE, so both ranges must be the same canvas positions): two
/// device-to-device copies, one per store, each a 2D copy of layers · kv_heads slabs. Bit-exact and
/// asynchronous: in order with the forwards enqueued on the same stream (the model's). Throws
/// dlm::contract_error as cpu::copy_kv for stores of different shapes, a range outside either, or an
/// unstored source.
template <storage_element T>
void copy_kv(const kv_cache<T>& src, index_t src_begin, kv_cache<T>& dst, index_t dst_begin, index_t count, cudaStream_t stream) {
    dlm::detail::check_kv_copy(src, src_begin, dst, dst_begin, count, "cuda::copy_kv");
    if (count == 0) return;
    const std::size_t row = static_cast<std::size_t>(src.head_dim) * sizeof(T);  // one position of one slab
    const std::size_t slabs = static_cast<std::size_t>(src.layers) * src.kv_heads;
    const auto copy = [&](const T* from, T* to, const char* what) {
        check(cudaMemcpy2DAsync(to + static_cast<std::size_t>(dst_begin) * dst.head_dim, row * dst.capacity,
                                from + static_cast<std::size_t>(src_begin) * src.head_dim, row * src.capacity, row * count, slabs,
                                cudaMemcpyDeviceToDevice, stream),
              std::string("cudaMemcpy2DAsync (") + what + ")");
    };
    copy(src.keys(), dst.keys(), "cuda::copy_kv, keys");
    copy(src.values(), dst.values(), "cuda::copy_kv, values");
    std::fill(dst.stored.begin() + dst_begin, dst.stored.begin() + dst_begin + count, 1);
}

/// What the kernels know about one request of a batched forward.
template <storage_element T>
struct sequence_view {
    canvas_layout layout;
    forward_plan plan;
    index_t row0 = 0;        ///< first of this request's rows in the stacked window rows
    index_t logits_row0 = 0; ///< first of this request's rows in the stacked logits rows
    T* keys = nullptr;       ///< the request's KV cache (layer 0), or null
    T* values = nullptr;
    index_t capacity = 0;
};

}  // namespace dlm::cuda
