// bench/peak.hpp — the machine's measured peaks: f32 FMA, the quantized form of the active kernels
// (vpmaddubsw on avx2 and avx512, vpdpbusd where the CPU has VNNI) and, where the CPU has it,
// vdpbf16ps (bf16 pairs), each from 16 (AVX2: 12) independent chains of 512-bit (or the widest the active kernels run)
// instructions on registers; where the CPU and the OS grant AMX, the tile unit's TDPBF16PS and
// TDPBSSD (peak_amx.hpp). Each the best of three runs, on one core or on `threads` OpenMP threads
// at once (each thread its own chains; the sum of their rates). Threads: OMP_NUM_THREADS / set_threads.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

#include <dlm/cpu/dispatch.hpp>

#include "peak_amx.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace dlm::bench {

inline int max_threads() {
#if defined(_OPENMP)
    return omp_get_max_threads();
#else
    return 1;
#endif
}
inline void set_threads(int n) {
#if defined(_OPENMP)
    omp_set_num_threads(n);
#else
    (void)n;
#endif
}

/// Peaks of one core, or of several threads together (0: not measured, or the CPU lacks it).
struct peaks {
    double fma = 0;       ///< f32 FMA, FLOP/s
    double bf16_dot = 0;  ///< vdpbf16ps, FLOP/s
    double int8_dot = 0;  ///< vpdpbusd (AVX-512 VNNI: the avx512-vnni and avx512-bf16 paths' quantized form), integer OP/s (multiply-adds × 2)
    double int8_madd = 0;  ///< vpmaddubsw + a 16-bit add (the avx2 and avx512 paths' quantized form's bound), integer OP/s
    double amx_bf16 = 0;  ///< TDPBF16PS, FLOP/s
    double amx_int8 = 0;  ///< TDPBSSD, integer OP/s (multiply-adds × 2)
};

namespace detail {
using clock_type = std::chrono::steady_clock;

#if defined(__x86_64__)
#define DLM_PEAK_CHAINS(init, op)                                              \
    init;                                                                                     \
    const auto t0 = clock_type::now();                                                        \
    for (long it = 0; it < iterations; ++it) {                                                \
        op(0) op(1) op(2) op(3) op(4) op(5) op(6) op(7) op(8) op(9) op(10) op(11) op(12) op(13) op(14) op(15) \
    }                                                                                         \
    const double s = std::chrono::duration<double>(clock_type::now() - t0).count();

// Sixteen chains a0..a15 with distinct starting values, or the compiler sees sixteen equal chains
// and computes one.
#define DLM_INIT_Z(i) __m512 a##i = _mm512_set1_ps(0.5f + 0.01f * (i));
#define DLM_INIT512                                                                                             \
    DLM_INIT_Z(0) DLM_INIT_Z(1) DLM_INIT_Z(2) DLM_INIT_Z(3) DLM_INIT_Z(4) DLM_INIT_Z(5) DLM_INIT_Z(6) DLM_INIT_Z(7) \
    DLM_INIT_Z(8) DLM_INIT_Z(9) DLM_INIT_Z(10) DLM_INIT_Z(11) DLM_INIT_Z(12) DLM_INIT_Z(13) DLM_INIT_Z(14) DLM_INIT_Z(15)

/// Keeps the sixteen chains' results alive.
__attribute__((target("avx512f"))) inline void keep(__m512 a0, __m512 a1, __m512 a2, __m512 a3, __m512 a4, __m512 a5, __m512 a6, __m512 a7,
                                                     __m512 a8, __m512 a9, __m512 a10, __m512 a11, __m512 a12, __m512 a13, __m512 a14,
                                                     __m512 a15) {
    const __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                                                 _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7))),
                                   _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)),
                                                 _mm512_add_ps(_mm512_add_ps(a12, a13), _mm512_add_ps(a14, a15))));
    volatile float sink = _mm512_reduce_add_ps(s);
    (void)sink;
}

__attribute__((target("avx512f,fma"))) inline double fma512(long iterations) {
    DLM_INIT512
    const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
#define DLM_OP(i) a##i = _mm512_fmadd_ps(a##i, x, y);
    DLM_PEAK_CHAINS((void)0, DLM_OP)
#undef DLM_OP
    keep(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15);
    return 32.0 * 16 * static_cast<double>(iterations) / s;
}
// AVX2 has 16 ymm registers: sixteen chains and their two operands would spill, and the loop would
// measure the stack (on a Zen 3 host, 57 GFLOP/s a core where dlm's bf16 product ran at 65). Twelve
// chains fit, more than the FMA units' latency × ports needs (4-5 cycles × 2).
#define DLM_PEAK_CHAINS12(op)                                                                            \
    const auto t0 = clock_type::now();                                                                  \
    for (long it = 0; it < iterations; ++it) {                                                          \
        op(0) op(1) op(2) op(3) op(4) op(5) op(6) op(7) op(8) op(9) op(10) op(11)                       \
    }                                                                                                   \
    const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
template <class V>
__attribute__((always_inline)) inline void keep12(const V (&a)[12]) {
    V sum = a[0];
    for (int i = 1; i < 12; ++i) sum += a[i];
    volatile auto sink = sum[0];
    (void)sink;
}
__attribute__((target("avx2,fma"))) inline double fma256(long iterations) {
    __m256 a[12];
    for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(0.5f + 0.01f * static_cast<float>(i));
    const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
#define DLM_OP(i) a[i] = _mm256_fmadd_ps(a[i], x, y);
    DLM_PEAK_CHAINS12(DLM_OP)
#undef DLM_OP
    keep12(a);
    return 16.0 * 12 * static_cast<double>(iterations) / s;
}
/// The bound of the avx2 and avx512 paths' quantized form: vpmaddubsw (pairs of u8 × s8 to 16 bits)
/// and a 16-bit add, the work per quad of their 16-bit runs (quant_body.inl, i16_run), whose one
/// vpmaddwd per run the count leaves out (so no kernel can pass it: chains of vpmaddubsw +
/// vpmaddwd + vpaddd, the ceiling until 2026-12-04, were passed by up to 18 % on Zen 4); each chain's
/// bytes feed its next step, so nothing is loop-invariant. Ten chains in named variables (a product
/// and its add are 4-5 cycles, 2 a cycle at most): twelve in an array spilled AVX2's 16 registers and
/// measured 193 GOP/s a Zen 4 core, where dlm's avx2 Q4_K kernel ran at 208. Integer OP/s
/// (multiply-adds × 2), as vpdpbusd's peak counts them.
#define DLM_MADD_CHAINS10(V, bytes, set1_8)                                                                      \
    V a0 = V{} + 1, a1 = V{} + 2, a2 = V{} + 3, a3 = V{} + 4, a4 = V{} + 5, a5 = V{} + 6, a6 = V{} + 7, a7 = V{} + 8, \
      a8 = V{} + 9, a9 = V{} + 10;                                                                                \
    const auto y = set1_8(-5);                                                                                    \
    const auto t0 = clock_type::now();                                                                            \
    for (long it = 0; it < iterations; ++it) {                                                                    \
        DLM_MADD_OP(0) DLM_MADD_OP(1) DLM_MADD_OP(2) DLM_MADD_OP(3) DLM_MADD_OP(4)                                \
        DLM_MADD_OP(5) DLM_MADD_OP(6) DLM_MADD_OP(7) DLM_MADD_OP(8) DLM_MADD_OP(9)                                \
    }                                                                                                             \
    const double s = std::chrono::duration<double>(clock_type::now() - t0).count();                               \
    const V sum = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9;                                                \
    volatile auto sink = sum[0];                                                                                  \
    (void)sink;                                                                                                   \
    return 2.0 * (bytes) * 10 * static_cast<double>(iterations) / s;
using v8i = std::int32_t __attribute__((vector_size(32)));
using v16i = std::int32_t __attribute__((vector_size(64)));
__attribute__((target("avx2"))) inline double maddubs256(long iterations) {
#define DLM_MADD_OP(i) a##i = v8i(_mm256_add_epi16(__m256i(a##i), _mm256_maddubs_epi16(__m256i(a##i), y)));
    DLM_MADD_CHAINS10(v8i, 32, _mm256_set1_epi8)
#undef DLM_MADD_OP
}
__attribute__((target("avx512f,avx512bw"))) inline double maddubs512(long iterations) {
#define DLM_MADD_OP(i) a##i = v16i(_mm512_add_epi16(__m512i(a##i), _mm512_maddubs_epi16(__m512i(a##i), y)));
    DLM_MADD_CHAINS10(v16i, 64, _mm512_set1_epi8)
#undef DLM_MADD_OP
}
#undef DLM_MADD_CHAINS10
#undef DLM_PEAK_CHAINS12
__attribute__((target("avx512f,avx512bf16"))) inline double dot512(long iterations) {
    DLM_INIT512
    const __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80), y = (__m512bh)_mm512_set1_epi32(0x33803380);
#define DLM_OP(i) a##i = _mm512_dpbf16_ps(a##i, x, y);
    DLM_PEAK_CHAINS((void)0, DLM_OP)
#undef DLM_OP
    keep(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15);
    return 64.0 * 16 * static_cast<double>(iterations) / s;
}
__attribute__((target("avx512f,avx512vnni"))) inline double vnni512(long iterations) {
#define DLM_INIT_I(i) __m512i a##i = _mm512_set1_epi32(i);
    DLM_INIT_I(0) DLM_INIT_I(1) DLM_INIT_I(2) DLM_INIT_I(3) DLM_INIT_I(4) DLM_INIT_I(5) DLM_INIT_I(6) DLM_INIT_I(7) DLM_INIT_I(8)
    DLM_INIT_I(9) DLM_INIT_I(10) DLM_INIT_I(11) DLM_INIT_I(12) DLM_INIT_I(13) DLM_INIT_I(14) DLM_INIT_I(15)
#undef DLM_INIT_I
    const __m512i x = _mm512_set1_epi8(3), y = _mm512_set1_epi8(-5);
#define DLM_OP(i) a##i = _mm512_dpbusd_epi32(a##i, x, y);
    DLM_PEAK_CHAINS((void)0, DLM_OP)
#undef DLM_OP
#define DLM_PS(i) _mm512_castsi512_ps(a##i)
    keep(DLM_PS(0), DLM_PS(1), DLM_PS(2), DLM_PS(3), DLM_PS(4), DLM_PS(5), DLM_PS(6), DLM_PS(7), DLM_PS(8), DLM_PS(9), DLM_PS(10), DLM_PS(11),
         DLM_PS(12), DLM_PS(13), DLM_PS(14), DLM_PS(15));
#undef DLM_PS
    return 128.0 * 16 * static_cast<double>(iterations) / s;  // 64 u8 × s8 multiply-adds an instruction
}
#undef DLM_PEAK_CHAINS
#undef DLM_INIT512
#undef DLM_INIT_Z
#endif

/// The best of 3 runs of `rate` (a rate of one thread's chains), on `threads` threads at once: the
/// sum of the threads' rates.
template <class F>
double best_of_3(int threads, F&& rate) {
    double best = 0;
    for (int r = 0; r < 3; ++r) {
        double sum = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sum)
        sum += rate();
        best = std::max(best, sum);
    }
    return best;
}
}  // namespace detail

/// The fewest seconds one call of f took in `reps` calls.
template <class F>
double best_of(int reps, F&& f) {
    double best = 1e30;
    for (int rep = 0; rep < reps; ++rep) {
        const auto t0 = detail::clock_type::now();
        f();
        best = std::min(best, std::chrono::duration<double>(detail::clock_type::now() - t0).count());
    }
    return best;
}

/// The peaks on `threads` threads together (1: one core): f32 FMA at the width of the active
/// kernels, vpdpbusd and vdpbf16ps where the CPU has them, and the AMX tile products where detect_isa() grants
/// AMX (whatever DLM_ISA chose: the ceilings are the machine's).
inline peaks measure_peaks(int threads = 1) {
    peaks p;
#if defined(__x86_64__)
    constexpr long iters = 20'000'000, amx_iters = 2'000'000;
    const cpu::isa best = cpu::detect_isa();  // first: it asks Linux for the AMX tile data permission
    const cpu::isa i = cpu::kernels().id;
    if (i >= cpu::isa::avx512) p.fma = detail::best_of_3(threads, [] { return detail::fma512(iters); });
    else if (i == cpu::isa::avx2) p.fma = detail::best_of_3(threads, [] { return detail::fma256(iters); });
    if (i == cpu::isa::avx512) p.int8_madd = detail::best_of_3(threads, [] { return detail::maddubs512(iters); });
    else if (i == cpu::isa::avx2) p.int8_madd = detail::best_of_3(threads, [] { return detail::maddubs256(iters); });
    if (best >= cpu::isa::avx512_vnni) p.int8_dot = detail::best_of_3(threads, [] { return detail::vnni512(iters); });
    if (best >= cpu::isa::avx512_bf16)  // dlm's avx512-bf16 level is AVX-512 BF16 + VNNI
        p.bf16_dot = detail::best_of_3(threads, [] { return detail::dot512(iters); });
    if (best == cpu::isa::amx) {
        p.amx_bf16 = detail::best_of_3(threads, [] { return detail::amx_rate(detail::amx_op::bf16, amx_iters); });
        p.amx_int8 = detail::best_of_3(threads, [] { return detail::amx_rate(detail::amx_op::int8, amx_iters); });
    }
#else
    (void)threads;
#endif
    return p;
}

}  // namespace dlm::bench
