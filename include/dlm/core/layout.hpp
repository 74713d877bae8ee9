// dlm/core/layout.hpp — the canvas [prompt | generation slots] and its blocks.
#pragma once

#include "config.hpp"

namespace dlm {

/// Geometry of one sequence's canvas: `prompt_length` prompt tokens, then `gen_length` slots that
/// start as MASK, split into blocks of `block_length` slots (the unit of semi-autoregressive
/// progress). All positions are absolute canvas positions. Usable in device code.
struct canvas_layout {
    index_t prompt_length = 0;
    index_t gen_length = 0;
    index_t block_length = 0;
    /// Dream-family models predict slot p from output row p-1; LLaDA-family from row p.
    bool shift = false;

    [[nodiscard]] DLM_HOST_DEVICE constexpr index_t size() const noexcept { return prompt_length + gen_length; }
    [[nodiscard]] DLM_HOST_DEVICE constexpr index_t block_count() const noexcept {
        return block_length > 0 ? gen_length / block_length : 0;
    }
    /// First position of block `b`.
    [[nodiscard]] DLM_HOST_DEVICE constexpr index_t block_begin(index_t b) const noexcept {
        return prompt_length + b * block_length;
    }
    /// One past the last position of block `b`.
    [[nodiscard]] DLM_HOST_DEVICE constexpr index_t block_end(index_t b) const noexcept {
        return prompt_length + (b + 1) * block_length;
    }
    /// Block of position `p`; the prompt is block -1.
    [[nodiscard]] DLM_HOST_DEVICE constexpr index_t block_of(index_t p) const noexcept {
        return p < prompt_length ? -1 : (p - prompt_length) / block_length;
    }
    /// The output row whose logits predict slot `p`.
    [[nodiscard]] DLM_HOST_DEVICE constexpr index_t row_for_slot(index_t p) const noexcept {
        return shift ? p - 1 : p;
    }
};

}  // namespace dlm
