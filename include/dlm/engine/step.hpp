// dlm/engine/step.hpp — what the engine hands a stepper for one sequence of a batch, and what the
// stepper hands back.
//
// The engine (engine.hpp) owns the loop: it plans every sequence's forward, lets a *stepper* run the
// batched forward and choose each sequence's commits, and applies them (canvas, result, statistics,
// blocks, the committed prefix, failure of one sequence). A stepper is how a backend turns a forward
// into commits: host_stepper.hpp samples and selects on the host; dlm::cuda's device stepper runs the
// forward, sampling and selection on the GPU and brings back only the chosen slots. A stepper is
//   explicit S(Decoder&);
//   void admit(const sequence_state<kv>&, const Schedule&, const Sampler&);   // refuse what it cannot run
//   void forward(std::span<const forward_request<kv>>, std::span<const step_input<...>>, std::size_t rows);
//   void choose(std::size_t i, const step_input<...>&, std::vector<slot_commit>&);  // throws for sequence i alone
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "../core/plan.hpp"
#include "../schedule/concept.hpp"
#include "sequence_state.hpp"

namespace dlm {

/// What one engine step did to one sequence; the same for every decoder type (registry::any_engine
/// returns an engine's reports as they are).
struct step_report {
    std::uint64_t id = 0;            ///< the sequence (engine::sequence_id)
    std::vector<index_t> committed;  ///< canvas positions committed (filled) by this step
    bool finished = false;           ///< it left the batch (finished, failed or cancelled) in this step
    std::vector<index_t> edited;     ///< canvas positions a revising schedule replaced in this step
};

/// One slot a step commits: its canvas position, its token and the confidence it was chosen with.
struct slot_commit {
    index_t position = 0;
    token_id token = no_token;
    float probability = 0.f;
};

/// What a stepper hands back for one step of a uniform-state schedule (schedule/concept.hpp).
struct uniform_step {
    std::vector<slot_commit> accepted;  ///< slots of the active block that take their sampled token
    std::vector<slot_commit> draft;     ///< every slot of the active block, in order: its argmax and p(argmax)
    double mean_entropy = 0.0;          ///< over the block's slots, of the tempered distributions
    std::span<const float> tempered;    ///< the step's tempered logits rows (the stepper's; valid until its next forward)
};

namespace detail {

/// One sequence of a step's batch as a stepper sees it: its state before the step, its planned
/// forward, its step context, its own policies, and where its logits rows are in the batch's forward.
template <class KvCache, class Schedule, class Sampler>
struct step_input {
    const sequence_state<KvCache>* state = nullptr;
    forward_plan plan;
    step_context ctx;
    const Schedule* schedule = nullptr;
    const Sampler* sampler = nullptr;
    float cfg_factor = 0.f;      ///< > 0: classifier-free guidance; the unconditional rows follow the conditional ones
    std::size_t first_row = 0;   ///< its first (conditional) logits row in the batch's forward
    index_t index = 0;           ///< the sequence as errors name it (its id's low 31 bits)

    [[nodiscard]] std::size_t rows() const noexcept { return static_cast<std::size_t>(plan.logits_rows()) * (cfg_factor > 0.f ? 2 : 1); }
};

/// Every masked slot of the active block, in position order: what a step samples and what a
/// schedule chooses among (a plan may return logits for some of them only; the stepper skips the rest).
template <class KvCache, class F>
void for_each_masked_slot(const sequence_state<KvCache>& s, token_id mask_id, F&& f) {
    const index_t b_end = s.layout.block_end(s.cursor.block);
    for (index_t p = s.layout.block_begin(s.cursor.block); p < b_end; ++p)
        if (s.canvas[static_cast<std::size_t>(p)] == mask_id) f(p);
}

/// Whether a stepper keeps the logits rows in host memory (`static constexpr bool host_logits`; a
/// stepper that does not say: yes), where the engine weighs them.
template <class Stepper>
inline constexpr bool stepper_logits_on_host = [] {
    if constexpr (requires { Stepper::host_logits; }) return static_cast<bool>(Stepper::host_logits);
    else return true;
}();

/// The bytes of a stepper's host logits buffer now (`held_logits_bytes()`; 0 where it does not say):
/// what the engine counts as spare beyond the running sequences' rows.
template <class Stepper>
[[nodiscard]] std::uint64_t held_logits_bytes_of(const Stepper& s) {
    if constexpr (requires { s.held_logits_bytes(); }) return static_cast<std::uint64_t>(s.held_logits_bytes());
    else return 0;
}

}  // namespace detail
}  // namespace dlm
