// dlm/cpu/kernels/amx_quant_body.inl — the AMX kernels for GGUF block weights (amx.hpp says what
// they compute), written against amx_body.inl's tile names (DLM_TILE_LOAD, ...). Included by
// amx_body.inl only (no include guard, on purpose), inside its namespace and target region.

// ---- GGUF blocks -----------------------------------------------------------------------------

/// Q8_0 and Q4_0: tile products of one 32-k block (A 16 × 32 bytes, B 8 rows); the K-quants: of
/// 64 k with the sub-block scales folded into B (A 16 × 64 bytes, B 16 rows).
inline constexpr tile_config block32_config = make_config(32, 8);
inline constexpr tile_config kquant_config = make_config(64, 16);

/// Blocks of a tile column whose B operands are built at a time (the K-quants' 8 KB a block, Q4_0's
/// 512 bytes), so that the buffer holding them stays in L1 while every row tile reads it. Built for
/// a whole tile column at once, they left L1 on each store and were read back from L2: a 4096-deep
/// column's K-quant operands are 128 KB. Q8_0's B is the weights themselves, read in place, and
/// its chunks (16 blocks, 9 KB) are the span the row tiles read from L1 while the next is prefetched.
template <io::gguf_type T>
inline constexpr index_t chunk_blocks = quant::geometry(T).scales ? 2 : 16;

/// One tile column of W for a chunk of blocks [s0, s1): its weights, the B operands built for the
/// chunk (K-quants, Q4_0), where its rows' f32 sums wait between chunks, and C's 16 columns there
/// (n_valid of them in C).
struct quant_column {
    const std::byte* w;          ///< the tile column's blocks, from block 0
    const std::uint8_t* built;   ///< block s0's built operands
    index_t s0, s1, blocks;
    float* running;              ///< row r's 16 running sums at running + 16·r (every row tile's, contiguous)
    float* c;                    ///< row 0 of C's tile column
    std::ptrdiff_t ldc;
    int n_valid;
};

/// The f32 accumulators of a row tile's rows for a chunk's blocks: zero before a column's first
/// block, else what the chunk before left (f32 through memory, exactly: the same sums as one
/// pass). Between chunks they wait in a contiguous buffer, not in C, whose rows a power of two
/// apart (ldc) fall in one L1 set: loaded and stored there per chunk, they took a quarter of
/// Q4_0's 32-row vector side (perf on Zen 4).
inline void acc_in(vfloat* acc, int rows, const quant_column& col, index_t tile) noexcept {
    const float* running = col.running + tile * tile_m * tile_m;
    #pragma GCC unroll 16
    for (int r = 0; r < rows; ++r) acc[r] = col.s0 == 0 ? vfloat{} : base::vload(running + r * tile_m);
}
/// ... and after the chunk: to the buffer, or after the column's last block to C.
inline void acc_out(const vfloat* acc, int rows, const quant_column& col, index_t tile) noexcept {
    float* running = col.running + tile * tile_m * tile_m;
    float* c = col.c + tile * tile_m * col.ldc;
    #pragma GCC unroll 16
    for (int r = 0; r < rows; ++r) {
        if (col.s1 < col.blocks) base::vstore(running + r * tile_m, acc[r]);
        else if (col.n_valid >= tile_m) base::vstore(c + r * col.ldc, acc[r]);
        else base::vstore_partial(c + r * col.ldc, acc[r], col.n_valid);
    }
}

/// Asks for `bytes` of W from p into the cache, a line at a time, ahead of their use: the chunk
/// after the one being built, so its loads do not wait on memory (the hardware's prefetcher alone
/// left the builders' loads waiting about half their time, perf on Zen 4). A prefetch never
/// faults, so p may run past W's end.
inline void prefetch_lines(const std::byte* p, int bytes) noexcept {
    for (int off = 0; off < bytes; off += 64) _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
}

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

/// Q4_0's quants of `blocks` blocks of a tile column widened to bytes as AMX B rows (block/4 rows of
/// 64 bytes per block; row q holds k = 4q .. 4q + 3 of the 16 rows), and made signed, u − 8: the
/// tiles then sum Σ(u − 8)·a, the integer every path's step forms as Σu·a − 8·Σa, and the step
/// subtracts nothing (with it, Q4_0's vector side took 1.5–1.7× as long: dlm-bench-quant
/// --amx-vector-side).
template <io::gguf_type T>
inline void widen_tile_column(const std::byte* wcol, index_t blocks, std::uint8_t* out) noexcept {
    constexpr quant::tile_geometry G = quant::geometry(T);
    for (index_t s = 0; s < blocks; ++s) {
        prefetch_lines(wcol + (s + blocks) * G.tile_bytes(), G.tile_bytes());
        #pragma GCC unroll 8
        for (int q = 0; q < G.block / 4; ++q)
            _mm512_storeu_si512(out + (s * (G.block / 4) + q) * 64, _mm512_sub_epi8(quad_row<T>(wcol + s * G.tile_bytes(), q), _mm512_set1_epi8(G.offset)));
    }
}

/// The K-quants' B operands for `blocks` blocks of a tile column, per block (2 · block/4 rows of 64
/// bytes): the low and high bytes of p = sc_j·u (p = lo + 256·hi, exact: |p| < 2^14). With them
/// one tile product over any k sums Σ sc_j·u·a exactly, so the sub-blocks need no vector step
/// between them. The sum the block's step subtracts, Σ_j m_j·S_j (Q6_K: Σ_j sc_j·S_j), comes from
/// A's sub-block sums in the step (quant_block_msums, as on every path), not from a third product
/// on per-k copies of m_j: those copies were a third of the operand bytes built and stored, and
/// their products a third of the tile work (dlm-bench-quant --types q4_k --rows 32: see
/// docs/benchmarks.md, "the K-quants' third product").
/// Per sub-block, sc_j goes into the even and the odd bytes of a vector (zero in the others), and
/// one vpmaddubsw each makes p for u's even and odd bytes in 16-bit lanes (one product per lane:
/// no saturation); their low and high bytes are blended back in place.
template <io::gguf_type T>
inline void kquant_operands(const std::byte* wcol, index_t blocks, std::uint8_t* out) noexcept {
    constexpr quant::tile_geometry G = quant::geometry(T);
    constexpr int rows = G.block / 4, quads = G.sub / 4;
    constexpr __mmask64 odd = 0xaaaaaaaaaaaaaaaaull;
    const __m512i low8 = _mm512_set1_epi16(0x00ff);
    for (index_t s = 0; s < blocks; ++s) {
        const std::byte* w = wcol + s * G.tile_bytes();
        std::uint8_t* lo = out + s * 2 * rows * 64;
        std::uint8_t* hi = lo + rows * 64;
        for (int j = 0; j < G.subs(); ++j) {
            prefetch_lines(w + blocks * G.tile_bytes() + j * G.tile_bytes() / G.subs(), G.tile_bytes() / G.subs());
            const __m512i sc = per_column(w + G.sc_at + j * quant::tile_rows);
            const __m512i sc_even = _mm512_and_si512(sc, low8), sc_odd = _mm512_andnot_si512(low8, sc);
            #pragma GCC unroll 8
            for (int e = 0; e < quads; ++e) {
                const int q = j * quads + e;
                const __m512i u = quad_row<T>(w, q);
                const __m512i p_even = _mm512_maddubs_epi16(u, sc_even), p_odd = _mm512_maddubs_epi16(u, sc_odd);
                _mm512_storeu_si512(lo + q * 64, _mm512_mask_blend_epi8(odd, p_even, _mm512_slli_epi16(p_odd, 8)));
                _mm512_storeu_si512(hi + q * 64, _mm512_mask_blend_epi8(odd, _mm512_srli_epi16(p_even, 8), p_odd));
            }
        }
    }
}

// One 64-k step of a K-quant block into C tiles c0-c1 (Σ lo·a, Σ hi·a): A in tile 6, B in tiles
// 7 and 5 (two, so the second load need not wait for the first product).
#define DLM_KQUANT_STEP(c0, c1, a, b, brow_bytes, s8)           \
    DLM_TILE_LOAD(6, a, 64);                                     \
    DLM_TILE_LOAD(7, b, 64);                                     \
    DLM_TILE_LOAD(5, (b) + (brow_bytes), 64);                    \
    DLM_TDPBSUD(c0, 6, 7);                                       \
    if constexpr (s8) DLM_TDPBSSD(c1, 6, 5);                     \
    else DLM_TDPBSUD(c1, 6, 5);

/// Issues block s's tile products for one row tile into C tiles 0-1 (Second: 2-3).
template <io::gguf_type T, bool Second>
inline void kquant_issue(const std::int8_t* ab, const std::uint8_t* lo) noexcept {
    constexpr quant::tile_geometry G = quant::geometry(T);
    constexpr bool q6 = T == io::gguf_type::q6_k;
    constexpr int brow_bytes = G.block / 4 * 64;
    if constexpr (Second) {
        DLM_TILE_ZERO(2);
        DLM_TILE_ZERO(3);
    } else {
        DLM_TILE_ZERO(0);
        DLM_TILE_ZERO(1);
    }
    for (int st = 0; st < G.block / 64; ++st) {
        const std::int8_t* at = ab + st * tile_m * 64;
        const std::uint8_t* bt = lo + st * 16 * 64;
        if constexpr (Second) {
            DLM_KQUANT_STEP(2, 3, at, bt, brow_bytes, q6)
        } else {
            DLM_KQUANT_STEP(0, 1, at, bt, brow_bytes, q6)
        }
    }
}

template <bool Second>
inline void kquant_store(std::int32_t* out) noexcept {
    constexpr int t16 = tile_m * tile_m;
    if constexpr (Second) {
        DLM_TILE_STORE(2, out, 64);
        DLM_TILE_STORE(3, out + t16, 64);
    } else {
        DLM_TILE_STORE(0, out, 64);
        DLM_TILE_STORE(1, out + t16, 64);
    }
}

/// C[rows × n_valid] (rows ≤ 16) of row tile `tile` and a chunk of a K-quant tile column: per block,
/// the two sums by tile products over 64 k at a time, then the block's f32 step with the sub-block
/// sums' term (quant_block_msums). Blocks alternate
/// between two sets of C tiles, so block s + 1's products run while block s's step is computed.
/// Full: a whole tile (rows = 16), whose loops the compiler unrolls and whose 16 accumulators stay
/// in registers (the same steps as a partial tile's: a row's bits are the same either way).
template <io::gguf_type T, bool Full>
inline void kquant_rows(const quant::activation_view& a, const std::int8_t* aq, index_t tile, const quant_column& col, int rows_in) noexcept {
    constexpr quant::tile_geometry G = quant::geometry(T);
    const int rows = Full ? tile_m : rows_in;
    constexpr int brows = G.block / 4, amr = tile_m, t16 = tile_m * tile_m;
    alignas(64) std::int32_t sums2[2][2 * t16];
    vfloat acc[tile_m];
    acc_in(acc, rows, col, tile);
    auto issue = [&](index_t s) {
        const std::int8_t* ab = aq + s * G.block * amr;
        const std::uint8_t* lo = col.built + (s - col.s0) * 2 * brows * 64;
        if (s % 2) kquant_issue<T, true>(ab, lo);
        else kquant_issue<T, false>(ab, lo);
    };
    issue(col.s0);
    for (index_t s = col.s0; s < col.s1; ++s) {
        std::int32_t* sb = sums2[s % 2];
        if (s % 2) kquant_store<true>(sb);
        else kquant_store<false>(sb);
        if (s + 1 < col.s1) issue(s + 1);
        const std::byte* w = col.w + s * G.tile_bytes();
        const vfloat d = base::load_f16(reinterpret_cast<const std::uint16_t*>(w));
        const vfloat dmin = G.mins ? base::load_f16(reinterpret_cast<const std::uint16_t*>(w) + quant::tile_rows) : vfloat{};
        const index_t ab = tile * col.blocks + s;
        vint msum[tile_m];  // every row of the tile: A's rows past m hold zero sums
        base::quant_block_msums<T, tile_m>(w, 0, a.pairs + ab * quant::pair_words(G.block) * amr, amr, msum);
        #pragma GCC unroll 16
        for (int r = 0; r < rows; ++r) {
            vint plo, phi;
            std::memcpy(&plo, sb + r * tile_m, sizeof plo);
            std::memcpy(&phi, sb + t16 + r * tile_m, sizeof phi);
            acc[r] = base::quant_block_finish<T, 0>(acc[r], plo + (phi << 8), msum[r], d, dmin, a.sums + ab * (G.block / 16) * amr + r, amr, a.scale[ab * amr + r]);
        }
    }
    acc_out(acc, rows, col, tile);
}
#undef DLM_KQUANT_STEP

/// A unit of the Q8_0 / Q4_0 product: block s (32 k).
template <io::gguf_type T>
struct quant_unit {
    static constexpr quant::tile_geometry G = quant::geometry(T);
    static_assert(!G.scales && G.block == 32, "K-quants take kquant_rows");
    index_t s;
    /// Its quants as AMX B rows (64 bytes each, 8 of them): Q8_0's own, Q4_0's widened.
    [[nodiscard]] const std::uint8_t* b(const quant_column& col) const noexcept {
        return G.bits == 8 ? reinterpret_cast<const std::uint8_t*>(col.w + s * G.tile_bytes() + G.header_bytes) : col.built + (s - col.s0) * G.block / 4 * 64;
    }
    /// The first row tile's quants for it (16 rows, 32 bytes apart).
    [[nodiscard]] const std::int8_t* a(const std::int8_t* aq) const noexcept { return aq + s * G.block * tile_m; }
};

/// Issues the tile products of two blocks (the second where `two`) for NA row tiles: block 0 into
/// C tiles 0-1 by B tile 6, block 1 into C tiles 2-3 by B tile 7. Their integer sums stay in the
/// tiles until quant_store; meanwhile the vector unit works on the previous pair's.
template <io::gguf_type T, int NA>
inline void quant_issue(const quant_unit<T>& u0, const quant_unit<T>& u1, bool two, const std::int8_t* aq, std::ptrdiff_t a_tile,
                        const quant_column& col) noexcept {
    constexpr bool s8 = quant::geometry(T).signed_q || quant::geometry(T).bits != 8;  // Q4_0 widened signed
    // One block's products: C tiles c0 (row tile 0) and c1 (row tile 1) by B tile b.
#define DLM_QUANT_BLOCK(c0, c1, bt, u)                      \
    DLM_TILE_ZERO(c0);                                     \
    DLM_TILE_LOAD(bt, (u).b(col), 64);                      \
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
                           const quant_column& col, vfloat* acc) noexcept {
    constexpr int amr = tile_m, sums16 = quant::geometry(T).block / 16;
    const std::byte* w = col.w + u.s * quant::geometry(T).tile_bytes();
    const vfloat d = base::load_f16(reinterpret_cast<const std::uint16_t*>(w));
    #pragma GCC unroll 32
    for (int r = 0; r < rows; ++r) {
        vint ksum;
        std::memcpy(&ksum, isum + r * tile_m, sizeof ksum);
        const index_t ti = tile0 + r / tile_m, rr = r % tile_m;
        const std::int32_t* sums = a.sums + ((ti * col.blocks + u.s) * sums16) * amr + rr;
        acc[r] = base::quant_block_step<T, 0>(acc[r], ksum, d, sums, amr, a.scale[(ti * col.blocks + u.s) * amr + rr]);
    }
}

/// C[rows × n_valid] for NA row tiles from tile0 (rows ≤ 16·NA) and a chunk of a Q8_0 / Q4_0 tile
/// column. The blocks go in pairs, software-pipelined: the tile products of pair p + 1 run while
/// the vector unit computes pair p's f32 steps, from a second buffer.
/// Full: NA whole tiles (rows = 16·NA), unrolled as kquant_rows' are.
template <io::gguf_type T, int NA, bool Full>
inline void quant_rows(const quant::activation_view& a, const std::int8_t* aq, index_t tile0, const quant_column& col, int rows_in) noexcept {
    constexpr int tile = tile_m * tile_m;
    const int rows = Full ? NA * tile_m : rows_in;
    const std::ptrdiff_t a_tile = static_cast<std::ptrdiff_t>(col.blocks) * quant::geometry(T).block * tile_m;
    alignas(64) std::int32_t isum[2][2 * NA * tile];
    vfloat acc[NA * tile_m];
    for (int i = 0; i < NA; ++i) acc_in(acc + i * tile_m, std::clamp(rows - i * tile_m, 0, tile_m), col, tile0 + i);
    const index_t s0 = col.s0, s1 = col.s1;
    quant_issue<T, NA>({s0}, {s0 + 1}, s0 + 1 < s1, aq, a_tile, col);
    for (index_t s = s0, buf = 0; s < s1; s += 2, buf ^= 1) {
        const bool two = s + 1 < s1;
        // Q8_0, which builds nothing: the first row tiles prefetch the next chunk's pair of blocks.
        if constexpr (quant::geometry(T).bits == 8) {
            constexpr int tb = quant::geometry(T).tile_bytes();
            if (tile0 == 0) prefetch_lines(col.w + (s + s1 - s0) * tb, 2 * tb);
        }
        quant_store<NA>(two, isum[buf]);
        if (s + 2 < s1) quant_issue<T, NA>({s + 2}, {s + 3}, s + 3 < s1, aq, a_tile, col);
        quant_epilogue<T>({s}, isum[buf], rows, a, tile0, col, acc);
        if (two) quant_epilogue<T>({s + 1}, isum[buf] + NA * tile, rows, a, tile0, col, acc);
    }
    for (int i = 0; i < NA; ++i) acc_out(acc + i * tile_m, std::clamp(rows - i * tile_m, 0, tile_m), col, tile0 + i);
}

/// The row tiles of one chunk of a tile column: the K-quants one at a time, Q8_0 and Q4_0 in pairs.
template <io::gguf_type T>
inline void quant_chunk(index_t m, const quant::activation_view& a, const quant_column& col) noexcept {
    const index_t tiles = (m + tile_m - 1) / tile_m;
    const std::ptrdiff_t a_tile = static_cast<std::ptrdiff_t>(col.blocks) * quant::geometry(T).block * tile_m;
    if constexpr (quant::geometry(T).scales) {
        for (index_t i = 0; i < tiles; ++i) {
            const int rows = static_cast<int>(std::min<index_t>(tile_m, m - i * tile_m));
            if (rows == tile_m) kquant_rows<T, true>(a, a.q + i * a_tile, i, col, rows);
            else kquant_rows<T, false>(a, a.q + i * a_tile, i, col, rows);
        }
    } else {
        for (index_t i = 0; i < tiles; i += 2) {
            const int rows = static_cast<int>(std::min<index_t>(2 * tile_m, m - i * tile_m));
            if (rows == 2 * tile_m) quant_rows<T, 2, true>(a, a.q + i * a_tile, i, col, rows);
            else if (tiles - i >= 2) quant_rows<T, 2, false>(a, a.q + i * a_tile, i, col, rows);
            else if (rows == tile_m) quant_rows<T, 1, true>(a, a.q + i * a_tile, i, col, rows);
            else quant_rows<T, 1, false>(a, a.q + i * a_tile, i, col, rows);
        }
    }
}

template <io::gguf_type T>
inline void gemm_quant_typed(index_t m, index_t n, const quant::activation_view& a, const quant::tile_view& b, index_t g0, index_t g1,
                             float* c, std::ptrdiff_t ldc) noexcept {
    constexpr quant::tile_geometry G = quant::geometry(T);
    constexpr bool builds = G.scales || G.bits != 8;
    DLM_TILE_CONFIG(G.scales ? kquant_config : block32_config);
    const std::size_t group_bytes = static_cast<std::size_t>(b.blocks) * static_cast<std::size_t>(G.tile_bytes());
    const index_t tiles = (m + tile_m - 1) / tile_m;
    const index_t chunk = std::min<index_t>(chunk_blocks<T>, b.blocks);
    // The built B operands (the K-quants' 2·k·16 bytes, Q4_0's k·16) of one chunk of a tile column,
    // in a buffer of the calling thread, read by every row tile.
    thread_local std::vector<std::uint8_t, aligned_allocator<std::uint8_t>> built;
    if constexpr (builds) built.resize(static_cast<std::size_t>(chunk) * G.block * quant::tile_rows * (G.scales ? 2 : 1));
    // The rows' running sums between chunks: 64 bytes a row (of A's rows, which the caller holds).
    thread_local std::vector<float, aligned_allocator<float>> running;
    running.resize(static_cast<std::size_t>(tiles) * tile_m * tile_m);
    for (index_t g = g0; g < g1; ++g) {
        const index_t col0 = g * quant::tile_rows;
        if (col0 >= n) break;
        quant_column col{b.data + static_cast<std::size_t>(g) * group_bytes, built.data(), 0, 0, b.blocks, running.data(), c + col0, ldc,
                         static_cast<int>(std::min<index_t>(quant::tile_rows, n - col0))};
        for (; col.s0 < b.blocks; col.s0 = col.s1) {
            col.s1 = std::min<index_t>(b.blocks, col.s0 + chunk);
            const std::byte* ws = col.w + col.s0 * G.tile_bytes();
            if constexpr (G.scales) kquant_operands<T>(ws, col.s1 - col.s0, built.data());
            else if constexpr (builds) widen_tile_column<T>(ws, col.s1 - col.s0, built.data());
            quant_chunk<T>(m, a, col);
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
