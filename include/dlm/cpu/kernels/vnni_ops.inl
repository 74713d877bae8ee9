// dlm/cpu/kernels/vnni_ops.inl — the quantized products' primitives on AVX-512 VNNI (vpdpbusd,
// vpdpwssd), shared by avx512_vnni.hpp and avx512_bf16.hpp: quant_body.inl's dot_u8, dot_s8 and
// dot_pairs (its header says what each computes).
//
// Included (no include guard, on purpose) inside the file's instruction-set namespace and target
// region (which names avx512vnni), after avx512_common.inl.

inline constexpr int s8_bias = 128;
inline constexpr const char* quant_form = "vpdpbusd";

/// A 32-bit word of memory as an asm operand (any type may alias it).
using asm_word = std::int32_t __attribute__((may_alias));
/// vpdpbusd (Op 0) or vpdpwssd (Op 1) of acc, v and the word at `word` broadcast, the word taken as
/// the instruction's own broadcast memory operand ({1to16}): GCC's intrinsics load it with a
/// vpbroadcastd of its own, an instruction per product (measured on a Zen 4 core: the 8-row Q6_K
/// product of 4096 × 4096, 1.34 -> 1.20 ms). Clang folds the intrinsics' broadcast itself.
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
/// vpdpwssd: acc + the two 16-bit products of c16's and the word's halves per lane (the word at s2
/// broadcast), exactly.
[[nodiscard]] inline vint dot_pairs(vint acc, vint c16, const std::int32_t* s2) noexcept { return dot_broadcast<1>(acc, __m512i(c16), s2); }
