// dlm/schedule/sub_block.hpp — Fast-dLLM v2's decoding inside a block: the first slot from the
// previous block's last row (autoregressively), then sub-blocks left to right with the threshold rule.
#pragma once

#include <string>

#include "../core/error.hpp"
#include "concept.hpp"
#include "dynamic_threshold.hpp"

namespace dlm {

/// Fast-dLLM v2 (Fast_dLLM_QwenForCausalLM.generate and generation_functions.batch_sample):
///   * a block's first step commits its first slot alone: the reference predicts it from the
///     previous block's (or the prompt's) last row in the forward that stores that block's K/V,
///     and commits it by argmax before decoding the block (`next_token = logits[:, -1:].argmax()`).
///     A block that begins inside the prompt (canvas_layout::lead) has no such slot: the reference
///     fills the prompt's last block up with masks and decodes them by sub-blocks from its start;
///   * later steps decode the first sub-block of `sub_block` slots that still has masked slots:
///     commit every masked slot of it whose confidence is strictly above `threshold`, and always the
///     most confident one;
///   * with `stop_at_eos`, the sequence ends after a finished block holding EOS.
/// Needs a shifted model (logits_shift): the first slot's row is the previous block's last.
struct sub_block_threshold_schedule {
    double threshold = 0.9;
    index_t sub_block = 8;
    bool stop_at_eos = true;

    void validate(const canvas_layout& l) const {
        detail::check_threshold(threshold);
        if (sub_block < 1 || l.block_length % sub_block != 0)
            throw invalid_parameter("sub_block", "must be >= 1 and divide the block length " + std::to_string(l.block_length) + ", got " +
                                                     std::to_string(sub_block));
        if (!l.shift)
            throw invalid_parameter("sub_block_threshold_schedule",
                                    "commits a block's first slot from the previous block's last row: the model must predict slot p from row "
                                    "p - 1 (logits_shift), as Fast-dLLM v2 does");
    }

    void select(const step_context& ctx, std::span<const candidate> c, std::vector<index_t>& chosen) const {
        if (c.empty()) return;
        const index_t begin = ctx.layout.block_begin(ctx.cursor.block);
        if (ctx.cursor.step_in_block == 0 && c.front().position == begin) {
            chosen.push_back(0);
            return;
        }
        const index_t sub = (c.front().position - begin) / sub_block;  // candidates are in position order
        std::size_t best = 0;
        for (std::size_t i = 0; i < c.size() && (c[i].position - begin) / sub_block == sub; ++i)
            if (c[i].probability > c[best].probability) best = i;
        for (std::size_t i = 0; i < c.size() && (c[i].position - begin) / sub_block == sub; ++i)
            if (i == best || c[i].probability > static_cast<float>(threshold)) chosen.push_back(static_cast<index_t>(i));
    }
    [[nodiscard]] bool stop_after_block(const step_context& ctx, std::span<const token_id> block) const noexcept {
        return stop_at_eos && detail::contains_eos(block, ctx.eos_ids);
    }
};

static_assert(unmask_schedule<sub_block_threshold_schedule>);

}  // namespace dlm
