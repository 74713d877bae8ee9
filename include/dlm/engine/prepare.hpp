// dlm/engine/prepare.hpp — before the first forward: the settings a decode resolves (user, model,
// library) and the checked per-sequence states of a batch.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../core/defaults.hpp"
#include "../core/error.hpp"
#include "../core/memory.hpp"
#include "../core/result.hpp"
#include "../mask/masks.hpp"
#include "../model/concept.hpp"
#include "sequence_state.hpp"

namespace dlm::detail {

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
    if (s.block_length.value < 1)
        throw contract_error("dlm::decoder: the mask's block_length_for(" + std::to_string(s.gen_length.value) + ") returned " +
                             std::to_string(s.block_length.value) + "; a mask's blocks hold at least one slot");
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

/// The largest classifier-free guidance scale (check_batch_options).
inline constexpr double max_cfg_scale = 1e6;

/// Checks what the options ask of the batch as a whole (dlm::invalid_parameter): the batch, one seed
/// per prompt, and classifier-free guidance (`cfg_refusal`: why this decoder cannot run it, "" when
/// it can).
inline void check_batch_options(std::span<const std::vector<token_id>> prompts, const generation_options& o,
                                const std::string& cfg_refusal) {
    if (prompts.empty()) throw invalid_parameter("prompts", "the batch is empty");
    if (!o.seeds.empty() && o.seeds.size() != prompts.size())
        throw invalid_parameter("seeds", "holds " + std::to_string(o.seeds.size()) + " seeds for " + std::to_string(prompts.size()) +
                                             " prompts; give one per prompt, or none (derived from seed)");
    // Past 1e6 the guided logits un + (cfg + 1)(cond - un) overflow float for no use: LLaDA's scales are 0 to 3.
    if (!(o.cfg_scale >= 0.0 && o.cfg_scale <= max_cfg_scale))
        throw invalid_parameter("cfg_scale", "must be a number in [0, 1e6], got " + std::to_string(o.cfg_scale));
    if (o.cfg_scale > 0.0 && !cfg_refusal.empty()) throw invalid_parameter("cfg_scale", cfg_refusal);
}

/// Refuses a gen_length that alone leaves no position of a context of `context` for a prompt
/// (gen_length >= the context: no prompt could fit), naming gen_length.
inline void check_gen_length_room(index_t gen_length, index_t context) {
    if (gen_length >= context)
        throw invalid_parameter("gen_length", "is " + std::to_string(gen_length) + ", which leaves no position of the model's context of " +
                                                  std::to_string(context) + " for a prompt (at most " + std::to_string(context - 1) + ")");
}

/// The rule a prompt of `length` tokens breaks beside `gen_length` in a context of `context`: "prompt
/// length 241 + gen_length 16 exceeds the model's context of 256: beside gen_length 16 a prompt may
/// hold 240 tokens at most". `length` is a count, or "more than 240" where a bounded tokenizer
/// (io::tokenizer::encode_at_most) stopped counting.
[[nodiscard]] inline std::string prompt_past_context(const std::string& length, index_t gen_length, index_t context) {
    return "prompt length " + length + " + gen_length " + std::to_string(gen_length) + " exceeds the model's context of " +
           std::to_string(context) + ": beside gen_length " + std::to_string(gen_length) + " a prompt may hold " +
           std::to_string(context - gen_length) + " tokens at most";
}

/// Checks a canvas against the model's context. Who is named: `gen_length` when it alone leaves no
/// position for a prompt (check_gen_length_room), else the prompt (`which`, "prompts[i]"), with the
/// most tokens a prompt may hold beside this gen_length.
template <class Model>
void check_context(const Model& model, const canvas_layout& l, const std::string& which) {
    const index_t context = model.max_context();
    check_gen_length_room(l.gen_length, context);
    if (l.size() > context) throw invalid_parameter(which, prompt_past_context(std::to_string(l.prompt_length), l.gen_length, context));
}

/// Checks prompt `i` (its tokens, and its length against the index type and the model's context)
/// and returns its canvas layout.
template <class Model, class Mask>
[[nodiscard]] canvas_layout checked_layout(const Model& model, const Mask& mask, const std::vector<token_id>& prompt, std::size_t i,
                                           index_t gen_length, index_t block_length) {
    const std::string which = "prompts[" + std::to_string(i) + "]";
    const index_t vocab = model.vocab_size();
    const token_id mask_id = model.mask_id();
    if (prompt.empty()) throw invalid_parameter(which, "is empty; a prompt needs at least one token");
    for (std::size_t j = 0; j < prompt.size(); ++j) {
        if (prompt[j] < 0 || prompt[j] >= vocab)
            throw invalid_parameter(which, "token " + std::to_string(j) + " is " + std::to_string(prompt[j]) +
                                               ", outside the vocabulary [0, " + std::to_string(vocab) + ")");
        if (prompt[j] == mask_id)  // the mask marks the slots to decode: in a prompt it would never be filled
            throw invalid_parameter(which, "token " + std::to_string(j) + " is the mask id " + std::to_string(mask_id) +
                                               ", which marks the slots to decode; a prompt cannot hold it");
    }
    const std::string lengths = "prompt length " + std::to_string(prompt.size()) + " + gen_length " + std::to_string(gen_length);
    if (prompt.size() > static_cast<std::size_t>(std::numeric_limits<index_t>::max() - gen_length))
        throw invalid_parameter(which, lengths + " exceeds " + std::to_string(std::numeric_limits<index_t>::max()) +
                                           ", the most canvas positions dlm can index");
    canvas_layout l{static_cast<index_t>(prompt.size()), gen_length, block_length, model.logits_shift()};
    if (mask_aligns_blocks(mask)) l.lead = l.prompt_length % block_length;
    if constexpr (model_has_max_context<Model>) check_context(model, l, which);
    return l;
}

/// The seed of sequence `i`, and where it came from.
[[nodiscard]] inline resolved_setting<std::uint64_t> seed_of(const generation_options& o, std::size_t i) {
    if (!o.seeds.empty()) return {o.seeds[i], setting_source::user, "generation_options::seeds[" + std::to_string(i) + "]"};
    return {sequence_seed(o.seed, i), setting_source::user,
            i == 0 ? "generation_options::seed" : "sequence_seed(generation_options::seed, " + std::to_string(i) + ")"};
}

/// The state of a checked prompt before its first forward: the canvas [prompt | MASK...] (and the
/// unconditional one with `cfg`), block 0 active, every slot uncommitted.
template <class KvCache>
[[nodiscard]] sequence_state<KvCache> initial_state(const std::vector<token_id>& prompt, const canvas_layout& l,
                                                    const decoding_settings& settings, bool cfg) {
    const token_id mask_id = settings.mask_id.value;
    sequence_state<KvCache> s;
    s.layout = l;
    s.canvas = prompt;
    s.canvas.resize(static_cast<std::size_t>(l.size()), mask_id);
    if (cfg) s.uncond_canvas.assign(static_cast<std::size_t>(l.size()), mask_id);  // LLaDA: un_x[prompt_index] = mask_id
    s.masked_at_block_start = l.slots_in_block(0);
    const auto g = static_cast<std::size_t>(l.gen_length);
    s.result.tokens.assign(g, mask_id);
    s.result.commit_forward.assign(g, -1);
    s.result.commit_confidence.assign(g, 0.f);
    s.result.settings = settings;
    return s;
}

/// The bytes of a sequence's logits rows in a logits buffer at a step (the stepper's on the host, a
/// device model's on the device): a block's rows at most, the prompt's share of an aligned first
/// block included (the shipped caches' plans return no more), over the vocabulary, twice with
/// guidance.
template <class Model>
[[nodiscard]] std::uint64_t logits_rows_bytes(const Model& model, const canvas_layout& l, bool cfg) {
    const auto rows = static_cast<std::uint64_t>(std::min<std::int64_t>(l.block_length, std::int64_t{l.lead} + l.gen_length));
    return (cfg ? 2 : 1) * rows * static_cast<std::uint64_t>(model.vocab_size()) * sizeof(float);
}

/// Host bytes of a sequence, as what the stepper's spare logits buffer can (`rows`) and cannot
/// (`held`) offset.
struct sequence_memory {
    std::uint64_t held = 0;
    std::uint64_t rows = 0;
    [[nodiscard]] std::uint64_t total() const noexcept { return saturating_add(held, rows); }
    sequence_memory& operator+=(const sequence_memory& o) noexcept {
        held = saturating_add(held, o.held);
        rows = saturating_add(rows, o.rows);
        return *this;
    }
};

/// The host bytes a sequence's logits take once it steps, where the stepper keeps them on the host:
/// `rows` in the stepper's buffer, and `held`, one more copy the sequence keeps where the model reads
/// them back (self-conditioning: the copy is the conditional pass's alone).
template <class Model>
[[nodiscard]] sequence_memory stepping_bytes(const Model& model, const canvas_layout& l, bool cfg, bool host_logits) {
    if (!host_logits) return {};
    const std::uint64_t rows = logits_rows_bytes(model, l, cfg);
    return {model_self_conditions<Model> ? rows / (cfg ? 2 : 1) : 0, rows};
}

/// The device bytes of a sequence's logits rows, where the model makes them in device memory
/// (model_reports_device_logits: whichever stepper reads them), else 0. No self-conditioning copy is
/// kept there: a sequence keeps its copy on the host (stepping_bytes).
template <class Model>
[[nodiscard]] std::uint64_t device_rows_bytes(const Model& model, const canvas_layout& l, bool cfg) {
    if constexpr (model_reports_device_logits<Model>) return logits_rows_bytes(model, l, cfg);
    else return 0;
}

/// The rows a sequence adds to a forward's work buffers at most: its whole canvas (a forward without a
/// cache computes all of it), twice with guidance; 0 for a model that does not report its work buffers
/// (model_reports_work_bytes).
template <class Model>
[[nodiscard]] std::uint64_t work_rows(const Model&, const canvas_layout& l, bool cfg) {
    if constexpr (model_reports_work_bytes<Model>) return (cfg ? 2u : 1u) * static_cast<std::uint64_t>(std::max<index_t>(l.size(), 0));
    else return 0;
}

/// What sequences added since the last step are promised, allocated at their first step: their
/// stepping bytes on the host, their logits rows on the device.
struct promised_memory {
    sequence_memory host{};
    std::uint64_t device = 0;
    promised_memory& operator+=(const promised_memory& o) noexcept {
        host += o.host;
        device = saturating_add(device, o.device);
        return *this;
    }
};

/// What a sequence is promised when it joins (promised_memory).
template <class Model>
[[nodiscard]] promised_memory promised_to(const Model& model, const canvas_layout& l, bool cfg, bool host_logits) {
    return {stepping_bytes(model, l, cfg, host_logits), device_rows_bytes(model, l, cfg)};
}

/// What a joining batch's memory is weighed against, besides the memory available now (engine.hpp).
struct memory_account {
    /// How many of the batch's sequences run at once: the `at_once` largest are weighed together. All
    /// of them when the batch joins (add, add_batch); check_batch's caller says how many it will run.
    std::size_t at_once = std::numeric_limits<std::size_t>::max();
    bool host_logits = true;         ///< the stepper keeps the logits rows in host memory
    bool kv_stores = false;          ///< the cache keeps K/V: each sequence makes a store (two with guidance) as it joins
    promised_memory pending{};       ///< what sequences added since the last step are promised, not yet allocated
    std::uint64_t spare = 0;         ///< bytes of the stepper's buffer beyond what the running sequences' rows use
    std::uint64_t device_spare = 0;  ///< the same of the model's device logits buffer (device_logits_bytes_of)
    std::uint64_t work_rows = 0;     ///< the running sequences' work rows (work_rows), those added since the last step included
    std::uint64_t work_held = 0;     ///< what the model's work buffers hold now (work_bytes_held)
    std::uint64_t room = 0;          ///< bytes the prompt cache could free in `room_where`, counted as available there
    memory_kind room_where = memory_kind::host;
};

/// How the engine weighs a batch's memory (engine.hpp, prepare): as `at_once` of its sequences running
/// together; beside the rows promised to sequences added since the last step and offset by the
/// stepper's spare buffer when it `joins` the running batch; with `room` bytes the prompt cache could
/// free (where its blocks live) counted as free.
struct weighing {
    std::size_t at_once = std::numeric_limits<std::size_t>::max();
    bool joins = true;
    std::uint64_t room = 0;
};

/// The host bytes a sequence adds to an engine: `held`, what it keeps (its canvas, twice with
/// guidance, per-slot results, its K/V stores where the cache keeps them: model/concept.hpp,
/// host_kv_cache_bytes, from when it is added; a self-conditioning copy of its logits from its first
/// step), and `rows`, its logits rows in the stepper's buffer from its first step (stepping_bytes).
template <class Model>
[[nodiscard]] sequence_memory sequence_bytes(const Model& model, const canvas_layout& l, bool cfg, const memory_account& a) {
    const std::uint64_t copies = cfg ? 2 : 1, gen = static_cast<std::uint64_t>(l.gen_length);
    const std::uint64_t kv = a.kv_stores ? saturating_mul(copies, host_kv_cache_bytes(model, l.size())) : 0;  // a model's claim may be huge
    sequence_memory b{saturating_add(copies * static_cast<std::uint64_t>(l.size()) * sizeof(token_id) + gen * (sizeof(token_id) + sizeof(index_t) + sizeof(float)), kv)};
    b += stepping_bytes(model, l, cfg, a.host_logits);
    return b;
}

/// What a check weighs in one memory: `sum`, the at_once largest sequences' bytes with those promised
/// before them, `together` of them, and `needed`, the bytes of `sum` that need new memory: all it
/// holds, and its logits rows beyond what the logits buffer holds spare (which offsets rows only: a
/// store, a canvas or a sequence's copy of its logits cannot live there).
struct weighed_memory {
    sequence_memory sum;
    std::size_t together = 0;
    std::uint64_t needed = 0;
};

/// Weighs the `at_once` largest of `each` (by total) beside `pending` against a logits buffer with
/// `spare` bytes spare (weighed_memory); reorders `each`.
inline weighed_memory weigh(std::vector<sequence_memory>& each, std::size_t at_once, const sequence_memory& pending, std::uint64_t spare) {
    const std::size_t together = std::min(at_once, each.size());
    std::partial_sort(each.begin(), each.begin() + static_cast<std::ptrdiff_t>(together), each.end(),
                      [](const sequence_memory& x, const sequence_memory& y) { return x.total() > y.total(); });
    sequence_memory sum = pending;
    for (std::size_t i = 0; i < together; ++i) sum += each[i];
    return {sum, together, saturating_add(sum.held, sum.rows > spare ? sum.rows - spare : 0)};
}

/// " beside N bytes<what> promised to sequences added since the last step": what a message says of
/// `pending` bytes (none when 0).
inline std::string pending_said(std::uint64_t pending, const std::string& what = "") {
    return pending > 0 ? " beside " + std::to_string(pending) + " bytes" + what + " promised to sequences added since the last step" : "";
}

/// "gen_length 8 in blocks of 4, a vocabulary of 32": the shape of a batch's logits rows in a message.
inline std::string rows_shape(const canvas_layout& first, index_t vocab) {
    return "gen_length " + std::to_string(first.gen_length) + " in blocks of " + std::to_string(first.block_length) + ", a vocabulary of " +
           std::to_string(vocab);
}

/// "3 sequence(s)", "a sequence", "the 2 largest of 3 sequences, ...": whose memory a check weighed.
inline std::string weighed_sequences(std::size_t together, std::size_t of) {
    if (together == of) return std::to_string(together) + " sequence(s)";
    if (together == 1) return "a sequence";
    return "the " + std::to_string(together) + " largest of " + std::to_string(of) + " sequences, as many as run at once";
}

/// ", beyond the N bytes the prompt cache could free": what a message says of the account's room in `where`.
inline std::string room_said(const memory_account& a, memory_kind where) {
    return a.room > 0 && a.room_where == where ? ", beyond the " + std::to_string(a.room) + " bytes the prompt cache could free" : "";
}

/// Host bytes `needed` less the account's room in host memory: what must fit in the memory available.
inline std::uint64_t beyond_room(std::uint64_t needed, const memory_account& a) {
    const std::uint64_t room = a.room_where == memory_kind::host ? a.room : 0;
    return needed > room ? needed - room : 0;
}

/// The bytes a running sequence holds in `where`, what its end gives back: in host memory its
/// canvas, results and self-conditioning copy (sequence_bytes' held) and its `stores` K/V stores
/// where they are host memory; in device memory its stores where they are device memory.
template <class Model>
[[nodiscard]] std::uint64_t held_by(const Model& model, const canvas_layout& l, bool cfg, int stores, memory_kind where, bool host_logits) {
    const bool host = where == memory_kind::host;
    const std::uint64_t store = host ? host_kv_cache_bytes(model, l.size()) : device_kv_cache_bytes(model, l.size());
    const std::uint64_t own = host ? sequence_bytes(model, l, cfg, {.host_logits = host_logits}).held : 0;
    return saturating_add(own, saturating_mul(static_cast<std::uint64_t>(stores), store));
}

/// The bytes the model's work buffers need for a forward over `rows` rows (its work_bytes, the rows
/// clamped to index_t), and what they hold now; 0 for a model that does not report them.
template <class Model>
[[nodiscard]] std::uint64_t work_bytes_for(const Model& model, std::uint64_t rows) {
    if constexpr (model_reports_work_bytes<Model>)
        return static_cast<std::uint64_t>(model.work_bytes(static_cast<index_t>(std::min<std::uint64_t>(rows, std::numeric_limits<index_t>::max()))));
    else return 0;
}
template <class Model>
[[nodiscard]] std::uint64_t work_bytes_held_of(const Model& model) {
    if constexpr (model_reports_work_bytes<Model>) return static_cast<std::uint64_t>(model.work_bytes_held());
    else return 0;
}

/// The new bytes the model's work buffers need for a forward over the running sequences' work rows and
/// the `at_once` largest of `layouts`' (work_rows): work_bytes of them all, less what the buffers hold
/// (grown, the old ones are freed first). 0 for a model that does not report its work buffers.
template <class Model>
[[nodiscard]] std::uint64_t work_needed(const Model& model, std::span<const canvas_layout> layouts, bool cfg, const memory_account& a) {
    if constexpr (model_reports_work_bytes<Model>) {
        std::vector<std::uint64_t> rows;
        rows.reserve(layouts.size());
        for (const canvas_layout& l : layouts) rows.push_back(work_rows(model, l, cfg));
        const std::size_t together = std::min(a.at_once, rows.size());
        std::partial_sort(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(together), rows.end(), std::greater<>());
        std::uint64_t sum = a.work_rows;
        for (std::size_t i = 0; i < together; ++i) sum = saturating_add(sum, rows[i]);
        const std::uint64_t bytes = work_bytes_for(model, sum);
        return bytes > a.work_held ? bytes - a.work_held : 0;
    } else {
        return 0;
    }
}

/// " and the forward's work buffers over their canvases": what a memory message adds where a model
/// reports its work buffers (model_reports_work_bytes) in that memory.
template <class Model>
[[nodiscard]] std::string work_said(memory_kind where) {
    const bool there = model_reports_work_bytes<Model> && (work_on_device<Model> == (where == memory_kind::device));
    return there ? " and the forward's work buffers over their canvases" : "";
}

/// Refuses (dlm::memory_error, memory_kind::device) sequences whose device bytes (the account's
/// at_once largest, summed: their K/V stores where the cache keeps them, and their logits rows where
/// the model makes them on the device, model_reports_device_logits) do not fit in the device's free
/// memory (the model's device_bytes_free: model/concept.hpp), before any is allocated. The stores of
/// sequences added before are made already, so the free memory counts them; their rows are not (the
/// account's pending device bytes); what the model's logits buffer holds spare offsets rows only.
/// The account's room on the device counts as free. A sum of at most weighed_above is not measured.
template <class Model>
void check_device_memory(const Model& model, std::span<const canvas_layout> layouts, bool cfg, const memory_account& a) {
    std::vector<sequence_memory> each;
    each.reserve(layouts.size());
    index_t longest = 0;
    for (const canvas_layout& l : layouts) {
        each.push_back({a.kv_stores ? saturating_mul(cfg ? 2 : 1, device_kv_cache_bytes(model, l.size())) : 0, device_rows_bytes(model, l, cfg)});
        longest = std::max(longest, l.size());
    }
    const weighed_memory w = weigh(each, a.at_once, {0, a.pending.device}, a.device_spare);
    const std::uint64_t work = work_on_device<Model> ? work_needed(model, layouts, cfg, a) : 0;
    if (saturating_add(w.sum.total(), work) <= weighed_above) return;
    const std::uint64_t free = saturating_add(model.device_bytes_free(), a.room_where == memory_kind::device ? a.room : 0);
    const std::uint64_t needed = saturating_add(w.needed, work);
    if (needed <= free) return;
    constexpr bool rows = model_reports_device_logits<Model>;
    std::string shape = a.kv_stores ? "up to " + std::to_string(longest) + " positions each" : "";
    if (rows) shape += (shape.empty() ? "" : "; ") + rows_shape(layouts.front(), model.vocab_size());
    if (shape.empty()) shape = std::to_string(longest) + " positions at most";
    const std::string what = a.kv_stores && rows ? "K/V stores and logits rows" : a.kv_stores ? "K/V stores" : rows ? "logits rows" : "forward work buffers";
    const std::string work_words = a.kv_stores || rows ? work_said<Model>(memory_kind::device) : "";
    throw memory_error("the device " + what + " of " + weighed_sequences(w.together, layouts.size()) + " (" + shape +
                           (cfg ? ", twice for guidance" : "") + ")" + work_words + " on the device" + pending_said(a.pending.device, " of logits rows") +
                           room_said(a, memory_kind::device),
                       needed, free,
                       std::string("ask for fewer slots (gen_length), shorter prompts") + (rows ? " or blocks (block_length)" : "") +
                           ", or fewer sequences at once",
                       memory_kind::device);
}

/// Refuses (dlm::memory_error) sequences whose sequence_bytes (the account's at_once largest,
/// summed), with the bytes pending, do not fit in the available memory (core/memory.hpp), before any
/// is allocated; what the stepper's buffer holds spare offsets their logits rows (weigh). The
/// account's room in host memory counts as available. A sum of at most weighed_above bytes is not
/// measured. Device bytes (K/V stores, logits rows) are weighed first (check_device_memory).
template <class Model>
void check_batch_memory(const Model& model, std::span<const canvas_layout> layouts, bool cfg, const memory_account& a) {
    if constexpr (model_reports_device_memory<Model>)
        if (a.kv_stores || model_reports_device_logits<Model> || model_reports_work_bytes<Model>) check_device_memory(model, layouts, cfg, a);
    std::vector<sequence_memory> each;
    each.reserve(layouts.size());
    for (const canvas_layout& l : layouts) each.push_back(sequence_bytes(model, l, cfg, a));
    const weighed_memory w = weigh(each, a.at_once, a.pending.host, a.spare);
    const std::uint64_t work = work_on_device<Model> ? 0 : work_needed(model, layouts, cfg, a);
    if (saturating_add(w.sum.total(), work) <= weighed_above) return;
    const canvas_layout& first = layouts.front();
    const bool kv = a.kv_stores && host_kv_cache_bytes(model, first.size()) > 0;
    check_fits("the decoding state" + std::string(kv ? ", K/V stores" : "") + " and logits rows of " + weighed_sequences(w.together, each.size()) + " (" +
                   rows_shape(first, model.vocab_size()) + (cfg ? ", twice for guidance" : "") + ")" + work_said<Model>(memory_kind::host) +
                   pending_said(a.pending.host.total()) + room_said(a, memory_kind::host),
               beyond_room(saturating_add(w.needed, work), a), "ask for fewer slots (gen_length), shorter blocks (block_length), or fewer sequences at once");
}

/// Checks the batch, the options and every policy's options (dlm::invalid_parameter naming the one
/// that is wrong), and that its states and logits rows fit in memory as `account` weighs them
/// (dlm::memory_error, check_batch_memory), and builds one state per prompt, each holding the
/// settings it decodes with. Nothing runs on the model. `cfg_refusal`: why this decoder cannot run
/// classifier-free guidance ("" when it can).
template <class KvCache, bool NeedsStorage, class Model, class Mask, class Schedule>
std::vector<sequence_state<KvCache>> prepare_batch(Model& model, const Mask& mask, const Schedule& schedule,
                                                   std::span<const std::vector<token_id>> prompts, const generation_options& o,
                                                   const std::string& cfg_refusal = "this decoder does not implement classifier-free guidance",
                                                   const memory_account& account = {}) {
    check_batch_options(prompts, o, cfg_refusal);
    const bool cfg = o.cfg_scale > 0.0;
    const decoding_settings settings = resolve_settings(model, mask, o);
    std::vector<canvas_layout> layouts;
    layouts.reserve(prompts.size());
    for (std::size_t i = 0; i < prompts.size(); ++i)
        layouts.push_back(checked_layout(model, mask, prompts[i], i, settings.gen_length.value, settings.block_length.value));
    check_batch_memory(model, std::span<const canvas_layout>(layouts), cfg, account);
    std::vector<sequence_state<KvCache>> seqs;
    seqs.reserve(prompts.size());
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        seqs.push_back(initial_state<KvCache>(prompts[i], layouts[i], settings, cfg));
        seqs.back().result.settings.seed = seed_of(o, i);
    }
    // Policy options are checked once every prompt is known to be well formed.
    for (auto& s : seqs) {
        schedule_validate(schedule, s.layout);
        if constexpr (NeedsStorage) {
            s.kv.emplace(model.make_kv_cache(s.layout.size()));
            if (cfg) s.uncond_kv.emplace(model.make_kv_cache(s.layout.size()));
        }
    }
    return seqs;
}

}  // namespace dlm::detail
