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
#include "describe.hpp"
#include "temperature.hpp"

namespace dlm {

namespace detail {

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

/// Which filter a categorical sampler applies first when both top-k and top-p are set (each keeps
/// the same tokens alone: top-k the ties with the k-th, top-p the token that crosses p).
enum class filter_order {
    top_p_first,  ///< Dream's sample_tokens: the nucleus of the tempered row, then its top-k
    top_k_first,  ///< SDAR's and LLaDA2's: the top-k, then the nucleus of what it kept
};

/// Categorical sampling. Order (Dream's sample_tokens): divide by temperature, keep the top-p
/// nucleus, keep the top-k, softmax (`order` top_k_first swaps the filters). Temperature 0 is greedy
/// over the filtered logits, or over the unfiltered ones with `filter_greedy` false. Draws use
/// Gumbel-max with float64 noise, as LLaDA's add_gumbel_noise: argmax_i z_i - log(-log u_i), which
/// samples exactly from softmax(z).
struct categorical_sampler {
    float temperature = 0.f;  ///< 0: greedy
    index_t top_k = 0;        ///< 0: off
    float top_p = 1.f;        ///< 1: off
    confidence_source confidence = confidence_source::filtered;
    filter_order order = filter_order::top_p_first;
    /// Whether top-k and top-p apply at temperature 0 (Dream: yes; LLaDA2 and Fast-dLLM v2 return the
    /// argmax and its probability under the plain softmax before filtering).
    bool filter_greedy = true;

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
        if (temperature > 0.f || filter_greedy) filter(z);

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
    void filter(std::vector<float>& z) const {
        const bool k = top_k > 0 && static_cast<std::size_t>(top_k) < z.size();
        if (k && order == filter_order::top_k_first) keep_top_k(z);
        if (top_p < 1.f) keep_nucleus(z);
        if (k && order == filter_order::top_p_first) keep_top_k(z);
    }
    // Dream's top_p_logits: rank the tokens by logit, descending (ties in index order, as its stable
    // sort leaves them), and drop every token whose preceding cumulative probability already exceeds
    // top_p (the token that crosses it stays). Only the ranks up to the crossing are sorted, 64, then
    // 256, 1024, ... at a time (a partial sort while they are few of those left, else a selection and
    // a sort of those selected: faster on flat rows, docs/benchmarks.md). Ties are broken by index, a
    // total order, so the first ranks are a full sort's and the cumulative sums the same bits in the
    // same order, at a fraction of a whole vocabulary's sort.
    void keep_nucleus(std::vector<float>& z) const {
        if (std::any_of(z.begin(), z.end(), [](float v) { return std::isnan(v); })) return;  // no order; the draw reports the row
        const std::size_t n = z.size();
        struct ranked_logit {
            float value;
            std::int32_t index;
        };
        std::vector<ranked_logit> ranked(n);  // the values beside their indices: the sorts read no other memory
        for (std::size_t i = 0; i < n; ++i) ranked[i] = {z[i], static_cast<std::int32_t>(i)};
        const auto before = [](const ranked_logit& x, const ranked_logit& y) { return x.value > y.value || (x.value == y.value && x.index < y.index); };
        const float m = *std::max_element(z.begin(), z.end());
        double sum = 0.0;
        for (float v : z) sum += v == detail::neg_inf ? 0.0 : std::exp(static_cast<double>(v) - m);
        double cumulative = 0.0;
        for (std::size_t r = 0, sorted = 0; r < n; ++r) {
            if (r == sorted) {
                sorted = std::min(n, std::max<std::size_t>(64, 4 * sorted));
                const auto from = ranked.begin() + static_cast<std::ptrdiff_t>(r), to = ranked.begin() + static_cast<std::ptrdiff_t>(sorted);
                if (16 * (sorted - r) < n - r) {  // a few ranks of many: one pass keeping the best
                    std::partial_sort(from, to, ranked.end(), before);
                } else {  // a large share: select them, then sort them
                    std::nth_element(from, to, ranked.end(), before);
                    std::sort(from, to, before);
                }
            }
            if (r > 0 && cumulative > static_cast<double>(top_p)) {  // ranks r and after are dropped
                for (std::size_t i = r; i < n; ++i) z[static_cast<std::size_t>(ranked[i].index)] = detail::neg_inf;
                return;
            }
            const float v = ranked[r].value;
            cumulative += v == detail::neg_inf ? 0.0 : std::exp(static_cast<double>(v) - m) / sum;
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

/// SDAR's sampler: generate.py's defaults, temperature 1 (torch.multinomial), no top-k / top-p, and
/// its order when both are set (top-k first); the confidence is the drawn token's probability under
/// the distribution sampled from.
struct sdar_sampler : categorical_sampler {
    sdar_sampler() noexcept {
        temperature = 1.f;
        order = filter_order::top_k_first;
    }
    explicit sdar_sampler(float temperature_, index_t top_k_ = 0, float top_p_ = 1.f) noexcept
        : categorical_sampler{temperature_, top_k_, top_p_, confidence_source::filtered, filter_order::top_k_first} {}
};

/// LLaDA2's and Fast-dLLM v2's sampler (_sample_with_temperature_topk_topp, sample_with_top_p):
/// temperature 0 by default, where the argmax and its probability come from the unfiltered softmax
/// (top-k and top-p apply only when sampling); top-k before top-p; the confidence is the drawn
/// token's probability under the distribution sampled from.
struct llada2_sampler : categorical_sampler {
    llada2_sampler() noexcept {
        order = filter_order::top_k_first;
        filter_greedy = false;
    }
    explicit llada2_sampler(float temperature_, index_t top_k_ = 0, float top_p_ = 1.f) noexcept
        : categorical_sampler{temperature_, top_k_, top_p_, confidence_source::filtered, filter_order::top_k_first, false} {}
};

static_assert(token_sampler<llada_sampler>);
static_assert(token_sampler<sdar_sampler>);
static_assert(token_sampler<llada2_sampler>);

// Every shipped sampler keeps its scratch thread_local (detail::scratch) and its filters' on the stack.
template <>
inline constexpr bool enable_concurrent_sampling<greedy_sampler> = true;
template <>
inline constexpr bool enable_concurrent_sampling<categorical_sampler> = true;
template <>
inline constexpr bool enable_concurrent_sampling<llada_sampler> = true;
template <>
inline constexpr bool enable_concurrent_sampling<sdar_sampler> = true;
template <>
inline constexpr bool enable_concurrent_sampling<llada2_sampler> = true;

}  // namespace dlm
