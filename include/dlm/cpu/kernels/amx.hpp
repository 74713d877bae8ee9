// dlm/cpu/kernels/amx.hpp — kernels for x86-64 with Intel AMX (Sapphire Rapids, Emerald Rapids,
// Granite Rapids): bf16 weights by TDPBF16PS and GGUF block weights by TDPBSUD/TDPBSSD on 16-row
// tiles, with the AVX-512 BF16 kernels (avx512_bf16.hpp) for everything else and for the
// quantized products' epilogues.
//
// bf16: A (activations rounded to bf16) packed in tiles of 16 rows × 32 of k (a_format {16, 32}),
// B read straight from the weights' panels (a k-pair row of a panel is 128 bytes, so a 16 × 16
// tile of B is 16 such rows, 64 bytes each). Each 32 of k is one TDPBF16PS per 16 × 16 of C; C
// stays in tile registers over 1024 of k, then passes through memory as f32 (exactly). The tile
// unit sums the 32 products of each step in its own order (not the pairwise order of vdpbf16ps:
// docs/determinism.md), so amx-bf16 is its own determinism class, still batch-, row- and
// thread-invariant: every row of C is computed by the same instructions whatever m is.
//
// GGUF blocks: activations quantized as on every path (int8, a scale per row and block), packed
// in tiles of 16 rows with a row's 32 quants side by side; the weights' tiles (quant/layout.hpp)
// are already AMX B tiles for 8-bit quants (a 64-byte chunk holds 4 k of 16 rows), and 4- and
// 6-bit quants are widened to bytes per tile column into a buffer of the calling thread. One tile
// product per sub-block gives its exact integer sums; the scales are applied by the same f32 step
// as on every instruction set (quant_body.inl, quant_block_step), so the quantized products give
// the same bits on every path, AMX included.
//
// The tile configuration is loaded by each kernel call on the calling thread; the OS's permission
// to use the tile data is asked once per process by dispatch.hpp before this path is offered.
#pragma once

#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../simd.hpp"
#include "avx512_bf16.hpp"
#include "table.hpp"

#define DLM_KERNEL_TARGET "avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx512vnni,avx2,fma,f16c"
#include "target_begin.inl"

// The tile instructions as inline assembly with a memory clobber: GCC 12's intrinsics declare no
// memory operand for tileloadd / tilestored (so stores that fill a buffer before a tile load, or
// loads after a tile store, could be moved across them) and only 8 bytes for ldtilecfg.
#define DLM_TILE_LOAD(t, base, stride) \
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"(base), "r"(static_cast<long>(stride)) : "memory")
#define DLM_TILE_STORE(t, base, stride) \
    __asm__ volatile("tilestored %%tmm" #t ", (%0,%1,1)" ::"r"(base), "r"(static_cast<long>(stride)) : "memory")
#define DLM_TILE_ZERO(t) __asm__ volatile("tilezero %%tmm" #t ::)
#define DLM_TDPBF16PS(c, a, b) __asm__ volatile("tdpbf16ps %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::)
#define DLM_TDPBSSD(c, a, b) __asm__ volatile("tdpbssd %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::)
#define DLM_TDPBSUD(c, a, b) __asm__ volatile("tdpbsud %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::)

namespace dlm::cpu::kernels_amx {

namespace base = kernels_avx512_bf16;
using base::vfloat;
using base::vint;

inline constexpr isa isa_id = isa::amx;
inline constexpr const char* isa_name = "amx";
/// Rows of an A tile and columns of a C tile.
inline constexpr int tile_m = 16;

/// A tile configuration (palette 1): rows and bytes per row of tiles 0-7.
struct alignas(64) tile_config {
    std::uint8_t palette = 1, start_row = 0;
    std::uint8_t reserved[14] = {};
    std::uint16_t colsb[16] = {};
    std::uint8_t rows[16] = {};
};
static_assert(sizeof(tile_config) == 64, "ldtilecfg reads 64 bytes");

/// Tiles 0-3 C (16 × 16 f32), 4-5 A (16 rows × a_bytes), 6-7 B (b_rows × 64 bytes).
[[nodiscard]] constexpr tile_config make_config(int a_bytes, int b_rows) noexcept {
    tile_config c;
    for (int t = 0; t < 8; ++t) {
        c.rows[t] = static_cast<std::uint8_t>(t >= 6 ? b_rows : tile_m);
        c.colsb[t] = static_cast<std::uint16_t>(t == 4 || t == 5 ? a_bytes : 64);
    }
    return c;
}
inline void load_config(const tile_config& c) noexcept { __asm__ volatile("ldtilecfg %0" ::"m"(c) : "memory"); }

/// The C tile of `rows` × `cols` (at most 16 × 16) at c, through `scratch` (rows 64 bytes apart)
/// when it is not whole: its elements outside the tile are never read or written.
inline void copy_tile_in(const float* c, std::ptrdiff_t ldc, int rows, int cols, float* scratch) noexcept {
    for (int r = 0; r < rows; ++r) std::memcpy(scratch + r * tile_m, c + r * ldc, static_cast<std::size_t>(cols) * sizeof(float));
}
inline void copy_tile_out(const float* scratch, float* c, std::ptrdiff_t ldc, int rows, int cols) noexcept {
    for (int r = 0; r < rows; ++r) std::memcpy(c + r * ldc, scratch + r * tile_m, static_cast<std::size_t>(cols) * sizeof(float));
}

/// Where C tile (row tile i, column half h) of a 32 × 32 block of C lives while the tiles hold it:
/// C itself when the block is whole, else a scratch tile of the calling thread.
struct c_block {
    float* c;
    std::ptrdiff_t ldc;
    int rows, cols;  ///< valid rows (1..32) and columns (1..32) of the block
    float* scratch;  ///< 4 tiles of 256 floats
    [[nodiscard]] bool whole() const noexcept { return rows == 2 * tile_m && cols == 2 * tile_m; }
    [[nodiscard]] int rows_of(int i) const noexcept { return std::min(tile_m, std::max(0, rows - i * tile_m)); }
    [[nodiscard]] int cols_of(int h) const noexcept { return std::min(tile_m, std::max(0, cols - h * tile_m)); }
    [[nodiscard]] float* at(int i, int h) const noexcept { return c + i * tile_m * ldc + h * tile_m; }
    [[nodiscard]] float* tile(int i, int h) const noexcept { return scratch + (2 * i + h) * tile_m * tile_m; }
};

[[nodiscard]] inline float* c_scratch() noexcept {
    alignas(64) static thread_local float s[4 * tile_m * tile_m];
    return s;
}

// ---- bf16 ----------------------------------------------------------------------------------------

inline constexpr tile_config bf16_config = make_config(64, 16);
/// 32 of k per tile step; 32 steps (1024 of k) per pass over a panel, C through memory between
/// passes. (Passes of 8 and 16 steps, whose B fits L1, measured no faster: C's round trips cost
/// what L1 saves; /tmp-style sweeps in docs/benchmarks.md, "AMX".)
inline constexpr index_t bf16_step_k = 32, bf16_pass_steps = 32;

/// to_bf16_daz (pack.hpp) of 16 floats: round to nearest even, NaN kept quiet, results without an
/// exponent (subnormal or zero) to a signed zero, the same bits as the scalar function.
[[nodiscard]] inline __m256i bf16_daz16(const float* x) noexcept {
    const __m512i u = _mm512_loadu_si512(x);
    const __m512i exp_mask = _mm512_set1_epi32(0x7f800000), man_mask = _mm512_set1_epi32(0x007fffff);
    const __mmask16 nan = _mm512_cmpeq_epi32_mask(_mm512_and_si512(u, exp_mask), exp_mask) &
                          _mm512_test_epi32_mask(u, man_mask);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i h = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
    h = _mm512_mask_mov_epi32(h, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
    const __mmask16 no_exp = _mm512_testn_epi32_mask(h, _mm512_set1_epi32(0x7f80));
    h = _mm512_mask_and_epi32(h, no_exp, h, _mm512_set1_epi32(0x8000));
    return _mm512_cvtepi32_epi16(h);
}

/// A[m × k] as bf16 bits in tiles of 16 rows × 32 of k (a_format {16, 32}): the layout pack_a writes,
/// vectorized; rows past m and k past its end are zero.
inline void pack_bf16(index_t m, index_t k, const float* a, std::ptrdiff_t lda, void* out) noexcept {
    auto* o = static_cast<std::uint16_t*>(out);
    const index_t steps = (k + bf16_step_k - 1) / bf16_step_k, tiles = (m + tile_m - 1) / tile_m, full = k / bf16_step_k;
    [[maybe_unused]] const bool parallel = tiles > 1 && static_cast<double>(m) * k > 1e6;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (parallel)
#endif
    for (index_t tile = 0; tile < tiles; ++tile) {
        std::uint16_t* ot = o + tile * tile_m * steps * bf16_step_k;
        for (int r = 0; r < tile_m; ++r) {
            const index_t row = tile * tile_m + r;
            for (index_t t = 0; t < steps; ++t) {
                std::uint16_t* dst = ot + (t * tile_m + r) * bf16_step_k;
                if (row >= m) {
                    std::memset(dst, 0, bf16_step_k * sizeof(std::uint16_t));
                } else if (t < full) {
                    const float* src = a + row * lda + t * bf16_step_k;
                    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), bf16_daz16(src));
                    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 16), bf16_daz16(src + 16));
                } else {
                    for (index_t e = 0; e < bf16_step_k; ++e) {
                        const index_t col = t * bf16_step_k + e;
                        dst[e] = col < k ? to_bf16_daz(a[row * lda + col]) : std::uint16_t{0};
                    }
                }
            }
        }
    }
}

/// Loads (or zeroes) C tiles 0-3 for the rows the block has (NA row tiles).
template <int NA>
inline void bf16_c_in(const c_block& b, bool load) noexcept {
    if (!load) {
        DLM_TILE_ZERO(0);
        DLM_TILE_ZERO(1);
        if constexpr (NA == 2) {
            DLM_TILE_ZERO(2);
            DLM_TILE_ZERO(3);
        }
        return;
    }
    const bool whole = b.whole();
    if (!whole)
        for (int i = 0; i < NA; ++i)
            for (int h = 0; h < 2; ++h) copy_tile_in(b.at(i, h), b.ldc, b.rows_of(i), b.cols_of(h), b.tile(i, h));
    const std::ptrdiff_t s = whole ? b.ldc * 4 : 64;
    DLM_TILE_LOAD(0, whole ? b.at(0, 0) : b.tile(0, 0), s);
    DLM_TILE_LOAD(1, whole ? b.at(0, 1) : b.tile(0, 1), s);
    if constexpr (NA == 2) {
        DLM_TILE_LOAD(2, whole ? b.at(1, 0) : b.tile(1, 0), s);
        DLM_TILE_LOAD(3, whole ? b.at(1, 1) : b.tile(1, 1), s);
    }
}

template <int NA>
inline void bf16_c_out(const c_block& b) noexcept {
    const bool whole = b.whole();
    const std::ptrdiff_t s = whole ? b.ldc * 4 : 64;
    DLM_TILE_STORE(0, whole ? b.at(0, 0) : b.tile(0, 0), s);
    DLM_TILE_STORE(1, whole ? b.at(0, 1) : b.tile(0, 1), s);
    if constexpr (NA == 2) {
        DLM_TILE_STORE(2, whole ? b.at(1, 0) : b.tile(1, 0), s);
        DLM_TILE_STORE(3, whole ? b.at(1, 1) : b.tile(1, 1), s);
    }
    if (!whole)
        for (int i = 0; i < NA; ++i)
            for (int h = 0; h < 2; ++h) copy_tile_out(b.tile(i, h), b.at(i, h), b.ldc, b.rows_of(i), b.cols_of(h));
}

/// C block (NA row tiles × one panel) (=|+=) `steps` tile steps: A tiles at a (the next row tile
/// a_tile elements on, a step 512 elements on), B the panel's pair rows at b (ldb elements apart).
/// Step t also prefetches the bytes [pf + t·pf_step, pf + (t + 1)·pf_step) into L2: a share of the
/// next block of B, which would otherwise come from DRAM one tile row at a time.
template <int NA>
inline void bf16_block(index_t steps, const std::uint16_t* a, std::ptrdiff_t a_tile, const std::uint16_t* b, std::ptrdiff_t ldb,
                       const c_block& cb, bool load, const char* pf, std::ptrdiff_t pf_step) noexcept {
    bf16_c_in<NA>(cb, load);
    const std::ptrdiff_t b_stride = ldb * 2;
    for (index_t t = 0; t < steps; ++t) {
        const std::uint16_t* at = a + t * tile_m * bf16_step_k;
        const std::uint16_t* bt = b + t * (bf16_step_k / 2) * ldb;
        for (std::ptrdiff_t off = 0; off < pf_step; off += 64) _mm_prefetch(pf + t * pf_step + off, _MM_HINT_T1);
        DLM_TILE_LOAD(6, bt, b_stride);
        DLM_TILE_LOAD(7, bt + 2 * tile_m, b_stride);
        DLM_TILE_LOAD(4, at, 64);
        DLM_TDPBF16PS(0, 4, 6);
        DLM_TDPBF16PS(1, 4, 7);
        if constexpr (NA == 2) {
            DLM_TILE_LOAD(5, at + a_tile, 64);
            DLM_TDPBF16PS(2, 5, 6);
            DLM_TDPBF16PS(3, 5, 7);
        }
    }
    bf16_c_out<NA>(cb);
}

/// C[m × n] (=|+=) A · B over panels [p0, p1): A bf16 bits in tiles of 16 rows × 32 of k, B the
/// bf16 panels (k padded with zeros to a multiple of 32, table.hpp).
inline void gemm_bf16(index_t m, index_t n, index_t k, const void* av, const panel_view16& b, index_t p0, index_t p1, float* c,
                      std::ptrdiff_t ldc, bool accumulate) noexcept {
    if (m <= 0) return;
    load_config(bf16_config);
    const auto* a = static_cast<const std::uint16_t*>(av);
    const index_t steps = (k + bf16_step_k - 1) / bf16_step_k, tiles = (m + tile_m - 1) / tile_m;
    const std::ptrdiff_t a_tile = static_cast<std::ptrdiff_t>(tile_m) * steps * bf16_step_k;
    float* scratch = c_scratch();
    index_t s0 = 0;
    do {  // once for k == 0, so C is still zeroed
        const index_t sn = std::min(bf16_pass_steps, steps - s0);
        const bool load = accumulate || s0 > 0;
        for (index_t p = p0; p < p1; ++p) {
            const index_t col = p * panel_width;
            if (col >= n) break;
            const std::uint16_t* panel = b.data + p * b.panel_stride + s0 * (bf16_step_k / 2) * b.ldb;
            // The next block of B (this pass of the next panel, else the next pass of the first):
            // its bytes, a share per row-tile pair, spread over the pair's steps.
            const bool last_panel = p + 1 >= p1 || col + panel_width >= n;
            const std::uint16_t* next = !last_panel ? panel + b.panel_stride
                                        : s0 + sn < steps ? b.data + p0 * b.panel_stride + (s0 + sn) * (bf16_step_k / 2) * b.ldb
                                                          : nullptr;
            const index_t next_steps = !last_panel ? sn : std::min(bf16_pass_steps, steps - s0 - sn);
            const std::ptrdiff_t bytes = static_cast<std::ptrdiff_t>(next_steps) * (bf16_step_k / 2) * b.ldb * 2;
            const index_t pairs = (tiles + 1) / 2;
            const std::ptrdiff_t share = (bytes + pairs - 1) / pairs;
            const std::ptrdiff_t pf_step = next != nullptr && sn > 0 ? (share + sn - 1) / sn : 0;
            const char* pf = next != nullptr ? reinterpret_cast<const char*>(next) : nullptr;
            for (index_t i = 0; i < tiles; i += 2) {
                const c_block cb{c + i * tile_m * ldc + col, ldc, static_cast<int>(std::min<index_t>(2 * tile_m, m - i * tile_m)),
                                 static_cast<int>(std::min<index_t>(panel_width, n - col)), scratch};
                const std::uint16_t* ai = a + i * a_tile + s0 * tile_m * bf16_step_k;
                const char* pfi = pf != nullptr ? pf + (i / 2) * share : nullptr;
                if (tiles - i >= 2) bf16_block<2>(sn, ai, a_tile, panel, b.ldb, cb, load, pfi, pf_step);
                else bf16_block<1>(sn, ai, a_tile, panel, b.ldb, cb, load, pfi, pf_step);
            }
        }
        s0 += sn;
    } while (s0 < steps);
}

// ---- GGUF blocks -----------------------------------------------------------------------------

template <int Sub>
inline constexpr tile_config quant_config = make_config(Sub, Sub / 4);

/// The quants of one tile column (16 rows of W, every block along k) as bytes in AMX B rows:
/// row q (64 bytes) holds k = 4q .. 4q + 3 of the 16 rows. 8-bit quants are that already and are
/// read in place; 4- and 6-bit ones are widened into `out` (k · 16 bytes).
template <io::gguf_type T>
inline void widen_tile_column(const std::byte* w, index_t blocks, std::uint8_t* out) noexcept {
    constexpr quant::tile_geometry G = quant::geometry(T);
    static_assert(G.bits != 8, "8-bit quants are read in place");
    const __m512i low4 = _mm512_set1_epi8(0x0f), low2 = _mm512_set1_epi8(0x03);
    for (index_t s = 0; s < blocks; ++s, w += G.tile_bytes()) {
        const std::byte* qs = w + G.header_bytes;
        std::uint8_t* o = out + s * (G.block / 4) * 64;
        for (int q = 0; q < G.block / 4; q += 2) {
            const __m512i raw = _mm512_loadu_si512(qs + q / 2 * 64);
            __m512i lo = _mm512_and_si512(raw, low4), hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
            if constexpr (G.bits == 6) {
                const __m512i high = _mm512_loadu_si512(w + G.high_at() + q / 4 * 64);
                const int shift = 2 * (q % 4);
                const __m512i h0 = _mm512_and_si512(_mm512_srli_epi16(high, shift), low2);
                const __m512i h1 = _mm512_and_si512(_mm512_srli_epi16(high, shift + 2), low2);
                lo = _mm512_or_si512(lo, _mm512_slli_epi16(h0, 4));
                hi = _mm512_or_si512(hi, _mm512_slli_epi16(h1, 4));
            }
            _mm512_storeu_si512(o + q * 64, lo);
            _mm512_storeu_si512(o + (q + 1) * 64, hi);
        }
    }
}

/// The integer sums of one sub-block for NA row tiles: tile products into `sums` (NA × 16 × 16).
template <io::gguf_type T, int NA>
inline void sub_block_sums(const std::int8_t* a0, std::ptrdiff_t a_tile, const std::uint8_t* b, std::int32_t* sums) noexcept {
    constexpr quant::tile_geometry G = quant::geometry(T);
    DLM_TILE_ZERO(0);
    DLM_TILE_LOAD(6, b, 64);
    DLM_TILE_LOAD(4, a0, 32);
    if constexpr (G.signed_q) DLM_TDPBSSD(0, 4, 6);
    else DLM_TDPBSUD(0, 4, 6);
    if constexpr (NA == 2) {
        DLM_TILE_ZERO(1);
        DLM_TILE_LOAD(5, a0 + a_tile, 32);
        if constexpr (G.signed_q) DLM_TDPBSSD(1, 5, 6);
        else DLM_TDPBSUD(1, 5, 6);
    }
    DLM_TILE_STORE(0, sums, 64);
    if constexpr (NA == 2) DLM_TILE_STORE(1, sums + tile_m * tile_m, 64);
}

/// C[rows × n_valid] for NA row tiles (rows ≤ 16·NA) and one tile column of W: every block's
/// sub-blocks by tile products, their integer sums scaled (K-quants) and summed in integers, then
/// each block's f32 step (quant_block_step, as on every path).
template <io::gguf_type T, int NA>
inline void quant_rows(const quant::activation_view& a, const std::int8_t* aq, index_t tile0, const std::byte* wcol, const std::uint8_t* wide,
                       index_t blocks, int rows, float* c, std::ptrdiff_t ldc, int n_valid) noexcept {
    constexpr quant::tile_geometry G = quant::geometry(T);
    constexpr int amr = tile_m, sums16 = G.block / 16;
    const std::ptrdiff_t a_tile = static_cast<std::ptrdiff_t>(blocks) * G.block * amr;
    alignas(64) std::int32_t isum[NA * tile_m * tile_m];
    vint ksum[NA * tile_m];
    vfloat acc[NA * tile_m];
    for (int r = 0; r < rows; ++r) acc[r] = vfloat{};
    for (index_t s = 0; s < blocks; ++s) {
        const std::byte* w = wcol + s * G.tile_bytes();
        const std::int8_t* ab = aq + s * G.block * amr;
        for (int j = 0; j < G.subs(); ++j) {
            const int k0 = j * G.sub;  // within the block
            const std::uint8_t* bq = G.bits == 8 ? reinterpret_cast<const std::uint8_t*>(w + G.header_bytes) + k0 / 4 * 64
                                                 : wide + (s * G.block + k0) / 4 * 64;
            sub_block_sums<T, NA>(ab + k0 / 32 * amr * 32 + k0 % 32, a_tile, bq, isum);
            if constexpr (G.scales) {
                const std::byte* sc_at = w + G.sc_at + j * quant::tile_rows;
                const vint sc = T == io::gguf_type::q6_k ? base::widen<true>(sc_at) : base::widen<false>(sc_at);
                for (int r = 0; r < rows; ++r) {
                    vint v;
                    std::memcpy(&v, isum + r * tile_m, sizeof v);
                    ksum[r] = j == 0 ? v * sc : ksum[r] + v * sc;
                }
            } else {
                for (int r = 0; r < rows; ++r) std::memcpy(&ksum[r], isum + r * tile_m, sizeof(vint));
            }
        }
        const vfloat d = base::load_f16(reinterpret_cast<const std::uint16_t*>(w));
        const vfloat dmin = G.mins ? base::load_f16(reinterpret_cast<const std::uint16_t*>(w) + quant::tile_rows) : vfloat{};
        for (int r = 0; r < rows; ++r) {
            const index_t ti = tile0 + r / tile_m, rr = r % tile_m;
            const std::int32_t* sums = a.sums + ((ti * blocks + s) * sums16) * amr + rr;
            acc[r] = base::quant_block_step<T, 0>(acc[r], ksum[r], w, d, dmin, sums, amr, a.scale[(ti * blocks + s) * amr + rr]);
        }
    }
    for (int r = 0; r < rows; ++r) {
        if (n_valid >= tile_m) base::vstore(c + r * ldc, acc[r]);
        else base::vstore_partial(c + r * ldc, acc[r], n_valid);
    }
}

template <io::gguf_type T>
inline void gemm_quant_typed(index_t m, index_t n, const quant::activation_view& a, const quant::tile_view& b, index_t g0, index_t g1,
                             float* c, std::ptrdiff_t ldc) noexcept {
    constexpr quant::tile_geometry G = quant::geometry(T);
    load_config(quant_config<G.sub>);
    const std::size_t group_bytes = static_cast<std::size_t>(b.blocks) * static_cast<std::size_t>(G.tile_bytes());
    const index_t tiles = (m + tile_m - 1) / tile_m;
    const std::ptrdiff_t a_tile = static_cast<std::ptrdiff_t>(b.blocks) * G.block * tile_m;
    thread_local std::vector<std::uint8_t, aligned_allocator<std::uint8_t>> wide;
    if constexpr (G.bits != 8) wide.resize(static_cast<std::size_t>(b.blocks) * G.block * quant::tile_rows);
    for (index_t g = g0; g < g1; ++g) {
        const index_t col = g * quant::tile_rows;
        if (col >= n) break;
        const int n_valid = static_cast<int>(std::min<index_t>(quant::tile_rows, n - col));
        const std::byte* wcol = b.data + static_cast<std::size_t>(g) * group_bytes;
        if constexpr (G.bits != 8) widen_tile_column<T>(wcol, b.blocks, wide.data());
        for (index_t i = 0; i < tiles; i += 2) {
            const int rows = static_cast<int>(std::min<index_t>(2 * tile_m, m - i * tile_m));
            float* ci = c + i * tile_m * ldc + col;
            if (tiles - i >= 2) quant_rows<T, 2>(a, a.q + i * a_tile, i, wcol, wide.data(), b.blocks, rows, ci, ldc, n_valid);
            else quant_rows<T, 1>(a, a.q + i * a_tile, i, wcol, wide.data(), b.blocks, rows, ci, ldc, n_valid);
        }
    }
}

inline void gemm_quant(index_t m, index_t n, const quant::activation_view& a, const quant::tile_view& b, index_t g0, index_t g1, float* c,
                       std::ptrdiff_t ldc) noexcept {
    switch (b.type) {
        case io::gguf_type::q8_0: gemm_quant_typed<io::gguf_type::q8_0>(m, n, a, b, g0, g1, c, ldc); break;
        case io::gguf_type::q4_0: gemm_quant_typed<io::gguf_type::q4_0>(m, n, a, b, g0, g1, c, ldc); break;
        case io::gguf_type::q4_k: gemm_quant_typed<io::gguf_type::q4_k>(m, n, a, b, g0, g1, c, ldc); break;
        case io::gguf_type::q5_k: gemm_quant_typed<io::gguf_type::q5_k>(m, n, a, b, g0, g1, c, ldc); break;
        case io::gguf_type::q6_k: gemm_quant_typed<io::gguf_type::q6_k>(m, n, a, b, g0, g1, c, ldc); break;
        default: break;
    }
}

inline constexpr kernel_table table{isa_id,
                                    isa_name,
                                    base::lanes,
                                    base::table.f32,
                                    base::table.f16,
                                    {"amx-bf16", {tile_m, static_cast<int>(bf16_step_k)}, a_values::bf16_bits, &pack_bf16, &gemm_bf16},
                                    {"none", {}, a_values::bf16_bits, nullptr, nullptr},
                                    {"amx-int8", {tile_m, 32}, &base::quantize_rows<tile_m, 32>, &gemm_quant},
                                    base::table.exp_shifted,
                                    base::table.silu_gate};

}  // namespace dlm::cpu::kernels_amx

#undef DLM_TILE_LOAD
#undef DLM_TILE_STORE
#undef DLM_TILE_ZERO
#undef DLM_TDPBF16PS
#undef DLM_TDPBSSD
#undef DLM_TDPBSUD

#include "target_end.inl"

#endif
