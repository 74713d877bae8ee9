// dlm/cpu/kernels/avx512_bf16.hpp — kernels for x86-64 with AVX-512 BF16 and VNNI (Cooper Lake,
// Sapphire Rapids, Zen 4 and later): bf16 products by vdpbf16ps as well (a bf16 pair per f32 lane and
// instruction: twice the f32 FMA rate on Zen 4, half of it on Sapphire Rapids, so dispatch.hpp
// measures which form to use); f32 and f16 as in avx512.hpp.
#pragma once

#if defined(__x86_64__)

#include <immintrin.h>

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "../../io/dtype.hpp"
#include "../simd.hpp"
#include "table.hpp"

#define DLM_KERNEL_TARGET "avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx512vnni,avx2,fma,f16c"
#include "target_begin.inl"

namespace dlm::cpu::kernels_avx512_bf16 {

inline constexpr isa isa_id = isa::avx512_bf16;
inline constexpr const char* isa_name = "avx512-bf16";
#include "avx512_common.inl"

/// One pair of A broadcast to every lane (GCC loads it with a vpbroadcastd: as vdpbf16ps's own
/// {1to16} memory operand, as vnni_ops.inl gives vpdpbusd, the bf16 products ran 1.7× slower on Zen 4).
using a16_t = __m512i;
/// 16 pairs of B.
using b16_t = __m512i;
[[nodiscard]] inline a16_t bcast_a16(const std::uint16_t* pair) noexcept {
    std::int32_t bits;
    std::memcpy(&bits, pair, sizeof bits);
    return _mm512_set1_epi32(bits);
}
[[nodiscard]] inline b16_t load_b16(const std::uint16_t* p) noexcept { return _mm512_loadu_si512(p); }
[[nodiscard]] inline vfloat dot2(vfloat acc, a16_t a, b16_t b) noexcept { return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b); }

#include "vnni_ops.inl"

/// to_bf16_daz (pack.hpp) of the 16 floats at x, stored as bf16 bits at out: vcvtneps2bf16 rounds
/// to nearest even, keeps a NaN and makes it quiet, and takes a subnormal input as a zero of its
/// sign, as to_bf16_daz does, except that to_bf16_daz rounds a subnormal before it flushes the
/// result: magnitudes in [0x007f8000, 0x007fffff] round up to the smallest normal, which the one
/// fix-up sets. (pack_body.inl's generic bf16_daz is the definition on the other paths.)
inline void bf16_daz16(const float* x, std::uint16_t* out) noexcept {
    const __m512 v = _mm512_loadu_ps(x);
    const __m512i mag = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff));
    const __mmask16 to_normal = _mm512_cmplt_epu32_mask(_mm512_sub_epi32(mag, _mm512_set1_epi32(0x007f8000)), _mm512_set1_epi32(0x8000));
    const __m256i h = (__m256i)_mm512_cvtneps_pbh(v);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_mask_mov_epi16(h, to_normal, _mm256_or_si256(h, _mm256_set1_epi16(0x0080))));
}
#define DLM_KERNEL_BF16_CONVERT 1

#define DLM_KERNEL_BF16_DOT 1
#include "body.inl"
#undef DLM_KERNEL_BF16_DOT
#undef DLM_KERNEL_BF16_CONVERT

}  // namespace dlm::cpu::kernels_avx512_bf16

#include "target_end.inl"

#endif
