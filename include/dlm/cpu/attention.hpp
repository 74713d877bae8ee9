// dlm/cpu/attention.hpp — the masked grouped-query attention of the CPU transformer (its K/V stores:
// kv_cache.hpp).
//
// The attention is templated on the mask policy: for query q it visits the keys
// [0, min(attend_end, mask.key_end(layout, q))) and evaluates mask.allowed(layout, q, k) inline. Keys
// inside the forward's window use the K/V just computed; keys outside it come from the sequence's
// cache. Every score is one dot product over the head dimension in a fixed order and the weighted
// sum of values runs over keys 0, 1, 2, ... in order (in pairs, or AMX's steps of 32, for a bf16
// store, whose chunks of keys start on those steps), so a query's output depends only on the K/V it
// attends to: recomputing a key or reading it back from the cache gives bit-identical results.
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
#include "kv_cache.hpp"

namespace dlm::cpu {

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

/// One row of masked_exp_rows (below): the n scores at sr, the row's allowed keys `keys` (by value, so
/// that the stores into sr cannot touch what a predicate reads); inv its 1 / sum.
template <class Keys>
void masked_exp_row(float* sr, index_t n, float scale, Keys keys, const kernel_table& kt, float& inv) {
    constexpr float masked = -std::numeric_limits<float>::infinity();
    index_t b = 0, e = n;
    if constexpr (std::is_same_v<Keys, key_range>) {
        b = std::clamp<index_t>(keys.begin, 0, n);
        e = std::clamp<index_t>(keys.end, b, n);
        std::fill(sr, sr + b, 0.0f);
        std::fill(sr + e, sr + n, 0.0f);
    } else {
        for (index_t k = 0; k < n; ++k) sr[k] = keys(k) ? sr[k] : masked;  // a select, not a branch
    }
    const float mx = kt.scale_max(sr + b, e - b, scale);  // masked stays -inf; the max skips NaN
    if (mx == masked) {                                   // no key allowed: output zero
        const bool poisoned = std::any_of(sr + b, sr + e, [](float x) { return std::isnan(x); });
        std::fill(sr + b, sr + e, 0.0f);
        inv = poisoned ? std::numeric_limits<float>::quiet_NaN() : 0.0f;  // NaN scores (a NaN weight) stay NaN in the output
        return;
    }
    inv = 1.0f / kt.exp_shifted_sum(sr + b, e - b, mx);
}

/// Scores of `rows` query rows (row r at s + r·lds, n each) become their unnormalized attention
/// weights: the allowed keys' scores times `scale`, then exp(score − the row's max) by the kernel
/// table; a key not allowed gets weight 0. row_keys(r) gives row r's allowed keys: a key_range
/// (indices into the row), or an `allowed(k)` predicate, evaluated for every key (a select pass).
/// inv[r] is 1 / the row's sum of weights (`exp_shifted_sum`, whose sum does not depend on where
/// the row's keys start in `s`: a row alone and among rows whose keys start elsewhere, or its range
/// and its masked row, sum alike), or 0 for a row with no key allowed (its weights all zeros). The
/// one softmax of every CPU attention: the output rows are the weighted values times inv
/// (`scale_output_rows`), one product per output element instead of one per weight. row_done(r) is
/// called once row r's weights are final, while they are still in L1 (a bf16 store rounds them then).
template <class RowKeys, class RowDone>
void masked_exp_rows(float* s, std::ptrdiff_t lds, index_t rows, index_t n, float scale, RowKeys&& row_keys, const kernel_table& kt,
                     float* inv, RowDone&& row_done) {
    for (index_t r = 0; r < rows; ++r) {
        masked_exp_row(s + r * lds, n, scale, row_keys(r), kt, inv[r]);
        row_done(r);
    }
}
template <class RowKeys>
void masked_exp_rows(float* s, std::ptrdiff_t lds, index_t rows, index_t n, float scale, RowKeys&& row_keys, const kernel_table& kt,
                     float* inv) {
    masked_exp_rows(s, lds, rows, n, scale, row_keys, kt, inv, [](index_t) {});
}

/// out row r (d floats at out + r·out_ld) *= inv[r]: the softmax's normalization (masked_exp_rows).
inline void scale_output_rows(index_t rows, index_t d, float* out, std::ptrdiff_t out_ld, const float* inv, const kernel_table& kt) {
    for (index_t r = 0; r < rows; ++r) kt.scale_max(out + r * out_ld, d, inv[r]);
}

/// One attention task: query head `h`, window rows [r0, r1) of one request.
struct attention_task {
    index_t request, head, r0, r1;
};

/// A run of keys [begin, end) read from one block (of the cache or the window): `keys` and
/// `values` at position `begin` (which sits a multiple of bf16_k_align into its block, or at its
/// start, so a bf16 product's pairs and tiles of keys are the same in every chunking).
struct key_chunk {
    index_t begin, end;
    const kv_shape* shape;
    const std::byte* keys;
    const std::byte* values;
};

/// Calls f(keys, values) with the chunk's B operands in its element type (panel_view for f32,
/// panel_view16 for bf16): the keys for the scores (k = dims), the values for the output (k = keys).
template <class F>
void with_views(const key_chunk& ch, F&& f) {
    const kv_shape& s = *ch.shape;
    if (s.element == io::dtype::bf16) {
        f(panel_view16{reinterpret_cast<const std::uint16_t*>(ch.keys), s.key_panel_stride(), s.key_ldb()},
          panel_view16{reinterpret_cast<const std::uint16_t*>(ch.values), s.value_panel_stride(), s.value_ldb()});
    } else {
        f(panel_view{reinterpret_cast<const float*>(ch.keys), s.key_panel_stride(), s.key_ldb()},
          panel_view{reinterpret_cast<const float*>(ch.values), s.value_panel_stride(), s.value_ldb()});
    }
}

/// The attention's A operand, the queries and then the softmax's weights (`a`, rows `lda` apart), for
/// the product with one chunk's keys or values: read in place on an f32 store; on a bf16 store
/// rounded once per task into `rounded` (round_rows), which the product form reads in place
/// (product16::run_rows), or, where the form has none, rounded and packed per chunk by gemm(). The
/// same rounded values either way, so the same bits; the rounding's cost is paid once, not once per
/// chunk, and without the packers' transposes.
struct attention_operand {
    const float* a;
    std::ptrdiff_t lda;
    const product16* form = nullptr;  ///< the bf16 form with run_rows, or nullptr: packed per chunk
    void* rounded = nullptr;
    std::ptrdiff_t ld = 0;  ///< rounded's row stride, elements

    /// Element (r, col) of `rounded` (bf16 bits or floats, as the form's values are).
    [[nodiscard]] std::byte* rounded_at(index_t r, index_t col) const {
        const std::size_t es = form->values == a_values::bf16_bits ? sizeof(std::uint16_t) : sizeof(float);
        return static_cast<std::byte*>(rounded) + std::size_t(r * ld + col) * es;
    }
    /// Rounds rows [r0, r0 + m) of A's columns [0, k) into `rounded` (a bf16 store with run_rows only).
    void round(index_t r0, index_t m, index_t k) const {
        if (form) round_rows(form->values, m, k, a + r0 * lda, lda, rounded_at(r0, 0), ld);
    }
    /// C (=|+=) A[:, col, col + k) · B.
    void product(index_t m, index_t n, index_t k, index_t col, const panel_view& b, float* c, std::ptrdiff_t ldc, bool acc) const {
        gemm(m, n, k, a + col, lda, b, c, ldc, acc);
    }
    void product(index_t m, index_t n, index_t k, index_t col, const panel_view16& b, float* c, std::ptrdiff_t ldc, bool acc) const {
        if (!form) return gemm(m, n, k, a + col, lda, b, c, ldc, acc);
        if (m <= 0 || n <= 0) return;
        if (col % 2 != 0) throw contract_error("cpu::attend: a bf16 chunk starts at key " + std::to_string(col) + ", inside a k-group of 2");
        form->run_rows(m, n, k, rounded_at(0, col), ld, b, 0, (n + panel_width - 1) / panel_width, c, ldc, acc);
    }
};

/// Runs the attention of one task: rows of `qkv` hold post-RoPE queries; writes the head's output
/// into `out`. `scratch` is this thread's buffer for the scores. Keys and values come from the
/// window's block and the cache's in their element type (bf16: the queries and the softmax's
/// weights are rounded to bf16 for the products, sums in f32: kv_cache.hpp).
template <attention_mask Mask>
void attend(const Mask& mask, const canvas_layout& l, const forward_plan& p, const head_geometry& hg, const float* qkv,
            const window_kv& w, kv_cache* cache, index_t layer, const attention_task& t, float* out,
            std::vector<float, aligned_allocator<float>>& scratch) {
    const index_t d = hg.head_dim, g = t.head / (hg.heads / hg.kv_heads), rows = t.r1 - t.r0;
    index_t kmax = 0;
    for (index_t r = t.r0; r < t.r1; ++r) kmax = std::max(kmax, std::min(p.attend_end, mask.key_end(l, p.window_begin + r)));
    const std::ptrdiff_t lds = round_up(kmax, panel_width) + panel_width;
    // A bf16 store whose product form reads A in place: the rounded queries, then weights, after the scores.
    const product16& bf16 = bf16_product();
    const product16* form = w.blocks.shape.element == io::dtype::bf16 && bf16.run_rows ? &bf16 : nullptr;
    const std::ptrdiff_t ldr = form ? std::max<std::ptrdiff_t>(lds, round_up(d, panel_width)) : 0;
    scratch.resize(static_cast<std::size_t>(rows) * static_cast<std::size_t>(lds + 1 + ldr));
    float* s = scratch.data();
    float* inv = s + rows * lds;  // each row's 1 / sum of weights
    float* rounded = inv + rows;  // bf16 bits use half of each row

    // Key sources in position order: cache before the window's block, the block, cache after it.
    key_chunk chunks[3];
    int n_chunks = 0;
    const kv_blocks cached = cache ? cache->view() : kv_blocks{};
    auto add = [&](index_t b, index_t e, const kv_blocks& from, std::size_t block) {
        e = std::min(e, kmax);
        if (b >= e) return;
        const kv_shape& sh = from.shape;
        const index_t at = b - from.origin;
        chunks[n_chunks++] = {b, e, &sh, from.key_block(block) + std::size_t(sh.key_at(0, at)) * sh.element_size(),
                              from.value_block(block) + std::size_t(sh.value_at(at, 0)) * sh.element_size()};
    };
    const index_t wb = w.blocks.origin, we = wb + w.blocks.shape.positions;
    if (cache) add(0, wb, cached, cache->block(layer, g));
    add(wb, we, w.blocks, static_cast<std::size_t>(g));
    if (cache) add(we, kmax, cached, cache->block(layer, g));

    // Scores: S[r][k] = q_r · k_k.
    const attention_operand q{qkv + t.r0 * hg.qkv_ld + t.head * d, hg.qkv_ld, form, rounded, ldr};
    q.round(0, rows, d);
    for (int c = 0; c < n_chunks; ++c) {
        const key_chunk& ch = chunks[c];
        with_views(ch, [&](const auto& keys, const auto&) { q.product(rows, ch.end - ch.begin, d, 0, keys, s + ch.begin, lds, false); });
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
    const attention_operand weights{s, lds, form, rounded, ldr};
    masked_exp_rows(s, lds, rows, kmax, scale, row_keys, kt, inv, [&](index_t r) { weights.round(r, 1, kmax); });

    // Output: O[r] = inv[r] · Σ_k P[r][k] v_k, keys in order across the chunks.
    float* o = out + t.r0 * hg.out_ld + t.head * d;
    for (int c = 0; c < n_chunks; ++c) {
        const key_chunk& ch = chunks[c];
        with_views(ch, [&](const auto&, const auto& values) { weights.product(rows, d, ch.end - ch.begin, ch.begin, values, o, hg.out_ld, c > 0); });
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
    const std::ptrdiff_t lds = round_up(n, panel_width) + panel_width;
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
