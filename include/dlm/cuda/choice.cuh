// dlm/cuda/choice.cuh — a named setting of the CUDA backend (which kernel runs a layer), parsed from a
// flag or an environment variable: the one parser behind gemm_path.cuh and attention_path.cuh. Host code only.
#pragma once

#include <array>
#include <cstddef>
#include <cstdlib>
#include <string>
#include <string_view>

#include "../core/error.hpp"

namespace dlm::cuda {

/// The value of `names` equal to `value`, as the enumerator of that index; anything else throws
/// invalid_parameter naming `parameter` (the variable or flag the value came from) and the accepted values.
template <class Enum, std::size_t N>
[[nodiscard]] Enum parse_choice(const std::array<std::string_view, N>& names, std::string_view value, const std::string& parameter) {
    std::string accepted;
    for (std::size_t i = 0; i < N; ++i) {
        if (value == names[i]) return static_cast<Enum>(i);
        accepted += (i ? ", " : "") + std::string(names[i]);
    }
    throw invalid_parameter(parameter, "must be one of " + accepted + "; got '" + std::string(value) + "'");
}

/// The choice the environment variable `variable` names; `fallback` when it is unset or empty.
template <class Enum, std::size_t N>
[[nodiscard]] Enum choice_from_environment(const std::array<std::string_view, N>& names, const char* variable, Enum fallback) {
    const char* v = std::getenv(variable);
    return v && *v ? parse_choice<Enum>(names, v, variable) : fallback;
}

}  // namespace dlm::cuda
