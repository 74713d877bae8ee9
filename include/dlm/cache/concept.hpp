// dlm/cache/concept.hpp — the KV-cache policy axis: what does a forward recompute, and what is reused?
//
// A cache policy plans each forward (its query window, the rows whose logits are needed, the keys it
// attends to and the K/V it stores). The K/V tensors themselves live in the model's per-sequence
// cache object; the policy only decides.
#pragma once

#include <concepts>
#include <type_traits>

#include "../mask/masks.hpp"
#include "../core/hooks.hpp"
#include "../core/plan.hpp"

namespace dlm {

/// Hook: `c.plan(mask, layout, cursor)` — the forward to run for a sequence at `cursor` — or
/// `c.plan(mask, layout, cursor, canvas)` for a policy whose forwards depend on what is committed.
/// Checked with the bidirectional mask; a policy may constrain which masks it accepts.
template <class C>
concept cache_has_plan = requires(const C& c, const canvas_layout& l, const block_cursor& cur) {
    { c.plan(bidirectional_mask{}, l, cur) } -> std::same_as<forward_plan>;
} || requires(const C& c, const canvas_layout& l, const block_cursor& cur) {
    { c.plan(block_causal_mask{}, l, cur) } -> std::same_as<forward_plan>;
} || requires(const C& c, const canvas_layout& l, const block_cursor& cur, const canvas_view& v) {
    { c.plan(block_causal_mask{}, l, cur, v) } -> std::same_as<forward_plan>;
};

/// The forward `cache` plans for a sequence: with its canvas when the policy asks for it.
template <class C, class Mask>
[[nodiscard]] forward_plan plan_forward(const C& cache, const Mask& mask, const canvas_layout& l, const block_cursor& cur,
                                        const canvas_view& canvas) {
    if constexpr (requires { cache.plan(mask, l, cur, canvas); })
        return cache.plan(mask, l, cur, canvas);
    else
        return cache.plan(mask, l, cur);
}

/// Trait: `C::is_exact` — does this cache reproduce a full recompute exactly? An exact cache needs a
/// mask whose committed K/V are final (the decoder refuses the other combinations at compile time).
template <class C>
concept cache_has_exactness_trait = requires {
    { std::bool_constant<C::is_exact>{} };
};

/// Trait: `C::needs_storage` — does the model have to keep K/V between forwards?
template <class C>
concept cache_has_storage_trait = requires {
    { std::bool_constant<C::needs_storage>{} };
};

// Optional hooks of a cache: this is the one list (core/hooks.hpp says how it is checked). The
// canvas_view form of plan (above) is the other form of the required hook.

/// `index_t sub_block` — the cache recomputes sub-blocks of this many slots; the schedule must
/// decode the same sub-blocks (cache/compatibility.hpp).
template <class C>
concept cache_has_sub_block = requires(const C& c) {
    { c.sub_block } -> std::convertible_to<index_t>;
};

#define DLM_CACHE_HOOKS "`index_t sub_block` (and plan's form with a trailing `const canvas_view&`)"

template <class C>
concept cache_hook_misnamed = DLM_HAS_MEMBER_NAMED(C, sub_blocks) || DLM_HAS_MEMBER_NAMED(C, sub_block_size);
template <class C>
concept cache_hook_mistyped = DLM_HAS_MEMBER_NAMED(C, sub_block) && !cache_has_sub_block<C>;
/// Every member named like a cache hook is one, in its known form.
template <class C>
concept cache_hooks_known = !cache_hook_misnamed<C> && !cache_hook_mistyped<C>;

/// A KV-cache policy.
template <class C>
concept kv_cache_policy =
    std::copyable<C> && cache_has_plan<C> && cache_has_exactness_trait<C> && cache_has_storage_trait<C> && cache_hooks_known<C>;

}  // namespace dlm
