// dlm/cpu/kernels/avx512.hpp — kernels for x86-64 with AVX-512 F/BW/DQ/VL but no VNNI (Skylake-X,
// Skylake-SP): 16-lane vectors, f16 widened by vcvtph2ps, bf16 products as two FMAs per pair, the
// quantized products by vpmaddubsw (avx512_vnni.hpp has them by vpdpbusd).
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

#define DLM_KERNEL_TARGET "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c"
#include "target_begin.inl"

namespace dlm::cpu::kernels_avx512 {

inline constexpr isa isa_id = isa::avx512;
inline constexpr const char* isa_name = "avx512";
#include "avx512_common.inl"

inline constexpr int s8_bias = 0;
inline constexpr const char* quant_form = "vpmaddubsw";
/// As avx2.hpp's, 512 bits wide (AVX-512 BW; no VNNI at this level).
[[nodiscard]] inline vint dot_u8(vint acc, vbytes w, const std::int8_t* a4) noexcept {
    const __m512i p = _mm512_maddubs_epi16(__m512i(w), _mm512_set1_epi32(load_word(a4)));
    return acc + vint(_mm512_madd_epi16(p, _mm512_set1_epi16(1)));
}
[[nodiscard]] inline vint dot_s8(vint acc, vbytes w, const std::int8_t* a4) noexcept {
    const __m512i wi = __m512i(w), a = _mm512_set1_epi32(load_word(a4));
    const __m512i signed_a = _mm512_mask_sub_epi8(a, _mm512_movepi8_mask(wi), _mm512_setzero_si512(), a);
    const __m512i p = _mm512_maddubs_epi16(_mm512_abs_epi8(wi), signed_a);
    return acc + vint(_mm512_madd_epi16(p, _mm512_set1_epi16(1)));
}

/// vpmaddubsw's 16-bit pair sums added to acc16 per 16-bit lane (vpaddw), and vpmaddwd: the
/// unsigned quants' runs of quant_body.inl (DLM_KERNEL_I16_SUMS).
[[nodiscard]] inline vint dot_u8_16(vint acc16, vbytes w, const std::int8_t* a4) noexcept {
    return vint(_mm512_add_epi16(__m512i(acc16), _mm512_maddubs_epi16(__m512i(w), _mm512_set1_epi32(load_word(a4)))));
}
[[nodiscard]] inline vint sum_pairs(vint x16, vint s16) noexcept { return vint(_mm512_madd_epi16(__m512i(x16), __m512i(s16))); }
/// acc + sum_pairs(c16, s2 broadcast): vpmaddwd and vpaddd (no VNNI's vpdpwssd at this level).
[[nodiscard]] inline vint dot_pairs(vint acc, vint c16, const std::int32_t* s2) noexcept {
    return acc + sum_pairs(c16, vint(_mm512_set1_epi32(*s2)));
}
#define DLM_KERNEL_I16_SUMS 1

#include "body.inl"
#undef DLM_KERNEL_I16_SUMS

}  // namespace dlm::cpu::kernels_avx512

#include "target_end.inl"

#endif
