// dlm/cuda/gemm_path.cuh — which implementation runs the CUDA transformer's linear layers.
//
//   cublas  cublasGemmEx (the first implementation; any shape)
//   lt      cublasLt matmul, algorithm planned once per shape from its heuristic (gemm_lt.cuh)
//   skinny  dlm's own CUDA-core kernel for a few rows (m <= skinny_max_rows, k a multiple of its vector
//           width; other products fall back to cublas) (skinny_gemm.cuh)
//   tc      dlm's own tensor-core kernel for 1 to tc_max_rows rows of bf16 or f16 (k a multiple of 8;
//           other products fall back to cublas) (tc_gemm.cuh)
//   auto    the default: auto_gemm_path below, per product shape
//
// The path is a setting of the runtime context (stream_context::set_gemm_path), initialised from the
// environment variable DLM_CUDA_GEMM (cublas|lt|skinny|tc|auto; unset or empty: auto). Host code only.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "../core/error.hpp"
#include "choice.cuh"

namespace dlm::cuda {

enum class gemm_path { cublas, lt, skinny, tc, automatic };

inline constexpr std::array<std::string_view, 5> gemm_path_names{"cublas", "lt", "skinny", "tc", "auto"};

/// The most x rows the tensor-core kernel takes (tc_gemm.cuh): 8 mma tiles of 8 rows.
inline constexpr index_t tc_max_rows = 64;

[[nodiscard]] constexpr std::string_view name(gemm_path p) noexcept { return gemm_path_names[static_cast<std::size_t>(p)]; }

/// Parses a path name; anything else throws invalid_parameter naming `parameter` (the variable or flag
/// the value came from) and the accepted values.
[[nodiscard]] inline gemm_path parse_gemm_path(std::string_view value, const std::string& parameter) {
    return parse_choice<gemm_path>(gemm_path_names, value, parameter);
}

/// The path DLM_CUDA_GEMM asks for (auto when unset or empty); an unknown value throws invalid_parameter.
[[nodiscard]] inline gemm_path gemm_path_from_environment() {
    return choice_from_environment(gemm_path_names, "DLM_CUDA_GEMM", gemm_path::automatic);
}

/// What `auto` runs for a product of m rows (n outputs, k inputs): the one place to change when
/// measurements say another path is faster for some shapes. Must return cublas, lt, skinny or tc (each
/// falls back as resolve_gemm_path says where its kernel does not apply). Measured on an H200 with
/// Dream-7B's products (`dlm-bench-cuda --gemm-sweep`, docs/cuda.md): at one row skinny streams the
/// weights 4-7 % faster than cuBLAS on every shape (an AR step 5.14 ms against 5.66); from two rows on it
/// is no faster, and from 8 rows much slower (CUDA cores). cublasLt's plan ran the small products 8-15 %
/// faster than cublasGemmEx in the sweep (q/k/v 4608 × 3584 at 33 rows 12.2 µs against 13.6), but not
/// inside a forward: a CDLM step with lt for q/k/v and o took 5.339 ms against cuBLAS's 5.320 (same
/// call, 2026-12-04), so it is not chosen. Nor is the tensor-core kernel (tc): slower than cuBLAS at most
/// shapes from 1 to 64 rows (gate/up at 33 rows 119 µs against 76).
[[nodiscard]] constexpr gemm_path auto_gemm_path(index_t m, index_t /*n*/, index_t /*k*/) noexcept {
    return m == 1 ? gemm_path::skinny : gemm_path::cublas;
}

}  // namespace dlm::cuda
