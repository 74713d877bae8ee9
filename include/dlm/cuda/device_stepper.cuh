// dlm/cuda/device_stepper.cuh — the engine's step on the GPU (engine/step.hpp says what a stepper is).
//
// After each forward, whose logits stay on the device, one kernel mixes classifier-free guidance's
// two halves, one fused kernel samples every masked slot of every active block (sampling.cuh, each
// sequence's own sampler options and ban list) and one kernel per sequence selects the slots to commit
// with that sequence's own schedule (selection.cuh). Per step the host uploads the slot list, the
// tasks and a few token ids, and downloads only the chosen slots' ids, tokens and probabilities; the
// engine applies them to the canvas it keeps on the host. A step whose shape and buffers repeat is
// replayed from a CUDA graph (graphs.cuh).
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../engine/step.hpp"
#include "../model/concept.hpp"
#include "graphs.cuh"
#include "runtime.cuh"
#include "sampling.cuh"
#include "selection.cuh"

namespace dlm::cuda {

/// Guidance for one sequence: its conditional logits rows [first_row, first_row + rows) become
/// un + factor · (cond − un), the unconditional rows following them (LLaDA's generate()).
struct guidance_task {
    index_t first_row = 0, rows = 0;
    float factor = 0.f;
};

namespace kernels {

inline constexpr unsigned guidance_threads = 256, guidance_blocks = 64;

/// Grid (guidance_blocks, n): task y's rows, strided. The host's arithmetic, rounded the same way
/// (no fused multiply-add), so guided logits are bit-equal to dlm::decoder's.
template <class = void>
__global__ void __launch_bounds__(guidance_threads)
    mix_guidance(float* __restrict__ logits, const guidance_task* __restrict__ tasks, index_t vocab) {
    const guidance_task t = tasks[blockIdx.y];
    const std::size_t n = static_cast<std::size_t>(t.rows) * static_cast<std::size_t>(vocab);
    float* cond = logits + static_cast<std::size_t>(t.first_row) * static_cast<std::size_t>(vocab);
    const float* un = cond + n;
    for (std::size_t k = blockIdx.x * guidance_threads + threadIdx.x; k < n; k += static_cast<std::size_t>(gridDim.x) * guidance_threads)
        cond[k] = __fadd_rn(un[k], __fmul_rn(t.factor, __fsub_rn(cond[k], un[k])));
}

}  // namespace kernels

/// The step's work on the host side, rebuilt before each forward and packed into one upload.
template <class Schedule>
struct staged_step {
    std::vector<slot_task> slots;
    std::vector<index_t> positions;  // slot i's canvas position
    std::vector<selection_task> tasks;
    std::vector<Schedule> schedules;
    std::vector<token_id> ids;  // per sequence: [mask id, EOS...] (its ban list), then [EOS..., end of turn...] (deferred)
    std::vector<guidance_task> guidance;
    index_t stride = 1;         // slots per sequence in the sampling grid and the commit records: the batch's longest block

    void clear() {
        slots.clear();
        positions.clear();
        tasks.clear();
        schedules.clear();
        ids.clear();
        guidance.clear();
        stride = 1;
    }
};

/// The buffers of the device step, kept across steps (and across engines of one decoder, so graphs
/// captured by one decode replay in the next).
struct step_workspace {
    pinned_buffer<std::byte> staging_host;
    device_buffer<std::byte> staging_device;
    device_buffer<slot_result> results;
    device_buffer<selection_header> headers;
    device_buffer<commit_record> records;
    pinned_buffer<selection_header> headers_host;
    pinned_buffer<commit_record> records_host;
    graph_cache graphs;
};

/// Whether the model splits its forward into a host half and a capturable device half (a step can
/// then be replayed from a CUDA graph).
template <class Model, class Mask>
inline constexpr bool graph_capable =
    requires(Model& m, std::span<const forward_request<typename Model::kv_cache>> rq, const Mask& mask) {
        m.enqueue(m.stage(rq, mask), mask, false);
        { m.graph_key(m.stage(rq, mask)) } -> std::same_as<std::vector<std::uintptr_t>>;
        { m.logits() } -> std::same_as<const float*>;
    };

/// `Decoder` names the policies and gives model(), mask() and workspace() (a step_workspace&).
template <class Decoder>
class device_stepper {
public:
    /// The logits rows stay in device memory: the engine's host memory check leaves them out (its device
    /// check weighs them: the model's device_logits_bytes).
    static constexpr bool host_logits = false;

    using model_type = typename Decoder::model_type;
    using kv_type = typename model_type::kv_cache;
    using schedule_type = typename Decoder::schedule_type;
    using sampler_type = typename Decoder::sampler_type;
    using input = dlm::detail::step_input<kv_type, schedule_type, sampler_type>;

    explicit device_stepper(Decoder& d) : dec_(&d), ws_(&d.workspace()) {}

    /// Refuses (dlm::invalid_parameter naming the option) what the device kernels do not implement:
    /// blocks over max_selection_slots slots, top-k and top-p filtering.
    void admit(const dlm::detail::sequence_state<kv_type>& s, const schedule_type&, const sampler_type& sampler) const {
        if (s.layout.block_length > max_selection_slots)
            throw invalid_parameter("block_length", "the device decoder selects among at most " + std::to_string(max_selection_slots) +
                                                        " slots per block, got " + std::to_string(s.layout.block_length) +
                                                        "; use smaller blocks or dlm::decoder");
        (void)device_sampler<sampler_type>::params(sampler);
    }

    /// The batched forward with the sampling and selection of every sequence, results on the host.
    void forward(std::span<const forward_request<kv_type>> requests, std::span<const input> batch, std::size_t) {
        st_.clear();
        for (const input& in : batch) st_.stride = std::max(st_.stride, in.state->layout.block_length);
        for (const input& in : batch) stage(in);
        run(requests);
    }

    /// Sequence i's commits, from its selection header and records. Throws dlm::numeric_error (a row no
    /// token can be drawn from) or dlm::contract_error (a device schedule choosing outside its candidates).
    void choose(std::size_t i, const input& in, std::vector<slot_commit>& out) const {
        const selection_task& t = st_.tasks[i];
        const selection_header h = ws_->headers_host.data()[i];
        if (h.bad >= 0) {
            const index_t p = st_.positions[static_cast<std::size_t>(t.first + h.bad)];
            throw numeric_error(in.index, in.ctx.forward, in.state->layout.row_for_slot(p),
                                "the logits row holds NaN or +Inf (or every token is banned), so no token can be drawn");
        }
        const commit_record* rec = ws_->records_host.data() + i * static_cast<std::size_t>(st_.stride);
        for (index_t j = 0; j < h.count; ++j) {
            if (rec[j].index < 0 || rec[j].index >= t.count)
                throw contract_error("dlm::cuda::device_decoder: the device schedule chose candidate " + std::to_string(rec[j].index) +
                                     " but only " + std::to_string(t.count) + " exist");
            out.push_back({st_.positions[static_cast<std::size_t>(t.first + rec[j].index)], rec[j].token, rec[j].probability});
        }
    }

private:
    /// Stages one sequence: its ids, a sampling task per masked slot of its block with a logits row, its
    /// selection task and schedule, its guidance.
    void stage(const input& in) {
        const auto& s = *in.state;
        const token_id mask_id = s.result.settings.mask_id.value;
        const std::span<const token_id> eos = in.ctx.eos_ids, end_of_turn = in.ctx.end_of_turn_ids;
        const auto ban_first = static_cast<index_t>(st_.ids.size());
        st_.ids.push_back(mask_id);
        st_.ids.insert(st_.ids.end(), eos.begin(), eos.end());
        selection_task t;
        t.deferred_first = static_cast<index_t>(st_.ids.size());
        st_.ids.insert(st_.ids.end(), eos.begin(), eos.end());
        st_.ids.insert(st_.ids.end(), end_of_turn.begin(), end_of_turn.end());
        t.n_deferred = static_cast<index_t>(st_.ids.size()) - t.deferred_first;
        const index_t banned = schedule_suppresses_eos(*in.schedule, in.ctx) ? 1 + static_cast<index_t>(eos.size()) : 1;
        const sampler_params sp = device_sampler<sampler_type>::params(*in.sampler);
        t.seed = in.ctx.seed;
        t.forward = in.ctx.forward;
        t.first = static_cast<index_t>(st_.slots.size());
        dlm::detail::for_each_masked_slot(s, mask_id, [&](index_t p) {
            const index_t row = s.layout.row_for_slot(p);
            if (row < in.plan.logits_begin || row >= in.plan.logits_end) return;
            st_.slots.push_back({t.seed, static_cast<index_t>(in.first_row) + row - in.plan.logits_begin, p, t.forward, banned, ban_first, sp});
            st_.positions.push_back(p);
        });
        t.count = static_cast<index_t>(st_.slots.size()) - t.first;
        device_schedule<schedule_type>::prepare(*in.schedule, in.ctx, t);
        st_.tasks.push_back(t);
        st_.schedules.push_back(*in.schedule);
        if (in.cfg_factor > 0.f) st_.guidance.push_back({static_cast<index_t>(in.first_row), in.plan.logits_rows(), in.cfg_factor});
    }

    /// Byte offsets of the parts of the staged upload: [slot count | slots (n · stride) | tasks | schedules | ids | guidance].
    struct layout {
        std::size_t slots = 16, tasks = 0, schedules = 0, ids = 0, guidance = 0, bytes = 0;
    };
    [[nodiscard]] layout offsets() const noexcept {
        const auto up = [](std::size_t b) { return (b + 15) / 16 * 16; };
        const std::size_t n = st_.tasks.size();
        layout l;
        l.tasks = up(l.slots + n * static_cast<std::size_t>(st_.stride) * sizeof(slot_task));
        l.schedules = up(l.tasks + n * sizeof(selection_task));
        l.ids = up(l.schedules + n * sizeof(schedule_type));
        l.guidance = up(l.ids + st_.ids.size() * sizeof(token_id));
        l.bytes = l.guidance + st_.guidance.size() * sizeof(guidance_task);
        return l;
    }

    template <class T>
    static void pack(std::byte* base, std::size_t at, const std::vector<T>& v) {
        std::copy_n(reinterpret_cast<const std::byte*>(v.data()), v.size() * sizeof(T), base + at);
    }

    /// Packs the staged step into pinned memory (room for a full block per sequence, so the shape
    /// depends on the batch only) and sizes the device buffers.
    void pack_step(const layout& l) {
        step_workspace& w = *ws_;
        const std::size_t n = st_.tasks.size(), capacity = n * static_cast<std::size_t>(st_.stride);
        w.staging_host.reserve(l.bytes);
        w.staging_device.reserve(l.bytes, "decoding step (slots, tasks, schedules, ids)");
        *reinterpret_cast<index_t*>(w.staging_host.data()) = static_cast<index_t>(st_.slots.size());
        pack(w.staging_host.data(), l.slots, st_.slots);
        pack(w.staging_host.data(), l.tasks, st_.tasks);
        pack(w.staging_host.data(), l.schedules, st_.schedules);
        pack(w.staging_host.data(), l.ids, st_.ids);
        pack(w.staging_host.data(), l.guidance, st_.guidance);
        w.results.reserve(std::max<std::size_t>(capacity, 1), "slot results");
        w.headers.reserve(n, "selection headers");
        w.records.reserve(capacity, "commit records");
        w.headers_host.reserve(n);
        w.records_host.reserve(capacity);
    }

    /// The device half after the forward: uploads the staged step, mixes guidance, samples every slot,
    /// selects per sequence and downloads the headers and commit records (enqueued, not waited for).
    void enqueue_step(float* logits, const layout& l, cudaStream_t stream) {
        step_workspace& w = *ws_;
        const std::size_t n = st_.tasks.size(), capacity = n * static_cast<std::size_t>(st_.stride);
        const index_t vocab = dec_->model().vocab_size();
        std::byte* d = w.staging_device.data();
        upload(d, w.staging_host.data(), l.bytes, stream, "decoding step");
        const auto* ids = reinterpret_cast<const token_id*>(d + l.ids);
        if (!st_.guidance.empty()) {
            kernels::mix_guidance<><<<dim3(kernels::guidance_blocks, static_cast<unsigned>(st_.guidance.size())), kernels::guidance_threads, 0,
                                      stream>>>(logits, reinterpret_cast<const guidance_task*>(d + l.guidance), vocab);
            check_launch("dlm::cuda mix_guidance", stream);
        }
        const auto* slots = reinterpret_cast<const slot_task*>(d + l.slots);
        sample_slots(logits, vocab, slots, w.results.data(), capacity, ids, stream, reinterpret_cast<const index_t*>(d));
        select_slots(reinterpret_cast<const schedule_type*>(d + l.schedules), reinterpret_cast<const selection_task*>(d + l.tasks), n, slots,
                     w.results.data(), ids, vocab, w.headers.data(), w.records.data(), st_.stride, stream);
        download(w.headers_host.data(), w.headers.data(), n, stream, "selection headers");
        download(w.records_host.data(), w.records.data(), capacity, stream, "commit records");
    }

    /// One step on the device, replayed from a CUDA graph when its shape and buffers were seen before.
    void run(std::span<const forward_request<kv_type>> requests) {
        model_type& m = dec_->model();
        const cudaStream_t stream = m.stream();
        const layout l = offsets();
        if constexpr (graph_capable<model_type, typename Decoder::mask_type>) {
            const auto f = m.stage(requests, dec_->mask());
            pack_step(l);
            const auto body = [&](bool track_upload) {
                m.enqueue(f, dec_->mask(), track_upload);
                enqueue_step(const_cast<float*>(m.logits()), l, stream);
            };
            if (ws_->graphs.launch(graph_key(m.graph_key(f), l), [&] { body(false); }, stream)) {
                synchronize(stream, "decoding step (CUDA graph)");
                return;
            }
            body(true);
        } else {
            // The logits are this step's scratch: guidance mixes its rows in place, as the host stepper does.
            float* logits = const_cast<float*>(m.forward_device(requests, dec_->mask()));
            pack_step(l);
            enqueue_step(logits, l, stream);
        }
        synchronize(stream, "decoding step");
    }

    /// The model's key plus what the step's captured work depends on: its buffers and its shape.
    [[nodiscard]] std::vector<std::uintptr_t> graph_key(std::vector<std::uintptr_t> key, const layout& l) const {
        const step_workspace& w = *ws_;
        for (const void* p : {static_cast<const void*>(w.staging_host.data()), static_cast<const void*>(w.staging_device.data()),
                              static_cast<const void*>(w.results.data()), static_cast<const void*>(w.headers.data()),
                              static_cast<const void*>(w.records.data()), static_cast<const void*>(w.headers_host.data()),
                              static_cast<const void*>(w.records_host.data())})
            key.push_back(reinterpret_cast<std::uintptr_t>(p));
        key.insert(key.end(), {st_.tasks.size(), static_cast<std::uintptr_t>(st_.stride), static_cast<std::uintptr_t>(dec_->model().vocab_size()),
                               l.ids, l.guidance, l.bytes, st_.guidance.size()});
        return key;
    }

    Decoder* dec_;
    step_workspace* ws_;
    staged_step<schedule_type> st_;
};

}  // namespace dlm::cuda
