// dlm/core/config.hpp — basic types and the host/device annotation shared by every header.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define DLM_HOST_DEVICE __host__ __device__
#else
#define DLM_HOST_DEVICE
#endif

namespace dlm {

/// A vocabulary entry. 32 bits covers every released tokenizer (LLaDA: 126464, Qwen2: 151936).
using token_id = std::int32_t;

/// A position or a count on the canvas. Signed, so that "no position" can be -1.
using index_t = std::int32_t;

inline constexpr token_id no_token = -1;

/// The most slots (gen_length, block_length) a program, the server, the Python package or a model
/// file's decoding hint may ask for: 2^20. The library's own generate() is bounded by the model's
/// context and the memory its states need (engine/prepare.hpp).
inline constexpr index_t max_slots = index_t{1} << 20;

/// Whether `x`, inside [lo, hi] (open ends as given) as a double, stays inside once held as the float
/// a sampler keeps (temperature, top_p): a user's 1e-50 is 0 as a float, outside top_p's (0, 1]. The
/// programs, the server and the Python package refuse such a value saying so.
[[nodiscard]] constexpr bool float_keeps_range(double x, double lo, double hi, bool open_lo, bool open_hi) noexcept {
    const auto held = static_cast<double>(static_cast<float>(x));
    return (open_lo ? held > lo : held >= lo) && (open_hi ? held < hi : held <= hi);
}

}  // namespace dlm
