// dlm/cpu/kernels/amx_config.hpp — the AMX tile configuration (palette 1) and its loading: plain
// data and one instruction, shared by the AMX kernels (amx.hpp) and the benchmarks' AMX peaks.
//
// Loaded by inline assembly with the whole 64-byte object as its operand: GCC 12's
// _tile_loadconfig declares only an 8-byte read, so the stores that fill the configuration can be
// dropped and ldtilecfg faults.
#pragma once

#if defined(__x86_64__)

#include <cstdint>

namespace dlm::cpu::amx {

/// Rows and bytes per row of tiles 0-7 (ldtilecfg's 64 bytes).
struct alignas(64) tile_config {
    std::uint8_t palette = 1, start_row = 0;
    std::uint8_t reserved[14] = {};
    std::uint16_t colsb[16] = {};
    std::uint8_t rows[16] = {};
};
static_assert(sizeof(tile_config) == 64, "ldtilecfg reads 64 bytes");

/// Tiles 0-3 C (16 rows × 64 bytes), 4-5 A (16 rows × a_bytes), 6-7 B (b_rows × 64 bytes).
[[nodiscard]] constexpr tile_config make_config(int a_bytes, int b_rows) noexcept {
    tile_config c;
    for (int t = 0; t < 8; ++t) {
        c.rows[t] = static_cast<std::uint8_t>(t >= 6 ? b_rows : 16);
        c.colsb[t] = static_cast<std::uint16_t>(t == 4 || t == 5 ? a_bytes : 64);
    }
    return c;
}

/// Makes `c` the calling thread's tile configuration (zeroing every tile).
inline void load_config(const tile_config& c) noexcept { __asm__ volatile("ldtilecfg %0" ::"m"(c) : "memory"); }

}  // namespace dlm::cpu::amx

#endif
