// dlm/engine/revision.hpp — applying one step's chosen writes to a sequence: fills of masked slots
// and, for a revising schedule, edits of filled slots of the active block. The engine's apply step
// calls it for every schedule (a schedule that never revises passes no edits), whoever chose the
// writes (the host stepper, or a device stepper's kernels), so revision stays one code path: a
// device stepper that learns to edit hands its edits over as slot_commits too.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../core/result.hpp"
#include "../schedule/concept.hpp"
#include "sequence_state.hpp"
#include "step.hpp"

namespace dlm::detail {

/// Writes `fills` (each must be a masked slot of the active block, at most once) and `edits` (each
/// a filled generation slot of it, at most once, a different token) into sequence `s` at forward
/// `forward`: canvas (and the unconditional canvas of guidance), result tokens, commit forwards and
/// confidences of fills, revisions of edits, the counts. Throws dlm::contract_error naming `who`
/// for a write that breaks these rules (the policy that chose it is broken; the sequence fails).
template <class KvCache>
void apply_writes(sequence_state<KvCache>& s, std::span<const slot_commit> fills, std::span<const slot_commit> edits, index_t forward,
                  token_id mask_id, const char* who, std::vector<index_t>& committed, std::vector<index_t>& edited) {
    const index_t first = s.layout.first_slot(s.cursor.block), end = s.layout.block_end(s.cursor.block);
    auto check = [&](const slot_commit& w, bool fill) {
        if (w.position < first || w.position >= end)
            throw contract_error(std::string(who) + ": a write to position " + std::to_string(w.position) +
                                 " outside the active block's slots [" + std::to_string(first) + ", " + std::to_string(end) + ")");
        const token_id now = s.canvas[static_cast<std::size_t>(w.position)];
        if (fill && now != mask_id)
            throw contract_error(std::string(who) + ": the schedule chose the slot at position " + std::to_string(w.position) +
                                 ", which is not masked (chosen twice)");
        if (!fill && (now == mask_id || now == w.token || w.token == mask_id))
            throw contract_error(std::string(who) + ": an edit of position " + std::to_string(w.position) +
                                 " must replace a filled slot by another token");
    };
    for (const auto& w : fills) check(w, true);
    for (const auto& w : edits) check(w, false);
    auto put = [&](const slot_commit& w) {
        const auto at = static_cast<std::size_t>(w.position);
        s.canvas[at] = w.token;
        if (!s.uncond_canvas.empty()) s.uncond_canvas[at] = w.token;
        s.result.tokens[static_cast<std::size_t>(w.position - s.layout.prompt_length)] = w.token;
    };
    // Edits first: each is checked against the canvas before the step, which fills do not touch.
    for (const auto& w : edits) {
        s.result.revisions.push_back(
            {w.position, w.position - s.layout.prompt_length, s.canvas[static_cast<std::size_t>(w.position)], w.token, forward, w.probability});
        put(w);
        edited.push_back(w.position);
    }
    for (const auto& w : fills) {
        if (s.canvas[static_cast<std::size_t>(w.position)] != mask_id)
            throw contract_error(std::string(who) + ": the schedule chose the slot at position " + std::to_string(w.position) +
                                 ", which is not masked (chosen twice)");
        put(w);
        const auto g = static_cast<std::size_t>(w.position - s.layout.prompt_length);
        s.result.commit_forward[g] = forward;
        s.result.commit_confidence[g] = w.probability;
        committed.push_back(w.position);
    }
    s.result.stats.committed += static_cast<index_t>(fills.size());
    s.result.stats.edits += static_cast<index_t>(edits.size());
}

/// The end of the answer's final tokens: slots before it will not change again. Every commit of a
/// schedule that never revises is final; a revising schedule's active block is not final until it
/// closes (a uniform-state schedule's too: its draft is final only then). The committed prefix (what a
/// client may be sent) stops at the first masked slot or here.
template <class Schedule, class KvCache>
[[nodiscard]] std::size_t final_slots(const sequence_state<KvCache>& s) {
    if constexpr (revising_schedule<Schedule> || uniform_state_schedule<Schedule>) {
        if (s.done) return s.result.tokens.size();
        return static_cast<std::size_t>(s.layout.first_slot(s.cursor.block) - s.layout.prompt_length);
    } else {
        return s.result.tokens.size();
    }
}

}  // namespace dlm::detail
