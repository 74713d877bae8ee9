// dlm/cpu/kernels/baseline.hpp — kernels for any CPU: 4-lane vectors (SSE2 on x86-64, NEON or
// scalar elsewhere), no FMA, f16 widened in software. The fallback of the run-time dispatch.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "../../io/dtype.hpp"
#include "../simd.hpp"
#include "table.hpp"

// At -O2, as the other instruction sets' kernels are (target_begin.inl): -O3 unrolls the scalar byte
// loops into three times the code and takes three times as long to compile (52 s against 18 s, g++ 12),
// the same bits either way (no FMA at this level, so nothing is fused).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("O2")
#endif

namespace dlm::cpu::kernels_baseline {

inline constexpr isa isa_id = isa::baseline;
inline constexpr const char* isa_name = "baseline";
inline constexpr int lanes = 4;
inline constexpr int mr_f32 = 6, mr_bf16 = 4;
using vfloat = float __attribute__((vector_size(lanes * sizeof(float))));

[[nodiscard]] inline vfloat vfma(vfloat a, vfloat b, vfloat c) noexcept { return a * b + c; }
[[nodiscard]] inline vfloat load_f16(const std::uint16_t* p) noexcept {
    vfloat v;
    for (int i = 0; i < lanes; ++i) v[i] = io::f16_to_f32(p[i]);
    return v;
}

#include "vector_ops.inl"

inline constexpr int mr_q = 4, s8_bias = 0;
inline constexpr const char* quant_form = "scalar";
/// Σ_b w[4l+b]·a[b] per lane, `W` the bytes' signedness.
template <class W>
[[nodiscard]] inline vint dot_bytes(vint acc, vbytes w, std::int32_t a4) noexcept {
    for (int l = 0; l < lanes; ++l)
        for (int b = 0; b < 4; ++b)
            acc[l] += static_cast<W>(w[4 * l + b]) * static_cast<std::int8_t>(static_cast<std::uint32_t>(a4) >> (8 * b));
    return acc;
}
[[nodiscard]] inline vint dot_u8(vint acc, vbytes w, const std::int8_t* a4) noexcept { return dot_bytes<std::uint8_t>(acc, w, load_word(a4)); }
[[nodiscard]] inline vint dot_s8(vint acc, vbytes w, const std::int8_t* a4) noexcept { return dot_bytes<std::int8_t>(acc, w, load_word(a4)); }
template <class B>
[[nodiscard]] inline vint widen_bytes(const std::byte* p) noexcept {
    vint v;
    for (int l = 0; l < lanes; ++l) v[l] = static_cast<B>(p[l]);
    return v;
}
[[nodiscard]] inline vint widen_u8(const std::byte* p) noexcept { return widen_bytes<std::uint8_t>(p); }
[[nodiscard]] inline vint widen_s8(const std::byte* p) noexcept { return widen_bytes<std::int8_t>(p); }
/// acc + per lane lo16(c)·lo16(s) + hi16(c)·hi16(s), s the word at s2, signed 16-bit halves.
[[nodiscard]] inline vint dot_pairs(vint acc, vint c16, const std::int32_t* s2_at) noexcept {
    const std::int32_t s2 = *s2_at;
    const auto half = [](std::int32_t x, int h) { return static_cast<std::int32_t>(static_cast<std::int16_t>(static_cast<std::uint32_t>(x) >> (16 * h))); };
    for (int l = 0; l < lanes; ++l) acc[l] += half(c16[l], 0) * half(s2, 0) + half(c16[l], 1) * half(s2, 1);
    return acc;
}

#include "body.inl"

}  // namespace dlm::cpu::kernels_baseline

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif
