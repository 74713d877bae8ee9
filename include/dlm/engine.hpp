// dlm/engine.hpp — the step-wise decoding engine: sequences join and leave a running batch at
// forward boundaries.
//
//   dlm::presets::cdlm<Model> dec(model);
//   dlm::engine eng(dec);
//   const auto id = eng.add(prompt, {.gen_length = 64, .seed = 7});
//   while (!eng.idle()) {
//       eng.step();                                  // one batched forward, every sequence's step
//       stream(eng.committed_prefix(id));            // what may be shown now; never shrinks
//       for (auto& [done, result] : eng.take_finished()) ...
//   }
//
// It is the one decoding loop of every backend: `decoder::generate` (decoder.hpp, the layer above) and
// dlm::cuda::device_decoder's generate add their prompts, step until idle and take the results
// (run_to_end below, which runs a registry::any_engine the same way). `Decoder` is any type with the
// decoder's policy types and accessors (model(), mask(), cache(), schedule(), sampler()); what differs
// between backends is only its stepper (engine/step.hpp): how one step turns the plans and a forward
// into commits — on the host (engine/host_stepper.hpp, the default) or on the GPU
// (`Decoder::stepper_type`, dlm/cuda). A sequence decodes the same alone, in any batch, and whenever
// it joins, as long as the model's forward is batch-invariant (dlm's CPU transformer is;
// docs/determinism.md).
// Single-threaded: one owner thread calls every member.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cache/compatibility.hpp"
#include "cache/prompt_cache.hpp"
#include "core/error.hpp"
#include "core/result.hpp"
#include "engine/host_stepper.hpp"
#include "engine/prepare.hpp"
#include "engine/revision.hpp"
#include "engine/sequence_state.hpp"
#include "engine/step.hpp"
#include "engine/uniform_step.hpp"
#include "model/concept.hpp"
#include "sampler/concept.hpp"
#include "schedule/concept.hpp"

namespace dlm {

namespace detail {
/// Whether an engine of this decoder can keep a prompt cache (dlm/cache/prompt_cache.hpp): an exact
/// storing cache, a mask whose prompt K/V are known to be final, a model with the copy hooks.
template <class Decoder>
inline constexpr bool supports_prompt_cache = reuses_exact_kv<typename Decoder::cache_type>() &&
                                              mask_has_prompt_blocks<typename Decoder::mask_type> &&
                                              model_has_kv_copy<typename Decoder::model_type>;

}  // namespace detail

template <class Decoder>
class engine {
public:
    using decoder_type = Decoder;
    using model_type = typename Decoder::model_type;
    using mask_type = typename Decoder::mask_type;
    using schedule_type = typename Decoder::schedule_type;
    using sampler_type = typename Decoder::sampler_type;
    using sequence_id = std::uint64_t;
    using stepper_type = typename detail::stepper_of<Decoder>::type;

    /// Per-sequence policy options; an unset one is the decoder's. The mask's only per-sequence
    /// option is its block length (semi_ar_mask{8}); the schedule's are its threshold or steps, the
    /// sampler's its temperature, top-k and top-p. Each is validated like the decoder's own.
    struct policies {
        std::optional<mask_type> mask{};
        std::optional<schedule_type> schedule{};
        std::optional<sampler_type> sampler{};
    };

    using step_report = dlm::step_report;
    using step_events = std::vector<step_report>;

    /// The decoder must outlive the engine; its policies are the defaults of every sequence.
    /// `prompt_cache.bytes` > 0 keeps a prompt cache of that bound (dlm/cache/prompt_cache.hpp): the
    /// exact K/V of prompt prefixes shared across the sequences added, answers unchanged. A decoder
    /// that cannot reuse K/V exactly (no cache, an approximate cache, a bidirectional mask, a model
    /// without copy_kv) throws dlm::invalid_parameter naming prompt_cache_bytes.
    explicit engine(Decoder& d, const prompt_cache_options& prompt_cache = {}) : dec_(&d), stepper_(d) {
        if (prompt_cache.bytes == 0) return;
        if constexpr (detail::supports_prompt_cache<Decoder>) pcache_.emplace(d.model(), prompt_cache);
        else
            throw invalid_parameter("prompt_cache_bytes",
                                    "a prompt cache reuses exact K/V across requests, which needs an exact KV cache that stores K/V "
                                    "(prefix_cache) under a causal, block-causal or block-diffusion mask and a model with copy_kv; this "
                                    "decoder recomputes or approximates them (use the autoregressive, cdlm, cdlm-edit, sdar, llada2, llada21, llada21-s or fast-dllm-v2 preset)");
    }

    /// Checks a sequence like decoder::generate checks a batch of one (dlm::invalid_parameter names
    /// the option or policy option that is wrong; nothing runs on the model) and queues it: it joins
    /// the running batch at the next step(). `options.seeds` may hold one seed; else it is `seed`.
    /// Refused for memory (dlm::memory_error) by bytes the prompt cache's unpinned blocks could free
    /// where memory is short, it evicts them (release_cached) and is weighed once more; add_batch too.
    sequence_id add(std::vector<token_id> prompt, const generation_options& options, const policies& p = {}) {
        const mask_type& mask = p.mask ? *p.mask : dec_->mask();
        const schedule_type& schedule = p.schedule ? *p.schedule : dec_->schedule();
        const sampler_type& sampler = p.sampler ? *p.sampler : dec_->sampler();
        sampler_validate(sampler);
        detail::check_sub_blocks(dec_->cache(), schedule);  // a sequence's own schedule must cut blocks as the cache does
        auto states = making_room(mask, schedule, sampler, std::span<const std::vector<token_id>>(&prompt, 1), options);
        return enqueue(std::move(states.front()), options, schedule, sampler);
    }

    /// Queues a batch, checked and seeded exactly as decoder::generate does (sequence i of `prompts`
    /// gets sequence_seed(options.seed, i) unless options.seeds is given). Returns consecutive ids.
    std::vector<sequence_id> add_batch(std::span<const std::vector<token_id>> prompts, const generation_options& options) {
        auto states = making_room(dec_->mask(), dec_->schedule(), dec_->sampler(), prompts, options);
        std::vector<sequence_id> ids;
        ids.reserve(states.size());
        for (auto& s : states) ids.push_back(enqueue(std::move(s), options, dec_->schedule(), dec_->sampler()));
        return ids;
    }

    /// Checks a batch exactly as add_batch does (every prompt, option and policy option, and what the
    /// backend can run; dlm::invalid_parameter names what is wrong) without queueing it or allocating
    /// its K/V: a caller that adds a long list a few prompts at a time refuses a bad one before any
    /// decodes. Its memory (dlm::memory_error) is weighed as `at_once` of its sequences running
    /// together, the largest ones: 1 (each alone) by default, prompts.size() for a batch added whole;
    /// memory the prompt cache would free to make room for them (evictable_bytes) counts as free.
    void check_batch(std::span<const std::vector<token_id>> prompts, const generation_options& options, std::size_t at_once = 1) {
        if (at_once == 0) throw invalid_parameter("at_once", "must be at least 1: the number of the batch's sequences that run together");
        (void)prepare<false>(dec_->mask(), dec_->schedule(), dec_->sampler(), prompts, options,
                             {.at_once = at_once, .joins = false, .room = evictable_bytes(cache_memory)});
    }

    /// Ends a sequence with status cancelled and the slots committed so far: at once between steps;
    /// called from a step callback, the sequence takes no further step and leaves at the end of this
    /// one. Unknown or already finished ids are ignored (a client may leave as its answer completes).
    void cancel(sequence_id id) {
        for (auto& e : running_)
            if (e->id == id && !e->st.done) e->cancelled = true;
        if (!in_step_) sweep();
    }

    /// One batched forward for every sequence in the batch, then each sequence's step in the order
    /// they were added: sample the masked slots of its active block, let its schedule commit some,
    /// advance. `on_step` is called after each sequence's step (step_event::sequence is the id's low
    /// 31 bits); step_action::cancel cancels every sequence still running, as generate's callback does.
    /// A sequence whose step fails (non-finite logits, a policy breaking its contract) ends alone with
    /// status failed. An exception from the model's forward itself propagates; no sequence has stepped.
    const step_events& step(const step_callback& on_step = {}) {
        events_.clear();
        const auto t0 = clock::now();
        const double model_before = stats_.model_seconds;
        const std::size_t rows = plan_all();
        if (!batch_.empty()) {
            const auto t_forward = clock::now();
            stepper_.forward(std::span<const forward_request<kv_type>>(requests_), std::span<const input>(inputs_), rows);
            pending_ = {};  // every running sequence's rows are in the logits buffers now
            stats_.model_seconds += seconds_since(t_forward);
            ++stats_.forwards;
            if constexpr (detail::supports_prompt_cache<Decoder>)  // the prompt blocks this forward made final go into it
                if (pcache_)
                    for (std::size_t i = 0; i < batch_.size(); ++i)
                        pcache_->after_forward(batch_[i]->cached, inputs_[i].plan, batch_[i]->st.canvas, *batch_[i]->st.kv);
            in_step_ = true;
            struct step_done {  // whatever step_all throws, cancel() sweeps again after it
                bool& flag;
                ~step_done() { flag = false; }
            } done{in_step_};
            step_all(on_step);
        }
        sweep();
        stats_.overhead_seconds += std::max(0.0, seconds_since(t0) - (stats_.model_seconds - model_before));
        return events_;
    }

    /// The sequences that left the batch (finished, failed or cancelled) since the last call, in the
    /// order they left, with their results (answer_length set). Their ids are forgotten.
    std::vector<std::pair<sequence_id, sequence_result>> take_finished() {
        std::vector<std::pair<sequence_id, sequence_result>> out;
        out.reserve(finished_.size());
        for (auto& e : finished_) out.emplace_back(e->id, std::move(e->st.result));
        finished_.clear();
        return out;
    }

    /// The answer's final tokens committed contiguously from its first slot: what may be streamed now
    /// (a slot committed after a still-masked one waits for it; under a revising schedule, the active
    /// block waits until the schedule closes it, since an edit may still change it). Never shrinks and
    /// never changes what it held; valid until the next add, step or take_finished. Throws
    /// dlm::invalid_parameter for an unknown id.
    [[nodiscard]] std::span<const token_id> committed_prefix(sequence_id id) const {
        const entry& e = find(id, "committed_prefix");
        return std::span<const token_id>(e.st.result.tokens).first(e.prefix);
    }
    /// The whole canvas [prompt | slots] (mask id where not yet committed), for visualisers: under a
    /// revising schedule its active block is in progress (a later step may edit it).
    [[nodiscard]] std::span<const token_id> canvas(sequence_id id) const { return find(id, "canvas").st.canvas; }

    /// Sequences in the running batch (queued ones included: they join at the next step).
    [[nodiscard]] std::size_t active() const noexcept { return running_.size(); }
    /// Nothing to step: no sequence running or queued (finished ones may await take_finished).
    [[nodiscard]] bool idle() const noexcept { return running_.empty(); }
    /// The bytes the running sequences hold in `where` (host memory: their canvases, per-slot results,
    /// logits copies and host K/V stores; device memory: their device K/V stores; with their logits rows
    /// there, in the logits buffer once they have stepped, promised to those added since the last step;
    /// and their canvases' share of the forward's work buffers, where the model reports them there),
    /// what their ends give back (a buffer's rows as its spare). A joining sequence refused
    /// (dlm::memory_error) for more than the memory available and these together where it is short
    /// cannot fit once they end: dlm-server refuses it at once rather than wait.
    [[nodiscard]] std::uint64_t held_bytes(memory_kind where = memory_kind::host) const {
        // Their copies of their logits (host) are in what each holds.
        const bool host = where == memory_kind::host;
        const std::uint64_t buffer = host ? (logits_on_host ? detail::held_logits_bytes_of(stepper_) : 0) : device_logits_bytes_of(dec_->model());
        std::uint64_t held = detail::saturating_add(host ? pending_.host.rows : pending_.device, std::min(stepped_rows_bytes(), buffer));
        if (work_on_device<model_type> != host && !running_.empty())  // their share of the work buffers (0 where the model reports none)
            held = detail::saturating_add(held, running_work_bytes());
        for (const auto& e : running_) {
            const sequence& s = e->st;
            const int stores = (s.kv ? 1 : 0) + (s.uncond_kv ? 1 : 0);
            held = detail::saturating_add(held, detail::held_by(dec_->model(), s.layout, e->cfg_factor > 0.f, stores, where, logits_on_host));
        }
        return held;
    }
    /// The bytes the prompt cache could free now in `where` (host memory, or device memory where the
    /// model's K/V stores are: kv_on_device): its blocks no running sequence pins; 0 without a prompt
    /// cache or where its blocks are not. dlm-server counts them with held_bytes before it refuses a
    /// request at once.
    [[nodiscard]] std::uint64_t evictable_bytes(memory_kind where = cache_memory) const {
        if constexpr (detail::supports_prompt_cache<Decoder>)
            if (pcache_ && where == cache_memory) return pcache_->evictable_bytes();
        return 0;
    }
    /// Evicts the prompt cache's unpinned blocks, least recently used first, until at least `bytes`
    /// are freed or none is left unpinned (never a block a running sequence has yet to copy), and
    /// hands the freed pages back to the system (return_freed_memory). Returns the bytes freed (0
    /// without a prompt cache). add() calls it to make room for a sequence refused for memory.
    std::uint64_t release_cached(std::uint64_t bytes) {
        std::uint64_t freed = 0;
        if constexpr (detail::supports_prompt_cache<Decoder>)
            if (pcache_) freed = pcache_->evict_unpinned(bytes);
        if (freed > 0) return_freed_memory();
        return freed;
    }
    /// Batched forwards, time in the model and time in the engine's own steps, since construction.
    [[nodiscard]] const decode_stats& stats() const noexcept { return stats_; }
    /// The prompt cache (its counters, bytes and blocks held, bound), or null when the engine keeps none.
    [[nodiscard]] const dlm::prompt_cache<model_type>* prompt_cache() const noexcept { return pcache_ ? &*pcache_ : nullptr; }

private:
    using kv_type = typename model_type::kv_cache;
    using sequence = detail::sequence_state<kv_type>;
    using input = detail::step_input<kv_type, schedule_type, sampler_type>;
    using clock = std::chrono::steady_clock;
    static constexpr const char* who = "dlm::decoder";

    struct entry {
        sequence_id id = 0;
        sequence st;
        schedule_type schedule;
        sampler_type sampler;
        float cfg_factor = 0.f;  // > 0: classifier-free guidance with this factor (cfg_scale + 1)
        std::size_t prefix = 0;  // committed_prefix length
        bool cancelled = false;
        typename dlm::prompt_cache<model_type>::ticket cached{};  // its hold on the prompt cache
        bool looked_up = false;                                   // the prompt cache was consulted at its first plan
    };

    /// Where the prompt cache's blocks (the model's K/V stores) live.
    static constexpr memory_kind cache_memory = model_kv_on_device<model_type> ? memory_kind::device : memory_kind::host;

    /// prepare(), and once more when it is refused for memory (dlm::memory_error) by no more than the
    /// prompt cache's unpinned blocks hold where memory is short: after the batch is weighed again with
    /// them counted as free (every other check too) and, that passing, as much is evicted
    /// (release_cached). A batch short elsewhere, or by more, leaves the cache untouched; one weighed
    /// again after the eviction may still be refused (freed pages the allocator keeps).
    std::vector<sequence> making_room(const mask_type& mask, const schedule_type& schedule, const sampler_type& sampler,
                                      std::span<const std::vector<token_id>> prompts, const generation_options& o) {
        try {
            return prepare(mask, schedule, sampler, prompts, o);
        } catch (const memory_error& e) {
            const std::uint64_t room = evictable_bytes(e.where());
            if (e.short_by() == 0 || e.short_by() > room) throw;
            (void)prepare<false>(mask, schedule, sampler, prompts, o, {.room = room});
            release_cached(e.short_by());
        }
        return prepare(mask, schedule, sampler, prompts, o);
    }

    static double seconds_since(clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); }

    /// The checked states of a batch, each one also admitted by the stepper (a backend refuses, naming
    /// the option, what it cannot run) before any is queued; with Storage, their K/V allocated and the
    /// first block of a uniform-state schedule filled with noise (check_batch: neither, its memory
    /// weighed as its caller says, `w`).
    template <bool Storage = true>
    std::vector<sequence> prepare(const mask_type& mask, const schedule_type& schedule, const sampler_type& sampler,
                                  std::span<const std::vector<token_id>> prompts, const generation_options& o, const detail::weighing& w = {}) {
        const detail::memory_account account{.at_once = w.at_once,
                                             .host_logits = logits_on_host,
                                             .kv_stores = decoder_type::cache_type::needs_storage,
                                             .pending = w.joins ? pending_ : detail::promised_memory{},
                                             .spare = w.joins ? spare_logits_bytes(detail::held_logits_bytes_of(stepper_)) : 0,
                                             .device_spare = w.joins ? spare_logits_bytes(device_logits_bytes_of(dec_->model())) : 0,
                                             .work_rows = w.joins ? running_work_rows() : 0,
                                             .work_held = w.joins ? detail::work_bytes_held_of(dec_->model()) : 0,
                                             .room = w.room,
                                             .room_where = cache_memory};
        auto states = detail::prepare_batch<kv_type, Storage && decoder_type::cache_type::needs_storage>(
            dec_->model(), mask, schedule, prompts, o, detail::cfg_refusal<typename decoder_type::cache_type>(), account);
        for (sequence& s : states) {
            stepper_.admit(s, schedule, sampler);
            if constexpr (Storage && uniform_state_schedule<schedule_type>) detail::fill_noise(s, dec_->model().vocab_size());  // the first block starts as noise
        }
        if constexpr (Storage)  // their logits are allocated at their first step; until then, promised
            for (const sequence& s : states) pending_ += detail::promised_to(dec_->model(), s.layout, o.cfg_scale > 0.0, logits_on_host);
        return states;
    }

    /// Whether the stepper keeps the logits rows in host memory (engine/step.hpp).
    static constexpr bool logits_on_host = detail::stepper_logits_on_host<stepper_type>;

    /// The bytes of a logits buffer of `held` bytes (the stepper's, or the model's on the device) beyond
    /// the rows the running sequences take: a joining sequence's rows fit there without a new allocation.
    [[nodiscard]] std::uint64_t spare_logits_bytes(std::uint64_t held) const {
        const std::uint64_t used = stepped_rows_bytes();
        return held > used ? held - used : 0;
    }
    /// The rows the running sequences (queued ones included) may add to a forward's work buffers
    /// (detail::work_rows: their canvases), and their bytes in the model's work buffers.
    [[nodiscard]] std::uint64_t running_work_rows() const {
        std::uint64_t rows = 0;
        for (const auto& e : running_) rows = detail::saturating_add(rows, detail::work_rows(dec_->model(), e->st.layout, e->cfg_factor > 0.f));
        return rows;
    }
    [[nodiscard]] std::uint64_t running_work_bytes() const { return detail::work_bytes_for(dec_->model(), running_work_rows()); }
    /// The bytes of the logits rows of the running sequences that have stepped (those added since the
    /// last step are not in a buffer yet: pending_ holds their rows).
    [[nodiscard]] std::uint64_t stepped_rows_bytes() const {
        std::uint64_t used = 0;
        for (const auto& e : running_)
            if (e->st.result.stats.forwards > 0) used = detail::saturating_add(used, detail::logits_rows_bytes(dec_->model(), e->st.layout, e->cfg_factor > 0.f));
        return used;
    }

    sequence_id enqueue(sequence&& s, const generation_options& o, const schedule_type& schedule, const sampler_type& sampler) {
        auto e = std::make_unique<entry>(entry{next_id_++, std::move(s), schedule, sampler});
        if (o.cfg_scale > 0.0) e->cfg_factor = static_cast<float>(o.cfg_scale + 1.0);
        running_.push_back(std::move(e));
        return running_.back()->id;
    }

    const entry& find(sequence_id id, const char* what) const {
        for (const auto* list : {&running_, &finished_})
            for (const auto& e : *list)
                if (e->id == id) return *e;
        throw invalid_parameter(what, "no sequence " + std::to_string(id) + " in the engine (never added, or already taken)");
    }

    /// Ends a sequence with status failed; called inside the handler of `why`.
    static void fail(entry& e, const error& why) { detail::fail(e.st, why); }

    /// Plans every running sequence's forward (a broken plan fails that sequence) and lays out the
    /// batch: one request per sequence (two with guidance), its step input, its logits rows. Returns
    /// the number of logits rows.
    std::size_t plan_all() {
        batch_.clear();
        inputs_.clear();
        requests_.clear();
        std::size_t rows = 0;
        for (auto& e : running_) {
            sequence& s = e->st;
            if (s.done || e->cancelled) continue;
            forward_plan plan;
            try {
                plan = plan_forward(dec_->cache(), dec_->mask(), s.layout, s.cursor, canvas_view{s.canvas, s.result.settings.mask_id.value});
                if (pcache_) plan = use_prompt_cache(*e, plan);
                detail::check_plan(plan, s.layout, who);
                detail::check_plan_reaches_masked(plan, s.layout, s.cursor, s.canvas, s.result.settings.mask_id.value, who);
            } catch (const error& x) {
                fail(*e, x);
                continue;
            }
            const decoding_settings& settings = s.result.settings;
            const step_context ctx{s.layout, s.cursor, s.masked_at_block_start, s.result.stats.committed, s.result.stats.forwards,
                                   settings.seed.value, settings.eos_ids.value, settings.end_of_turn_ids.value, s.steps_after_filled};
            inputs_.push_back({&s, plan, ctx, &e->schedule, &e->sampler, e->cfg_factor, rows, static_cast<index_t>(e->id & 0x7fffffffu)});
            requests_.push_back({s.canvas, s.layout, plan, s.kv ? &*s.kv : nullptr, s.self_conditioning});
            // LLaDA's classifier-free guidance: the same forward on the canvas with the prompt masked.
            if (e->cfg_factor > 0.f) requests_.push_back({s.uncond_canvas, s.layout, plan, s.uncond_kv ? &*s.uncond_kv : nullptr});
            batch_.push_back(e.get());
            rows += inputs_.back().rows();
        }
        return rows;
    }

    /// After the forward, each sequence's step in the order they were added: the stepper chooses its
    /// commits, the engine applies them; then `on_step`.
    void step_all(const step_callback& on_step) {
        for (std::size_t i = 0; i < batch_.size(); ++i) {
            entry& e = *batch_[i];
            if (e.cancelled) continue;  // cancelled by an earlier sequence's callback in this step
            events_.push_back({e.id, {}, false, {}});
            try {
                if constexpr (uniform_state_schedule<schedule_type>) {  // the host stepper's alone (device_decoder refuses it)
                    stepper_.denoise(i, inputs_[i], uniform_);
                    apply_uniform(e, inputs_[i], events_.back().committed);
                } else {
                    commits_.clear();
                    edits_.clear();
                    stepper_.choose(i, inputs_[i], commits_);
                    // A revising schedule's edits: the host stepper's alone (device_decoder refuses such a schedule).
                    if constexpr (revising_schedule<schedule_type>) stepper_.revise(i, inputs_[i], edits_);
                    apply(e, inputs_[i], events_.back().committed, events_.back().edited);
                }
            } catch (const error& x) {  // one failure ends its own sequence only
                fail(e, x);
            }
            if (on_step) {
                const step_event ev{inputs_[i].index, e.st.result.stats.forwards - 1, stepped_, e.st.layout,
                                    e.st.canvas, events_.back().committed, &e.st.result, events_.back().edited};
                if (!e.st.result.failed() && on_step(ev) == step_action::cancel)
                    for (auto& other : running_)
                        if (!other->st.done) other->cancelled = true;
            }
        }
    }

    /// Applies one sequence's chosen writes (commits_: fills; edits_: a revising schedule's edits) to
    /// its canvas and result (detail::apply_writes), counts the step and advances its block when the
    /// schedule says it is final. Throws dlm::contract_error for a write that breaks its rules (a fill
    /// of a slot that is not masked: chosen twice; an edit of one that is).
    void apply(entry& e, const input& in, std::vector<index_t>& committed, std::vector<index_t>& edited) {
        sequence& s = e.st;
        const token_id mask_id = s.result.settings.mask_id.value;
        std::size_t masked = 0;
        detail::for_each_masked_slot(s, mask_id, [&masked](index_t) { ++masked; });
        detail::apply_writes(s, commits_, edits_, in.ctx.forward, mask_id, who, committed, edited);
        s.result.stats.forwards += 1;
        s.result.stats.rows_computed += in.plan.window_size();
        stepped_ = s.cursor;
        s.cursor.step_in_block += 1;
        const block_step step{static_cast<index_t>(masked), static_cast<index_t>(masked - commits_.size()), static_cast<index_t>(edits_.size())};
        detail::advance(s, e.schedule, in.ctx, step, mask_id, who);
        if (s.done) s.uncond_kv.reset();
        const std::size_t final_end = detail::final_slots<schedule_type>(s);
        while (e.prefix < final_end && s.result.tokens[e.prefix] != mask_id) ++e.prefix;
    }

    /// A uniform-state step of one sequence (uniform_: engine/uniform_step.hpp), then its final slots.
    void apply_uniform(entry& e, const input& in, std::vector<index_t>& committed) {
        stepped_ = e.st.cursor;
        detail::apply_uniform(dec_->model(), e.st, e.schedule, in.ctx, in.plan.window_size(), uniform_, accepted_, committed, who);
        e.prefix = detail::final_slots<schedule_type>(e.st);
    }

    /// At a sequence's first plan, copies the longest cached prefix of its prompt into its store; every
    /// plan then leaves the reused positions out of its window.
    forward_plan use_prompt_cache(entry& e, const forward_plan& plan) {
        if constexpr (detail::supports_prompt_cache<Decoder>) {
            if (!e.looked_up && e.st.kv) e.cached = pcache_->admit(dec_->mask(), e.st.layout, e.st.canvas, *e.st.kv);
            e.looked_up = true;
            return pcache_->skip_reused(plan, e.cached);
        } else {
            return plan;
        }
    }

    /// Moves every sequence that is done or cancelled from the batch to the finished list.
    void sweep() {
        std::erase_if(running_, [this](std::unique_ptr<entry>& e) {
            if (!e->st.done && !e->cancelled) return false;
            if (pcache_) pcache_->release(e->cached);
            sequence& s = e->st;
            if (!s.done) {
                s.result.status = sequence_status::cancelled;
                s.done = true;
                s.kv.reset();
                s.uncond_kv.reset();
            }
            detail::finish(s.result, s.result.settings.eos_ids.value);
            for (auto& ev : events_)
                if (ev.id == e->id) ev.finished = true;
            finished_.push_back(std::move(e));
            return true;
        });
    }

    Decoder* dec_;
    std::optional<dlm::prompt_cache<model_type>> pcache_;  // engaged when constructed with prompt_cache.bytes > 0
    sequence_id next_id_ = 0;
    std::vector<std::unique_ptr<entry>> running_, finished_;
    decode_stats stats_;
    bool in_step_ = false;
    detail::promised_memory pending_;  // what sequences added since the last forward are promised (prepare)
    stepper_type stepper_;
    // Scratch of step(): the sequences of this step's batch, their step inputs, their requests.
    std::vector<entry*> batch_;
    std::vector<input> inputs_;
    std::vector<forward_request<kv_type>> requests_;
    std::vector<slot_commit> commits_, edits_;  // one sequence's writes of a step: fills, a revising schedule's edits
    uniform_step uniform_;                      // one sequence's step under a uniform-state schedule
    std::vector<char> accepted_;                // its accepted slots (apply_uniform), reused across steps
    step_events events_;
    block_cursor stepped_;  // the cursor of the step just taken (step_event::cursor)
};

template <class Decoder>
engine(Decoder&) -> engine<Decoder>;

/// Runs a fresh engine `e` (dlm::engine, or registry::any_engine over one) to the end on `prompts`:
/// what a decoder's generate() does, written once for both. `e` must not have run before (its
/// statistics are the result's); `clock_start` is when the caller began (the overhead counts from it).
template <class Engine>
decode_result run_to_end(Engine& e, std::span<const std::vector<token_id>> prompts, const generation_options& options,
                         const step_callback& on_step = {},
                         std::chrono::steady_clock::time_point clock_start = std::chrono::steady_clock::now()) {
    if (!e.idle() || e.stats().forwards != 0)
        throw contract_error("dlm: run_to_end needs an engine that has not run (its statistics become the result's)");
    const std::vector<std::uint64_t> ids = e.add_batch(prompts, options);
    while (!e.idle()) e.step(on_step);
    decode_result out;
    out.stats = e.stats();
    const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - clock_start).count();
    out.stats.overhead_seconds = std::max(0.0, total - out.stats.model_seconds);
    out.sequences.resize(ids.size());
    for (auto& [id, result] : e.take_finished()) out.sequences[static_cast<std::size_t>(id - ids.front())] = std::move(result);
    return out;
}

/// One prompt on a fresh engine: its failure, having no other sequence to spare, is thrown (typed).
template <class Engine>
sequence_result run_to_end(Engine& e, const std::vector<token_id>& prompt, const generation_options& options, const step_callback& on_step = {},
                           std::chrono::steady_clock::time_point clock_start = std::chrono::steady_clock::now()) {
    sequence_result r =
        std::move(run_to_end(e, std::span<const std::vector<token_id>>(&prompt, 1), options, on_step, clock_start).sequences.front());
    r.rethrow_if_failed();
    return r;
}

namespace detail {

/// The generate() of a decoder type (dlm::decoder, dlm::cuda::device_decoder), written once: it runs
/// an engine of the decoder to the end (run_to_end).
template <class Derived>
class generate_api {
public:
    /// Decode a batch of prompts. Sequences may have different prompt lengths; each advances through
    /// its own blocks, all active sequences sharing every batched forward. Every parameter is checked
    /// before the first forward (dlm::invalid_parameter names the one that is wrong). A sequence that
    /// fails (NaN/Inf logits, a policy breaking its contract) ends alone, with status failed and the
    /// error on its result; the others finish normally.
    decode_result generate(std::span<const std::vector<token_id>> prompts, const generation_options& options,
                           const step_callback& on_step = {}) {
        const auto clock_start = std::chrono::steady_clock::now();
        engine<Derived> e(static_cast<Derived&>(*this));
        return run_to_end(e, prompts, options, on_step, clock_start);
    }

    /// A single prompt. Its failure, having no other sequence to spare, is thrown (typed).
    sequence_result generate(const std::vector<token_id>& prompt, const generation_options& options, const step_callback& on_step = {}) {
        const auto clock_start = std::chrono::steady_clock::now();
        engine<Derived> e(static_cast<Derived&>(*this));
        return run_to_end(e, prompt, options, on_step, clock_start);
    }

    /// A schedule that leaves a block unfinished after this many forwards per slot is broken; the
    /// decoder throws dlm::contract_error instead of looping forever.
    static constexpr index_t max_steps_per_slot = detail::max_steps_per_slot;
};

}  // namespace detail

}  // namespace dlm
