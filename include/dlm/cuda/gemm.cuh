// dlm/cuda/gemm.cuh — the linear layers of the CUDA transformer.
//
//   y[m × n] (f32) = x[m × k] (T) · W[n × k]ᵀ (T) + beta · y
//
// All matrices row-major, as Hugging Face stores linear weights ([out_features, in_features]). Inputs in
// T (bf16, f16 or f32), output and accumulation in f32. beta = 1 adds the product to y, which is how
// the residual connections are fused into the output projections.
//
// Four implementations, chosen per product by the runtime context's gemm_path (gemm_path.cuh,
// DLM_CUDA_GEMM): cuBLAS's cublasGemmEx (`linear` below), cublasLt with a plan per shape
// (gemm_lt.cuh), dlm's CUDA-core kernel for a few rows (skinny_gemm.cuh) and its tensor-core kernel
// for up to 64 rows (tc_gemm.cuh). cuBLAS is column-major, so both
// cuBLAS paths compute yᵀ = W · xᵀ: op(A) = Wᵀ-of-column-major = W, no copies; CUBLAS_COMPUTE_32F (no
// TF32, no reduced-precision reductions for f32; tensor cores for bf16 and f16).
#pragma once

#include <memory>
#include <string>

#include <cublas_v2.h>

#include "element.cuh"
#include "gemm_lt.cuh"
#include "gemm_path.cuh"
#include "runtime.cuh"
#include "skinny_gemm.cuh"
#include "tc_gemm.cuh"

namespace dlm::cuda {

/// The product by cublasGemmEx on `blas`'s stream.
template <storage_element T>
void linear(cublasHandle_t blas, index_t m, index_t n, index_t k, const T* x, const T* w, float* y, float beta, const char* what) {
    if (m == 0 || n == 0) return;
    const float alpha = 1.0f;
    const std::string call = std::string("cublasGemmEx (") + what + ", m " + std::to_string(m) + ", n " + std::to_string(n) + ", k " + std::to_string(k) + ")";
    check(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, w, element<T>::cuda_type, k, x, element<T>::cuda_type, k, &beta, y,
                       CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          call);
    cudaStream_t stream = nullptr;
    check(cublasGetStream(blas, &stream), "cublasGetStream");
    check_launch(call, stream);
}

/// The implementation a product takes under path `p`: automatic resolves by auto_gemm_path; skinny and
/// tc fall back to cublas where their kernel does not apply (more rows, k not a multiple of its vector,
/// tc on f32).
template <storage_element T>
[[nodiscard]] gemm_path resolve_gemm_path(gemm_path p, index_t m, index_t n, index_t k, const T* x, const T* w) noexcept {
    if (p == gemm_path::automatic) p = auto_gemm_path(m, n, k);
    if (p == gemm_path::tc && !tc_applies(m, k, x, w)) return gemm_path::cublas;
    if (p == gemm_path::skinny && !skinny_applies(m, k, x, w)) return gemm_path::cublas;
    return p;
}

/// Runs the linear layers of one stream_context by its gemm_path; owns the cublasLt plans (made when a
/// shape is first run by lt). Move-only; one per model.
class gemm_engine {
public:
    /// y (+)= x · Wᵀ by the context's path.
    template <storage_element T>
    void linear(const stream_context& ctx, index_t m, index_t n, index_t k, const T* x, const T* w, float* y, float beta, const char* what) {
        run(ctx, ctx.gemm_path(), m, n, k, x, w, y, beta, what);
    }

    /// y (+)= x · Wᵀ by path `p` (resolved by resolve_gemm_path), on ctx's stream.
    template <storage_element T>
    void run(const stream_context& ctx, gemm_path p, index_t m, index_t n, index_t k, const T* x, const T* w, float* y, float beta,
             const char* what) {
        switch (resolve_gemm_path(p, m, n, k, x, w)) {
        case gemm_path::lt: lt().run(ctx, m, n, k, x, w, y, beta, what); break;
        case gemm_path::skinny: skinny_linear(ctx.stream(), m, n, k, x, w, y, beta, what); break;
        case gemm_path::tc: tc_linear(ctx.stream(), m, n, k, x, w, y, beta, what); break;
        default: cuda::linear(ctx.blas(), m, n, k, x, w, y, beta, what); break;
        }
    }

    /// The cublasLt planner (created on first use).
    [[nodiscard]] lt_planner& lt() {
        if (!lt_) lt_ = std::make_unique<lt_planner>();
        return *lt_;
    }

private:
    std::unique_ptr<lt_planner> lt_;
};

}  // namespace dlm::cuda
