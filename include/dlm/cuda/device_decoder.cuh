// dlm/cuda/device_decoder.cuh — decoding without a per-step round trip of logits.
//
//   dlm::cuda::transformer model = dlm::cuda::transformer::load(dir);
//   dlm::cuda::device_decoder_t<dlm::presets::cdlm<dlm::cuda::transformer>> dec(model);
//   auto out = dec.generate(prompts, {256, seed});      // same result type, same step callback
//   dlm::engine eng(dec);                               // or step-wise: add, step, cancel, committed_prefix
//
// It is dlm::engine (engine.hpp) with the device stepper (device_stepper.cuh): the same loop, the same
// per-sequence bookkeeping (plans, blocks, early stops, cancellation, per-sequence policies,
// classifier-free guidance, one failure ending one sequence), with the per-slot work on the GPU.
//
// Which combinations run: every mask, and every cache that plans from the cursor (a cache that plans
// from the canvas, sub_block_cache, is refused); the samplers of device_sampler (greedy, categorical
// without top-k / top-p, LLaDA's) and the schedules of device_schedule (threshold, CDLM, factor,
// LLaDA, Dream, CD4LM, next slot). Any other policy is refused at compile time, naming the missing
// specialization; the presets whose schedule has none (sdar, fast_dllm_v2, fast_dllm_v2_block_cache,
// llada2) run on a GPU model with dlm::decoder, whose host stepper brings the logits to the host.
// Blocks may have at most max_selection_slots slots.
//
// Results equal dlm::decoder's on the same model: tokens are chosen with the same arithmetic and the
// same random numbers (each sequence's own seed), the mask id is banned from every draw, CD4LM defers
// EOS and end-of-turn ids; a confidence can differ from the host's in the last bit (sums in another
// order), which matters only for a slot exactly at a threshold.
#pragma once

#include <type_traits>

#include "../cache/caches.hpp"
#include "../cache/compatibility.hpp"
#include "../engine.hpp"
#include "../mask/concept.hpp"
#include "../model/concept.hpp"
#include "device_stepper.cuh"

namespace dlm {
template <class Model, class Mask, class Cache, class Schedule, class Sampler>
class decoder;  // decoder.hpp; device_decoder_t maps its policies, nothing here needs the host decoder
}  // namespace dlm

namespace dlm::cuda {

/// A model whose forward can leave the logits on the device (dlm::cuda::basic_transformer).
template <class M, class Mask>
concept device_model = language_model<M> && requires(M& m, std::span<const forward_request<typename M::kv_cache>> rq, const Mask& mask) {
    { m.forward_device(rq, mask) } -> std::same_as<const float*>;
    { m.stream() } -> std::same_as<cudaStream_t>;
};

template <class Model, class Mask, class Cache, class Schedule, class Sampler>
class device_decoder : public dlm::detail::generate_api<device_decoder<Model, Mask, Cache, Schedule, Sampler>> {
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
    static_assert(!uniform_state_schedule<Schedule>,
                  "dlm::cuda::device_decoder: its fused kernels sample and select masked slots only; a uniform-state schedule "
                  "(entropy_bound_schedule, DiffusionGemma) runs on the host decoder (dlm::decoder) for now.");
    DLM_CHECK_ALL_OPTIONAL_HOOKS("dlm::cuda::device_decoder", Model, Mask, Cache, Schedule, Sampler);
    static_assert(device_schedule<Schedule>::supported,
                  "dlm::cuda::device_decoder: this schedule has no device implementation: the hook dlm::cuda::device_schedule<Schedule> "
                  "(prepare on the host, select on the device) is missing. Specialize it, or decode with dlm::decoder, which selects on "
                  "the host.");
    static_assert(std::is_trivially_copyable_v<Schedule>,
                  "dlm::cuda::device_decoder: each sequence's schedule is copied to the GPU byte for byte, so it must be trivially copyable.");
    static_assert(device_sampler<Sampler>::supported,
                  "dlm::cuda::device_decoder: this sampler has no device implementation: the hook dlm::cuda::device_sampler<Sampler> is "
                  "missing (greedy_sampler, categorical_sampler and llada_sampler have one); decode with dlm::decoder, which samples on "
                  "the host.");

public:
    using model_type = Model;
    using mask_type = Mask;
    using cache_type = Cache;
    using schedule_type = Schedule;
    using sampler_type = Sampler;
    using stepper_type = device_stepper<device_decoder>;  // what dlm::engine runs each step with

    /// Throws invalid_parameter for sampler options the device kernel does not implement (top-k, top-p).
    explicit device_decoder(Model& model, Mask mask = {}, Cache cache = {}, Schedule schedule = {}, Sampler sampler = {})
        : model_(&model), mask_(mask), cache_(cache), schedule_(schedule), sampler_(sampler) {
        sampler_validate(sampler_);
        (void)device_sampler<Sampler>::params(sampler_);
    }

    [[nodiscard]] const Mask& mask() const noexcept { return mask_; }
    [[nodiscard]] const Cache& cache() const noexcept { return cache_; }
    [[nodiscard]] const Schedule& schedule() const noexcept { return schedule_; }
    [[nodiscard]] const Sampler& sampler() const noexcept { return sampler_; }
    [[nodiscard]] Model& model() const noexcept { return *model_; }
    /// The device step's buffers and CUDA graphs, shared by every engine of this decoder (one at a time).
    [[nodiscard]] step_workspace& workspace() noexcept { return ws_; }

    /// CUDA graphs (on by default; off in the debug mode DLM_CUDA_SYNC=1 and with DLM_CUDA_GRAPHS=0): a
    /// decoding step (forward, guidance, sampling, selection, the copies) whose shape — sequences, rows,
    /// logits rows, block length, ids — and buffers repeat is captured the second time it is seen and
    /// replayed from then on, one graph per shape (at most max_graphs). A capture the driver refuses
    /// turns graphs off for this decoder (graph_status() says why); decoding goes on without them.
    void use_graphs(bool on) { ws_.graphs.enable(on && graph_capable); }
    [[nodiscard]] bool graphs_enabled() const noexcept { return graph_capable && ws_.graphs.enabled(); }
    /// Steps run by replaying a captured graph, since construction.
    [[nodiscard]] std::size_t graph_replays() const noexcept { return ws_.graphs.replays(); }
    /// "" while graphs work (or are off by choice); else why a capture failed.
    [[nodiscard]] const std::string& graph_status() const noexcept { return ws_.graphs.status(); }
    static constexpr std::size_t max_graphs = graph_cache::max_graphs;

private:
    static constexpr bool graph_capable = cuda::graph_capable<Model, Mask>;

    Model* model_;
    Mask mask_;
    Cache cache_;
    Schedule schedule_;
    Sampler sampler_;
    step_workspace ws_;
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

/// Whether a dlm::decoder type's policies all have a device step (so device_decoder_t of it compiles):
/// what a program that picks presets at run time (dlm-server --device cuda) asks before mapping one.
template <class Decoder>
inline constexpr bool has_device_step = false;
template <class Model, class Mask, class Cache, class Schedule, class Sampler>
inline constexpr bool has_device_step<decoder<Model, Mask, Cache, Schedule, Sampler>> =
    device_schedule<Schedule>::supported && device_sampler<Sampler>::supported && std::is_trivially_copyable_v<Schedule> &&
    requires(const Cache& c, const Mask& m, const canvas_layout& l, const block_cursor& cur) { c.plan(m, l, cur); };

}  // namespace dlm::cuda
