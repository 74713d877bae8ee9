// dlm/cpu/attention.hpp — the KV cache and the masked grouped-query attention of the CPU transformer.
//
// The attention is templated on the mask policy: for query q it visits the keys
// [0, min(attend_end, mask.key_end(layout, q))) and evaluates mask.allowed(layout, q, k) inline. Keys
// inside the forward's window use the K/V just computed; keys outside it come from the sequence's
// cache. Every score is one dot product over the head dimension in a fixed order and the weighted
// sum of values runs over keys 0, 1, 2, ... in order, so a query's output depends only on the K/V
// it attends to: recomputing a key or reading it back from the cache gives bit-identical results.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/error.hpp"
#include "../mask/concept.hpp"
#include "../model/concept.hpp"
#include "../model/request_check.hpp"
#include "gemm.hpp"

namespace dlm::cpu {

/// Where element (position, dim) of a value block of `rows` positions sits: panel dim / panel_width,
/// row `position` of it (panel_width floats a row). The value product reads a panel's rows as one
/// contiguous stream (docs/benchmarks.md, "Keys from memory").
[[nodiscard]] constexpr std::ptrdiff_t value_offset(index_t position, index_t dim, index_t rows) noexcept {
    return (std::ptrdiff_t{dim} / panel_width * rows + position) * panel_width + dim % panel_width;
}

/// Per-sequence K/V store for `capacity` canvas positions: for every layer and KV head, the
/// post-RoPE keys transposed (head_dim rows of `key_stride` positions, so a run of positions is one
/// panel for the score product) and the values in panels of panel_width dimensions (each panel
/// `capacity` rows of panel_width floats, so a run of positions is one contiguous stretch of each
/// panel for the value product), plus a flag per position saying whether its K/V were stored.
struct kv_cache {
    index_t capacity = 0, layers = 0, kv_heads = 0, head_dim = 0;
    index_t key_stride = 0;    ///< capacity + panel_width (a panel starting at any position stays inside)
    index_t value_stride = 0;  ///< head_dim rounded up to panel_width (value_stride / panel_width panels)
    std::vector<float, aligned_allocator<float>> keys, values;
    std::vector<unsigned char> stored;

    kv_cache() = default;
    kv_cache(index_t capacity_, index_t layers_, index_t kv_heads_, index_t head_dim_)
        : capacity(capacity_), layers(layers_), kv_heads(kv_heads_), head_dim(head_dim_), key_stride(capacity_ + panel_width),
          value_stride((head_dim_ + panel_width - 1) / panel_width * panel_width),
          keys(static_cast<std::size_t>(layers_) * kv_heads_ * head_dim_ * static_cast<std::size_t>(key_stride), 0.f),
          values(static_cast<std::size_t>(layers_) * kv_heads_ * static_cast<std::size_t>(capacity_) * value_stride, 0.f),
          stored(static_cast<std::size_t>(capacity_), 0) {}

    /// Bytes a cache of this shape holds.
    [[nodiscard]] static std::uint64_t bytes_for(index_t capacity, index_t layers, index_t kv_heads, index_t head_dim) noexcept {
        const std::uint64_t per = std::uint64_t(layers) * std::uint64_t(kv_heads);
        const std::uint64_t vs = std::uint64_t((head_dim + panel_width - 1) / panel_width * panel_width);
        return sizeof(float) * per * (std::uint64_t(head_dim) * std::uint64_t(capacity + panel_width) + std::uint64_t(capacity) * vs) + std::uint64_t(capacity);
    }
    /// Keys of (layer, kv head): element (dim, position) at [dim * key_stride + position].
    [[nodiscard]] float* key_block(index_t layer, index_t g) noexcept {
        return keys.data() + (static_cast<std::size_t>(layer) * kv_heads + g) * head_dim * static_cast<std::size_t>(key_stride);
    }
    /// Values of (layer, kv head): element (position, dim) at [value_offset(position, dim, capacity)].
    [[nodiscard]] float* value_block(index_t layer, index_t g) noexcept {
        return values.data() + (static_cast<std::size_t>(layer) * kv_heads + g) * static_cast<std::size_t>(capacity) * value_stride;
    }
    [[nodiscard]] const float* key_block(index_t layer, index_t g) const noexcept { return const_cast<kv_cache*>(this)->key_block(layer, g); }
    [[nodiscard]] const float* value_block(index_t layer, index_t g) const noexcept { return const_cast<kv_cache*>(this)->value_block(layer, g); }
    /// Floats between two panels of a value block.
    [[nodiscard]] std::ptrdiff_t value_panel_stride() const noexcept { return std::ptrdiff_t{capacity} * panel_width; }
    /// Forget everything stored.
    void clear() noexcept { std::fill(stored.begin(), stored.end(), 0); }
};

/// Copies the stored K/V of positions [src_begin, src_begin + count) of `src` to positions
/// [dst_begin, dst_begin + count) of `dst` and marks them stored (the prompt cache's hook; keys are
/// post-RoPE, so both ranges must be the same canvas positions). Bit-exact. Throws
/// dlm::contract_error for stores of different shapes, a range outside either, or an unstored source.
inline void copy_kv(const kv_cache& src, index_t src_begin, kv_cache& dst, index_t dst_begin, index_t count) {
    dlm::detail::check_kv_copy(src, src_begin, dst, dst_begin, count, "cpu::copy_kv");
    for (index_t l = 0; l < src.layers; ++l)
        for (index_t g = 0; g < src.kv_heads; ++g) {
            const float* sk = src.key_block(l, g);
            float* dk = dst.key_block(l, g);
            for (index_t i = 0; i < src.head_dim; ++i)
                std::copy_n(sk + i * std::ptrdiff_t{src.key_stride} + src_begin, count, dk + i * std::ptrdiff_t{dst.key_stride} + dst_begin);
            for (index_t p = 0; p < src.value_stride / panel_width; ++p)
                std::copy_n(src.value_block(l, g) + p * src.value_panel_stride() + std::ptrdiff_t{src_begin} * panel_width,
                            std::ptrdiff_t{count} * panel_width, dst.value_block(l, g) + p * dst.value_panel_stride() + std::ptrdiff_t{dst_begin} * panel_width);
        }
    std::fill(dst.stored.begin() + dst_begin, dst.stored.begin() + dst_begin + count, 1);
}

/// The fresh K/V of one request's window for one layer, in the cache's layouts (position 0 = the
/// window's first row).
struct window_kv {
    index_t rows = 0, key_stride = 0, value_stride = 0, kv_heads = 0, head_dim = 0;
    float* keys = nullptr;    // [kv_heads][head_dim][key_stride]
    float* values = nullptr;  // [kv_heads][value_stride / panel_width panels][rows][panel_width] (value_offset)
    [[nodiscard]] float* key_block(index_t g) const noexcept {
        return keys + static_cast<std::size_t>(g) * head_dim * static_cast<std::size_t>(key_stride);
    }
    [[nodiscard]] float* value_block(index_t g) const noexcept {
        return values + static_cast<std::size_t>(g) * rows * static_cast<std::size_t>(value_stride);
    }
    [[nodiscard]] std::ptrdiff_t value_panel_stride() const noexcept { return std::ptrdiff_t{rows} * panel_width; }
    [[nodiscard]] static std::size_t floats(index_t rows, index_t kv_heads, index_t head_dim, index_t value_stride) noexcept {
        return static_cast<std::size_t>(kv_heads) * head_dim * static_cast<std::size_t>(rows + panel_width) +
               static_cast<std::size_t>(kv_heads) * rows * static_cast<std::size_t>(value_stride);
    }
};

/// Where the heads sit in a row of the fused q|k|v projection output.
struct head_geometry {
    index_t heads = 0, kv_heads = 0, head_dim = 0, value_stride = 0;
    std::ptrdiff_t qkv_ld = 0;  // floats per row of the q|k|v buffer: (heads + 2 kv_heads) * head_dim
    std::ptrdiff_t out_ld = 0;  // floats per row of the attention output: heads * head_dim
    [[nodiscard]] index_t q_dim() const noexcept { return heads * head_dim; }
    [[nodiscard]] index_t kv_dim() const noexcept { return kv_heads * head_dim; }
};

/// Copies one request's fresh (post-RoPE) K/V from its q|k|v rows into `w`, and the rows of
/// [store_begin, store_end) into the cache's `layer`.
inline void gather_window_kv(const head_geometry& hg, const float* qkv_rows, const forward_plan& plan, const window_kv& w,
                             kv_cache* cache, index_t layer, index_t g) {
    const index_t d = hg.head_dim;
    const float* k_src = qkv_rows + hg.q_dim() + g * d;
    const float* v_src = qkv_rows + hg.q_dim() + hg.kv_dim() + g * d;
    float* kt = w.key_block(g);
    float* v = w.value_block(g);
    for (index_t j = 0; j < w.rows; ++j)
        for (index_t i = 0; i < d; ++i) kt[i * static_cast<std::ptrdiff_t>(w.key_stride) + j] = k_src[j * hg.qkv_ld + i];
    for (index_t j = 0; j < w.rows; ++j)
        for (index_t i = 0; i < d; ++i) v[value_offset(j, i, w.rows)] = v_src[j * hg.qkv_ld + i];
    if (!plan.stores()) return;
    const index_t s0 = plan.store_begin - plan.window_begin, count = plan.store_end - plan.store_begin;
    float* ck = cache->key_block(layer, g);
    float* cv = cache->value_block(layer, g);
    for (index_t i = 0; i < d; ++i)
        std::copy_n(kt + i * static_cast<std::ptrdiff_t>(w.key_stride) + s0, count,
                    ck + i * static_cast<std::ptrdiff_t>(cache->key_stride) + plan.store_begin);
    for (index_t p = 0; p < w.value_stride / panel_width; ++p)
        std::copy_n(v + p * w.value_panel_stride() + std::ptrdiff_t{s0} * panel_width, std::ptrdiff_t{count} * panel_width,
                    cv + p * cache->value_panel_stride() + std::ptrdiff_t{plan.store_begin} * panel_width);
}

/// Throws contract_error if a query row of the request needs a key that is neither in its window
/// nor stored in its cache. Runs once per forward, before any layer.
template <attention_mask Mask>
void check_cached_keys(const forward_request<kv_cache>& rq, const Mask& mask, std::size_t index) {
    const forward_plan& p = rq.plan;
    const canvas_layout& l = rq.layout;
    auto available = [&](index_t k) { return (k >= p.window_begin && k < p.window_end) || (rq.cache && rq.cache->stored[static_cast<std::size_t>(k)]); };
    bool all = true;
    for (index_t k = 0; k < p.attend_end && all; ++k) all = available(k);
    if (all) return;
    for (index_t q = p.window_begin; q < p.window_end; ++q) {
        const index_t kend = std::min(p.attend_end, mask.key_end(l, q));
        for (index_t k = 0; k < kend; ++k)
            if (!available(k) && mask.allowed(l, q, k))
                throw contract_error("cpu::transformer: request " + std::to_string(index) + ", row " + std::to_string(q) + " needs key " +
                                     std::to_string(k) + ", which is neither in the window [" + std::to_string(p.window_begin) + ", " +
                                     std::to_string(p.window_end) + ") nor stored in the KV cache");
    }
}

/// The keys [begin, end) that one query row attends.
struct key_range {
    index_t begin = 0, end = 0;
};

/// Scores of `rows` query rows (row r at s + r·lds, n each) become their unnormalized attention
/// weights: the allowed keys' scores times `scale`, then exp(score − the row's max) by the kernel
/// table; a key not allowed gets weight 0. row_keys(r) gives row r's allowed keys: a key_range
/// (indices into the row), or an `allowed(k)` predicate, evaluated for every key (a select pass).
/// inv[r] is 1 / the row's sum of weights (`exp_shifted_sum`, whose sum does not depend on where
/// the row's keys start in `s`: a row alone and among rows whose keys start elsewhere, or its range
/// and its masked row, sum alike), or 0 for a row with no key allowed (its weights all zeros). The
/// one softmax of every CPU attention: the output rows are the weighted values times inv
/// (`scale_output_rows`), one product per output element instead of one per weight.
template <class RowKeys>
void masked_exp_rows(float* s, std::ptrdiff_t lds, index_t rows, index_t n, float scale, RowKeys&& row_keys, const kernel_table& kt,
                     float* inv) {
    constexpr float masked = -std::numeric_limits<float>::infinity();
    for (index_t r = 0; r < rows; ++r) {
        float* sr = s + r * lds;
        index_t b = 0, e = n;
        const auto keys = row_keys(r);
        if constexpr (std::is_same_v<std::remove_cvref_t<decltype(keys)>, key_range>) {
            b = std::clamp<index_t>(keys.begin, 0, n);
            e = std::clamp<index_t>(keys.end, b, n);
            std::fill(sr, sr + b, 0.0f);
            std::fill(sr + e, sr + n, 0.0f);
        } else {
            for (index_t k = 0; k < n; ++k) sr[k] = keys(k) ? sr[k] : masked;  // a select, not a branch
        }
        const float mx = kt.scale_max(sr + b, e - b, scale);  // masked stays -inf
        if (mx == masked) {                                   // no key allowed: output zero
            std::fill(sr + b, sr + e, 0.0f);
            inv[r] = 0.0f;
            continue;
        }
        inv[r] = 1.0f / kt.exp_shifted_sum(sr + b, e - b, mx);
    }
}

/// out row r (d floats at out + r·out_ld) *= inv[r]: the softmax's normalization (masked_exp_rows).
inline void scale_output_rows(index_t rows, index_t d, float* out, std::ptrdiff_t out_ld, const float* inv, const kernel_table& kt) {
    for (index_t r = 0; r < rows; ++r) kt.scale_max(out + r * out_ld, d, inv[r]);
}

/// One attention task: query head `h`, window rows [r0, r1) of one request.
struct attention_task {
    index_t request, head, r0, r1;
};

/// A run of keys [begin, end) read from one source.
struct key_chunk {
    index_t begin, end;
    const float* keys;    // key `begin`: element (dim, begin + j) at keys[dim * key_stride + j]
    std::ptrdiff_t key_stride;
    const float* values;  // value `begin`: element (begin + j, dim) at values[value_offset(j, dim, rows of the block)]
    std::ptrdiff_t value_panel_stride;
};

/// Runs the attention of one task: rows of `qkv` hold post-RoPE queries; writes the head's output
/// into `out`. `scratch` is this thread's buffer for the scores.
template <attention_mask Mask>
void attend(const Mask& mask, const canvas_layout& l, const forward_plan& p, const head_geometry& hg, const float* qkv,
            const window_kv& w, kv_cache* cache, index_t layer, const attention_task& t, float* out,
            std::vector<float, aligned_allocator<float>>& scratch) {
    const index_t d = hg.head_dim, g = t.head / (hg.heads / hg.kv_heads), rows = t.r1 - t.r0;
    index_t kmax = 0;
    for (index_t r = t.r0; r < t.r1; ++r) kmax = std::max(kmax, std::min(p.attend_end, mask.key_end(l, p.window_begin + r)));
    const std::ptrdiff_t lds = (kmax + panel_width - 1) / panel_width * panel_width + panel_width;
    scratch.resize(static_cast<std::size_t>(rows) * static_cast<std::size_t>(lds + 1));
    float* s = scratch.data();
    float* inv = s + rows * lds;  // each row's 1 / sum of weights

    // Key sources in position order: cache before the window, the window, cache after it.
    key_chunk chunks[3];
    int n_chunks = 0;
    // Keys and values of positions [b, e), position `origin` at (keys, values).
    auto add = [&](index_t b, index_t e, index_t origin, const float* keys, std::ptrdiff_t ks, const float* values, std::ptrdiff_t vps) {
        e = std::min(e, kmax);
        if (b < e) chunks[n_chunks++] = {b, e, keys + (b - origin), ks, values + std::ptrdiff_t{b - origin} * panel_width, vps};
    };
    if (cache) add(0, p.window_begin, 0, cache->key_block(layer, g), cache->key_stride, cache->value_block(layer, g), cache->value_panel_stride());
    add(p.window_begin, p.window_end, p.window_begin, w.key_block(g), w.key_stride, w.value_block(g), w.value_panel_stride());
    if (cache) add(p.window_end, kmax, 0, cache->key_block(layer, g), cache->key_stride, cache->value_block(layer, g), cache->value_panel_stride());

    // Scores: S[r][k] = q_r · k_k.
    const float* q = qkv + t.r0 * hg.qkv_ld + t.head * d;
    for (int c = 0; c < n_chunks; ++c) {
        const key_chunk& ch = chunks[c];
        gemm(rows, ch.end - ch.begin, d, q, hg.qkv_ld, {ch.keys, panel_width, ch.key_stride}, s + ch.begin, lds);
    }

    // Mask, scale and softmax.
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    const kernel_table& kt = kernels();
    const auto row_keys = [&](index_t r) {
        const index_t qpos = p.window_begin + t.r0 + r, kend = std::min(p.attend_end, mask.key_end(l, qpos));
        if constexpr (mask_allowed_is_prefix<Mask>()) {
            return key_range{0, kend};  // allowed(k) is k < key_end: no select pass
        } else {
            // By value: the stores into the scores then cannot touch what the predicate reads, so the
            // compiler keeps its row-invariant part (a block index: a division) out of the key loop.
            return [mask, l, qpos, kend](index_t k) { return k < kend && mask.allowed(l, qpos, k); };
        }
    };
    masked_exp_rows(s, lds, rows, kmax, scale, row_keys, kt, inv);

    // Output: O[r] = inv[r] · Σ_k P[r][k] v_k, keys in order across the chunks.
    float* o = out + t.r0 * hg.out_ld + t.head * d;
    for (int c = 0; c < n_chunks; ++c) {
        const key_chunk& ch = chunks[c];
        gemm(rows, d, ch.end - ch.begin, s + ch.begin, lds, {ch.values, ch.value_panel_stride, panel_width}, o, hg.out_ld, c > 0);
    }
    if (n_chunks == 0)
        for (index_t r = 0; r < rows; ++r) std::fill_n(o + r * hg.out_ld, d, 0.0f);
    else scale_output_rows(rows, d, o, hg.out_ld, inv, kt);
}

/// Attention of `rows` query rows (q: row r at q[r · q_ld], d floats) over one run of keys held in
/// kv_cache's layouts: keys transposed (dim i of key j at keys[i · key_ld + j], key_ld at least the
/// run's length + panel_width) and values (key j's at values[j · value_ld], value_ld at least d
/// rounded up to panel_width). Row r attends the keys range(r) (weight 0 elsewhere), scores times
/// `scale`; out[r · out_ld + i]. Scores and weighted values are GEMMs over the keys the rows attend
/// together; a key another row needs adds exact zeros to a row's sums, so each row's result depends
/// on its query and its own keys only, whatever rows share the call (the scheme of `attend` above).
template <class Range>
void attend_run(index_t rows, index_t d, const float* q, std::ptrdiff_t q_ld, const float* keys, std::ptrdiff_t key_ld,
                const float* values, std::ptrdiff_t value_ld, float scale, Range&& range, float* out, std::ptrdiff_t out_ld) {
    index_t kb = std::numeric_limits<index_t>::max(), ke = 0;
    for (index_t r = 0; r < rows; ++r)
        if (const key_range k = range(r); k.begin < k.end) {
            kb = std::min(kb, k.begin);
            ke = std::max(ke, k.end);
        }
    if (kb >= ke) {
        for (index_t r = 0; r < rows; ++r) std::fill_n(out + r * out_ld, d, 0.0f);
        return;
    }
    const index_t n = ke - kb;
    const std::ptrdiff_t lds = (n + panel_width - 1) / panel_width * panel_width + panel_width;
    thread_local std::vector<float, aligned_allocator<float>> scratch;
    scratch.resize(static_cast<std::size_t>(rows) * static_cast<std::size_t>(lds + 1));
    float* s = scratch.data();
    float* inv = s + rows * lds;
    gemm(rows, n, d, q, q_ld, {keys + kb, panel_width, key_ld}, s, lds);
    const kernel_table& kt = kernels();
    const auto row_keys = [&](index_t r) {
        const key_range k = range(r);
        return key_range{k.begin - kb, k.end - kb};
    };
    masked_exp_rows(s, lds, rows, n, scale, row_keys, kt, inv);
    gemm(rows, d, n, s, lds, {values + kb * value_ld, panel_width, value_ld}, out, out_ld);
    scale_output_rows(rows, d, out, out_ld, inv, kt);
}

}  // namespace dlm::cpu
