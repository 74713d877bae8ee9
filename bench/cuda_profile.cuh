// bench/cuda_profile.cuh — dlm-bench-cuda --profile: where one forward's time goes, phase by phase
// (dlm::cuda::forward_profiler: CUDA events between the phases of enqueue), for an AR step (one row over
// the cached prefix) and a CDLM step (a block + 1 rows over the cached prefix) at batch 1, with the
// model's GEMM path (DLM_CUDA_GEMM or --gemm). Each phase in ms per forward (mean of profile_forwards
// forwards, after warm-up) and as a share of the phases' sum; the same forward timed without the
// profiler, for the events' own cost.
#pragma once

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "cuda_bench_util.cuh"

namespace dlm_bench_cuda {

inline constexpr int profile_forwards = 5;

/// Sets the model's profiler for its lifetime.
template <benchmarked_model Model>
class profiling {
public:
    profiling(Model& m, dlm::cuda::forward_profiler& p) : m_(m) { m_.set_profiler(&p); }
    profiling(const profiling&) = delete;
    profiling& operator=(const profiling&) = delete;
    ~profiling() { m_.set_profiler(nullptr); }

private:
    Model& m_;
};

/// Bytes of the weights the linear layers read in one forward (every layer's four products and the head).
template <benchmarked_model Model>
double linear_weight_bytes(const io::model_config& c) {
    const double h = c.hidden_size, q = static_cast<double>(c.num_heads) * c.head_dim, kv = static_cast<double>(c.num_kv_heads) * c.head_dim,
                 f = c.intermediate_size;
    return sizeof(typename Model::element_type) * (c.num_layers * (h * (q + 2 * kv) + q * h + 3 * h * f) + h * static_cast<double>(c.vocab_size));
}

template <benchmarked_model Model, class Mask, class Plan>
nlohmann::json profile_step(Model& m, const char* kind, const Mask& mask, const canvas_layout& l, Plan plan_of, const ceilings& ceil) {
    const forward_step<Model> step(m, mask, 1, l, plan_of, true);
    auto forward = [&] { (void)m.forward_device(step.span(), mask); };
    const double plain_ms = time_on(m.stream(), 2, profile_forwards, forward) * 1e3;
    dlm::cuda::forward_profiler prof;
    {
        const profiling<Model> on(m, prof);
        for (int i = 0; i < profile_forwards; ++i) {
            forward();
            m.synchronize();
            prof.collect();
        }
    }
    const auto ms = prof.phase_ms();
    double sum = 0;
    for (const double v : ms) sum += v;
    std::printf("profile: %s step, %d rows, GEMM path %s, attention %s: %.3f ms per forward without the profiler, %.3f ms of phases with it\n",
                kind, step.plan.window_size(), std::string(dlm::cuda::name(m.gemm_path())).c_str(),
                std::string(dlm::cuda::name(m.attention_path())).c_str(), plain_ms, sum);
    nlohmann::json phases = nlohmann::json::array();
    for (std::size_t i = 0; i < ms.size(); ++i) {
        std::printf("  %-16s %9.3f ms %6.1f%%\n", std::string(dlm::cuda::forward_phase_names[i]).c_str(), ms[i], sum > 0 ? 100.0 * ms[i] / sum : 0.0);
        phases.push_back({{"phase", std::string(dlm::cuda::forward_phase_names[i])}, {"ms", ms[i]}, {"fraction", sum > 0 ? ms[i] / sum : 0.0}});
    }
    using dlm::cuda::forward_phase;
    const double gemm_ms = ms[static_cast<std::size_t>(forward_phase::qkv_gemm)] + ms[static_cast<std::size_t>(forward_phase::o_gemm)] +
                           ms[static_cast<std::size_t>(forward_phase::gate_up_gemm)] + ms[static_cast<std::size_t>(forward_phase::down_gemm)] +
                           ms[static_cast<std::size_t>(forward_phase::head_gemm)];
    const double gemm_gbs = gemm_ms > 0 ? linear_weight_bytes<Model>(m.config()) / (gemm_ms * 1e-3) / 1e9 : 0.0;
    std::printf("  GEMMs together: %.3f ms, %.0f GB/s of their weight bytes (%.0f%% of the copy bandwidth)\n", gemm_ms, gemm_gbs,
                100.0 * gemm_gbs / ceil.copy_gbs);
    return {{"kind", kind},
            {"rows", step.plan.window_size()},
            {"gemm_path", std::string(dlm::cuda::name(m.gemm_path()))},
            {"attention_path", std::string(dlm::cuda::name(m.attention_path()))},
            {"ms_without_profiler", plain_ms},
            {"ms_of_phases", sum},
            {"gemm_ms", gemm_ms},
            {"gemm_weight_gbs", gemm_gbs},
            {"phases", phases}};
}

/// The AR and CDLM steps of the forward table (mid-generation, batch 1); with `only` ("ar" or "cdlm") that
/// step alone (dlm-bench-cuda --profile-only: an Nsight Compute capture of the CDLM step's kernels).
template <benchmarked_model Model>
nlohmann::json profile_steps(Model& m, index_t prompt, index_t gen, index_t block, const ceilings& ceil, const std::string& only = {}) {
    nlohmann::json out = nlohmann::json::array();
    const canvas_layout la{prompt, gen, 1, true};
    if (only != "cdlm")
        out.push_back(
            profile_step(m, "ar", causal_mask{}, la, [&](const canvas_layout& l) { return prefix_cache{}.plan(causal_mask{}, l, {gen / 2, 0}); }, ceil));
    if (only == "ar") return out;
    const canvas_layout lc{prompt, gen, block, true};
    const block_causal_mask bc{block};
    const index_t mid_block = gen / block / 2;
    out.push_back(profile_step(m, "cdlm", bc, lc, [&](const canvas_layout& l) { return prefix_cache{}.plan(bc, l, {mid_block, 1}); }, ceil));
    return out;
}

}  // namespace dlm_bench_cuda
