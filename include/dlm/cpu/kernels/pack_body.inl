// dlm/cpu/kernels/pack_body.inl — the packers of the f32 and bf16-bits A operands (pack.hpp's layout:
// tiles of MR rows, k-major), written once for every instruction set with 8 × 8 transposes of
// 32-bit words in registers: an f32 element, or a pair of bf16 bits, is one word.
//
// Included by body.inl (inside an instruction-set namespace and target region). The values are
// those of pack.hpp's scalar conversions, bit for bit (test_kernels checks every path against them).

/// Eight 32-bit words: a row's part of one transpose block.
using words8 = std::uint32_t __attribute__((vector_size(32)));
/// Sixteen 32-bit words (16 floats to round to bf16, 8 pairs).
using words16 = std::uint32_t __attribute__((vector_size(64)));

/// x[i][j] ↔ x[j][i] for the 8 × 8 block x: three rounds of two-input shuffles (unpack, 64-bit,
/// 128-bit halves), 24 in all.
inline void transpose8(words8 (&x)[8]) noexcept {
    words8 t[8];
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

/// to_bf16_daz (pack.hpp) of the 16 floats at x, as 8 words of pairs (element 2j in the low half of
/// word j): round to nearest even, a NaN kept and made quiet, a result without an exponent
/// (subnormal or zero) to a signed zero. (Results through references: a vector wider than the
/// target's registers is not returned by value, whose ABI would differ between targets.)
inline void bf16_daz_pairs(const float* x, words8& out) noexcept {
    words16 u;
    std::memcpy(&u, x, sizeof u);
    const words16 nan = ((u & 0x7f800000u) == 0x7f800000u) & ((u & 0x007fffffu) != 0);
    words16 h = (u + (0x7fffu + ((u >> 16) & 1u))) >> 16;
    h = (nan & ((u >> 16) | 0x40u)) | (~nan & h);
    const words16 no_exp = (h & 0x7f80u) == 0;
    h = (no_exp & (h & 0x8000u)) | (~no_exp & h);
    out = __builtin_shufflevector(h, h, 0, 2, 4, 6, 8, 10, 12, 14) | __builtin_shufflevector(h, h, 1, 3, 5, 7, 9, 11, 13, 15) << 16;
}

/// A tile of MR rows (`rows` of them real, the others zero) packed k-major in 32-bit words: word j of
/// row r at o[j · MR + r], for `words` words per row, of which `row_words(r, j0, out)` writes the 8
/// from j0 while j0 + 8 <= full; `tail(r, j)` gives word j of row r for the rest (k's end, padding).
template <int MR, class RowWords, class Tail>
inline void pack_tile_words(std::uint32_t* o, int rows, index_t words, index_t full, RowWords&& row_words, Tail&& tail) noexcept {
    static_assert(MR <= 8, "an 8 × 8 transpose packs at most 8 rows");
    index_t j0 = 0;
    for (; j0 + 8 <= full; j0 += 8) {
        words8 x[8] = {};
        for (int r = 0; r < rows; ++r) row_words(r, j0, x[r]);
        transpose8(x);
        for (int j = 0; j < 8; ++j) std::memcpy(o + (j0 + j) * MR, &x[j], MR * sizeof(std::uint32_t));
    }
    for (; j0 < words; ++j0)
        for (int r = 0; r < MR; ++r) o[j0 * MR + r] = r < rows ? tail(r, j0) : 0u;
}

/// pack_a for f32 values as they are (group 1) or bf16 bits in pairs (group 2), vectorized: the same
/// elements pack.hpp's scalar pack_a writes.
template <int MR, bool Bf16Bits>
inline void pack_words(index_t m, index_t k, const float* a, std::ptrdiff_t lda, void* out) noexcept {
    constexpr int group = Bf16Bits ? 2 : 1;
    const index_t tiles = (m + MR - 1) / MR, words = (k + group - 1) / group;
    [[maybe_unused]] const bool parallel = tiles > 1 && static_cast<double>(m) * k > 1e6;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (parallel)
#endif
    for (index_t tile = 0; tile < tiles; ++tile) {
        const float* at = a + tile * MR * lda;
        const int rows = static_cast<int>(std::min<index_t>(MR, m - tile * MR));
        auto* o = static_cast<std::uint32_t*>(out) + tile * MR * words;
        if constexpr (Bf16Bits) {
            const auto row_words = [&](int r, index_t j0, words8& w) { bf16_daz_pairs(at + r * lda + 2 * j0, w); };
            const auto tail = [&](int r, index_t j) {
                const float* x = at + r * lda;
                const std::uint32_t lo = to_bf16_daz(x[2 * j]), hi = 2 * j + 1 < k ? to_bf16_daz(x[2 * j + 1]) : 0u;
                return lo | hi << 16;
            };
            pack_tile_words<MR>(o, rows, words, k / 2, row_words, tail);
        } else {
            const auto row_words = [&](int r, index_t j0, words8& w) { std::memcpy(&w, at + r * lda + j0, sizeof w); };
            const auto tail = [&](int r, index_t j) { return __builtin_bit_cast(std::uint32_t, at[r * lda + j]); };
            pack_tile_words<MR>(o, rows, words, k, row_words, tail);
        }
    }
}
