// dlm/core/sequence_state.hpp — the per-sequence bookkeeping every decoding loop shares (dlm::decoder
// on the host, dlm::cuda::device_decoder on the GPU): checking a batch before the first forward,
// closing blocks, stopping, and the final answer length.
#pragma once

#include <algorithm>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "../cache/plan.hpp"
#include "error.hpp"
#include "../schedule/concept.hpp"
#include "result.hpp"

namespace dlm::detail {

/// A schedule that leaves a block unfinished after this many forwards per slot is broken; decoders
/// throw dlm::contract_error instead of looping forever.
inline constexpr index_t max_steps_per_slot = 64;

/// One sequence of a batch while it decodes.
template <class KvCache>
struct sequence_state {
    canvas_layout layout;
    std::vector<token_id> canvas;
    block_cursor cursor;
    index_t masked_at_block_start = 0;
    std::optional<KvCache> kv;
    sequence_result result;
    bool done = false;
};

/// Checks the batch, the options and every policy's options (dlm::invalid_parameter naming the one
/// that is wrong) and builds one state per prompt. Nothing runs on the model.
template <class KvCache, bool NeedsStorage, class Model, class Mask, class Schedule>
std::vector<sequence_state<KvCache>> prepare_batch(Model& model, const Mask& mask, const Schedule& schedule,
                                                   std::span<const std::vector<token_id>> prompts, const generation_options& o) {
    if (prompts.empty()) throw invalid_parameter("prompts", "the batch is empty");
    if (o.gen_length < 1) throw invalid_parameter("gen_length", "must be >= 1, got " + std::to_string(o.gen_length));
    const token_id mask_id = model.mask_id();
    const index_t vocab = model.vocab_size();
    if (mask_id < 0 || mask_id >= vocab)
        throw invalid_parameter("mask_id", "the model's mask id " + std::to_string(mask_id) + " is outside its vocabulary [0, " +
                                               std::to_string(vocab) + ")");
    const index_t block_length = mask.block_length_for(o.gen_length);
    std::vector<sequence_state<KvCache>> seqs(prompts.size());
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        const auto& prompt = prompts[i];
        const std::string which = "prompts[" + std::to_string(i) + "]";
        if (prompt.empty()) throw invalid_parameter(which, "is empty; a prompt needs at least one token");
        for (std::size_t j = 0; j < prompt.size(); ++j)
            if (prompt[j] < 0 || prompt[j] >= vocab)
                throw invalid_parameter(which, "token " + std::to_string(j) + " is " + std::to_string(prompt[j]) +
                                                   ", outside the vocabulary [0, " + std::to_string(vocab) + ")");
        auto& s = seqs[i];
        if (prompt.size() > static_cast<std::size_t>(std::numeric_limits<index_t>::max() - o.gen_length))
            throw invalid_parameter(which, "prompt length " + std::to_string(prompt.size()) + " + gen_length " +
                                               std::to_string(o.gen_length) + " exceeds " +
                                               std::to_string(std::numeric_limits<index_t>::max()) +
                                               ", the most canvas positions dlm can index");
        s.layout = {static_cast<index_t>(prompt.size()), o.gen_length, block_length, model.logits_shift()};
        if constexpr (requires { model.max_context(); }) {
            if (s.layout.size() > model.max_context())
                throw invalid_parameter(which, "prompt length " + std::to_string(prompt.size()) + " + gen_length " +
                                                   std::to_string(o.gen_length) + " exceeds the model's context of " +
                                                   std::to_string(model.max_context()));
        }
        s.canvas = prompt;
        s.canvas.resize(static_cast<std::size_t>(s.layout.size()), mask_id);
        s.masked_at_block_start = block_length;
        const auto g = static_cast<std::size_t>(o.gen_length);
        s.result.tokens.assign(g, mask_id);
        s.result.commit_forward.assign(g, -1);
        s.result.commit_confidence.assign(g, 0.f);
    }
    // Policy options are checked once every prompt is known to be well formed.
    for (auto& s : seqs) {
        if constexpr (requires { schedule.validate(s.layout); }) schedule.validate(s.layout);
        if constexpr (NeedsStorage) s.kv.emplace(model.make_kv_cache(s.layout.size()));
    }
    return seqs;
}

/// Throws dlm::contract_error when a cache policy's plan is inconsistent with the layout.
inline void check_plan(const forward_plan& p, const canvas_layout& l, const char* who) {
    const bool ok = 0 <= p.window_begin && p.window_begin <= p.window_end && p.window_end <= l.size() &&
                    p.window_begin <= p.logits_begin && p.logits_begin < p.logits_end && p.logits_end <= p.window_end &&
                    (!p.stores() || (p.window_begin <= p.store_begin && p.store_end <= p.window_end)) &&
                    p.window_end <= p.attend_end && p.attend_end <= l.size();
    if (!ok) throw contract_error(std::string(who) + ": the cache policy planned an inconsistent forward");
}

/// After a step: close the block when it has no masked slot left, then stop (last block, or the
/// schedule's stop_after_block: the rest becomes EOS) or move to the next block.
template <class KvCache, class Schedule>
void advance(sequence_state<KvCache>& s, const Schedule& schedule, const step_context& ctx, std::size_t still_masked,
             token_id mask_id, const char* who) {
    if (still_masked == 0) {
        s.result.stats.steps_per_block.push_back(s.cursor.step_in_block);
        bool stop = s.cursor.block + 1 >= s.layout.block_count();
        if constexpr (requires { schedule.stop_after_block(ctx, std::span<const token_id>{}); }) {
            const auto block = std::span<const token_id>(s.canvas).subspan(
                static_cast<std::size_t>(s.layout.block_begin(s.cursor.block)), static_cast<std::size_t>(s.layout.block_length));
            if (!stop && schedule.stop_after_block(ctx, block)) {
                stop = true;
                s.result.stopped_early = true;
                const token_id fill = ctx.eos_ids.empty() ? mask_id : ctx.eos_ids.front();
                for (index_t p = s.layout.block_end(s.cursor.block); p < s.layout.size(); ++p) {
                    s.canvas[static_cast<std::size_t>(p)] = fill;
                    s.result.tokens[static_cast<std::size_t>(p - s.layout.prompt_length)] = fill;
                }
            }
        }
        if (stop) {
            s.done = true;
            s.kv.reset();
        } else {
            s.cursor = {s.cursor.block + 1, 0};
            s.masked_at_block_start = s.layout.block_length;
        }
    } else if (s.cursor.step_in_block > max_steps_per_slot * s.layout.block_length) {
        throw contract_error(std::string(who) + ": the schedule left block " + std::to_string(s.cursor.block) + " unfinished after " +
                             std::to_string(s.cursor.step_in_block) + " forwards");
    }
}

/// The answer length (slots before the first EOS) of a finished sequence.
inline void finish(sequence_result& r, std::span<const token_id> eos) {
    r.answer_length = static_cast<index_t>(r.tokens.size());
    for (std::size_t i = 0; i < r.tokens.size(); ++i)
        if (std::find(eos.begin(), eos.end(), r.tokens[i]) != eos.end()) {
            r.answer_length = static_cast<index_t>(i);
            break;
        }
}

}  // namespace dlm::detail
