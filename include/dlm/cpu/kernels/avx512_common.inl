// dlm/cpu/kernels/avx512_common.inl — what the AVX-512 kernel files (avx512.hpp, avx512_vnni.hpp,
// avx512_bf16.hpp) share: 16-lane vectors, f16 widened by vcvtph2ps, bytes widened to 32 bits.
//
// Included (no include guard, on purpose) inside each file's instruction-set namespace and target
// region, before that file's quantized-product primitives.

inline constexpr int lanes = 16;
inline constexpr int mr_f32 = 8, mr_bf16 = 8;  // 32 zmm registers: 16 accumulators (12 rows measured no faster)
/// Rows of activations per register tile of the quantized products.
inline constexpr int mr_q = 8;
using vfloat = float __attribute__((vector_size(lanes * sizeof(float))));

[[nodiscard]] inline vfloat vfma(vfloat a, vfloat b, vfloat c) noexcept { return _mm512_fmadd_ps(a, b, c); }
[[nodiscard]] inline vfloat load_f16(const std::uint16_t* p) noexcept {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

#include "vector_ops.inl"

[[nodiscard]] inline vint widen_u8(const std::byte* p) noexcept { return vint(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))); }
[[nodiscard]] inline vint widen_s8(const std::byte* p) noexcept { return vint(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))); }
