// dlm/cpu/dispatch.hpp — picks, once per process, the best kernels this CPU runs.
//
//   dlm::cpu::kernels().name            // "amx", "avx512-bf16", "avx512-vnni", "avx512", "avx2" or "baseline"
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
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace dlm::cpu {

/// The name dlm uses for `i` (as DLM_ISA takes it).
[[nodiscard]] constexpr std::string_view isa_name(isa i) noexcept {
    for (const isa_info& info : isa_list)
        if (info.id == i) return info.name;
    return "?";
}

namespace detail {
/// What the CPU and the OS offer, read once: the best instruction set below AMX, and AMX's own
/// verdict (granted, or why not).
struct cpu_features {
    isa best_vector = isa::baseline;
    bool amx = false;
    const char* amx_reason = "";  ///< why AMX is not used ("" where it is)
};

/// The vector features dlm's paths need, as CPUID and XGETBV report them.
struct vector_features {
    bool avx = false, fma = false, f16c = false, avx2 = false;  ///< AVX with the OS saving ymm state (OSXSAVE, XCR0)
    bool avx512 = false;  ///< AVX-512 F, DQ, BW and VL, with the OS saving the opmask and zmm state
    bool vnni = false;    ///< AVX-512 VNNI (vpdpbusd)
    bool bf16 = false;    ///< AVX-512 BF16 (vdpbf16ps)
};

/// The best path below AMX for these features: avx2 needs AVX2, FMA and F16C; avx512 AVX-512
/// F/DQ/BW/VL; avx512-vnni VNNI too; avx512-bf16 VNNI and BF16.
[[nodiscard]] constexpr isa best_vector_isa(const vector_features& f) noexcept {
    if (!(f.avx && f.fma && f.f16c && f.avx2)) return isa::baseline;
    if (!f.avx512) return isa::avx2;
    if (f.vnni && f.bf16) return isa::avx512_bf16;
    return f.vnni ? isa::avx512_vnni : isa::avx512;
}

#if defined(__x86_64__)
/// This CPU's vector features (CPUID leaves 1, 7.0 and 7.1; the OS's saved state by XGETBV, its
/// XCR0 left in `xcr0`).
[[nodiscard]] inline vector_features read_vector_features(unsigned long long& xcr0) noexcept {
    vector_features f;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    const bool osxsave = c & (1u << 27);
    if (!(osxsave && (c & (1u << 28)))) return f;
    unsigned xlo = 0, xhi = 0;
    __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    xcr0 = (static_cast<unsigned long long>(xhi) << 32) | xlo;
    if ((xcr0 & 0x6u) != 0x6u) return f;  // the OS saves neither xmm nor ymm state
    f.avx = true;
    f.fma = c & (1u << 12);
    f.f16c = c & (1u << 29);
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
    f.avx2 = b & (1u << 5);
    const bool zmm_state = (xcr0 & 0xe0u) == 0xe0u;  // opmask, upper zmm halves, zmm16-31
    f.avx512 = (b & (1u << 16)) && (b & (1u << 17)) && (b & (1u << 30)) && (b & (1u << 31)) && zmm_state;  // F, DQ, BW, VL
    f.vnni = c & (1u << 11);
    unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
    f.bf16 = __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1) && (a1 & (1u << 5));
    return f;
}

/// AMX-TILE, AMX-BF16 and AMX-INT8 in CPUID, the tile state enabled in XCR0, and Linux's
/// permission to use the tile data (arch_prctl ARCH_REQ_XCOMP_PERM, asked once per process):
/// nullptr where all hold, else the reason.
[[nodiscard]] inline const char* amx_refusal(isa best_vector, unsigned long long xcr0) noexcept {
    if (best_vector != isa::avx512_bf16) return "the CPU lacks AVX-512 BF16 and VNNI, which the AMX kernels' epilogues use";
    unsigned a = 0, b = 0, c = 0, d = 0;
    __get_cpuid_count(7, 0, &a, &b, &c, &d);
    const bool amx_bf16 = d & (1u << 22), amx_tile = d & (1u << 24), amx_int8 = d & (1u << 25);
    if (!(amx_tile && amx_bf16 && amx_int8)) return "the CPU has no AMX-BF16/AMX-INT8 tiles";
    if ((xcr0 & (3ull << 17)) != (3ull << 17)) return "the OS does not enable the AMX tile state (XCR0 bits 17-18)";
#if defined(__linux__)
    constexpr long arch_req_xcomp_perm = 0x1023, xfeature_xtiledata = 18;
    if (syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) != 0)
        return "Linux refused the AMX tile data permission (arch_prctl ARCH_REQ_XCOMP_PERM)";
    return nullptr;
#else
    return "AMX needs the OS's tile data permission, which dlm asks of Linux only";
#endif
}
#endif

[[nodiscard]] inline cpu_features detect_features() noexcept {
    cpu_features f;
#if defined(__x86_64__)
    unsigned long long xcr0 = 0;
    f.best_vector = best_vector_isa(read_vector_features(xcr0));
    const char* refusal = amx_refusal(f.best_vector, xcr0);
    f.amx = refusal == nullptr;
    f.amx_reason = refusal == nullptr ? "" : refusal;
#else
    f.amx_reason = "not an x86-64 CPU";
#endif
    return f;
}
[[nodiscard]] inline const cpu_features& features() noexcept {
    static const cpu_features f = detect_features();
    return f;
}
}  // namespace detail

/// The best instruction set this CPU and OS support (CPUID feature bits, XGETBV state and, for
/// AMX, the OS's tile data permission).
[[nodiscard]] inline isa detect_isa() noexcept {
    const detail::cpu_features& f = detail::features();
    return f.amx ? isa::amx : f.best_vector;
}

/// Why the AMX kernels are not among this CPU's paths ("" where they are): the CPU, the OS's
/// tile state, or the permission Linux refused. --stats prints it.
[[nodiscard]] inline std::string_view amx_unavailable_reason() noexcept { return detail::features().amx_reason; }

/// Every instruction set this CPU runs, lowest first (the tests run each).
[[nodiscard]] inline std::vector<isa> runnable_isas() {
    std::vector<isa> v;
    for (const isa_info& info : isa_list)
        if (static_cast<int>(info.id) <= static_cast<int>(detect_isa())) v.push_back(info.id);
    return v;
}

/// The kernels of `i` (the baseline's where the build's target has no such kernels).
[[nodiscard]] inline const kernel_table& kernels_for(isa i) noexcept { return detail::kernels_of(i); }

/// The instruction set a DLM_ISA value names; invalid_parameter("DLM_ISA") for anything else.
[[nodiscard]] inline isa parse_isa(std::string_view name) {
    for (const isa_info& info : isa_list)
        if (name == info.name) return info.id;
    if (name == "avx512_bf16") return isa::avx512_bf16;
    std::string known;
    for (const isa_info& info : isa_list) known += ", " + std::string(info.name);
    throw invalid_parameter("DLM_ISA", "'" + std::string(name) + "' is not an instruction set dlm has kernels for (auto" + known + ")");
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
    if (static_cast<int>(i) > static_cast<int>(best)) {
        std::string why = "this CPU cannot run the ";
        why.append(isa_name(i)).append(" kernels (its best is ").append(isa_name(best));
        if (i == isa::amx) why.append("; AMX: ").append(amx_unavailable_reason());
        throw invalid_parameter(parameter, why + ")");
    }
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

/// How the active kernels multiply bf16 weights, where they have two forms (avx512-bf16: the FMA
/// form and vdpbf16ps, which give the same bits).
struct bf16_method {
    bool dot = false;          ///< true: vdpbf16ps (the table's bf16_alt); false: its first bf16 form
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
    if (kt.bf16_alt.run == nullptr) return {};
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
        const double fma = detail::best_time([&] { kt.bf16.run(rows, n, k, a.data(), bv, 0, panels, c.data(), n, false); });
        const double dot = detail::best_time([&] { kt.bf16_alt.run(rows, n, k, a16.data(), bv, 0, panels, c.data(), n, false); });
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
