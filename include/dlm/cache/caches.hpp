// dlm/cache/caches.hpp — the shipped KV-cache policies.
#pragma once

#include <algorithm>

#include "concept.hpp"

namespace dlm {

/// No cache: every forward recomputes the whole canvas (LLaDA, Dream).
struct no_cache {
    static constexpr bool is_exact = true;
    static constexpr bool needs_storage = false;

    template <attention_mask Mask>
    [[nodiscard]] forward_plan plan(const Mask&, const canvas_layout& l, const block_cursor& cur) const noexcept {
        const row_range rows = block_rows(l, cur.block);
        return {0, l.size(), rows.begin, rows.end, 0, 0, l.size()};
    }
};

/// Exact prefix cache: finished blocks' K/V are stored once and reused; every forward computes only
/// the active block (per token for a causal mask, per block for block-causal). The finished block's
/// exact K/V are produced in the same forward as the next block's first step, so caching costs no
/// extra forward. Requires a mask whose committed K/V are final.
struct prefix_cache {
    static constexpr bool is_exact = true;
    static constexpr bool needs_storage = true;

    template <attention_mask Mask>
    [[nodiscard]] forward_plan plan(const Mask& mask, const canvas_layout& l, const block_cursor& cur) const noexcept {
        const row_range rows = block_rows(l, cur.block);
        forward_plan p{};
        p.logits_begin = rows.begin;
        p.logits_end = rows.end;
        if (cur.step_in_block == 0) {
            // Store what became final since the last store: the prompt, or the block just finished.
            p.store_begin = cur.block == 0 ? 0 : l.block_begin(cur.block - 1);
            p.store_end = l.block_begin(cur.block);
        }
        p.window_begin = p.stores() ? std::min(p.store_begin, rows.begin) : rows.begin;
        // Every key a window row may see must be fresh (in the window) or cached (before the block).
        p.window_end = std::max(rows.end, mask.key_end(l, rows.end - 1));
        p.attend_end = p.window_end;
        return p;
    }
};

namespace detail {
/// Fast-dLLM's refresh: a full forward at a block's first step that (re)writes every position's K/V.
inline forward_plan refresh_plan(const canvas_layout& l, const block_cursor& cur) noexcept {
    const row_range rows = block_rows(l, cur.block);
    return {0, l.size(), rows.begin, rows.end, 0, l.size(), l.size()};
}
}  // namespace detail

/// Fast-dLLM's approximate prefix cache: a full forward at each block's first step refreshes every
/// K/V; the block's later steps recompute the block and everything after it, reusing the (stale for
/// bidirectional masks) prefix K/V.
struct approx_prefix_cache {
    static constexpr bool is_exact = false;
    static constexpr bool needs_storage = true;

    template <attention_mask Mask>
    [[nodiscard]] forward_plan plan(const Mask&, const canvas_layout& l, const block_cursor& cur) const noexcept {
        if (cur.step_in_block == 0) return detail::refresh_plan(l, cur);
        const row_range rows = block_rows(l, cur.block);
        return {rows.begin, l.size(), rows.begin, rows.end, 0, 0, l.size()};
    }
};

/// Fast-dLLM's dual cache: as the prefix cache, but the suffix after the block is cached too; later
/// steps recompute only the active block's rows.
struct dual_cache {
    static constexpr bool is_exact = false;
    static constexpr bool needs_storage = true;

    template <attention_mask Mask>
    [[nodiscard]] forward_plan plan(const Mask&, const canvas_layout& l, const block_cursor& cur) const noexcept {
        if (cur.step_in_block == 0) return detail::refresh_plan(l, cur);
        const row_range rows = block_rows(l, cur.block);
        return {rows.begin, std::max(rows.end, l.block_end(cur.block)), rows.begin, rows.end, 0, 0, l.size()};
    }
};

/// Fast-dLLM v2's sub-block cache (`use_block_cache=True` of batch_sample / generate()), on top of the
/// exact prefix cache: a block's K/V are kept from its last full forward, and while the first slot of
/// the sub-block being decoded (the one holding the block's first masked slot) is committed, a forward
/// recomputes only that sub-block's rows, attending to the cached prefix, the cached rest of the block
/// and its own fresh K/V. A full forward over the block (which stores the block's K/V) runs when
/// that first slot is still masked and at each block's first denoising forward (the reference starts
/// every block without a block cache): step 0, and step 1 after a step 0 that committed the block's
/// first slot alone (sub_block_threshold_schedule; a block that begins inside the prompt has none).
/// Approximate: the rest of the block is seen as it was at the last full forward. `sub_block` must be
/// the schedule's (the decoder checks).
struct sub_block_cache {
    static constexpr bool is_exact = false;
    static constexpr bool needs_storage = true;
    index_t sub_block = 8;

    template <attention_mask Mask>
    [[nodiscard]] forward_plan plan(const Mask& mask, const canvas_layout& l, const block_cursor& cur, const canvas_view& canvas) const {
        forward_plan full = prefix_cache{}.plan(mask, l, cur);  // the whole block's rows (and the finished block's store at step 0)
        const index_t begin = l.block_begin(cur.block), end = l.block_end(cur.block);
        if (!full.stores()) full.store_begin = begin;  // contiguous with a finished block's store: [its begin, end)
        full.store_end = std::max(full.store_end, end);
        full.window_begin = std::min(full.window_begin, full.store_begin);
        full.window_end = std::max(full.window_end, end);
        const bool first_slot_alone = l.first_slot(cur.block) == begin;  // step 0 committed the block's first slot
        if (cur.step_in_block < (first_slot_alone ? 2 : 1)) return full;
        index_t first = begin;
        while (first < end && !canvas.masked(first)) ++first;
        if (first == end || sub_block < 2) return full;
        const index_t s = begin + (first - begin) / sub_block * sub_block, e = std::min(s + sub_block, end);
        if (canvas.masked(s)) return full;
        // Rows [s, e): with the shift, rows [s, e - 1) predict the sub-block's slots after its first
        // (committed); without it rows [s, e) predict [s, e).
        return {s, e, s, l.shift ? e - 1 : e, 0, 0, std::max(e, mask.key_end(l, e - 1))};
    }
};

static_assert(kv_cache_policy<no_cache>);
static_assert(kv_cache_policy<prefix_cache>);
static_assert(kv_cache_policy<approx_prefix_cache>);
static_assert(kv_cache_policy<dual_cache>);
static_assert(kv_cache_policy<sub_block_cache>);

}  // namespace dlm
