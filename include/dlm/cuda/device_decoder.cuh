// dlm/cuda/device_decoder.cuh — decoding without a per-step round trip of logits.
//
//   dlm::cuda::transformer model = dlm::cuda::transformer::load(dir);
//   dlm::cuda::device_decoder_t<dlm::presets::cdlm<dlm::cuda::transformer>> dec(model);  // any preset
//   auto out = dec.generate(prompts, {256, seed});      // same result type, same step callback
//
// The same loop as dlm::decoder (plans from the cache policy, batched forwards, blocks, early stops,
// the step callback), with the per-slot work moved to the GPU: after each forward, whose logits stay
// on the device, one fused kernel samples every masked slot of every active block (sampling.cuh) and
// one kernel per sequence selects the slots to commit (selection.cuh). Per step, the host uploads the
// slot list (a few bytes per slot) and downloads only the committed slots' ids, tokens and
// probabilities. The host keeps the canvas, so the callback sees what it sees with dlm::decoder.
//
// Which combinations run: every mask and cache policy; the samplers of device_sampler (greedy,
// categorical without top-k / top-p, LLaDA's) and the schedules of device_schedule (threshold, CDLM,
// factor, LLaDA, Dream, CD4LM, next slot) — so every preset of presets.hpp. Any other policy is refused
// at compile time; run it with dlm::decoder, which brings the logits to the host. Blocks may have at
// most max_selection_slots slots.
//
// Results equal dlm::decoder's on the same model: tokens are chosen with the same arithmetic and the
// same random numbers; a confidence can differ from the host's in the last bit (sums in another order),
// which matters only for a slot exactly at a threshold.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <concepts>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "../decoder.hpp"
#include "runtime.cuh"
#include "sampling.cuh"
#include "selection.cuh"

namespace dlm::cuda {

/// A model whose forward can leave the logits on the device (dlm::cuda::basic_transformer).
template <class M, class Mask>
concept device_model = language_model<M> && requires(M& m, std::span<const forward_request<typename M::kv_cache>> rq, const Mask& mask) {
    { m.forward_device(rq, mask) } -> std::same_as<const float*>;
    { m.stream() } -> std::same_as<cudaStream_t>;
};

template <class Model, class Mask, class Cache, class Schedule, class Sampler>
class device_decoder {
    static_assert(device_model<Model, Mask>,
                  "dlm::cuda::device_decoder: the Model must keep its logits on the device: provide `const float* forward_device(requests, "
                  "mask)` and `cudaStream_t stream()` (dlm::cuda::basic_transformer does); other models run with dlm::decoder.");
    static_assert(attention_mask<Mask>, "dlm::cuda::device_decoder: the Mask must model dlm::attention_mask.");
    static_assert(kv_cache_policy<Cache>, "dlm::cuda::device_decoder: the Cache must model dlm::kv_cache_policy.");
    static_assert(!dlm::detail::reuses_exact_kv<Cache>() || dlm::detail::kv_final_under<Mask>(),
                  DLM_EXACT_CACHE_NEEDS_FINAL_KV("dlm::cuda::device_decoder"));
    static_assert(device_schedule<Schedule>::supported,
                  "dlm::cuda::device_decoder: this schedule has no device implementation. Specialize dlm::cuda::device_schedule for it, "
                  "or decode with dlm::decoder, which selects on the host.");
    static_assert(device_sampler<Sampler>::supported,
                  "dlm::cuda::device_decoder: this sampler has no device implementation (greedy_sampler, categorical_sampler and "
                  "presets::llada_sampler have one); decode with dlm::decoder, which samples on the host.");

public:
    using model_type = Model;
    using mask_type = Mask;
    using cache_type = Cache;
    using schedule_type = Schedule;
    using sampler_type = Sampler;

    /// Throws invalid_parameter for sampler options the device kernel does not implement (top-k, top-p).
    explicit device_decoder(Model& model, Mask mask = {}, Cache cache = {}, Schedule schedule = {}, Sampler sampler = {})
        : model_(&model), mask_(mask), cache_(cache), schedule_(schedule), sampler_(sampler), params_(device_sampler<Sampler>::params(sampler)) {}

    [[nodiscard]] const Mask& mask() const noexcept { return mask_; }
    [[nodiscard]] const Cache& cache() const noexcept { return cache_; }
    [[nodiscard]] const Schedule& schedule() const noexcept { return schedule_; }
    [[nodiscard]] const Sampler& sampler() const noexcept { return sampler_; }
    [[nodiscard]] Model& model() const noexcept { return *model_; }

    /// Decodes a batch of prompts; the contract of dlm::decoder::generate (stats.model_seconds counts
    /// the forward and the device-side sampling and selection).
    decode_result generate(std::span<const std::vector<token_id>> prompts, const generation_options& options, const step_callback& on_step = {}) {
        std::vector<sequence> seqs =
            dlm::detail::prepare_batch<kv_type, Cache::needs_storage>(*model_, mask_, schedule_, prompts, options);
        mask_id_ = model_->mask_id();
        for (sequence& s : seqs)  // the kernels take one seed for the batch (per-sequence seeds: host decoder only)
            s.result.settings.seed = {options.seed, setting_source::user, "generation_options::seed (the CUDA decoder draws every sequence from it)"};
        stride_ = seqs.front().layout.block_length;
        if (stride_ > max_selection_slots)
            throw invalid_parameter("block_length", "the device decoder selects among at most " + std::to_string(max_selection_slots) +
                                                        " slots per block, got " + std::to_string(stride_) + "; use smaller blocks or dlm::decoder");
        const std::span<const token_id> eos = seqs.front().result.settings.eos_ids.value;
        const cudaStream_t stream = model_->stream();
        eos_.reserve(std::max<std::size_t>(eos.size(), 1), "EOS ids");
        upload(eos_.data(), eos.data(), eos.size(), stream, "EOS ids");
        const index_t vocab = model_->vocab_size();
        decode_result out;
        std::vector<forward_request<kv_type>> requests;
        std::vector<index_t> active, positions, committed_positions;
        std::vector<slot_task> slots;
        std::vector<selection_task> tasks;
        std::vector<step_context> contexts;
        const auto clock_start = std::chrono::steady_clock::now();
        bool cancelled = false;

        while (!cancelled) {
            active.clear();
            requests.clear();
            slots.clear();
            tasks.clear();
            contexts.clear();
            positions.clear();
            index_t logits_row0 = 0;
            for (std::size_t i = 0; i < seqs.size(); ++i) {
                sequence& s = seqs[i];
                if (s.done) continue;
                const forward_plan plan = cache_.plan(mask_, s.layout, s.cursor);
                dlm::detail::check_plan(plan, s.layout, who);
                requests.push_back({s.canvas, s.layout, plan, s.kv ? &*s.kv : nullptr});
                active.push_back(static_cast<index_t>(i));
                const step_context ctx{s.layout, s.cursor, s.masked_at_block_start, s.result.stats.committed, s.result.stats.forwards, options.seed, eos};
                bool ban = false;
                if constexpr (requires { schedule_.suppress_eos(ctx); }) ban = schedule_.suppress_eos(ctx);
                selection_task t;
                t.first = static_cast<index_t>(slots.size());
                t.forward = ctx.forward;
                for (index_t p = s.layout.block_begin(s.cursor.block); p < s.layout.block_end(s.cursor.block); ++p) {
                    if (s.canvas[static_cast<std::size_t>(p)] != mask_id_) continue;
                    slots.push_back({logits_row0 + s.layout.row_for_slot(p) - plan.logits_begin, p, ctx.forward, ban ? 1 : 0});
                    positions.push_back(p);
                }
                t.count = static_cast<index_t>(slots.size()) - t.first;
                device_schedule<Schedule>::prepare(schedule_, ctx, t);
                tasks.push_back(t);
                contexts.push_back(ctx);
                logits_row0 += plan.logits_rows();
            }
            if (active.empty()) break;

            const auto t0 = std::chrono::steady_clock::now();
            const float* logits = model_->forward_device(std::span<const forward_request<kv_type>>(requests), mask_);
            run_step(logits, vocab, slots, tasks, options.seed, static_cast<int>(eos.size()), stream);
            out.stats.model_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            ++out.stats.forwards;

            for (std::size_t r = 0; r < active.size() && !cancelled; ++r) {
                sequence& s = seqs[static_cast<std::size_t>(active[r])];
                const step_context& ctx = contexts[r];
                const selection_task& t = tasks[r];
                const selection_header& h = headers_host_.data()[r];
                if (h.bad >= 0) {
                    const index_t p = positions[static_cast<std::size_t>(t.first + h.bad)];
                    throw numeric_error(active[r], ctx.forward, s.layout.row_for_slot(p),
                                        "the logits row holds NaN or +Inf (or every token is banned), so no token can be drawn");
                }
                committed_positions.clear();
                const commit_record* rec = records_host_.data() + r * static_cast<std::size_t>(stride_);
                for (index_t j = 0; j < h.count; ++j) {
                    if (rec[j].index < 0 || rec[j].index >= t.count)
                        throw contract_error("dlm::cuda::device_decoder: the device schedule chose candidate " + std::to_string(rec[j].index) +
                                             " but only " + std::to_string(t.count) + " exist");
                    const index_t p = positions[static_cast<std::size_t>(t.first + rec[j].index)];
                    token_id& slot_token = s.canvas[static_cast<std::size_t>(p)];
                    if (slot_token != mask_id_)
                        throw contract_error("dlm::cuda::device_decoder: the device schedule chose candidate " + std::to_string(rec[j].index) + " twice");
                    slot_token = rec[j].token;
                    const auto g = static_cast<std::size_t>(p - s.layout.prompt_length);
                    s.result.tokens[g] = rec[j].token;
                    s.result.commit_forward[g] = ctx.forward;
                    s.result.commit_confidence[g] = rec[j].probability;
                    committed_positions.push_back(p);
                }
                s.result.stats.committed += h.count;
                s.result.stats.forwards += 1;
                s.result.stats.rows_computed += requests[r].plan.window_size();
                const block_cursor stepped = s.cursor;
                s.cursor.step_in_block += 1;
                dlm::detail::advance(s, schedule_, ctx, static_cast<std::size_t>(t.count - h.count), mask_id_, who);
                if (on_step) {
                    const step_event ev{active[r], ctx.forward, stepped, s.layout, s.canvas, committed_positions, &s.result};
                    if (on_step(ev) == step_action::cancel) cancelled = true;
                }
            }
        }
        const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - clock_start).count();
        out.stats.overhead_seconds = std::max(0.0, total - out.stats.model_seconds);
        out.sequences.reserve(seqs.size());
        for (sequence& s : seqs) {
            if (cancelled && !s.done) s.result.status = sequence_status::cancelled;
            dlm::detail::finish(s.result, eos);
            out.sequences.push_back(std::move(s.result));
        }
        return out;
    }

    /// A single prompt.
    sequence_result generate(const std::vector<token_id>& prompt, const generation_options& options, const step_callback& on_step = {}) {
        return std::move(generate(std::span<const std::vector<token_id>>(&prompt, 1), options, on_step).sequences.front());
    }

    /// As dlm::decoder: a schedule that leaves a block unfinished after this many forwards per slot is broken.
    static constexpr index_t max_steps_per_slot = dlm::detail::max_steps_per_slot;

private:
    using kv_type = typename Model::kv_cache;

    using sequence = dlm::detail::sequence_state<kv_type>;
    static constexpr const char* who = "dlm::cuda::device_decoder";

    /// Samples and selects on the device, then brings the headers and commit records to the host.
    void run_step(const float* logits, index_t vocab, const std::vector<slot_task>& slots, const std::vector<selection_task>& tasks,
                  std::uint64_t seed, int n_eos, cudaStream_t stream) {
        const std::size_t n_slots = slots.size(), n_seq = tasks.size();
        const std::size_t slot_bytes = n_slots * sizeof(slot_task), task_at = (slot_bytes + 15) / 16 * 16,
                          bytes = task_at + n_seq * sizeof(selection_task);
        staging_host_.reserve(bytes);
        staging_device_.reserve(bytes, "decoding step (slots and tasks)");
        std::copy_n(reinterpret_cast<const std::byte*>(slots.data()), slot_bytes, staging_host_.data());
        std::copy_n(reinterpret_cast<const std::byte*>(tasks.data()), n_seq * sizeof(selection_task), staging_host_.data() + task_at);
        upload(staging_device_.data(), staging_host_.data(), bytes, stream, "decoding step");
        const auto* d_slots = reinterpret_cast<const slot_task*>(staging_device_.data());
        const auto* d_tasks = reinterpret_cast<const selection_task*>(staging_device_.data() + task_at);
        results_.reserve(std::max<std::size_t>(n_slots, 1), "slot results");
        headers_.reserve(n_seq, "selection headers");
        records_.reserve(n_seq * static_cast<std::size_t>(stride_), "commit records");
        headers_host_.reserve(n_seq);
        records_host_.reserve(n_seq * static_cast<std::size_t>(stride_));
        sample_slots(logits, vocab, d_slots, results_.data(), n_slots, params_, seed, eos_.data(), n_eos, stream);
        select_slots(schedule_, d_tasks, n_seq, d_slots, results_.data(), seed, eos_.data(), n_eos, vocab, headers_.data(), records_.data(), stride_,
                     stream);
        download(headers_host_.data(), headers_.data(), n_seq, stream, "selection headers");
        download(records_host_.data(), records_.data(), n_seq * static_cast<std::size_t>(stride_), stream, "commit records");
        check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (decoding step)");
    }

    Model* model_;
    Mask mask_;
    Cache cache_;
    Schedule schedule_;
    Sampler sampler_;
    sampler_params params_;
    token_id mask_id_ = 0;
    index_t stride_ = 1;
    device_buffer<token_id> eos_;
    pinned_buffer<std::byte> staging_host_;
    device_buffer<std::byte> staging_device_;
    device_buffer<slot_result> results_;
    device_buffer<selection_header> headers_;
    device_buffer<commit_record> records_;
    pinned_buffer<selection_header> headers_host_;
    pinned_buffer<commit_record> records_host_;
};

/// The device decoder with the policies of a dlm::decoder type:
///   dlm::cuda::device_decoder_t<dlm::presets::llada<dlm::cuda::transformer>> dec(model);
template <class Decoder>
struct device_decoder_for;
template <class Model, class Mask, class Cache, class Schedule, class Sampler>
struct device_decoder_for<decoder<Model, Mask, Cache, Schedule, Sampler>> {
    using type = device_decoder<Model, Mask, Cache, Schedule, Sampler>;
};
template <class Decoder>
using device_decoder_t = typename device_decoder_for<Decoder>::type;

}  // namespace dlm::cuda
