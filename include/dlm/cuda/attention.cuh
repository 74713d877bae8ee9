// dlm/cuda/attention.cuh — the masked grouped-query attention of the CUDA transformer: a flash-style
// kernel (online softmax over tiles of keys) templated on the mask policy.
//
// A thread block serves one request, up to 8 window rows and the query heads of one KV group (at most
// heads_per_block of them; a larger group takes several blocks); its 8 warps share the rows × heads
// pairs, so that even a single row (an autoregressive step) keeps a warp per head busy. It walks the
// keys in tiles of 32 at absolute positions 0, 32, 64, ...: each tile's keys and values are read into
// shared memory once for every query head of the group — from the window buffers (keys inside the
// plan's window, computed in this forward) or from the request's KV cache (the others) — then lane j
// of a warp scores key t0 + j against its pair's query, `mask.allowed(layout, q, k)` evaluated inline,
// bounded by min(attend_end, mask.key_end(layout, q)), and updates the pair's running max, sum and
// output. A forward with too few tiles to fill the GPU (few rows: a decoding step over a cached
// prefix) also splits the tiles of keys over up to 16 blocks (tile z, z + splits, ...), and
// attention_combine merges their partial results in split order; measured on an H200 with Dream-7B's
// shape, one row over a cached prefix spent 8 of its 13 ms per forward in an unsplit attention with
// one busy warp per block. A row's result is the same whatever other rows or heads share its block
// and whether a key came from the window or the cache; with splitting it also depends on the number of
// splits, which depends on the forward's number of tiles: like cuBLAS's kernel choice, the batch
// around a row can change its last bits (docs/determinism.md).
//
// Keys and values are KV (f32, as the CPU model keeps them, or bf16), widened to f32 as they are read
// into shared memory; the output is the next product's input T. The pieces both attention kernels use
// (the tiles, the splits and their merge, the key/value tile loader, the rows' key ends) are here; the
// tensor-core kernel is attention_tc.cuh, and attention_run.cuh chooses between the two
// (attention_path.cuh).
// Masks are evaluated in device code: their `allowed` and `key_end` must be DLM_HOST_DEVICE (every
// shipped mask's are).
#pragma once

#include <cstddef>
#include <cstdint>
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
/// x rounded to TF32 (10 stored mantissa bits; to nearest, ties away from zero), as an f32.
__device__ inline float round_tf32(float x) {
    std::uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return __uint_as_float(r);
}

/// Query heads one block serves for a group of `group` query heads per KV head.
[[nodiscard]] __host__ __device__ constexpr index_t heads_in_block(index_t group) noexcept { return group < heads_per_block ? group : heads_per_block; }

/// Shared memory of one block: the rows' queries of its heads, a key tile (rows padded by one float:
/// lane j reads row j without bank conflicts) and a value tile.
[[nodiscard]] constexpr std::size_t attention_smem_bytes(index_t head_dim, index_t group) noexcept {
    return sizeof(float) * (static_cast<std::size_t>(attention_rows) * heads_in_block(group) * head_dim +
                            static_cast<std::size_t>(key_tile) * (head_dim + 1) + static_cast<std::size_t>(key_tile) * head_dim);
}

/// Splits of the key range for a forward of `base_blocks` attention blocks whose rows attend to at most
/// `max_keys` keys, on a GPU of `sm_count` multiprocessors: 1 where the blocks fill the GPU; else enough
/// to give it about two blocks per multiprocessor, at most one per tile of keys and at most `limit`
/// (max_attention_splits unless the model was told otherwise: set_attention_split_limit).
inline constexpr index_t max_attention_splits = 16;
[[nodiscard]] inline index_t attention_splits(index_t base_blocks, index_t max_keys, int sm_count,
                                              index_t limit = max_attention_splits) noexcept {
    const index_t want = 2 * static_cast<index_t>(sm_count);
    if (base_blocks <= 0 || base_blocks >= want) return 1;
    index_t splits = (want + base_blocks - 1) / base_blocks;
    const index_t tiles = (max_keys + key_tile - 1) / key_tile;
    if (splits > tiles) splits = tiles;
    if (splits > limit) splits = limit;
    return splits < 1 ? 1 : splits;
}

/// Floats of one (row, head) partial result of a split: running max, sum, then the D unnormalized
/// output values.
[[nodiscard]] __host__ __device__ constexpr std::size_t partial_floats(index_t head_dim) noexcept {
    return static_cast<std::size_t>(head_dim) + 2;
}
/// Split z's partial result of (row, head) in `partial` (rows · heads · splits of them).
[[nodiscard]] __device__ inline float* partial_at(float* partial, qkv_shape s, std::size_t row, std::size_t head, index_t z, index_t splits) {
    return partial + ((row * static_cast<std::size_t>(s.heads) + head) * static_cast<std::size_t>(splits) + static_cast<std::size_t>(z)) *
                         partial_floats(s.head_dim);
}

/// What both attention kernels read and write (launch arguments; see run_attention, attention_run.cuh).
template <class KV, class T>
struct attention_args {
    const sequence_view<KV>* seqs;  ///< per request: layout, plan, cache slabs, first window row
    const attention_tile* tiles;    ///< blockIdx.x's request and first row
    const float* qkv;               ///< the q/k/v rows (f32; q at column head · head_dim)
    qkv_shape s;
    const KV* k_win;  ///< the window's keys and values, rows kv_dim apart
    const KV* v_win;
    index_t layer;
    float scale;       ///< 1/√head_dim
    T* out;            ///< the heads' outputs, rows of q_dim
    float* partial;    ///< the splits' partial results (with splits > 1)
    index_t splits;    ///< blocks per tile along the keys
};

/// Rows of a tile (1 .. attention_rows) of request sv starting at window row r0.
template <class KV>
[[nodiscard]] __device__ inline index_t tile_rows(const sequence_view<KV>& sv, index_t r0) {
    const index_t left = sv.plan.window_end - sv.plan.window_begin - r0;
    return left < attention_rows ? left : attention_rows;
}
/// The slab of KV group g of `layer` in the request's cache (keys or values), or null without a cache.
template <class KV>
[[nodiscard]] __device__ inline const KV* group_slab(const KV* base, const sequence_view<KV>& sv, qkv_shape s, index_t layer, index_t g) {
    const std::size_t slab = static_cast<std::size_t>(sv.capacity) * static_cast<std::size_t>(s.head_dim);
    return base ? base + (static_cast<std::size_t>(layer) * static_cast<std::size_t>(s.kv_heads) + static_cast<std::size_t>(g)) * slab : nullptr;
}

/// The query heads of this block: KV group g, heads h0 .. h0 + nh − 1 (at most hpb), from blockIdx.y.
struct block_heads {
    index_t g, h0, nh, hpb;
};
[[nodiscard]] __device__ inline block_heads heads_of_block(qkv_shape s) {
    const index_t group = s.heads / s.kv_heads, hpb = heads_in_block(group);
    const index_t per_group = (group + hpb - 1) / hpb;  // blocks per KV group
    const index_t g = static_cast<index_t>(blockIdx.y) / per_group;
    const index_t h0 = g * group + (static_cast<index_t>(blockIdx.y) % per_group) * hpb;
    return {g, h0, (g + 1) * group - h0 < hpb ? (g + 1) * group - h0 : hpb, hpb};
}

/// Threads 0 .. attention_rows − 1 write the key end of the tile's rows (0 past `rows`) into kend_s;
/// after the block's next barrier every thread may read them (and their maximum, max_key_end).
template <class Mask, class KV>
__device__ inline void store_row_ends(const Mask& mask, const sequence_view<KV>& sv, index_t r0, index_t rows, index_t* kend_s) {
    const auto t = static_cast<index_t>(threadIdx.x);
    if (t < attention_rows) {
        index_t kend = 0;
        if (t < rows) {
            const index_t e = mask.key_end(sv.layout, sv.plan.window_begin + r0 + t);
            kend = e < sv.plan.attend_end ? e : sv.plan.attend_end;
        }
        kend_s[t] = kend;
    }
}
[[nodiscard]] __device__ inline index_t max_key_end(const index_t* kend_s) {
    index_t kmax = 0;
    for (int w = 0; w < attention_rows; ++w) kmax = kend_s[w] > kmax ? kend_s[w] : kmax;
    return kmax;
}

/// Reads keys t0 .. t0 + key_tile − 1 of KV group g (window rows kv_dim apart) into k_s (key j at
/// j · k_stride) and their values into v_s (at j · v_stride), as floats (rounded to TF32 with `Tf32`):
/// from the window buffers for keys inside the plan's window, from the request's cache (k_cache,
/// v_cache: the group's slabs, or null) for the others, zero past kmax. Warp w of `Warps` takes keys
/// w, w + Warps, ..., its lanes along d (DPL elements each). Every load of the tile is issued before the
/// first store to shared memory, so a tile costs one memory round trip per thread, not one per key and
/// element (an H200 profile of a one-row step found the loop form latency-bound).
template <int DPL, int Warps, bool Tf32, class KV>
__device__ __forceinline__ void load_kv_tile(const sequence_view<KV>& sv, const KV* __restrict__ k_win, const KV* __restrict__ v_win,
                                             const KV* k_cache, const KV* v_cache, index_t kv_dim, index_t g, index_t D, index_t t0, index_t kmax, float* k_s,
                                             index_t k_stride, float* v_s, index_t v_stride, int warp, int lane) {
    static_assert(key_tile % Warps == 0, "a tile's keys must divide evenly over the warps that load it");
    constexpr int keys_per_warp = key_tile / Warps;
    const index_t wb = sv.plan.window_begin, we = sv.plan.window_end;
    float kv[keys_per_warp][DPL], vv[keys_per_warp][DPL];
#pragma unroll
    for (int i = 0; i < keys_per_warp; ++i) {
        const index_t k = t0 + warp + i * Warps;
        const KV* kp = nullptr;
        const KV* vp = nullptr;
        if (k < kmax) {
            if (k >= wb && k < we) {
                const std::size_t at = static_cast<std::size_t>(sv.row0 + k - wb) * kv_dim + g * D;
                kp = k_win + at;
                vp = v_win + at;
            } else if (k_cache) {
                kp = k_cache + static_cast<std::size_t>(k) * D;
                vp = v_cache + static_cast<std::size_t>(k) * D;
            }
        }
#pragma unroll
        for (int e = 0; e < DPL; ++e) {
            const index_t d = lane + 32 * e;
            const bool ok = kp && d < D;
            kv[i][e] = ok ? element<KV>::to_float(kp[d]) : 0.0f;
            vv[i][e] = ok ? element<KV>::to_float(vp[d]) : 0.0f;
        }
    }
#pragma unroll
    for (int i = 0; i < keys_per_warp; ++i) {
        const index_t j = warp + i * Warps;
#pragma unroll
        for (int e = 0; e < DPL; ++e) {
            const index_t d = lane + 32 * e;
            if (d < D) {
                k_s[j * k_stride + d] = Tf32 ? round_tf32(kv[i][e]) : kv[i][e];
                v_s[j * v_stride + d] = Tf32 ? round_tf32(vv[i][e]) : vv[i][e];
            }
        }
    }
}

/// Copies the queries of the block's rows and heads (rows × nh × D floats of qkv) into q_s ([row][hpb][D]),
/// every thread of the block taking a share, `batch` loads in flight before their stores.
__device__ __forceinline__ void load_queries(const float* __restrict__ qkv, std::size_t first_row, std::size_t ld, index_t h0, index_t D, index_t rows,
                                             index_t nh, index_t hpb, float* q_s) {
    constexpr int batch = 8;
    const index_t per_row = nh * D, total = rows * per_row, step = static_cast<index_t>(blockDim.x);
    for (index_t base = static_cast<index_t>(threadIdx.x); base < total; base += batch * step) {
        float v[batch];
#pragma unroll
        for (int u = 0; u < batch; ++u) {
            const index_t i = base + u * step;
            v[u] = i < total ? qkv[(first_row + static_cast<std::size_t>(i / per_row)) * ld + static_cast<std::size_t>(h0 * D + i % per_row)] : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < batch; ++u) {
            const index_t i = base + u * step;
            if (i < total) q_s[(i / per_row) * hpb * D + i % per_row] = v[u];
        }
    }
}

/// One tile's step of a (row, head) pair's online softmax, for the warp that works on it: lane j
/// scores key t0 + j (its row kr of the key tile) against the query q where `allowed`, and the pair's
/// running max m, sum l and this lane's DPL output values (acc, dimensions lane + 32·e) take in the
/// tile's keys and values (v_s).
template <int DPL>
__device__ __forceinline__ void softmax_step(bool allowed, const float* q, const float* kr, const float* v_s, index_t D, float scale, float& m,
                                             float& l, float* acc_i, int lane) {
    const float neg_inf = -CUDART_INF_F;
    float score = neg_inf;
    if (allowed) {
        float dot = 0.0f;
#pragma unroll 8
        for (index_t d = 0; d < D; ++d) dot = fmaf(q[d], kr[d], dot);
        score = dot * scale;
    }
    const float tile_max = warp_max(score);
    if (tile_max == neg_inf) {  // fmaxf skips NaN: a tile of NaN scores (a NaN weight) poisons the sum, as on the host
        if (__any_sync(0xffffffffu, isnan(score))) l = CUDART_NAN_F;
        return;
    }
    const float m_new = fmaxf(m, tile_max);
    const float correction = m == neg_inf ? 0.0f : expf(m - m_new);
    const float pr = score == neg_inf ? 0.0f : expf(score - m_new);
    l = l * correction + warp_sum(pr);
    float acc[DPL];
#pragma unroll
    for (int j = 0; j < DPL; ++j) acc[j] = acc_i[j] * correction;
    for (int j = 0; j < key_tile; ++j) {
        const float pj = __shfl_sync(0xffffffffu, pr, j);
        if (pj == 0.0f) continue;
        const float* vr = v_s + j * D;
#pragma unroll
        for (int e = 0; e < DPL; ++e) {
            const index_t d = lane + 32 * e;
            if (d < D) acc[e] = fmaf(pj, vr[d], acc[e]);
        }
    }
#pragma unroll
    for (int j = 0; j < DPL; ++j) acc_i[j] = acc[j];
    m = m_new;
}

/// A pair's result: with one split the normalized output (row `row`, head `head` of `out`), else its
/// (max, sum, unnormalized output) as split z's partial result for attention_combine.
template <int DPL, class T>
__device__ __forceinline__ void write_pair(T* __restrict__ out, float* __restrict__ partial, qkv_shape s, std::size_t row, std::size_t head,
                                           index_t z, index_t splits, float m, float l, const float* acc_i, int lane) {
    const index_t D = s.head_dim;
    if (splits == 1) {
        const float inv = l == 0.0f ? 0.0f : 1.0f / l;  // no key allowed: output zero, as on the CPU (a NaN sum stays NaN)
        T* o = out + row * s.q_dim() + head * D;
#pragma unroll
        for (int j = 0; j < DPL; ++j) {
            const index_t d = lane + 32 * j;
            if (d < D) o[d] = to_product_input<T>(acc_i[j] * inv);
        }
    } else {
        float* part = partial_at(partial, s, row, head, z, splits);
        if (lane == 0) {
            part[0] = m;
            part[1] = l;
        }
#pragma unroll
        for (int j = 0; j < DPL; ++j) {
            const index_t d = lane + 32 * j;
            if (d < D) part[2 + d] = acc_i[j];
        }
    }
}

/// DPL: head dimensions per lane (head_dim <= 32 · DPL). Grid: (tiles, kv_heads · blocks per group,
/// splits). The block's work is its rows × heads pairs; warp w takes pairs w, w + 8, ... (so a single
/// row still keeps one warp per head busy). Split z walks the key tiles z, z + splits, ...; with one
/// split the block writes the normalized output, else each pair's (max, sum, output) goes to
/// `partial` for attention_combine.
template <class Mask, class KV, class T, int DPL>
__global__ void __launch_bounds__(attention_rows * 32) attention(Mask mask, attention_args<KV, T> a) {
    extern __shared__ float smem[];
    const float neg_inf = -CUDART_INF_F;
    const qkv_shape s = a.s;
    const index_t D = s.head_dim, splits = a.splits;
    const auto [g, h0, nh, hpb] = heads_of_block(s);
    const index_t z = static_cast<index_t>(blockIdx.z);
    float* q_s = smem;  // [row][head][D]
    float* k_s = q_s + attention_rows * hpb * D;
    float* v_s = k_s + key_tile * (D + 1);
    __shared__ index_t kend_s[attention_rows];

    const attention_tile tile = a.tiles[blockIdx.x];
    const sequence_view<KV>& sv = a.seqs[tile.request];
    const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    const index_t wb = sv.plan.window_begin, rows = tile_rows(sv, tile.r0);

    load_queries(a.qkv, static_cast<std::size_t>(sv.row0 + tile.r0), static_cast<std::size_t>(s.ld()), h0, D, rows, nh, hpb, q_s);
    store_row_ends(mask, sv, tile.r0, rows, kend_s);
    __syncthreads();
    const index_t kmax = max_key_end(kend_s);

    const KV* k_cache = group_slab(sv.keys, sv, s, a.layer, g);
    const KV* v_cache = group_slab(sv.values, sv, s, a.layer, g);
    const index_t kv_dim = s.kv_dim();
    const index_t pairs = rows * nh;  // pair p: row p % rows, head p / rows

    // Per pair of this warp (at most heads_per_block: rows · nh <= 8 · 8): running max, sum and
    // output, kept per thread between tiles (local memory: the pair loop is not unrolled, to keep the
    // kernel small) and in registers while a pair is worked on.
    float m_h[heads_per_block], l_h[heads_per_block], acc_h[heads_per_block * DPL];
    for (int i = 0; i < heads_per_block; ++i) {
        m_h[i] = neg_inf;
        l_h[i] = 0.0f;
        for (int j = 0; j < DPL; ++j) acc_h[i * DPL + j] = 0.0f;
    }

    for (index_t t0 = z * key_tile; t0 < kmax; t0 += splits * key_tile) {
        __syncthreads();  // every warp is done with the previous tile
        load_kv_tile<DPL, attention_rows, false>(sv, a.k_win, a.v_win, k_cache, v_cache, kv_dim, g, D, t0, kmax, k_s, D + 1, v_s, D, warp, lane);
        __syncthreads();

        const index_t k = t0 + lane;
        const float* kr = k_s + lane * (D + 1);
#pragma unroll 1
        for (index_t i = 0, p = warp; p < pairs; ++i, p += attention_rows) {
            const index_t rw = p % rows, hh = p / rows, kend = kend_s[rw];
            if (t0 >= kend) continue;  // uniform across the warp
            const bool allowed = k < kend && mask.allowed(sv.layout, wb + tile.r0 + rw, k);
            softmax_step<DPL>(allowed, q_s + (rw * hpb + hh) * D, kr, v_s, D, a.scale, m_h[i], l_h[i], acc_h + i * DPL, lane);
        }
    }
    for (index_t i = 0, p = warp; p < pairs; ++i, p += attention_rows) {
        const index_t rw = p % rows, hh = p / rows;
        const std::size_t row = static_cast<std::size_t>(sv.row0 + tile.r0 + rw), head = static_cast<std::size_t>(h0 + hh);
        write_pair<DPL>(a.out, a.partial, s, row, head, z, splits, m_h[i], l_h[i], acc_h + i * DPL, lane);
    }
}

/// Merges the splits' partial results of every (row, head), in split order, into the normalized
/// output: one warp per pair, eight pairs per block. Lane z reads split z's max and sum and computes its
/// weight exp(m_z − m) once; the sum and each output are then added up split by split (weights passed
/// by shuffles), every split's values loaded before the first is added.
template <class T>
__global__ void attention_combine(const float* __restrict__ partial, index_t splits, index_t pairs, qkv_shape s, T* __restrict__ out) {
    static_assert(max_attention_splits <= 32, "a lane per split");
    const index_t pair = static_cast<index_t>(blockIdx.x) * attention_rows + static_cast<index_t>(threadIdx.x) / 32;
    const int lane = static_cast<int>(threadIdx.x) % 32;
    if (pair >= pairs) return;
    const index_t D = s.head_dim, row = pair / s.heads, head = pair % s.heads;
    const std::size_t pf = partial_floats(D);
    const float* p = partial + static_cast<std::size_t>(pair) * static_cast<std::size_t>(splits) * pf;
    const float neg_inf = -CUDART_INF_F;
    const float m_lane = lane < splits ? p[lane * pf] : neg_inf, l_lane = lane < splits ? p[lane * pf + 1] : 0.0f;
    const float m = warp_max(m_lane);  // the largest of the splits' maxima, as a running fmaxf would give
    const float w_lane = m_lane == neg_inf ? 0.0f : expf(m_lane - m);
    float w[max_attention_splits];  // split z's weight, 0 where it is not added (past splits, or no key allowed)
    bool used[max_attention_splits];
    float l = 0.0f;
#pragma unroll
    for (int z = 0; z < max_attention_splits; ++z) {  // every lane takes part in every shuffle
        const float mz = __shfl_sync(0xffffffffu, m_lane, z), lz = __shfl_sync(0xffffffffu, l_lane, z);
        w[z] = __shfl_sync(0xffffffffu, w_lane, z);
        used[z] = z < splits && mz != neg_inf;
        if (used[z]) l += lz * w[z];
        if (z < splits && isnan(lz)) l = CUDART_NAN_F;  // a split that met NaN scores (softmax_step) poisons the row
    }
    const float inv = l == 0.0f ? 0.0f : 1.0f / l;  // no key allowed: output zero, as on the CPU (a NaN sum stays NaN)
    T* o = out + static_cast<std::size_t>(row) * s.q_dim() + static_cast<std::size_t>(head) * D;
    for (index_t d = lane; d < D; d += 32) {
        float v[max_attention_splits];
#pragma unroll
        for (int z = 0; z < max_attention_splits; ++z) v[z] = z < splits ? p[z * pf + 2 + d] : 0.0f;
        float acc = 0.0f;
#pragma unroll
        for (int z = 0; z < max_attention_splits; ++z)
            if (used[z]) acc += v[z] * w[z];
        o[d] = to_product_input<T>(acc * inv);
    }
}

/// Attention blocks of a forward before splitting: tiles × KV heads × blocks per group.
[[nodiscard]] inline index_t attention_blocks(index_t n_tiles, qkv_shape s) noexcept {
    const index_t group = s.heads / s.kv_heads, hpb = heads_in_block(group);
    return n_tiles * s.kv_heads * ((group + hpb - 1) / hpb);
}

/// The grid of an attention launch: (tiles, KV heads · blocks per group, splits).
[[nodiscard]] inline dim3 attention_grid(index_t n_tiles, qkv_shape s, index_t splits) noexcept {
    const index_t group = s.heads / s.kv_heads, hpb = heads_in_block(group);
    return {static_cast<unsigned>(n_tiles), static_cast<unsigned>(s.kv_heads * ((group + hpb - 1) / hpb)), static_cast<unsigned>(splits)};
}

/// The CUDA-core kernel over `n_tiles` tiles (head_dim <= 32 · DPL).
template <class Mask, class KV, class T, int DPL>
void launch_attention_simt(const Mask& mask, const attention_args<KV, T>& a, index_t n_tiles, cudaStream_t stream) {
    const std::size_t smem = attention_smem_bytes(a.s.head_dim, a.s.heads / a.s.kv_heads);
    auto kernel = attention<Mask, KV, T, DPL>;
    if (smem > 48 * 1024)
        check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
              "cudaFuncSetAttribute (attention shared memory)");
    kernel<<<attention_grid(n_tiles, a.s, a.splits), attention_rows * 32, smem, stream>>>(mask, a);
    check_launch("dlm::cuda attention (layer " + std::to_string(a.layer) + ")", stream);
}

/// Merges the splits' partial results of `rows` window rows (after either kernel, with splits > 1).
template <class KV, class T>
void launch_attention_combine(const attention_args<KV, T>& a, index_t rows, cudaStream_t stream) {
    const index_t pairs = rows * a.s.heads;
    attention_combine<T><<<static_cast<unsigned>((pairs + attention_rows - 1) / attention_rows), attention_rows * 32, 0, stream>>>(
        a.partial, a.splits, pairs, a.s, a.out);
    check_launch("dlm::cuda attention_combine (layer " + std::to_string(a.layer) + ")", stream);
}

}  // namespace dlm::cuda::kernels
