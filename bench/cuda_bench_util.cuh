// bench/cuda_bench_util.cuh — what dlm-bench-cuda's modes share: the Dream-7B shape, CUDA-event timing,
// the ceilings (copy bandwidth, cuBLAS matrix rates), prompts, and the requests of one forward step.
// Included by bench_cuda.cu only (one translation unit).
#pragma once

#include <algorithm>
#include <concepts>
#include <functional>
#include <random>
#include <span>
#include <vector>

#include <dlm/cuda/cuda.cuh>
#include <dlm/presets.hpp>

#include "shapes.hpp"

namespace dlm_bench_cuda {

using namespace dlm;
// The models benchmarked: bf16 weights with an f32 KV cache (the default) or a bf16 one (--kv bf16).
// Everything below that touches the model is a template on it, instantiated for both.
template <class M>
concept benchmarked_model = std::same_as<M, dlm::cuda::transformer> || std::same_as<M, dlm::cuda::transformer_bf16_kv>;

/// Dream-v0-Instruct-7B's shape (bench/shapes.hpp's `dream-7b`, its published config.json), `layers` of them.
inline io::model_config dream7b(index_t layers) {
    io::model_config c = io::parse_config(bench::find_shape("dream-7b")->config, "bench shape dream-7b");
    c.num_layers = layers;
    return c;
}

/// A small model of the same family (--quick: a smoke run of every code path).
inline io::model_config small() {
    io::model_config c = dream7b(2);
    c.vocab_size = 4096;
    c.hidden_size = 512;
    c.intermediate_size = 1024;
    c.num_heads = 8;
    c.num_kv_heads = 2;
    c.head_dim = 64;
    c.mask_id = 4095;
    c.eos_ids = {4000};
    return c;
}

/// Times `f` with CUDA events on `stream`: `reps` runs after `warmup`; seconds per run.
inline double time_on(cudaStream_t stream, int warmup, int reps, const std::function<void()>& f) {
    cudaEvent_t a, b;
    dlm::cuda::check(cudaEventCreate(&a), "cudaEventCreate");
    dlm::cuda::check(cudaEventCreate(&b), "cudaEventCreate");
    for (int i = 0; i < warmup; ++i) f();
    dlm::cuda::check(cudaEventRecord(a, stream), "cudaEventRecord");
    for (int i = 0; i < reps; ++i) f();
    dlm::cuda::check(cudaEventRecord(b, stream), "cudaEventRecord");
    dlm::cuda::check(cudaEventSynchronize(b), "cudaEventSynchronize");
    float ms = 0;
    dlm::cuda::check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms / 1e3 / reps;
}

struct ceilings {
    double copy_gbs = 0;     // bytes read + written per second, GB/s
    double f16_tflops = 0;   // cuBLAS f16 product, f32 accumulation
    double bf16_tflops = 0;  // same, bf16
};

inline ceilings measure_ceilings(bool quick) {
    ceilings c;
    dlm::cuda::stream_context ctx;
    {
        const std::size_t bytes = quick ? (std::size_t{256} << 20) : (std::size_t{2} << 30);
        dlm::cuda::device_buffer<std::byte> a(bytes, "copy source"), b(bytes, "copy destination");
        dlm::cuda::check(cudaMemsetAsync(a.data(), 1, bytes, ctx.stream()), "cudaMemsetAsync");
        const double s = time_on(ctx.stream(), 2, 10, [&] {
            dlm::cuda::check(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, ctx.stream()), "cudaMemcpyAsync");
        });
        c.copy_gbs = 2.0 * static_cast<double>(bytes) / s / 1e9;
    }
    const int n = quick ? 2048 : 8192;
    const std::size_t elems = static_cast<std::size_t>(n) * n;
    auto gemm_rate = [&](cudaDataType_t type, std::size_t elem_bytes) {
        dlm::cuda::device_buffer<std::byte> A(elems * elem_bytes, "GEMM A"), B(elems * elem_bytes, "GEMM B");
        dlm::cuda::device_buffer<float> C(elems, "GEMM C");
        if (type == CUDA_R_16F) {
            dlm::cuda::kernels::fill_uniform<dlm::cuda::f16><<<dlm::cuda::kernels::stride_grid(elems), 256, 0, ctx.stream()>>>(
                reinterpret_cast<dlm::cuda::f16*>(A.data()), elems, 1, 0, 0.0f, 1.0f);
            dlm::cuda::kernels::fill_uniform<dlm::cuda::f16><<<dlm::cuda::kernels::stride_grid(elems), 256, 0, ctx.stream()>>>(
                reinterpret_cast<dlm::cuda::f16*>(B.data()), elems, 2, 0, 0.0f, 1.0f);
        } else {
            dlm::cuda::kernels::fill_uniform<dlm::cuda::bf16><<<dlm::cuda::kernels::stride_grid(elems), 256, 0, ctx.stream()>>>(
                reinterpret_cast<dlm::cuda::bf16*>(A.data()), elems, 1, 0, 0.0f, 1.0f);
            dlm::cuda::kernels::fill_uniform<dlm::cuda::bf16><<<dlm::cuda::kernels::stride_grid(elems), 256, 0, ctx.stream()>>>(
                reinterpret_cast<dlm::cuda::bf16*>(B.data()), elems, 2, 0, 0.0f, 1.0f);
        }
        dlm::cuda::check_launch("fill_uniform", ctx.stream());
        const float alpha = 1.0f, beta = 0.0f;
        const double s = time_on(ctx.stream(), 3, 10, [&] {
            dlm::cuda::check(cublasGemmEx(ctx.blas(), CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &alpha, A.data(), type, n, B.data(), type, n, &beta, C.data(),
                                          CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                             "cublasGemmEx (ceiling)");
        });
        return 2.0 * n * static_cast<double>(n) * n / s / 1e12;
    };
    c.f16_tflops = gemm_rate(CUDA_R_16F, 2);
    c.bf16_tflops = gemm_rate(CUDA_R_16BF, 2);
    return c;
}

/// Prompt tokens are drawn below this id: under 150000 (Dream's ordinary tokens) and below the model's
/// mask and EOS ids (the small --quick model has a vocabulary of 4096).
template <benchmarked_model Model>
token_id ordinary_tokens(const Model& m) {
    token_id end = std::min<token_id>(150000, m.mask_id());
    for (const token_id e : m.eos_ids()) end = std::min(end, e);
    return end;
}

inline std::vector<std::vector<token_id>> prompts_for(index_t batch, index_t length, token_id vocab_without_specials, unsigned seed) {
    std::mt19937 g(seed);
    std::vector<std::vector<token_id>> p(static_cast<std::size_t>(batch));
    for (auto& v : p) {
        v.resize(static_cast<std::size_t>(length));
        for (auto& t : v) t = static_cast<token_id>(g() % static_cast<unsigned>(vocab_without_specials));
    }
    return p;
}

/// The requests of one forward step of `batch` sequences under `plan_of(layout)`: canvases of random
/// prompts and masks, and (needs_cache) KV caches already filled by one full forward, so the step's
/// cached keys exist. Requests point into the canvases and caches: not copyable or movable.
template <benchmarked_model Model>
struct forward_step {
    using kv_cache = typename Model::kv_cache;
    std::vector<std::vector<token_id>> canvases;
    std::vector<kv_cache> caches;
    std::vector<forward_request<kv_cache>> requests;
    forward_plan plan;

    template <class Mask, class Plan>
    forward_step(Model& m, const Mask& mask, index_t batch, const canvas_layout& l, Plan plan_of, bool needs_cache) : plan(plan_of(l)) {
        for (auto& p : prompts_for(batch, l.prompt_length, ordinary_tokens(m), 7)) {
            p.resize(static_cast<std::size_t>(l.size()), m.mask_id());
            canvases.push_back(std::move(p));
        }
        if (needs_cache)
            for (index_t i = 0; i < batch; ++i) caches.push_back(m.make_kv_cache(l.size()));
        std::vector<forward_request<kv_cache>> fill;
        for (index_t i = 0; i < batch; ++i) {
            kv_cache* kv = needs_cache ? &caches[static_cast<std::size_t>(i)] : nullptr;
            // Fill every position's K/V once (one full forward storing the canvas), so the step's cached keys exist.
            fill.push_back({canvases[static_cast<std::size_t>(i)], l, {0, l.size(), l.size() - 1, l.size(), 0, l.size(), l.size()}, kv});
            requests.push_back({canvases[static_cast<std::size_t>(i)], l, plan, kv});
        }
        if (needs_cache) {
            (void)m.forward_device(std::span<const forward_request<kv_cache>>(fill), mask);
            m.synchronize();
        }
    }
    forward_step(const forward_step&) = delete;
    forward_step& operator=(const forward_step&) = delete;
    [[nodiscard]] std::span<const forward_request<kv_cache>> span() const { return requests; }
};

}  // namespace dlm_bench_cuda
