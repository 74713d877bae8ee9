// dlm/schedule/concept.hpp — the unmasking-schedule policy axis: which masked slots are committed
// after a forward, which filled slots of the active block a revising schedule replaces, when the
// block is final, and when does a sequence stop?
#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../core/hooks.hpp"
#include "../core/plan.hpp"
#include "../core/rng.hpp"

namespace dlm {

/// One still-masked slot of the active block, with the sampler's choice for it.
struct candidate {
    index_t position = 0;  ///< absolute canvas position
    token_id token = no_token;
    float probability = 0.f;
    float margin = 0.f;
    float neg_entropy = 0.f;
};

/// Everything a schedule may look at when it decides. Schedules keep no state of their own: all
/// per-sequence state is here, so one schedule object serves a whole batch.
struct step_context {
    canvas_layout layout;
    block_cursor cursor;
    index_t masked_at_block_start = 0;    ///< masked slots in the active block when it became active
    index_t committed_in_generation = 0;  ///< slots committed so far, all blocks, before this step
    index_t forward = 0;                  ///< this sequence's forward index (0-based) of the current step
    std::uint64_t seed = 0;                ///< this sequence's seed
    std::span<const token_id> eos_ids;
    std::span<const token_id> end_of_turn_ids;  ///< tokens that end a chat turn (<|eot_id|>, <|im_end|>); not EOS
    /// Revising schedules: forwards of the active block taken after it had no masked slot left
    /// (before this step); 0 for every other schedule.
    index_t steps_after_filled = 0;

    /// The random numbers of this step for `position` and `stream`.
    [[nodiscard]] random_key key(rng_stream stream, index_t position) const noexcept {
        return {seed, stream, forward, position};
    }
};

/// Hook: `s.select(context, candidates, chosen)` — append to `chosen` the indices (into `candidates`,
/// each at most once) of the slots to commit now. `candidates` holds every masked slot of the active
/// block, in position order. Committing none is allowed; the block ends when no slot is masked.
template <class S>
concept schedule_has_select =
    requires(const S& s, const step_context& ctx, std::span<const candidate> c, std::vector<index_t>& chosen) {
        { s.select(ctx, c, chosen) } -> std::same_as<void>;
    };

/// A filled slot of the active block (a generation slot, never the prompt) with the sampler's new
/// choice for it: what a revising schedule may put in place of `current`.
struct filled_candidate : candidate {
    token_id current = no_token;  ///< the slot's token before this step
};

/// What a revising or uniform-state schedule's block_done sees after a step of the active block.
struct block_step {
    index_t masked_before = 0;  ///< masked slots of the block when the step began
    index_t still_masked = 0;   ///< masked slots of the block after the step's fills
    index_t edited = 0;         ///< filled slots the step replaced
    /// Uniform-state schedules: the consecutive steps before this one whose draft (the argmax of every
    /// slot) this step's draft equals (0 when it changed, or on a block's first step).
    index_t draft_unchanged = 0;
    /// Uniform-state schedules: the mean over the block's slots of the entropy of the step's (tempered) logits.
    double mean_entropy = 0.0;
};

// Optional hooks of a schedule: this is the one list (core/hooks.hpp says how it is checked).

/// `void validate(const canvas_layout&) const` — throw dlm::invalid_parameter for a layout the
/// schedule cannot serve (called before the first forward).
template <class S>
concept schedule_has_validate = requires(const S& s, const canvas_layout& l) { s.validate(l); };
/// `bool suppress_eos(const step_context&) const` — ban EOS tokens from sampling at this step.
template <class S>
concept schedule_has_suppress_eos = requires(const S& s, const step_context& ctx) {
    { s.suppress_eos(ctx) } -> std::convertible_to<bool>;
};
/// `bool stop_after_block(const step_context&, std::span<const token_id> block) const` — end the
/// sequence after the block just finished (its tokens given); remaining slots become EOS.
template <class S>
concept schedule_has_stop_after_block = requires(const S& s, const step_context& ctx, std::span<const token_id> block) {
    { s.stop_after_block(ctx, block) } -> std::convertible_to<bool>;
};
/// `index_t sub_block` — the schedule decodes a block by sub-blocks of this many slots; a cache with
/// a sub_block of its own must agree (cache/compatibility.hpp).
template <class S>
concept schedule_has_sub_block = requires(const S& s) {
    { s.sub_block } -> std::convertible_to<index_t>;
};

/// Revision, two hooks that come together (a schedule with one and not the other does not compile):
/// `void revise(const step_context&, std::span<const filled_candidate> filled, std::vector<index_t>& edits) const`
/// — append the indices (into `filled`, each at most once) of the filled slots to replace by their
/// new choice now; `filled` holds every filled generation slot of the active block as it was before
/// this step's fills, in position order. `bool block_done(const step_context&, const block_step&) const`
/// — is the active block final after this step? While it is not, the block stays active (another
/// forward, even with no masked slot left); once it is, its tokens are final: streamed, cached,
/// never changed again. A schedule without these hooks never revises: a block is final when its
/// last masked slot is filled, and the loop samples no filled slot (it costs nothing).
template <class S>
concept schedule_has_revise =
    requires(const S& s, const step_context& ctx, std::span<const filled_candidate> f, std::vector<index_t>& edits) {
        { s.revise(ctx, f, edits) } -> std::same_as<void>;
    };
template <class S>
concept schedule_has_block_done = requires(const S& s, const step_context& ctx, const block_step& b) {
    { s.block_done(ctx, b) } -> std::convertible_to<bool>;
};
/// Does the schedule revise filled slots of its active block?
template <class S>
concept revising_schedule = schedule_has_revise<S> && schedule_has_block_done<S>;

/// Uniform-state diffusion (DiffusionGemma), hooks that come together: `static constexpr bool
/// uniform_state = true`, `float step_temperature(const step_context&) const` and `bool
/// block_done(const step_context&, const block_step&) const`. The active block starts as uniform
/// noise (dlm::uniform_noise), not the mask; every forward, each of its slots is sampled from its
/// logits divided by step_temperature, `select` gets every slot as a candidate and chooses the ones
/// to accept (they take the sampled token), the others are renoised; each slot's argmax is the draft.
/// When block_done says so, the draft becomes the block's final tokens. The model gets the previous
/// step's tempered logits when it self-conditions (model_self_conditions).
template <class S>
concept uniform_state_schedule = requires {
    requires S::uniform_state;
} && requires(const S& s, const step_context& ctx) {
    { s.step_temperature(ctx) } -> std::convertible_to<float>;
} && schedule_has_block_done<S>;

#define DLM_SCHEDULE_HOOKS                                                                                                       \
    "`void validate(const canvas_layout&) const`, `bool suppress_eos(const step_context&) const`, "                              \
    "`bool stop_after_block(const step_context&, std::span<const token_id>) const`, `index_t sub_block`, and together "         \
    "`void revise(const step_context&, std::span<const filled_candidate>, std::vector<index_t>&) const` and "                    \
    "`bool block_done(const step_context&, const block_step&) const`, or `uniform_state` with `step_temperature` and `block_done`"

template <class S>
concept schedule_hook_misnamed =
    DLM_HAS_MEMBER_NAMED(S, validates) || DLM_HAS_MEMBER_NAMED(S, validate_layout) || DLM_HAS_MEMBER_NAMED(S, suppress_eos_ids) ||
    DLM_HAS_MEMBER_NAMED(S, suppresses_eos) || DLM_HAS_MEMBER_NAMED(S, stop_after_blocks) || DLM_HAS_MEMBER_NAMED(S, stops_after_block) ||
    DLM_HAS_MEMBER_NAMED(S, stop_at_block) || DLM_HAS_MEMBER_NAMED(S, sub_blocks) || DLM_HAS_MEMBER_NAMED(S, sub_block_size) ||
    DLM_HAS_MEMBER_NAMED(S, edit) || DLM_HAS_MEMBER_NAMED(S, revise_slots) || DLM_HAS_MEMBER_NAMED(S, block_final) ||
    DLM_HAS_MEMBER_NAMED(S, block_finished) || DLM_HAS_MEMBER_NAMED(S, is_block_done);
template <class S>
concept schedule_hook_mistyped = (DLM_HAS_MEMBER_NAMED(S, validate) && !schedule_has_validate<S>) ||
                                 (DLM_HAS_MEMBER_NAMED(S, suppress_eos) && !schedule_has_suppress_eos<S>) ||
                                 (DLM_HAS_MEMBER_NAMED(S, stop_after_block) && !schedule_has_stop_after_block<S>) ||
                                 (DLM_HAS_MEMBER_NAMED(S, sub_block) && !schedule_has_sub_block<S>) ||
                                 (DLM_HAS_MEMBER_NAMED(S, revise) && !schedule_has_revise<S>) ||
                                 (DLM_HAS_MEMBER_NAMED(S, block_done) && !schedule_has_block_done<S>) ||
                                 (schedule_has_revise<S> != schedule_has_block_done<S> && !uniform_state_schedule<S>) ||
                                 (requires { S::uniform_state; } && !uniform_state_schedule<S>) ||
                                 (schedule_has_revise<S> && uniform_state_schedule<S>);
/// Every member named like a schedule hook is one, in its known form.
template <class S>
concept schedule_hooks_known = !schedule_hook_misnamed<S> && !schedule_hook_mistyped<S>;

/// An unmasking schedule: select, and any optional hook in its known form.
template <class S>
concept unmask_schedule = std::copyable<S> && schedule_has_select<S> && schedule_hooks_known<S>;

/// The loop's calls of the optional hooks (the only place it asks whether one exists).
template <class S>
void schedule_validate(const S& s, const canvas_layout& l) {
    if constexpr (schedule_has_validate<S>) s.validate(l);
}
template <class S>
[[nodiscard]] bool schedule_suppresses_eos(const S& s, const step_context& ctx) {
    if constexpr (schedule_has_suppress_eos<S>) return s.suppress_eos(ctx);
    else return false;
}
/// Is the active block final after a step? A schedule that never revises: when no slot is masked.
template <class S>
[[nodiscard]] bool schedule_block_done(const S& s, const step_context& ctx, const block_step& b) {
    if constexpr (revising_schedule<S> || uniform_state_schedule<S>) return s.block_done(ctx, b);
    else return b.still_masked == 0;
}
template <class S>
[[nodiscard]] bool schedule_stops_after_block(const S& s, const step_context& ctx, std::span<const token_id> block) {
    if constexpr (schedule_has_stop_after_block<S>) return s.stop_after_block(ctx, block);
    else return false;
}

/// How a schedule with a `steps` option counts them: every forward of the generation, split evenly
/// over the blocks (LLaDA, Dream), the planned forwards of each block (SDAR, LLaDA2), or a cap on each
/// block's forwards with the schedule's own default (DiffusionGemma's max_denoising_steps). A schedule
/// says `static constexpr step_count counts_steps = step_count::in_all;`; without it, per block.
/// The preset registry reads it (the default of steps: the generation length, the block length, or
/// the schedule's own; include/dlm/registry/).
enum class step_count { in_all, per_block, capped };

template <class S>
[[nodiscard]] constexpr step_count schedule_step_count() noexcept {
    if constexpr (requires { S::counts_steps; }) return S::counts_steps;
    else return step_count::per_block;
}

namespace detail {

/// The rule of schedules that count their steps in all: the blocks share them evenly. This is its
/// one place; the CLI, dlm-eval and dlm-server reach it through the registry's validate.
inline void check_steps_in_all(index_t steps, const canvas_layout& l) {
    const index_t blocks = l.block_count();
    if (blocks > 0 && steps % blocks != 0)
        throw invalid_parameter("steps", "must be a multiple of the number of blocks (" + std::to_string(blocks) + " = gen_length " +
                                             std::to_string(l.gen_length) + " / block_length " + std::to_string(l.block_length) + "), got " +
                                             std::to_string(steps));
}

/// Refuses more steps than the decoders let a block take (max_steps_per_slot forwards per slot;
/// past it a decode is taken to be stuck): for a schedule that runs every step it is given (Dream's
/// commits nothing at many of them), which would end in a contract_error after the work.
inline void check_steps_per_block(index_t steps, const canvas_layout& l) {
    const index_t blocks = std::max<index_t>(l.block_count(), 1);
    const std::int64_t most = static_cast<std::int64_t>(max_steps_per_slot) * l.block_length * blocks;
    if (l.block_length > 0 && steps > most)
        throw invalid_parameter("steps", "must be at most " + std::to_string(most) + " (" + std::to_string(max_steps_per_slot) +
                                             " forwards per slot of each block of " + std::to_string(l.block_length) +
                                             "; past it a decode is taken to be stuck), got " + std::to_string(steps));
}

/// Indices of the k best candidates by `score` (descending; ties: lower position first).
template <class Score>
void top_k_by(std::span<const candidate> c, index_t k, std::vector<index_t>& chosen, Score score) {
    std::vector<index_t> order(c.size());
    for (std::size_t i = 0; i < c.size(); ++i) order[i] = static_cast<index_t>(i);
    std::stable_sort(order.begin(), order.end(), [&](index_t a, index_t b) {
        return score(c[static_cast<std::size_t>(a)]) > score(c[static_cast<std::size_t>(b)]);
    });
    const auto n = std::min<std::size_t>(static_cast<std::size_t>(std::max<index_t>(k, 0)), order.size());
    chosen.insert(chosen.end(), order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n));
}

inline bool contains_eos(std::span<const token_id> tokens, std::span<const token_id> eos) noexcept {
    for (token_id t : tokens)
        for (token_id e : eos)
            if (t == e) return true;
    return false;
}

}  // namespace detail

}  // namespace dlm
