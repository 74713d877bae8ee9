// dlm/core/plan.hpp — where a sequence stands (block_cursor) and what one model forward computes for it
// (forward_plan): the vocabulary shared by the cache policies, the models and the engine.
#pragma once

#include <span>

#include "layout.hpp"

namespace dlm {

/// Where a sequence stands: which block is active and how many forwards it has had.
struct block_cursor {
    index_t block = 0;          ///< active block
    index_t step_in_block = 0;  ///< forwards already spent on this block (0: the block's first forward)
};

/// One forward for one sequence, in absolute canvas positions (half-open ranges).
///
/// The forward computes hidden states for the query rows [window_begin, window_end). Keys in
/// [0, attend_end) that the mask allows are attended to: those inside the window with freshly computed
/// K/V, those outside it from the model's KV cache (they must have been stored before). Afterwards
/// the fresh K/V of [store_begin, store_end) are written into the cache, and the logits of rows
/// [logits_begin, logits_end) are returned.
struct forward_plan {
    index_t window_begin = 0, window_end = 0;
    index_t logits_begin = 0, logits_end = 0;
    index_t store_begin = 0, store_end = 0;
    index_t attend_end = 0;

    [[nodiscard]] constexpr index_t window_size() const noexcept { return window_end - window_begin; }
    [[nodiscard]] constexpr index_t logits_rows() const noexcept { return logits_end - logits_begin; }
    [[nodiscard]] constexpr bool stores() const noexcept { return store_end > store_begin; }
    friend constexpr bool operator==(const forward_plan&, const forward_plan&) = default;
};

/// The canvas a plan may look at (a cache whose forwards depend on what is committed: sub_block_cache).
struct canvas_view {
    std::span<const token_id> tokens;
    token_id mask_id = 0;
    [[nodiscard]] constexpr bool masked(index_t p) const noexcept { return tokens[static_cast<std::size_t>(p)] == mask_id; }
};

/// The output rows whose logits predict the slots of block `b`: [begin - shift, end - shift), from row
/// 0 at the least. (With blocks aligned to the canvas, a prompt shorter than a block sits in block 0,
/// whose first position predicts nothing on a shifted model: row −1 does not exist, and its slots'
/// rows start after the prompt anyway.)
struct row_range {
    index_t begin, end;
};
[[nodiscard]] constexpr row_range block_rows(const canvas_layout& l, index_t b) noexcept {
    const index_t s = l.shift ? 1 : 0;
    const index_t begin = l.block_begin(b) - s;
    return {begin < 0 ? 0 : begin, l.block_end(b) - s};
}

}  // namespace dlm
