// dlm/decoder.hpp — the one decoding loop, composed from four policies.
//
//   dlm::decoder<Model, Mask, Cache, Schedule, Sampler>
//
// Every decoder of a masked-diffusion LM (and plain autoregressive decoding) is the same loop over a
// canvas [prompt | MASK ...]: plan a forward (Cache), run it with the attention mask (Mask), draw a
// token and confidence for each masked slot of the active block (Sampler), commit some of them
// (Schedule), and move to the next block when the active one has no masked slot left.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/caches.hpp"
#include "core/error.hpp"
#include "core/result.hpp"
#include "core/sequence_state.hpp"
#include "mask/masks.hpp"
#include "model/concept.hpp"
#include "sampler/samplers.hpp"
#include "schedule/concept.hpp"

namespace dlm {

namespace detail {
template <class C>
constexpr bool reuses_exact_kv() {
    if constexpr (cache_has_exactness_trait<C> && cache_has_storage_trait<C>) return C::is_exact && C::needs_storage;
    else return false;
}
template <class M>
constexpr bool kv_final_under() {
    if constexpr (mask_has_finality_trait<M>) return M::committed_kv_is_final;
    else return true;
}
}  // namespace detail

/// The message of both decoders (host and CUDA) when an exact KV cache meets a mask whose keys
/// change; a macro because static_assert takes only a string literal in C++20.
#define DLM_EXACT_CACHE_NEEDS_FINAL_KV(who)                                                                                  \
    who ": an exact KV cache needs a mask under which committed keys and values are final (causal_mask or block_causal_mask). " \
        "Under a bidirectional mask every key changes whenever any slot is committed, so reusing cached K/V would not be "     \
        "exact: use no_cache, or Fast-dLLM's approximate approx_prefix_cache or dual_cache."

template <class Model, class Mask, class Cache, class Schedule, class Sampler>
class decoder {
    // Sentence-style checks: a policy missing a hook fails here, where the decoder is named, with the
    // name of the hook.
    static_assert(model_has_traits<Model>,
                  "dlm::decoder: the Model must provide vocab_size(), mask_id(), eos_ids() and logits_shift().");
    static_assert(model_has_kv_cache<Model>,
                  "dlm::decoder: the Model must provide a nested type kv_cache and make_kv_cache(capacity).");
    static_assert(model_has_forward<Model>,
                  "dlm::decoder: the Model must provide forward(requests, mask, logits), templated on the mask.");
    static_assert(mask_has_allowed<Mask>,
                  "dlm::decoder: the Mask policy must provide `bool allowed(const canvas_layout&, index_t q, index_t k) const`.");
    static_assert(mask_has_key_end<Mask>,
                  "dlm::decoder: the Mask policy must provide `index_t key_end(const canvas_layout&, index_t q) const`.");
    static_assert(mask_has_block_length<Mask>,
                  "dlm::decoder: the Mask policy must provide `index_t block_length_for(index_t gen_length) const`.");
    static_assert(mask_has_finality_trait<Mask>,
                  "dlm::decoder: the Mask policy must declare `static constexpr bool committed_kv_is_final`.");
    static_assert(cache_has_plan<Cache>,
                  "dlm::decoder: the Cache policy must provide `forward_plan plan(const Mask&, const canvas_layout&, const block_cursor&) const`.");
    static_assert(cache_has_exactness_trait<Cache> && cache_has_storage_trait<Cache>,
                  "dlm::decoder: the Cache policy must declare `static constexpr bool is_exact` and `needs_storage`.");
    static_assert(schedule_has_select<Schedule>,
                  "dlm::decoder: the Schedule policy must provide `void select(const step_context&, std::span<const candidate>, std::vector<index_t>&) const`.");
    static_assert(sampler_has_sample<Sampler>,
                  "dlm::decoder: the Sampler policy must provide `slot_choice sample(std::span<const float>, const random_key&, std::span<const token_id>) const`.");
    // Where policies must agree.
    static_assert(!detail::reuses_exact_kv<Cache>() || detail::kv_final_under<Mask>(), DLM_EXACT_CACHE_NEEDS_FINAL_KV("dlm::decoder"));

public:
    using model_type = Model;
    using mask_type = Mask;
    using cache_type = Cache;
    using schedule_type = Schedule;
    using sampler_type = Sampler;

    explicit decoder(Model& model, Mask mask = {}, Cache cache = {}, Schedule schedule = {}, Sampler sampler = {})
        : model_(&model), mask_(mask), cache_(cache), schedule_(schedule), sampler_(sampler) {
        if constexpr (requires { sampler_.validate(); }) sampler_.validate();
    }

    [[nodiscard]] const Mask& mask() const noexcept { return mask_; }
    [[nodiscard]] const Cache& cache() const noexcept { return cache_; }
    [[nodiscard]] const Schedule& schedule() const noexcept { return schedule_; }
    [[nodiscard]] const Sampler& sampler() const noexcept { return sampler_; }
    [[nodiscard]] Model& model() const noexcept { return *model_; }

    /// Decode a batch of prompts. Sequences may have different prompt lengths; each advances through
    /// its own blocks, all active sequences sharing every batched forward. Every parameter is checked
    /// before the first forward (dlm::invalid_parameter names the one that is wrong). A sequence that
    /// fails (NaN/Inf logits, a policy breaking its contract) ends alone, with status failed and the
    /// error on its result; the others finish normally.
    decode_result generate(std::span<const std::vector<token_id>> prompts, const generation_options& options,
                           const step_callback& on_step = {}) {
        std::vector<sequence> seqs =
            detail::prepare_batch<kv_type, Cache::needs_storage>(*model_, mask_, schedule_, prompts, options, cfg_refusal());
        const decoding_settings& settings = seqs.front().result.settings;
        const bool cfg = options.cfg_scale > 0.0;
        const auto cfg_factor = static_cast<float>(options.cfg_scale + 1.0);
        decode_result out;
        std::vector<forward_request<kv_type>> requests;
        std::vector<index_t> active;
        std::vector<float> logits;
        const auto vocab = static_cast<std::size_t>(model_->vocab_size());
        const auto clock_start = std::chrono::steady_clock::now();
        bool cancelled = false;

        while (!cancelled) {
            active.clear();
            requests.clear();
            std::size_t rows = 0;
            for (std::size_t i = 0; i < seqs.size(); ++i) {
                auto& s = seqs[i];
                if (s.done) continue;
                const forward_plan plan = cache_.plan(mask_, s.layout, s.cursor);
                detail::check_plan(plan, s.layout, who);
                requests.push_back({s.canvas, s.layout, plan, s.kv ? &*s.kv : nullptr});
                // LLaDA's classifier-free guidance: the same forward on the canvas with the prompt masked.
                if (cfg) requests.push_back({s.uncond_canvas, s.layout, plan, s.uncond_kv ? &*s.uncond_kv : nullptr});
                active.push_back(static_cast<index_t>(i));
                rows += static_cast<std::size_t>(plan.logits_rows()) * (cfg ? 2 : 1);
            }
            if (active.empty()) break;
            logits.resize(rows * vocab);

            const auto t0 = std::chrono::steady_clock::now();
            model_->forward(std::span<const forward_request<kv_type>>(requests), mask_, std::span<float>(logits));
            out.stats.model_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            ++out.stats.forwards;

            std::size_t row_offset = 0;
            for (std::size_t r = 0; r < active.size() && !cancelled; ++r) {
                auto& s = seqs[static_cast<std::size_t>(active[r])];
                const forward_plan& plan = requests[r * (cfg ? 2 : 1)].plan;
                const std::size_t n = static_cast<std::size_t>(plan.logits_rows()) * vocab;
                const std::span<float> cond(logits.data() + row_offset, n);
                if (cfg) {  // logits = un + (cfg_scale + 1) * (cond - un), as LLaDA's generate()
                    const float* un = logits.data() + row_offset + n;
                    for (std::size_t k = 0; k < n; ++k) cond[k] = un[k] + cfg_factor * (cond[k] - un[k]);
                }
                row_offset += n * (cfg ? 2 : 1);
                try {
                    step(s, active[r], plan, cond, settings, on_step, cancelled);
                } catch (const error& e) {  // one failure ends its own sequence only
                    s.done = true;
                    s.kv.reset();
                    s.uncond_kv.reset();
                    s.result.status = sequence_status::failed;
                    s.result.message = e.what();
                    s.result.error = std::current_exception();
                }
            }
        }
        const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - clock_start).count();
        out.stats.overhead_seconds = std::max(0.0, total - out.stats.model_seconds);
        out.sequences.reserve(seqs.size());
        for (auto& s : seqs) {
            if (cancelled && !s.done) s.result.status = sequence_status::cancelled;
            detail::finish(s.result, settings.eos_ids.value);
            out.sequences.push_back(std::move(s.result));
        }
        return out;
    }

    /// A single prompt. Its failure, having no other sequence to spare, is thrown (typed).
    sequence_result generate(const std::vector<token_id>& prompt, const generation_options& options,
                             const step_callback& on_step = {}) {
        sequence_result r = std::move(generate(std::span<const std::vector<token_id>>(&prompt, 1), options, on_step).sequences.front());
        r.rethrow_if_failed();
        return r;
    }

    /// A schedule that leaves a block unfinished after this many forwards per slot is broken; the
    /// decoder throws dlm::contract_error instead of looping forever.
    static constexpr index_t max_steps_per_slot = detail::max_steps_per_slot;

private:
    using kv_type = typename Model::kv_cache;

    using sequence = detail::sequence_state<kv_type>;
    static constexpr const char* who = "dlm::decoder";

    /// Why classifier-free guidance cannot run with this cache ("" when it can).
    static std::string cfg_refusal() {
        if constexpr (detail::reuses_exact_kv<Cache>())
            return "classifier-free guidance is not available with an exact KV cache: its unconditional canvas masks the prompt, "
                   "which an exact cache's plans do not account for; use a preset with no cache or an approximate one (llada, "
                   "dream, fast_dllm, fast_dllm_dual, cd4lm)";
        else return "";
    }

    /// One sequence's step after a forward: sample every masked slot of its active block from `logits`
    /// (its logits rows), let the schedule choose, commit, advance, and call the callback. Throws
    /// dlm::numeric_error or dlm::contract_error for this sequence alone.
    void step(sequence& s, index_t index, const forward_plan& plan, std::span<const float> logits, const decoding_settings& settings,
              const step_callback& on_step, bool& cancelled) {
        const auto vocab = static_cast<std::size_t>(model_->vocab_size());
        const token_id mask_id = settings.mask_id.value;
        const std::span<const token_id> eos = settings.eos_ids.value;
        const step_context ctx{s.layout, s.cursor, s.masked_at_block_start, s.result.stats.committed, s.result.stats.forwards,
                               s.result.settings.seed.value, eos, settings.end_of_turn_ids.value};
        bool ban_eos = false;
        if constexpr (requires { schedule_.suppress_eos(ctx); }) ban_eos = schedule_.suppress_eos(ctx);
        // The mask id is never a token to commit: a reference that draws it leaves the slot masked (LLaDA
        // generate.py, Dream's _sample); dlm bans it from every draw, so every commit is final.
        banned_.assign(1, mask_id);
        if (ban_eos) banned_.insert(banned_.end(), eos.begin(), eos.end());
        const std::span<const token_id> banned(banned_);

        cands_.clear();
        const index_t b_begin = s.layout.block_begin(s.cursor.block), b_end = s.layout.block_end(s.cursor.block);
        for (index_t p = b_begin; p < b_end; ++p) {
            if (s.canvas[static_cast<std::size_t>(p)] != mask_id) continue;
            const index_t row = s.layout.row_for_slot(p);
            const slot_choice c = sampler_.sample(logits.subspan(static_cast<std::size_t>(row - plan.logits_begin) * vocab, vocab),
                                                  ctx.key(rng_stream::sampling, p), banned);
            if (!std::isfinite(c.probability) || c.token < 0 || static_cast<std::size_t>(c.token) >= vocab)
                throw numeric_error(index, ctx.forward, row,
                                    "the logits row holds NaN or +Inf (or every token is banned), so no token can be drawn");
            cands_.push_back({p, c.token, c.probability, c.margin, c.neg_entropy});
        }

        chosen_.clear();
        schedule_.select(ctx, std::span<const candidate>(cands_), chosen_);
        committed_.clear();
        for (index_t j : chosen_) {
            if (j < 0 || static_cast<std::size_t>(j) >= cands_.size())
                throw contract_error("dlm::decoder: the schedule chose candidate " + std::to_string(j) + " but only " +
                                     std::to_string(cands_.size()) + " exist");
            const candidate& c = cands_[static_cast<std::size_t>(j)];
            const auto at = static_cast<std::size_t>(c.position);
            if (s.canvas[at] != mask_id) throw contract_error("dlm::decoder: the schedule chose candidate " + std::to_string(j) + " twice");
            s.canvas[at] = c.token;
            if (!s.uncond_canvas.empty()) s.uncond_canvas[at] = c.token;
            const auto g = static_cast<std::size_t>(c.position - s.layout.prompt_length);
            s.result.tokens[g] = c.token;
            s.result.commit_forward[g] = ctx.forward;
            s.result.commit_confidence[g] = c.probability;
            committed_.push_back(c.position);
        }
        s.result.stats.committed += static_cast<index_t>(chosen_.size());
        s.result.stats.forwards += 1;
        s.result.stats.rows_computed += plan.window_size();
        const block_cursor stepped = s.cursor;
        s.cursor.step_in_block += 1;
        detail::advance(s, schedule_, ctx, cands_.size() - chosen_.size(), mask_id, who);
        if (s.done) s.uncond_kv.reset();

        if (on_step) {
            const step_event ev{index, ctx.forward, stepped, s.layout, s.canvas, committed_, &s.result};
            if (on_step(ev) == step_action::cancel) cancelled = true;
        }
    }

    Model* model_;
    Mask mask_;
    Cache cache_;
    Schedule schedule_;
    Sampler sampler_;
    std::vector<candidate> cands_;  // scratch of step()
    std::vector<token_id> banned_;  // scratch of step(): the tokens no draw may return at this step: the mask id, EOS when suppressed
    std::vector<index_t> chosen_, committed_;
};

}  // namespace dlm
