// dlm/core/layout.hpp — the canvas [prompt | generation slots] and its blocks.
#pragma once

#include "config.hpp"

namespace dlm {

/// A schedule that leaves a block unfinished after this many forwards per slot is broken: the decoders
/// throw dlm::contract_error instead of looping forever, and the schedules whose steps are a count
/// (Dream's) refuse more steps per block than this allows.
inline constexpr index_t max_steps_per_slot = 64;

/// Geometry of one sequence's canvas: `prompt_length` prompt tokens, then `gen_length` slots that
/// start as MASK, split into blocks of `block_length` positions (the unit of semi-autoregressive
/// progress). All positions are absolute canvas positions. Usable in device code.
///
/// `lead` > 0 lays the blocks on multiples of block_length from position 0, as the block-diffusion
/// references do (SDAR's generate.py): the last `lead` prompt positions (prompt_length mod
/// block_length) belong to block 0, which then holds block_length − lead slots, and the last block
/// may be short (it ends at the canvas end). lead = 0: blocks start at the prompt's end.
struct canvas_layout {
    index_t prompt_length = 0;
    index_t gen_length = 0;
    index_t block_length = 0;
    /// Dream-family models predict slot p from output row p-1; LLaDA-family from row p.
    bool shift = false;
    /// Prompt positions that share block 0 with the first slots (see above).
    index_t lead = 0;

    [[nodiscard]] DLM_HOST_DEVICE constexpr index_t size() const noexcept { return prompt_length + gen_length; }
    [[nodiscard]] DLM_HOST_DEVICE constexpr index_t block_count() const noexcept {
        return block_length > 0 ? (gen_length + lead + block_length - 1) / block_length : 0;
    }
    /// First position of block `b` (block 0 starts `lead` positions inside the prompt).
    [[nodiscard]] DLM_HOST_DEVICE constexpr index_t block_begin(index_t b) const noexcept {
        return prompt_length - lead + b * block_length;
    }
    /// One past the last position of block `b`.
    [[nodiscard]] DLM_HOST_DEVICE constexpr index_t block_end(index_t b) const noexcept {
        const index_t end = prompt_length - lead + (b + 1) * block_length;
        return end < size() ? end : size();
    }
    /// Block of position `p`; the prompt (its lead positions included) is block -1.
    [[nodiscard]] DLM_HOST_DEVICE constexpr index_t block_of(index_t p) const noexcept {
        return p < prompt_length ? -1 : (p - prompt_length + lead) / block_length;
    }
    /// First generation slot of block `b` (block 0's first positions may be the prompt's).
    [[nodiscard]] DLM_HOST_DEVICE constexpr index_t first_slot(index_t b) const noexcept {
        const index_t begin = block_begin(b);
        return begin > prompt_length ? begin : prompt_length;
    }
    /// Generation slots of block `b`.
    [[nodiscard]] DLM_HOST_DEVICE constexpr index_t slots_in_block(index_t b) const noexcept { return block_end(b) - first_slot(b); }
    /// The output row whose logits predict slot `p`.
    [[nodiscard]] DLM_HOST_DEVICE constexpr index_t row_for_slot(index_t p) const noexcept {
        return shift ? p - 1 : p;
    }
};

}  // namespace dlm
