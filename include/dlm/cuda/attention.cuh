// dlm/cuda/attention.cuh — the masked grouped-query attention of the CUDA transformer: a flash-style
// kernel (online softmax over tiles of keys) templated on the mask policy.
//
// A thread block serves one request, up to 8 window rows (one warp per row) and the query heads of one
// KV group (at most heads_per_block of them; a larger group takes several blocks). It walks the keys
// [0, kmax) in tiles of 32 at absolute positions 0, 32, 64, ...: each tile's keys and values are read
// into shared memory once for every query head of the group — from the window buffers (keys inside
// the plan's window, computed in this forward) or from the request's KV cache (the others) — then lane
// j of every warp scores key t0 + j against its row's query of each head, `mask.allowed(layout, q, k)`
// evaluated inline, bounded by min(attend_end, mask.key_end(layout, q)); the warp updates each head's
// running max, sum and output in turn. A query row's result depends only on its query and the K/V it attends
// to (fixed tiles, fixed order, the same arithmetic per head whatever the group size), not on which
// other rows or heads share its block, nor on whether a key came from the window or the cache.
//
// Keys and values are f32 (KV), as the CPU model keeps them; the output is the next product's input T.
// Masks are evaluated in device code: their `allowed` and `key_end` must be DLM_HOST_DEVICE (every
// shipped mask's are).
#pragma once

#include <cstddef>
#include <limits>
#include <string>

#include <math_constants.h>

#include "../mask/concept.hpp"
#include "element.cuh"
#include "kernels.cuh"
#include "kv_cache.cuh"
#include "runtime.cuh"

namespace dlm::cuda::kernels {

inline constexpr int attention_rows = 8;   ///< query rows (warps) per block
inline constexpr int key_tile = 32;        ///< keys per tile (one per lane)
inline constexpr int heads_per_block = 8;  ///< query heads of one KV group per block (K/V tiles shared by them)
inline constexpr index_t max_head_dim = 256;

/// One block's work: `rows` window rows from `r0` of request `request`.
struct attention_tile {
    index_t request = 0, r0 = 0;
};

__device__ inline float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ inline float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/// Query heads one block serves for a group of `group` query heads per KV head.
[[nodiscard]] __host__ __device__ constexpr index_t heads_in_block(index_t group) noexcept { return group < heads_per_block ? group : heads_per_block; }

/// Shared memory of one block: the rows' queries of its heads, a key tile (rows padded by one float:
/// lane j reads row j without bank conflicts) and a value tile.
[[nodiscard]] constexpr std::size_t attention_smem_bytes(index_t head_dim, index_t group) noexcept {
    return sizeof(float) * (static_cast<std::size_t>(attention_rows) * heads_in_block(group) * head_dim +
                            static_cast<std::size_t>(key_tile) * (head_dim + 1) + static_cast<std::size_t>(key_tile) * head_dim);
}

/// DPL: head dimensions per lane (head_dim <= 32 · DPL). Grid: (tiles, kv_heads · blocks per group).
template <class Mask, class KV, class T, int DPL>
__global__ void __launch_bounds__(attention_rows * 32)
    attention(Mask mask, const sequence_view<KV>* __restrict__ seqs, const attention_tile* __restrict__ tiles, const float* __restrict__ qkv,
              qkv_shape s, const KV* __restrict__ k_win, const KV* __restrict__ v_win, index_t layer, float scale, T* __restrict__ out) {
    extern __shared__ float smem[];
    const float neg_inf = -CUDART_INF_F;
    const index_t D = s.head_dim, group = s.heads / s.kv_heads, hpb = heads_in_block(group);
    const index_t per_group = (group + hpb - 1) / hpb;  // blocks per KV group
    const index_t g = static_cast<index_t>(blockIdx.y) / per_group;
    const index_t h0 = g * group + (static_cast<index_t>(blockIdx.y) % per_group) * hpb;
    const index_t nh = (g + 1) * group - h0 < hpb ? (g + 1) * group - h0 : hpb;  // heads of this block
    float* q_s = smem;  // [warp][head][D]
    float* k_s = q_s + attention_rows * hpb * D;
    float* v_s = k_s + key_tile * (D + 1);
    __shared__ index_t kend_s[attention_rows];

    const attention_tile tile = tiles[blockIdx.x];
    const sequence_view<KV>& sv = seqs[tile.request];
    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    const index_t wb = sv.plan.window_begin, we = sv.plan.window_end;
    const index_t r = tile.r0 + warp;
    const bool active = r < we - wb;
    const index_t qpos = wb + r;

    index_t kend = 0;
    if (active) {
        const index_t e = mask.key_end(sv.layout, qpos);
        kend = e < sv.plan.attend_end ? e : sv.plan.attend_end;
        const float* q = qkv + static_cast<std::size_t>(sv.row0 + r) * s.ld() + h0 * D;
        for (index_t d = lane; d < nh * D; d += 32) q_s[warp * hpb * D + d] = q[d];
    }
    if (lane == 0) kend_s[warp] = kend;
    __syncthreads();
    index_t kmax = 0;
    for (int w = 0; w < attention_rows; ++w) kmax = kend_s[w] > kmax ? kend_s[w] : kmax;

    const std::size_t slab = static_cast<std::size_t>(sv.capacity) * D;
    const KV* k_cache = sv.keys ? sv.keys + (static_cast<std::size_t>(layer) * s.kv_heads + g) * slab : nullptr;
    const KV* v_cache = sv.values ? sv.values + (static_cast<std::size_t>(layer) * s.kv_heads + g) * slab : nullptr;
    const index_t kv_dim = s.kv_dim();

    // Per head of the block: running max, sum and output, kept per thread between tiles (local memory:
    // the head loop is not unrolled, to keep the kernel small) and in registers while a head is worked on.
    float m_h[heads_per_block], l_h[heads_per_block], acc_h[heads_per_block * DPL];
    for (int hh = 0; hh < heads_per_block; ++hh) {
        m_h[hh] = neg_inf;
        l_h[hh] = 0.0f;
        for (int i = 0; i < DPL; ++i) acc_h[hh * DPL + i] = 0.0f;
    }

    for (index_t t0 = 0; t0 < kmax; t0 += key_tile) {
        __syncthreads();  // every warp is done with the previous tile
        for (index_t e = static_cast<index_t>(threadIdx.x); e < key_tile * D; e += attention_rows * 32) {
            const index_t j = e / D, d = e % D, k = t0 + j;
            float kv = 0.0f, vv = 0.0f;
            if (k < kmax) {
                if (k >= wb && k < we) {
                    const std::size_t at = static_cast<std::size_t>(sv.row0 + k - wb) * kv_dim + g * D + d;
                    kv = k_win[at];
                    vv = v_win[at];
                } else if (k_cache) {
                    const std::size_t at = static_cast<std::size_t>(k) * D + d;
                    kv = k_cache[at];
                    vv = v_cache[at];
                }
            }
            k_s[j * (D + 1) + d] = kv;
            v_s[j * D + d] = vv;
        }
        __syncthreads();
        if (t0 >= kend) continue;  // uniform across the warp

        const index_t k = t0 + lane;
        const bool allowed = k < kend && mask.allowed(sv.layout, qpos, k);
        const float* kr = k_s + lane * (D + 1);
#pragma unroll 1
        for (index_t hh = 0; hh < nh; ++hh) {
            float score = neg_inf;
            if (allowed) {
                const float* q = q_s + (warp * hpb + hh) * D;
                float dot = 0.0f;
                for (index_t d = 0; d < D; ++d) dot = fmaf(q[d], kr[d], dot);
                score = dot * scale;
            }
            const float tile_max = warp_max(score);
            if (tile_max == neg_inf) continue;
            const float m = m_h[hh];
            const float m_new = fmaxf(m, tile_max);
            const float correction = m == neg_inf ? 0.0f : expf(m - m_new);
            const float p = score == neg_inf ? 0.0f : expf(score - m_new);
            l_h[hh] = l_h[hh] * correction + warp_sum(p);
            float acc[DPL];
#pragma unroll
            for (int i = 0; i < DPL; ++i) acc[i] = acc_h[hh * DPL + i] * correction;
            for (int j = 0; j < key_tile; ++j) {
                const float pj = __shfl_sync(0xffffffffu, p, j);
                if (pj == 0.0f) continue;
                const float* vr = v_s + j * D;
#pragma unroll
                for (int i = 0; i < DPL; ++i) {
                    const index_t d = lane + 32 * i;
                    if (d < D) acc[i] = fmaf(pj, vr[d], acc[i]);
                }
            }
#pragma unroll
            for (int i = 0; i < DPL; ++i) acc_h[hh * DPL + i] = acc[i];
            m_h[hh] = m_new;
        }
    }
    if (!active) return;
    for (index_t hh = 0; hh < nh; ++hh) {
        const float inv = l_h[hh] > 0.0f ? 1.0f / l_h[hh] : 0.0f;  // no key allowed: output zero, as on the CPU
        T* o = out + static_cast<std::size_t>(sv.row0 + r) * s.q_dim() + (h0 + hh) * D;
#pragma unroll
        for (int i = 0; i < DPL; ++i) {
            const index_t d = lane + 32 * i;
            if (d < D) o[d] = to_product_input<T>(acc_h[hh * DPL + i] * inv);
        }
    }
}

template <class Mask, class KV, class T, int DPL>
void launch_attention(const Mask& mask, const sequence_view<KV>* seqs, const attention_tile* tiles, index_t n_tiles, const float* qkv,
                      qkv_shape s, const KV* k_win, const KV* v_win, index_t layer, T* out, cudaStream_t stream) {
    const index_t group = s.heads / s.kv_heads, hpb = heads_in_block(group);
    const std::size_t smem = attention_smem_bytes(s.head_dim, group);
    auto kernel = attention<Mask, KV, T, DPL>;
    if (smem > 48 * 1024)
        check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
              "cudaFuncSetAttribute (attention shared memory)");
    const float scale = 1.0f / sqrtf(static_cast<float>(s.head_dim));
    const auto blocks_per_group = static_cast<unsigned>((group + hpb - 1) / hpb);
    kernel<<<dim3(static_cast<unsigned>(n_tiles), static_cast<unsigned>(s.kv_heads) * blocks_per_group), attention_rows * 32, smem, stream>>>(
        mask, seqs, tiles, qkv, s, k_win, v_win, layer, scale, out);
    check_launch("dlm::cuda attention (layer " + std::to_string(layer) + ")", stream);
}

/// Runs the attention of every tile for every query head, writing the heads' outputs (rows of q_dim,
/// in T) into `out`. head_dim must be at most max_head_dim (checked when the model is made).
template <attention_mask Mask, class KV, class T>
void run_attention(const Mask& mask, const sequence_view<KV>* seqs, const attention_tile* tiles, index_t n_tiles, const float* qkv,
                   qkv_shape s, const KV* k_win, const KV* v_win, index_t layer, T* out, cudaStream_t stream) {
    if (n_tiles == 0) return;
    if (s.head_dim <= 32) launch_attention<Mask, KV, T, 1>(mask, seqs, tiles, n_tiles, qkv, s, k_win, v_win, layer, out, stream);
    else if (s.head_dim <= 64) launch_attention<Mask, KV, T, 2>(mask, seqs, tiles, n_tiles, qkv, s, k_win, v_win, layer, out, stream);
    else if (s.head_dim <= 128) launch_attention<Mask, KV, T, 4>(mask, seqs, tiles, n_tiles, qkv, s, k_win, v_win, layer, out, stream);
    else launch_attention<Mask, KV, T, 8>(mask, seqs, tiles, n_tiles, qkv, s, k_win, v_win, layer, out, stream);
}

}  // namespace dlm::cuda::kernels
