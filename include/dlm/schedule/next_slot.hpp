// dlm/schedule/next_slot.hpp — autoregressive decoding: commit the leftmost masked slot.
#pragma once

#include "concept.hpp"

namespace dlm {

/// Commits the leftmost masked slot at every step: one token per forward, left to right. With a
/// causal mask (blocks of one slot) this is plain autoregressive decoding.
struct next_slot_schedule {
    bool stop_at_eos = true;  ///< end the sequence once an EOS token is committed

    void select(const step_context&, std::span<const candidate> c, std::vector<index_t>& chosen) const {
        if (!c.empty()) chosen.push_back(0);
    }
    [[nodiscard]] bool stop_after_block(const step_context& ctx, std::span<const token_id> block) const noexcept {
        return stop_at_eos && detail::contains_eos(block, ctx.eos_ids);
    }
};

static_assert(unmask_schedule<next_slot_schedule>);

}  // namespace dlm
