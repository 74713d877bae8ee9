// dlm/cpu/kernels/body.inl — the kernels, written once for every instruction set.
//
// Included (no include guard, on purpose) inside namespace dlm::cpu::kernels::<isa> by each
// instruction-set file, within that file's target region, after it defined:
//   isa_id, isa_name, lanes          the instruction set and its f32 lanes per vector
//   vfloat                           `lanes` floats (GCC/Clang vector extension)
//   vfma(a, b, c)                    a · b + c per lane, fused where the target has FMA
//   load_f16(p)                      `lanes` IEEE halves widened to floats
//   mr_f32, mr_bf16                  rows of A per register tile
// and, where DLM_KERNEL_BF16_DOT is defined, the vdpbf16ps primitives:
//   a16_t, b16_t, bcast_a16(p),      one bf16 pair of A broadcast, `lanes` pairs of B, and
//   load_b16(p), dot2(acc, a, b)     acc + a_odd·b_odd + a_even·b_even in that order
// and, where DLM_KERNEL_BF16_CONVERT is defined, the conversion to bf16 (vcvtneps2bf16):
//   bf16_daz16(x, out)               to_bf16_daz of the 16 floats at x, as bits at out
//
// bf16 products come in two forms that compute the same bits: `bf16` (A as floats holding bf16
// values, B pairs widened in registers, two FMAs per pair: exact, since a bf16 product fits an f32)
// and `bf16_dot` (A as bf16 pairs, vdpbf16ps). Which is faster depends on the CPU (dispatch.hpp).
// Each micro kernel keeps an (MR × 2·lanes) tile of C in registers; every element is one
// accumulator over k in order, so its value never depends on the tile, the panel range or m.
//
// A comes packed (gemm.hpp, pack_a): tiles of MR rows, k-major, so that a step of the micro kernel
// reads MR consecutive values (or pairs) instead of MR rows a whole row apart; or in place
// (a_layout::rows: the attention's products, whose A is used once per panel), its values already
// as the operand takes them (f32, or rounded to bf16 by the caller: gemm.hpp, round_rows).

/// v with lane i taken from lane i ^ W (a butterfly step of a reduction), for 4, 8 or 16 lanes.
/// (Index lists written out: nvcc's front end, which reads the headers vector_ops.inl is part of,
/// takes no pack expansion in __builtin_shufflevector; the kernels' files it never reads.)
template <int W, class V>
[[nodiscard]] inline V vswap_lanes(V v) noexcept {
    constexpr int n = static_cast<int>(sizeof(V) / sizeof(v[0]));
    if constexpr (n == 16 && W == 8) return __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
    else if constexpr (n == 16 && W == 4) return __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11);
    else if constexpr (n == 16 && W == 2) return __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
    else if constexpr (n == 16 && W == 1) return __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
    else if constexpr (n == 8 && W == 4) return __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3);
    else if constexpr (n == 8 && W == 2) return __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5);
    else if constexpr (n == 8 && W == 1) return __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6);
    else if constexpr (n == 4 && W == 2) return __builtin_shufflevector(v, v, 2, 3, 0, 1);
    else if constexpr (n == 4 && W == 1) return __builtin_shufflevector(v, v, 1, 0, 3, 2);
    else static_assert(n == 0, "vswap_lanes takes vectors of 4, 8 or 16 lanes and a power of two below their count");
}
/// The largest lane of `top` (floats holding no NaN, or integers): a tree of comparisons (exact, so
/// the value the lanes give in any order) instead of a chain as long as the lanes.
template <class V, int W = lanes / 2>
[[nodiscard]] inline auto vmax_lanes(V top) noexcept {
    if constexpr (W == 0) {
        return top[0];
    } else {
        const V other = vswap_lanes<W>(top);
        return vmax_lanes<V, W / 2>(other > top ? other : top);
    }
}

enum class operand { f32, f16, bf16, bf16_dot };

template <operand K>
struct operand_traits;
template <>
struct operand_traits<operand::f32> {
    using a_t = float;
    using b_t = float;
    static constexpr int group = 1, mr = mr_f32;
};
template <>
struct operand_traits<operand::f16> {
    using a_t = float;
    using b_t = std::uint16_t;
    static constexpr int group = 1, mr = mr_f32;
};
template <>
struct operand_traits<operand::bf16> {
    using a_t = float;
    using b_t = std::uint16_t;
    static constexpr int group = 2, mr = mr_bf16;
};
template <>
struct operand_traits<operand::bf16_dot> {
    using a_t = std::uint16_t;
    using b_t = std::uint16_t;
    static constexpr int group = 2, mr = mr_f32;
};

/// `lanes` pairs of bf16 B, split into the even and the odd element, widened to f32 (exact).
struct b16_split {
    vfloat even, odd;
};
[[nodiscard]] inline b16_split load_b16_split(const std::uint16_t* p) noexcept {
    using vu32 = std::uint32_t __attribute__((vector_size(lanes * sizeof(float))));
    vu32 u;
    std::memcpy(&u, p, sizeof u);
    return {__builtin_bit_cast(vfloat, u << 16), __builtin_bit_cast(vfloat, u & 0xffff0000u)};
}

/// Columns of one register tile: two vectors.
inline constexpr index_t sub_width = 2 * lanes;
static_assert(panel_width % sub_width == 0, "a panel must split into whole register tiles");

/// Cache lines of B a kernel step prefetches: as many as a register tile's part of a row of B
/// holds (sub_width columns of k-groups; 64 bytes on AVX2, 128 on AVX-512 for 16-bit and f32 B).
template <class B, int Group>
inline constexpr int prefetch_lines = sub_width * Group * static_cast<int>(sizeof(B)) > 64 ? sub_width * Group * static_cast<int>(sizeof(B)) / 64 : 1;

/// Where a micro kernel reads A: `packed` in tiles (pack.hpp), or `rows` in place, rows `lda`
/// elements apart (a product that uses its A once per panel of B, as the attention's do, spends less
/// on reading A in place than on packing it). In place, A holds what the operand takes: f32 values,
/// bf16 values as floats (operand::bf16), or bf16 bits (operand::bf16_dot), k padded with zeros to
/// a whole group.
enum class a_layout { packed, rows };

/// C[MR × n_valid] (=|+=) A[MR × steps·group] · B[steps·group × sub_width]. A `packed` in tiles of
/// `tile` rows (MR of which are used): the group of row r at step t is at a[(t · tile + r) · group];
/// or in `rows`, `tile` elements apart: the group of row r at step t at a[r · tile + t · group]. The
/// same products in the same order either way. Step t also prefetches the prefetch_lines lines from
/// pf + t · pf_step into L2 (a share of the next block of B: gemm_panels).
template <operand K, int MR, a_layout A = a_layout::packed>
inline void micro_kernel(index_t steps, const typename operand_traits<K>::a_t* a, std::ptrdiff_t tile,
                         const typename operand_traits<K>::b_t* b, std::ptrdiff_t ldb, float* c, std::ptrdiff_t ldc, int n_valid,
                         bool accumulate, const char* pf, std::ptrdiff_t pf_step) noexcept {
    vfloat acc0[MR], acc1[MR];
    const bool full = n_valid == sub_width;
    const int n0 = n_valid < lanes ? n_valid : lanes, n1 = n_valid > lanes ? n_valid - lanes : 0;
    for (int r = 0; r < MR; ++r) {
        if (!accumulate) {
            acc0[r] = vfloat{};
            acc1[r] = vfloat{};
        } else if (full) {
            acc0[r] = vload(c + r * ldc);
            acc1[r] = vload(c + r * ldc + lanes);
        } else {
            acc0[r] = vload_partial(c + r * ldc, n0);
            acc1[r] = vload_partial(c + r * ldc + lanes, n1);
        }
    }
    constexpr int g = operand_traits<K>::group;
    for (index_t t = 0; t < steps; ++t) {
        const auto* bt = b + t * ldb;
        const auto* at = A == a_layout::rows ? a + t * g : a + t * tile * g;
        constexpr bool in_place = A == a_layout::rows;  // row r's group at at + r · tile, else at + r · g
#pragma GCC unroll 4
        for (int l = 0; l < prefetch_lines<typename operand_traits<K>::b_t, g>; ++l) __builtin_prefetch(pf + t * pf_step + 64 * l, 0, 2);
        if constexpr (K == operand::bf16) {
            const b16_split b0 = load_b16_split(bt), b1 = load_b16_split(bt + 2 * lanes);
#pragma GCC unroll 8
            for (int r = 0; r < MR; ++r) {  // odd first, then even: vdpbf16ps's order
                const auto* ar = at + (in_place ? r * tile : 2 * r);
                const vfloat ae = vbroadcast(ar[0]), ao = vbroadcast(ar[1]);
                acc0[r] = vfma(ae, b0.even, vfma(ao, b0.odd, acc0[r]));
                acc1[r] = vfma(ae, b1.even, vfma(ao, b1.odd, acc1[r]));
            }
        } else if constexpr (K == operand::bf16_dot) {
#if defined(DLM_KERNEL_BF16_DOT)
            const b16_t b0 = load_b16(bt), b1 = load_b16(bt + 2 * lanes);
#pragma GCC unroll 8
            for (int r = 0; r < MR; ++r) {
                const a16_t ar = bcast_a16(at + (in_place ? r * tile : 2 * r));
                acc0[r] = dot2(acc0[r], ar, b0);
                acc1[r] = dot2(acc1[r], ar, b1);
            }
#endif
        } else {
            vfloat b0, b1;
            if constexpr (K == operand::f32) {
                b0 = vload(bt);
                b1 = vload(bt + lanes);
            } else {
                b0 = load_f16(bt);
                b1 = load_f16(bt + lanes);
            }
#pragma GCC unroll 8
            for (int r = 0; r < MR; ++r) {
                const vfloat ar = vbroadcast(at[in_place ? r * tile : r]);
                acc0[r] = vfma(ar, b0, acc0[r]);
                acc1[r] = vfma(ar, b1, acc1[r]);
            }
        }
    }
    for (int r = 0; r < MR; ++r) {
        if (full) {
            vstore(c + r * ldc, acc0[r]);
            vstore(c + r * ldc + lanes, acc1[r]);
        } else {
            vstore_partial(c + r * ldc, acc0[r], n0);
            vstore_partial(c + r * ldc + lanes, acc1[r], n1);
        }
    }
}

template <operand K>
using micro_kernel_fn = void (*)(index_t, const typename operand_traits<K>::a_t*, std::ptrdiff_t, const typename operand_traits<K>::b_t*,
                                 std::ptrdiff_t, float*, std::ptrdiff_t, int, bool, const char*, std::ptrdiff_t) noexcept;

template <operand K, a_layout A, std::size_t... I>
constexpr std::array<micro_kernel_fn<K>, sizeof...(I)> make_micro_kernels(std::index_sequence<I...>) {
    return {&micro_kernel<K, static_cast<int>(I) + 1, A>...};
}
/// micro_kernels<K, A>[r - 1] handles a tile of r rows.
template <operand K, a_layout A = a_layout::packed>
inline constexpr auto micro_kernels = make_micro_kernels<K, A>(std::make_index_sequence<operand_traits<K>::mr>{});

/// Bytes of one row of a panel of B (every sub-panel's part).
template <class B, int Group>
inline constexpr std::ptrdiff_t panel_row_bytes = panel_width * Group * static_cast<std::ptrdiff_t>(sizeof(B));
/// How far ahead a product whose B rows are ldb apart prefetches, in bytes of B (gemm_panels). Measured
/// on a Zen 4 core (2026-12-04): `dlm-bench-forward --shape 168M --dtype q4_k_m --block 4 --cache 512
/// --threads 1`, a 4-row step over 516 cached f32 keys, 11.9 -> 10.7 ms; timing cpu::gemm as `attend`
/// calls it (128 heads of 64, K/V from memory), its scores took 2.34 -> 1.17 ms at 16 KB (2 key blocks;
/// before: the next one), while 2, 4 or 8 blocks ahead for keys and values alike lost on the values
/// what they gained on the keys, and 24 KB was no better than 16.
inline constexpr std::ptrdiff_t strided_ahead_bytes = 16384;

/// C rows [0, m), the columns of panels [p0, p1) that are < n; k-blocks of 256 so that a block of
/// B (256 × sub_width elements) stays in L1 while the row tiles pass over it. A packed in tiles of
/// operand_traits<K>::mr rows, or (a_layout::rows) in place, rows `lda` apart (`lda` unused when
/// packed). A panel is walked k-block by k-block, each block through its sub-panels in turn: the
/// panel's bytes are read in order, whole rows of it (every sub-panel's columns) at a time. Each
/// element still sums its k in order (a block continues the sum through C), so the order of blocks
/// and sub-panels changes no bit.
///
/// While the row tiles work on one block of B, their steps prefetch every cache line of the next
/// block (the next k-block, or the next panel's first) into L2: a model's weights come from DRAM,
/// and without it the first tile over each block waited on memory (the 168M forward's products ran
/// at 0.85× of their speed on cache-resident weights). Where B's rows are contiguous (a packed
/// weight matrix) each (sub-panel, tile) call takes an equal share of the block's bytes in order, so
/// the lines are asked for as one sequential stream; where they are ldb apart (the attention's keys
/// and values) each call takes its sub-panel's part of the rows. Until 2026-12-04 one
/// sub-panel walked all of k before the next, prefetching one line per step of its share: half the
/// lines of a 1-row product's next block, so a 1–4-row product streamed its weights at about
/// 10 GB/s where the machine reads 17 (docs/benchmarks.md, "Small-row products"). Strided blocks of
/// under 16 KB are prefetched further ahead (below).
template <operand K, a_layout A = a_layout::packed>
inline void gemm_panels(index_t m, index_t n, index_t kdim, const typename operand_traits<K>::a_t* a, std::ptrdiff_t lda,
                        const typename operand_traits<K>::b_t* bdata, std::ptrdiff_t panel_stride, std::ptrdiff_t ldb, index_t p0,
                        index_t p1, float* c, std::ptrdiff_t ldc, bool accumulate) noexcept {
    using T = operand_traits<K>;
    using b_t = typename T::b_t;
    constexpr index_t group = T::group, mr = T::mr, kc_steps = 256 / group;
    constexpr index_t subs = panel_width / sub_width;
    if (m <= 0) return;
    const index_t steps = (kdim + group - 1) / group;
    const index_t tiles = (m + mr - 1) / mr;
    // A tile's first element, and what the micro kernel takes as `tile` (A's rows per tile, or lda).
    const std::ptrdiff_t tile_elements = static_cast<std::ptrdiff_t>(mr) * (A == a_layout::rows ? lda : steps * group);
    const std::ptrdiff_t a_tile = A == a_layout::rows ? lda : mr, a_step = A == a_layout::rows ? group : mr * group;
    const std::ptrdiff_t ldb_bytes = ldb * static_cast<std::ptrdiff_t>(sizeof(b_t));
    constexpr std::ptrdiff_t sub_bytes = sub_width * group * static_cast<std::ptrdiff_t>(sizeof(b_t));  // a sub-panel's part of a row of B
    const bool contiguous = ldb == panel_width * group;  // a packed weight matrix; the attention's keys and values are ldb apart
    // Blocks are walked panel by panel, each panel's k-blocks in order; block i (from p0's first) and its rows.
    const index_t kblocks = steps > 0 ? (steps + kc_steps - 1) / kc_steps : 1;
    const auto block_at = [&](index_t i, index_t& rows) -> const b_t* {
        const index_t p = p0 + i / kblocks, t = (i % kblocks) * kc_steps;
        rows = steps - t < kc_steps ? steps - t : kc_steps;
        return p < p1 ? bdata + p * panel_stride + t * ldb : nullptr;
    };
    // Where rows are ldb apart (the attention's keys: a block of 64 rows is 8 KB on 128 lines), a call
    // with few rows computes a block faster than memory delivers it: the steps prefetch the block about
    // strided_ahead_bytes on (at most 4 blocks), and the blocks before that are asked for when the call
    // starts. Blocks of 16 KB or more (the values: 256 rows) keep the next block.
    const std::ptrdiff_t block_bytes = (steps < kc_steps ? steps : kc_steps) * panel_row_bytes<b_t, group>;
    const index_t ahead = contiguous || block_bytes <= 0 ? 1 : std::clamp<index_t>(static_cast<index_t>(strided_ahead_bytes / block_bytes), 1, 4);
    for (index_t i = 1; i < ahead; ++i) {
        index_t rows = 0;
        if (const b_t* blk = block_at(i, rows))
            for (index_t r = 0; r < rows; ++r)
                for (std::ptrdiff_t l = 0; l < panel_row_bytes<b_t, group>; l += 64) __builtin_prefetch(reinterpret_cast<const char*>(blk + r * ldb) + l, 0, 2);
    }
    for (index_t p = p0; p < p1; ++p) {
        const b_t* panel = bdata + p * panel_stride;
        const index_t col0 = p * panel_width;
        const index_t subs_here = (n - col0 < panel_width ? (n - col0 + sub_width - 1) / sub_width : subs);  // sub-panels with a column < n
        index_t t0 = 0;
        do {  // runs once for kdim == 0, so C is still zeroed
            const index_t kc = steps - t0 < kc_steps ? steps - t0 : kc_steps;
            const bool acc = accumulate || t0 > 0;
            // The block after this one (the next k-block of the panel, or the next panel's first): its
            // first row and its rows.
            index_t next_kc = 0;
            const b_t* next = block_at((p - p0) * kblocks + t0 / kc_steps + ahead, next_kc);
            // Contiguous rows (a packed weight matrix): the block's bytes in equal shares, one per
            // (sub-panel, tile) call in order, each over the call's kc steps, so the lines are asked for
            // as one sequential stream and each at least once (a share's step is at most a step's
            // prefetch_lines lines while the calls are at least the sub-panels). Rows ldb apart (the
            // attention's keys and values): every call of sub-panel s prefetches its part of the next
            // block's first kc rows, a row a step.
            const index_t calls = subs_here * tiles;
            const std::ptrdiff_t share = contiguous && next ? (next_kc * ldb_bytes + calls - 1) / calls : 0;
            const std::ptrdiff_t pf_step = !next || kc == 0 ? 0 : contiguous ? (share + kc - 1) / kc : ldb_bytes;
            const char* pf_base = next ? reinterpret_cast<const char*>(next) : reinterpret_cast<const char*>(panel);
            for (index_t s = 0; s < subs_here; ++s) {
                const index_t col = col0 + s * sub_width;
                const int n_valid = static_cast<int>(n - col < sub_width ? n - col : sub_width);
                const b_t* sub = panel + s * sub_width * group;
                for (index_t i = 0; i < m; i += mr) {
                    const index_t rows = m - i < mr ? m - i : mr, tile = i / mr;
                    const char* pf = pf_base + (contiguous ? (s * tiles + tile) * share : s * sub_bytes);
                    micro_kernels<K, A>[static_cast<std::size_t>(rows - 1)](kc, a + tile * tile_elements + t0 * a_step, a_tile, sub + t0 * ldb,
                                                                            ldb, c + i * ldc + col, ldc, n_valid, acc, pf, pf_step);
                }
            }
            t0 += kc;
        } while (t0 < steps);
    }
}

inline void gemm_f32(index_t m, index_t n, index_t k, const float* a, const panel_view& b, index_t p0, index_t p1,
                     float* c, std::ptrdiff_t ldc, bool accumulate) noexcept {
    gemm_panels<operand::f32>(m, n, k, a, 0, b.data, b.panel_stride, b.ldb, p0, p1, c, ldc, accumulate);
}
inline void gemm_f32_rows(index_t m, index_t n, index_t k, const float* a, std::ptrdiff_t lda, const panel_view& b, index_t p0, index_t p1,
                          float* c, std::ptrdiff_t ldc, bool accumulate) noexcept {
    gemm_panels<operand::f32, a_layout::rows>(m, n, k, a, lda, b.data, b.panel_stride, b.ldb, p0, p1, c, ldc, accumulate);
}
/// The 16-bit products behind the table's type-erased entries (A's element type is the entry's).
template <operand K>
inline void gemm16(index_t m, index_t n, index_t k, const void* a, const panel_view16& b, index_t p0, index_t p1, float* c,
                   std::ptrdiff_t ldc, bool accumulate) noexcept {
    gemm_panels<K>(m, n, k, static_cast<const typename operand_traits<K>::a_t*>(a), 0, b.data, b.panel_stride, b.ldb, p0, p1, c, ldc,
                   accumulate);
}
template <operand K>
inline void gemm16_rows(index_t m, index_t n, index_t k, const void* a, std::ptrdiff_t lda, const panel_view16& b, index_t p0, index_t p1,
                        float* c, std::ptrdiff_t ldc, bool accumulate) noexcept {
    gemm_panels<K, a_layout::rows>(m, n, k, static_cast<const typename operand_traits<K>::a_t*>(a), lda, b.data, b.panel_stride, b.ldb, p0,
                                   p1, c, ldc, accumulate);
}

inline void exp_shifted(float* x, index_t n, float shift) noexcept {
    index_t i = 0;
    for (; i + lanes <= n; i += lanes) vstore(x + i, vexp(vload(x + i) - vbroadcast(shift)));
    if (i < n) {  // the tail through the same vector code, lane by lane identical
        const int rest = static_cast<int>(n - i);
        vstore_partial(x + i, vexp(vload_partial(x + i, rest) - vbroadcast(shift)), rest);
    }
}

/// The sum of N partials folded in halves (p[j] += p[j + N/2], then + N/4, ..., + 1): the one order
/// of the softmax's and RMSNorm's sums on every path.
template <class T, int N>
[[nodiscard]] inline T fold_halves(T (&part)[N]) noexcept {
    static_assert(N > 0 && (N & (N - 1)) == 0, "partials fold in halves: a power of two of them");
    for (int w = N / 2; w >= 1; w /= 2)
        for (int j = 0; j < w; ++j) part[j] += part[j + w];
    return part[0];
}

inline float exp_shifted_sum(float* x, index_t n, float shift) noexcept {
    constexpr int parts = static_cast<int>(softmax_sum_parts), vectors = parts / lanes;
    static_assert(parts % lanes == 0, "a softmax sum's partials fill whole vectors on every instruction set");
    const vfloat sh = vbroadcast(shift);
    vfloat acc[vectors] = {};
    index_t i = 0;
    for (; i + parts <= n; i += parts)
        for (int v = 0; v < vectors; ++v) {
            const vfloat e = vexp(vload(x + i + v * lanes) - sh);
            vstore(x + i + v * lanes, e);
            acc[v] += e;
        }
    for (int v = 0; v < vectors && i < n; ++v, i += lanes) {  // the tail: lanes past n add zeros
        const int rest = static_cast<int>(n - i < lanes ? n - i : lanes);
        const vfloat e = vexp(vload_partial(x + i, rest) - sh);
        vstore_partial(x + i, e, rest);
        acc[v] += vload_partial(x + i, rest);
    }
    float part[parts];
    for (int v = 0; v < vectors; ++v) vstore(part + v * lanes, acc[v]);
    return fold_halves(part);
}

inline float scale_max(float* x, index_t n, float scale) noexcept {
    constexpr float low = -std::numeric_limits<float>::infinity();
    const vfloat s = vbroadcast(scale);
    vfloat top = vbroadcast(low);
    index_t i = 0;
    for (; i + lanes <= n; i += lanes) {
        const vfloat v = vload(x + i) * s;
        vstore(x + i, v);
        top = vselect(v > top, v, top);
    }
    float m = vmax_lanes(top);
    for (; i < n; ++i) {
        x[i] *= scale;
        m = x[i] > m ? x[i] : m;
    }
    return m;
}

inline void silu_gate(const float* gate, const float* up, float* out, index_t n) noexcept {
    const vfloat one = vbroadcast(1.0f);
    index_t i = 0;
    for (; i + lanes <= n; i += lanes) {
        const vfloat g = vload(gate + i);
        vstore(out + i, g / (one + vexp(-g)) * vload(up + i));
    }
    if (i < n) {
        const int rest = static_cast<int>(n - i);
        const vfloat g = vload_partial(gate + i, rest);
        vstore_partial(out + i, g / (one + vexp(-g)) * vload_partial(up + i, rest), rest);
    }
}

/// kernel_table::rms_norm: Σ x² in double (each square exact), x[i]² joining partial i mod 16 in
/// order of i, the partials folded in halves; then out[i] = weight[i] · (x[i] · inv), two rounded
/// products. Nothing is left to rounding order, so every path, the baseline included, gives the
/// same bits.
inline void rms_norm(const float* x, index_t n, const float* weight, float eps, float* out) noexcept {
    constexpr int parts = static_cast<int>(rms_norm_sum_parts), per = lanes / 2, vectors = parts / per;
    static_assert(parts % per == 0, "the norm's partials fill whole vectors of doubles on every instruction set");
    using vhalf = float __attribute__((vector_size(sizeof(vfloat) / 2)));
    using vdouble = double __attribute__((vector_size(sizeof(vfloat))));
    vdouble acc[vectors] = {};
    index_t i = 0;
    for (; i + parts <= n; i += parts)
        for (int v = 0; v < vectors; ++v) {
            vhalf h;
            std::memcpy(&h, x + i + v * per, sizeof h);
            const vdouble d = __builtin_convertvector(h, vdouble);
            acc[v] += d * d;
        }
    double part[parts];
    std::memcpy(part, acc, sizeof part);
    for (int j = 0; i < n; ++i, ++j) part[j] += static_cast<double>(x[i]) * x[i];
    const float inv = 1.0f / std::sqrt(static_cast<float>(fold_halves(part) / static_cast<double>(n)) + eps);
    const vfloat vi = vbroadcast(inv);
    index_t e = 0;
    for (; e + lanes <= n; e += lanes) vstore(out + e, vload(weight + e) * (vload(x + e) * vi));
    for (; e < n; ++e) out[e] = weight[e] * (x[e] * inv);
}

#include "quant_body.inl"

/// kernel_table::rotate_half: each product rounded on its own (`unfused`), as the rotation has always
/// been computed, so every path, the baseline included, gives the same bits.
inline void rotate_half(float* v, const float* c, const float* s, index_t h) noexcept {
    index_t i = 0;
    for (; i + lanes <= h; i += lanes) {
        const vfloat x1 = vload(v + i), x2 = vload(v + i + h), cs = vload(c + i), sn = vload(s + i);
        vstore(v + i, unfused(x1 * cs) - unfused(x2 * sn));
        vstore(v + i + h, unfused(x2 * cs) + unfused(x1 * sn));
    }
    if (i < h) {  // the tail through the same vector code
        const int rest = static_cast<int>(h - i);
        const vfloat x1 = vload_partial(v + i, rest), x2 = vload_partial(v + i + h, rest);
        const vfloat cs = vload_partial(c + i, rest), sn = vload_partial(s + i, rest);
        vstore_partial(v + i, unfused(x1 * cs) - unfused(x2 * sn), rest);
        vstore_partial(v + i + h, unfused(x2 * cs) + unfused(x1 * sn), rest);
    }
}

/// The A layouts of this file's kernels: tiles of mr rows, k-groups of the operand's group.
template <operand K>
inline constexpr a_format a_format_of{operand_traits<K>::mr, operand_traits<K>::group};

#include "pack_body.inl"

/// kernel_table::round_bf16: 16 values at a time through the instruction set's conversion where it
/// has one (DLM_KERNEL_BF16_CONVERT: bf16_daz16), else `lanes` at a time through pack_body.inl's
/// bf16_daz; the tail by pack.hpp's to_bf16_daz (the same bits).
inline void round_bf16(const float* x, index_t n, void* out, a_values values) noexcept {
    const bool bits = values == a_values::bf16_bits;
    index_t i = 0;
#if defined(DLM_KERNEL_BF16_CONVERT)
    using vu16 = std::uint16_t __attribute__((vector_size(16 * sizeof(std::uint16_t))));
    using vu32 = std::uint32_t __attribute__((vector_size(16 * sizeof(std::uint32_t))));
    for (; i + 16 <= n; i += 16) {
        if (bits) {
            bf16_daz16(x + i, static_cast<std::uint16_t*>(out) + i);
            continue;
        }
        vu16 h;
        bf16_daz16(x + i, reinterpret_cast<std::uint16_t*>(&h));
        const vu32 f = __builtin_convertvector(h, vu32) << 16;
        std::memcpy(static_cast<float*>(out) + i, &f, sizeof f);
    }
#else
    using vu32 = std::uint32_t __attribute__((vector_size(lanes * sizeof(float))));
    using vu16 = std::uint16_t __attribute__((vector_size(lanes * sizeof(std::uint16_t))));
    for (; i + lanes <= n; i += lanes) {
        vu32 h;
        bf16_daz(x + i, h);
        if (bits) {
            const vu16 h16 = __builtin_convertvector(h, vu16);
            std::memcpy(static_cast<std::uint16_t*>(out) + i, &h16, sizeof h16);
        } else {
            h <<= 16;
            std::memcpy(static_cast<float*>(out) + i, &h, sizeof h);
        }
    }
#endif
    for (; i < n; ++i) {
        const std::uint16_t h = to_bf16_daz(x[i]);
        if (bits) static_cast<std::uint16_t*>(out)[i] = h;
        else static_cast<float*>(out)[i] = io::bf16_to_f32(h);
    }
}

/// A packed as operand K wants it, its values converted by Convert (pack.hpp): by transposes in
/// registers (pack_body.inl), the same elements as pack.hpp's scalar pack_a.
template <operand K, class Convert>
inline void pack_operand(index_t m, index_t k, const float* a, std::ptrdiff_t lda, void* out) noexcept {
    constexpr int mr = operand_traits<K>::mr, group = operand_traits<K>::group;
    constexpr packed_as as = std::is_same_v<Convert, detail::identity>    ? packed_as::f32
                             : std::is_same_v<Convert, detail::bf16_bits> ? packed_as::bf16_bits
                                                                          : packed_as::bf16_f32;
    static_assert(group == (as == packed_as::f32 ? 1 : 2), "f32 values pack one per k-group, bf16 values two");
    static_assert(std::is_same_v<Convert, detail::identity> || std::is_same_v<Convert, detail::bf16_bits> ||
                      std::is_same_v<Convert, detail::bf16_value>,
                  "pack_operand packs values as they are, or rounded to bf16 as bits or as floats");
    pack_words<mr, as>(m, k, a, lda, out);
}

inline constexpr f32_product f32_entry{"fma", a_format_of<operand::f32>, &pack_operand<operand::f32, detail::identity>, &gemm_f32,
                                     &gemm_f32_rows};
inline constexpr product16 f16_entry{"fma", a_format_of<operand::f16>, a_values::f32, &pack_operand<operand::f16, detail::identity>,
                                     &gemm16<operand::f16>, nullptr};
inline constexpr product16 bf16_fma_entry{"fma", a_format_of<operand::bf16>, a_values::bf16_f32,
                                          &pack_operand<operand::bf16, detail::bf16_value>, &gemm16<operand::bf16>,
                                          &gemm16_rows<operand::bf16>};
#if defined(DLM_KERNEL_BF16_DOT)
inline constexpr product16 bf16_dot_entry{"vdpbf16ps", a_format_of<operand::bf16_dot>, a_values::bf16_bits,
                                          &pack_operand<operand::bf16_dot, detail::bf16_bits>, &gemm16<operand::bf16_dot>,
                                          &gemm16_rows<operand::bf16_dot>};
#else
inline constexpr product16 bf16_dot_entry{"none", {}, a_values::bf16_bits, nullptr, nullptr, nullptr};
#endif
inline constexpr quant_product quant_entry{quant_form, {mr_q, 4}, &quantize_rows<mr_q>, &gemm_quant};

inline constexpr kernel_table table{isa_id,         isa_name,    lanes,        f32_entry,  f16_entry, bf16_fma_entry,
                                    bf16_dot_entry, quant_entry, &exp_shifted, &exp_shifted_sum, &scale_max, &silu_gate,
                                    &round_bf16,    &rms_norm,    &rotate_half};
