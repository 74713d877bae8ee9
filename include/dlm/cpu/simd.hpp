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

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

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

// The vector operations: written once in kernels/vector_ops.inl, which every instruction-set kernel
// file includes again for its own `vfloat` width.
#include "kernels/vector_ops.inl"

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

/// aligned_allocator whose construct without a value leaves the element default-initialized
/// (for bytes and numbers: unwritten), so that `resize` allocates without touching the pages.
template <class T>
struct uninit_allocator : aligned_allocator<T> {
    template <class U>
    struct rebind {
        using other = uninit_allocator<U>;
    };
    uninit_allocator() noexcept = default;
    template <class U>
    uninit_allocator(const uninit_allocator<U>&) noexcept {}
    template <class U>
    void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
        ::new (static_cast<void*>(p)) U;
    }
    template <class U, class... A>
    void construct(U* p, A&&... a) {
        ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
    }
};

/// Storage for packed weights: 64-byte aligned, zeroed by zero_fill.
template <class T>
using weight_storage = std::vector<T, uninit_allocator<T>>;

/// `v` as `n` zeros, written by the threads side by side in chunks of 1 MiB: each thread first
/// touches its own pages, so the kernel clears them on every core instead of on the loading
/// thread alone (a third of an 8B Q4_K_M file's load time was that clearing, on one thread).
template <class T>
void zero_fill(weight_storage<T>& v, std::size_t n) {
    static_assert(std::is_trivially_copyable_v<T>, "zero_fill writes zero bytes");
    weight_storage<T>().swap(v);
    v.resize(n);
    const std::size_t bytes = n * sizeof(T), chunk = std::size_t{1} << 20;
    const auto chunks = static_cast<std::int64_t>((bytes + chunk - 1) / chunk);
    auto* base = reinterpret_cast<unsigned char*>(v.data());
    [[maybe_unused]] const bool parallel = chunks > 1;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (parallel)
#endif
    for (std::int64_t c = 0; c < chunks; ++c) {
        const std::size_t at = static_cast<std::size_t>(c) * chunk;
        std::memset(base + at, 0, std::min(chunk, bytes - at));
    }
}

}  // namespace dlm::cpu
