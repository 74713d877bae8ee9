// dlm/cuda/attention_path.cuh — which kernel runs the CUDA transformer's attention.
//
//   simt  the CUDA-core kernel (attention.cuh): f32 arithmetic throughout, any head size up to 256
//   tc    the tensor-core kernel (attention_tc.cuh): scores and the weighted sum of values by TF32 mma
//         (queries, keys, probabilities and values rounded to TF32, f32 accumulation); models with bf16
//         or f16 product inputs and head sizes 32, 64 or 128 (others run simt)
//   auto  the default: tc where it applies, else simt (auto_attention_path below)
//
// The path is a setting of the runtime context (stream_context::set_attention_path), initialised from
// the environment variable DLM_CUDA_ATTENTION (simt|tc|auto; unset or empty: auto). Host code only.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "../core/error.hpp"
#include "choice.cuh"

namespace dlm::cuda {

enum class attention_path { simt, tc, automatic };

inline constexpr std::array<std::string_view, 3> attention_path_names{"simt", "tc", "auto"};

[[nodiscard]] constexpr std::string_view name(attention_path p) noexcept { return attention_path_names[static_cast<std::size_t>(p)]; }

[[nodiscard]] inline attention_path parse_attention_path(std::string_view value, const std::string& parameter) {
    return parse_choice<attention_path>(attention_path_names, value, parameter);
}

/// The path DLM_CUDA_ATTENTION asks for (auto when unset or empty); an unknown value throws invalid_parameter.
[[nodiscard]] inline attention_path attention_path_from_environment() {
    return choice_from_environment(attention_path_names, "DLM_CUDA_ATTENTION", attention_path::automatic);
}

/// Whether the tensor-core kernel takes a model whose product inputs are f32 (`f32_inputs`) or not, with
/// heads of `head_dim`: not for f32 models (their attention keeps f32 arithmetic, which the parity tests
/// hold to 1e-4 of the CPU's), and only for head sizes it tiles exactly (32 · 1, 2 or 4).
[[nodiscard]] constexpr bool tc_attention_applies(bool f32_inputs, index_t head_dim) noexcept {
    return !f32_inputs && (head_dim == 32 || head_dim == 64 || head_dim == 128);
}

/// The kernel path `p` runs: tc where requested or automatic and it applies, else simt.
[[nodiscard]] constexpr attention_path resolve_attention_path(attention_path p, bool f32_inputs, index_t head_dim) noexcept {
    return p != attention_path::simt && tc_attention_applies(f32_inputs, head_dim) ? attention_path::tc : attention_path::simt;
}

}  // namespace dlm::cuda
