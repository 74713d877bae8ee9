// dlm/schedule/llada.hpp — LLaDA's fixed-steps schedule (generate.py).
#pragma once

#include <string>

#include "../core/error.hpp"
#include "concept.hpp"

namespace dlm {

enum class remasking {
    low_confidence,  ///< commit the slots whose sampled token is most probable
    random,          ///< commit uniformly random slots
};

/// LLaDA: `steps` forwards in total, split evenly over the blocks. At a block's step i, commit
/// n/k + (i < n%k) slots, where n is the block's masked count when it became active and k the steps
/// per block (get_num_transfer_tokens: the remainder goes to the earliest steps). Which slots:
/// the highest confidence (low_confidence remasking) or uniformly random ones. `steps` 0 (the
/// default) means gen_length: one slot per forward, the ratio of generate()'s defaults (128 steps for
/// 128 slots), which fits any block length the model asks for.
struct llada_schedule {
    index_t steps = 0;
    remasking mode = remasking::low_confidence;
    bool ban_eos = false;  ///< LLaDA's logits_eos_inf: EOS can never be sampled
    static constexpr step_count counts_steps = step_count::in_all;
    /// A block's step commits at least one slot while the steps per block are at most its slots;
    /// past them a step would commit none, and the engine skips it (the block ends when filled).
    static constexpr bool steps_up_to_slots = true;

    [[nodiscard]] bool suppress_eos(const step_context&) const noexcept { return ban_eos; }

    /// The forwards of the whole generation (`steps`, or gen_length when 0).
    [[nodiscard]] DLM_HOST_DEVICE constexpr index_t steps_for(const canvas_layout& l) const noexcept {
        return steps == 0 ? l.gen_length : steps;
    }

    void validate(const canvas_layout& l) const {
        if (steps < 0) throw invalid_parameter("steps", "must be >= 1 (or 0: gen_length), got " + std::to_string(steps));
        detail::check_steps_in_all(steps_for(l), l);
    }

    /// Slots to commit at step `i` of a block that started with `masked` masked slots.
    [[nodiscard]] static index_t transfer_count(index_t masked, index_t steps_per_block, index_t i) noexcept {
        if (i >= steps_per_block) return masked;  // never reached when validate() passed
        return masked / steps_per_block + (i < masked % steps_per_block ? 1 : 0);
    }

    void select(const step_context& ctx, std::span<const candidate> c, std::vector<index_t>& chosen) const {
        const index_t spb = steps_for(ctx.layout) / ctx.layout.block_count();
        const index_t k = transfer_count(ctx.masked_at_block_start, spb, ctx.cursor.step_in_block);
        if (mode == remasking::low_confidence) {
            detail::top_k_by(c, k, chosen, [](const candidate& x) { return x.probability; });
        } else {
            detail::top_k_by(c, k, chosen, [&](const candidate& x) {
                return ctx.key(rng_stream::remasking, x.position).uniform(0);
            });
        }
    }
};

static_assert(unmask_schedule<llada_schedule>);

}  // namespace dlm
