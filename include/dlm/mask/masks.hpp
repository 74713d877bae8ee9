// dlm/mask/masks.hpp — the shipped attention masks.
#pragma once

#include <optional>
#include <string>

#include "../core/defaults.hpp"
#include "../core/error.hpp"
#include "concept.hpp"

namespace dlm {

namespace detail {
inline index_t checked_block_length(index_t block_length, index_t gen_length) {
    if (block_length < 1) throw invalid_parameter("block_length", "must be >= 1, got " + std::to_string(block_length));
    if (gen_length % block_length != 0)
        throw invalid_parameter("block_length", "must divide gen_length (" + std::to_string(gen_length) +
                                                    "), got " + std::to_string(block_length));
    return block_length;
}
}  // namespace detail

/// Causal: k <= q. Blocks of one slot (autoregressive decoding).
struct causal_mask {
    static constexpr bool committed_kv_is_final = true;
    static constexpr bool allowed_is_prefix = true;

    [[nodiscard]] DLM_HOST_DEVICE constexpr bool allowed(const canvas_layout&, index_t q, index_t k) const noexcept {
        return k <= q;
    }
    [[nodiscard]] DLM_HOST_DEVICE constexpr index_t key_end(const canvas_layout&, index_t q) const noexcept {
        return q + 1;
    }
    [[nodiscard]] index_t block_length_for(index_t) const noexcept { return 1; }
};

/// Bidirectional: every position sees the whole canvas; one block spanning the generation
/// (Dream's diffusion_generate).
struct bidirectional_mask {
    static constexpr bool committed_kv_is_final = false;
    static constexpr bool allowed_is_prefix = true;

    [[nodiscard]] DLM_HOST_DEVICE constexpr bool allowed(const canvas_layout&, index_t, index_t) const noexcept {
        return true;
    }
    [[nodiscard]] DLM_HOST_DEVICE constexpr index_t key_end(const canvas_layout& l, index_t) const noexcept {
        return l.size();
    }
    [[nodiscard]] index_t block_length_for(index_t gen_length) const noexcept { return gen_length; }
};

/// Bidirectional attention with semi-autoregressive blocks (LLaDA's `block_length`): attention is
/// unrestricted, but slots are committed block by block, left to right. Unset, the decoder takes the
/// model's block length (dlm_block_length), else 32, what LLaDA's example, Fast-dLLM's and CD4LM's
/// evaluation scripts use; 0 means one block spanning the whole generation (the default of LLaDA's
/// generate()).
struct semi_ar_mask {
    std::optional<index_t> block_length{};
    static constexpr bool committed_kv_is_final = false;
    static constexpr bool allowed_is_prefix = true;

    [[nodiscard]] DLM_HOST_DEVICE constexpr bool allowed(const canvas_layout&, index_t, index_t) const noexcept {
        return true;
    }
    [[nodiscard]] DLM_HOST_DEVICE constexpr index_t key_end(const canvas_layout& l, index_t) const noexcept {
        return l.size();
    }
    [[nodiscard]] index_t block_length_for(index_t gen_length) const {
        const index_t b = block_length.value_or(default_block_length);
        return detail::checked_block_length(b == 0 ? gen_length : b, gen_length);
    }
};

/// Block-wise causal (CDLM): the prompt attends to itself bidirectionally; block b attends to the
/// prompt, to blocks < b, and to itself bidirectionally. No key ever sees a later block, so a finished
/// block's K/V are exact and can be cached. Unset, the block length is the model's (dlm_block_length:
/// a block-causal student must be decoded with the blocks it was trained with), else 32 (CDLM's).
struct block_causal_mask {
    std::optional<index_t> block_length{};
    static constexpr bool committed_kv_is_final = true;
    static constexpr bool allowed_is_prefix = true;

    [[nodiscard]] DLM_HOST_DEVICE constexpr bool allowed(const canvas_layout& l, index_t q, index_t k) const noexcept {
        return k < key_end(l, q);
    }
    [[nodiscard]] DLM_HOST_DEVICE constexpr index_t key_end(const canvas_layout& l, index_t q) const noexcept {
        const index_t b = l.block_of(q);
        return b < 0 ? l.prompt_length : l.block_end(b);
    }
    [[nodiscard]] index_t block_length_for(index_t gen_length) const {
        return detail::checked_block_length(block_length.value_or(default_block_length), gen_length);
    }
};

static_assert(attention_mask<causal_mask>);
static_assert(attention_mask<bidirectional_mask>);
static_assert(attention_mask<semi_ar_mask>);
static_assert(attention_mask<block_causal_mask>);

}  // namespace dlm
