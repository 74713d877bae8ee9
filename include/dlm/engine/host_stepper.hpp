// dlm/engine/host_stepper.hpp — the engine's step on the host: the batched forward writes every
// sequence's logits rows to host memory; each sequence's masked slots of its active block are
// sampled there (its sampler, its seed), classifier-free guidance mixes its two halves first, and its
// schedule chooses the slots to commit; a revising schedule also gets the filled slots of the block
// sampled and chooses its edits (revise). Any model, any policy (engine/step.hpp says what a stepper is).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../core/memory.hpp"
#include "../model/concept.hpp"
#include "../sampler/concept.hpp"
#include "../sampler/describe.hpp"
#include "../sampler/temperature.hpp"
#include "../schedule/concept.hpp"
#include "parallel.hpp"
#include "step.hpp"

namespace dlm::detail {

template <class Decoder>
class host_stepper {
public:
    using kv_type = typename Decoder::model_type::kv_cache;
    using input = step_input<kv_type, typename Decoder::schedule_type, typename Decoder::sampler_type>;

    /// The logits rows live in host memory, the engine weighs them when a batch joins (engine/prepare.hpp).
    static constexpr bool host_logits = true;

    explicit host_stepper(Decoder& d) : dec_(&d) {}

    /// The bytes of the logits buffer, which the next forward reuses without allocating up to this.
    [[nodiscard]] std::uint64_t held_logits_bytes() const noexcept { return logits_.capacity() * sizeof(float); }

    /// Every policy runs on the host: nothing to refuse.
    void admit(const sequence_state<kv_type>&, const typename Decoder::schedule_type&, const typename Decoder::sampler_type&) const noexcept {}

    /// The batched forward: `rows` logits rows, each sequence's at its first_row.
    void forward(std::span<const forward_request<kv_type>> requests, std::span<const input>, std::size_t rows) {
        const std::size_t need = rows * vocab();
        if (need > logits_.capacity()) {  // every forward rewrites the rows: free the old ones first, then ask for exactly these
            std::vector<float>().swap(logits_);
            if (need * sizeof(float) > weighed_above)
                check_fits("the logits of a step (" + std::to_string(rows) + " rows of a vocabulary of " + std::to_string(vocab()) + ")",
                           need * sizeof(float), "fewer or shorter sequences at once");
        }
        logits_.resize(need);
        dec_->model().forward(requests, dec_->mask(), std::span<float>(logits_));
    }

    /// Sequence `in`'s commits after the forward: sample every masked slot of its active block that the
    /// plan returned logits for, let its schedule choose. Throws dlm::numeric_error (a row no token can
    /// be drawn from) or dlm::contract_error (a schedule choosing outside its candidates).
    void choose(std::size_t, const input& in, std::vector<slot_commit>& out) {
        const std::size_t v = vocab(), n = static_cast<std::size_t>(in.plan.logits_rows()) * v;
        const std::span<float> cond(logits_.data() + in.first_row * v, n);
        if (in.cfg_factor > 0.f) {  // logits = un + (cfg_scale + 1) * (cond - un), as LLaDA's generate()
            const float* un = cond.data() + n;
            for (std::size_t k = 0; k < n; ++k) cond[k] = un[k] + in.cfg_factor * (cond[k] - un[k]);
        }
        sample(in, cond);
        chosen_.clear();
        in.schedule->select(in.ctx, std::span<const candidate>(cands_), chosen_);
        write_chosen(std::span<const candidate>(cands_), "chose candidate", out);
    }

    /// A revising schedule's edits of sequence `in` after choose() (whose logits, guidance mixed in,
    /// it reads): sample every filled generation slot of the active block, as it was before this
    /// step's fills, and let the schedule choose. Throws as choose() does.
    void revise(std::size_t, const input& in, std::vector<slot_commit>& out)
        requires revising_schedule<typename Decoder::schedule_type>
    {
        const sequence_state<kv_type>& s = *in.state;
        const std::size_t v = vocab();
        const std::span<const float> logits(logits_.data() + in.first_row * v, static_cast<std::size_t>(in.plan.logits_rows()) * v);
        const token_id mask_id = s.result.settings.mask_id.value;
        slots_.clear();
        for (index_t p = s.layout.first_slot(s.cursor.block); p < s.layout.block_end(s.cursor.block); ++p)
            if (s.canvas[static_cast<std::size_t>(p)] != mask_id) slots_.push_back(p);
        draw_slots(in, logits);
        filled_.clear();
        for (std::size_t i = 0; i < slots_.size(); ++i)
            if (const auto& c = drawn_[i])
                filled_.push_back({{slots_[i], c->token, c->probability, c->margin, c->neg_entropy}, s.canvas[static_cast<std::size_t>(slots_[i])]});
        chosen_.clear();
        in.schedule->revise(in.ctx, std::span<const filled_candidate>(filled_), chosen_);
        write_chosen(std::span<const filled_candidate>(filled_), "chose to edit filled slot", out);
    }

    /// A uniform-state schedule's step of sequence `in` (instead of choose): its logits rows divided by
    /// the schedule's step_temperature, every slot of the active block sampled from them (no token
    /// banned but EOS where the schedule suppresses it), its argmax taken as the draft, the schedule's
    /// select choosing the slots to accept. The entropies the schedule weighs are the step-tempered
    /// rows' (as the reference's processed logits), not the distribution the sampler's own temperature
    /// or top-k / top-p made of them. Throws as choose() does, and dlm::contract_error when the
    /// plan returned no row for a slot (the whole block is read each step).
    void denoise(std::size_t, const input& in, uniform_step& out)
        requires uniform_state_schedule<typename Decoder::schedule_type>
    {
        const sequence_state<kv_type>& s = *in.state;
        const std::size_t v = vocab(), rows = static_cast<std::size_t>(in.plan.logits_rows());
        const std::span<float> tempered(logits_.data() + in.first_row * v, rows * v);
        const float t = in.schedule->step_temperature(in.ctx);
        for (std::size_t r = 0; r < rows; ++r) detail::divide_by_temperature(tempered.subspan(r * v, v), t);
        banned_.clear();
        if (schedule_suppresses_eos(*in.schedule, in.ctx)) banned_.assign(in.ctx.eos_ids.begin(), in.ctx.eos_ids.end());
        slots_.clear();
        for (index_t p = s.layout.first_slot(s.cursor.block); p < s.layout.block_end(s.cursor.block); ++p) slots_.push_back(p);
        cands_.resize(slots_.size());
        out.accepted.clear();
        out.draft.resize(slots_.size());
        for_each_slot(slots_.size(), v, sampler_is_concurrent<typename Decoder::sampler_type>, [&](std::size_t i) {
            const index_t p = slots_[i];
            const auto c = draw(in, tempered, p);
            if (!c) throw contract_error("dlm::decoder: a uniform-state schedule reads every slot of its block, but the plan returned no logits row for position " + std::to_string(p));
            const std::span<const float> row = tempered.subspan(static_cast<std::size_t>(s.layout.row_for_slot(p) - in.plan.logits_begin) * v, v);
            float neg_entropy = 0.f;
            if (banned_.empty()) {  // the draft's argmax and probability from the entropy's own passes
                const row_summary r = summarize(row, c->token);
                neg_entropy = r.choice.neg_entropy;
                out.draft[i] = std::isnan(r.sum) ? top_of(row, p) : slot_commit{p, static_cast<token_id>(r.top), static_cast<float>(1.0 / r.sum)};
            } else {
                neg_entropy = describe(row, c->token, banned_).neg_entropy;
                out.draft[i] = top_of(row, p);
            }
            cands_[i] = {p, c->token, c->probability, c->margin, neg_entropy};
        });
        double entropy = 0.0;
        for (const candidate& c : cands_) entropy -= static_cast<double>(c.neg_entropy);
        out.mean_entropy = cands_.empty() ? 0.0 : entropy / static_cast<double>(cands_.size());
        chosen_.clear();
        in.schedule->select(in.ctx, std::span<const candidate>(cands_), chosen_);
        write_chosen(std::span<const candidate>(cands_), "accepted candidate", out.accepted);
        out.tempered = tempered;
    }

private:
    /// The argmax of a tempered row (the first of equal maxima, as torch.argmax) and its probability.
    static slot_commit top_of(std::span<const float> row, index_t position) {
        std::size_t best = 0;
        for (std::size_t i = 1; i < row.size(); ++i)
            if (row[i] > row[best]) best = i;
        double sum = 0.0;
        for (const float x : row) sum += std::exp(static_cast<double>(x) - static_cast<double>(row[best]));
        return {position, static_cast<token_id>(best), static_cast<float>(1.0 / sum)};
    }

    /// The writes of the schedule's choice (chosen_, indices into `from`). Throws dlm::contract_error
    /// for an index outside `from` ("the schedule <what> j but only n exist").
    template <class Candidate>
    void write_chosen(std::span<const Candidate> from, const char* what, std::vector<slot_commit>& out) const {
        for (const index_t j : chosen_) {
            if (j < 0 || static_cast<std::size_t>(j) >= from.size())
                throw contract_error(std::string("dlm::decoder: the schedule ") + what + " " + std::to_string(j) + " but only " +
                                     std::to_string(from.size()) + " exist");
            const Candidate& c = from[static_cast<std::size_t>(j)];
            out.push_back({c.position, c.token, c.probability});
        }
    }

    [[nodiscard]] std::size_t vocab() const { return static_cast<std::size_t>(dec_->model().vocab_size()); }

    /// The sampler's choice for slot `p` from its logits row (banned_ as sample() set it), or nothing
    /// when the plan returned no row for it. Throws dlm::numeric_error when no token can be drawn (the
    /// row holds NaN or +Inf, or no finite logit outside banned_), and dlm::contract_error when the row
    /// is sound but the sampler broke its contract (a token outside the vocabulary or in banned_, a
    /// probability that is not finite): the policy's fault, not the model's.
    std::optional<slot_choice> draw(const input& in, std::span<const float> logits, index_t p) const {
        const std::size_t v = vocab();
        const index_t row = in.state->layout.row_for_slot(p);
        if (row < in.plan.logits_begin || row >= in.plan.logits_end) return std::nullopt;
        const std::span<const float> z = logits.subspan(static_cast<std::size_t>(row - in.plan.logits_begin) * v, v);
        const slot_choice c = in.sampler->sample(z, in.ctx.key(rng_stream::sampling, p), std::span<const token_id>(banned_));
        const bool in_vocab = c.token >= 0 && static_cast<std::size_t>(c.token) < v;
        if (std::isfinite(c.probability) && in_vocab && !is_banned(c.token, banned_)) return c;
        if (!can_draw(z)) throw numeric_error(in.index, in.ctx.forward, row, "the logits row holds NaN or +Inf (or every token is banned), so no token can be drawn");
        const std::string what = !in_vocab ? "token " + std::to_string(c.token) + ", outside the vocabulary [0, " + std::to_string(v) + ")"
                                 : is_banned(c.token, banned_) ? "token " + std::to_string(c.token) + ", which it was told not to draw (the mask id, or an EOS id the schedule suppresses)"
                                                               : "probability " + std::to_string(c.probability) + " for token " + std::to_string(c.token);
        throw contract_error("dlm::decoder: the sampler returned " + what + " for position " + std::to_string(p) + " of sequence " +
                             std::to_string(in.index) + " from a finite logits row; a sampler returns an id in [0, vocab) outside `banned`, with a finite probability");
    }

    /// Whether a row leaves a token to draw: no NaN or +Inf, and a finite logit outside banned_.
    bool can_draw(std::span<const float> z) const {
        bool any = false;
        for (std::size_t i = 0; i < z.size(); ++i) {
            if (std::isnan(z[i]) || z[i] == std::numeric_limits<float>::infinity()) return false;
            any = any || (std::isfinite(z[i]) && !is_banned(static_cast<token_id>(i), banned_));
        }
        return any;
    }

    /// The candidates of a step: one draw per masked slot of the active block with a logits row.
    void sample(const input& in, std::span<const float> logits) {
        const sequence_state<kv_type>& s = *in.state;
        const token_id mask_id = s.result.settings.mask_id.value;
        const std::span<const token_id> eos = in.ctx.eos_ids;
        // The mask id is never a token to commit: a reference that draws it leaves the slot masked (LLaDA
        // generate.py, Dream's _sample); dlm bans it from every draw (a fill or an edit never writes it).
        banned_.assign(1, mask_id);
        if (schedule_suppresses_eos(*in.schedule, in.ctx)) banned_.insert(banned_.end(), eos.begin(), eos.end());
        slots_.clear();
        for_each_masked_slot(s, mask_id, [&](index_t p) { slots_.push_back(p); });
        draw_slots(in, logits);
        cands_.clear();
        for (std::size_t i = 0; i < slots_.size(); ++i)
            if (const auto& c = drawn_[i]) cands_.push_back({slots_[i], c->token, c->probability, c->margin, c->neg_entropy});
    }

    /// drawn_[i]: draw() of slots_[i], side by side on the threads where the sampler allows it
    /// (engine/parallel.hpp; the same draws either way).
    void draw_slots(const input& in, std::span<const float> logits) {
        drawn_.assign(slots_.size(), std::nullopt);
        for_each_slot(slots_.size(), vocab(), sampler_is_concurrent<typename Decoder::sampler_type>,
                      [&](std::size_t i) { drawn_[i] = draw(in, logits, slots_[i]); });
    }

    Decoder* dec_;
    std::vector<float> logits_;
    std::vector<candidate> cands_;
    std::vector<token_id> banned_;  // the tokens no draw may return at this step: the mask id, EOS when suppressed
    std::vector<index_t> chosen_;
    std::vector<filled_candidate> filled_;  // a revising schedule's edit candidates
    std::vector<index_t> slots_;                   // the positions this step draws, in order
    std::vector<std::optional<slot_choice>> drawn_;  // their draws (draw_slots)
};

/// The stepper an engine of this decoder runs: the decoder's `stepper_type`, else the host's.
template <class Decoder>
struct stepper_of {
    using type = host_stepper<Decoder>;
};
template <class Decoder>
    requires requires { typename Decoder::stepper_type; }
struct stepper_of<Decoder> {
    using type = typename Decoder::stepper_type;
};

}  // namespace dlm::detail
