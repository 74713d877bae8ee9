// dlm/core/result.hpp — what a decode returns, and what the step callback sees.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "../cache/plan.hpp"

namespace dlm {

/// Runtime options of one `generate` call.
struct generation_options {
    index_t gen_length = 128;  ///< generation slots per sequence
    std::uint64_t seed = 0;    ///< every random draw derives from it (see rng.hpp)
};

/// Statistics of one sequence.
struct sequence_stats {
    index_t forwards = 0;                 ///< model forwards (NFE) this sequence took part in
    std::vector<index_t> steps_per_block; ///< forwards spent on each finished block
    index_t committed = 0;                ///< slots committed by the schedule (excludes EOS fill after a stop)
    std::int64_t rows_computed = 0;       ///< query rows computed over all forwards (the work done)

    /// Tokens committed per forward (TPF).
    [[nodiscard]] double tokens_per_forward() const noexcept {
        return forwards ? static_cast<double>(committed) / forwards : 0.0;
    }
};

/// One decoded sequence.
struct sequence_result {
    std::vector<token_id> tokens;          ///< the gen_length generated slots (mask id where never committed)
    std::vector<index_t> commit_forward;   ///< forward index at which each slot was committed; -1: filled after a stop, or never
    std::vector<float> commit_confidence;  ///< p(token) when committed (0 for filled slots)
    index_t answer_length = 0;             ///< slots before the first EOS (gen_length if none)
    bool stopped_early = false;            ///< the schedule ended the sequence after a block holding EOS
    bool cancelled = false;                ///< the step callback cancelled the decode before this sequence finished
    sequence_stats stats;
};

/// Statistics of one batched decode.
struct decode_stats {
    index_t forwards = 0;         ///< batched model forwards
    double model_seconds = 0;     ///< wall time inside the model's forward
    double overhead_seconds = 0;  ///< wall time in the decoder itself: sampling, scheduling, bookkeeping
    [[nodiscard]] double total_seconds() const noexcept { return model_seconds + overhead_seconds; }
};

/// The result of `decoder::generate`.
struct decode_result {
    std::vector<sequence_result> sequences;
    decode_stats stats;
};

/// What the step callback sees after each sequence's step.
struct step_event {
    index_t sequence = 0;                ///< index in the batch
    index_t forward = 0;                 ///< this sequence's forward index of the step
    block_cursor cursor;                 ///< block and step of the step just taken
    canvas_layout layout;
    std::span<const token_id> canvas;    ///< the whole canvas after the commits
    std::span<const index_t> committed;  ///< canvas positions committed by this step
    const sequence_result* result = nullptr;  ///< the sequence so far (tokens, commit forwards, confidences)
};

enum class step_action { proceed, cancel };

/// Called after every sequence's step; return step_action::cancel to stop the whole decode.
using step_callback = std::function<step_action(const step_event&)>;

}  // namespace dlm
