// dlm/cpu/quant/blocks.hpp — ggml's block-quantized tensor types, as GGUF files store them:
// decoding a row to f32 (the reference every kernel is tested against) and encoding one.
//
//   Q8_0  blocks of 32:  f16 d, int8 q[32]                      x = d·q
//   Q4_0  blocks of 32:  f16 d, 16 bytes of nibbles             x = d·(q − 8)      q in [0, 15]
//         element j < 16 is byte j's low nibble, element j + 16 its high nibble
//   Q4_K  super-blocks of 256: f16 d, f16 dmin, 12 bytes of 6-bit (scale, min) pairs for 8
//         sub-blocks of 32, 128 bytes of nibbles                x = d·sc_j·q − dmin·m_j
//         64 elements per 32 bytes: the first 32 the low nibbles, the next 32 the high ones
//   Q5_K  as Q4_K with a fifth bit per element: f16 d, f16 dmin, scales[12], qh[32], qs[128];
//         in the c-th 64 (c = 0..3), element l (< 32) takes bit 2c of qh[l], element 32 + l bit 2c + 1
//   Q6_K  super-blocks of 256: ql[128] (low 4 bits), qh[64] (high 2 bits), int8 scales[16] (one per
//         16 elements), f16 d                                   x = d·sc_j·(q − 32)  q in [0, 63]
//
// The layouts are ggml's (ggml-common.h, ggml-quants.c dequantize_row_*), checked against the
// `gguf` package's numpy decoder by tests/test_quant.cpp on fixtures tools/make_quant_fixtures.py
// writes. The encoders (quantize_row) produce valid blocks with a simple round-to-nearest choice of
// scales; they are not llama.cpp's quantizers (whose scale search differs) and are used for random
// models and tests only.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "../../core/error.hpp"
#include "../../io/dtype.hpp"
#include "../../io/gguf_types.hpp"

namespace dlm::cpu::quant {

using io::gguf_type;

/// Elements per sub-block of the K-quants' super-blocks of 256.
inline constexpr int qk_k = 256;

/// Whether dlm multiplies tensors of type `t` in their blocks (the loader refuses other block types).
[[nodiscard]] constexpr bool has_kernel(gguf_type t) noexcept {
    return t == gguf_type::q8_0 || t == gguf_type::q4_0 || t == gguf_type::q4_k || t == gguf_type::q5_k || t == gguf_type::q6_k;
}

/// f.template operator()<T>() for the block type t, one has_kernel accepts (Q6_K for any other):
/// code written once per type, chosen once per call rather than per element.
template <class F>
decltype(auto) with_block_type(gguf_type t, F&& f) {
    switch (t) {
        case gguf_type::q8_0: return f.template operator()<gguf_type::q8_0>();
        case gguf_type::q4_0: return f.template operator()<gguf_type::q4_0>();
        case gguf_type::q4_k: return f.template operator()<gguf_type::q4_k>();
        case gguf_type::q5_k: return f.template operator()<gguf_type::q5_k>();
        default: return f.template operator()<gguf_type::q6_k>();
    }
}

namespace detail {
[[nodiscard]] inline float half(const std::byte* p) noexcept {
    std::uint16_t h;
    std::memcpy(&h, p, 2);
    return io::f16_to_f32(h);
}
inline void put_half(std::byte* p, float x) noexcept {
    const std::uint16_t h = io::f32_to_f16(x);
    std::memcpy(p, &h, 2);
}
[[nodiscard]] inline std::uint8_t u8(const std::byte* p, int i) noexcept { return static_cast<std::uint8_t>(p[i]); }

/// Sub-block j's 6-bit scale and min of a Q4_K/Q5_K scales[12] (ggml's get_scale_min_k4).
struct scale_min {
    std::uint8_t scale, min;
};
[[nodiscard]] inline scale_min k4_scale_min(const std::byte* s, int j) noexcept {
    if (j < 4) return {static_cast<std::uint8_t>(u8(s, j) & 63), static_cast<std::uint8_t>(u8(s, j + 4) & 63)};
    return {static_cast<std::uint8_t>((u8(s, j + 4) & 0xf) | ((u8(s, j - 4) >> 6) << 4)),
            static_cast<std::uint8_t>((u8(s, j + 4) >> 4) | ((u8(s, j) >> 6) << 4))};
}
/// The inverse: 8 (scale, min) pairs of 6 bits into scales[12].
inline void put_k4_scale_min(std::byte* s, const std::uint8_t* sc, const std::uint8_t* mn) noexcept {
    for (int j = 0; j < 4; ++j) {
        s[j] = static_cast<std::byte>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        s[j + 4] = static_cast<std::byte>((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
        s[j + 8] = static_cast<std::byte>((sc[j + 4] & 0xf) | ((mn[j + 4] & 0xf) << 4));
    }
}

/// Byte offsets inside a super-block.
struct k_layout {
    static constexpr int q4k_scales = 4, q4k_qs = 16;                   // Q4_K: d, dmin, scales, qs
    static constexpr int q5k_scales = 4, q5k_qh = 16, q5k_qs = 48;      // Q5_K: d, dmin, scales, qh, qs
    static constexpr int q6k_ql = 0, q6k_qh = 128, q6k_sc = 192, q6k_d = 208;  // Q6_K
};

/// The quants of one block of type T as held, element i at u[i]: Q8_0's signed bytes as they are,
/// the others' unsigned q (Q4_0 and Q4_K in [0, 15], Q5_K [0, 31], Q6_K [0, 63]). Loops over the
/// format's own runs of 32 bytes (the comment at the top), which the compiler vectorizes: the
/// file's quants are decoded once at load, 4.9 GB of them for an 8B Q4_K_M file.
template <gguf_type T>
inline void block_quants(const std::byte* b, std::uint8_t* u) noexcept {
    const auto* p = reinterpret_cast<const std::uint8_t*>(b);
    if constexpr (T == gguf_type::q8_0) {
        std::memcpy(u, p + 2, 32);
    } else if constexpr (T == gguf_type::q4_0) {
        for (int l = 0; l < 16; ++l) u[l] = p[2 + l] & 0xf, u[16 + l] = p[2 + l] >> 4;
    } else if constexpr (T == gguf_type::q4_k || T == gguf_type::q5_k) {
        constexpr bool five = T == gguf_type::q5_k;
        const std::uint8_t* qs = p + (five ? k_layout::q5k_qs : k_layout::q4k_qs);
        for (int c = 0; c < 4; ++c)
            for (int l = 0; l < 32; ++l) {
                auto lo = static_cast<std::uint8_t>(qs[32 * c + l] & 0xf), hi = static_cast<std::uint8_t>(qs[32 * c + l] >> 4);
                if constexpr (five) {
                    const std::uint8_t qh = p[k_layout::q5k_qh + l];
                    lo = static_cast<std::uint8_t>(lo | ((qh >> (2 * c)) & 1) << 4);
                    hi = static_cast<std::uint8_t>(hi | ((qh >> (2 * c + 1)) & 1) << 4);
                }
                u[64 * c + l] = lo;
                u[64 * c + 32 + l] = hi;
            }
    } else {
        static_assert(T == gguf_type::q6_k, "block_quants decodes Q8_0, Q4_0, Q4_K, Q5_K and Q6_K");
        // 128 elements per half: element h·128 + s·32 + l (s = 0..3, l < 32) takes ql[h·64 + (s & 1)·32 + l]
        // (low nibble for s < 2, high for s >= 2) and bits 2s, 2s + 1 of qh[h·32 + l].
        const std::uint8_t *ql = p + k_layout::q6k_ql, *qh = p + k_layout::q6k_qh;
        for (int h = 0; h < 2; ++h)
            for (int s = 0; s < 4; ++s)
                for (int l = 0; l < 32; ++l) {
                    const std::uint8_t lo = ql[h * 64 + (s & 1) * 32 + l];
                    u[h * 128 + s * 32 + l] = static_cast<std::uint8_t>((s < 2 ? lo & 0xf : lo >> 4) | ((qh[h * 32 + l] >> (2 * s)) & 3) << 4);
                }
    }
}
/// block_quants for a run-time type (one has_kernel accepts).
inline void block_quants(gguf_type t, const std::byte* b, std::uint8_t* u) noexcept {
    with_block_type(t, [&]<gguf_type T>() { block_quants<T>(b, u); });
}
[[nodiscard]] inline int q6_k_scale(const std::byte* b, int i) noexcept {
    return static_cast<std::int8_t>(u8(b + k_layout::q6k_sc, i / 16));
}
}  // namespace detail

/// Bytes of a row of `cols` elements of block type `t`; invalid_parameter("cols") when `cols` is not
/// a whole number of blocks.
[[nodiscard]] inline std::size_t row_bytes(gguf_type t, std::int64_t cols) {
    const std::int64_t b = io::gguf_block_size(t);
    if (cols < 0 || cols % b != 0)
        throw invalid_parameter("cols", std::to_string(cols) + " is not a multiple of " + std::string(io::gguf_type_name(t)) +
                                            "'s block of " + std::to_string(b) + " elements");
    return io::gguf_row_bytes(t, cols);
}

/// Decodes a row of `cols` elements of type `t` (F32, F16, BF16 or a type has_kernel accepts) to f32,
/// with ggml's arithmetic (each value d·sc·q − dmin·m rounded as ggml's reference rounds it).
inline void dequantize_row(gguf_type t, const std::byte* src, float* dst, std::int64_t cols) {
    using namespace detail;
    const std::size_t bytes = row_bytes(t, cols);
    (void)bytes;
    const std::int64_t nb = cols / io::gguf_block_size(t);
    const std::size_t bs = io::gguf_type_size(t);
    std::uint8_t u[qk_k];
    for (std::int64_t i = 0; i < nb; ++i) {
        const std::byte* b = src + static_cast<std::size_t>(i) * bs;
        float* y = dst + i * io::gguf_block_size(t);
        switch (t) {
            case gguf_type::f32: std::memcpy(y, b, 4); break;
            case gguf_type::f16: *y = half(b); break;
            case gguf_type::bf16: {
                std::uint16_t h;
                std::memcpy(&h, b, 2);
                *y = io::bf16_to_f32(h);
                break;
            }
            case gguf_type::q8_0: {
                const float d = half(b);
                block_quants<gguf_type::q8_0>(b, u);
                for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<std::int8_t>(u[j])) * d;
                break;
            }
            case gguf_type::q4_0: {
                const float d = half(b);
                block_quants<gguf_type::q4_0>(b, u);
                for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(u[j] - 8) * d;
                break;
            }
            case gguf_type::q4_k:
            case gguf_type::q5_k: {
                const float d = half(b), dmin = half(b + 2);
                block_quants(t, b, u);
                for (int j = 0; j < 8; ++j) {
                    const scale_min sm = k4_scale_min(b + k_layout::q4k_scales, j);
                    const float d1 = d * static_cast<float>(sm.scale), m1 = dmin * static_cast<float>(sm.min);
                    for (int l = 0; l < 32; ++l) y[j * 32 + l] = d1 * static_cast<float>(u[j * 32 + l]) - m1;
                }
                break;
            }
            case gguf_type::q6_k: {
                const float d = half(b + k_layout::q6k_d);
                block_quants<gguf_type::q6_k>(b, u);
                for (int e = 0; e < qk_k; ++e) y[e] = d * static_cast<float>(q6_k_scale(b, e)) * static_cast<float>(u[e] - 32);
                break;
            }
            default:
                throw invalid_parameter("type", std::string(io::gguf_type_name(t)) + " is not a type dlm decodes (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K)");
        }
    }
}

namespace detail {
/// The largest |x| of x[0, n).
[[nodiscard]] inline float abs_max(const float* x, int n) noexcept {
    float m = 0;
    for (int i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
    return m;
}
/// clamp(lround(v), lo, hi) (ties away from zero), without the library call and without branches
/// (random values make a branch on the sign or the fraction a coin toss): v is clamped first (a NaN
/// taken as 0, what lround's conversion to int gave), then v − (int)v, exact, says which way to
/// round (the conversion truncates toward zero). The encoders call it once per quant.
[[nodiscard]] inline int round_clamp(float v, int lo, int hi) noexcept {
    v = std::clamp(v == v ? v : 0.0f, static_cast<float>(lo), static_cast<float>(hi));
    const int i = static_cast<int>(v);  // toward zero: v is in [lo, hi]
    const float f = v - static_cast<float>(i);
    return i + static_cast<int>(f >= 0.5f) - static_cast<int>(f <= -0.5f);
}

/// Q4_K / Q5_K super-block from 256 values: per sub-block of 32 an offset (−min, >= 0) and a step,
/// both stored as 6-bit multiples of the super-block's dmin and d; quants rounded to nearest.
inline void quantize_k4(const float* x, std::byte* b, bool five) {
    const int qmax = five ? 31 : 15;
    std::array<float, 8> step{}, off{};
    for (int j = 0; j < 8; ++j) {
        const float* s = x + j * 32;
        const float lo = std::min(0.0f, *std::min_element(s, s + 32)), hi = *std::max_element(s, s + 32);
        off[j] = -lo;
        step[j] = (hi - lo) / static_cast<float>(qmax);
    }
    const float max_step = *std::max_element(step.begin(), step.end()), max_off = *std::max_element(off.begin(), off.end());
    const float d = io::f16_to_f32(io::f32_to_f16(max_step / 63)), dmin = io::f16_to_f32(io::f32_to_f16(max_off / 63));
    put_half(b, d);
    put_half(b + 2, dmin);
    std::array<std::uint8_t, 8> sc{}, mn{};
    for (int j = 0; j < 8; ++j) {
        sc[j] = static_cast<std::uint8_t>(d > 0 ? round_clamp(step[j] / d, 0, 63) : 0);
        mn[j] = static_cast<std::uint8_t>(dmin > 0 ? round_clamp(off[j] / dmin, 0, 63) : 0);
    }
    put_k4_scale_min(b + k_layout::q4k_scales, sc.data(), mn.data());
    std::byte* qs = b + (five ? k_layout::q5k_qs : k_layout::q4k_qs);
    if (five) std::memset(b + k_layout::q5k_qh, 0, 32);
    for (int j = 0; j < 8; ++j) {
        const float st = d * static_cast<float>(sc[j]), m = dmin * static_cast<float>(mn[j]);
        for (int l = 0; l < 32; ++l) {
            const int q = st > 0 ? round_clamp((x[j * 32 + l] + m) / st, 0, qmax) : 0;
            const int e = j * 32 + l, at = e / 64 * 32 + e % 32;
            const bool high = e % 64 >= 32;
            auto& byte = qs[at];
            byte = static_cast<std::byte>(high ? (static_cast<std::uint8_t>(byte) & 0x0f) | ((q & 0xf) << 4)
                                               : (static_cast<std::uint8_t>(byte) & 0xf0) | (q & 0xf));
            if (five && q > 15) b[k_layout::q5k_qh + l] |= static_cast<std::byte>(1u << (2 * (e / 64) + (high ? 1 : 0)));
        }
    }
}

/// Q6_K super-block from 256 values: per 16 an int8 scale (a multiple of d), quants in [−32, 31].
inline void quantize_q6_k(const float* x, std::byte* b) {
    std::array<float, 16> step{};
    for (int j = 0; j < 16; ++j) step[j] = abs_max(x + j * 16, 16) / 31;
    const float d = io::f16_to_f32(io::f32_to_f16(*std::max_element(step.begin(), step.end()) / 127));
    put_half(b + k_layout::q6k_d, d);
    std::memset(b, 0, 192);
    for (int j = 0; j < 16; ++j) {
        const int sc = d > 0 ? round_clamp(step[j] / d, -128, 127) : 0;
        b[k_layout::q6k_sc + j] = static_cast<std::byte>(static_cast<std::int8_t>(sc));
        const float st = d * static_cast<float>(sc);
        for (int l = 0; l < 16; ++l) {
            const int e = j * 16 + l;
            const int q = (st != 0 ? round_clamp(x[e] / st, -32, 31) : 0) + 32;
            const int h = e / 128, s = e % 128 / 32, i = e % 32;
            b[k_layout::q6k_ql + h * 64 + (s & 1) * 32 + i] |= static_cast<std::byte>(s < 2 ? (q & 0xf) : (q & 0xf) << 4);
            b[k_layout::q6k_qh + h * 32 + i] |= static_cast<std::byte>((q >> 4) << (2 * s));
        }
    }
}
}  // namespace detail

/// Encodes `cols` values as a row of type `t` (a type has_kernel accepts): scales from each block's
/// range, quants rounded to nearest. Valid blocks for tests and random models; not llama.cpp's
/// choice of scales (its quantizers search for the scale with the least error).
inline void quantize_row(gguf_type t, const float* src, std::byte* dst, std::int64_t cols) {
    using namespace detail;
    (void)row_bytes(t, cols);
    if (!has_kernel(t))
        throw invalid_parameter("type", std::string(io::gguf_type_name(t)) + " is not a type dlm encodes (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K)");
    const std::int64_t bl = io::gguf_block_size(t), nb = cols / bl;
    const std::size_t bs = io::gguf_type_size(t);
    for (std::int64_t i = 0; i < nb; ++i) {
        const float* x = src + i * bl;
        std::byte* b = dst + static_cast<std::size_t>(i) * bs;
        switch (t) {
            case gguf_type::q8_0: {
                const float d = io::f16_to_f32(io::f32_to_f16(abs_max(x, 32) / 127));
                put_half(b, d);
                for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<std::byte>(static_cast<std::int8_t>(d > 0 ? round_clamp(x[j] / d, -127, 127) : 0));
                break;
            }
            case gguf_type::q4_0: {
                const float d = io::f16_to_f32(io::f32_to_f16(abs_max(x, 32) / 8));
                put_half(b, d);
                for (int j = 0; j < 16; ++j) {
                    const int lo = d > 0 ? round_clamp(x[j] / d, -8, 7) + 8 : 8, hi = d > 0 ? round_clamp(x[j + 16] / d, -8, 7) + 8 : 8;
                    b[2 + j] = static_cast<std::byte>(lo | (hi << 4));
                }
                break;
            }
            case gguf_type::q4_k: quantize_k4(x, b, false); break;
            case gguf_type::q5_k: quantize_k4(x, b, true); break;
            case gguf_type::q6_k: quantize_q6_k(x, b); break;
            default: break;
        }
    }
}

}  // namespace dlm::cpu::quant
