// dlm/mask/concept.hpp — the attention-mask policy axis: which keys may a query attend to?
//
// A mask is a small copyable value (FlashInfer's "variant" idea): the attention kernels, CPU and CUDA,
// take its type as a template parameter and call `allowed` inline per (query, key) pair, so choosing a
// mask costs nothing at run time. The mask also owns the block structure of the generation.
#pragma once

#include <concepts>
#include <optional>
#include <type_traits>

#include "../core/hooks.hpp"
#include "../core/layout.hpp"

namespace dlm {

/// Hook: `m.allowed(layout, q, k)` — may query position q attend to key position k?
template <class M>
concept mask_has_allowed = requires(const M& m, const canvas_layout& l, index_t q, index_t k) {
    { m.allowed(l, q, k) } -> std::same_as<bool>;
};

/// Hook: `m.key_end(layout, q)` — one past the last key q may attend to (a loop bound for kernels;
/// `allowed(l, q, k)` must be false for every k >= key_end).
template <class M>
concept mask_has_key_end = requires(const M& m, const canvas_layout& l, index_t q) {
    { m.key_end(l, q) } -> std::same_as<index_t>;
};

/// Hook: `m.block_length_for(gen_length)` — the block size this mask uses for a generation of that
/// length; throws dlm::invalid_parameter when the mask's own block length does not fit.
template <class M>
concept mask_has_block_length = requires(const M& m, index_t gen_length) {
    { m.block_length_for(gen_length) } -> std::same_as<index_t>;
};

/// Trait: `M::committed_kv_is_final` — once a block is committed, are its keys and values final?
/// True when no key ever attends to a later block (causal, block-causal): then an exact KV cache is
/// possible. False when every position sees the whole canvas (bidirectional).
template <class M>
concept mask_has_finality_trait = requires {
    { std::bool_constant<M::committed_kv_is_final>{} };
};

// Optional hooks of a mask: this is the one list (core/hooks.hpp says how it is checked).

/// `std::optional<index_t> block_length` — the block size is a user option; left unset, the decoder
/// fills it with the model's block length (or the library's 32).
template <class M>
concept mask_has_block_length_option = requires(M m) {
    { m.block_length } -> std::same_as<std::optional<index_t>&>;
};
/// `bool align_blocks` — lay the blocks on multiples of the block length from position 0
/// (canvas_layout::lead), as the block-diffusion references do.
template <class M>
concept mask_has_align_blocks = requires(const M& m) {
    { m.align_blocks } -> std::convertible_to<bool>;
};

/// `static constexpr bool allowed_is_prefix` — allowed(l, q, k) is exactly k < key_end(l, q) for
/// every layout, query and key: a query's keys are one prefix, so a kernel may take them as a range
/// instead of asking `allowed` key by key (the CPU attention does). Every mask dlm ships declares it
/// true; a mask that leaves keys out below key_end must not declare it (or declare it false).
template <class M>
concept mask_has_prefix_trait = requires {
    { std::bool_constant<M::allowed_is_prefix>{} };
};

#define DLM_MASK_HOOKS "`std::optional<index_t> block_length`, `bool align_blocks` and `static constexpr bool allowed_is_prefix`"

template <class M>
concept mask_hook_misnamed = DLM_HAS_MEMBER_NAMED(M, align_block) || DLM_HAS_MEMBER_NAMED(M, aligned_blocks) ||
                             DLM_HAS_MEMBER_NAMED(M, block_lengths) || DLM_HAS_MEMBER_NAMED(M, block_len) ||
                             DLM_HAS_MEMBER_NAMED(M, allowed_is_a_prefix) || DLM_HAS_MEMBER_NAMED(M, allowed_prefix) ||
                             DLM_HAS_MEMBER_NAMED(M, keys_are_prefix);
template <class M>
concept mask_hook_mistyped = (DLM_HAS_MEMBER_NAMED(M, block_length) && !mask_has_block_length_option<M>) ||
                             (DLM_HAS_MEMBER_NAMED(M, align_blocks) && !mask_has_align_blocks<M>) ||
                             (DLM_HAS_MEMBER_NAMED(M, allowed_is_prefix) && !mask_has_prefix_trait<M>);
/// Every member named like a mask hook is one, in its known form.
template <class M>
concept mask_hooks_known = !mask_hook_misnamed<M> && !mask_hook_mistyped<M>;

/// An attention mask policy.
template <class M>
concept attention_mask = std::copyable<M> && mask_has_allowed<M> && mask_has_key_end<M> &&
                         mask_has_block_length<M> && mask_has_finality_trait<M> && mask_hooks_known<M>;

/// The loop's call of the optional hook: does the mask lay its blocks from position 0?
template <class M>
[[nodiscard]] constexpr bool mask_aligns_blocks(const M& m) noexcept {
    if constexpr (mask_has_align_blocks<M>) return static_cast<bool>(m.align_blocks);
    else return false;
}

/// The kernels' call of the optional trait: may a query's keys be taken as [0, key_end)?
template <class M>
[[nodiscard]] constexpr bool mask_allowed_is_prefix() noexcept {
    if constexpr (mask_has_prefix_trait<M>) return M::allowed_is_prefix;
    else return false;
}

}  // namespace dlm
