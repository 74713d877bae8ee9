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

}  // namespace dlm
