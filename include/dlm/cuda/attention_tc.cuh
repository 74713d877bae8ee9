// dlm/cuda/attention_tc.cuh — the attention on tensor cores: the same tiles, masks, splits and merge as
// the CUDA-core kernel (attention.cuh), with the scores Q·Kᵀ and the weighted sum P·V computed by
// mma.sync m16n8k8 in TF32 (f32 accumulation).
//
// A block serves the same work as the CUDA-core kernel's: one tile of up to 8 window rows of a request,
// the query heads of one KV group (at most 8) and one split of the key tiles. Its (row, head) pairs,
// pair p = row p % rows, head p / rows (at most 64), are the rows of four 16-row mma tiles, one per
// warp; lane (g, t) = (lane / 4, lane % 4) holds the queries of pairs 16w + g and 16w + g + 8 as its A
// fragments for the whole walk (read once from the q/k/v rows, rounded to TF32). Per tile of 32 keys,
// read into shared memory by all four warps (load_kv_tile, rounded to TF32; rows padded by 4 floats,
// so that the fragments' reads hit 32 banks), a warp computes its 16 × 32 scores in four 8-key tiles,
// masks them (each row's bits for the tile, evaluated once per (row, key) by the block and packed by
// ballots: tc_row_masks), and updates each pair's running max, sum and output
// as the CUDA-core kernel does: the tile's max and sum per pair over the quad of lanes that hold its
// scores (shuffles across lanes t, fixed order); then P (the probabilities, rounded to TF32) times V.
// The scores' accumulator layout gives lane t keys 2t and 2t + 1 of each 8-key tile, which is the A
// operand of P·V when the mma's k index t stands for key 2t and t + 4 for key 2t + 1: V's B fragments
// are read from those keys' rows, so P never leaves the registers.
//
// Numerics: queries, keys, probabilities and values are rounded to TF32 (10 stored mantissa bits, 8 times
// finer than bf16's 7); sums and the softmax are f32. So it is for models whose product inputs are
// bf16 or f16 (attention_path.cuh): docs/determinism.md bounds the change against the CUDA-core kernel.
// Determinism: a pair's scores and output are sums over its own query and the keys alone (an mma's
// output element does not depend on the other rows of its tile), in an order fixed by the key tiles and
// the split, so a row's result is the same bits whatever other rows or heads share its block, whether
// a key came from the window or the cache, alone or in a batch (for the same number of splits).
//
// Head sizes 32, 64 and 128 (DPL = head_dim / 32 of 1, 2, 4: 4·DPL mma k-steps of 8 and output tiles of
// 8 dimensions); other sizes run the CUDA-core kernel (tc_attention_applies).
#pragma once

#include <cstdint>
#include <string>

#include <math_constants.h>

#include "attention.cuh"

namespace dlm::cuda::kernels {

inline constexpr int tc_attention_warps = 4;  ///< one 16-pair mma tile each
static_assert(tc_attention_warps * 16 == attention_rows * heads_per_block, "the tensor-core attention's warps must cover a block's pairs");
inline constexpr index_t tc_attention_pad = 4;  ///< floats after each key's row in shared memory (bank-conflict-free fragment reads)

/// Shared memory of a block: one key tile and one value tile of rows head_dim + tc_attention_pad.
[[nodiscard]] constexpr std::size_t tc_attention_smem_bytes(index_t head_dim) noexcept {
    return sizeof(float) * 2 * static_cast<std::size_t>(key_tile) * static_cast<std::size_t>(head_dim + tc_attention_pad);
}

__device__ inline std::uint32_t tf32_bits(float x) { return __float_as_uint(round_tf32(x)); }

/// c += a · b for a 16 × 8 A tile (a0: row g, k t; a1: row g + 8, k t; a2: row g, k t + 4; a3: row g + 8,
/// k t + 4) and an 8 × 8 B tile (b0: k t, column g; b1: k t + 4, column g), TF32 inputs, f32 c (c0, c1:
/// row g, columns 2t and 2t + 1; c2, c3: row g + 8).
__device__ inline void mma_tf32(float (&c)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2, std::uint32_t a3, std::uint32_t b0,
                                std::uint32_t b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/// A lane's two pairs (half 0: mma row g, half 1: row g + 8): their query row in q/k/v (null past the
/// block's pairs), window row, head and row within the tile.
struct tc_pairs {
    const float* q[2];
    index_t row[2], head[2], tile_row[2];
};

/// For the tile of keys t0 .. t0 + 31: bit j of allowed_s[r] says whether row r of the block's tile may
/// attend to key t0 + j (the row's key end and `mask.allowed`; 0 past the tile's rows). Warp w of
/// `warps` evaluates rows w, w + warps, ..., a key per lane, and packs them with a ballot: 8 · 32
/// evaluations a tile for the block, not one per (pair, key).
template <class Mask, class KV>
__device__ __forceinline__ void tc_row_masks(const Mask& mask, const sequence_view<KV>& sv, index_t r0, index_t rows, const index_t* kend_s,
                                             index_t t0, int warps, int warp, int lane, std::uint32_t* allowed_s) {
    const index_t k = t0 + lane;
    for (int r = warp; r < attention_rows; r += warps) {
        const bool ok = r < rows && k < kend_s[r] && mask.allowed(sv.layout, sv.plan.window_begin + r0 + r, k);
        const std::uint32_t bits = __ballot_sync(0xffffffffu, ok);
        if (lane == 0) allowed_s[r] = bits;
    }
}

/// The scores of a warp's 16 pairs against the tile's 32 keys (k_s rows `stride` apart), unscaled:
/// sc[j] is key tile j (keys 8j .. 8j + 7) in the accumulator layout.
template <int DPL>
__device__ __forceinline__ void tc_scores(const std::uint32_t (&qf)[4 * DPL][4], const float* k_s, index_t stride, int gq, int tq,
                                          float (&sc)[key_tile / 8][4]) {
#pragma unroll
    for (int j = 0; j < key_tile / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) sc[j][e] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < 4 * DPL; ++ks)
#pragma unroll
        for (int j = 0; j < key_tile / 8; ++j) {
            const float* kr = k_s + (8 * j + gq) * stride + 8 * ks + tq;
            mma_tf32(sc[j], qf[ks][0], qf[ks][1], qf[ks][2], qf[ks][3], __float_as_uint(kr[0]), __float_as_uint(kr[4]));
        }
}

/// One tile's online-softmax update of a lane's two pairs: masks (`allowed`: the pairs' rows' bits from
/// tc_row_masks) and scales the scores, takes the tile's max and sum per pair over the lane's quad,
/// rescales the output o (dims 8n + 2t, 8n + 2t + 1 per pair half) and leaves the probabilities in sc.
template <int DPL>
__device__ __forceinline__ void tc_softmax(const std::uint32_t (&allowed)[2], float scale, int tq, float (&sc)[key_tile / 8][4], float (&m)[2],
                                           float (&l)[2], float (&o)[4 * DPL][4]) {
    const float neg_inf = -CUDART_INF_F;
    float tile_max[2] = {neg_inf, neg_inf};
#pragma unroll
    for (int j = 0; j < key_tile / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int h = e / 2;
            const bool ok = (allowed[h] >> (8 * j + 2 * tq + e % 2)) & 1u;
            sc[j][e] = ok ? sc[j][e] * scale : neg_inf;
            tile_max[h] = fmaxf(tile_max[h], sc[j][e]);
        }
    float corr[2], m_new[2], sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
        const bool none = tile_max[h] == neg_inf;  // no key of the tile allowed: the pair's state stays
        m_new[h] = none ? m[h] : fmaxf(m[h], tile_max[h]);
        corr[h] = none ? 1.0f : (m[h] == neg_inf ? 0.0f : expf(m[h] - m_new[h]));
    }
#pragma unroll
    for (int j = 0; j < key_tile / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int h = e / 2;
            sc[j][e] = sc[j][e] == neg_inf ? 0.0f : expf(sc[j][e] - m_new[h]);
            sum[h] += sc[j][e];
        }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 1);
        sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);
        l[h] = l[h] * corr[h] + sum[h];
        m[h] = m_new[h];
    }
#pragma unroll
    for (int n = 0; n < 4 * DPL; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[n][e] *= corr[e / 2];
}

/// o += P · V over the tile's 32 keys (v_s rows `stride` apart); P in sc (the accumulator layout of
/// tc_scores): for key tile c, the mma's k index t is key 8c + 2t and t + 4 is key 8c + 2t + 1.
template <int DPL>
__device__ __forceinline__ void tc_weighted_values(const float (&sc)[key_tile / 8][4], const float* v_s, index_t stride, int gq, int tq,
                                                   float (&o)[4 * DPL][4]) {
#pragma unroll
    for (int c = 0; c < key_tile / 8; ++c) {
        const std::uint32_t a0 = tf32_bits(sc[c][0]), a1 = tf32_bits(sc[c][2]), a2 = tf32_bits(sc[c][1]), a3 = tf32_bits(sc[c][3]);
        const float* v0 = v_s + (8 * c + 2 * tq) * stride + gq;
#pragma unroll
        for (int n = 0; n < 4 * DPL; ++n) mma_tf32(o[n], a0, a1, a2, a3, __float_as_uint(v0[8 * n]), __float_as_uint(v0[stride + 8 * n]));
    }
}

/// A lane's two pairs' results: normalized output with one split, else split z's partial result.
template <int DPL, class KV, class T>
__device__ __forceinline__ void tc_write(const attention_args<KV, T>& a, const tc_pairs& pr, index_t z, const float (&m)[2], const float (&l)[2],
                                         const float (&o)[4 * DPL][4], int tq) {
    const qkv_shape s = a.s;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        if (!pr.q[h]) continue;
        const auto row = static_cast<std::size_t>(pr.row[h]), head = static_cast<std::size_t>(pr.head[h]);
        if (a.splits == 1) {
            const float inv = l[h] == 0.0f ? 0.0f : 1.0f / l[h];  // no key allowed: output zero, as on the CPU (a NaN sum stays NaN)
            T* out = a.out + row * static_cast<std::size_t>(s.q_dim()) + head * static_cast<std::size_t>(s.head_dim);
#pragma unroll
            for (int n = 0; n < 4 * DPL; ++n) {
                out[8 * n + 2 * tq] = to_product_input<T>(o[n][2 * h] * inv);
                out[8 * n + 2 * tq + 1] = to_product_input<T>(o[n][2 * h + 1] * inv);
            }
        } else {
            float* part = partial_at(a.partial, s, row, head, z, a.splits);
            if (tq == 0) {
                part[0] = m[h];
                part[1] = l[h];
            }
#pragma unroll
            for (int n = 0; n < 4 * DPL; ++n) {
                part[2 + 8 * n + 2 * tq] = o[n][2 * h];
                part[3 + 8 * n + 2 * tq] = o[n][2 * h + 1];
            }
        }
    }
}

/// Grid as the CUDA-core kernel's (attention_grid); tc_attention_warps warps. head_dim = 32 · DPL.
template <class Mask, class KV, class T, int DPL>
__global__ void __launch_bounds__(tc_attention_warps * 32) attention_tc(Mask mask, attention_args<KV, T> a) {
    extern __shared__ float smem[];
    constexpr int steps = 4 * DPL;  // 8-dimension steps of a head
    const float neg_inf = -CUDART_INF_F;
    const qkv_shape s = a.s;
    constexpr index_t D = 32 * DPL, stride = D + tc_attention_pad;  // s.head_dim == D (run_attention)
    const index_t z = static_cast<index_t>(blockIdx.z);
    const auto [g, h0, nh, hpb] = heads_of_block(s);
    float* k_s = smem;
    float* v_s = smem + key_tile * stride;
    __shared__ index_t kend_s[attention_rows];
    __shared__ std::uint32_t allowed_s[attention_rows];
    // The request's view, copied once into shared memory: the masks and the tile loads read its fields
    // every tile (from global memory, where nothing tells the compiler they stay put).
    __shared__ alignas(sequence_view<KV>) unsigned char sv_raw[sizeof(sequence_view<KV>)];
    const attention_tile tile = a.tiles[blockIdx.x];
    static_assert(sizeof(sequence_view<KV>) % 4 == 0 && sizeof(sequence_view<KV>) / 4 <= tc_attention_warps * 32, "a word of the view per thread");
    if (threadIdx.x < sizeof(sequence_view<KV>) / 4)
        reinterpret_cast<std::uint32_t*>(sv_raw)[threadIdx.x] = reinterpret_cast<const std::uint32_t*>(a.seqs + tile.request)[threadIdx.x];
    __syncthreads();
    const sequence_view<KV>& sv = *reinterpret_cast<const sequence_view<KV>*>(sv_raw);

    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32, gq = lane / 4, tq = lane % 4;
    const index_t rows = tile_rows(sv, tile.r0), pairs = rows * nh;
    store_row_ends(mask, sv, tile.r0, rows, kend_s);

    tc_pairs pr{};
    std::uint32_t qf[steps][4];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const index_t p = warp * 16 + gq + 8 * h;
        if (p >= pairs) continue;
        pr.tile_row[h] = p % rows;
        pr.row[h] = sv.row0 + tile.r0 + pr.tile_row[h];
        pr.head[h] = h0 + p / rows;
        pr.q[h] = a.qkv + static_cast<std::size_t>(pr.row[h]) * static_cast<std::size_t>(s.ld()) + static_cast<std::size_t>(pr.head[h]) * D;
    }
#pragma unroll
    for (int ks = 0; ks < steps; ++ks)
#pragma unroll
        for (int e = 0; e < 4; ++e) {  // a0: pair half 0, dim 8ks + t; a1: half 1; a2, a3: dim + 4
            const float* q = pr.q[e % 2];
            qf[ks][e] = q ? tf32_bits(q[8 * ks + tq + 4 * (e / 2)]) : 0u;
        }
    __syncthreads();
    const index_t kmax = max_key_end(kend_s);
    const bool active = warp * 16 < pairs;

    const KV* k_cache = group_slab(sv.keys, sv, s, a.layer, g);
    const KV* v_cache = group_slab(sv.values, sv, s, a.layer, g);
    float m[2] = {neg_inf, neg_inf}, l[2] = {0.0f, 0.0f}, o[steps][4] = {};
    for (index_t t0 = z * key_tile; t0 < kmax; t0 += a.splits * key_tile) {
        __syncthreads();  // every warp is done with the previous tile
        tc_row_masks(mask, sv, tile.r0, rows, kend_s, t0, tc_attention_warps, warp, lane, allowed_s);
        load_kv_tile<DPL, tc_attention_warps, true>(sv, a.k_win, a.v_win, k_cache, v_cache, s.kv_dim(), g, D, t0, kmax, k_s, stride, v_s, stride,
                                                    warp, lane);
        __syncthreads();
        if (!active) continue;
        const std::uint32_t allowed[2] = {pr.q[0] ? allowed_s[pr.tile_row[0]] : 0u, pr.q[1] ? allowed_s[pr.tile_row[1]] : 0u};
        float sc[key_tile / 8][4];
        tc_scores<DPL>(qf, k_s, stride, gq, tq, sc);
        tc_softmax<DPL>(allowed, a.scale, tq, sc, m, l, o);
        tc_weighted_values<DPL>(sc, v_s, stride, gq, tq, o);
    }
    if (active) tc_write<DPL>(a, pr, z, m, l, o, tq);
}

/// The tensor-core kernel over `n_tiles` tiles (head_dim = 32 · DPL).
template <class Mask, class KV, class T, int DPL>
void launch_attention_tc(const Mask& mask, const attention_args<KV, T>& a, index_t n_tiles, cudaStream_t stream) {
    attention_tc<Mask, KV, T, DPL><<<attention_grid(n_tiles, a.s, a.splits), tc_attention_warps * 32, tc_attention_smem_bytes(a.s.head_dim), stream>>>(
        mask, a);
    check_launch("dlm::cuda attention_tc (layer " + std::to_string(a.layer) + ")", stream);
}

}  // namespace dlm::cuda::kernels
