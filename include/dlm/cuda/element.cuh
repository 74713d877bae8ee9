// dlm/cuda/element.cuh — the element types the CUDA transformer stores weights, activations fed to
// the matrix products, and the KV cache in: bf16 (default), f16 or f32. Accumulation is always f32.
#pragma once

#include <concepts>
#include <string_view>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <library_types.h>

#include "../io/dtype.hpp"

namespace dlm::cuda {

using bf16 = __nv_bfloat16;
using f16 = __half;

/// One of the storage types: bf16, f16 or float.
template <class T>
concept storage_element = std::same_as<T, bf16> || std::same_as<T, f16> || std::same_as<T, float>;

template <storage_element T>
struct element;

template <>
struct element<float> {
    static constexpr cudaDataType_t cuda_type = CUDA_R_32F;
    static constexpr io::dtype dtype = io::dtype::f32;
    static constexpr std::string_view name = "f32";
    __host__ __device__ static float to_float(float v) noexcept { return v; }
    __host__ __device__ static float from_float(float v) noexcept { return v; }
};

template <>
struct element<bf16> {
    static constexpr cudaDataType_t cuda_type = CUDA_R_16BF;
    static constexpr io::dtype dtype = io::dtype::bf16;
    static constexpr std::string_view name = "bf16";
    __host__ __device__ static float to_float(bf16 v) noexcept { return __bfloat162float(v); }
    /// Round to nearest, ties to even (as torch's .to(bfloat16)).
    __host__ __device__ static bf16 from_float(float v) noexcept { return __float2bfloat16_rn(v); }
};

template <>
struct element<f16> {
    static constexpr cudaDataType_t cuda_type = CUDA_R_16F;
    static constexpr io::dtype dtype = io::dtype::f16;
    static constexpr std::string_view name = "f16";
    __host__ __device__ static float to_float(f16 v) noexcept { return __half2float(v); }
    __host__ __device__ static f16 from_float(float v) noexcept { return __float2half_rn(v); }
};

/// A matrix-product input (an activation) in T, rounded as the CPU transformer rounds the inputs of its
/// products with weights of that type (cpu/gemm.hpp, cpu::to_bf16_daz): bf16 to nearest even with a
/// subnormal result flushed to a signed zero; f16 and f32 by from_float.
template <storage_element T>
__device__ inline T to_product_input(float v) noexcept {
    if constexpr (std::same_as<T, bf16>) {
        unsigned short bits = __bfloat16_as_ushort(__float2bfloat16_rn(v));
        if ((bits & 0x7f80u) == 0) bits &= 0x8000u;
        return __ushort_as_bfloat16(bits);
    } else {
        return element<T>::from_float(v);
    }
}

}  // namespace dlm::cuda
