// dlm/cpu/simd.hpp — the few vector operations the CPU transformer is built from.
//
// One vector type, `vfloat`, of the widest float vector the build targets (16 lanes with AVX-512,
// 8 with AVX, 4 otherwise), written with the GCC/Clang vector extension so that the same source
// compiles for every x86-64 level (and other targets) without intrinsics except fused multiply-add.
//
// Determinism matters more than anything here: every function computes each lane independently
// with a fixed sequence of operations, so a value never depends on which lane, row or batch it sits
// in. That is what makes a sequence's logits identical alone and inside a batch, and identical with
// and without a KV cache.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#if !defined(__GNUC__)
#error "dlm/cpu needs the GCC/Clang vector extension (g++ or clang++)"
#endif

namespace dlm::cpu {

#if defined(__AVX512F__)
inline constexpr int simd_width = 16;
#elif defined(__AVX__)
inline constexpr int simd_width = 8;
#else
inline constexpr int simd_width = 4;
#endif

/// `simd_width` floats.
using vfloat = float __attribute__((vector_size(simd_width * sizeof(float))));
/// `simd_width` 32-bit integers (comparison results and exponent bits).
using vint = std::int32_t __attribute__((vector_size(simd_width * sizeof(float))));

[[nodiscard]] inline vfloat vload(const float* p) noexcept {
    vfloat v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
inline void vstore(float* p, vfloat v) noexcept { std::memcpy(p, &v, sizeof v); }
[[nodiscard]] inline vfloat vbroadcast(float x) noexcept { return vfloat{} + x; }

/// The first `n` lanes from `p`, the others zero.
[[nodiscard]] inline vfloat vload_partial(const float* p, int n) noexcept {
    vfloat v{};
    for (int i = 0; i < n; ++i) v[i] = p[i];
    return v;
}
inline void vstore_partial(float* p, vfloat v, int n) noexcept {
    for (int i = 0; i < n; ++i) p[i] = v[i];
}

/// a * b + c, fused wherever the target has FMA (independent of -ffp-contract).
[[nodiscard]] inline vfloat vfma(vfloat a, vfloat b, vfloat c) noexcept {
#if defined(__AVX512F__)
    return _mm512_fmadd_ps(a, b, c);
#elif defined(__FMA__) && defined(__AVX__)
    return _mm256_fmadd_ps(a, b, c);
#else
    return a * b + c;
#endif
}

[[nodiscard]] inline vfloat vselect(vint mask, vfloat yes, vfloat no) noexcept {
    return std::bit_cast<vfloat>((std::bit_cast<vint>(yes) & mask) | (std::bit_cast<vint>(no) & ~mask));
}

/// exp(x) per lane, relative error below 3e-7 (Cephes' expf polynomial). exp(x) = 0 below -87,
/// so exp(-inf) = 0 exactly; saturates at exp(88) (about 1.65e38, still finite).
[[nodiscard]] inline vfloat vexp(vfloat x) noexcept {
    const vint underflow = x < vbroadcast(-87.0f);
    x = vselect(x > vbroadcast(88.0f), vbroadcast(88.0f), x);
    x = vselect(underflow, vbroadcast(0.0f), x);
    // n = round(x / ln 2), half away from zero, by truncating conversions (safe under -ffast-math).
    const vfloat t = x * vbroadcast(1.44269504088896341f);
    const vint ni = __builtin_convertvector(t + vselect(t >= vfloat{}, vbroadcast(0.5f), vbroadcast(-0.5f)), vint);
    const vfloat n = __builtin_convertvector(ni, vfloat);
    vfloat r = x - n * vbroadcast(0.693359375f);
    r = r - n * vbroadcast(-2.12194440e-4f);
    vfloat p = vbroadcast(1.9875691500e-4f);
    p = p * r + vbroadcast(1.3981999507e-3f);
    p = p * r + vbroadcast(8.3334519073e-3f);
    p = p * r + vbroadcast(4.1665795894e-2f);
    p = p * r + vbroadcast(1.6666665459e-1f);
    p = p * r + vbroadcast(5.0000001201e-1f);
    p = p * (r * r) + r + vbroadcast(1.0f);
    const vfloat scale = std::bit_cast<vfloat>((ni + 127) << 23);
    return vselect(underflow, vbroadcast(0.0f), p * scale);
}

/// 64-byte aligned storage for packed weights and work buffers.
template <class T>
struct aligned_allocator {
    using value_type = T;
    static constexpr std::align_val_t alignment{64};
    aligned_allocator() noexcept = default;
    template <class U>
    aligned_allocator(const aligned_allocator<U>&) noexcept {}
    [[nodiscard]] T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), alignment)); }
    void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, alignment); }
    template <class U>
    friend bool operator==(const aligned_allocator&, const aligned_allocator<U>&) noexcept {
        return true;
    }
};

}  // namespace dlm::cpu
