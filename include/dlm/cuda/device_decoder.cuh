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
// same random numbers (each sequence's own seed: sequence_seed(seed, i) unless options.seeds says), the
// mask id is banned from every draw, CD4LM defers EOS and end-of-turn ids, and a sequence whose step
// fails (NaN/Inf logits, a broken schedule) ends alone with status failed; a confidence can differ from
// the host's in the last bit (sums in another order), which matters only for a slot exactly at a
// threshold.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "../cache/caches.hpp"
#include "../cache/compatibility.hpp"
#include "../core/result.hpp"
#include "../engine/prepare.hpp"
#include "../engine/sequence_state.hpp"
#include "../mask/concept.hpp"
#include "../model/concept.hpp"
#include "runtime.cuh"
#include "sampling.cuh"
#include "selection.cuh"

namespace dlm {
template <class Model, class Mask, class Cache, class Schedule, class Sampler>
class decoder;  // decoder.hpp; device_decoder_t maps its policies, nothing here needs the host loop
}  // namespace dlm

namespace dlm::cuda {

/// Whether a value of DLM_CUDA_GRAPHS turns the device decoder's CUDA graphs off ("0").
[[nodiscard]] inline bool graphs_refused(const char* value) noexcept { return value && std::string_view(value) == "0"; }

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
    static_assert(requires(const Cache& c, const Mask& m, const canvas_layout& l, const block_cursor& cur) { c.plan(m, l, cur); },
                  "dlm::cuda::device_decoder samples every masked slot of the block each forward: a cache that plans from the canvas "
                  "(sub_block_cache) runs on dlm::decoder.");
    static_assert(dlm::detail::cache_fits_mask<Cache, Mask>, DLM_EXACT_CACHE_NEEDS_FINAL_KV("dlm::cuda::device_decoder"));
    static_assert(!revising_schedule<Schedule>,
                  "dlm::cuda::device_decoder: its fused kernels sample and select masked slots only; a revising schedule (one with "
                  "revise and block_done, e.g. llada21_schedule) runs on the host decoder (dlm::decoder) for now.");
    DLM_CHECK_ALL_OPTIONAL_HOOKS("dlm::cuda::device_decoder", Model, Mask, Cache, Schedule, Sampler);
    static_assert(device_schedule<Schedule>::supported,
                  "dlm::cuda::device_decoder: this schedule has no device implementation. Specialize dlm::cuda::device_schedule for it, "
                  "or decode with dlm::decoder, which selects on the host.");
    static_assert(device_sampler<Sampler>::supported,
                  "dlm::cuda::device_decoder: this sampler has no device implementation (greedy_sampler, categorical_sampler and "
                  "llada_sampler have one); decode with dlm::decoder, which samples on the host.");

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
        const decoding_settings& settings = seqs.front().result.settings;  // the batch's (seeds aside)
        mask_id_ = settings.mask_id.value;
        stride_ = seqs.front().layout.block_length;
        if (stride_ > max_selection_slots)
            throw invalid_parameter("block_length", "the device decoder selects among at most " + std::to_string(max_selection_slots) +
                                                        " slots per block, got " + std::to_string(stride_) + "; use smaller blocks or dlm::decoder");
        const std::span<const token_id> eos = settings.eos_ids.value, end_of_turn = settings.end_of_turn_ids.value;
        const cudaStream_t stream = model_->stream();
        upload_token_ids(eos, end_of_turn, stream);
        const token_id* deferred = ids_.data() + 1 + eos.size();
        const int n_deferred = static_cast<int>(eos.size() + end_of_turn.size());
        const index_t vocab = model_->vocab_size();
        decode_result out;
        staged_step st;
        const auto clock_start = std::chrono::steady_clock::now();
        bool cancelled = false;

        while (!cancelled) {
            st.clear();
            for (std::size_t i = 0; i < seqs.size(); ++i)
                if (!seqs[i].done) stage(seqs[i], static_cast<index_t>(i), eos, end_of_turn, st);
            if (st.active.empty()) break;

            const auto t0 = std::chrono::steady_clock::now();
            run_step(std::span<const forward_request<kv_type>>(st.requests), vocab, st.slots, st.tasks, deferred, n_deferred, stream);
            out.stats.model_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            ++out.stats.forwards;
            cancelled = commit_step(seqs, st, on_step);
        }
        const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - clock_start).count();
        out.stats.overhead_seconds = std::max(0.0, total - out.stats.model_seconds);
        out.sequences.reserve(seqs.size());
        for (sequence& s : seqs) {
            if (cancelled && !s.done) s.result.status = sequence_status::cancelled;
            dlm::detail::finish(s.result, s.result.settings.eos_ids.value);
            out.sequences.push_back(std::move(s.result));
        }
        return out;
    }

    /// A single prompt. Its failure, having no other sequence to spare, is thrown (typed), as by dlm::decoder.
    sequence_result generate(const std::vector<token_id>& prompt, const generation_options& options, const step_callback& on_step = {}) {
        sequence_result r = std::move(generate(std::span<const std::vector<token_id>>(&prompt, 1), options, on_step).sequences.front());
        r.rethrow_if_failed();
        return r;
    }

    /// As dlm::decoder: a schedule that leaves a block unfinished after this many forwards per slot is broken.
    static constexpr index_t max_steps_per_slot = dlm::detail::max_steps_per_slot;

    /// CUDA graphs (on by default; off in the debug mode DLM_CUDA_SYNC=1 and with DLM_CUDA_GRAPHS=0): a
    /// decoding step (forward, sampling, selection, the copies) whose shape — sequences, rows, logits
    /// rows, block length — and buffers repeat is captured the second time it is seen and replayed from
    /// then on, one graph per shape bucket (at most max_graphs). A capture the driver refuses turns graphs
    /// off for this decoder (graph_status() says why); decoding goes on without them.
    void use_graphs(bool on) {
        graphs_on_ = on && graph_capable;
        if (!graphs_on_) graphs_.clear();
    }
    [[nodiscard]] bool graphs_enabled() const noexcept { return graphs_on_; }
    /// Steps run by replaying a captured graph, since construction.
    [[nodiscard]] std::size_t graph_replays() const noexcept { return graph_replays_; }
    /// "" while graphs work (or are off by choice); else why a capture failed.
    [[nodiscard]] const std::string& graph_status() const noexcept { return graph_failure_; }
    static constexpr std::size_t max_graphs = 16;

private:
    using kv_type = typename Model::kv_cache;

    using sequence = dlm::detail::sequence_state<kv_type>;
    static constexpr const char* who = "dlm::cuda::device_decoder";

    /// The host side of one step, rebuilt before each forward: the running sequences (`active`, in
    /// batch order), their requests, their masked slots (one sampling task each, `positions` their
    /// canvas positions), one selection task and step context per sequence.
    struct staged_step {
        std::vector<forward_request<kv_type>> requests;
        std::vector<index_t> active, positions, committed;
        std::vector<slot_task> slots;
        std::vector<selection_task> tasks;
        std::vector<step_context> contexts;
        index_t logits_row0 = 0;  // the first logits row of the next staged sequence
        void clear() {
            requests.clear();
            active.clear();
            positions.clear();
            slots.clear();
            tasks.clear();
            contexts.clear();
            logits_row0 = 0;
        }
    };

    /// Uploads the ban list [mask id, EOS...] (a slot bans its first 1 or 1 + n_eos entries), then the
    /// ids CD4LM's guard defers [EOS..., end of turn...].
    void upload_token_ids(std::span<const token_id> eos, std::span<const token_id> end_of_turn, cudaStream_t stream) {
        std::vector<token_id> ids{mask_id_};
        ids.insert(ids.end(), eos.begin(), eos.end());
        ids.insert(ids.end(), eos.begin(), eos.end());
        ids.insert(ids.end(), end_of_turn.begin(), end_of_turn.end());
        ids_.reserve(ids.size(), "banned and deferred token ids");
        upload(ids_.data(), ids.data(), ids.size(), stream, "banned and deferred token ids");
    }

    /// Stages sequence `i`'s step into `st`: its plan (a broken plan fails the sequence alone, as with
    /// dlm::decoder), its request, a sampling task per masked slot of its block, its selection task.
    void stage(sequence& s, index_t i, std::span<const token_id> eos, std::span<const token_id> end_of_turn, staged_step& st) {
        forward_plan plan;
        try {
            plan = cache_.plan(mask_, s.layout, s.cursor);
            dlm::detail::check_plan(plan, s.layout, who);
        } catch (const error& x) {
            dlm::detail::fail(s, x);
            return;
        }
        st.requests.push_back({s.canvas, s.layout, plan, s.kv ? &*s.kv : nullptr});
        st.active.push_back(i);
        const step_context ctx{s.layout, s.cursor, s.masked_at_block_start, s.result.stats.committed, s.result.stats.forwards,
                               s.result.settings.seed.value, eos, end_of_turn};
        const index_t banned = schedule_suppresses_eos(schedule_, ctx) ? 1 + static_cast<index_t>(eos.size()) : 1;
        selection_task t;
        t.seed = ctx.seed;
        t.first = static_cast<index_t>(st.slots.size());
        t.forward = ctx.forward;
        for (index_t p = s.layout.block_begin(s.cursor.block); p < s.layout.block_end(s.cursor.block); ++p) {
            if (s.canvas[static_cast<std::size_t>(p)] != mask_id_) continue;
            st.slots.push_back({ctx.seed, st.logits_row0 + s.layout.row_for_slot(p) - plan.logits_begin, p, ctx.forward, banned});
            st.positions.push_back(p);
        }
        t.count = static_cast<index_t>(st.slots.size()) - t.first;
        device_schedule<Schedule>::prepare(schedule_, ctx, t);
        st.tasks.push_back(t);
        st.contexts.push_back(ctx);
        st.logits_row0 += plan.logits_rows();
    }

    /// After the device selection: commits each staged sequence's chosen slots (a failure ends its own
    /// sequence only, as with dlm::decoder) and calls `on_step`. True when the callback cancelled.
    bool commit_step(std::vector<sequence>& seqs, staged_step& st, const step_callback& on_step) {
        for (std::size_t r = 0; r < st.active.size(); ++r) {
            sequence& s = seqs[static_cast<std::size_t>(st.active[r])];
            st.committed.clear();
            const block_cursor stepped = s.cursor;
            try {
                commit(s, st.active[r], st.contexts[r], st.tasks[r], st.requests[r].plan, headers_host_.data()[r],
                       records_host_.data() + r * static_cast<std::size_t>(stride_), st.positions, st.committed);
            } catch (const error& x) {
                dlm::detail::fail(s, x);
                continue;
            }
            if (on_step) {
                const step_event ev{st.active[r], st.contexts[r].forward, stepped, s.layout, s.canvas, st.committed, &s.result};
                if (on_step(ev) == step_action::cancel) return true;
            }
        }
        return false;
    }

    /// One sequence's step after the device selection: commits the chosen slots (`rec`, `h.count` of
    /// them) into its canvas and result, then advances it. Throws dlm::numeric_error (a non-finite
    /// logits row) or dlm::contract_error (a broken schedule) for this sequence alone.
    void commit(sequence& s, index_t index, const step_context& ctx, const selection_task& t, const forward_plan& plan, const selection_header& h,
                const commit_record* rec, const std::vector<index_t>& positions, std::vector<index_t>& committed) const {
        if (h.bad >= 0) {
            const index_t p = positions[static_cast<std::size_t>(t.first + h.bad)];
            throw numeric_error(index, ctx.forward, s.layout.row_for_slot(p),
                                "the logits row holds NaN or +Inf (or every token is banned), so no token can be drawn");
        }
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
            committed.push_back(p);
        }
        s.result.stats.committed += h.count;
        s.result.stats.forwards += 1;
        s.result.stats.rows_computed += plan.window_size();
        s.cursor.step_in_block += 1;
        dlm::detail::advance(s, schedule_, ctx, static_cast<std::size_t>(t.count - h.count), mask_id_, who);
    }

    /// Whether the model splits its forward into a host half and a capturable device half.
    static constexpr bool graph_capable = requires(Model& m, std::span<const forward_request<kv_type>> rq, const Mask& mask) {
        m.enqueue(m.stage(rq, mask), mask, false);
        { m.graph_key(m.stage(rq, mask)) } -> std::same_as<std::vector<std::uintptr_t>>;
        { m.logits() } -> std::same_as<const float*>;
    };

    /// One step on the device: the forward, then sampling and selection, the headers and commit records
    /// brought to the host; replayed from a CUDA graph when its shape was seen before.
    void run_step(std::span<const forward_request<kv_type>> requests, index_t vocab, const std::vector<slot_task>& slots,
                  const std::vector<selection_task>& tasks, const token_id* deferred, int n_deferred, cudaStream_t stream) {
        if constexpr (graph_capable) {
            const auto f = model_->stage(requests, mask_);
            stage_step(slots, tasks);
            const auto enqueue = [&](bool track_upload) {
                model_->enqueue(f, mask_, track_upload);
                enqueue_step(model_->logits(), vocab, deferred, n_deferred, stream);
            };
            if (graphs_on_) {
                std::vector<std::uintptr_t> key = model_->graph_key(f);
                for (const void* p : {static_cast<const void*>(staging_host_.data()), static_cast<const void*>(staging_device_.data()),
                                      static_cast<const void*>(results_.data()), static_cast<const void*>(headers_.data()),
                                      static_cast<const void*>(records_.data()), static_cast<const void*>(headers_host_.data()),
                                      static_cast<const void*>(records_host_.data()), static_cast<const void*>(ids_.data()),
                                      static_cast<const void*>(deferred)})
                    key.push_back(reinterpret_cast<std::uintptr_t>(p));
                key.insert(key.end(), {n_seq_, static_cast<std::uintptr_t>(stride_), static_cast<std::uintptr_t>(vocab),
                                       static_cast<std::uintptr_t>(n_deferred)});
                if (launch_graph(key, [&] { enqueue(false); }, stream)) {
                    synchronize(stream, "decoding step (CUDA graph)");
                    return;
                }
            }
            enqueue(true);
        } else {
            const float* logits = model_->forward_device(requests, mask_);
            stage_step(slots, tasks);
            enqueue_step(logits, vocab, deferred, n_deferred, stream);
        }
        synchronize(stream, "decoding step");
    }

    /// Byte offset of the selection tasks in the staged step: [slot count | slots (n_seq · stride) | tasks].
    [[nodiscard]] std::size_t tasks_at() const noexcept { return (16 + n_seq_ * static_cast<std::size_t>(stride_) * sizeof(slot_task) + 15) / 16 * 16; }

    /// The host half of a step's sampling and selection: packs the slot count, the slots and the tasks
    /// into pinned memory (room for a full block per sequence, so the shape depends on the batch only)
    /// and sizes the device buffers.
    void stage_step(const std::vector<slot_task>& slots, const std::vector<selection_task>& tasks) {
        n_seq_ = tasks.size();
        const std::size_t capacity = n_seq_ * static_cast<std::size_t>(stride_), bytes = tasks_at() + n_seq_ * sizeof(selection_task);
        staging_host_.reserve(bytes);
        staging_device_.reserve(bytes, "decoding step (slots and tasks)");
        *reinterpret_cast<index_t*>(staging_host_.data()) = static_cast<index_t>(slots.size());
        std::copy_n(reinterpret_cast<const std::byte*>(slots.data()), slots.size() * sizeof(slot_task), staging_host_.data() + 16);
        std::copy_n(reinterpret_cast<const std::byte*>(tasks.data()), n_seq_ * sizeof(selection_task), staging_host_.data() + tasks_at());
        results_.reserve(std::max<std::size_t>(capacity, 1), "slot results");
        headers_.reserve(n_seq_, "selection headers");
        records_.reserve(capacity, "commit records");
        headers_host_.reserve(n_seq_);
        records_host_.reserve(capacity);
    }

    /// The device half: uploads the staged step, samples every slot, selects per sequence and downloads
    /// the headers and commit records (enqueued on `stream`, not waited for).
    void enqueue_step(const float* logits, index_t vocab, const token_id* deferred, int n_deferred, cudaStream_t stream) {
        const std::size_t capacity = n_seq_ * static_cast<std::size_t>(stride_), bytes = tasks_at() + n_seq_ * sizeof(selection_task);
        upload(staging_device_.data(), staging_host_.data(), bytes, stream, "decoding step");
        const auto* d_count = reinterpret_cast<const index_t*>(staging_device_.data());
        const auto* d_slots = reinterpret_cast<const slot_task*>(staging_device_.data() + 16);
        const auto* d_tasks = reinterpret_cast<const selection_task*>(staging_device_.data() + tasks_at());
        sample_slots(logits, vocab, d_slots, results_.data(), capacity, params_, ids_.data(), stream, d_count);
        select_slots(schedule_, d_tasks, n_seq_, d_slots, results_.data(), deferred, n_deferred, vocab, headers_.data(), records_.data(), stride_,
                     stream);
        download(headers_host_.data(), headers_.data(), n_seq_, stream, "selection headers");
        download(records_host_.data(), records_.data(), capacity, stream, "commit records");
    }

    /// Replays the graph captured for `key`, capturing it now if the key was seen once before; false when
    /// the step must run uncaptured (first sight of the key, or graphs turned off by a failed capture).
    template <class Body>
    bool launch_graph(const std::vector<std::uintptr_t>& key, Body&& body, cudaStream_t stream) {
        for (graph_entry& g : graphs_) {
            if (g.key != key) continue;
            if (!g.exec && !(g.exec = capture(body, stream))) return false;
            check(cudaGraphLaunch(g.exec.get(), stream), "cudaGraphLaunch (decoding step)");
            ++graph_replays_;
            return true;
        }
        if (graphs_.size() >= max_graphs) graphs_.erase(graphs_.begin());
        graphs_.push_back({key, nullptr});
        return false;
    }

    struct graph_deleter {
        void operator()(cudaGraphExec_t e) const noexcept { (void)cudaGraphExecDestroy(e); }
    };
    using graph_exec = std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, graph_deleter>;
    struct graph_entry {
        std::vector<std::uintptr_t> key;
        graph_exec exec;
    };

    /// Captures `body` on `stream` into an executable graph; on a CUDA error, turns graphs off (keeping
    /// the reason) and returns null. Nothing captured has run.
    template <class Body>
    graph_exec capture(Body& body, cudaStream_t stream) {
        cudaGraph_t graph = nullptr;
        const auto drop = [&graph] {
            if (graph) (void)cudaGraphDestroy(graph);
            graph = nullptr;
        };
        try {
            check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture (decoding step)");
            try {
                body();
            } catch (...) {
                (void)cudaStreamEndCapture(stream, &graph);
                drop();
                throw;
            }
            check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture (decoding step)");
            cudaGraphExec_t exec = nullptr;
            check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate (decoding step)");
            drop();
            return graph_exec(exec);
        } catch (const cuda_error& e) {
            drop();
            (void)cudaGetLastError();
            graphs_on_ = false;
            graph_failure_ = std::string("CUDA graphs turned off: ") + e.what();
            return nullptr;
        }
    }

    Model* model_;
    Mask mask_;
    Cache cache_;
    Schedule schedule_;
    Sampler sampler_;
    sampler_params params_;
    token_id mask_id_ = 0;
    index_t stride_ = 1;
    device_buffer<token_id> ids_;  // [mask id, EOS...] (banned), then [EOS..., end of turn...] (CD4LM defers)
    std::size_t n_seq_ = 0;        // sequences of the staged step
    bool graphs_on_ = graph_capable && !sync_after_launch() && !graphs_refused(std::getenv("DLM_CUDA_GRAPHS"));
    std::vector<graph_entry> graphs_;
    std::size_t graph_replays_ = 0;
    std::string graph_failure_;
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
