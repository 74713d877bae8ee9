// bench/peak_amx.hpp — the AMX tile unit's peak on one core: TDPBF16PS (bf16 pairs into f32,
// 16 × 16 × 32 multiply-adds per instruction) and TDPBSSD (signed bytes into int32, 16 × 16 × 64,
// the instruction of dlm's amx-int8 kernels), each on 4 independent C tiles (tmm0-3) with both
// operands held in tile registers (tmm4, tmm5) and loaded once, from NONZERO data (zero operands run
// faster and would overstate the peak).
//
// Written as inline asm with a "memory" clobber: GCC 12's _tile_loadd/_tile_stored intrinsics
// declare no memory operand, and _tile_loadconfig declares only 8 bytes, so the stores that fill
// the 64-byte configuration can be dropped. The caller must have checked that
// dlm::cpu::detect_isa() == isa::amx (which also asks Linux for the tile data permission).
#pragma once

#include <chrono>
#include <cstdint>

#include <dlm/cpu/kernels/amx_config.hpp>

namespace dlm::bench::detail {

#if defined(__x86_64__)
enum class amx_op { bf16, int8 };

#define DLM_AMX_4(insn) insn " %%tmm5, %%tmm4, %%tmm0\n\t" insn " %%tmm5, %%tmm4, %%tmm1\n\t" \
                        insn " %%tmm5, %%tmm4, %%tmm2\n\t" insn " %%tmm5, %%tmm4, %%tmm3\n\t"

/// Multiply-adds × 2 per second of `iterations` rounds of 8 tile products (2 on each C tile).
inline double amx_rate(amx_op op, long iterations) {
    constexpr cpu::amx::tile_config cfg = cpu::amx::make_config(64, 16);  // eight tiles of 16 rows × 64 bytes
    alignas(64) std::uint8_t a[16 * 64], b[16 * 64];
    alignas(64) std::int32_t c[4][16 * 16];
    for (int i = 0; i < 16 * 64; ++i) {
        if (op == amx_op::bf16) {  // little-endian bf16 pairs: a in [1, 1.5), b about 1e-3
            a[i] = static_cast<std::uint8_t>(i % 2 ? 0x3f : 0x80 + (i / 2) % 64);
            b[i] = static_cast<std::uint8_t>(i % 2 ? 0x3a : 0x83);
        } else {
            a[i] = static_cast<std::uint8_t>(1 + (i * 37) % 100);
            b[i] = static_cast<std::uint8_t>(1 + (i * 11) % 50);
        }
    }
    constexpr long stride = 64;
    cpu::amx::load_config(cfg);
    __asm__ volatile("tilezero %%tmm0\n\ttilezero %%tmm1\n\ttilezero %%tmm2\n\ttilezero %%tmm3\n\t"
                     "tileloadd (%0,%2,1), %%tmm4\n\ttileloadd (%1,%2,1), %%tmm5" ::"r"(a),
                     "r"(b), "r"(stride)
                     : "memory");
    const auto t0 = std::chrono::steady_clock::now();
    if (op == amx_op::bf16)
        for (long it = 0; it < iterations; ++it) __asm__ volatile(DLM_AMX_4("tdpbf16ps") DLM_AMX_4("tdpbf16ps") ::: "memory");
    else
        for (long it = 0; it < iterations; ++it) __asm__ volatile(DLM_AMX_4("tdpbssd") DLM_AMX_4("tdpbssd") ::: "memory");
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    __asm__ volatile("tilestored %%tmm0, (%0,%4,1)\n\ttilestored %%tmm1, (%1,%4,1)\n\t"
                     "tilestored %%tmm2, (%2,%4,1)\n\ttilestored %%tmm3, (%3,%4,1)\n\ttilerelease" ::"r"(c[0]),
                     "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(stride)
                     : "memory");
    std::int32_t x = 0;  // keeps the results alive (the bits of the f32 sums, for bf16)
    for (const auto& tile : c)
        for (const std::int32_t v : tile) x ^= v;
    volatile std::int32_t sink = x;
    (void)sink;
    const double per_instruction = op == amx_op::bf16 ? 16.0 * 16 * 32 * 2 : 16.0 * 16 * 64 * 2;
    return per_instruction * 8 * static_cast<double>(iterations) / s;
}
#undef DLM_AMX_4
#endif

}  // namespace dlm::bench::detail
