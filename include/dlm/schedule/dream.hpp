// dlm/schedule/dream.hpp — Dream's timestep schedule (diffusion_generate).
#pragma once

#include <cmath>
#include <string>

#include "../core/error.hpp"
#include "concept.hpp"

namespace dlm {

/// Dream's `alg`: how slots are chosen at each step.
enum class dream_alg {
    origin,        ///< every masked slot is committed with probability 1 - s/t
    maskgit_plus,  ///< rank by p(token)
    topk_margin,   ///< rank by p(top-1) - p(top-2)
    entropy,       ///< rank by negative entropy
};

/// Dream: timesteps t_i = linspace(1, eps, steps + 1) over the steps of a block (one block unless the
/// mask sets blocks). At step i (t = t_i, s = t_{i+1}) with n masked slots: `origin` commits each slot
/// with probability 1 - s/t; the ranking algorithms commit k = floor(n (1 - s/t)) slots, ranked by
/// their confidence, or, with alg_temp > 0, drawn without replacement from softmax(confidence /
/// alg_temp). The last step commits everything left.
struct dream_schedule {
    index_t steps = 512;
    double eps = 1e-3;
    dream_alg alg = dream_alg::origin;
    double alg_temp = 0.0;  ///< 0: deterministic top-k
    static constexpr step_count counts_steps = step_count::in_all;

    void validate(const canvas_layout& l) const {
        if (steps < 1) throw invalid_parameter("steps", "must be >= 1, got " + std::to_string(steps));
        detail::check_steps_in_all(steps, l);
        detail::check_steps_per_block(steps, l);
        if (!(eps > 0.0 && eps < 1.0)) throw invalid_parameter("eps", "must be in (0, 1), got " + std::to_string(eps));
        if (!(alg_temp >= 0.0)) throw invalid_parameter("alg_temp", "must be >= 0, got " + std::to_string(alg_temp));
    }

    /// 1 - s/t at step i of k steps; 1 at the last step.
    [[nodiscard]] double transfer_fraction(index_t i, index_t k) const noexcept {
        if (i >= k - 1) return 1.0;
        const double t = 1.0 + (eps - 1.0) * static_cast<double>(i) / static_cast<double>(k);
        const double s = 1.0 + (eps - 1.0) * static_cast<double>(i + 1) / static_cast<double>(k);
        return 1.0 - s / t;
    }

    void select(const step_context& ctx, std::span<const candidate> c, std::vector<index_t>& chosen) const {
        const index_t spb = steps / ctx.layout.block_count();
        const index_t i = ctx.cursor.step_in_block;
        const double fraction = transfer_fraction(i, spb);
        if (alg == dream_alg::origin) {
            for (std::size_t j = 0; j < c.size(); ++j)
                if (fraction >= 1.0 || ctx.key(rng_stream::transfer, c[j].position).uniform(0) < fraction)
                    chosen.push_back(static_cast<index_t>(j));
            return;
        }
        const auto n = static_cast<index_t>(c.size());
        const index_t k = i >= spb - 1 ? n : static_cast<index_t>(static_cast<double>(n) * fraction);
        const auto confidence = [this](const candidate& x) -> double {
            switch (alg) {
                case dream_alg::topk_margin: return x.margin;
                case dream_alg::entropy: return x.neg_entropy;
                default: return x.probability;
            }
        };
        if (alg_temp <= 0.0) {
            detail::top_k_by(c, k, chosen, confidence);
        } else {
            // Sampling k slots without replacement from softmax(confidence / alg_temp) is the same as
            // taking the top k of confidence / alg_temp + Gumbel noise.
            detail::top_k_by(c, k, chosen, [&](const candidate& x) {
                const double u = ctx.key(rng_stream::selection, x.position).uniform(0);
                return confidence(x) / alg_temp - std::log(-std::log(u));
            });
        }
    }
};

static_assert(unmask_schedule<dream_schedule>);

}  // namespace dlm
