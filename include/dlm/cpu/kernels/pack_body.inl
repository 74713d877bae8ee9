// dlm/cpu/kernels/pack_body.inl — the packers of the A operands (pack.hpp's layout: tiles of MR rows,
// k-major), written once for every instruction set with square transposes of 32 bytes a row in
// registers: 8 × 8 of 32-bit words (an f32 element, or a pair of bf16 bits) or 4 × 4 of 64-bit ones
// (a pair of bf16 values held as floats).
//
// Included by body.inl (inside an instruction-set namespace and target region). The values are
// those of pack.hpp's scalar conversions, bit for bit (test_kernels checks every path against them).

/// 32 bytes of words: a row's part of one square transpose block (8 × 8 of 32-bit words, 4 × 4 of 64-bit).
template <class W>
struct words_of;
template <>
struct words_of<std::uint32_t> {
    using type = std::uint32_t __attribute__((vector_size(32)));
};
template <>
struct words_of<std::uint64_t> {
    using type = std::uint64_t __attribute__((vector_size(32)));
};
template <class W>
using words = typename words_of<W>::type;
/// Rows (and words per row) of a transpose block.
template <class W>
inline constexpr int square = static_cast<int>(32 / sizeof(W));

/// x[i][j] ↔ x[j][i] for the square block x: rounds of two-input shuffles (unpack, pairs, halves).
template <class W>
inline void transpose(words<W> (&x)[square<W>]) noexcept {
    words<W> t[square<W>];
    if constexpr (square<W> == 4) {
        t[0] = __builtin_shufflevector(x[0], x[1], 0, 4, 2, 6);
        t[1] = __builtin_shufflevector(x[0], x[1], 1, 5, 3, 7);
        t[2] = __builtin_shufflevector(x[2], x[3], 0, 4, 2, 6);
        t[3] = __builtin_shufflevector(x[2], x[3], 1, 5, 3, 7);
        x[0] = __builtin_shufflevector(t[0], t[2], 0, 1, 4, 5);
        x[1] = __builtin_shufflevector(t[1], t[3], 0, 1, 4, 5);
        x[2] = __builtin_shufflevector(t[0], t[2], 2, 3, 6, 7);
        x[3] = __builtin_shufflevector(t[1], t[3], 2, 3, 6, 7);
    } else {
        for (int i = 0; i < 8; i += 2) {
            t[i] = __builtin_shufflevector(x[i], x[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
            t[i + 1] = __builtin_shufflevector(x[i], x[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
        }
        for (int i = 0; i < 8; i += 4) {
            x[i] = __builtin_shufflevector(t[i], t[i + 2], 0, 1, 8, 9, 4, 5, 12, 13);
            x[i + 1] = __builtin_shufflevector(t[i], t[i + 2], 2, 3, 10, 11, 6, 7, 14, 15);
            x[i + 2] = __builtin_shufflevector(t[i + 1], t[i + 3], 0, 1, 8, 9, 4, 5, 12, 13);
            x[i + 3] = __builtin_shufflevector(t[i + 1], t[i + 3], 2, 3, 10, 11, 6, 7, 14, 15);
        }
        for (int i = 0; i < 4; ++i) {
            t[i] = __builtin_shufflevector(x[i], x[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
            t[i + 4] = __builtin_shufflevector(x[i], x[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
        }
        for (int i = 0; i < 8; ++i) x[i] = t[i];
    }
}

/// to_bf16_daz (pack.hpp) of the floats at x, as many as V has 32-bit lanes: round to nearest even,
/// a NaN kept and made quiet, a result without an exponent (subnormal or zero) to a signed zero; the
/// bits in each lane's low half. (Results through references: a vector wider than the target's
/// registers is not returned by value, whose ABI would differ between targets.)
template <class V>
inline void bf16_daz(const float* x, V& h) noexcept {
    V u;
    std::memcpy(&u, x, sizeof u);
    const V nan = ((u & 0x7f800000u) == 0x7f800000u) & ((u & 0x007fffffu) != 0);
    h = (u + (0x7fffu + ((u >> 16) & 1u))) >> 16;
    h = (nan & ((u >> 16) | 0x40u)) | (~nan & h);
    const V no_exp = (h & 0x7f80u) == 0;
    h = (no_exp & (h & 0x8000u)) | (~no_exp & h);
}

/// A tile of MR rows (`rows` of them real, the others zero) packed k-major in words: word j of row r
/// at o[j · MR + r], for `n_words` words per row, of which `row_words(r, j0, out)` writes the
/// square<W> from j0 while j0 + square<W> <= full; `tail(r, j)` gives word j of row r for the rest
/// (k's end, padding). Rows go through the transposes square<W> at a time. Every store is a
/// memcpy: the buffer holds floats or bf16 bits, not W.
template <int MR, class W, class RowWords, class Tail>
inline void pack_tile_words(W* o, int rows, index_t n_words, index_t full, RowWords&& row_words, Tail&& tail) noexcept {
    constexpr int S = square<W>;
    index_t j0 = 0;
    for (; j0 + S <= full; j0 += S)
        for (int c0 = 0; c0 < MR; c0 += S) {
            words<W> x[S] = {};
            for (int r = c0; r < std::min(c0 + S, rows); ++r) row_words(r, j0, x[r - c0]);
            transpose<W>(x);
            const int n = std::min(S, MR - c0);
            for (int j = 0; j < S; ++j) std::memcpy(o + (j0 + j) * MR + c0, &x[j], static_cast<std::size_t>(n) * sizeof(W));
        }
    for (; j0 < n_words; ++j0)
        for (int r = 0; r < MR; ++r) {
            const W w = r < rows ? tail(r, j0) : W{0};
            std::memcpy(o + j0 * MR + r, &w, sizeof w);
        }
}

/// How pack_words stores A's values: as they are (one f32 word per element), or rounded to bf16 as
/// bf16 bits (a 32-bit word per pair) or as floats (a 64-bit word per pair).
enum class packed_as { f32, bf16_bits, bf16_f32 };

/// pack_a for the f32 values, bf16 bits and bf16-valued floats (pack.hpp's identity, bf16_bits,
/// bf16_value), vectorized: the same elements pack.hpp's scalar pack_a writes.
template <int MR, packed_as As>
inline void pack_words(index_t m, index_t k, const float* a, std::ptrdiff_t lda, void* out) noexcept {
    using W = std::conditional_t<As == packed_as::bf16_f32, std::uint64_t, std::uint32_t>;
    constexpr int per_word = As == packed_as::f32 ? 1 : 2;
    const index_t tiles = (m + MR - 1) / MR, n_words = (k + per_word - 1) / per_word;
    [[maybe_unused]] const bool parallel = tiles > 1 && static_cast<double>(m) * k > 1e6;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (parallel)
#endif
    for (index_t tile = 0; tile < tiles; ++tile) {
        const float* at = a + tile * MR * lda;
        const int rows = static_cast<int>(std::min<index_t>(MR, m - tile * MR));
        W* o = static_cast<W*>(out) + tile * MR * n_words;
        const auto row_words = [&](int r, index_t j0, words<W>& w) {
            const float* x = at + r * lda;
            if constexpr (As == packed_as::f32) {
                std::memcpy(&w, x + j0, sizeof w);
            } else if constexpr (As == packed_as::bf16_bits) {  // 8 pairs from 16 floats
#if defined(DLM_KERNEL_BF16_CONVERT)
                static_assert(sizeof(w) == 16 * sizeof(std::uint16_t), "a square of bf16 pairs is what the instruction set converts at once");
                bf16_daz16(x + 2 * j0, reinterpret_cast<std::uint16_t*>(&w));
#else
                words<std::uint32_t> h0, h1;
                bf16_daz(x + 2 * j0, h0);
                bf16_daz(x + 2 * j0 + 8, h1);
                w = __builtin_shufflevector(h0, h1, 0, 2, 4, 6, 8, 10, 12, 14) | __builtin_shufflevector(h0, h1, 1, 3, 5, 7, 9, 11, 13, 15) << 16;
#endif
            } else {  // 4 pairs of floats from 8: element 2j in word j's low half
                words<std::uint32_t> h;
                bf16_daz(x + 2 * j0, h);
                w = __builtin_bit_cast(words<W>, h << 16);
            }
        };
        const auto tail = [&](int r, index_t j) -> W {
            const float* x = at + r * lda;
            if constexpr (As == packed_as::f32) {
                return __builtin_bit_cast(std::uint32_t, x[j]);
            } else {
                const W lo = to_bf16_daz(x[2 * j]), hi = 2 * j + 1 < k ? to_bf16_daz(x[2 * j + 1]) : 0u;
                if constexpr (As == packed_as::bf16_bits) return lo | hi << 16;
                else return lo << 16 | hi << 48;
            }
        };
        pack_tile_words<MR>(o, rows, n_words, k / per_word, row_words, tail);
    }
}
