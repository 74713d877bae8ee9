// dlm/cpu/kernels/amx_body.inl — the AMX kernels themselves (amx.hpp says what they compute),
// written against seven names the includer defines, so that the same code runs on the tile unit
// and, in the tests, on a software model of it (tests/support/amx_model.cpp):
//   DLM_TILE_LOAD(t, base, stride), DLM_TILE_STORE(t, base, stride), DLM_TILE_ZERO(t),
//   DLM_TDPBF16PS(c, a, b), DLM_TDPBSSD(c, a, b), DLM_TDPBSUD(c, a, b)   tile numbers as literals
//   DLM_TILE_CONFIG(config)                       ldtilecfg of an amx::tile_config: the calling thread's tiles
// Included (no include guard, on purpose) inside the includer's namespace and target region, after
// `namespace base = kernels_avx512_bf16;`; it undefines the seven names at its end.

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
/// passes. (Passes of 8 and 16 steps, whose B fits L1, measured no faster: C's round trips cost
/// what L1 saves; /tmp-style sweeps in docs/benchmarks.md, "AMX".)
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
/// B's pair rows at b (the panel's step s0, ldb elements apart). Step t also prefetches the bytes
/// [pf + t·pf_step, pf + (t + 1)·pf_step) into L2: a share of the next block of B, which would
/// otherwise come from DRAM one tile row at a time.
template <int NA>
inline void bf16_block(index_t steps, const a_tiles& a, index_t i, index_t s0, const std::uint16_t* b, std::ptrdiff_t ldb, const c_block& cb,
                       bool load, const char* pf, std::ptrdiff_t pf_step) noexcept {
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
    bf16_c_out<NA>(cb);
}

/// C[m × n] (=|+=) A · B over panels [p0, p1), `steps` steps of 32 of k (the tiles configured by the
/// caller): passes of bf16_pass_steps over each panel's row tiles, C through memory between them.
inline void bf16_panels(index_t m, index_t n, index_t steps, const a_tiles& a, const panel_view16& b, index_t p0, index_t p1, float* c,
                        std::ptrdiff_t ldc, bool accumulate) noexcept {
    const index_t tiles = (m + tile_m - 1) / tile_m;
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
                const char* pfi = pf != nullptr ? pf + (i / 2) * share : nullptr;
                if (tiles - i >= 2) bf16_block<2>(sn, a, i, s0, panel, b.ldb, cb, load, pfi, pf_step);
                else bf16_block<1>(sn, a, i, s0, panel, b.ldb, cb, load, pfi, pf_step);
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

// ---- GGUF blocks -----------------------------------------------------------------------------

/// Q8_0 and Q4_0: tile products of one 32-k block (A 16 × 32 bytes, B 8 rows); the K-quants: of
/// 64 k with the sub-block scales folded into B (A 16 × 64 bytes, B 16 rows).
inline constexpr tile_config block32_config = make_config(32, 8);
inline constexpr tile_config kquant_config = make_config(64, 16);

/// `lanes` bytes (one per row of W) as 64 bytes, each repeated in its 32-bit lane: an AMX B row's
/// value per column for 4 consecutive k.
[[nodiscard]] inline __m512i per_column(const std::byte* p) noexcept {
    const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm512_mullo_epi32(d, _mm512_set1_epi32(0x01010101));
}

/// Quad row q (k = 4q .. 4q + 3 of the 16 rows) of a tile's unsigned quants u, as bytes.
template <io::gguf_type T>
[[nodiscard]] inline __m512i quad_row(const std::byte* w, int q) noexcept {
    constexpr quant::tile_geometry G = quant::geometry(T);
    const std::byte* qs = w + G.header_bytes;
    if constexpr (G.bits == 8) return _mm512_loadu_si512(qs + q * 64);
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const __m512i raw = _mm512_loadu_si512(qs + q / 2 * 64);
    __m512i u = _mm512_and_si512(q % 2 ? _mm512_srli_epi16(raw, 4) : raw, low4);
    if constexpr (G.high_bits() > 0) {
        const __m512i high = _mm512_loadu_si512(w + G.high_at() + q / G.high_quads() * 64);
        const __m512i h = _mm512_and_si512(_mm512_srli_epi16(high, G.high_bits() * (q % G.high_quads())), _mm512_set1_epi8(static_cast<char>(G.high_mask())));
        u = _mm512_or_si512(u, _mm512_slli_epi16(h, 4));
    }
    return u;
}

/// Q4_0's quants of one tile column widened to bytes as AMX B rows (block/4 rows of 64 bytes per
/// block; row q holds k = 4q .. 4q + 3 of the 16 rows), and made signed, u − 8: the tiles then sum
/// Σ(u − 8)·a, the integer every path's step forms as Σu·a − 8·Σa, and the step subtracts nothing
/// (with it, Q4_0's vector side took 1.5–1.7× as long: dlm-bench-quant --amx-vector-side).
template <io::gguf_type T>
inline void widen_tile_column(const std::byte* wcol, index_t blocks, std::uint8_t* out) noexcept {
    constexpr quant::tile_geometry G = quant::geometry(T);
    for (index_t s = 0; s < blocks; ++s)
        for (int q = 0; q < G.block / 4; ++q)
            _mm512_storeu_si512(out + (s * (G.block / 4) + q) * 64, _mm512_sub_epi8(quad_row<T>(wcol + s * G.tile_bytes(), q), _mm512_set1_epi8(G.offset)));
}

/// The K-quants' B operands for one tile column, per block (3 · block/4 rows of 64 bytes): the low
/// and high bytes of p = sc_j·u (p = lo + 256·hi, exact: |p| < 2^14), and the per-k mins m_j (Q4_K,
/// Q5_K) or scales sc_j (Q6_K). With them one tile product over any k sums Σ sc_j·u·a and
/// Σ m_j·a (Σ sc_j·a) exactly, so the sub-blocks need no vector step between them.
template <io::gguf_type T>
inline void kquant_operands(const std::byte* wcol, index_t blocks, std::uint8_t* out) noexcept {
    constexpr quant::tile_geometry G = quant::geometry(T);
    constexpr bool q6 = T == io::gguf_type::q6_k;
    constexpr int rows = G.block / 4;
    for (index_t s = 0; s < blocks; ++s) {
        const std::byte* w = wcol + s * G.tile_bytes();
        std::uint8_t* lo = out + s * 3 * rows * 64;
        std::uint8_t* hi = lo + rows * 64;
        std::uint8_t* mins = hi + rows * 64;
        for (int q = 0; q < rows; ++q) {
            const int j = q * 4 / G.sub;
            const __m512i sc = per_column(w + G.sc_at + j * quant::tile_rows);
            const __m512i u = quad_row<T>(w, q);
            // p = sc·u for the even and the odd bytes in 16-bit lanes (sc sign-extended for Q6_K),
            // then its low and high bytes put back in place: no packing across lanes.
            const __m512i low8 = _mm512_set1_epi16(0x00ff);
            const __m512i sc_even = q6 ? _mm512_srai_epi16(_mm512_slli_epi16(sc, 8), 8) : _mm512_and_si512(sc, low8);
            const __m512i sc_odd = q6 ? _mm512_srai_epi16(sc, 8) : _mm512_srli_epi16(sc, 8);
            const __m512i p_even = _mm512_mullo_epi16(_mm512_and_si512(u, low8), sc_even);
            const __m512i p_odd = _mm512_mullo_epi16(_mm512_srli_epi16(u, 8), sc_odd);
            // lo = (p_even & 0xff) | (p_odd << 8); hi = (p_even >> 8 & 0xff) | (p_odd & 0xff00)
            _mm512_storeu_si512(lo + q * 64, _mm512_ternarylogic_epi32(p_even, low8, _mm512_slli_epi16(p_odd, 8), 0xea));
            _mm512_storeu_si512(hi + q * 64, _mm512_ternarylogic_epi32(_mm512_srli_epi16(p_even, 8), low8, p_odd, 0xe2));
            _mm512_storeu_si512(mins + q * 64, q6 ? sc : per_column(w + G.m_at + j * quant::tile_rows));
        }
    }
}

// One 64-k step of a K-quant block into C tiles c0-c2 (Σ lo·a, Σ hi·a, Σ min·a): A in tile 6,
// each B in tile 7 just before its product.
#define DLM_KQUANT_STEP(c0, c1, c2, a, b, brow_bytes, s8)       \
    DLM_TILE_LOAD(6, a, 64);                                     \
    DLM_TILE_LOAD(7, b, 64);                                     \
    DLM_TDPBSUD(c0, 6, 7);                                       \
    DLM_TILE_LOAD(7, (b) + (brow_bytes), 64);                    \
    if constexpr (s8) DLM_TDPBSSD(c1, 6, 7);                     \
    else DLM_TDPBSUD(c1, 6, 7);                                  \
    DLM_TILE_LOAD(7, (b) + 2 * (brow_bytes), 64);                \
    if constexpr (s8) DLM_TDPBSSD(c2, 6, 7);                     \
    else DLM_TDPBSUD(c2, 6, 7);

/// Issues block s's tile products for one row tile into C tiles 0-2 (Second: 3-5).
template <io::gguf_type T, bool Second>
inline void kquant_issue(const std::int8_t* ab, const std::uint8_t* lo) noexcept {
    constexpr quant::tile_geometry G = quant::geometry(T);
    constexpr bool q6 = T == io::gguf_type::q6_k;
    constexpr int brow_bytes = G.block / 4 * 64;
    if constexpr (Second) {
        DLM_TILE_ZERO(3);
        DLM_TILE_ZERO(4);
        DLM_TILE_ZERO(5);
    } else {
        DLM_TILE_ZERO(0);
        DLM_TILE_ZERO(1);
        DLM_TILE_ZERO(2);
    }
    for (int st = 0; st < G.block / 64; ++st) {
        const std::int8_t* at = ab + st * tile_m * 64;
        const std::uint8_t* bt = lo + st * 16 * 64;
        if constexpr (Second) {
            DLM_KQUANT_STEP(3, 4, 5, at, bt, brow_bytes, q6)
        } else {
            DLM_KQUANT_STEP(0, 1, 2, at, bt, brow_bytes, q6)
        }
    }
}

template <bool Second>
inline void kquant_store(std::int32_t* out) noexcept {
    constexpr int t16 = tile_m * tile_m;
    if constexpr (Second) {
        DLM_TILE_STORE(3, out, 64);
        DLM_TILE_STORE(4, out + t16, 64);
        DLM_TILE_STORE(5, out + 2 * t16, 64);
    } else {
        DLM_TILE_STORE(0, out, 64);
        DLM_TILE_STORE(1, out + t16, 64);
        DLM_TILE_STORE(2, out + 2 * t16, 64);
    }
}

/// C[rows × n_valid] (rows ≤ 16) of one row tile and one tile column of K-quant W: per block, the
/// three sums by tile products over 64 k at a time, then the block's f32 step. Blocks alternate
/// between two sets of C tiles, so block s + 1's products run while block s's step is computed.
template <io::gguf_type T>
inline void kquant_rows(const quant::activation_view& a, const std::int8_t* aq, index_t tile, const std::byte* wcol, const std::uint8_t* ops,
                        index_t blocks, int rows, float* c, std::ptrdiff_t ldc, int n_valid) noexcept {
    constexpr quant::tile_geometry G = quant::geometry(T);
    constexpr int brows = G.block / 4, amr = tile_m, t16 = tile_m * tile_m;
    alignas(64) std::int32_t sums3[2][3 * t16];
    vfloat acc[tile_m];
    for (int r = 0; r < rows; ++r) acc[r] = vfloat{};
    auto issue = [&](index_t s) {
        const std::int8_t* ab = aq + s * G.block * amr;
        const std::uint8_t* lo = ops + s * 3 * brows * 64;
        if (s % 2) kquant_issue<T, true>(ab, lo);
        else kquant_issue<T, false>(ab, lo);
    };
    if (blocks > 0) issue(0);
    for (index_t s = 0; s < blocks; ++s) {
        std::int32_t* sb = sums3[s % 2];
        if (s % 2) kquant_store<true>(sb);
        else kquant_store<false>(sb);
        if (s + 1 < blocks) issue(s + 1);
        const std::byte* w = wcol + s * G.tile_bytes();
        const vfloat d = base::load_f16(reinterpret_cast<const std::uint16_t*>(w));
        const vfloat dmin = G.mins ? base::load_f16(reinterpret_cast<const std::uint16_t*>(w) + quant::tile_rows) : vfloat{};
        for (int r = 0; r < rows; ++r) {
            vint plo, phi, msum;
            std::memcpy(&plo, sb + r * tile_m, sizeof plo);
            std::memcpy(&phi, sb + t16 + r * tile_m, sizeof phi);
            std::memcpy(&msum, sb + 2 * t16 + r * tile_m, sizeof msum);
            const std::int32_t* sums = a.sums + ((tile * blocks + s) * (G.block / 16)) * amr + r;
            acc[r] = base::quant_block_finish<T, 0>(acc[r], plo + (phi << 8), msum, d, dmin, sums, amr, a.scale[(tile * blocks + s) * amr + r]);
        }
    }
    for (int r = 0; r < rows; ++r) {
        if (n_valid >= tile_m) base::vstore(c + r * ldc, acc[r]);
        else base::vstore_partial(c + r * ldc, acc[r], n_valid);
    }
}
#undef DLM_KQUANT_STEP

/// A unit of the Q8_0 / Q4_0 product: block s (32 k).
template <io::gguf_type T>
struct quant_unit {
    static constexpr quant::tile_geometry G = quant::geometry(T);
    static_assert(!G.scales && G.block == 32, "K-quants take kquant_rows");
    index_t s;
    /// Its quants as AMX B rows (64 bytes each, 8 of them).
    [[nodiscard]] const std::uint8_t* b(const std::byte* wcol, const std::uint8_t* wide) const noexcept {
        return G.bits == 8 ? reinterpret_cast<const std::uint8_t*>(wcol + s * G.tile_bytes() + G.header_bytes) : wide + s * G.block / 4 * 64;
    }
    /// The first row tile's quants for it (16 rows, 32 bytes apart).
    [[nodiscard]] const std::int8_t* a(const std::int8_t* aq) const noexcept { return aq + s * G.block * tile_m; }
};

/// Issues the tile products of two blocks (the second where `two`) for NA row tiles: block 0 into
/// C tiles 0-1 by B tile 6, block 1 into C tiles 2-3 by B tile 7. Their integer sums stay in the
/// tiles until quant_store; meanwhile the vector unit works on the previous pair's.
template <io::gguf_type T, int NA>
inline void quant_issue(const quant_unit<T>& u0, const quant_unit<T>& u1, bool two, const std::int8_t* aq, std::ptrdiff_t a_tile,
                        const std::byte* wcol, const std::uint8_t* wide) noexcept {
    constexpr bool s8 = quant::geometry(T).signed_q || quant::geometry(T).bits != 8;  // Q4_0 widened signed
    // One block's products: C tiles c0 (row tile 0) and c1 (row tile 1) by B tile b.
#define DLM_QUANT_BLOCK(c0, c1, bt, u)                      \
    DLM_TILE_ZERO(c0);                                     \
    DLM_TILE_LOAD(bt, (u).b(wcol, wide), 64);               \
    DLM_TILE_LOAD(4, (u).a(aq), 32);                       \
    if constexpr (s8) DLM_TDPBSSD(c0, 4, bt);               \
    else DLM_TDPBSUD(c0, 4, bt);                            \
    if constexpr (NA == 2) {                               \
        DLM_TILE_ZERO(c1);                                 \
        DLM_TILE_LOAD(5, (u).a(aq) + a_tile, 32);          \
        if constexpr (s8) DLM_TDPBSSD(c1, 5, bt);           \
        else DLM_TDPBSUD(c1, 5, bt);                        \
    }
    DLM_QUANT_BLOCK(0, 1, 6, u0)
    if (!two) return;
    DLM_QUANT_BLOCK(2, 3, 7, u1)
#undef DLM_QUANT_BLOCK
}

/// The issued sums to `out`: block 0's NA tiles, then block 1's.
template <int NA>
inline void quant_store(bool two, std::int32_t* out) noexcept {
    constexpr int tile = tile_m * tile_m;
    DLM_TILE_STORE(0, out, 64);
    if constexpr (NA == 2) DLM_TILE_STORE(1, out + tile, 64);
    if (!two) return;
    DLM_TILE_STORE(2, out + NA * tile, 64);
    if constexpr (NA == 2) DLM_TILE_STORE(3, out + (NA + 1) * tile, 64);
}

/// One block's f32 step (quant_block_step, the same as on every path) for `rows` rows.
template <io::gguf_type T>
inline void quant_epilogue(const quant_unit<T>& u, const std::int32_t* isum, int rows, const quant::activation_view& a, index_t tile0,
                           const std::byte* wcol, index_t blocks, vfloat* acc) noexcept {
    constexpr int amr = tile_m, sums16 = quant::geometry(T).block / 16;
    const std::byte* w = wcol + u.s * quant::geometry(T).tile_bytes();
    const vfloat d = base::load_f16(reinterpret_cast<const std::uint16_t*>(w));
    for (int r = 0; r < rows; ++r) {
        vint ksum;
        std::memcpy(&ksum, isum + r * tile_m, sizeof ksum);
        const index_t ti = tile0 + r / tile_m, rr = r % tile_m;
        const std::int32_t* sums = a.sums + ((ti * blocks + u.s) * sums16) * amr + rr;
        acc[r] = base::quant_block_step<T, 0, true>(acc[r], ksum, d, sums, amr, a.scale[(ti * blocks + u.s) * amr + rr]);
    }
}

/// C[rows × n_valid] for NA row tiles (rows ≤ 16·NA) and one tile column of Q8_0 / Q4_0 W. The
/// blocks go in pairs, software-pipelined: the tile products of pair p + 1 run while the vector
/// unit computes pair p's f32 steps, from a second buffer.
template <io::gguf_type T, int NA>
inline void quant_rows(const quant::activation_view& a, const std::int8_t* aq, index_t tile0, const std::byte* wcol, const std::uint8_t* wide,
                       index_t blocks, int rows, float* c, std::ptrdiff_t ldc, int n_valid) noexcept {
    constexpr int tile = tile_m * tile_m;
    const std::ptrdiff_t a_tile = static_cast<std::ptrdiff_t>(blocks) * quant::geometry(T).block * tile_m;
    alignas(64) std::int32_t isum[2][2 * NA * tile];
    vfloat acc[NA * tile_m];
    for (int r = 0; r < rows; ++r) acc[r] = vfloat{};
    if (blocks > 0) quant_issue<T, NA>({0}, {1}, blocks > 1, aq, a_tile, wcol, wide);
    for (index_t s = 0, buf = 0; s < blocks; s += 2, buf ^= 1) {
        const bool two = s + 1 < blocks;
        quant_store<NA>(two, isum[buf]);
        if (s + 2 < blocks) quant_issue<T, NA>({s + 2}, {s + 3}, s + 3 < blocks, aq, a_tile, wcol, wide);
        quant_epilogue<T>({s}, isum[buf], rows, a, tile0, wcol, blocks, acc);
        if (two) quant_epilogue<T>({s + 1}, isum[buf] + NA * tile, rows, a, tile0, wcol, blocks, acc);
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
    DLM_TILE_CONFIG(G.scales ? kquant_config : block32_config);
    const std::size_t group_bytes = static_cast<std::size_t>(b.blocks) * static_cast<std::size_t>(G.tile_bytes());
    const index_t tiles = (m + tile_m - 1) / tile_m;
    const std::ptrdiff_t a_tile = static_cast<std::ptrdiff_t>(b.blocks) * G.block * tile_m;
    // The K-quants' B operands (3·k·16 bytes) or Q4_0's bytes (k·16) for one tile column, in a
    // buffer of the calling thread, built once per tile column and read by every row tile.
    thread_local std::vector<std::uint8_t, aligned_allocator<std::uint8_t>> wide;
    if constexpr (G.scales || G.bits != 8) wide.resize(static_cast<std::size_t>(b.blocks) * G.block * quant::tile_rows * (G.scales ? 3 : 1));
    for (index_t g = g0; g < g1; ++g) {
        const index_t col = g * quant::tile_rows;
        if (col >= n) break;
        const int n_valid = static_cast<int>(std::min<index_t>(quant::tile_rows, n - col));
        const std::byte* wcol = b.data + static_cast<std::size_t>(g) * group_bytes;
        float* cg = c + col;
        if constexpr (G.scales) {
            kquant_operands<T>(wcol, b.blocks, wide.data());
            for (index_t i = 0; i < tiles; ++i)
                kquant_rows<T>(a, a.q + i * a_tile, i, wcol, wide.data(), b.blocks, static_cast<int>(std::min<index_t>(tile_m, m - i * tile_m)),
                               cg + i * tile_m * ldc, ldc, n_valid);
        } else {
            if constexpr (G.bits != 8) widen_tile_column<T>(wcol, b.blocks, wide.data());
            for (index_t i = 0; i < tiles; i += 2) {
                const int rows = static_cast<int>(std::min<index_t>(2 * tile_m, m - i * tile_m));
                float* ci = cg + i * tile_m * ldc;
                if (tiles - i >= 2) quant_rows<T, 2>(a, a.q + i * a_tile, i, wcol, wide.data(), b.blocks, rows, ci, ldc, n_valid);
                else quant_rows<T, 1>(a, a.q + i * a_tile, i, wcol, wide.data(), b.blocks, rows, ci, ldc, n_valid);
            }
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
                                    {"amx-bf16", {tile_m, static_cast<int>(bf16_step_k)}, a_values::bf16_bits, &pack_bf16, &gemm_bf16, &gemm_bf16_rows},
                                    {"none", {}, a_values::bf16_bits, nullptr, nullptr, nullptr},
                                    {"amx-int8", {tile_m, 64}, &base::quantize_rows<tile_m>, &gemm_quant},
                                    base::table.exp_shifted, base::table.exp_shifted_sum, base::table.scale_max,
                                    base::table.silu_gate,
                                    base::table.round_bf16};

// The names were the includer's for this file only.
#undef DLM_TILE_LOAD
#undef DLM_TILE_STORE
#undef DLM_TILE_ZERO
#undef DLM_TDPBF16PS
#undef DLM_TDPBSSD
#undef DLM_TDPBSUD
#undef DLM_TILE_CONFIG
