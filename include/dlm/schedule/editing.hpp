// dlm/schedule/editing.hpp — LLaDA 2.1's joint-threshold decoding with token editing: mask-to-token
// fills (M2T) and token-to-token edits (T2T) of the active block, then up to max_post_steps forwards
// that only edit (LLaDA2MoeModelLM.generate of the LLaDA2.1 checkpoints; docs/policies.md compares it
// with SGLang's JointThreshold and diffusers' LLaDA2Pipeline).
#pragma once

#include <string>

#include "../core/error.hpp"
#include "concept.hpp"
#include "dynamic_threshold.hpp"

namespace dlm {

/// LLaDA 2.1's two published operating points (its model card and report): Speedy commits boldly
/// and relies on edits to repair, Quality is conservative.
enum class llada21_mode { quality, speedy };

/// At each forward of the active block, from the canvas as it was before the step:
///   * fill (M2T): every masked slot whose confidence is strictly above `threshold`, if there are at
///     least `num_to_transfer` of them, else the `num_to_transfer` most confident masked slots;
///   * edit (T2T): every filled generation slot (never the prompt) whose new choice differs from its
///     token with confidence strictly above `editing_threshold`.
/// Once no slot is masked, further forwards only edit; the block is final after a forward that
/// began with no masked slot and edited nothing, or after `max_post_steps` such forwards (the
/// reference checks the count before its forward, so no forward is spent on it). With `stop_at_eos`,
/// the sequence ends after a final block holding EOS.
struct llada21_schedule {
    double threshold = 0.7;
    double editing_threshold = 0.5;
    index_t max_post_steps = 16;
    index_t num_to_transfer = 1;
    bool stop_at_eos = true;

    /// The named settings: Quality (threshold 0.7, editing 0.5) and Speedy (0.5, 0.0), 16 post steps each.
    [[nodiscard]] static constexpr llada21_schedule of(llada21_mode m) noexcept {
        return m == llada21_mode::speedy ? llada21_schedule{0.5, 0.0, 16, 1, true} : llada21_schedule{0.7, 0.5, 16, 1, true};
    }

    void validate(const canvas_layout&) const {
        detail::check_threshold(threshold);
        if (!(editing_threshold >= 0.0 && editing_threshold <= 1.0))
            throw invalid_parameter("editing_threshold", "must be in [0, 1], got " + std::to_string(editing_threshold));
        if (max_post_steps < 0) throw invalid_parameter("max_post_steps", "must be >= 0, got " + std::to_string(max_post_steps));
        if (num_to_transfer < 1) throw invalid_parameter("num_to_transfer", "must be >= 1, got " + std::to_string(num_to_transfer));
    }

    void select(const step_context&, std::span<const candidate> c, std::vector<index_t>& chosen) const {
        const std::size_t before = chosen.size();
        for (std::size_t i = 0; i < c.size(); ++i)
            if (c[i].probability > static_cast<float>(threshold)) chosen.push_back(static_cast<index_t>(i));
        if (static_cast<index_t>(chosen.size() - before) >= num_to_transfer) return;
        chosen.resize(before);
        detail::top_k_by(c, num_to_transfer, chosen, [](const candidate& x) { return x.probability; });
    }

    void revise(const step_context&, std::span<const filled_candidate> f, std::vector<index_t>& edits) const {
        for (std::size_t i = 0; i < f.size(); ++i)
            if (f[i].token != f[i].current && f[i].probability > static_cast<float>(editing_threshold)) edits.push_back(static_cast<index_t>(i));
    }

    [[nodiscard]] bool block_done(const step_context& ctx, const block_step& b) const noexcept {
        if (b.still_masked > 0) return false;
        const bool post = b.masked_before == 0;  // this forward only edited (the reference's post step)
        if (post && b.edited == 0) return true;
        return ctx.steps_after_filled + (post ? 1 : 0) >= max_post_steps;
    }

    [[nodiscard]] bool stop_after_block(const step_context& ctx, std::span<const token_id> block) const noexcept {
        return stop_at_eos && detail::contains_eos(block, ctx.eos_ids);
    }
};

static_assert(revising_schedule<llada21_schedule> && unmask_schedule<llada21_schedule>);

/// LLaDA 2.1's Speedy mode as a type of its own (the preset registry reads a preset's defaults from
/// its default-constructed schedule): threshold 0.5, editing threshold 0.0.
struct llada21_speedy_schedule : llada21_schedule {
    constexpr llada21_speedy_schedule() noexcept : llada21_schedule{of(llada21_mode::speedy)} {}
};

static_assert(revising_schedule<llada21_speedy_schedule> && unmask_schedule<llada21_speedy_schedule>);

/// Token editing for dlm's own decoders (the cdlm-edit and fast-dllm-edit presets, docs/results.md):
/// their threshold 0.9 for fills, 0.9 for edits, up to 16 edit-only forwards a block; CDLM stops after
/// a block holding EOS, Fast-dLLM v1 does not.
template <bool StopAtEos>
struct threshold_editing_schedule : llada21_schedule {
    constexpr threshold_editing_schedule() noexcept : llada21_schedule{0.9, 0.9, 16, 1, StopAtEos} {}
};
using cdlm_editing_schedule = threshold_editing_schedule<true>;
using fast_dllm_editing_schedule = threshold_editing_schedule<false>;

static_assert(revising_schedule<cdlm_editing_schedule> && unmask_schedule<fast_dllm_editing_schedule>);

}  // namespace dlm
