// dlm/engine/uniform_step.hpp — one step of a uniform-state schedule (schedule/concept.hpp,
// uniform_state_schedule) applied to a sequence: its active block is never masked but noise, each
// forward's draft is kept in the result, the accepted slots' tokens and fresh noise elsewhere are the
// next forward's input, and the draft becomes final when the schedule closes the block. The engine
// (engine.hpp) calls it after the stepper's denoise, as it calls engine/revision.hpp's apply_writes
// for every other schedule.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../core/rng.hpp"
#include "../model/concept.hpp"
#include "../schedule/concept.hpp"
#include "sequence_state.hpp"
#include "step.hpp"

namespace dlm::detail {

/// The active block's slots as uniform noise before the sequence's next forward.
template <class KvCache>
void fill_noise(sequence_state<KvCache>& s, index_t vocab) {
    const index_t forward = s.result.stats.forwards;
    for (index_t p = s.layout.first_slot(s.cursor.block); p < s.layout.block_end(s.cursor.block); ++p)
        s.canvas[static_cast<std::size_t>(p)] = uniform_noise(s.result.settings.seed.value, forward, p, vocab);
}

/// A uniform-state step of sequence `s` at `ctx`, its forward's window `window` rows: the stepper's
/// draft (`u`) into its result, the accepted slots' sampled tokens and fresh noise elsewhere into its
/// canvas (the next forward's input), the tempered logits kept for a self-conditioning `model`; when
/// the schedule closes the block, the draft becomes its final tokens (committed at this forward, their
/// positions into `committed`) and the next block starts as noise. `accepted` is scratch, reused
/// across steps. Throws dlm::contract_error naming `who` for a draft that does not cover the active
/// block, or a slot accepted twice or outside it.
template <class Model, class KvCache, class Schedule>
void apply_uniform(const Model& model, sequence_state<KvCache>& s, const Schedule& schedule, const step_context& ctx, index_t window,
                   const uniform_step& u, std::vector<char>& accepted, std::vector<index_t>& committed, const char* who) {
    const index_t first = s.layout.first_slot(s.cursor.block), end = s.layout.block_end(s.cursor.block);
    if (u.draft.size() != static_cast<std::size_t>(end - first))
        throw contract_error(std::string(who) + ": the stepper's draft does not cover the active block");
    bool same = s.cursor.step_in_block > 0;
    for (const slot_commit& d : u.draft) {
        token_id& t = s.result.tokens[static_cast<std::size_t>(d.position - s.layout.prompt_length)];
        same = same && t == d.token;
        t = d.token;
    }
    s.draft_unchanged = same ? s.draft_unchanged + 1 : 0;
    accepted.assign(static_cast<std::size_t>(end - first), 0);
    for (const slot_commit& a : u.accepted) {
        if (a.position < first || a.position >= end || accepted[static_cast<std::size_t>(a.position - first)])
            throw contract_error(std::string(who) + ": the schedule accepted position " + std::to_string(a.position) + " twice or outside its block");
        accepted[static_cast<std::size_t>(a.position - first)] = 1;
        s.canvas[static_cast<std::size_t>(a.position)] = a.token;
    }
    const index_t vocab = model.vocab_size();
    for (index_t p = first; p < end; ++p)
        if (!accepted[static_cast<std::size_t>(p - first)]) s.canvas[static_cast<std::size_t>(p)] = uniform_noise(ctx.seed, ctx.forward + 1, p, vocab);
    if constexpr (model_self_conditions<Model>) s.self_conditioning.assign(u.tempered.begin(), u.tempered.end());
    s.result.stats.forwards += 1;
    s.result.stats.rows_computed += window;
    s.cursor.step_in_block += 1;
    const block_step step{0, 0, 0, s.draft_unchanged, u.mean_entropy};
    const index_t block = s.cursor.block;
    if (schedule_block_done(schedule, ctx, step)) {  // the draft is final: the canvas the next block's forward stores
        for (const slot_commit& d : u.draft) {
            s.canvas[static_cast<std::size_t>(d.position)] = d.token;
            const auto g = static_cast<std::size_t>(d.position - s.layout.prompt_length);
            s.result.commit_forward[g] = ctx.forward;
            s.result.commit_confidence[g] = d.probability;
            committed.push_back(d.position);
        }
        s.result.stats.committed += end - first;
        s.self_conditioning.clear();
        s.draft_unchanged = 0;
    }
    advance(s, schedule, ctx, step, s.result.settings.mask_id.value, who);
    if (!s.done && s.cursor.block != block) fill_noise(s, vocab);
}

}  // namespace dlm::detail
