// dlm/sampler/concept.hpp — the sampler policy axis: a slot's token and confidence from its logits.
#pragma once

#include <concepts>
#include <span>

#include "../core/hooks.hpp"
#include "../core/rng.hpp"

namespace dlm {

/// What a sampler returns for one slot: the chosen token and three confidence measures of the
/// distribution it was drawn from (schedules pick the measure they rank by).
struct slot_choice {
    token_id token = no_token;
    float probability = 0.f;  ///< p(token)
    float margin = 0.f;       ///< p(top-1) - p(top-2)
    float neg_entropy = 0.f;  ///< sum_i p_i log p_i (<= 0; 0 is certain)
};

/// Hook: `s.sample(logits, key, banned)` — draw a token for one slot from its logits row. `key`
/// addresses the slot's random numbers; `banned` lists tokens that must not be chosen (their logits
/// count as -inf). Must be a pure function of its arguments (so decoding is reproducible).
template <class S>
concept sampler_has_sample =
    requires(const S& s, std::span<const float> logits, const random_key& key, std::span<const token_id> banned) {
        { s.sample(logits, key, banned) } -> std::same_as<slot_choice>;
    };

// Optional hooks of a sampler: this is the one list (core/hooks.hpp says how it is checked).

/// `void validate() const` — throw dlm::invalid_parameter for options the sampler cannot serve
/// (called when a decoder is built and for each sequence's own sampler).
template <class S>
concept sampler_has_validate = requires(const S& s) { s.validate(); };

/// Opt-in, outside the class: `template <> inline constexpr bool dlm::enable_concurrent_sampling<S> = true;`
/// — sampler S may be called from several threads at once (for different slots of a step): it keeps
/// no shared mutable state (scratch is thread_local or on the stack). The host stepper then draws a
/// step's slots on OpenMP's threads, where the program is built with OpenMP; the tokens are the same
/// either way (each slot's draw is its own). Without it, slots are drawn one after another on the
/// calling thread. A variable template, not a member, so that it is not inherited: a sampler derived
/// from a shipped one, with a sample() and state of its own, is drawn in turn unless it opts in itself.
template <class S>
inline constexpr bool enable_concurrent_sampling = false;
template <class S>
concept sampler_is_concurrent = enable_concurrent_sampling<S>;

#define DLM_SAMPLER_HOOKS "`void validate() const`, and outside the class `dlm::enable_concurrent_sampling<S>`"

/// A member spelled like the opt-in (which is a variable template outside the class) is refused.
template <class S>
concept sampler_hook_misnamed = DLM_HAS_MEMBER_NAMED(S, validates) || DLM_HAS_MEMBER_NAMED(S, validate_options) ||
                                DLM_HAS_MEMBER_NAMED(S, concurrent) || DLM_HAS_MEMBER_NAMED(S, thread_safe) ||
                                DLM_HAS_MEMBER_NAMED(S, enable_concurrent_sampling);
template <class S>
concept sampler_hook_mistyped = DLM_HAS_MEMBER_NAMED(S, validate) && !sampler_has_validate<S>;
/// Every member named like a sampler hook is one, in its known form.
template <class S>
concept sampler_hooks_known = !sampler_hook_misnamed<S> && !sampler_hook_mistyped<S>;

/// A sampler policy.
template <class S>
concept token_sampler = std::copyable<S> && sampler_has_sample<S> && sampler_hooks_known<S>;

/// The loop's call of the optional hook.
template <class S>
void sampler_validate(const S& s) {
    if constexpr (sampler_has_validate<S>) s.validate();
}

}  // namespace dlm
