// dlm/cuda/gemm.cuh — the linear layers of the CUDA transformer through cuBLAS.
//
//   y[m × n] (f32) = x[m × k] (T) · W[n × k]ᵀ (T) + beta · y
//
// All matrices row-major, as Hugging Face stores linear weights ([out_features, in_features]). cuBLAS is
// column-major, so the product is computed as yᵀ = W · xᵀ: op(A) = Wᵀ-of-column-major = W, no copies.
// Inputs in T (bf16, f16 or f32), output and accumulation in f32 (CUBLAS_COMPUTE_32F: no TF32, no
// reduced-precision reductions for f32; tensor cores for bf16 and f16). beta = 1 adds the product to
// y, which is how the residual connections are fused into the output projections.
#pragma once

#include <string>

#include <cublas_v2.h>

#include "element.cuh"
#include "runtime.cuh"

namespace dlm::cuda {

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

}  // namespace dlm::cuda
