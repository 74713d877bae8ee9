// dlm/cpu/kernels/avx2.hpp — kernels for x86-64 with AVX2, FMA and F16C (Haswell, Zen 1 and
// later): 8-lane vectors, f16 widened by vcvtph2ps, bf16 products as two FMAs per pair.
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

#define DLM_KERNEL_TARGET "avx2,fma,f16c"
#include "target_begin.inl"

namespace dlm::cpu::kernels_avx2 {

inline constexpr isa isa_id = isa::avx2;
inline constexpr const char* isa_name = "avx2";
inline constexpr int lanes = 8;
inline constexpr int mr_f32 = 6, mr_bf16 = 4;  // 16 ymm registers: 12 (or 8 + 6 for bf16) live
using vfloat = float __attribute__((vector_size(lanes * sizeof(float))));

[[nodiscard]] inline vfloat vfma(vfloat a, vfloat b, vfloat c) noexcept { return _mm256_fmadd_ps(a, b, c); }
[[nodiscard]] inline vfloat load_f16(const std::uint16_t* p) noexcept {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

#include "vector_ops.inl"

inline constexpr int mr_q = 4, s8_bias = 0;
inline constexpr const char* quant_form = "vpmaddubsw";
/// Pairs of u8·s8 products summed to 16 bits (never saturating: |w| <= 128 and |a| <= 127, or
/// w <= 63), then pairs of those to 32.
[[nodiscard]] inline vint dot_u8(vint acc, vbytes w, const std::int8_t* a4) noexcept {
    const __m256i p = _mm256_maddubs_epi16(__m256i(w), _mm256_set1_epi32(load_word(a4)));
    return acc + vint(_mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}
/// Signed w: |w| times a with w's sign.
[[nodiscard]] inline vint dot_s8(vint acc, vbytes w, const std::int8_t* a4) noexcept {
    const __m256i wi = __m256i(w);
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(wi, wi), _mm256_sign_epi8(_mm256_set1_epi32(load_word(a4)), wi));
    return acc + vint(_mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}
[[nodiscard]] inline vint widen_u8(const std::byte* p) noexcept { return vint(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))); }
[[nodiscard]] inline vint widen_s8(const std::byte* p) noexcept { return vint(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))); }

/// vpmaddubsw's 16-bit pair sums added to acc16 per 16-bit lane (vpaddw), and vpmaddwd: the
/// unsigned quants' runs of quant_body.inl (DLM_KERNEL_I16_SUMS).
[[nodiscard]] inline vint dot_u8_16(vint acc16, vbytes w, const std::int8_t* a4) noexcept {
    return vint(_mm256_add_epi16(__m256i(acc16), _mm256_maddubs_epi16(__m256i(w), _mm256_set1_epi32(load_word(a4)))));
}
[[nodiscard]] inline vint sum_pairs(vint x16, vint s16) noexcept { return vint(_mm256_madd_epi16(__m256i(x16), __m256i(s16))); }
/// acc + sum_pairs(c16, s2 broadcast).
[[nodiscard]] inline vint dot_pairs(vint acc, vint c16, const std::int32_t* s2) noexcept {
    return acc + sum_pairs(c16, vint(_mm256_set1_epi32(*s2)));
}
#define DLM_KERNEL_I16_SUMS 1

#include "body.inl"
#undef DLM_KERNEL_I16_SUMS

}  // namespace dlm::cpu::kernels_avx2

#include "target_end.inl"

#endif
