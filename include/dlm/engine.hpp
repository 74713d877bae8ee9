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
// It is the one decoding loop of the host decoder: `decoder::generate` (decoder.hpp, the layer above)
// adds its prompts, steps until idle and takes the results. `Decoder` is any type with the decoder's
// policy types and accessors (model(), mask(), cache(), schedule(), sampler()). A sequence decodes the
// same alone, in any batch, and whenever it joins, as long as the model's forward is batch-invariant
// (dlm's CPU transformer is; docs/determinism.md).
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
#include "engine/prepare.hpp"
#include "engine/revision.hpp"
#include "engine/sequence_state.hpp"
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

    /// Per-sequence policy options; an unset one is the decoder's. The mask's only per-sequence
    /// option is its block length (semi_ar_mask{8}); the schedule's are its threshold or steps, the
    /// sampler's its temperature, top-k and top-p. Each is validated like the decoder's own.
    struct policies {
        std::optional<mask_type> mask{};
        std::optional<schedule_type> schedule{};
        std::optional<sampler_type> sampler{};
    };

    /// What one step did to one sequence.
    struct step_report {
        sequence_id id = 0;
        std::vector<index_t> committed;  ///< canvas positions committed (filled) by this step
        bool finished = false;           ///< it left the batch (finished, failed or cancelled) in this step
        std::vector<index_t> edited;     ///< canvas positions a revising schedule replaced in this step
    };
    using step_events = std::vector<step_report>;

    /// The decoder must outlive the engine; its policies are the defaults of every sequence.
    /// `prompt_cache.bytes` > 0 keeps a prompt cache of that bound (dlm/cache/prompt_cache.hpp): the
    /// exact K/V of prompt prefixes shared across the sequences added, answers unchanged. A decoder
    /// that cannot reuse K/V exactly (no cache, an approximate cache, a bidirectional mask, a model
    /// without copy_kv) throws dlm::invalid_parameter naming prompt_cache_bytes.
    explicit engine(Decoder& d, const prompt_cache_options& prompt_cache = {}) : dec_(&d) {
        if (prompt_cache.bytes == 0) return;
        if constexpr (detail::supports_prompt_cache<Decoder>) pcache_.emplace(d.model(), prompt_cache);
        else
            throw invalid_parameter("prompt_cache_bytes",
                                    "a prompt cache reuses exact K/V across requests, which needs an exact KV cache that stores K/V "
                                    "(prefix_cache) under a causal, block-causal or block-diffusion mask and a model with copy_kv; this "
                                    "decoder recomputes or approximates them (use the autoregressive, cdlm, sdar, llada2 or fast_dllm_v2 preset)");
    }

    /// Checks a sequence like decoder::generate checks a batch of one (dlm::invalid_parameter names
    /// the option or policy option that is wrong; nothing runs on the model) and queues it: it joins
    /// the running batch at the next step(). `options.seeds` may hold one seed; else it is `seed`.
    sequence_id add(std::vector<token_id> prompt, const generation_options& options, const policies& p = {}) {
        const mask_type& mask = p.mask ? *p.mask : dec_->mask();
        const schedule_type& schedule = p.schedule ? *p.schedule : dec_->schedule();
        const sampler_type& sampler = p.sampler ? *p.sampler : dec_->sampler();
        sampler_validate(sampler);
        auto states = prepare(mask, schedule, std::span<const std::vector<token_id>>(&prompt, 1), options);
        return enqueue(std::move(states.front()), options, schedule, sampler);
    }

    /// Queues a batch, checked and seeded exactly as decoder::generate does (sequence i of `prompts`
    /// gets sequence_seed(options.seed, i) unless options.seeds is given). Returns consecutive ids.
    std::vector<sequence_id> add_batch(std::span<const std::vector<token_id>> prompts, const generation_options& options) {
        auto states = prepare(dec_->mask(), dec_->schedule(), prompts, options);
        std::vector<sequence_id> ids;
        ids.reserve(states.size());
        for (auto& s : states) ids.push_back(enqueue(std::move(s), options, dec_->schedule(), dec_->sampler()));
        return ids;
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
        plan_all();
        if (!batch_.empty()) {
            const auto t_forward = clock::now();
            dec_->model().forward(std::span<const forward_request<kv_type>>(requests_), dec_->mask(), std::span<float>(logits_));
            stats_.model_seconds += seconds_since(t_forward);
            ++stats_.forwards;
            if constexpr (detail::supports_prompt_cache<Decoder>)  // the prompt blocks this forward made final go into it
                if (pcache_)
                    for (const auto& [e, plan] : batch_) pcache_->after_forward(e->cached, plan, e->st.canvas, *e->st.kv);
            in_step_ = true;
            step_all(on_step);
            in_step_ = false;
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
    /// Batched forwards, time in the model and time in the engine's own steps, since construction.
    [[nodiscard]] const decode_stats& stats() const noexcept { return stats_; }
    /// The prompt cache (its counters, bytes and blocks held, bound), or null when the engine keeps none.
    [[nodiscard]] const dlm::prompt_cache<model_type>* prompt_cache() const noexcept { return pcache_ ? &*pcache_ : nullptr; }

private:
    using kv_type = typename model_type::kv_cache;
    using sequence = detail::sequence_state<kv_type>;
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

    static double seconds_since(clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); }

    std::vector<sequence> prepare(const mask_type& mask, const schedule_type& schedule, std::span<const std::vector<token_id>> prompts,
                                  const generation_options& o) {
        return detail::prepare_batch<kv_type, decoder_type::cache_type::needs_storage>(dec_->model(), mask, schedule, prompts, o,
                                                                                      detail::cfg_refusal<typename decoder_type::cache_type>());
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

    /// Plans every running sequence's forward (a broken plan fails that sequence) and sizes the logits.
    void plan_all() {
        batch_.clear();
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
            } catch (const error& x) {
                fail(*e, x);
                continue;
            }
            const bool cfg = e->cfg_factor > 0.f;
            requests_.push_back({s.canvas, s.layout, plan, s.kv ? &*s.kv : nullptr});
            // LLaDA's classifier-free guidance: the same forward on the canvas with the prompt masked.
            if (cfg) requests_.push_back({s.uncond_canvas, s.layout, plan, s.uncond_kv ? &*s.uncond_kv : nullptr});
            batch_.push_back({e.get(), plan});
            rows += static_cast<std::size_t>(plan.logits_rows()) * (cfg ? 2 : 1);
        }
        logits_.resize(rows * static_cast<std::size_t>(dec_->model().vocab_size()));
    }

    void step_all(const step_callback& on_step) {
        const auto vocab = static_cast<std::size_t>(dec_->model().vocab_size());
        std::size_t row_offset = 0;
        for (const auto& [e, plan] : batch_) {
            const bool cfg = e->cfg_factor > 0.f;
            const std::size_t n = static_cast<std::size_t>(plan.logits_rows()) * vocab;
            const std::span<float> cond(logits_.data() + row_offset, n);
            row_offset += n * (cfg ? 2 : 1);
            if (e->cancelled) continue;  // cancelled by an earlier sequence's callback in this step
            if (cfg) {  // logits = un + (cfg_scale + 1) * (cond - un), as LLaDA's generate()
                const float* un = cond.data() + n;
                for (std::size_t k = 0; k < n; ++k) cond[k] = un[k] + e->cfg_factor * (cond[k] - un[k]);
            }
            events_.push_back({e->id, {}, false, {}});
            try {
                step_one(*e, plan, cond, events_.back().committed, events_.back().edited);
            } catch (const error& x) {  // one failure ends its own sequence only
                fail(*e, x);
            }
            if (on_step) {
                const step_event ev{static_cast<index_t>(e->id & 0x7fffffffu), e->st.result.stats.forwards - 1, stepped_, e->st.layout,
                                    e->st.canvas, events_.back().committed, &e->st.result, events_.back().edited};
                if (!e->st.result.failed() && on_step(ev) == step_action::cancel)
                    for (auto& other : running_)
                        if (!other->st.done) other->cancelled = true;
            }
        }
    }

    /// One sequence's step after a forward: sample every masked slot of its active block from `logits`
    /// (its logits rows), let the schedule choose, commit, advance. Throws dlm::numeric_error or
    /// dlm::contract_error for this sequence alone.
    void step_one(entry& e, const forward_plan& plan, std::span<const float> logits, std::vector<index_t>& committed,
                  std::vector<index_t>& edited) {
        sequence& s = e.st;
        const decoding_settings& settings = s.result.settings;
        const token_id mask_id = settings.mask_id.value;
        const std::span<const token_id> eos = settings.eos_ids.value;
        const step_context ctx{s.layout, s.cursor, s.masked_at_block_start, s.result.stats.committed, s.result.stats.forwards,
                               settings.seed.value, eos, settings.end_of_turn_ids.value, s.steps_after_filled};
        const bool ban_eos = schedule_suppresses_eos(e.schedule, ctx);
        // The mask id is never a token to commit: a reference that draws it leaves the slot masked (LLaDA
        // generate.py, Dream's _sample); dlm bans it from every draw (a fill or an edit never writes it).
        banned_.assign(1, mask_id);
        if (ban_eos) banned_.insert(banned_.end(), eos.begin(), eos.end());
        const std::span<const token_id> banned(banned_);

        cands_.clear();
        std::size_t masked = 0;  // in the block; a plan may return the rows of some of them only (sub_block_cache)
        const index_t b_begin = s.layout.block_begin(s.cursor.block), b_end = s.layout.block_end(s.cursor.block);
        for (index_t p = b_begin; p < b_end; ++p) {
            if (s.canvas[static_cast<std::size_t>(p)] != mask_id) continue;
            ++masked;
            const auto c = draw(e, plan, logits, ctx, banned, p);
            if (c) cands_.push_back({p, c->token, c->probability, c->margin, c->neg_entropy});
        }

        chosen_.clear();
        e.schedule.select(ctx, std::span<const candidate>(cands_), chosen_);
        fills_.clear();
        for (index_t j : chosen_) {
            if (j < 0 || static_cast<std::size_t>(j) >= cands_.size())
                throw contract_error("dlm::decoder: the schedule chose candidate " + std::to_string(j) + " but only " +
                                     std::to_string(cands_.size()) + " exist");
            const candidate& c = cands_[static_cast<std::size_t>(j)];
            fills_.push_back({c.position, c.token, c.probability});
        }
        edits_.clear();
        if constexpr (revising_schedule<schedule_type>) revise(e, plan, logits, ctx, banned);
        detail::apply_writes(s, fills_, edits_, ctx.forward, mask_id, who, committed, edited);
        s.result.stats.forwards += 1;
        s.result.stats.rows_computed += plan.window_size();
        stepped_ = s.cursor;
        s.cursor.step_in_block += 1;
        const block_step step{static_cast<index_t>(masked), static_cast<index_t>(masked - fills_.size()), static_cast<index_t>(edits_.size())};
        detail::advance(s, e.schedule, ctx, step, mask_id, who);
        if (s.done) s.uncond_kv.reset();
        const std::size_t final_end = detail::final_slots<schedule_type>(s);
        while (e.prefix < final_end && s.result.tokens[e.prefix] != mask_id) ++e.prefix;
    }

    /// The sampler's choice for slot `p` from its logits row, or nothing when the plan computed no
    /// row for it. Throws dlm::numeric_error when no token can be drawn.
    std::optional<slot_choice> draw(entry& e, const forward_plan& plan, std::span<const float> logits, const step_context& ctx,
                                    std::span<const token_id> banned, index_t p) const {
        const auto vocab = static_cast<std::size_t>(dec_->model().vocab_size());
        const index_t row = e.st.layout.row_for_slot(p);
        if (row < plan.logits_begin || row >= plan.logits_end) return std::nullopt;
        const slot_choice c = e.sampler.sample(logits.subspan(static_cast<std::size_t>(row - plan.logits_begin) * vocab, vocab),
                                               ctx.key(rng_stream::sampling, p), banned);
        if (!std::isfinite(c.probability) || c.token < 0 || static_cast<std::size_t>(c.token) >= vocab)
            throw numeric_error(static_cast<index_t>(e.id & 0x7fffffffu), ctx.forward, row,
                                "the logits row holds NaN or +Inf (or every token is banned), so no token can be drawn");
        return c;
    }

    /// A revising schedule's edits of one step: sample every filled generation slot of the active
    /// block from `logits`, as it was before this step's fills, and let the schedule choose (edits_).
    void revise(entry& e, const forward_plan& plan, std::span<const float> logits, const step_context& ctx, std::span<const token_id> banned) {
        sequence& s = e.st;
        const token_id mask_id = s.result.settings.mask_id.value;
        filled_.clear();
        for (index_t p = s.layout.first_slot(s.cursor.block); p < s.layout.block_end(s.cursor.block); ++p) {
            const token_id now = s.canvas[static_cast<std::size_t>(p)];
            if (now == mask_id) continue;
            const auto c = draw(e, plan, logits, ctx, banned, p);
            if (c) filled_.push_back({{p, c->token, c->probability, c->margin, c->neg_entropy}, now});
        }
        chosen_.clear();
        e.schedule.revise(ctx, std::span<const filled_candidate>(filled_), chosen_);
        for (index_t j : chosen_) {
            if (j < 0 || static_cast<std::size_t>(j) >= filled_.size())
                throw contract_error("dlm::decoder: the schedule chose to edit filled slot " + std::to_string(j) + " but only " +
                                     std::to_string(filled_.size()) + " exist");
            const filled_candidate& c = filled_[static_cast<std::size_t>(j)];
            edits_.push_back({c.position, c.token, c.probability});
        }
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
    // Scratch of step().
    std::vector<std::pair<entry*, forward_plan>> batch_;
    std::vector<forward_request<kv_type>> requests_;
    std::vector<float> logits_;
    step_events events_;
    std::vector<candidate> cands_;
    std::vector<token_id> banned_;  // the tokens no draw may return at this step: the mask id, EOS when suppressed
    std::vector<index_t> chosen_;
    std::vector<filled_candidate> filled_;            // a revising schedule's edit candidates
    std::vector<detail::slot_write> fills_, edits_;  // the writes of the step
    block_cursor stepped_;          // the cursor of the step just taken (step_event::cursor)
};

template <class Decoder>
engine(Decoder&) -> engine<Decoder>;

}  // namespace dlm
