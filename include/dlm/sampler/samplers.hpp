// dlm/sampler/samplers.hpp — greedy and categorical (temperature, top-k, top-p) sampling.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "concept.hpp"
#include "temperature.hpp"

namespace dlm {

namespace detail {

inline constexpr float neg_inf = -std::numeric_limits<float>::infinity();

inline bool is_banned(token_id t, std::span<const token_id> banned) noexcept {
    return std::find(banned.begin(), banned.end(), t) != banned.end();
}

/// p(token), top-1 minus top-2 probability and sum p log p of softmax(z), in one pass after the max.
/// A non-finite logit (NaN, or +Inf) makes every field NaN, which the decoder reports.
inline slot_choice describe(std::span<const float> z, token_id token) noexcept {
    float m1 = neg_inf, m2 = neg_inf;
    bool bad = false;
    for (float v : z) {
        if (std::isnan(v) || v == std::numeric_limits<float>::infinity()) bad = true;
        if (v > m1) {
            m2 = m1;
            m1 = v;
        } else if (v > m2) {
            m2 = v;
        }
    }
    slot_choice c{token, 0.f, 0.f, 0.f};
    if (bad || m1 == neg_inf) {
        const float nan = std::numeric_limits<float>::quiet_NaN();
        return {token, nan, nan, nan};
    }
    double sum = 0.0, weighted = 0.0;
    for (float v : z) {
        if (v == neg_inf) continue;
        const double e = std::exp(static_cast<double>(v) - m1);
        sum += e;
        weighted += e * (static_cast<double>(v) - m1);
    }
    const double log_sum = std::log(sum);
    c.probability = static_cast<float>(std::exp(static_cast<double>(z[static_cast<std::size_t>(token)]) - m1) / sum);
    c.margin = static_cast<float>((1.0 - (m2 == neg_inf ? 0.0 : std::exp(static_cast<double>(m2) - m1))) / sum);
    c.neg_entropy = static_cast<float>(weighted / sum - log_sum);
    return c;
}

/// First index of the largest value (torch.argmax's tie rule).
inline token_id argmax(std::span<const float> z) noexcept {
    return static_cast<token_id>(std::max_element(z.begin(), z.end()) - z.begin());
}

inline std::vector<float>& scratch() {
    thread_local std::vector<float> buffer;
    return buffer;
}

}  // namespace detail

/// Greedy: the most probable token; its probability under softmax(logits).
struct greedy_sampler {
    [[nodiscard]] slot_choice sample(std::span<const float> logits, const random_key&,
                                     std::span<const token_id> banned) const {
        if (banned.empty()) return detail::describe(logits, detail::argmax(logits));
        auto& z = detail::scratch();
        z.assign(logits.begin(), logits.end());
        for (token_id t : banned)
            if (t >= 0 && static_cast<std::size_t>(t) < z.size()) z[static_cast<std::size_t>(t)] = detail::neg_inf;
        return detail::describe(z, detail::argmax(z));
    }
};

/// Which distribution a categorical sampler reports confidences from.
enum class confidence_source {
    filtered,  ///< the distribution sampled from: softmax of the tempered, top-k/top-p filtered logits (Dream)
    raw,       ///< softmax of the unmodified logits (LLaDA's low-confidence remasking)
};

/// Categorical sampling. Order (Dream's sample_tokens): divide by temperature, keep the top-p
/// nucleus, keep the top-k, softmax. Temperature 0 is greedy over the filtered logits. Draws use
/// Gumbel-max with float64 noise, as LLaDA's add_gumbel_noise: argmax_i z_i - log(-log u_i), which
/// samples exactly from softmax(z).
struct categorical_sampler {
    float temperature = 0.f;  ///< 0: greedy
    index_t top_k = 0;        ///< 0: off
    float top_p = 1.f;        ///< 1: off
    confidence_source confidence = confidence_source::filtered;

    void validate() const {
        if (!(temperature >= 0.f) || !std::isfinite(temperature))
            throw invalid_parameter("temperature", "must be a finite number >= 0, got " + std::to_string(temperature));
        if (top_k < 0) throw invalid_parameter("top_k", "must be >= 0 (0 disables it), got " + std::to_string(top_k));
        if (!(top_p > 0.f && top_p <= 1.f))
            throw invalid_parameter("top_p", "must be in (0, 1] (1 disables it), got " + std::to_string(top_p));
    }

    [[nodiscard]] slot_choice sample(std::span<const float> logits, const random_key& key,
                                     std::span<const token_id> banned) const {
        auto& z = detail::scratch();
        z.assign(logits.begin(), logits.end());
        for (token_id t : banned)
            if (t >= 0 && static_cast<std::size_t>(t) < z.size()) z[static_cast<std::size_t>(t)] = detail::neg_inf;
        if (temperature > 0.f) detail::divide_by_temperature(z, temperature);
        if (top_p < 1.f) keep_nucleus(z);
        if (top_k > 0 && static_cast<std::size_t>(top_k) < z.size()) keep_top_k(z);

        token_id token = 0;
        if (temperature > 0.f) {
            double best = -std::numeric_limits<double>::infinity();
            for (std::size_t i = 0; i < z.size(); ++i) {
                if (z[i] == detail::neg_inf) continue;
                const double g = static_cast<double>(z[i]) - std::log(-std::log(key.uniform(static_cast<std::uint32_t>(i))));
                if (g > best) {
                    best = g;
                    token = static_cast<token_id>(i);
                }
            }
        } else {
            token = detail::argmax(z);
        }
        if (confidence == confidence_source::raw) {
            z.assign(logits.begin(), logits.end());
            for (token_id t : banned)
                if (t >= 0 && static_cast<std::size_t>(t) < z.size()) z[static_cast<std::size_t>(t)] = detail::neg_inf;
        }
        return detail::describe(z, token);
    }

private:
    // Dream's top_p_logits: sort descending, drop every token whose preceding cumulative probability
    // already exceeds top_p (the token that crosses it stays).
    void keep_nucleus(std::vector<float>& z) const {
        std::vector<std::int32_t> order(z.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return z[static_cast<std::size_t>(a)] > z[static_cast<std::size_t>(b)]; });
        const float m = z[static_cast<std::size_t>(order[0])];
        double sum = 0.0;
        for (float v : z) sum += v == detail::neg_inf ? 0.0 : std::exp(static_cast<double>(v) - m);
        double cumulative = 0.0;
        for (std::size_t r = 0; r < order.size(); ++r) {
            float& v = z[static_cast<std::size_t>(order[r])];
            const double p = v == detail::neg_inf ? 0.0 : std::exp(static_cast<double>(v) - m) / sum;
            if (r > 0 && cumulative > static_cast<double>(top_p)) v = detail::neg_inf;
            cumulative += p;
        }
    }
    // Dream's top_k_logits: drop every logit below the k-th largest (ties with it stay).
    void keep_top_k(std::vector<float>& z) const {
        std::vector<float> sorted(z);
        std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(), std::greater<>());
        const float kth = sorted[static_cast<std::size_t>(top_k - 1)];
        for (float& v : z)
            if (v < kth) v = detail::neg_inf;
    }
};

static_assert(token_sampler<greedy_sampler>);
static_assert(token_sampler<categorical_sampler>);

/// Categorical sampling with LLaDA's confidence: p(token) under the raw (untempered) softmax.
struct llada_sampler : categorical_sampler {
    llada_sampler() noexcept { confidence = confidence_source::raw; }
    explicit llada_sampler(float temperature_, index_t top_k_ = 0, float top_p_ = 1.f) noexcept
        : categorical_sampler{temperature_, top_k_, top_p_, confidence_source::raw} {}
};

/// SDAR's sampler: generate.py's defaults, temperature 1 (torch.multinomial), no top-k / top-p; the
/// confidence is the drawn token's probability under the distribution sampled from.
struct sdar_sampler : categorical_sampler {
    sdar_sampler() noexcept { temperature = 1.f; }
    explicit sdar_sampler(float temperature_, index_t top_k_ = 0, float top_p_ = 1.f) noexcept
        : categorical_sampler{temperature_, top_k_, top_p_} {}
};

static_assert(token_sampler<llada_sampler>);
static_assert(token_sampler<sdar_sampler>);

}  // namespace dlm
