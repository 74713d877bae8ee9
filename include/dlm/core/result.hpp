// dlm/core/result.hpp — what a decode returns, and what the step callback sees.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "plan.hpp"
#include "defaults.hpp"

namespace dlm {

/// Runtime options of one `generate` call. What is left unset comes from the model, else from the
/// library (core/defaults.hpp); each sequence's result says which (`sequence_result::settings`). The
/// block length is an option of the mask (`semi_ar_mask{8}`), resolved the same way.
struct generation_options {
    /// Generation slots per sequence. Unset: the model's dlm_gen_length, else 128.
    std::optional<index_t> gen_length{};
    /// Every random draw derives from a sequence's seed (see rng.hpp): sequence i gets
    /// sequence_seed(seed, i) (sequence 0: `seed` itself) unless `seeds` is given.
    std::uint64_t seed = 0;
    /// One seed per prompt; empty: derived from `seed`. A sequence decodes the same alone and in any
    /// batch when it gets the same seed.
    std::vector<std::uint64_t> seeds{};
    /// EOS ids (end the answer; CDLM stops after a block holding one). Unset: the model's eos_ids().
    std::optional<std::vector<token_id>> eos_ids{};
    /// End-of-turn ids (<|eot_id|>, <|im_end|>): CD4LM defers them like EOS. Unset: the model's.
    std::optional<std::vector<token_id>> end_of_turn_ids{};
    /// LLaDA's classifier-free guidance: > 0 runs an unconditional forward with the prompt masked
    /// beside each conditional one and samples from un + (cfg_scale + 1)·(cond − un). Not with an
    /// exact cache (dlm::invalid_parameter).
    double cfg_scale = 0.0;
};

/// Statistics of one sequence.
struct sequence_stats {
    index_t forwards = 0;                 ///< model forwards (NFE) this sequence took part in
    std::vector<index_t> steps_per_block; ///< forwards spent on each finished block
    index_t committed = 0;                ///< slots committed by the schedule (excludes EOS fill after a stop)
    index_t edits = 0;                    ///< filled slots a revising schedule replaced (sequence_result::revisions)
    std::int64_t rows_computed = 0;       ///< query rows computed over all forwards (the work done)

    /// Tokens committed per forward (TPF).
    [[nodiscard]] double tokens_per_forward() const noexcept {
        return forwards ? static_cast<double>(committed) / forwards : 0.0;
    }
};

/// How a sequence ended.
enum class sequence_status {
    finished,   ///< every slot decoded, or the schedule stopped it after a block holding EOS
    cancelled,  ///< the step callback cancelled the decode before this sequence finished
    failed,     ///< this sequence failed (NaN/Inf logits, a policy breaking its contract); see `message`
};

/// A revising schedule's replacement of a filled slot of the active block (a token-to-token edit).
struct revision {
    index_t position = 0;            ///< canvas position
    index_t slot = 0;                ///< generation slot (position − prompt length: its index in tokens)
    token_id old_token = no_token;   ///< the slot's token before the edit
    token_id new_token = no_token;   ///< its token after
    index_t forward = 0;             ///< the sequence's forward index of the step that edited it
    float confidence = 0.f;          ///< p(new_token) at that forward
};

/// One decoded sequence.
struct sequence_result {
    std::vector<token_id> tokens;          ///< the gen_length generated slots (mask id where never committed)
    /// Forward index at which each slot was committed (filled: it stopped being masked); -1: filled
    /// after a stop, or never. A revising schedule may replace the token later: `revisions` says when.
    std::vector<index_t> commit_forward;
    std::vector<float> commit_confidence;  ///< p(token) when committed (0 for filled slots)
    /// Every edit of a revising schedule, in the order made (empty for schedules that never revise).
    /// A slot's final token is its last revision's new_token, else the token committed.
    std::vector<revision> revisions;
    index_t answer_length = 0;             ///< slots before the first EOS (gen_length if none)
    bool stopped_early = false;            ///< the schedule ended the sequence after a block holding EOS
    sequence_status status = sequence_status::finished;
    std::string message;                   ///< why it failed (the error's what()); empty otherwise
    std::exception_ptr error;              ///< the typed error (dlm::numeric_error, ...) when it failed
    sequence_stats stats;
    decoding_settings settings;            ///< the settings it was decoded with, and where each came from

    [[nodiscard]] bool cancelled() const noexcept { return status == sequence_status::cancelled; }
    [[nodiscard]] bool failed() const noexcept { return status == sequence_status::failed; }
    /// Throws the sequence's error again, typed, when it failed.
    void rethrow_if_failed() const {
        if (error) std::rethrow_exception(error);
    }
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
    std::span<const index_t> committed;  ///< canvas positions committed (filled) by this step
    const sequence_result* result = nullptr;  ///< the sequence so far (tokens, commit forwards, confidences, revisions)
    std::span<const index_t> edited;     ///< canvas positions a revising schedule replaced in this step
};

enum class step_action { proceed, cancel };

/// Called after every sequence's step; return step_action::cancel to stop the whole decode.
using step_callback = std::function<step_action(const step_event&)>;

}  // namespace dlm
