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
inline constexpr int lanes = 16;
inline constexpr int mr_f32 = 8, mr_bf16 = 8;
using vfloat = float __attribute__((vector_size(lanes * sizeof(float))));

[[nodiscard]] inline vfloat vfma(vfloat a, vfloat b, vfloat c) noexcept { return _mm512_fmadd_ps(a, b, c); }
[[nodiscard]] inline vfloat load_f16(const std::uint16_t* p) noexcept {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

#include "vector_ops.inl"

/// One pair of A broadcast to every lane (an embedded-broadcast operand of vdpbf16ps).
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

inline constexpr int mr_q = 8, s8_bias = 128;
inline constexpr const char* quant_form = "vpdpbusd";

/// A 32-bit word of memory as an asm operand (any type may alias it).
using asm_word = std::int32_t __attribute__((may_alias));
/// vpdpbusd or vpdpwssd (`Op`) of acc, v and the word at `word` broadcast, the word taken as the
/// instruction's own broadcast memory operand ({1to16}): GCC's intrinsics load it with a
/// vpbroadcastd of its own, an instruction per product (measured on a Zen 4 core: the 8-row Q6_K
/// product of 4096 × 4096, 1.34 -> 1.26 ms). Other compilers fold the intrinsics' broadcast themselves.
template <int Op>
[[nodiscard]] inline vint dot_broadcast(vint acc, __m512i v, const void* word) noexcept {
#if defined(__GNUC__) && !defined(__clang__)
    __m512i r = __m512i(acc);
    const asm_word& m = *static_cast<const asm_word*>(word);
    if constexpr (Op == 0)
        __asm__("vpdpbusd {%2%{1to16%}, %1, %0|%0, %1, %2%{1to16%}}" : "+v"(r) : "v"(v), "m"(m));
    else
        __asm__("vpdpwssd {%2%{1to16%}, %1, %0|%0, %1, %2%{1to16%}}" : "+v"(r) : "v"(v), "m"(m));
    return vint(r);
#else
    const __m512i s = _mm512_set1_epi32(load_word(word));
    return vint(Op == 0 ? _mm512_dpbusd_epi32(__m512i(acc), v, s) : _mm512_dpwssd_epi32(__m512i(acc), v, s));
#endif
}
/// vpdpbusd: four u8·s8 products per lane added to it, exactly.
[[nodiscard]] inline vint dot_u8(vint acc, vbytes w, const std::int8_t* a4) noexcept { return dot_broadcast<0>(acc, __m512i(w), a4); }
/// Signed w as w + 128 (unsigned): the sum gains 128·Σa, which quant_body.inl subtracts (s8_bias).
[[nodiscard]] inline vint dot_s8(vint acc, vbytes w, const std::int8_t* a4) noexcept { return dot_u8(acc, w ^ 0x80, a4); }
[[nodiscard]] inline vint widen_u8(const std::byte* p) noexcept { return vint(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))); }
[[nodiscard]] inline vint widen_s8(const std::byte* p) noexcept { return vint(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))); }
/// vpdpwssd: acc + the two 16-bit products of c16's and the word's halves per lane (the word at s2
/// broadcast), exactly.
[[nodiscard]] inline vint dot_pairs(vint acc, vint c16, const std::int32_t* s2) noexcept { return dot_broadcast<1>(acc, __m512i(c16), s2); }

#define DLM_KERNEL_BF16_DOT 1
#include "body.inl"
#undef DLM_KERNEL_BF16_DOT

}  // namespace dlm::cpu::kernels_avx512_bf16

#include "target_end.inl"

#endif
