// tests/support/amx_model.cpp — dlm's AMX kernels (include/dlm/cpu/kernels/amx_body.inl) compiled
// against a software model of the tile instructions, as a kernel table (amx_model.hpp), so that the
// tests check their logic (tile configurations, operand layouts, partial tiles, epilogues) on any
// CPU with AVX-512 BF16, AMX or not. Its own library, compiled as dlm::cpu_kernels is
// (tests/CMakeLists.txt): the AVX-512 BF16 kernels it includes are inline, and the linker keeps one
// copy of each for the whole program, so every copy must be compiled alike (a copy from a suite's
// -O1 or -O0 translation unit made the sanitized decoding suites five times slower).
//
// The model follows the pseudocode of Intel's instruction set reference: a tile load fills the
// configured rows and bytes and zeroes the rest; TDPBSSD / TDPBSUD sum int8 products into int32
// lanes exactly (modulo 2^32); TDPBF16PS adds, per k pair, the even then the odd product to the f32
// lane with one FMA each, bf16 inputs denormal-as-zero and results flushed to zero. The tile unit
// sums bf16 products in an order of its own (docs/determinism.md), so under the model amx-bf16 keeps
// its class's properties (accuracy, invariance) but not the hardware's bits; the integer products
// are exact either way. A configuration the hardware would fault on (a product whose tiles do not
// agree, a tile used before ldtilecfg) aborts with a message.
#include "amx_model.hpp"

#if defined(__x86_64__)

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <dlm/cpu/dispatch.hpp>
#include <dlm/cpu/kernels/amx_config.hpp>
#include <dlm/cpu/kernels/avx512_bf16.hpp>
#include <dlm/cpu/kernels/table.hpp>

namespace dlm_test::amx_model {

struct tile_state {
    dlm::cpu::amx::tile_config config;
    bool configured = false;
    alignas(64) std::uint8_t tile[8][16][64] = {};
};
inline tile_state& state() noexcept {
    static thread_local tile_state s;
    return s;
}

[[noreturn]] inline void fault(const char* what, int t) noexcept {
    std::fprintf(stderr, "amx_model: %s (tile %d): the tile unit would fault here\n", what, t);
    std::abort();
}
inline int rows(int t) noexcept { return state().config.rows[t]; }
inline int colsb(int t) noexcept { return state().config.colsb[t]; }
inline void require_configured(int t) noexcept {
    if (!state().configured) fault("a tile instruction before ldtilecfg", t);
}

/// ldtilecfg: palette 1, at most 16 rows of at most 64 bytes a tile; every tile zeroed.
inline void configure(const dlm::cpu::amx::tile_config& c) noexcept {
    if (c.palette != 1) fault("palette other than 1", -1);
    for (int t = 0; t < 8; ++t)
        if (c.rows[t] > 16 || c.colsb[t] > 64 || c.colsb[t] % 4 != 0) fault("tile shape beyond palette 1", t);
    tile_state& s = state();
    s.config = c;
    s.configured = true;
    std::memset(s.tile, 0, sizeof s.tile);
}

inline void load(int t, const void* base, long stride) noexcept {
    require_configured(t);
    tile_state& s = state();
    std::memset(s.tile[t], 0, sizeof s.tile[t]);
    for (int r = 0; r < rows(t); ++r) std::memcpy(s.tile[t][r], static_cast<const std::uint8_t*>(base) + r * stride, static_cast<std::size_t>(colsb(t)));
}
inline void store(int t, void* base, long stride) noexcept {
    require_configured(t);
    for (int r = 0; r < rows(t); ++r) std::memcpy(static_cast<std::uint8_t*>(base) + r * stride, state().tile[t][r], static_cast<std::size_t>(colsb(t)));
}
inline void zero(int t) noexcept {
    require_configured(t);
    std::memset(state().tile[t], 0, sizeof state().tile[t]);
}

/// The shapes a product C += A·B needs: C rows × N lanes, A C's rows × K groups of 4 bytes, B K rows
/// of C's bytes.
inline void check_product(int c, int a, int b) noexcept {
    require_configured(c);
    if (rows(a) != rows(c)) fault("A's rows differ from C's", a);
    if (rows(b) != colsb(a) / 4) fault("B's rows differ from A's groups of 4 bytes", b);
    if (colsb(b) != colsb(c)) fault("B's bytes per row differ from C's", b);
}

template <class T>
T element(int t, int r, int i) noexcept {
    T v;
    std::memcpy(&v, state().tile[t][r] + i * sizeof(T), sizeof v);
    return v;
}
template <class T>
void set_element(int t, int r, int i, T v) noexcept {
    std::memcpy(state().tile[t][r] + i * sizeof(T), &v, sizeof v);
}

/// TDPBSSD (B signed) and TDPBSUD (B unsigned): A's bytes signed.
template <bool BSigned>
void dp_int8(int c, int a, int b) noexcept {
    check_product(c, a, b);
    for (int m = 0; m < rows(c); ++m)
        for (int n = 0; n < colsb(c) / 4; ++n) {
            std::uint32_t acc = static_cast<std::uint32_t>(element<std::int32_t>(c, m, n));
            for (int k = 0; k < colsb(a) / 4; ++k)
                for (int i = 0; i < 4; ++i) {
                    const int x = element<std::int8_t>(a, m, 4 * k + i);
                    const int y = BSigned ? int{element<std::int8_t>(b, k, 4 * n + i)} : int{element<std::uint8_t>(b, k, 4 * n + i)};
                    acc += static_cast<std::uint32_t>(x * y);
                }
            set_element(c, m, n, static_cast<std::int32_t>(acc));
        }
}

inline float bf16_daz(std::uint16_t h) noexcept {
    const float x = dlm::io::bf16_to_f32(h);
    return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x;
}
inline float ftz(float x) noexcept { return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x; }

inline void dpbf16ps(int c, int a, int b) noexcept {
    check_product(c, a, b);
    for (int m = 0; m < rows(c); ++m) {
        float tmp[16];
        for (int n = 0; n < colsb(c) / 4; ++n) tmp[n] = element<float>(c, m, n);
        for (int k = 0; k < colsb(a) / 4; ++k)
            for (int n = 0; n < colsb(c) / 4; ++n)
                for (int i = 0; i < 2; ++i)
                    tmp[n] = ftz(std::fma(bf16_daz(element<std::uint16_t>(a, m, 2 * k + i)), bf16_daz(element<std::uint16_t>(b, k, 2 * n + i)), tmp[n]));
        for (int n = 0; n < colsb(c) / 4; ++n) set_element(c, m, n, tmp[n]);
    }
}

}  // namespace dlm_test::amx_model

// The AMX kernels, once more, in their own namespace and against the model.
#include <immintrin.h>

#define DLM_KERNEL_TARGET "avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx512vnni,avx2,fma,f16c"
#include <dlm/cpu/kernels/target_begin.inl>

#define DLM_TILE_LOAD(t, base, stride) ::dlm_test::amx_model::load(t, base, static_cast<long>(stride))
#define DLM_TILE_STORE(t, base, stride) ::dlm_test::amx_model::store(t, base, static_cast<long>(stride))
#define DLM_TILE_ZERO(t) ::dlm_test::amx_model::zero(t)
#define DLM_TDPBF16PS(c, a, b) ::dlm_test::amx_model::dpbf16ps(c, a, b)
#define DLM_TDPBSSD(c, a, b) ::dlm_test::amx_model::dp_int8<true>(c, a, b)
#define DLM_TDPBSUD(c, a, b) ::dlm_test::amx_model::dp_int8<false>(c, a, b)
#define DLM_TILE_CONFIG(config) ::dlm_test::amx_model::configure(config)

namespace dlm::cpu::kernels_amx_model {

namespace base = kernels_avx512_bf16;

#include <dlm/cpu/kernels/amx_body.inl>

}  // namespace dlm::cpu::kernels_amx_model

#include <dlm/cpu/kernels/target_end.inl>

namespace dlm_test::amx_model {

const dlm::cpu::kernel_table& table() noexcept { return dlm::cpu::kernels_amx_model::table; }

}  // namespace dlm_test::amx_model

#endif
