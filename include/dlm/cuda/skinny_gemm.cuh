// dlm/cuda/skinny_gemm.cuh — the linear layers for a few rows (decoding steps): a bandwidth-bound kernel
// that streams each weight once.
//
//   y[m × n] (f32) = x[m × k] (T) · W[n × k]ᵀ (T) + beta · y,   m <= skinny_max_rows
//
// Layout as gemm.cuh (row-major, W as Hugging Face stores it). A block of 16 weight rows (skinny_block_rows)
// serves every row of x: x is staged in shared memory in chunks of k (read from global memory once per
// block), each warp owns R weight rows and reads them with coalesced 16-byte loads (lane i the vectors
// i, i + 32, i + 64, ... of its rows, evict-first: weights are read once), converts them to f32 and
// multiplies each vector by the same k-range of every x row. Accumulation in f32, per (weight row, x row)
// in a fixed order — each lane's vectors in increasing k, then the warp's 32 partial sums by a
// butterfly — which depends on neither m, nor the position of the x row in the batch, nor the chunk
// size (chunks are whole multiples of a warp's stride): a row's result is bit-for-bit the same in a
// batch of 1 or of 16. Grid: n / 16 blocks (224 for n = 3584), no split of k.
//
// Needs k to be a multiple of the vector width (16 bytes of T: 8 for bf16/f16, 4 for f32) and x, W
// 16-byte aligned (skinny_applies); skinny_linear throws invalid_parameter otherwise, and the
// dispatcher (gemm.cuh) falls back to cuBLAS.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "../core/error.hpp"
#include "element.cuh"
#include "runtime.cuh"

namespace dlm::cuda {

/// The most x rows the skinny kernel takes (above it cuBLAS's tensor-core kernels win: the kernel
/// runs on CUDA cores, m FMAs per weight).
inline constexpr index_t skinny_max_rows = 16;
/// Weight rows per thread block.
inline constexpr int skinny_block_rows = 16;

/// Elements of T in one 16-byte load.
template <storage_element T>
inline constexpr int skinny_vector = static_cast<int>(16 / sizeof(T));

namespace kernels {

/// Shared memory budget for the staged x chunk.
inline constexpr int skinny_x_bytes = 32 * 1024;

/// x elements per row in one staged chunk: the budget, in whole warp strides (32 vectors).
template <class T, int MR>
inline constexpr int skinny_chunk = (skinny_x_bytes / (MR * static_cast<int>(sizeof(T)))) / (32 * skinny_vector<T>) * (32 * skinny_vector<T>);

template <class T>
__device__ inline void to_floats(const uint4& raw, float* out) {
    constexpr int V = skinny_vector<T>;
    T v[V];
    static_assert(sizeof(v) == sizeof(uint4), "a vector is 16 bytes");
    memcpy(v, &raw, sizeof(raw));
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = element<T>::to_float(v[i]);
}

/// MR: the most x rows (m <= MR); R: weight rows per warp (skinny_block_rows / R warps per block); U: warp
/// strides of weights loaded before they are used.
template <class T, int MR, int R, int U>
__global__ void __launch_bounds__(skinny_block_rows / R * 32)
    skinny_gemm(const T* __restrict__ x, const T* __restrict__ w, float* __restrict__ y, index_t m, index_t n, index_t k, float beta) {
    constexpr int V = skinny_vector<T>, KC = skinny_chunk<T, MR>, warps = skinny_block_rows / R;
    static_assert(KC > 0 && KC % (32 * V) == 0, "a chunk of x is a whole number of warp strides");
    __shared__ __align__(16) T xs[MR * KC];
    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    const index_t row0 = (static_cast<index_t>(blockIdx.x) * warps + warp) * R;
    float acc[R][MR];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int i = 0; i < MR; ++i) acc[r][i] = 0.0f;
    const uint4* wv[R];
#pragma unroll
    for (int r = 0; r < R; ++r) wv[r] = row0 + r < n ? reinterpret_cast<const uint4*>(w + static_cast<std::size_t>(row0 + r) * k) : nullptr;

    for (index_t k0 = 0; k0 < k; k0 += KC) {
        const index_t kc = k - k0 < KC ? k - k0 : KC, vecs = kc / V;
        __syncthreads();  // every warp is done with the previous chunk
        for (index_t e = static_cast<index_t>(threadIdx.x); e < m * vecs; e += warps * 32) {
            const index_t i = e / vecs, j = e % vecs;
            reinterpret_cast<uint4*>(xs + i * KC)[j] = reinterpret_cast<const uint4*>(x + static_cast<std::size_t>(i) * k + k0)[j];
        }
        __syncthreads();
        const index_t v0 = k0 / V;
        for (index_t j0 = lane; j0 < vecs; j0 += 32 * U) {
            // The loads of U strides first (more bytes in flight per warp), then their products in k order.
            uint4 raw[U][R];
#pragma unroll
            for (int u = 0; u < U; ++u)
#pragma unroll
                for (int r = 0; r < R; ++r) raw[u][r] = wv[r] && j0 + 32 * u < vecs ? __ldcs(wv[r] + v0 + j0 + 32 * u) : make_uint4(0, 0, 0, 0);
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const index_t j = j0 + 32 * u;
                if (j >= vecs) break;
                float wf[R][V];
#pragma unroll
                for (int r = 0; r < R; ++r) to_floats<T>(raw[u][r], wf[r]);
#pragma unroll
                for (int i = 0; i < MR; ++i) {
                    if (i >= m) break;
                    float xf[V];
                    to_floats<T>(reinterpret_cast<const uint4*>(xs + i * KC)[j], xf);
#pragma unroll
                    for (int r = 0; r < R; ++r)
#pragma unroll
                        for (int t = 0; t < V; ++t) acc[r][i] = fmaf(wf[r][t], xf[t], acc[r][i]);
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int i = 0; i < MR; ++i) {
            if (i >= m) break;
            float s = acc[r][i];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
            if (lane == 0 && row0 + r < n) {
                float* out = y + static_cast<std::size_t>(i) * n + row0 + r;
                *out = beta == 0.0f ? s : s + beta * *out;
            }
        }
}

template <class T, int MR>
void launch_skinny(const T* x, const T* w, float* y, index_t m, index_t n, index_t k, float beta, cudaStream_t stream) {
    constexpr int R = MR >= 8 ? 4 : 2;  // more weight rows per warp when each weight serves many x rows
    constexpr int U = MR >= 8 ? 2 : 4;  // fewer loads ahead when the accumulators take the registers
    const auto blocks = static_cast<unsigned>((n + skinny_block_rows - 1) / skinny_block_rows);
    skinny_gemm<T, MR, R, U><<<blocks, skinny_block_rows / R * 32, 0, stream>>>(x, w, y, m, n, k, beta);
}

}  // namespace kernels

/// Whether the skinny kernel takes this product: 1 <= m <= skinny_max_rows, k a multiple of the vector
/// width, x and W 16-byte aligned.
template <storage_element T>
[[nodiscard]] bool skinny_applies(index_t m, index_t k, const T* x, const T* w) noexcept {
    return m >= 1 && m <= skinny_max_rows && k > 0 && k % skinny_vector<T> == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0 &&
           reinterpret_cast<std::uintptr_t>(w) % 16 == 0;
}

/// y (+)= x · Wᵀ by the skinny kernel on `stream`. Throws invalid_parameter naming m or k when the kernel
/// does not take the product (see skinny_applies), cuda_error naming `what` when the launch fails.
template <storage_element T>
void skinny_linear(cudaStream_t stream, index_t m, index_t n, index_t k, const T* x, const T* w, float* y, float beta, const char* what) {
    if (m == 0 || n == 0) return;
    if (m < 0 || m > skinny_max_rows)
        throw invalid_parameter("m", std::string("the skinny GEMM (") + what + ") takes 1 to " + std::to_string(skinny_max_rows) + " rows, got " +
                                         std::to_string(m));
    if (!skinny_applies(m, k, x, w))
        throw invalid_parameter("k", std::string("the skinny GEMM (") + what + ") needs k to be a positive multiple of " +
                                         std::to_string(skinny_vector<T>) + " and 16-byte aligned x and W, got k " + std::to_string(k));
    if (m == 1) kernels::launch_skinny<T, 1>(x, w, y, m, n, k, beta, stream);
    else if (m == 2) kernels::launch_skinny<T, 2>(x, w, y, m, n, k, beta, stream);
    else if (m <= 4) kernels::launch_skinny<T, 4>(x, w, y, m, n, k, beta, stream);
    else if (m <= 8) kernels::launch_skinny<T, 8>(x, w, y, m, n, k, beta, stream);
    else kernels::launch_skinny<T, 16>(x, w, y, m, n, k, beta, stream);
    check_launch(std::string("dlm::cuda skinny_gemm (") + what + ", m " + std::to_string(m) + ", n " + std::to_string(n) + ", k " + std::to_string(k) + ")",
                 stream);
}

}  // namespace dlm::cuda
