// dlm/mask/block_diffusion.hpp — the attention of natively block-causal diffusion LMs (SDAR,
// LLaDA2.x, Fast-dLLM v2): blocks laid from the canvas start, the prompt included.
#pragma once

#include <optional>
#include <string>

#include "../core/defaults.hpp"
#include "concept.hpp"
#include "masks.hpp"

namespace dlm {

/// Block-causal attention with the prompt cut into blocks too, as the block-diffusion references
/// build it (SDAR generate.py and LLaDA2's generate(): tril(ones(blocks, blocks)) repeated
/// block_length times along both axes): a prompt position q attends to [0, min(prompt_length,
/// (q / B + 1) · B)), a generation slot to everything up to the end of its own block. Unlike
/// block_causal_mask (CDLM), the prompt is not one bidirectional block.
///
/// The references also start the first generation block on a multiple of B, so that a prompt whose
/// length is not a multiple of B shares its last block with the first generated slots. With
/// `align_blocks` dlm does the same (canvas_layout::lead = prompt_length mod B): those prompt
/// positions are rows of block 0, attend to its slots and are recomputed until it is finished, and
/// any gen_length is accepted (the last block ends at the canvas end). Without it the generation
/// blocks start at the prompt's end: the last prompt block sees only the prompt, gen_length must be
/// a multiple of B, and the blocks are shifted by prompt_length mod B. With a prompt of whole blocks
/// the two are the same attention, forward for forward (docs/policies.md).
struct block_diffusion_mask {
    std::optional<index_t> block_length{};
    bool align_blocks = false;
    static constexpr bool committed_kv_is_final = true;
    static constexpr bool allowed_is_prefix = true;

    [[nodiscard]] DLM_HOST_DEVICE constexpr bool allowed(const canvas_layout& l, index_t q, index_t k) const noexcept {
        return k < key_end(l, q);
    }
    [[nodiscard]] DLM_HOST_DEVICE constexpr index_t key_end(const canvas_layout& l, index_t q) const noexcept {
        if (q >= l.prompt_length) return l.block_end(l.block_of(q));
        if (q >= l.prompt_length - l.lead) return l.block_end(0);  // a prompt position of block 0
        const index_t end = (q / l.block_length + 1) * l.block_length;
        return end < l.prompt_length ? end : l.prompt_length;
    }
    [[nodiscard]] index_t block_length_for(index_t gen_length) const {
        const index_t b = block_length.value_or(default_block_length);
        if (align_blocks) {
            if (b < 1) throw invalid_parameter("block_length", "must be >= 1, got " + std::to_string(b));
            return b;
        }
        return detail::checked_block_length(b, gen_length);
    }
};

static_assert(attention_mask<block_diffusion_mask>);
static_assert(mask_has_block_length_option<block_diffusion_mask>);

/// The block-diffusion references' attention as their generate functions lay it out (SDAR's
/// generate.py, LLaDA2MoeModelLM.generate, Fast_dLLM_QwenForCausalLM.generate): block_diffusion_mask
/// with align_blocks, the first generation block starting on the last multiple of B inside the prompt.
struct aligned_block_diffusion_mask : block_diffusion_mask {
    constexpr aligned_block_diffusion_mask() noexcept : block_diffusion_mask{{}, true} {}
    constexpr explicit aligned_block_diffusion_mask(std::optional<index_t> b) noexcept : block_diffusion_mask{b, true} {}
};

static_assert(attention_mask<aligned_block_diffusion_mask>);
static_assert(mask_has_block_length_option<aligned_block_diffusion_mask>);

}  // namespace dlm
