// dlm/schedule/dynamic_threshold.hpp — the block-diffusion references' "low-confidence dynamic"
// rule: SDAR generate.py (remasking_strategy 'low_confidence_dynamic') and LLaDA2's generate().
#pragma once

#include <algorithm>
#include <string>

#include "../core/error.hpp"
#include "concept.hpp"
#include "llada.hpp"

namespace dlm {

namespace detail {
/// A confidence threshold compared with `>`: any probability in [0, 1] (1 commits only the forced slots).
inline void check_threshold(double threshold) {
    if (!(threshold >= 0.0 && threshold <= 1.0)) throw invalid_parameter("threshold", "must be in [0, 1], got " + std::to_string(threshold));
}
}  // namespace detail

/// At a block's step i, the reference plans k_i slots (get_num_transfer_tokens(block_length, steps):
/// block_length / steps each, the remainder to the earliest steps). It commits every masked slot
/// whose confidence is strictly above `threshold` if there are at least k_i of them, else the k_i
/// most confident. `steps` 0 means block_length (one slot per step at least). With `stop_at_eos`,
/// the sequence ends after a finished block when an EOS id is among its tokens (SDAR's
/// stopping_criteria_idx, LLaDA2's eos_early_stop).
struct dynamic_threshold_schedule {
    index_t steps = 0;
    double threshold = 0.85;
    bool stop_at_eos = true;

    void validate(const canvas_layout&) const {
        if (steps < 0) throw invalid_parameter("steps", "must be >= 1 (or 0: block_length), got " + std::to_string(steps));
        detail::check_threshold(threshold);
    }

    void select(const step_context& ctx, std::span<const candidate> c, std::vector<index_t>& chosen) const {
        const index_t block = ctx.layout.block_length;
        const index_t k = llada_schedule::transfer_count(block, steps == 0 ? block : steps, ctx.cursor.step_in_block);
        const std::size_t before = chosen.size();
        for (std::size_t i = 0; i < c.size(); ++i)
            if (c[i].probability > static_cast<float>(threshold)) chosen.push_back(static_cast<index_t>(i));
        if (static_cast<index_t>(chosen.size() - before) >= k) return;
        chosen.resize(before);
        detail::top_k_by(c, k, chosen, [](const candidate& x) { return x.probability; });
    }
    [[nodiscard]] bool stop_after_block(const step_context& ctx, std::span<const token_id> block) const noexcept {
        return stop_at_eos && detail::contains_eos(block, ctx.eos_ids);
    }
};

static_assert(unmask_schedule<dynamic_threshold_schedule>);

/// LLaDA2's schedule (LLaDA2MoeModelLM.generate): `steps` 32 per block (0: the block length) with
/// threshold 0.95, stop after a block holding EOS. generate() first caps steps at gen_length
/// (`min(steps, gen_length // minimal_topk)`, minimal_topk 1), so an answer shorter than a block
/// plans fewer, larger steps; SDAR's generate.py has no such cap.
struct llada2_schedule : dynamic_threshold_schedule {
    llada2_schedule() noexcept : dynamic_threshold_schedule{0, 0.95, true} {}
    llada2_schedule(index_t steps_, double threshold_) noexcept : dynamic_threshold_schedule{steps_, threshold_, true} {}

    void select(const step_context& ctx, std::span<const candidate> c, std::vector<index_t>& chosen) const {
        dynamic_threshold_schedule capped = *this;
        capped.steps = std::min(steps == 0 ? ctx.layout.block_length : steps, ctx.layout.gen_length);
        capped.select(ctx, c, chosen);
    }
};

static_assert(unmask_schedule<llada2_schedule>);

}  // namespace dlm
