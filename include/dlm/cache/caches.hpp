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

static_assert(kv_cache_policy<no_cache>);
static_assert(kv_cache_policy<prefix_cache>);
static_assert(kv_cache_policy<approx_prefix_cache>);
static_assert(kv_cache_policy<dual_cache>);

}  // namespace dlm
