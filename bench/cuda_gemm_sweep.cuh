// bench/cuda_gemm_sweep.cuh — dlm-bench-cuda --gemm-sweep: each GEMM path (gemm.cuh) on the linear layers
// of the Dream-7B shape, for the row counts of decoding steps.
//
// Per (layer shape, m, path): microseconds per product (best of sweep_trials, each the mean over
// `copies` weight copies run back to back, so that a weight matrix smaller than the L2 cache is not
// read from it: copies hold at least 256 MB), achieved GB/s of weight bytes (n·k·2 / time) and that
// as a share of the measured copy bandwidth, the largest difference from cuBLAS's result relative to
// its largest magnitude, whether a second run gives the same bits, and for lt the algorithm planned.
// Random bf16 weights made on the device once per shape.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cuda_bench_util.cuh"

namespace dlm_bench_cuda {

struct linear_shape {
    const char* name;
    index_t n, k;
    float beta;  // 1: the residual is fused into this product in the forward
};

/// The linear layers of Dream-7B (fused q|k|v and gate|up, as the transformer stores them).
inline constexpr linear_shape dream7b_linears[] = {
    {"q/k/v", 4608, 3584, 0.0f}, {"o", 3584, 3584, 1.0f}, {"gate/up", 37888, 3584, 0.0f}, {"down", 3584, 18944, 1.0f}, {"head", 152064, 3584, 0.0f}};

inline constexpr int sweep_trials = 10;
inline constexpr std::size_t sweep_copy_bytes = std::size_t{256} << 20;

/// Largest |a - b| over the largest |b| (0 when b is all zeros and a equals it).
inline double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
    double diff = 0, size = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
        size = std::max(size, std::abs(static_cast<double>(b[i])));
    }
    return size > 0 ? diff / size : diff;
}

/// The sweep's table rows (JSON); `failures` counts the rows that failed. `only`: the shapes to sweep
/// by name (dream7b_linears; empty: all), e.g. one shape's products for an Nsight Compute capture.
inline nlohmann::json gemm_sweep(const ceilings& ceil, const std::vector<index_t>& rows, int& failures, const std::vector<std::string>& only = {}) {
    namespace dc = dlm::cuda;
    using dc::bf16;
    dc::stream_context ctx;
    dc::gemm_engine engine;
    const cudaStream_t st = ctx.stream();
    index_t max_m = 1;
    for (const index_t m : rows) {
        if (m < 1 || m > 4096) throw invalid_parameter("--sweep-rows", "each row count must be in [1, 4096], got " + std::to_string(m));
        max_m = std::max(max_m, m);
    }
    for (const std::string& name : only)
        if (std::none_of(std::begin(dream7b_linears), std::end(dream7b_linears), [&](const linear_shape& sh) { return name == sh.name; }))
            throw invalid_parameter("--sweep-shapes", "unknown shape '" + name + "': the shapes are q/k/v, o, gate/up, down and head");
    nlohmann::json out = nlohmann::json::array();
    std::printf("GEMM sweep (bf16 weights, f32 output; us per product, best of %d; GB/s of weight bytes; %% of the copy bandwidth %.0f GB/s):\n",
                sweep_trials, ceil.copy_gbs);
    std::printf("  %-8s %6s %6s %5s %-7s %10s %9s %6s %10s %4s  %s\n", "shape", "n", "k", "m", "path", "us", "GB/s", "%copy", "vs cublas", "det",
                "lt algorithm");
    for (const linear_shape& sh : dream7b_linears) {
        if (!only.empty() && std::find(only.begin(), only.end(), std::string(sh.name)) == only.end()) continue;
        const std::size_t weights = static_cast<std::size_t>(sh.n) * sh.k, bytes = weights * sizeof(bf16);
        const std::size_t copies = std::clamp<std::size_t>((sweep_copy_bytes + bytes - 1) / bytes, 1, 16);
        dc::device_buffer<bf16> w(weights * copies, "sweep weights"), x(static_cast<std::size_t>(max_m) * sh.k, "sweep inputs");
        dc::device_buffer<float> y(static_cast<std::size_t>(max_m) * sh.n, "sweep outputs");
        dc::kernels::fill_uniform<bf16><<<dc::kernels::stride_grid(w.size()), 256, 0, st>>>(w.data(), w.size(), 31, 1, 0.0f, 0.05f);
        dc::check_launch("fill_uniform (sweep weights)", st);
        dc::kernels::fill_uniform<bf16><<<dc::kernels::stride_grid(x.size()), 256, 0, st>>>(x.data(), x.size(), 31, 2, 0.0f, 1.0f);
        dc::check_launch("fill_uniform (sweep inputs)", st);
        for (const index_t m : rows) {
            const std::size_t outputs = static_cast<std::size_t>(m) * sh.n;
            // One product on copy c of the weights.
            auto run = [&](dc::gemm_path p, std::size_t c) { engine.run(ctx, p, m, sh.n, sh.k, x.data(), w.data() + c * weights, y.data(), sh.beta, sh.name); };
            // The result of one product from y = 0 (so that beta = 1 runs compare).
            auto result = [&](dc::gemm_path p) {
                y.zero(st, "sweep outputs");
                run(p, 0);
                std::vector<float> r(outputs);
                dc::download(r.data(), y.data(), outputs, st, "sweep outputs");
                ctx.synchronize("GEMM sweep");
                return r;
            };
            const std::vector<float> reference = result(dc::gemm_path::cublas);  // an error here ends the sweep
            // One row of the table; an error (a shape cublasLt has no algorithm for, a failed launch) is
            // printed and recorded, and the sweep goes on (a kernel fault would fail every later row too).
            auto measure = [&](dc::gemm_path p) {
                const std::vector<float> first = p == dc::gemm_path::cublas ? reference : result(p), second = result(p);
                const bool same_bits = std::memcmp(first.data(), second.data(), outputs * sizeof(float)) == 0;
                const double diff = relative_difference(first, reference);
                for (std::size_t c = 0; c < copies; ++c) run(p, c);  // warm-up (lt's plan was made by result)
                double best = 1e30;
                for (int t = 0; t < sweep_trials; ++t)
                    best = std::min(best, time_on(st, 0, 1, [&] {
                                        for (std::size_t c = 0; c < copies; ++c) run(p, c);
                                    }) / static_cast<double>(copies));
                const double gbs = static_cast<double>(bytes) / best / 1e9;
                std::string algo;
                if (p == dc::gemm_path::lt) algo = engine.lt().algo_info<bf16>(m, sh.n, sh.k, sh.beta).to_string();
                std::printf("  %-8s %6d %6d %5d %-7s %10.1f %9.0f %5.0f%% %10.2e %4s  %s\n", sh.name, sh.n, sh.k, m, std::string(dc::name(p)).c_str(),
                            best * 1e6, gbs, 100.0 * gbs / ceil.copy_gbs, diff, same_bits ? "yes" : "NO", algo.c_str());
                return nlohmann::json{{"us", best * 1e6},
                                      {"weight_gbs", gbs},
                                      {"copy_fraction", gbs / ceil.copy_gbs},
                                      {"relative_difference_from_cublas", diff},
                                      {"deterministic", same_bits},
                                      {"lt_algorithm", algo}};
            };
            for (const dc::gemm_path p : {dc::gemm_path::cublas, dc::gemm_path::lt, dc::gemm_path::skinny, dc::gemm_path::tc}) {
                if (dc::resolve_gemm_path(p, m, sh.n, sh.k, x.data(), w.data()) != p) continue;  // skinny or tc above their rows
                nlohmann::json row{{"shape", sh.name}, {"n", sh.n}, {"k", sh.k}, {"m", m}, {"beta", sh.beta}, {"path", std::string(dc::name(p))}};
                try {
                    row.update(measure(p));
                } catch (const dlm::error& e) {
                    std::printf("  %-8s %6d %6d %5d %-7s FAILED: %s\n", sh.name, sh.n, sh.k, m, std::string(dc::name(p)).c_str(), e.what());
                    row["error"] = e.what();
                    ++failures;
                }
                out.push_back(row);
            }
        }
    }
    return out;
}

}  // namespace dlm_bench_cuda
