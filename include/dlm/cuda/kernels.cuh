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
#include <string>

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

/// Four consecutive elements of T, stored with one instruction (8 bytes for bf16/f16, 16 for f32).
template <class T>
struct alignas(4 * sizeof(T)) quad {
    T v[4];
};

/// Whether p may be read or written as 16-byte vectors (float4) / quads of T.
[[nodiscard]] inline bool aligned_to(const void* p, std::size_t bytes) noexcept {
    return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

/// 1 / sqrt(mean(x²) + eps) of a row whose threads hold the partial sums of squares `ss` (double),
/// added over the block in cub's fixed order; every thread gets the result.
template <class Reduce>
__device__ inline float inverse_rms(double ss, index_t width, float eps, typename Reduce::TempStorage& temp, float& shared) {
    const double total = Reduce(temp).Sum(ss);
    if (threadIdx.x == 0) shared = 1.0f / sqrtf(static_cast<float>(total / width) + eps);
    __syncthreads();
    return shared;
}

/// out[r] = weight ⊙ x[src_row(r)] / sqrt(mean(x²) + eps), written in T (the next product's input,
/// rounded by to_product_input as the CPU rounds it).
/// `rows` maps output rows to input rows (null: the identity), so the head's norm runs only on the
/// rows whose logits are needed.
/// Vpt > 0: the row is read once, as float4s, Vpt of them per thread kept in registers (width a multiple
/// of 4, at most 4 · row_threads · Vpt; every load is issued before the first is used, so a row costs
/// one memory round trip, not one per element stride). Vpt == 0: any width, the row read twice, one
/// element at a time. Thread t sums its elements in increasing index, the block adds the threads' sums
/// in cub's fixed order: the result depends on the row alone.
template <class T, int Vpt>
__global__ void __launch_bounds__(row_threads) rms_norm(const float* __restrict__ x, const index_t* __restrict__ rows, index_t width,
                                                        const float* __restrict__ weight, float eps, T* __restrict__ out) {
    using reduce = cub::BlockReduce<double, row_threads>;
    __shared__ typename reduce::TempStorage temp;
    __shared__ float inv_shared;
    const auto r = static_cast<std::size_t>(blockIdx.x);
    const float* xr = x + static_cast<std::size_t>(rows ? rows[r] : static_cast<index_t>(r)) * static_cast<std::size_t>(width);
    T* o = out + r * static_cast<std::size_t>(width);
    const auto t = static_cast<index_t>(threadIdx.x);
    double ss = 0.0;
    if constexpr (Vpt > 0) {
        const auto* x4 = reinterpret_cast<const float4*>(xr);
        const auto* w4p = reinterpret_cast<const float4*>(weight);
        const index_t w4 = width / 4;
        float4 v[Vpt], wv[Vpt];  // the weights are loaded with the row, before the reduction waits on it
#pragma unroll
        for (int j = 0; j < Vpt; ++j) {
            const index_t i = t + j * static_cast<index_t>(row_threads);
            v[j] = i < w4 ? x4[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            wv[j] = i < w4 ? w4p[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
#pragma unroll
        for (int j = 0; j < Vpt; ++j) {
            ss += static_cast<double>(v[j].x) * v[j].x;
            ss += static_cast<double>(v[j].y) * v[j].y;
            ss += static_cast<double>(v[j].z) * v[j].z;
            ss += static_cast<double>(v[j].w) * v[j].w;
        }
        const float inv = inverse_rms<reduce>(ss, width, eps, temp, inv_shared);
        auto* o4 = reinterpret_cast<quad<T>*>(o);
#pragma unroll
        for (int j = 0; j < Vpt; ++j) {
            const index_t i = t + j * static_cast<index_t>(row_threads);
            if (i >= w4) break;
            const float4 w = wv[j];
            o4[i] = {to_product_input<T>(w.x * (v[j].x * inv)), to_product_input<T>(w.y * (v[j].y * inv)),
                     to_product_input<T>(w.z * (v[j].z * inv)), to_product_input<T>(w.w * (v[j].w * inv))};
        }
    } else {
        for (index_t i = t; i < width; i += row_threads) ss += static_cast<double>(xr[i]) * xr[i];
        const float inv = inverse_rms<reduce>(ss, width, eps, temp, inv_shared);
        for (index_t i = t; i < width; i += row_threads) o[i] = to_product_input<T>(weight[i] * (xr[i] * inv));
    }
}

/// Launches rms_norm over `m` output rows with the register-resident form where the width and the
/// pointers allow it (widths up to 8192), else the generic one.
template <class T>
void launch_rms_norm(index_t m, const float* x, const index_t* rows, index_t width, const float* weight, float eps, T* out, cudaStream_t st) {
    const bool vec = width % 4 == 0 && aligned_to(x, 16) && aligned_to(weight, 16) && aligned_to(out, 4 * sizeof(T));
    const index_t per_vpt = 4 * static_cast<index_t>(row_threads);
    const auto grid = static_cast<unsigned>(m);
    if (vec && width <= 4 * per_vpt)
        rms_norm<T, 4><<<grid, row_threads, 0, st>>>(x, rows, width, weight, eps, out);
    else if (vec && width <= 8 * per_vpt)
        rms_norm<T, 8><<<grid, row_threads, 0, st>>>(x, rows, width, weight, eps, out);
    else
        rms_norm<T, 0><<<grid, row_threads, 0, st>>>(x, rows, width, weight, eps, out);
    check_launch("dlm::cuda rms_norm", st);
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

/// The q/k/v epilogue of one row and one head (block (r, h), a thread per rotated pair, head_dim / 2
/// threads): adds the biases (if any), rotates q and k (rotate-half), leaves q in `qkv` (f32) and writes
/// k and v in T to the window buffers (rows of kv_dim) and, for rows in the request's store range, to its
/// KV cache at `layer`. Heads h < heads are q heads, then kv_heads k heads, then kv_heads v heads (no
/// rotation: a thread moves elements i and i + head_dim / 2). Every element is computed by one thread
/// from its own inputs, so the result does not depend on the launch shape.
template <class T>
__global__ void qkv_epilogue(float* __restrict__ qkv, qkv_shape s, const float* __restrict__ bias, const float* __restrict__ cos_t,
                             const float* __restrict__ sin_t, const index_t* __restrict__ row_request,
                             const sequence_view<T>* __restrict__ seqs, index_t layer, T* __restrict__ k_win, T* __restrict__ v_win) {
    const index_t r = static_cast<index_t>(blockIdx.x), head = static_cast<index_t>(blockIdx.y), half = s.head_dim / 2;
    const sequence_view<T>& sv = seqs[row_request[r]];
    const index_t pos = sv.plan.window_begin + (r - sv.row0);
    const bool is_q = head < s.heads, is_k = !is_q && head < s.heads + s.kv_heads;
    const index_t g = head - s.heads - (is_q || is_k ? 0 : s.kv_heads);  // kv head (k or v)
    float* row = qkv + static_cast<std::size_t>(r) * s.ld() + head * s.head_dim;
    const float* b = bias ? bias + head * s.head_dim : nullptr;
    const float* c = cos_t + static_cast<std::size_t>(r) * half;
    const float* sn = sin_t + static_cast<std::size_t>(r) * half;
    T* w = (is_k ? k_win : v_win) + static_cast<std::size_t>(r) * s.kv_dim() + g * s.head_dim;
    T* cr = nullptr;  // this row's slot in the cache, where it is stored
    if (!is_q && sv.keys && pos >= sv.plan.store_begin && pos < sv.plan.store_end)
        cr = (is_k ? sv.keys : sv.values) + (static_cast<std::size_t>(layer) * s.kv_heads + g) * (static_cast<std::size_t>(sv.capacity) * s.head_dim) +
             static_cast<std::size_t>(pos) * s.head_dim;
    for (index_t i = static_cast<index_t>(threadIdx.x); i < half; i += static_cast<index_t>(blockDim.x)) {
        float x1 = row[i], x2 = row[i + half];
        if (b) {
            x1 += b[i];
            x2 += b[i + half];
        }
        if (is_q || is_k) {
            const float y1 = x1 * c[i] - x2 * sn[i], y2 = x2 * c[i] + x1 * sn[i];
            x1 = y1;
            x2 = y2;
        }
        if (is_q) {
            row[i] = x1;
            row[i + half] = x2;
            continue;
        }
        const T t1 = element<T>::from_float(x1), t2 = element<T>::from_float(x2);
        w[i] = t1;
        w[i + half] = t2;
        if (cr) {
            cr[i] = t1;
            cr[i + half] = t2;
        }
    }
}

/// Launches qkv_epilogue over m rows.
template <class T>
void launch_qkv_epilogue(index_t m, float* qkv, qkv_shape s, const float* bias, const float* cos_t, const float* sin_t,
                         const index_t* row_request, const sequence_view<T>* seqs, index_t layer, T* k_win, T* v_win, cudaStream_t st) {
    const dim3 grid(static_cast<unsigned>(m), static_cast<unsigned>(s.heads + 2 * s.kv_heads));
    const index_t half = s.head_dim / 2;
    qkv_epilogue<T><<<grid, static_cast<unsigned>(half < 256 ? half : 256), 0, st>>>(qkv, s, bias, cos_t, sin_t, row_request, seqs, layer, k_win, v_win);
    check_launch("dlm::cuda qkv_epilogue (layer " + std::to_string(layer) + ")", st);
}

/// silu(g) · u, rounded as the next product's input.
template <class T>
__device__ inline T silu_times(float g, float u) {
    return to_product_input<T>(g / (1.0f + expf(-g)) * u);
}

/// act[r][i] = silu(gate) · up, gate = gu[r][i], up = gu[r][width + i]; written in T. Quads of four
/// elements (a float4 of gate and of up in, a quad of T out) when width is a multiple of 4 and the
/// pointers allow it; each element's arithmetic is the same either way.
template <class T, bool Quads>
__global__ void silu_gate(const float* __restrict__ gu, index_t rows, index_t width, T* __restrict__ act) {
    constexpr index_t e = Quads ? 4 : 1;
    const index_t w = width / e;
    const std::size_t n = static_cast<std::size_t>(rows) * w;
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        const std::size_t r = i / w, j = i % w;
        const float* g = gu + r * 2 * width + j * e;
        if constexpr (Quads) {
            const float4 a = *reinterpret_cast<const float4*>(g), b = *reinterpret_cast<const float4*>(g + width);
            reinterpret_cast<quad<T>*>(act)[i] = {silu_times<T>(a.x, b.x), silu_times<T>(a.y, b.y), silu_times<T>(a.z, b.z),
                                                  silu_times<T>(a.w, b.w)};
        } else {
            act[i] = silu_times<T>(g[0], g[width]);
        }
    }
}

/// Grid size for a grid-stride loop over n items (enough blocks to fill the device, capped).
[[nodiscard]] inline unsigned stride_grid(std::size_t n, unsigned threads = 256) {
    const std::size_t blocks = (n + threads - 1) / threads;
    return static_cast<unsigned>(blocks < 65536 ? (blocks ? blocks : 1) : 65536);
}

/// Launches silu_gate over rows × width outputs.
template <class T>
void launch_silu_gate(const float* gu, index_t rows, index_t width, T* act, cudaStream_t st) {
    const std::size_t n = static_cast<std::size_t>(rows) * width;
    if (width % 4 == 0 && aligned_to(gu, 16) && aligned_to(act, 4 * sizeof(T)))
        silu_gate<T, true><<<stride_grid(n / 4), 256, 0, st>>>(gu, rows, width, act);
    else
        silu_gate<T, false><<<stride_grid(n), 256, 0, st>>>(gu, rows, width, act);
    check_launch("dlm::cuda silu_gate", st);
}

}  // namespace dlm::cuda::kernels
