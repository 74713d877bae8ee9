// dlm/cuda/tc_gemm.cuh — the linear layers for 1 to 64 rows (decoding steps, CDLM blocks) on tensor
// cores: a bandwidth-bound kernel that streams each weight once and multiplies it by every row of x with
// mma.sync (m16n8k16, bf16 or f16 inputs, f32 accumulation).
//
//   y[m × n] (f32) = x[m × k] (T) · W[n × k]ᵀ (T) + beta · y,   1 <= m <= tc_max_rows, T bf16 or f16
//
// Layout as gemm.cuh (row-major, W as Hugging Face stores it). The product is computed transposed,
// yᵀ = W · xᵀ: W is the mma's A operand (16 weight rows a tile), x its B operand (8 x rows a tile), so
// a weight is read once for up to 64 rows of x, which ride in the mma's narrow dimension.
//
// A block owns tc_block_rows (128) weight rows, a 16-row A tile per warp, and one of `splits` equal
// ranges of k. It walks its range in chunks of tc_chunk (128) elements: the chunk of x (every row, zeros
// past m) is copied into shared memory once for the 8 warps (cp.async, double-buffered), so x is read
// from L2 once per 128 weight rows (a first version with 16 rows a block and x loaded by every warp was
// bound by L2 traffic: 5x the weight bytes at 64 rows); the weights are read straight into registers
// with 16-byte evict-first loads, the next chunk's issued before the current one is multiplied. Within
// each 32-element group, lane (g, q) = (lane / 4, lane % 4) loads elements 8q..8q+7 of weight rows g
// and g + 8 and of x row g of each B tile, and these 16 bytes ARE its mma fragments for the group's two
// k-steps: the mma's logical k index 2q + e (e in {0, 1}) of step s is the element 8q + 4s + e, and
// 2q + 8 + e is 8q + 4s + 2 + e, for A and B alike. The mmas go round-robin over the B tiles, so that
// consecutive ones do not wait on each other.
//
// Split-K: products with too few row blocks to fill the GPU (q/k/v, o, down of a 7B model) split k over
// a thread-block cluster of up to 8 blocks (Hopper); each block leaves its partial sums in its shared
// memory and the cluster adds them in rank order through distributed shared memory, each block writing
// a share of y. The number of splits depends on n, k and the device's multiprocessor count only.
//
// Determinism: each output is the sum, in split order, of each split's accumulation in increasing k
// (with the fixed permutation inside each group and the mma's own order within a 16-element step); none
// of it depends on m, on the B tile a row sits in or on the number of tiles (the mma's columns are
// independent; rows past m are zeros and are not stored; groups past k are skipped, not added as zero).
// So a row's result is bit for bit the same alone or in any batch of up to 64 rows (tested), and the
// kernel chosen never depends on m within that range.
//
// Needs k to be a multiple of 8 (16 bytes of T) and x, W 16-byte aligned (tc_applies); tc_linear throws
// invalid_parameter otherwise, and the dispatcher (gemm.cuh) falls back to cuBLAS.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include <cooperative_groups.h>

#include "../core/error.hpp"
#include "element.cuh"
#include "gemm_path.cuh"
#include "runtime.cuh"

namespace dlm::cuda {

/// Warps per block; each owns one 16-row A tile.
inline constexpr int tc_warps = 8;
/// Weight rows per block.
inline constexpr index_t tc_block_rows = 16 * tc_warps;
/// Elements of k a block multiplies per step (four 32-element groups); split ranges are multiples of it.
inline constexpr index_t tc_chunk = 128;
/// The most blocks one product's k is split over (a portable cluster size).
inline constexpr int tc_max_splits = 8;

/// Whether T has a tensor-core kernel here: bf16 and f16 (f32 products stay on cuBLAS, which runs them
/// without TF32).
template <class T>
inline constexpr bool tc_element = std::is_same_v<T, bf16> || std::is_same_v<T, f16>;

/// How a product's k is split: `splits` ranges of `span` elements (the last may be shorter).
struct tc_split {
    int splits = 1;
    index_t span = 0;
};

/// The split for n outputs and k inputs on a device of `multiprocessors`: enough blocks for about two per
/// multiprocessor, at most tc_max_splits, ranges whole chunks. Depends on n, k and the device alone.
[[nodiscard]] constexpr tc_split tc_split_for(index_t n, index_t k, int multiprocessors) noexcept {
    const index_t blocks = (n + tc_block_rows - 1) / tc_block_rows, chunks = (k + tc_chunk - 1) / tc_chunk;
    index_t want = 2 * static_cast<index_t>(multiprocessors) / (blocks > 0 ? blocks : 1);
    want = want < 1 ? 1 : want > tc_max_splits ? tc_max_splits : want;
    want = want > chunks ? chunks : want;
    const index_t per = (chunks + want - 1) / want;  // chunks per split
    return {static_cast<int>((chunks + per - 1) / per), per * tc_chunk};
}

namespace kernels {

template <class T>
__device__ inline void mma_16816(float (&c)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2, std::uint32_t a3, std::uint32_t b0,
                                 std::uint32_t b1) {
    if constexpr (std::is_same_v<T, bf16>)
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    else
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/// 16 bytes from global to shared memory, asynchronously; zeros when !ok (nothing is read then).
__device__ inline void copy_async_16(void* shared, const void* global, bool ok) {
    const auto to = static_cast<unsigned>(__cvta_generic_to_shared(shared));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(global), "r"(ok ? 16 : 0) : "memory");
}
__device__ inline void copy_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int Pending>
__device__ inline void copy_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
}

/// Bytes of one staged x row: a chunk, padded by 64 bytes so that the 8 rows a quarter-warp reads fall in
/// distinct banks.
inline constexpr int tc_x_row_bytes = static_cast<int>(tc_chunk) * 2 + 64;

/// Shared memory of a block for NT B tiles: two x chunks, later reused for the partial sums.
template <int NT>
inline constexpr int tc_shared_bytes = 2 * 8 * NT * tc_x_row_bytes;
static_assert(tc_shared_bytes<8> >= tc_warps * 8 * 4 * 32 * 4, "the partial sums fit where the x chunks were");
static_assert(tc_shared_bytes<8> <= 48 * 1024, "a block's shared memory needs no opt-in");

/// One block's state: its rows, its k range and the x staging buffers.
template <class T, int NT>
struct tc_block {
    const T* x;
    index_t m, k, k_begin, k_end;
    unsigned char* xs;  // [2][8·NT][tc_x_row_bytes]

    /// Stages x's chunk at kb (rows past m and elements past k_end as zeros) into buffer `buf`.
    __device__ void stage(int buf, index_t kb) const {
        constexpr int pieces = 8 * NT * static_cast<int>(tc_chunk / 8);
        for (int p = static_cast<int>(threadIdx.x); p < pieces; p += tc_warps * 32) {
            const int r = p / static_cast<int>(tc_chunk / 8), c = p % static_cast<int>(tc_chunk / 8);
            const index_t at = kb + 8 * c;
            const bool ok = r < m && at < k_end;
            copy_async_16(xs + (buf * 8 * NT + r) * tc_x_row_bytes + 16 * c, ok ? x + static_cast<std::size_t>(r) * k + at : x, ok);
        }
    }
};

/// Loads this lane's weights of the chunk at kb: rows g and g + 8, elements kb + 32i + 8q .. + 8.
template <class T>
__device__ inline void load_weights(uint4 (&a)[4][2], const T* const (&wr)[2], const bool (&ok)[2], index_t kb, index_t k_end, int q) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const index_t at = kb + 32 * i + 8 * q;
#pragma unroll
        for (int h = 0; h < 2; ++h) a[i][h] = ok[h] && at < k_end ? __ldcs(reinterpret_cast<const uint4*>(wr[h] + at)) : make_uint4(0, 0, 0, 0);
    }
}

/// Multiplies the chunk at kb: weights `a` (registers) by the staged x rows `xs` (one buffer).
template <class T, int NT>
__device__ inline void multiply_chunk(float (&acc)[NT][4], const uint4 (&a)[4][2], const unsigned char* xs, index_t kb, index_t k_end, int g, int q) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        if (kb + 32 * i >= k_end) break;  // block-uniform: groups past the range add nothing, not even a zero
        uint4 b[NT];
#pragma unroll
        for (int j = 0; j < NT; ++j) b[j] = *reinterpret_cast<const uint4*>(xs + (8 * j + g) * tc_x_row_bytes + 2 * (32 * i + 8 * q));
#pragma unroll
        for (int j = 0; j < NT; ++j)  // k-step 0: elements 8q + {0, 1} and 8q + {2, 3}
            mma_16816<T>(acc[j], a[i][0].x, a[i][1].x, a[i][0].y, a[i][1].y, b[j].x, b[j].y);
#pragma unroll
        for (int j = 0; j < NT; ++j)  // k-step 1: elements 8q + {4, 5} and 8q + {6, 7}
            mma_16816<T>(acc[j], a[i][0].z, a[i][1].z, a[i][0].w, a[i][1].w, b[j].z, b[j].w);
    }
}

/// y (+)= the output of accumulator e of B tile j of this lane: weight row `col` (+ 8 for e >= 2), x row
/// 8j + 2q + (e & 1).
__device__ inline void store_output(float* y, index_t m, index_t n, index_t col, int j, int q, int e, float s, float beta) {
    const index_t c = col + (e >= 2 ? 8 : 0), r = 8 * j + 2 * q + (e & 1);
    if (c < n && r < m) {
        float* o = y + static_cast<std::size_t>(r) * n + c;
        *o = beta == 0.0f ? s : __fadd_rn(s, __fmul_rn(beta, *o));
    }
}

/// NT: B tiles (x rows <= 8·NT). Grid: (splits, row blocks), clusters of (splits, 1) when splits > 1.
template <class T, int NT>
__global__ void __launch_bounds__(tc_warps * 32, 2)
    tc_gemm(const T* __restrict__ x, const T* __restrict__ w, float* __restrict__ y, index_t m, index_t n, index_t k, float beta, index_t span) {
    extern __shared__ __align__(16) unsigned char tc_shared[];
    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32, g = lane / 4, q = lane % 4;
    const index_t col0 = static_cast<index_t>(blockIdx.y) * tc_block_rows + 16 * warp;  // this warp's A tile
    const index_t k_begin = static_cast<index_t>(blockIdx.x) * span, k_end = k_begin + span < k ? k_begin + span : k;
    const tc_block<T, NT> blk{x, m, k, k_begin, k_end, tc_shared};
    const T* wr[2];
    bool wok[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const index_t r = col0 + g + 8 * h;
        wok[h] = r < n;
        wr[h] = w + static_cast<std::size_t>(wok[h] ? r : 0) * k;  // load_weights adds the lane's 8q
    }

    float acc[NT][4] = {};
    uint4 a[4][2], next[4][2];
    load_weights(a, wr, wok, k_begin, k_end, q);
    blk.stage(0, k_begin);
    copy_async_commit();
    const index_t chunks = (k_end - k_begin + tc_chunk - 1) / tc_chunk;
    for (index_t c = 0; c < chunks; ++c) {
        const index_t kb = k_begin + c * tc_chunk;
        if (c + 1 < chunks) {  // the next chunk's loads go out before this one is multiplied
            load_weights(next, wr, wok, kb + tc_chunk, k_end, q);
            blk.stage(static_cast<int>((c + 1) % 2), kb + tc_chunk);
        }
        copy_async_commit();
        copy_async_wait<1>();  // this chunk's x is in shared memory (for this thread's copies)
        __syncthreads();       // ... and for every thread's
        multiply_chunk<T, NT>(acc, a, tc_shared + (c % 2) * 8 * NT * tc_x_row_bytes, kb, k_end, g, q);
        __syncthreads();  // every warp is done with this buffer before the next step refills it
        if (c + 1 < chunks)
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int h = 0; h < 2; ++h) a[i][h] = next[i][h];
    }

    if (gridDim.x == 1) {
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) store_output(y, m, n, col0 + g, j, q, e, acc[j][e], beta);
        return;
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    // Split-K: the cluster's blocks add their partial sums in rank order; block r writes outputs r, r + splits, ...
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    float* partial = reinterpret_cast<float*>(tc_shared);  // [warp][j][e][lane]; the x buffers are no longer read
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) partial[((warp * NT + j) * 4 + e) * 32 + lane] = acc[j][e];
    cluster.sync();
    const int splits = static_cast<int>(gridDim.x), rank = static_cast<int>(cluster.block_rank());
    for (int at = static_cast<int>(threadIdx.x) + rank * tc_warps * 32; at < tc_warps * NT * 4 * 32; at += splits * tc_warps * 32) {
        float s = cluster.map_shared_rank(partial, 0)[at];
        for (int r = 1; r < splits; ++r) s = __fadd_rn(s, cluster.map_shared_rank(partial, r)[at]);
        const int l = at % 32, e = (at / 32) % 4, j = (at / 128) % NT, wp = at / (128 * NT);
        store_output(y, m, n, static_cast<index_t>(blockIdx.y) * tc_block_rows + 16 * wp + l / 4, j, l % 4, e, s, beta);
    }
    cluster.sync();  // no block leaves while another reads its shared memory
#else
    __trap();  // split-K needs clusters (sm_90); tc_linear splits only on such devices
#endif
}

template <class T, int NT>
void launch_tc(const T* x, const T* w, float* y, index_t m, index_t n, index_t k, float beta, tc_split split, cudaStream_t stream) {
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(static_cast<unsigned>(split.splits), static_cast<unsigned>((n + tc_block_rows - 1) / tc_block_rows));
    config.blockDim = dim3(tc_warps * 32);
    config.dynamicSmemBytes = tc_shared_bytes<NT>;
    config.stream = stream;
    cudaLaunchAttribute cluster{};
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = static_cast<unsigned>(split.splits);
    cluster.val.clusterDim.y = 1;
    cluster.val.clusterDim.z = 1;
    config.attrs = &cluster;
    config.numAttrs = split.splits > 1 ? 1 : 0;
    check(cudaLaunchKernelEx(&config, tc_gemm<T, NT>, x, w, y, m, n, k, beta, split.span), "cudaLaunchKernelEx (dlm::cuda tc_gemm)");
}

}  // namespace kernels

/// Whether the tensor-core kernel takes this product: T bf16 or f16, 1 <= m <= tc_max_rows, k a positive
/// multiple of 8, x and W 16-byte aligned.
template <storage_element T>
[[nodiscard]] bool tc_applies(index_t m, index_t k, const T* x, const T* w) noexcept {
    return tc_element<T> && m >= 1 && m <= tc_max_rows && k > 0 && k % 8 == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0 &&
           reinterpret_cast<std::uintptr_t>(w) % 16 == 0;
}

/// The split tc_linear uses on the current device: tc_split_for with its multiprocessors, and no split
/// on a device without thread-block clusters (compute capability below 9.0). The device's figures are
/// asked once per device, not once per product.
[[nodiscard]] inline tc_split tc_device_split(index_t n, index_t k) {
    static std::atomic<int> cluster_multiprocessors[64];  // per device: 0 unknown, -1 no clusters
    int device = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    std::atomic<int>* known = device >= 0 && device < 64 ? &cluster_multiprocessors[device] : nullptr;
    int sms = known ? known->load(std::memory_order_relaxed) : 0;
    if (sms == 0) {
        int major = 0;
        check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute (compute capability)");
        sms = major < 9 ? -1 : multiprocessor_count();
        if (known) known->store(sms, std::memory_order_relaxed);
    }
    return sms < 0 ? tc_split{1, k} : tc_split_for(n, k, sms);
}

/// y (+)= x · Wᵀ by the tensor-core kernel on `stream`. Throws invalid_parameter naming T, m or k when the
/// kernel does not take the product (see tc_applies), cuda_error naming `what` when the launch fails.
template <storage_element T>
void tc_linear(cudaStream_t stream, index_t m, index_t n, index_t k, const T* x, const T* w, float* y, float beta, const char* what) {
    if (m == 0 || n == 0) return;
    if constexpr (!tc_element<T>) {
        throw invalid_parameter("T", std::string("the tensor-core GEMM (") + what + ") takes bf16 or f16 inputs, got " + std::string(element<T>::name));
    } else {
        if (m < 0 || m > tc_max_rows)
            throw invalid_parameter("m", std::string("the tensor-core GEMM (") + what + ") takes 1 to " + std::to_string(tc_max_rows) + " rows, got " +
                                             std::to_string(m));
        if (!tc_applies(m, k, x, w))
            throw invalid_parameter("k", std::string("the tensor-core GEMM (") + what +
                                             ") needs k to be a positive multiple of 8 and 16-byte aligned x and W, got k " + std::to_string(k));
        const tc_split split = tc_device_split(n, k);
        switch ((m + 7) / 8) {  // B tiles: the same sums whatever their number
        case 1: kernels::launch_tc<T, 1>(x, w, y, m, n, k, beta, split, stream); break;
        case 2: kernels::launch_tc<T, 2>(x, w, y, m, n, k, beta, split, stream); break;
        case 3: kernels::launch_tc<T, 3>(x, w, y, m, n, k, beta, split, stream); break;
        case 4: kernels::launch_tc<T, 4>(x, w, y, m, n, k, beta, split, stream); break;
        case 5: kernels::launch_tc<T, 5>(x, w, y, m, n, k, beta, split, stream); break;
        case 6: kernels::launch_tc<T, 6>(x, w, y, m, n, k, beta, split, stream); break;
        case 7: kernels::launch_tc<T, 7>(x, w, y, m, n, k, beta, split, stream); break;
        default: kernels::launch_tc<T, 8>(x, w, y, m, n, k, beta, split, stream); break;
        }
        check_launch(std::string("dlm::cuda tc_gemm (") + what + ", m " + std::to_string(m) + ", n " + std::to_string(n) + ", k " + std::to_string(k) +
                         ", " + std::to_string(split.splits) + " splits)",
                     stream);
    }
}

}  // namespace dlm::cuda
