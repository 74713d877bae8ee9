// dlm/schedule/concept.hpp — the unmasking-schedule policy axis: which masked slots are committed
// after a forward, and when does a sequence stop?
#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <span>
#include <vector>

#include "../cache/plan.hpp"
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

/// An unmasking schedule. Optional hooks, used when present:
///   `void validate(const canvas_layout&) const` — throw dlm::invalid_parameter for a layout the
///       schedule cannot serve (called before the first forward);
///   `bool suppress_eos(const step_context&) const` — ban EOS tokens from sampling at this step;
///   `bool stop_after_block(const step_context&, std::span<const token_id> block) const` — end the
///       sequence after the block just finished (its tokens given); remaining slots become EOS.
template <class S>
concept unmask_schedule = std::copyable<S> && schedule_has_select<S>;

namespace detail {

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
