// dlm/cpu/quant/matrix.hpp — block-quantized weight matrices held in their blocks (regrouped into
// the kernels' tiles, quant/layout.hpp) and their products.
//
//   quant::matrix w(k, {{q_rows, gguf_type::q4_k}, {v_rows, gguf_type::q6_k}});  // stacked parts
//   w.set_rows(row0, raw_gguf_rows, rows);    // rows as a GGUF file stores them, a slice at a time
//   quant::linear(m, x, ldx, w, y, ldy);      // Y = X · Wᵀ
//
// A matrix may stack parts of different block types (a layer's q|k|v where v is Q6_K and q, k are
// Q4_K, as llama.cpp's Q4_K_M files have them); each part is multiplied by its own kernel into its
// own columns of Y. Activations are quantized per row, to the block size of the part's type.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "../../core/error.hpp"
#include "../dispatch.hpp"
#include "../memory.hpp"
#include "../simd.hpp"
#include "../tasks.hpp"
#include "blocks.hpp"
#include "layout.hpp"

namespace dlm::cpu::quant {

/// Rows of a matrix in one block type.
struct part_spec {
    index_t rows = 0;
    io::gguf_type type{};
};

/// Quantized activations of one block size (layout.hpp, activation_view), in buffers reused
/// across calls.
class activations {
public:
    /// Quantizes X[m × k] (rows `ldx` apart) per row and block of `block` elements by the kernel
    /// entry's quantizer, into its layout (quant_body.inl, quantize_rows): scale amax/127, quants
    /// round(x · 127/amax) (to nearest even), sums of each 16 quants and their 16-bit pairs.
    void quantize(index_t m, index_t k, const float* x, std::ptrdiff_t ldx, int block, const quant_product& kernel) {
        const int mr = kernel.a.mr, group = std::min(kernel.a.group, block);
        if (group <= 0 || block % group != 0)
            throw contract_error("quant::activations: groups of " + std::to_string(group) + " bytes do not divide blocks of " + std::to_string(block));
        const index_t blocks = k / block, tiles = (m + mr - 1) / mr;
        q_.assign(static_cast<std::size_t>(tiles) * mr * k, 0);
        scale_.assign(static_cast<std::size_t>(tiles * blocks) * mr, 0.0f);
        sums_.assign(static_cast<std::size_t>(tiles * blocks) * (block / 16) * mr, 0);
        pairs_.assign(static_cast<std::size_t>(tiles * blocks) * pair_words(block) * mr, 0);
        view_ = {q_.data(), scale_.data(), sums_.data(), pairs_.data(), block, blocks, mr, group};
        kernel.quantize(m, k, x, ldx, block, group, q_.data(), scale_.data(), sums_.data(), pairs_.data());
    }
    [[nodiscard]] const activation_view& view() const noexcept { return view_; }

private:
    std::vector<std::int8_t, aligned_allocator<std::int8_t>> q_;
    std::vector<float> scale_;
    std::vector<std::int32_t> sums_, pairs_;
    activation_view view_;
};

/// A weight matrix W[n × k] held in GGUF blocks (layout.hpp's tiles), in parts of one type each.
class matrix {
public:
    matrix() = default;
    /// Parts stacked in order; invalid_parameter if k is not a whole number of a part's blocks or a
    /// type has no kernel.
    matrix(index_t k, const std::vector<part_spec>& parts) : k_(k) {
        index_t row0 = 0;
        for (const part_spec& p : parts) {
            check(k, p.type);
            part q;
            q.row0 = row0;
            q.rows = p.rows;
            q.type = p.type;
            q.groups = (p.rows + tile_rows - 1) / tile_rows;
            q.blocks = k / geometry(p.type).block;
            zero_fill(q.data, static_cast<std::size_t>(q.groups * q.blocks) * static_cast<std::size_t>(geometry(p.type).tile_bytes()));
            parts_.push_back(std::move(q));
            row0 += p.rows;
        }
        n_ = row0;
    }

    /// Bytes a matrix of these parts holds, before allocating it.
    [[nodiscard]] static std::size_t bytes_for(index_t k, const std::vector<part_spec>& parts) {
        std::size_t bytes = 0;
        for (const part_spec& p : parts) {
            check(k, p.type);
            bytes += static_cast<std::size_t>((p.rows + tile_rows - 1) / tile_rows) * static_cast<std::size_t>(k / geometry(p.type).block) *
                     static_cast<std::size_t>(geometry(p.type).tile_bytes());
        }
        return bytes;
    }

    /// Stores rows [row0, row0 + rows) of W from `src`, rows of blocks as a GGUF file stores them
    /// (quant::row_bytes(type, k) bytes each); the rows must lie in one part.
    void set_rows(index_t row0, const std::byte* src, index_t rows) {
        const part* p = find(row0);
        if (p == nullptr || row0 + rows > p->row0 + p->rows)
            throw contract_error("quant::matrix::set_rows: rows [" + std::to_string(row0) + ", " + std::to_string(row0 + rows) +
                                 ") do not lie in one part");
        part& q = const_cast<part&>(*p);
        const std::size_t rb = row_bytes(q.type, k_), bs = io::gguf_type_size(q.type);
        [[maybe_unused]] const bool parallel = static_cast<double>(rows) * k_ > 4e6;
        const index_t g_first = (row0 - q.row0) / tile_rows, g_last = (row0 - q.row0 + rows + tile_rows - 1) / tile_rows;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (parallel)
#endif
        for (index_t gi = g_first; gi < g_last; ++gi) {  // one tile column per iteration: threads never share a tile
            const index_t lr_begin = std::max(row0 - q.row0, gi * tile_rows), lr_end = std::min(row0 - q.row0 + rows, (gi + 1) * tile_rows);
            for (index_t lr = lr_begin; lr < lr_end; ++lr) {
                const std::byte* srow = src + static_cast<std::size_t>(lr - (row0 - q.row0)) * rb;
                with_block_type(q.type, [&]<io::gguf_type T>() {
                    for (index_t s = 0; s < q.blocks; ++s) pack_block<T>(srow + static_cast<std::size_t>(s) * bs, tile(q, gi, s), static_cast<int>(lr % tile_rows));
                });
            }
        }
    }

    /// Row `j` of W as f32 (an embedding lookup): the values dequantize_row gives.
    void row(index_t j, float* out) const {
        const part* p = find(j);
        if (p == nullptr) throw contract_error("quant::matrix::row: row " + std::to_string(j) + " outside [0, " + std::to_string(n_) + ")");
        const tile_geometry g = geometry(p->type);
        const index_t lr = j - p->row0;
        for (index_t s = 0; s < p->blocks; ++s)
            unpack_block(g, tile(*p, lr / tile_rows, s), static_cast<int>(lr % tile_rows), out + s * g.block);
    }

    [[nodiscard]] index_t rows() const noexcept { return n_; }
    [[nodiscard]] index_t cols() const noexcept { return k_; }
    [[nodiscard]] std::size_t bytes() const noexcept {
        std::size_t b = 0;
        for (const part& p : parts_) b += p.data.size();
        return b;
    }
    /// The parts: first row, rows, and the kernels' view of their tiles.
    struct part_view {
        index_t row0, rows;
        tile_view tiles;
    };
    [[nodiscard]] std::vector<part_view> parts() const {
        std::vector<part_view> v;
        for (const part& p : parts_) v.push_back({p.row0, p.rows, {p.data.data(), p.type, p.groups, p.blocks}});
        return v;
    }
private:
    struct part {
        index_t row0 = 0, rows = 0;
        io::gguf_type type{};
        index_t groups = 0, blocks = 0;
        weight_storage<std::byte> data;
    };

    static void check(index_t k, io::gguf_type t) {
        if (!has_kernel(t))
            throw invalid_parameter("type", std::string(io::gguf_type_name(t)) + " is not a block type dlm multiplies (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K)");
        (void)row_bytes(t, k);
    }
    [[nodiscard]] const part* find(index_t row) const noexcept {
        for (const part& p : parts_)
            if (row >= p.row0 && row < p.row0 + p.rows) return &p;
        return nullptr;
    }
    [[nodiscard]] static std::byte* tile(const part& p, index_t g, index_t s) noexcept {
        return const_cast<std::byte*>(p.data.data()) +
               static_cast<std::size_t>(g * p.blocks + s) * static_cast<std::size_t>(geometry(p.type).tile_bytes());
    }
    /// Byte of quant e (in the block) of tile row c, and whether it is the high nibble.
    [[nodiscard]] static std::size_t quant_at(const tile_geometry& g, int e, int c, bool& high) noexcept {
        const int ck = g.chunk_k(), within = e % ck;
        high = g.bits != 8 && within >= 4;
        return static_cast<std::size_t>(g.header_bytes + e / ck * 64 + 4 * c + within % 4);
    }
    /// Byte and shift of the high bits (layout.hpp: high_bits) of 5- or 6-bit quant e of tile row c.
    [[nodiscard]] static std::size_t high_bits_at(const tile_geometry& g, int e, int c, int& shift) noexcept {
        const int quad = e / 4, per = g.high_quads();
        shift = g.high_bits() * (quad % per);
        return static_cast<std::size_t>(g.high_at() + quad / per * 64 + 4 * c + e % 4);
    }
    /// One file block into row c of a tile: the header (d, dmin, the sub-block scales and mins),
    /// then the quants as quant_at and high_bits_at place them. Row c owns whole bytes of every
    /// 64-byte chunk (4c .. 4c + 3), so each byte is written once, never read back: a block of
    /// 256 quants is about 160 stores, where a read-modify-write per quant through the run-time
    /// geometry made loading a GGUF file bound by this function (docs/benchmarks.md).
    template <io::gguf_type T>
    static void pack_block(const std::byte* b, std::byte* t, int c) noexcept {
        constexpr tile_geometry g = geometry(T);
        constexpr int r = static_cast<int>(tile_rows);
        if constexpr (T == io::gguf_type::q6_k) {
            std::memcpy(t + 2 * c, b + detail::k_layout::q6k_d, 2);
            for (int j = 0; j < 16; ++j) t[g.sc_at + j * r + c] = b[detail::k_layout::q6k_sc + j];
        } else {
            std::memcpy(t + 2 * c, b, 2);
        }
        if constexpr (g.mins) {
            std::memcpy(t + 2 * r + 2 * c, b + 2, 2);
            for (int j = 0; j < 8; ++j) {
                const detail::scale_min sm = detail::k4_scale_min(b + detail::k_layout::q4k_scales, j);
                t[g.sc_at + j * r + c] = std::byte{sm.scale};
                t[g.m_at + j * r + c] = std::byte{sm.min};
            }
        }
        std::uint8_t u[256];
        detail::block_quants<T>(b, u);
        std::byte* row = t + g.header_bytes + 4 * c;
        if constexpr (g.bits == 8) {
            for (int q = 0; q < g.block / 4; ++q) std::memcpy(row + q * 64, u + 4 * q, 4);
        } else {
            // Chunk i: elements 8i .. 8i + 3 in the low nibbles, 8i + 4 .. 8i + 7 in the high ones.
            for (int i = 0; i < g.block / 8; ++i)
                for (int j = 0; j < 4; ++j) row[i * 64 + j] = static_cast<std::byte>((u[8 * i + j] & 0xf) | (u[8 * i + 4 + j] & 0xf) << 4);
        }
        if constexpr (g.high_bits() > 0) {
            // Byte j of high chunk h: bits high_bits·(q % high_quads) up of element 4q + j, for the
            // high_quads quads q from h · high_quads.
            constexpr int per = g.high_quads();
            std::byte* high = t + g.high_at() + 4 * c;
            for (int h = 0; h < g.block / 4 / per; ++h)
                for (int j = 0; j < 4; ++j) {
                    unsigned v = 0;
                    for (int q = 0; q < per; ++q) v |= static_cast<unsigned>(u[4 * (h * per + q) + j] >> 4 & g.high_mask()) << (g.high_bits() * q);
                    high[h * 64 + j] = static_cast<std::byte>(v);
                }
        }
    }
    /// Row c of a tile's block as f32, with dequantize_row's arithmetic.
    static void unpack_block(const tile_geometry& g, const std::byte* t, int c, float* out) noexcept {
        constexpr int r = static_cast<int>(tile_rows);
        const float d = detail::half(t + 2 * c), dmin = g.mins ? detail::half(t + 2 * r + 2 * c) : 0.0f;
        for (int e = 0; e < g.block; ++e) {
            bool high = false;
            const std::uint8_t byte = static_cast<std::uint8_t>(t[quant_at(g, e, c, high)]);
            int u = g.bits == 8 ? byte : (high ? byte >> 4 : byte & 0xf);
            if (g.high_bits() > 0) {
                int shift = 0;
                // The byte first, in its own statement: C++17 sequences a shift's left operand first, but
                // GCC's -fsanitize=shift instrumentation read `shift` before the call had set it.
                const std::size_t hi = high_bits_at(g, e, c, shift);
                u |= ((static_cast<std::uint8_t>(t[hi]) >> shift) & g.high_mask()) << 4;
            }
            const int j = e / g.sub;
            switch (g.type) {
                case io::gguf_type::q8_0: out[e] = static_cast<float>(static_cast<std::int8_t>(byte)) * d; break;
                case io::gguf_type::q4_0: out[e] = static_cast<float>(u - 8) * d; break;
                case io::gguf_type::q6_k:
                    out[e] = d * static_cast<float>(static_cast<std::int8_t>(t[g.sc_at + j * r + c])) * static_cast<float>(u - 32);
                    break;
                default: {  // Q4_K, Q5_K
                    const float d1 = d * static_cast<float>(static_cast<std::uint8_t>(t[g.sc_at + j * r + c]));
                    const float m1 = dmin * static_cast<float>(static_cast<std::uint8_t>(t[g.m_at + j * r + c]));
                    out[e] = d1 * static_cast<float>(u) - m1;
                }
            }
        }
    }

    index_t n_ = 0, k_ = 0;
    std::vector<part> parts_;
};

/// Y[m × n] = X[m × k] · Wᵀ, split over threads by (tile columns, block of rows) as cpu::linear
/// does (tasks.hpp): every element is computed by one thread with the same instructions, whatever
/// the thread count.
inline void linear(index_t m, const float* x, std::ptrdiff_t ldx, const matrix& w, float* y, std::ptrdiff_t ldy) {
    if (m <= 0) return;
    const quant_product& kq = kernels().quant;
    const index_t k = w.cols();
    const std::vector<matrix::part_view> parts = w.parts();
    // Activations quantized once per block size the parts use, in the kernel's layout.
    thread_local activations a32, a256;
    bool need32 = false, need256 = false;
    for (const auto& p : parts) (geometry(p.tiles.type).block == 32 ? need32 : need256) = true;
    if (need32) a32.quantize(m, k, x, ldx, 32, kq);
    if (need256) a256.quantize(m, k, x, ldx, 256, kq);
    const activation_view v32 = a32.view(), v256 = a256.view();
    struct chunk {
        const matrix::part_view* part;
        index_t g0, g1;
    };
    std::vector<chunk> chunks;
    const index_t row_block = task_rows(kq.a.mr), per_chunk = task_columns(k / 8, std::min(m, row_block));
    for (const auto& p : parts)
        for (index_t g = 0; g < p.tiles.groups; g += per_chunk) chunks.push_back({&p, g, std::min(p.tiles.groups, g + per_chunk)});
    for_each_task(m, row_block, static_cast<long>(chunks.size()), static_cast<double>(m) * w.rows() * k, [&](long ci, index_t r0, index_t rows) {
        const chunk& ch = chunks[static_cast<std::size_t>(ci)];
        activation_view a = geometry(ch.part->tiles.type).block == 32 ? v32 : v256;
        const index_t tile = r0 / a.mr;
        a.q += static_cast<std::ptrdiff_t>(tile) * a.blocks * a.block * a.mr;
        a.scale += static_cast<std::ptrdiff_t>(tile) * a.blocks * a.mr;
        a.sums += static_cast<std::ptrdiff_t>(tile) * a.blocks * (a.block / 16) * a.mr;
        a.pairs += static_cast<std::ptrdiff_t>(tile) * a.blocks * pair_words(a.block) * a.mr;
        kq.run(rows, ch.part->rows, a, ch.part->tiles, ch.g0, ch.g1, y + r0 * ldy + ch.part->row0, ldy);
    });
}

}  // namespace dlm::cpu::quant
