// dlm/cuda/kernels.cuh — the row-wise kernels of the CUDA transformer: embedding gather, RMSNorm,
// rotary tables, the q/k/v epilogue (bias, RoPE, K/V to the window buffer and the cache), the SiLU-gated
// product, and conversions / random fills for loading weights.
//
// Each output row is computed by one thread block in a fixed order, so a row's result does not depend
// on the other rows of the batch. Arithmetic follows the CPU model (cpu/ops.hpp): RMSNorm's mean of
// squares in double, rotary angles as an f32 product with cos/sin in double, f32 everywhere else.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cub/block/block_reduce.cuh>

#include "../core/rng.hpp"
#include "element.cuh"
#include "kv_cache.cuh"
#include "runtime.cuh"

namespace dlm::cuda::kernels {

inline constexpr unsigned row_threads = 256;

/// dst[i] = Dst(src[i]).
template <class Src, class Dst>
__global__ void convert(const Src* __restrict__ src, Dst* __restrict__ dst, std::size_t n) {
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        dst[i] = element<Dst>::from_float(element<Src>::to_float(src[i]));
    }
}

/// dst[i] = center + scale · u, u uniform in [-1, 1) from Philox(seed, tensor, i): random weights made
/// on the device (benchmarks of large shapes need no file and no host copy).
template <class T>
__global__ void fill_uniform(T* __restrict__ dst, std::size_t n, std::uint64_t seed, std::uint32_t tensor, float center, float scale) {
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        std::uint32_t c[4] = {static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(i >> 32), tensor, 0x5eedu};
        philox4x32(c, seed);
        const float u = static_cast<float>(c[0] >> 8) * 0x1.0p-23f - 1.0f;
        dst[i] = element<T>::from_float(center + scale * u);
    }
}

/// x[r] = embedding[tokens[r]] (f32 rows of `hidden`).
template <class T>
__global__ void embed(const T* __restrict__ table, const token_id* __restrict__ tokens, index_t hidden, float* __restrict__ x) {
    const auto r = static_cast<std::size_t>(blockIdx.x);
    const T* src = table + static_cast<std::size_t>(tokens[r]) * static_cast<std::size_t>(hidden);
    float* dst = x + r * static_cast<std::size_t>(hidden);
    for (index_t j = static_cast<index_t>(threadIdx.x); j < hidden; j += static_cast<index_t>(blockDim.x))
        dst[j] = element<T>::to_float(src[j]);
}

/// out[r] = weight ⊙ x[src_row(r)] / sqrt(mean(x²) + eps), written in T (the next product's input,
/// rounded by to_product_input as the CPU rounds it).
/// `rows` maps output rows to input rows (null: the identity), so the head's norm runs only on the
/// rows whose logits are needed.
template <class T>
__global__ void __launch_bounds__(row_threads) rms_norm(const float* __restrict__ x, const index_t* __restrict__ rows, index_t width,
                                                        const float* __restrict__ weight, float eps, T* __restrict__ out) {
    using reduce = cub::BlockReduce<double, row_threads>;
    __shared__ typename reduce::TempStorage temp;
    __shared__ float inv_shared;
    const auto r = static_cast<std::size_t>(blockIdx.x);
    const float* xr = x + static_cast<std::size_t>(rows ? rows[r] : static_cast<index_t>(r)) * static_cast<std::size_t>(width);
    double ss = 0.0;
    for (index_t i = static_cast<index_t>(threadIdx.x); i < width; i += row_threads) ss += static_cast<double>(xr[i]) * xr[i];
    const double total = reduce(temp).Sum(ss);
    if (threadIdx.x == 0) inv_shared = 1.0f / sqrtf(static_cast<float>(total / width) + eps);
    __syncthreads();
    const float inv = inv_shared;
    T* o = out + r * static_cast<std::size_t>(width);
    for (index_t i = static_cast<index_t>(threadIdx.x); i < width; i += row_threads) o[i] = to_product_input<T>(weight[i] * (xr[i] * inv));
}

/// cos/sin tables (rows of head_dim/2) for the rows' positions: angle = f32(pos) · inv_freq[i], as
/// the reference implementations compute it. (A template only so that the header may be included by
/// several translation units.)
template <class = void>
__global__ void rope_tables(const index_t* __restrict__ positions, index_t m, index_t half, const float* __restrict__ inv_freq,
                                   float* __restrict__ cos_out, float* __restrict__ sin_out) {
    const std::size_t n = static_cast<std::size_t>(m) * half;
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        const float angle = static_cast<float>(positions[i / half]) * inv_freq[i % half];
        cos_out[i] = static_cast<float>(cos(static_cast<double>(angle)));
        sin_out[i] = static_cast<float>(sin(static_cast<double>(angle)));
    }
}

/// Shapes of the fused q|k|v rows.
struct qkv_shape {
    index_t heads = 0, kv_heads = 0, head_dim = 0;
    [[nodiscard]] __host__ __device__ index_t q_dim() const noexcept { return heads * head_dim; }
    [[nodiscard]] __host__ __device__ index_t kv_dim() const noexcept { return kv_heads * head_dim; }
    [[nodiscard]] __host__ __device__ index_t ld() const noexcept { return q_dim() + 2 * kv_dim(); }
};

/// The q/k/v epilogue of one row: adds the biases (if any), rotates q and k (rotate-half), leaves q in
/// `qkv` (f32) and writes k and v in T to the window buffers (rows of kv_dim) and, for rows in the
/// request's store range, to its KV cache at `layer`.
template <class T>
__global__ void qkv_epilogue(float* __restrict__ qkv, qkv_shape s, const float* __restrict__ bias, const float* __restrict__ cos_t,
                             const float* __restrict__ sin_t, const index_t* __restrict__ row_request,
                             const sequence_view<T>* __restrict__ seqs, index_t layer, T* __restrict__ k_win, T* __restrict__ v_win) {
    const index_t r = static_cast<index_t>(blockIdx.x), half = s.head_dim / 2, ld = s.ld();
    float* row = qkv + static_cast<std::size_t>(r) * ld;
    const float* c = cos_t + static_cast<std::size_t>(r) * half;
    const float* sn = sin_t + static_cast<std::size_t>(r) * half;
    const sequence_view<T>& sv = seqs[row_request[r]];
    const index_t pos = sv.plan.window_begin + (r - sv.row0);
    const bool store = sv.keys && pos >= sv.plan.store_begin && pos < sv.plan.store_end;
    const std::size_t cache_row = static_cast<std::size_t>(sv.capacity) * s.head_dim;  // one (layer, head) slab
    // Rotated pairs: q heads then k heads.
    const index_t pairs = (s.heads + s.kv_heads) * half;
    for (index_t p = static_cast<index_t>(threadIdx.x); p < pairs; p += static_cast<index_t>(blockDim.x)) {
        const index_t head = p / half, i = p % half;
        const index_t at = head * s.head_dim + i;  // k heads follow the q heads directly in the row
        float x1 = row[at], x2 = row[at + half];
        if (bias) {
            x1 += bias[at];
            x2 += bias[at + half];
        }
        const float y1 = x1 * c[i] - x2 * sn[i], y2 = x2 * c[i] + x1 * sn[i];
        if (head < s.heads) {
            row[at] = y1;
            row[at + half] = y2;
        } else {
            const index_t g = head - s.heads;
            const T t1 = element<T>::from_float(y1), t2 = element<T>::from_float(y2);
            T* kw = k_win + static_cast<std::size_t>(r) * s.kv_dim() + g * s.head_dim;
            kw[i] = t1;
            kw[i + half] = t2;
            if (store) {
                T* kc = sv.keys + (static_cast<std::size_t>(layer) * s.kv_heads + g) * cache_row + static_cast<std::size_t>(pos) * s.head_dim;
                kc[i] = t1;
                kc[i + half] = t2;
            }
        }
    }
    const index_t v0 = s.q_dim() + s.kv_dim();
    for (index_t j = static_cast<index_t>(threadIdx.x); j < s.kv_dim(); j += static_cast<index_t>(blockDim.x)) {
        const T v = element<T>::from_float(row[v0 + j] + (bias ? bias[v0 + j] : 0.0f));
        v_win[static_cast<std::size_t>(r) * s.kv_dim() + j] = v;
        if (store) {
            const index_t g = j / s.head_dim, d = j % s.head_dim;
            sv.values[(static_cast<std::size_t>(layer) * s.kv_heads + g) * cache_row + static_cast<std::size_t>(pos) * s.head_dim + d] = v;
        }
    }
}

/// act[r][i] = silu(gate) · up, gate = gu[r][i], up = gu[r][width + i]; written in T.
template <class T>
__global__ void silu_gate(const float* __restrict__ gu, index_t rows, index_t width, T* __restrict__ act) {
    const std::size_t n = static_cast<std::size_t>(rows) * width;
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        const std::size_t r = i / width, j = i % width;
        const float g = gu[r * 2 * width + j], u = gu[r * 2 * width + width + j];
        act[i] = to_product_input<T>(g / (1.0f + expf(-g)) * u);
    }
}

/// Grid size for a grid-stride loop over n items (enough blocks to fill the device, capped).
[[nodiscard]] inline unsigned stride_grid(std::size_t n, unsigned threads = 256) {
    const std::size_t blocks = (n + threads - 1) / threads;
    return static_cast<unsigned>(blocks < 65536 ? (blocks ? blocks : 1) : 65536);
}

}  // namespace dlm::cuda::kernels
