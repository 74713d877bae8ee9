// dlm/core/sequence_state.hpp — the per-sequence bookkeeping every decoding loop shares (dlm::decoder
// on the host, dlm::cuda::device_decoder on the GPU): checking a batch before the first forward,
// closing blocks, stopping, and the final answer length.
#pragma once

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "../cache/plan.hpp"
#include "../mask/masks.hpp"
#include "../model/concept.hpp"
#include "../schedule/concept.hpp"
#include "defaults.hpp"
#include "error.hpp"
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
    /// Classifier-free guidance: the canvas with the prompt masked, and its own K/V.
    std::vector<token_id> uncond_canvas;
    std::optional<KvCache> uncond_kv;
    sequence_result result;
    bool done = false;
};

namespace resolve {

[[nodiscard]] inline std::string said_by(const std::string& origin) { return origin.empty() ? "" : " (" + origin + ")"; }

template <class T>
[[nodiscard]] resolved_setting<T> pick(const std::optional<T>& user, const char* user_name, const model_hint<T>& hint, T fallback,
                                       const char* fallback_origin) {
    if (user) return {*user, setting_source::user, user_name};
    if (hint.value) return {*hint.value, setting_source::model, hint.origin};
    return {std::move(fallback), setting_source::library, fallback_origin};
}

/// Token ids a user or model gave must be in the vocabulary.
inline void check_ids(const char* what, const resolved_setting<std::vector<token_id>>& ids, index_t vocab) {
    for (const token_id id : ids.value)
        if (id < 0 || id >= vocab)
            throw invalid_parameter(what, "token id " + std::to_string(id) + said_by(ids.origin) + " is outside the vocabulary [0, " +
                                              std::to_string(vocab) + ")");
}

}  // namespace resolve

/// The settings of a decode that the user may leave unset: the options (or the mask's own block
/// length), else the model's hints, else the library defaults (core/defaults.hpp). Throws
/// dlm::invalid_parameter naming the setting, and where a bad value came from.
template <class Model, class Mask>
[[nodiscard]] decoding_settings resolve_settings(const Model& model, const Mask& mask, const generation_options& o) {
    const decoding_hints h = decoding_hints_of(model);
    decoding_settings s;
    s.gen_length = resolve::pick<index_t>(o.gen_length, "generation_options::gen_length", h.gen_length, default_gen_length,
                                          "dlm::default_gen_length");
    if (s.gen_length.value < 1)
        throw invalid_parameter("gen_length", "must be >= 1, got " + std::to_string(s.gen_length.value) + resolve::said_by(s.gen_length.origin));
    if constexpr (mask_has_block_length_option<Mask>) {
        Mask m = mask;
        s.block_length = resolve::pick<index_t>(mask.block_length, "the mask's block_length", h.block_length, default_block_length,
                                                "dlm::default_block_length");
        m.block_length = s.block_length.value;
        try {
            s.block_length.value = m.block_length_for(s.gen_length.value);
        } catch (const invalid_parameter& e) {
            if (s.block_length.source == setting_source::user) throw;
            throw invalid_parameter(e.parameter(), e.rule() + resolve::said_by(s.block_length.origin) +
                                                       "; set the mask's block_length or gen_length");
        }
    } else {
        s.block_length = {mask.block_length_for(s.gen_length.value), setting_source::library, "fixed by the mask"};
    }
    const std::string mask_origin = h.mask_id_origin.empty() ? "the model's mask_id()" : h.mask_id_origin;
    s.mask_id = {model.mask_id(), setting_source::model, mask_origin};
    if (s.mask_id.value < 0 || s.mask_id.value >= model.vocab_size())
        throw invalid_parameter("mask_id", "the model's mask id " + std::to_string(s.mask_id.value) + resolve::said_by(mask_origin) +
                                               " is outside its vocabulary [0, " + std::to_string(model.vocab_size()) + ")");
    const auto model_eos = model.eos_ids();
    s.eos_ids = resolve::pick<std::vector<token_id>>(
        o.eos_ids, "generation_options::eos_ids",
        {std::vector<token_id>(model_eos.begin(), model_eos.end()), h.eos_ids_origin.empty() ? "the model's eos_ids()" : h.eos_ids_origin}, {},
        "");
    s.end_of_turn_ids = resolve::pick<std::vector<token_id>>(o.end_of_turn_ids, "generation_options::end_of_turn_ids",
                                                             h.end_of_turn_ids, {}, "none: the model names no end-of-turn token");
    resolve::check_ids("eos_ids", s.eos_ids, model.vocab_size());
    resolve::check_ids("end_of_turn_ids", s.end_of_turn_ids, model.vocab_size());
    return s;
}

/// Checks the batch, the options and every policy's options (dlm::invalid_parameter naming the one
/// that is wrong) and builds one state per prompt, each holding the settings it decodes with.
/// Nothing runs on the model. `cfg_refusal`: why this decoder cannot run classifier-free guidance
/// ("" when it can).
template <class KvCache, bool NeedsStorage, class Model, class Mask, class Schedule>
std::vector<sequence_state<KvCache>> prepare_batch(Model& model, const Mask& mask, const Schedule& schedule,
                                                   std::span<const std::vector<token_id>> prompts, const generation_options& o,
                                                   const std::string& cfg_refusal = "this decoder does not implement classifier-free guidance") {
    if (prompts.empty()) throw invalid_parameter("prompts", "the batch is empty");
    if (!o.seeds.empty() && o.seeds.size() != prompts.size())
        throw invalid_parameter("seeds", "holds " + std::to_string(o.seeds.size()) + " seeds for " + std::to_string(prompts.size()) +
                                             " prompts; give one per prompt, or none (derived from seed)");
    if (!(o.cfg_scale >= 0.0) || !std::isfinite(o.cfg_scale))
        throw invalid_parameter("cfg_scale", "must be a finite number >= 0, got " + std::to_string(o.cfg_scale));
    const bool cfg = o.cfg_scale > 0.0;
    if (cfg && !cfg_refusal.empty()) throw invalid_parameter("cfg_scale", cfg_refusal);
    const decoding_settings settings = resolve_settings(model, mask, o);
    const index_t gen_length = settings.gen_length.value, block_length = settings.block_length.value;
    const token_id mask_id = settings.mask_id.value;
    const index_t vocab = model.vocab_size();
    std::vector<sequence_state<KvCache>> seqs(prompts.size());
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        const auto& prompt = prompts[i];
        const std::string which = "prompts[" + std::to_string(i) + "]";
        if (prompt.empty()) throw invalid_parameter(which, "is empty; a prompt needs at least one token");
        for (std::size_t j = 0; j < prompt.size(); ++j) {
            if (prompt[j] < 0 || prompt[j] >= vocab)
                throw invalid_parameter(which, "token " + std::to_string(j) + " is " + std::to_string(prompt[j]) +
                                                   ", outside the vocabulary [0, " + std::to_string(vocab) + ")");
            if (prompt[j] == mask_id)  // the mask marks the slots to decode: in a prompt it would never be filled
                throw invalid_parameter(which, "token " + std::to_string(j) + " is the mask id " + std::to_string(mask_id) +
                                                   ", which marks the slots to decode; a prompt cannot hold it");
        }
        auto& s = seqs[i];
        if (prompt.size() > static_cast<std::size_t>(std::numeric_limits<index_t>::max() - gen_length))
            throw invalid_parameter(which, "prompt length " + std::to_string(prompt.size()) + " + gen_length " +
                                               std::to_string(gen_length) + " exceeds " +
                                               std::to_string(std::numeric_limits<index_t>::max()) +
                                               ", the most canvas positions dlm can index");
        s.layout = {static_cast<index_t>(prompt.size()), gen_length, block_length, model.logits_shift()};
        if constexpr (requires { mask.align_blocks; })
            if (mask.align_blocks) s.layout.lead = s.layout.prompt_length % block_length;
        if constexpr (requires { model.max_context(); }) {
            if (s.layout.size() > model.max_context())
                throw invalid_parameter(which, "prompt length " + std::to_string(prompt.size()) + " + gen_length " +
                                                   std::to_string(gen_length) + " exceeds the model's context of " +
                                                   std::to_string(model.max_context()));
        }
        s.canvas = prompt;
        s.canvas.resize(static_cast<std::size_t>(s.layout.size()), mask_id);
        if (cfg) s.uncond_canvas.assign(static_cast<std::size_t>(s.layout.size()), mask_id);  // LLaDA: un_x[prompt_index] = mask_id
        s.masked_at_block_start = s.layout.slots_in_block(0);
        const auto g = static_cast<std::size_t>(gen_length);
        s.result.tokens.assign(g, mask_id);
        s.result.commit_forward.assign(g, -1);
        s.result.commit_confidence.assign(g, 0.f);
        s.result.settings = settings;
        s.result.settings.seed = o.seeds.empty()
                                     ? resolved_setting<std::uint64_t>{sequence_seed(o.seed, i), setting_source::user,
                                                                       i == 0 ? "generation_options::seed"
                                                                              : "sequence_seed(generation_options::seed, " + std::to_string(i) + ")"}
                                     : resolved_setting<std::uint64_t>{o.seeds[i], setting_source::user,
                                                                       "generation_options::seeds[" + std::to_string(i) + "]"};
    }
    // Policy options are checked once every prompt is known to be well formed.
    for (auto& s : seqs) {
        if constexpr (requires { schedule.validate(s.layout); }) schedule.validate(s.layout);
        if constexpr (NeedsStorage) {
            s.kv.emplace(model.make_kv_cache(s.layout.size()));
            if (cfg) s.uncond_kv.emplace(model.make_kv_cache(s.layout.size()));
        }
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
            const index_t b = s.cursor.block;  // its slots only
            const auto block = std::span<const token_id>(s.canvas).subspan(static_cast<std::size_t>(s.layout.first_slot(b)),
                                                                           static_cast<std::size_t>(s.layout.slots_in_block(b)));
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
