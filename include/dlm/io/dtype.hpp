// dlm/io/dtype.hpp — the element types dlm reads from checkpoints, and exact conversions between them.
//
// Checkpoints store weights as F32, F16 (IEEE binary16) or BF16 (bfloat16). dlm computes in f32:
// widening f16/bf16 -> f32 is exact for every bit pattern (subnormals, infinities and NaN payloads
// included). Narrowing f32 -> f16/bf16 (used by the writer) rounds to nearest, ties to even.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace dlm::io {

/// Element type of a stored tensor.
enum class dtype { f32, f16, bf16 };

/// Bytes per element.
[[nodiscard]] constexpr std::size_t dtype_size(dtype t) noexcept { return t == dtype::f32 ? 4 : 2; }

/// The dtype's name as the safetensors header spells it ("F32", "F16", "BF16").
[[nodiscard]] constexpr std::string_view dtype_name(dtype t) noexcept {
    switch (t) {
        case dtype::f32: return "F32";
        case dtype::f16: return "F16";
        case dtype::bf16: return "BF16";
    }
    return "?";
}

/// The dtype a safetensors header names, or nullopt if dlm does not read it.
[[nodiscard]] constexpr std::optional<dtype> parse_dtype(std::string_view name) noexcept {
    if (name == "F32") return dtype::f32;
    if (name == "F16") return dtype::f16;
    if (name == "BF16") return dtype::bf16;
    return std::nullopt;
}

/// bfloat16 bits -> f32 (exact: bf16 is the top half of an f32).
[[nodiscard]] constexpr float bf16_to_f32(std::uint16_t h) noexcept {
    return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

/// IEEE binary16 bits -> f32 (exact for every pattern).
[[nodiscard]] constexpr float f16_to_f32(std::uint16_t h) noexcept {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    std::uint32_t exponent = (h >> 10) & 0x1fu;
    std::uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0x1f)  // infinity or NaN (payload kept)
        return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
    if (exponent == 0) {
        if (mantissa == 0) return std::bit_cast<float>(sign);  // signed zero
        // Subnormal: value = mantissa * 2^-24. Normalise so the leading 1 sits at bit 10.
        std::uint32_t e = 127 - 15 + 1;
        while ((mantissa & 0x400u) == 0) {
            mantissa <<= 1;
            --e;
        }
        return std::bit_cast<float>(sign | (e << 23) | ((mantissa & 0x3ffu) << 13));
    }
    return std::bit_cast<float>(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

/// f32 -> bfloat16 bits, round to nearest even; NaN stays NaN (quiet).
[[nodiscard]] constexpr std::uint16_t f32_to_bf16(float f) noexcept {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
    if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0)
        return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
    const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
    return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

/// f32 -> IEEE binary16 bits, round to nearest even; overflow gives infinity, NaN stays NaN (quiet).
[[nodiscard]] constexpr std::uint16_t f32_to_f16(float f) noexcept {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
    const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
    const std::uint32_t abs = bits & 0x7fffffffu;
    if (abs >= 0x7f800000u)  // infinity or NaN
        return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0u));
    if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds past 65504
    const int exponent = static_cast<int>(abs >> 23) - 127;
    if (exponent >= -14) {  // normal f16
        const std::uint32_t mantissa = abs & 0x7fffffu;
        std::uint32_t h = (static_cast<std::uint32_t>(exponent + 15) << 10) | (mantissa >> 13);
        const std::uint32_t rest = mantissa & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is right
        return static_cast<std::uint16_t>(sign | h);
    }
    if (exponent < -25) return sign;  // below half the smallest subnormal: rounds to zero
    // Subnormal f16: value = m * 2^-24 with m = significand * 2^(exponent + 24 - 23).
    const std::uint32_t significand = (abs & 0x7fffffu) | 0x800000u;
    const int shift = -exponent - 14 + 13;  // 14..24
    std::uint32_t h = significand >> shift;
    const std::uint32_t rest = significand & ((1u << shift) - 1u);
    const std::uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (h & 1u))) ++h;
    return static_cast<std::uint16_t>(sign | h);
}

}  // namespace dlm::io
