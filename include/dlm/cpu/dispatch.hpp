// dlm/cpu/dispatch.hpp — picks, once per process, the best kernels this CPU runs.
//
//   dlm::cpu::kernels().name            // "avx512-bf16", "avx512", "avx2" or "baseline"
//   dlm::cpu::set_isa(dlm::cpu::isa::avx2);   // force a lower path (tests, comparisons)
//   DLM_ISA=avx2 ./dlm-generate ...     // the same from the environment
//
// Every instruction set has its own kernel file (kernels/*.hpp), compiled for that target whatever
// the build's flags, and one table of entry points (kernels/table.hpp). The portable build (no
// -march) therefore runs AVX-512 BF16 kernels on a CPU that has them: -march=native is not needed
// for speed. The choice is made at the first call, from CPUID and the OS's saved vector state
// (XGETBV), unless DLM_ISA or set_isa says otherwise; a path the CPU lacks is refused by name.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <vector>
#include <string>
#include <string_view>

#include "../core/error.hpp"
#include "kernels/table.hpp"

// The kernels themselves: inline in every translation unit (header-only use), or, where the program
// defines DLM_CPU_KERNELS_SEPARATE for all its translation units, compiled once in the one that
// includes <dlm/cpu/kernels/definitions.hpp> (CMake: link dlm::cpu_kernels). They are the slowest
// code in dlm to compile (about 100 s of GCC time at -O2), so programs of many files want that.
#if defined(DLM_CPU_KERNELS_SEPARATE)
namespace dlm::cpu::detail {
/// The table of `i` (the baseline's where the build's target has no such kernels); defined by
/// kernels/definitions.hpp.
const kernel_table& kernels_of(isa i) noexcept;
}  // namespace dlm::cpu::detail
#else
#include "kernels/all.hpp"
#endif

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace dlm::cpu {

/// The name dlm uses for `i` (as DLM_ISA takes it).
[[nodiscard]] constexpr std::string_view isa_name(isa i) noexcept {
    switch (i) {
        case isa::baseline: return "baseline";
        case isa::avx2: return "avx2";
        case isa::avx512: return "avx512";
        case isa::avx512_bf16: return "avx512-bf16";
    }
    return "?";
}

/// The best instruction set this CPU and OS support (CPUID feature bits and XGETBV state).
[[nodiscard]] inline isa detect_isa() noexcept {
#if defined(__x86_64__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return isa::baseline;
    const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28), f16c = c & (1u << 29);
    if (!(osxsave && avx && fma && f16c)) return isa::baseline;
    unsigned xlo = 0, xhi = 0;
    __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    const unsigned long long xcr0 = (static_cast<unsigned long long>(xhi) << 32) | xlo;
    if ((xcr0 & 0x6u) != 0x6u) return isa::baseline;  // the OS saves neither xmm nor ymm state
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return isa::baseline;
    const bool avx2 = b & (1u << 5), avx512f = b & (1u << 16), avx512dq = b & (1u << 17), avx512bw = b & (1u << 30),
               avx512vl = b & (1u << 31);
    if (!avx2) return isa::baseline;
    const bool zmm_state = (xcr0 & 0xe0u) == 0xe0u;  // opmask, upper zmm halves, zmm16-31
    if (!(avx512f && avx512dq && avx512bw && avx512vl && zmm_state)) return isa::avx2;
    unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
    const bool bf16 = __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1) && (a1 & (1u << 5));
    const bool vnni = c & (1u << 11);  // vpdpbusd: the quantized products (every CPU with BF16 so far has it)
    return bf16 && vnni ? isa::avx512_bf16 : isa::avx512;
#else
    return isa::baseline;
#endif
}

/// The kernels of `i` (the baseline's where the build's target has no such kernels).
[[nodiscard]] inline const kernel_table& kernels_for(isa i) noexcept { return detail::kernels_of(i); }

/// The instruction set a DLM_ISA value names; invalid_parameter("DLM_ISA") for anything else.
[[nodiscard]] inline isa parse_isa(std::string_view name) {
    for (isa i : {isa::baseline, isa::avx2, isa::avx512, isa::avx512_bf16})
        if (name == isa_name(i)) return i;
    if (name == "avx512_bf16") return isa::avx512_bf16;
    throw invalid_parameter("DLM_ISA", "'" + std::string(name) + "' is not an instruction set dlm has kernels for "
                                       "(auto, avx512-bf16, avx512, avx2, baseline)");
}

namespace detail {
struct dispatch_state {
    std::atomic<const kernel_table*> table{nullptr};
    std::atomic<int> bf16_dot{-1};  // -1: not decided yet for this table; 0: FMA form; 1: vdpbf16ps
    std::atomic<double> dot_speedup{0.0};
};
inline dispatch_state& state() noexcept {
    static dispatch_state s;
    return s;
}
}  // namespace detail

/// Makes `i` the path every later product runs. invalid_parameter (naming `parameter`) if this CPU
/// cannot run it.
inline void set_isa(isa i, const char* parameter = "isa") {
    const isa best = detect_isa();
    if (static_cast<int>(i) > static_cast<int>(best))
        throw invalid_parameter(parameter, "this CPU cannot run the " + std::string(isa_name(i)) + " kernels (its best is " +
                                               std::string(isa_name(best)) + ")");
    detail::state().bf16_dot.store(-1, std::memory_order_relaxed);
    detail::state().table.store(&kernels_for(i), std::memory_order_release);
}

/// The kernels in use: on the first call, the best the CPU has, or what DLM_ISA names ("auto" or
/// unset: the best). Throws invalid_parameter("DLM_ISA") for a name it does not know or a path
/// the CPU cannot run.
[[nodiscard]] inline const kernel_table& kernels() {
    const kernel_table* t = detail::state().table.load(std::memory_order_acquire);
    if (t != nullptr) return *t;
    const char* env = std::getenv("DLM_ISA");
    const std::string_view want = env != nullptr ? std::string_view(env) : std::string_view("auto");
    set_isa(want.empty() || want == "auto" ? detect_isa() : parse_isa(want), "DLM_ISA");
    return *detail::state().table.load(std::memory_order_acquire);
}

namespace detail {
/// Seconds per call of the best of 5 runs of `f`.
template <class F>
double best_time(F&& f) {
    double best = 1e30;
    for (int r = 0; r < 5; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
}
}  // namespace detail

/// How the active kernels multiply bf16 weights. Both forms give the same bits.
struct bf16_method {
    bool dot = false;          ///< true: vdpbf16ps; false: two FMAs per pair on widened values
    double dot_speedup = 0.0;  ///< time of the FMA form / time of vdpbf16ps, where measured (else 0)
};

/// Uses vdpbf16ps for bf16 products (`dot`) or the FMA form, where the active kernels have both;
/// set_isa forgets it.
inline void set_bf16_dot(bool dot) noexcept { detail::state().bf16_dot.store(dot ? 1 : 0, std::memory_order_release); }

/// The bf16 form of the active kernels: where the instruction set has vdpbf16ps, the faster of the
/// two forms on this CPU, timed once on a 48 × 128 × 512 product (about a millisecond), unless
/// set_bf16_dot or DLM_BF16_DOT ("1": vdpbf16ps, "0": the FMA form, "auto") decided it.
[[nodiscard]] inline bf16_method bf16_products() {
    const kernel_table& kt = kernels();
    if (kt.gemm_bf16_dot == nullptr) return {};
    detail::dispatch_state& s = detail::state();
    if (const int known = s.bf16_dot.load(std::memory_order_acquire); known >= 0)
        return {known == 1, s.dot_speedup.load(std::memory_order_relaxed)};
    const char* env = std::getenv("DLM_BF16_DOT");
    const std::string_view want = env != nullptr ? std::string_view(env) : std::string_view("auto");
    bf16_method m;
    if (want == "1" || want == "0") {
        m.dot = want == "1";
    } else if (want.empty() || want == "auto") {
        constexpr index_t rows = 48, n = 128, k = 512;  // 48: whole tiles for every mr (8, 6, 4)
        std::vector<float> a(static_cast<std::size_t>(rows) * k, 0.5f), c(static_cast<std::size_t>(rows) * n);
        std::vector<std::uint16_t> a16(a.size(), 0x3f00), b(static_cast<std::size_t>(n) * k, 0x3f00);
        const panel_view16 bv{b.data(), static_cast<std::ptrdiff_t>(k) * panel_width, 2 * panel_width};
        const index_t panels = n / panel_width;
        const double fma = detail::best_time([&] { kt.gemm_bf16(rows, n, k, a.data(), bv, 0, panels, c.data(), n, false); });
        const double dot = detail::best_time([&] { kt.gemm_bf16_dot(rows, n, k, a16.data(), bv, 0, panels, c.data(), n, false); });
        m.dot = dot < fma;
        m.dot_speedup = fma / dot;
    } else {
        throw invalid_parameter("DLM_BF16_DOT", "'" + std::string(want) + "' is not one of auto, 1, 0");
    }
    s.dot_speedup.store(m.dot_speedup, std::memory_order_relaxed);
    s.bf16_dot.store(m.dot ? 1 : 0, std::memory_order_release);
    return m;
}

}  // namespace dlm::cpu
