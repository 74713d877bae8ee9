// dlm/schedule/entropy_bound.hpp — DiffusionGemma's denoising of a canvas: uniform-state diffusion
// (schedule/concept.hpp, uniform_state_schedule) with an entropy-bound acceptance, a linear
// temperature ramp and a stable-and-confident stop, as transformers' DiffusionGemmaGenerationMixin
// computes them (EntropyBoundSampler, LinearTemperatureScheduleLogitsProcessor,
// StableAndConfidentStoppingCriteria).
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "concept.hpp"

namespace dlm {

/// At step k of a block (0-based; the reference's cur_step = steps − k counts down):
///   * temperature t = t_min + (t_max − t_min) · (steps − k) / steps (f32, as the reference's tensors);
///     the logits are divided by it before sampling and entropies;
///   * accept: sort the slots by the entropy of their tempered distribution, ascending; accept the
///     longest prefix whose entropies sum, less the largest of them, stays within `entropy_bound`
///     (an upper bound on the accepted tokens' mutual information, arXiv:2505.24857);
///   * the block is final after `steps` forwards, or once its draft has been unchanged for
///     `stability_threshold` steps and the mean entropy is below `confidence_threshold`;
///   * with `stop_at_eos`, the sequence ends after a block holding EOS.
struct entropy_bound_schedule {
    static constexpr bool uniform_state = true;
    static constexpr step_count counts_steps = step_count::capped;  ///< `steps` caps each block; 48 unless set
    double threshold = 0.1;  ///< the entropy bound (EntropyBoundSamplerConfig.entropy_bound)
    index_t steps = 48;      ///< max_denoising_steps: forwards per block at most
    double t_min = 0.4, t_max = 0.8;
    index_t stability_threshold = 1;
    double confidence_threshold = 0.005;
    bool stop_at_eos = true;

    void validate(const canvas_layout&) const {
        if (!(threshold > 0.0) || !std::isfinite(threshold))
            throw invalid_parameter("threshold", "the entropy bound must be a finite number > 0, got " + std::to_string(threshold));
        if (steps < 1) throw invalid_parameter("steps", "max denoising steps must be >= 1, got " + std::to_string(steps));
        if (!(t_min > 0.0 && t_max > 0.0) || !std::isfinite(t_min) || !std::isfinite(t_max))
            throw invalid_parameter("t_min", "the temperature ramp's ends must be finite and > 0, got t_min " + std::to_string(t_min) +
                                                 ", t_max " + std::to_string(t_max));
        if (stability_threshold < 0)
            throw invalid_parameter("stability_threshold", "must be >= 0, got " + std::to_string(stability_threshold));
        if (!(confidence_threshold > 0.0))
            throw invalid_parameter("confidence_threshold", "must be > 0, got " + std::to_string(confidence_threshold));
    }

    [[nodiscard]] float step_temperature(const step_context& ctx) const noexcept {
        const index_t remaining = std::max<index_t>(1, steps - ctx.cursor.step_in_block);
        const float q = static_cast<float>(remaining) / static_cast<float>(steps);
        return static_cast<float>(t_min) + static_cast<float>(t_max - t_min) * q;
    }

    void select(const step_context&, std::span<const candidate> c, std::vector<index_t>& chosen) const {
        std::vector<index_t> order(c.size());
        std::iota(order.begin(), order.end(), 0);
        auto entropy = [&](index_t i) { return -c[static_cast<std::size_t>(i)].neg_entropy; };
        std::stable_sort(order.begin(), order.end(), [&](index_t a, index_t b) { return entropy(a) < entropy(b); });
        double cumulative = 0.0;  // torch's CPU cumsum accumulates f32 in double
        for (const index_t i : order) {
            cumulative += static_cast<double>(entropy(i));
            if (static_cast<float>(cumulative) - entropy(i) <= static_cast<float>(threshold)) chosen.push_back(i);
        }
    }

    [[nodiscard]] bool block_done(const step_context& ctx, const block_step& b) const noexcept {
        if (ctx.cursor.step_in_block + 1 >= steps) return true;
        return b.draft_unchanged >= stability_threshold && static_cast<float>(b.mean_entropy) < static_cast<float>(confidence_threshold);
    }

    [[nodiscard]] bool stop_after_block(const step_context& ctx, std::span<const token_id> block) const {
        if (!stop_at_eos) return false;
        return std::any_of(block.begin(), block.end(), [&](token_id t) { return std::find(ctx.eos_ids.begin(), ctx.eos_ids.end(), t) != ctx.eos_ids.end(); });
    }
};

static_assert(unmask_schedule<entropy_bound_schedule>);
static_assert(uniform_state_schedule<entropy_bound_schedule>);

}  // namespace dlm
