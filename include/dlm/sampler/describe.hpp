// dlm/sampler/describe.hpp — what a row of logits says of one token: its probability, the top-1 minus
// top-2 margin and the negative entropy of the softmax (a sampler's confidences; a uniform-state
// step's entropies of its tempered rows, engine/host_stepper.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>

#include "concept.hpp"

namespace dlm::detail {

inline constexpr float neg_inf = -std::numeric_limits<float>::infinity();

inline bool is_banned(token_id t, std::span<const token_id> banned) noexcept {
    return std::find(banned.begin(), banned.end(), t) != banned.end();
}

/// describe()'s figures of a row, with the first index of its largest allowed value (torch.argmax's
/// tie rule) and the softmax's normalizer sum_i exp(z_i - max): the top token's probability is 1 / sum.
struct row_summary {
    slot_choice choice;
    std::size_t top = 0;
    double sum = 0.0;
};

/// p(token), top-1 minus top-2 probability and sum p log p of softmax(z), in one pass after the max;
/// the ids in `banned` count as -inf (a uniform-state step's entropies of its tempered row, whatever
/// the sampler draws from). A non-finite logit (NaN, or +Inf) makes every field NaN, which the
/// decoder reports.
inline row_summary summarize(std::span<const float> z, token_id token, std::span<const token_id> banned = {}) noexcept {
    float m1 = neg_inf, m2 = neg_inf;
    std::size_t top = 0;
    bool bad = false;
    const auto value = [&](std::size_t i) { return banned.empty() || !is_banned(static_cast<token_id>(i), banned) ? z[i] : neg_inf; };
    for (std::size_t i = 0; i < z.size(); ++i) {
        const float v = value(i);
        if (std::isnan(v) || v == std::numeric_limits<float>::infinity()) bad = true;
        if (v > m1) {
            m2 = m1;
            m1 = v;
            top = i;
        } else if (v > m2) {
            m2 = v;
        }
    }
    if (bad || m1 == neg_inf) {
        const float nan = std::numeric_limits<float>::quiet_NaN();
        return {{token, nan, nan, nan}, top, std::numeric_limits<double>::quiet_NaN()};
    }
    double sum = 0.0, weighted = 0.0;
    for (std::size_t i = 0; i < z.size(); ++i) {
        const float v = value(i);
        if (v == neg_inf) continue;
        const double e = std::exp(static_cast<double>(v) - m1);
        sum += e;
        weighted += e * (static_cast<double>(v) - m1);
    }
    const double log_sum = std::log(sum);
    slot_choice c{token, 0.f, 0.f, 0.f};
    c.probability = static_cast<float>(std::exp(static_cast<double>(value(static_cast<std::size_t>(token))) - m1) / sum);
    c.margin = static_cast<float>((1.0 - (m2 == neg_inf ? 0.0 : std::exp(static_cast<double>(m2) - m1))) / sum);
    c.neg_entropy = static_cast<float>(weighted / sum - log_sum);
    return {c, top, sum};
}

/// summarize()'s confidences of `token`.
inline slot_choice describe(std::span<const float> z, token_id token, std::span<const token_id> banned = {}) noexcept {
    return summarize(z, token, banned).choice;
}

}  // namespace dlm::detail
