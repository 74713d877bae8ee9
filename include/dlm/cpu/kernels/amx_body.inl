// dlm/cpu/kernels/amx_body.inl — the AMX kernels themselves (amx.hpp says what they compute),
// written against seven names the includer defines, so that the same code runs on the tile unit
// and, in the tests, on a software model of it (tests/support/amx_model.cpp):
//   DLM_TILE_LOAD(t, base, stride), DLM_TILE_STORE(t, base, stride), DLM_TILE_ZERO(t),
//   DLM_TDPBF16PS(c, a, b), DLM_TDPBSSD(c, a, b), DLM_TDPBSUD(c, a, b)   tile numbers as literals
//   DLM_TILE_CONFIG(config)                       ldtilecfg of an amx::tile_config: the calling thread's tiles
// Included (no include guard, on purpose) inside the includer's namespace and target region, after
// `namespace base = kernels_avx512_bf16;`; it undefines the seven names at its end. The GGUF
// block kernels are in amx_quant_body.inl, which this file includes.

using base::vfloat;
using base::vint;

inline constexpr isa isa_id = isa::amx;
inline constexpr const char* isa_name = "amx";
/// Rows of an A tile and columns of a C tile.
inline constexpr int tile_m = 16;

using amx::make_config;
using amx::tile_config;

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
/// passes. (Passes of 8 and 16 steps, whose B fits L1, measured no faster when each pass went over
/// all the panels: C's round trips through its ldc-apart rows cost what L1 saves. Inside a panel's
/// pass, blocks of 8 steps with C held in a contiguous buffer do gain: bf16_block_steps.)
inline constexpr index_t bf16_step_k = 32, bf16_pass_steps = 32;

/// Row tile `tile` of pack_bf16's output: a function of its own, so that the OpenMP region calling it
/// keeps this file's target (clang outlines a parallel region into a function without it).
inline void pack_bf16_tile(index_t tile, index_t m, index_t k, const float* a, std::ptrdiff_t lda, std::uint16_t* o) noexcept {
    const index_t steps = (k + bf16_step_k - 1) / bf16_step_k, full = k / bf16_step_k;
    std::uint16_t* ot = o + tile * tile_m * steps * bf16_step_k;
    for (int r = 0; r < tile_m; ++r) {
        const index_t row = tile * tile_m + r;
        for (index_t t = 0; t < steps; ++t) {
            std::uint16_t* dst = ot + (t * tile_m + r) * bf16_step_k;
            if (row >= m) {
                std::memset(dst, 0, bf16_step_k * sizeof(std::uint16_t));
            } else if (t < full) {
                const float* src = a + row * lda + t * bf16_step_k;
                base::bf16_daz16(src, dst);  // vcvtneps2bf16 and its fix-up (avx512_bf16.hpp)
                base::bf16_daz16(src + 16, dst + 16);
            } else {
                for (index_t e = 0; e < bf16_step_k; ++e) {
                    const index_t col = t * bf16_step_k + e;
                    dst[e] = col < k ? to_bf16_daz(a[row * lda + col]) : std::uint16_t{0};
                }
            }
        }
    }
}

/// A[m × k] as bf16 bits in tiles of 16 rows × 32 of k (a_format {16, 32}): the layout pack_a writes,
/// vectorized; rows past m and k past its end are zero.
inline void pack_bf16(index_t m, index_t k, const float* a, std::ptrdiff_t lda, void* out) noexcept {
    auto* o = static_cast<std::uint16_t*>(out);
    const index_t tiles = (m + tile_m - 1) / tile_m;
    [[maybe_unused]] const bool parallel = tiles > 1 && static_cast<double>(m) * k > 1e6;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (parallel)
#endif
    for (index_t tile = 0; tile < tiles; ++tile) pack_bf16_tile(tile, m, k, a, lda, o);
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

/// Where a bf16 product's A tiles are: packed (pack_bf16: a row tile's steps 512 elements apart,
/// rows 64 bytes apart) or bf16 rows read in place (rows `ld` elements apart, a step 32 on).
struct a_tiles {
    const std::uint16_t* a;
    std::ptrdiff_t tile;    ///< elements from a row tile to the next
    std::ptrdiff_t step;    ///< elements from a step of 32 of k to the next
    std::ptrdiff_t stride;  ///< bytes from a row to the next
    [[nodiscard]] static a_tiles packed(const std::uint16_t* a, index_t steps) noexcept {
        return {a, static_cast<std::ptrdiff_t>(tile_m) * steps * bf16_step_k, tile_m * bf16_step_k, 64};
    }
    [[nodiscard]] static a_tiles rows(const std::uint16_t* a, std::ptrdiff_t ld) noexcept { return {a, tile_m * ld, bf16_step_k, 2 * ld}; }
    [[nodiscard]] const std::uint16_t* at(index_t i, index_t t) const noexcept { return a + i * tile + t * step; }
};

/// C block (NA row tiles from row tile i × one panel) (=|+=) steps [s0, s0 + steps) of A and of
/// B's pair rows at b (the panel's step s0, ldb elements apart): C enters from `cb` (loaded when
/// `load`, else zero) and leaves into `out` (cb itself, or bf16_held's tiles between a pass's
/// blocks). Step t also prefetches the bytes
/// [pf + t·pf_step, pf + (t + 1)·pf_step) into L2: a share of the next block of B, which would
/// otherwise come from DRAM one tile row at a time.
template <int NA>
inline void bf16_block(index_t steps, const a_tiles& a, index_t i, index_t s0, const std::uint16_t* b, std::ptrdiff_t ldb, const c_block& cb,
                       bool load, const c_block& out, const char* pf, std::ptrdiff_t pf_step) noexcept {
    bf16_c_in<NA>(cb, load);
    const std::ptrdiff_t b_stride = ldb * 2;
    for (index_t t = 0; t < steps; ++t) {
        const std::uint16_t* bt = b + t * (bf16_step_k / 2) * ldb;
        for (std::ptrdiff_t off = 0; off < pf_step; off += 64) _mm_prefetch(pf + t * pf_step + off, _MM_HINT_T1);
        DLM_TILE_LOAD(6, bt, b_stride);
        DLM_TILE_LOAD(7, bt + 2 * tile_m, b_stride);
        DLM_TILE_LOAD(4, a.at(i, s0 + t), a.stride);
        DLM_TDPBF16PS(0, 4, 6);
        DLM_TDPBF16PS(1, 4, 7);
        if constexpr (NA == 2) {
            DLM_TILE_LOAD(5, a.at(i + 1, s0 + t), a.stride);
            DLM_TDPBF16PS(2, 5, 6);
            DLM_TDPBF16PS(3, 5, 7);
        }
    }
    bf16_c_out<NA>(out);
}

/// Steps per block: a panel's pass is cut into sub-passes of bf16_block_steps, each over all the
/// panel's row tiles, so that the sub-pass's B (16 KB) stays in L1 from a row-tile pair to the next
/// (a whole pass's 64 KB does not). C goes through memory between them as f32, exactly: each
/// element still sums its steps in k order. Blocks run for 2 to bf16_held_pairs row-tile pairs, so
/// the pass's A (at most 256 rows × 1024 of k, 512 KB) stays in L2 from a panel to the next. (They
/// once ran only where the call's whole A fitted in 1 MiB; 256-row calls at k = 4096 and 12288 then
/// ran whole passes, 4-8 % slower than in blocks: docs/benchmarks.md, "256-row tasks".)
inline constexpr index_t bf16_block_steps = 8;

/// Between a pass's blocks, a panel's C (blocks run only up to bf16_held_pairs row-tile pairs) waits in this
/// thread's contiguous buffer rather than in C, whose rows lie ldc apart (16 KiB at n = 4096: one L1
/// set). Its tiles are whole; rows and columns past C's compute values no valid element reads.
inline constexpr index_t bf16_held_pairs = 8;
[[nodiscard]] inline float* bf16_held() noexcept {
    alignas(64) static thread_local float h[bf16_held_pairs * 4 * tile_m * tile_m];  // 32 KiB
    return h;
}

/// The next block of B that a panel's pass prefetches into L2 (this pass of the next panel, else
/// the next pass of the first), spread
/// over the pass's blocks (sub-pass × row-tile pair): `share` bytes per block.
struct b_prefetch {
    const char* next = nullptr;
    std::ptrdiff_t share = 0;
    /// Block `unit`'s share of the bytes and, over its `steps`, the slice each step prefetches.
    [[nodiscard]] const char* at(index_t unit) const noexcept { return next != nullptr ? next + unit * share : nullptr; }
    [[nodiscard]] std::ptrdiff_t step(index_t steps) const noexcept { return next != nullptr && steps > 0 ? (share + steps - 1) / steps : 0; }
};

/// C[m × n] (=|+=) A · B over panels [p0, p1), `steps` steps of 32 of k (the tiles configured by the
/// caller): passes of bf16_pass_steps over each panel, each pass in blocks of bf16_block_steps over
/// the panel's row tiles, C through memory (bf16_held, then C) between them.
inline void bf16_panels(index_t m, index_t n, index_t steps, const a_tiles& a, const panel_view16& b, index_t p0, index_t p1, float* c,
                        std::ptrdiff_t ldc, bool accumulate) noexcept {
    const index_t tiles = (m + tile_m - 1) / tile_m, pairs = (tiles + 1) / 2;
    // One row-tile pair reads each block of B once whatever the blocks: whole passes, C through
    // memory 4 times less (the 8B shape's 32-row block step, 2 threads: 864 ms in blocks of 8
    // against 810 ms before them; whole passes again, 736 ms against 736).
    // More pairs than the held buffer takes: whole passes too (blocks with C's ldc-apart rows between
    // them gain nothing, bf16_pass_steps' note).
    const bool blocked = pairs > 1 && pairs <= bf16_held_pairs;
    const index_t block_steps = blocked ? bf16_block_steps : bf16_pass_steps;
    float* scratch = c_scratch();
    float* held = bf16_held();
    index_t s0 = 0;
    do {  // once for k == 0, so C is still zeroed
        const index_t sn = std::min(bf16_pass_steps, steps - s0), blocks = std::max<index_t>(1, (sn + block_steps - 1) / block_steps);
        for (index_t p = p0; p < p1; ++p) {
            const index_t col = p * panel_width;
            if (col >= n) break;
            const std::uint16_t* panel = b.data + p * b.panel_stride + s0 * (bf16_step_k / 2) * b.ldb;
            const bool last_panel = p + 1 >= p1 || col + panel_width >= n;
            // Nothing after the last pass of the range's last panel: prefetching the matrix's next
            // panel there (where linear's next task starts) cost the 168M block step up to 10 %.
            const bool more = s0 + sn < steps;
            const std::uint16_t* next = !last_panel ? panel + b.panel_stride
                                        : more      ? b.data + p0 * b.panel_stride + (s0 + sn) * (bf16_step_k / 2) * b.ldb
                                                    : nullptr;
            const index_t next_steps = !last_panel ? sn : more ? std::min(bf16_pass_steps, steps - s0 - sn) : 0;
            const std::ptrdiff_t bytes = static_cast<std::ptrdiff_t>(next_steps) * (bf16_step_k / 2) * b.ldb * 2;
            const b_prefetch pf{reinterpret_cast<const char*>(next), (bytes + blocks * pairs - 1) / (blocks * pairs)};
            for (index_t u = 0; u < blocks; ++u) {
                const index_t u0 = u * block_steps, un = std::min(block_steps, sn - u0);
                const bool load = accumulate || s0 + u0 > 0;
                const std::uint16_t* bu = panel + u0 * (bf16_step_k / 2) * b.ldb;
                for (index_t i = 0; i < tiles; i += 2) {
                    const c_block cb{c + i * tile_m * ldc + col, ldc, static_cast<int>(std::min<index_t>(2 * tile_m, m - i * tile_m)),
                                     static_cast<int>(std::min<index_t>(panel_width, n - col)), scratch};
                    const c_block hb{held + (blocked ? (i / 2) * 4 * tile_m * tile_m : 0), 2 * tile_m, 2 * tile_m, 2 * tile_m, scratch};
                    const c_block& in = u > 0 ? hb : cb;  // several blocks only where blocked
                    const c_block& out = u + 1 < blocks ? hb : cb;
                    const char* pfi = pf.at(u * pairs + i / 2);
                    if (tiles - i >= 2) bf16_block<2>(un, a, i, s0 + u0, bu, b.ldb, in, load, out, pfi, pf.step(un));
                    else bf16_block<1>(un, a, i, s0 + u0, bu, b.ldb, in, load, out, pfi, pf.step(un));
                }
            }
        }
        s0 += sn;
    } while (s0 < steps);
}

/// C[m × n] (=|+=) A · B over panels [p0, p1): A bf16 bits in tiles of 16 rows × 32 of k, B the
/// bf16 panels (k padded with zeros to a multiple of 32, table.hpp).
inline void gemm_bf16(index_t m, index_t n, index_t k, const void* av, const panel_view16& b, index_t p0, index_t p1, float* c,
                      std::ptrdiff_t ldc, bool accumulate) noexcept {
    if (m <= 0) return;
    DLM_TILE_CONFIG(bf16_config);
    const index_t steps = (k + bf16_step_k - 1) / bf16_step_k;
    bf16_panels(m, n, steps, a_tiles::packed(static_cast<const std::uint16_t*>(av), steps), b, p0, p1, c, ldc, accumulate);
}

/// Rows [0, m) of bf16 rows a (lda apart), columns [0, k), in pack_bf16's layout at `out`: rows past
/// m and k past its end zero. gemm_bf16_rows packs at most edge_elements: a row tile's pass, or the
/// last step of edge_elements / 32 rows.
inline constexpr index_t edge_elements = tile_m * bf16_pass_steps * bf16_step_k;
inline void pack_bf16_edge(index_t m, index_t k, const std::uint16_t* a, std::ptrdiff_t lda, std::uint16_t* out) noexcept {
    const index_t steps = (k + bf16_step_k - 1) / bf16_step_k, tiles = (m + tile_m - 1) / tile_m;
    for (index_t i = 0; i < tiles; ++i)
        for (index_t t = 0; t < steps; ++t)
            for (index_t r = 0; r < tile_m; ++r) {
                std::uint16_t* dst = out + ((i * steps + t) * tile_m + r) * bf16_step_k;
                const index_t row = i * tile_m + r, cols = row < m ? std::min(bf16_step_k, k - t * bf16_step_k) : 0;
                if (cols > 0) std::memcpy(dst, a + row * lda + t * bf16_step_k, static_cast<std::size_t>(cols) * sizeof(std::uint16_t));
                std::memset(dst + cols, 0, static_cast<std::size_t>(bf16_step_k - cols) * sizeof(std::uint16_t));
            }
}

/// gemm_bf16 with A's bf16 bits in place (product16::run_rows: rows lda elements apart, round_rows).
/// Whole tiles load straight from the rows; the edges a tile would read past (the last step's
/// columns past k, a last row tile of fewer than 16 rows) go through pack_bf16's layout in a
/// buffer of this thread, which zeroes what lies beyond them. Each edge is a pass of its own,
/// ending where gemm_bf16's passes end or after the last step: C passes through memory between
/// steps as f32, exactly, so the bits are those of gemm_bf16 on the packed A.
inline void gemm_bf16_rows(index_t m, index_t n, index_t k, const void* av, std::ptrdiff_t lda, const panel_view16& b, index_t p0,
                           index_t p1, float* c, std::ptrdiff_t ldc, bool accumulate) noexcept {
    if (m <= 0) return;
    DLM_TILE_CONFIG(bf16_config);
    alignas(64) static thread_local std::uint16_t edge[edge_elements];  // 32 KB
    const auto* a = static_cast<const std::uint16_t*>(av);
    const index_t whole_m = m / tile_m * tile_m, whole_steps = k / bf16_step_k, whole_k = whole_steps * bf16_step_k;
    if (whole_m > 0 && (whole_steps > 0 || k == 0)) bf16_panels(whole_m, n, whole_steps, a_tiles::rows(a, lda), b, p0, p1, c, ldc, accumulate);
    const panel_view16 tail_b{b.data + whole_k / 2 * b.ldb, b.panel_stride, b.ldb};
    constexpr index_t tail_rows = edge_elements / bf16_step_k;
    for (index_t r = 0; r < whole_m && whole_k < k; r += tail_rows) {  // the last step of the whole row tiles
        const index_t rows = std::min(tail_rows, whole_m - r);
        pack_bf16_edge(rows, k - whole_k, a + r * lda + whole_k, lda, edge);
        bf16_panels(rows, n, 1, a_tiles::packed(edge, 1), tail_b, p0, p1, c + r * ldc, ldc, accumulate || whole_k > 0);
    }
    const index_t steps = (k + bf16_step_k - 1) / bf16_step_k;
    for (index_t s0 = 0; whole_m < m && (s0 < steps || s0 == 0); s0 += bf16_pass_steps) {  // the last row tile, a pass at a time
        const index_t sn = std::min(bf16_pass_steps, steps - s0);
        pack_bf16_edge(m - whole_m, std::min(k - s0 * bf16_step_k, sn * bf16_step_k), a + whole_m * lda + s0 * bf16_step_k, lda, edge);
        const panel_view16 pass_b{b.data + s0 * (bf16_step_k / 2) * b.ldb, b.panel_stride, b.ldb};
        bf16_panels(m - whole_m, n, sn, a_tiles::packed(edge, sn), pass_b, p0, p1, c + whole_m * ldc, ldc, accumulate || s0 > 0);
    }
}

#include "amx_quant_body.inl"

inline constexpr kernel_table table{isa_id,
                                    isa_name,
                                    base::lanes,
                                    base::table.f32,
                                    base::table.f16,
                                    {"amx-bf16", {tile_m, static_cast<int>(bf16_step_k)}, a_values::bf16_bits, &pack_bf16, &gemm_bf16, &gemm_bf16_rows},
                                    {"none", {}, a_values::bf16_bits, nullptr, nullptr, nullptr},
                                    {"amx-int8", {tile_m, 64}, &base::quantize_rows<tile_m>, &gemm_quant},
                                    base::table.exp_shifted, base::table.exp_shifted_sum, base::table.scale_max,
                                    base::table.silu_gate,
                                    base::table.round_bf16,
                                    base::table.rms_norm,
                                    base::table.rotate_half};

// The names were the includer's for this file only.
#undef DLM_TILE_LOAD
#undef DLM_TILE_STORE
#undef DLM_TILE_ZERO
#undef DLM_TDPBF16PS
#undef DLM_TDPBSSD
#undef DLM_TDPBSUD
#undef DLM_TILE_CONFIG
