// dlm/schedule/threshold.hpp — confidence-threshold schedules: Fast-dLLM (threshold and factor rules)
// and CDLM (threshold inside the block, stop after a block holding EOS).
#pragma once

#include <algorithm>
#include <string>

#include "../core/error.hpp"
#include "concept.hpp"

namespace dlm {

namespace detail {
inline void check_unit_interval(const char* name, double v) {
    if (!(v > 0.0 && v <= 1.0)) throw invalid_parameter(name, "must be in (0, 1], got " + std::to_string(v));
}
}  // namespace detail

/// Fast-dLLM's threshold rule (get_transfer_index with `threshold`): commit every masked slot of the
/// block whose confidence is >= tau, and always the most confident one, so every step makes progress.
/// With `stop_at_eos`, the sequence ends after a finished block that holds EOS (CDLM's early stop).
struct threshold_schedule {
    double tau = 0.9;
    bool stop_at_eos = false;

    void validate(const canvas_layout&) const { detail::check_unit_interval("tau", tau); }

    void select(const step_context&, std::span<const candidate> c, std::vector<index_t>& chosen) const {
        if (c.empty()) return;
        std::size_t best = 0;
        for (std::size_t i = 1; i < c.size(); ++i)
            if (c[i].probability > c[best].probability) best = i;
        for (std::size_t i = 0; i < c.size(); ++i)
            if (i == best || c[i].probability >= static_cast<float>(tau)) chosen.push_back(static_cast<index_t>(i));
    }
    [[nodiscard]] bool stop_after_block(const step_context& ctx, std::span<const token_id> block) const noexcept {
        return stop_at_eos && detail::contains_eos(block, ctx.eos_ids);
    }
};

/// Fast-dLLM's factor rule (get_transfer_index_dynamic): sort the block's confidences descending,
/// c_1 >= c_2 >= ...; walk n = 1, 2, ... while (n + 1)(1 - c_n) <= f (rank 1 always passes) and commit
/// the slots walked. As in the reference, when only the last rank fails, every slot is committed.
struct factor_schedule {
    double factor = 1.0;

    void validate(const canvas_layout&) const {
        if (!(factor > 0.0)) throw invalid_parameter("factor", "must be > 0, got " + std::to_string(factor));
    }

    /// How many of the sorted confidences `sorted` (descending) the rule commits.
    [[nodiscard]] std::size_t count(std::span<const double> sorted) const noexcept {
        const std::size_t n = sorted.size();
        std::size_t i = 0;
        for (; i < n; ++i)
            if (i > 0 && sorted[i] < 1.0 - factor / static_cast<double>(i + 2)) break;
        if (i == n) i = n - 1;  // the reference's loop variable stops at the last index
        if (i == 0 || i == n - 1) i += 1;
        return i;
    }

    void select(const step_context&, std::span<const candidate> c, std::vector<index_t>& chosen) const {
        if (c.empty()) return;
        std::vector<double> sorted(c.size());
        for (std::size_t i = 0; i < c.size(); ++i) sorted[i] = c[i].probability;
        std::sort(sorted.begin(), sorted.end(), std::greater<>());
        detail::top_k_by(c, static_cast<index_t>(count(sorted)), chosen, [](const candidate& x) { return x.probability; });
    }
};

static_assert(unmask_schedule<threshold_schedule>);
static_assert(unmask_schedule<factor_schedule>);

/// CDLM's schedule: Fast-dLLM's threshold rule inside the block (tau 0.9), stopping after a block
/// that holds EOS.
struct cdlm_schedule : threshold_schedule {
    cdlm_schedule() noexcept : threshold_schedule{0.9, true} {}
    explicit cdlm_schedule(double tau_) noexcept : threshold_schedule{tau_, true} {}
};

static_assert(unmask_schedule<cdlm_schedule>);

}  // namespace dlm
