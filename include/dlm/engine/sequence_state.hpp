// dlm/engine/sequence_state.hpp — one sequence while it decodes, and the bookkeeping every decoding
// loop shares (dlm::engine on the host, dlm::cuda::device_decoder on the GPU): checking a plan,
// closing blocks, stopping, failing one sequence, and the final answer length. engine/prepare.hpp
// checks a batch and builds these states before the first forward.
#pragma once

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../core/plan.hpp"
#include "../core/result.hpp"
#include "../schedule/concept.hpp"

namespace dlm::detail {

using dlm::max_steps_per_slot;  // core/layout.hpp

/// One sequence of a batch while it decodes.
template <class KvCache>
struct sequence_state {
    canvas_layout layout;
    std::vector<token_id> canvas;
    block_cursor cursor;
    index_t masked_at_block_start = 0;
    index_t steps_after_filled = 0;  ///< revising schedules: forwards of the active block that began with no masked slot
    std::optional<KvCache> kv;
    /// Uniform-state schedules: consecutive steps whose draft the last one equalled (block_step::draft_unchanged),
    /// and, for a self-conditioning model, the last step's tempered logits (forward_request::self_conditioning).
    index_t draft_unchanged = 0;
    std::vector<float> self_conditioning;
    /// Classifier-free guidance: the canvas with the prompt masked, and its own K/V.
    std::vector<token_id> uncond_canvas;
    std::optional<KvCache> uncond_kv;
    sequence_result result;
    bool done = false;
};

/// Throws dlm::contract_error when a cache policy's plan is inconsistent with the layout.
inline void check_plan(const forward_plan& p, const canvas_layout& l, const char* who) {
    const bool ok = 0 <= p.window_begin && p.window_begin <= p.window_end && p.window_end <= l.size() &&
                    p.window_begin <= p.logits_begin && p.logits_begin < p.logits_end && p.logits_end <= p.window_end &&
                    (!p.stores() || (p.window_begin <= p.store_begin && p.store_end <= p.window_end)) &&
                    p.window_end <= p.attend_end && p.attend_end <= l.size();
    if (!ok) {
        const auto range = [](index_t b, index_t e) { return "[" + std::to_string(b) + ", " + std::to_string(e) + ")"; };
        throw contract_error(std::string(who) + ": the cache policy planned an inconsistent forward: window " + range(p.window_begin, p.window_end) +
                             ", logits " + range(p.logits_begin, p.logits_end) + ", store " + range(p.store_begin, p.store_end) + ", attend_end " +
                             std::to_string(p.attend_end) + " over a canvas of " + std::to_string(l.size()) +
                             " (a plan needs 0 <= window_begin <= logits_begin < logits_end <= window_end <= attend_end <= canvas size, "
                             "and a store range inside the window)");
    }
}

/// Throws dlm::contract_error when the active block holds a masked slot and the plan returns the
/// logits row of none of them: no step could commit one, so the block would never close (found at
/// once, not after the step bound of advance()).
inline void check_plan_reaches_masked(const forward_plan& p, const canvas_layout& l, const block_cursor& c, std::span<const token_id> canvas,
                                      token_id mask_id, const char* who) {
    bool masked = false;
    for (index_t q = l.first_slot(c.block); q < l.block_end(c.block); ++q) {
        if (canvas[static_cast<std::size_t>(q)] != mask_id) continue;
        const index_t row = l.row_for_slot(q);
        if (row >= p.logits_begin && row < p.logits_end) return;
        masked = true;
    }
    if (masked)
        throw contract_error(std::string(who) + ": the cache policy planned logits rows [" + std::to_string(p.logits_begin) + ", " +
                             std::to_string(p.logits_end) + "), which predict no masked slot of block " + std::to_string(c.block) + " (slots [" +
                             std::to_string(l.first_slot(c.block)) + ", " + std::to_string(l.block_end(c.block)) +
                             ")): no step could commit one (a plan's logits must cover a masked slot of the active block)");
}

/// After a step: close the block when the schedule says it is final (schedule_block_done: for a
/// schedule that never revises, when no slot is left masked), then stop (last block, or the
/// schedule's stop_after_block: the rest becomes EOS) or move to the next block.
template <class KvCache, class Schedule>
void advance(sequence_state<KvCache>& s, const Schedule& schedule, const step_context& ctx, const block_step& step, token_id mask_id,
             const char* who) {
    if (step.masked_before == 0) ++s.steps_after_filled;
    if (schedule_block_done(schedule, ctx, step)) {
        s.steps_after_filled = 0;
        s.result.stats.steps_per_block.push_back(s.cursor.step_in_block);
        bool stop = s.cursor.block + 1 >= s.layout.block_count();
        const index_t b = s.cursor.block;  // its slots only
        const auto block = std::span<const token_id>(s.canvas).subspan(static_cast<std::size_t>(s.layout.first_slot(b)),
                                                                       static_cast<std::size_t>(s.layout.slots_in_block(b)));
        if (!stop && schedule_stops_after_block(schedule, ctx, block)) {
            stop = true;
            s.result.stopped_early = true;
            const token_id fill = ctx.eos_ids.empty() ? mask_id : ctx.eos_ids.front();
            for (index_t p = s.layout.block_end(b); p < s.layout.size(); ++p) {
                s.canvas[static_cast<std::size_t>(p)] = fill;
                s.result.tokens[static_cast<std::size_t>(p - s.layout.prompt_length)] = fill;
            }
        }
        if (stop) {
            s.done = true;
            s.kv.reset();
        } else {
            s.cursor = {s.cursor.block + 1, 0};
            s.masked_at_block_start = s.layout.slots_in_block(s.cursor.block);
        }
    } else if (s.cursor.step_in_block > max_steps_per_slot * s.layout.block_length) {
        throw contract_error(std::string(who) + ": the schedule left block " + std::to_string(s.cursor.block) + " unfinished after " +
                             std::to_string(s.cursor.step_in_block) + " forwards");
    }
}

/// Ends a sequence with status failed, its error kept on its result: call it inside the handler of
/// `why`. The other sequences of the batch go on (both decoders: one failure ends one sequence).
template <class KvCache>
void fail(sequence_state<KvCache>& s, const error& why) {
    s.done = true;
    s.kv.reset();
    s.uncond_kv.reset();
    s.result.status = sequence_status::failed;
    s.result.message = why.what();
    s.result.error = std::current_exception();
}

/// The answer length (slots before the first EOS) of a finished sequence. A schedule that stopped
/// early with no EOS ids to fill the rest with left the mask id there (advance): the answer ends
/// before it.
inline void finish(sequence_result& r, std::span<const token_id> eos) {
    const token_id mask_fill = r.settings.mask_id.value;
    const bool filled_with_mask = r.stopped_early && eos.empty();
    r.answer_length = static_cast<index_t>(r.tokens.size());
    for (std::size_t i = 0; i < r.tokens.size(); ++i)
        if (std::find(eos.begin(), eos.end(), r.tokens[i]) != eos.end() || (filled_with_mask && r.tokens[i] == mask_fill)) {
            r.answer_length = static_cast<index_t>(i);
            break;
        }
}

}  // namespace dlm::detail
