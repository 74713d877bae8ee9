// bench/amx_vector_side.hpp — dlm's AMX kernels (cpu/kernels/amx_body.inl) compiled once more with
// every tile instruction a no-op, for dlm-bench-quant --amx-vector-side: what such a product takes
// is its vector side alone (the tile operands built from the weights, the per-block f32 steps, C's
// traffic through memory), which no tile unit speeds up, so it bounds the AMX kernels from below on
// the CPU that runs it. It runs on any CPU with AVX-512 BF16, tiles or not (the kernels' vector code
// is avx512-bf16's); the values it computes mean nothing. Tile loads and stores keep their address
// operands and a memory clobber (an empty asm), so the code around them is not optimized away.
// Included by one file only: the kernels' inline functions are defined here a third time, beside
// kernels/amx.hpp (the tile unit) and tests/support/amx_model.cpp (the tests' model of it).
#pragma once

#if defined(__x86_64__)

#include <immintrin.h>

#include <dlm/cpu/dispatch.hpp>
#include <dlm/cpu/kernels/amx_config.hpp>
#include <dlm/cpu/kernels/avx512_bf16.hpp>
#include <dlm/cpu/kernels/table.hpp>

#define DLM_KERNEL_TARGET "avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx512vnni,avx2,fma,f16c"
#include <dlm/cpu/kernels/target_begin.inl>

#define DLM_TILE_LOAD(t, base, stride) __asm__ volatile("" ::"r"(base), "r"(static_cast<long>(stride)) : "memory")
#define DLM_TILE_STORE(t, base, stride) __asm__ volatile("" ::"r"(base), "r"(static_cast<long>(stride)) : "memory")
#define DLM_TILE_ZERO(t) static_cast<void>(0)
#define DLM_TDPBF16PS(c, a, b) static_cast<void>(0)
#define DLM_TDPBSSD(c, a, b) static_cast<void>(0)
#define DLM_TDPBSUD(c, a, b) static_cast<void>(0)
#define DLM_TILE_CONFIG(config) static_cast<void>(config)

namespace dlm::cpu::kernels_amx_vector_side {
namespace base = kernels_avx512_bf16;
#include <dlm/cpu/kernels/amx_body.inl>
}  // namespace dlm::cpu::kernels_amx_vector_side

#include <dlm/cpu/kernels/target_end.inl>

namespace dlm::bench {

/// Makes the AMX kernels without their tile instructions the active ones for its lifetime, and
/// the kernels active before it again after. Needs AVX-512 BF16 (available()).
struct amx_vector_side {
    [[nodiscard]] static bool available() noexcept { return static_cast<int>(cpu::detect_isa()) >= static_cast<int>(cpu::isa::avx512_bf16); }
    amx_vector_side() : before(cpu::detail::state().table.load(std::memory_order_acquire)) {
        cpu::detail::state().table.store(&cpu::kernels_amx_vector_side::table, std::memory_order_release);
    }
    ~amx_vector_side() { cpu::detail::state().table.store(before, std::memory_order_release); }
    amx_vector_side(const amx_vector_side&) = delete;
    amx_vector_side& operator=(const amx_vector_side&) = delete;
    const cpu::kernel_table* before;
};

}  // namespace dlm::bench

#endif

namespace dlm::bench {

/// Why the tools' --amx-vector-side cannot run on this CPU, "" where it can: the AMX kernels'
/// vector code is avx512-bf16's.
[[nodiscard]] inline const char* amx_vector_side_refusal() noexcept {
#if defined(__x86_64__)
    if (amx_vector_side::available()) return "";
#endif
    return "needs AVX-512 BF16, whose code the AMX kernels' vector side is (this CPU has not)";
}

}  // namespace dlm::bench
