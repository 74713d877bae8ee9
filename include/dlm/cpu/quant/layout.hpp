// dlm/cpu/quant/layout.hpp — how dlm holds block-quantized weights in memory for its kernels, and
// how it quantizes activations for them. Shared by the packer (quant/matrix.hpp) and every
// instruction set's kernels (kernels/quant_body.inl): plain data, no instruction-set code.
//
// Weights W[n × k] of one GGUF block type are regrouped at load, once, into *tiles*: 16 output
// rows of W (columns of the product) × one block of k (32 elements for Q8_0/Q4_0, a super-block
// of 256 for the K-quants). A tile holds
//   header  d[16] (f16); K-quants with mins (Q4_K, Q5_K): dmin[16] (f16), then per sub-block j
//           the 16 rows' scales sc[j][16] and mins m[j][16] (u8, 6 bits); Q6_K: sc[j][16] (int8)
//   quants  unsigned integers u (Q8_0: the signed q), in chunks of 64 bytes, 4 bytes per row:
//           8-bit  chunk t holds k = 4t .. 4t + 3 of each row (Q8_0)
//           4-bit  chunk t holds k = 8t .. 8t + 3 in the low nibbles, 8t + 4 .. 8t + 7 in the high
//                  ones (Q4_0, Q4_K)
//           5-bit  the low 4 bits as 4-bit, then the high bit: chunk t holds k = 32t + 4i + b in
//                  bit i of byte b of each row's 4 (Q5_K)
//           6-bit  the low 4 bits as 4-bit, then the high 2 bits: chunk t holds k = 16t + 4i + b in
//                  bits 2i, 2i + 1 of byte b of each row's 4 (Q6_K)
// so that a 512-bit vector of a chunk feeds one vpdpbusd (a row per 32-bit lane, 4 products each).
// A tile takes about the bytes of the 16 rows' blocks in the file: Q8_0, Q4_0, Q6_K the same, Q4_K
// +3 % and Q5_K +2 % (their 6-bit scales and mins held as a byte each).
//
// Every block type computes w = d·sc_j·u − dmin·m_j (Q8_0: d·q; Q4_0: d·(u − 8), Q6_K:
// d·sc_j·(u − 32)). Activations are quantized per row and block of the same size, to int8 with
// one f32 scale (amax / 127, round to nearest), with the sums of each 16 quants, so that a block's
// contribution to an output is
//   da · (d · Σ_j sc_j Σ_{k∈j} u_k a_k  −  dmin · Σ_j m_j Σ_{k∈j} a_k)
// with every sum over j and k in integers (exact, the same on every instruction set) and one fixed
// sequence of f32 operations per block (kernels/quant_body.inl), so results are bit-identical on
// every instruction set, batch and thread count.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../../core/config.hpp"
#include "../../io/gguf_types.hpp"

namespace dlm::cpu::quant {

/// Rows of W per tile (outputs of one 512-bit vector).
inline constexpr index_t tile_rows = 16;

/// Where things sit in a tile of block type `type`.
struct tile_geometry {
    io::gguf_type type;
    int block;        ///< elements of k per tile (32 or 256)
    int sub;          ///< elements per sub-block with its own scale (32; Q6_K: 16); == block for Q8_0/Q4_0
    int bits;         ///< 4 (nibbles), 5 or 6 (nibbles and the high bits apart) or 8 (bytes) per quant as held
    bool mins;        ///< a dmin and per-sub-block mins (Q4_K, Q5_K)
    bool scales;      ///< per-sub-block scales (the K-quants)
    bool signed_q;    ///< quants are signed int8 (Q8_0)
    int offset;       ///< Q4_0's 8: w = d·(u − offset); Q6_K's 32 as a min of 32·sc_j
    int sc_at, m_at;  ///< byte offsets of sc[sub-blocks][16], m[sub-blocks][16] (K-quants)
    int header_bytes, quant_bytes;
    [[nodiscard]] constexpr int subs() const noexcept { return block / sub; }
    [[nodiscard]] constexpr int tile_bytes() const noexcept { return header_bytes + quant_bytes; }
    /// Elements of k per 64-byte chunk of quants (of the low 4 bits for 5- and 6-bit quants).
    [[nodiscard]] constexpr int chunk_k() const noexcept { return bits == 8 ? 4 : 8; }
    /// Bits of each quant held apart from its low 4: 1 (Q5_K), 2 (Q6_K), else 0.
    [[nodiscard]] constexpr int high_bits() const noexcept { return bits == 5 || bits == 6 ? bits - 4 : 0; }
    /// Quads (4 k of the 16 rows) whose high bits one 64-byte chunk holds: 8 (Q5_K), 4 (Q6_K).
    [[nodiscard]] constexpr int high_quads() const noexcept { return high_bits() > 0 ? 8 / high_bits() : 0; }
    /// The mask of one quant's high bits: 1 (Q5_K), 3 (Q6_K).
    [[nodiscard]] constexpr int high_mask() const noexcept { return (1 << high_bits()) - 1; }
    /// Where the high bits of 5- and 6-bit quants start, from the tile's start.
    [[nodiscard]] constexpr int high_at() const noexcept { return header_bytes + block * static_cast<int>(tile_rows) / 2; }
    /// The largest quant as held, in magnitude: 15 (4-bit), 31 (Q5_K), 63 (Q6_K), 128 (Q8_0's signed q).
    [[nodiscard]] constexpr int u_max() const noexcept { return signed_q ? 128 : (1 << bits) - 1; }
};

[[nodiscard]] constexpr tile_geometry geometry(io::gguf_type t) noexcept {
    using T = io::gguf_type;
    constexpr int r = static_cast<int>(tile_rows);
    switch (t) {
        case T::q8_0: return {t, 32, 32, 8, false, false, true, 0, 0, 0, 2 * r, 32 * r};
        case T::q4_0: return {t, 32, 32, 4, false, false, false, 8, 0, 0, 2 * r, 16 * r};
        case T::q4_k: return {t, 256, 32, 4, true, true, false, 0, 4 * r, 12 * r, 20 * r, 128 * r};
        case T::q5_k: return {t, 256, 32, 5, true, true, false, 0, 4 * r, 12 * r, 20 * r, 160 * r};
        case T::q6_k: return {t, 256, 16, 6, false, true, false, 32, 2 * r, 0, 18 * r, 192 * r};
        default: break;
    }
    return {t, 0, 0, 0, false, false, false, 0, 0, 0, 0, 0};
}

/// A part of a weight matrix held in tiles: groups [0, groups) of 16 rows (the last one padded
/// with zero rows), each `blocks` tiles along k, tile (g, s) at data + (g · blocks + s) · tile_bytes.
struct tile_view {
    const std::byte* data = nullptr;
    io::gguf_type type{};
    index_t groups = 0, blocks = 0;
};

/// 32-bit words of 16-bit sum pairs an activation row holds per block (activation_view::pairs):
/// block/32 pairs of 16-sums (S16_{2p} in the low half, S16_{2p+1} in the high one), then block/64
/// pairs of 32-sums (S32_{2p}, S32_{2p+1}). |S16| <= 16·127 and |S32| <= 32·127 fit 16 bits, so one
/// multiply-add of 16-bit pairs (vpdpwssd, vpmaddwd) takes two sub-blocks' Σ c_j·S_j at once.
[[nodiscard]] constexpr int pair_words(int block) noexcept { return block / 32 + block / 64; }

/// Activations X[m × k] quantized for one block size, packed in row tiles of `mr` rows:
/// tile i, block s: quants at q + (i · blocks + s) · block · mr, as block/group steps of mr rows ×
/// `group` bytes (4: the quads vpdpbusd broadcasts; 32: AMX tile rows); scales at
/// scale + (i · blocks + s) · mr; sums of each 16 quants at sums + ((i · blocks + s) · block/16 + u) · mr + r;
/// their pairs (pair_words) at pairs + ((i · blocks + s) · pair_words(block) + p) · mr + r.
struct activation_view {
    const std::int8_t* q = nullptr;
    const float* scale = nullptr;
    const std::int32_t* sums = nullptr;
    const std::int32_t* pairs = nullptr;
    int block = 0;
    index_t blocks = 0;
    int mr = 0;
    int group = 4;
};

}  // namespace dlm::cpu::quant
