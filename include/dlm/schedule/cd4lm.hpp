// dlm/schedule/cd4lm.hpp — CD4LM's confidence-adaptive decoding (CAD).
#pragma once

#include <cmath>
#include <limits>
#include <string>

#include "../core/error.hpp"
#include "concept.hpp"

namespace dlm {

/// CD4LM confidence-adaptive decoding (generate_block in CD4LM's LLaDA_generate_dynamic.py):
///  - while fewer than `eos_guard` x gen_length slots are committed, slots whose token is an EOS or an
///    end-of-turn id are deferred (not committable this step; their logits are untouched). The
///    released decoder defers <|endoftext|> and <|eot_id|> of LLaDA (126081, 126348) and of Qwen
///    (151643, 151645 <|im_end|>), hard-coded; dlm defers the model's EOS and end-of-turn ids;
///  - of the committable slots, commit the k most confident, k = #{p >= tau} raised to `min_tokens`
///    and capped at `max_tokens` (and at the number committable); when every slot is deferred, the
///    `min_tokens` most probable are committed anyway, so a step always makes progress;
///  - after `max_steps_per_block` forwards on a block (0: the block length), the next step commits
///    every remaining slot of the block.
/// Defaults are the values of CD4LM's released evaluation scripts (tau 0.95, 1-32 tokens, guard 0.3).
struct cd4lm_schedule {
    double tau = 0.95;
    index_t min_tokens = 1;
    index_t max_tokens = 32;
    double eos_guard = 0.3;
    index_t max_steps_per_block = 0;

    void validate(const canvas_layout&) const {
        if (!(tau > 0.0 && tau <= 1.0)) throw invalid_parameter("tau", "must be in (0, 1], got " + std::to_string(tau));
        if (min_tokens < 1) throw invalid_parameter("min_tokens", "must be >= 1, got " + std::to_string(min_tokens));
        if (max_tokens < min_tokens)
            throw invalid_parameter("max_tokens", "must be >= min_tokens (" + std::to_string(min_tokens) + "), got " +
                                                      std::to_string(max_tokens));
        if (!(eos_guard >= 0.0 && eos_guard <= 1.0))
            throw invalid_parameter("eos_guard", "must be in [0, 1], got " + std::to_string(eos_guard));
        if (max_steps_per_block < 0)
            throw invalid_parameter("max_steps_per_block", "must be >= 0 (0: the block length), got " +
                                                               std::to_string(max_steps_per_block));
    }

    void select(const step_context& ctx, std::span<const candidate> c, std::vector<index_t>& chosen) const {
        const index_t limit = max_steps_per_block > 0 ? max_steps_per_block : ctx.layout.block_length;
        if (ctx.cursor.step_in_block >= limit) {  // forced finish
            for (std::size_t i = 0; i < c.size(); ++i) chosen.push_back(static_cast<index_t>(i));
            return;
        }
        const bool guard = static_cast<double>(ctx.committed_in_generation) <
                           eos_guard * static_cast<double>(ctx.layout.gen_length);
        const auto deferred = [&](const candidate& x) {
            return guard && (detail::contains_eos({&x.token, 1}, ctx.eos_ids) || detail::contains_eos({&x.token, 1}, ctx.end_of_turn_ids));
        };
        index_t valid = 0, confident = 0;
        for (const auto& x : c) {
            if (deferred(x)) continue;
            ++valid;
            if (x.probability >= static_cast<float>(tau)) ++confident;  // float32, as the reference compares
        }
        if (valid == 0) {
            detail::top_k_by(c, std::min<index_t>(min_tokens, static_cast<index_t>(c.size())), chosen,
                             [](const candidate& x) { return x.probability; });
            return;
        }
        const index_t k = std::min({std::max(confident, min_tokens), max_tokens, valid});
        detail::top_k_by(c, k, chosen, [&](const candidate& x) {
            return deferred(x) ? -std::numeric_limits<double>::infinity() : static_cast<double>(x.probability);
        });
    }
};

static_assert(unmask_schedule<cd4lm_schedule>);

}  // namespace dlm
