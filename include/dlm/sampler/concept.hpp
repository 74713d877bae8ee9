// dlm/sampler/concept.hpp — the sampler policy axis: a slot's token and confidence from its logits.
#pragma once

#include <concepts>
#include <span>

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

/// A sampler policy.
template <class S>
concept token_sampler = std::copyable<S> && sampler_has_sample<S>;

}  // namespace dlm
