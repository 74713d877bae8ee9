// dlm/cpu/kv_cache.hpp — the CPU transformer's K/V stores: a sequence's cache and one forward's
// window, held in f32 or in bf16, in the panel layouts the attention's products read as their B
// operand (kernels/table.hpp).
//
// A block of `positions` positions for one (layer, KV head), elements grouped in k-groups of g
// (g = 1 for f32, 2 for bf16, whose products consume pairs):
//   keys, transposed:   (dim, pos) at (dim / g) · key_stride · g + pos · g + dim % g
//                       (key_stride = positions + panel_width, so a panel starting at any position
//                       stays inside; bf16 pads the dims with zero rows to a multiple of bf16_k_align)
//   values, in panels:  (pos, dim) at ((dim / 32) · positions + pos − pos % g) · 32 + dim % 32 · g + pos % g
//                       (value_stride = head_dim rounded up to panel_width; a panel's positions are
//                       one contiguous stream; bf16 rounds `positions` up to bf16_k_align)
// With g = 1 these are the f32 layouts the attention has always read. A bf16 store rounds every key
// and value once (nearest even, subnormals to zero: to_bf16_daz, as the bf16 products take them),
// for the window and the cache alike, so an exact cache still holds what a recompute computes.
//
// A window's block starts at its first position rounded down to bf16_k_align and ends rounded up:
// the positions around the fresh rows are copied from the cache (zeros without one), so the value
// product's sums over keys break only at multiples of 32 wherever the window sits, and a bf16
// product (pairs, or AMX's 32-deep tiles) adds the same pairs in a cached step as in a recompute.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/error.hpp"
#include "../io/dtype.hpp"
#include "../model/concept.hpp"
#include "../model/request_check.hpp"
#include "dispatch.hpp"
#include "kernels/pack.hpp"
#include "kernels/table.hpp"
#include "simd.hpp"

namespace dlm::cpu {

/// `n` rounded up to a multiple of `a`.
[[nodiscard]] constexpr index_t round_up(index_t n, index_t a) noexcept { return (n + a - 1) / a * a; }

/// "f32", "bf16", "f16": an element type as the options spell it (--kv, load_options::kv_dtype).
[[nodiscard]] inline std::string kv_element_name(io::dtype e) {
    return e == io::dtype::f32 ? "f32" : e == io::dtype::bf16 ? "bf16" : "f16";
}

/// Throws invalid_parameter(`parameter`) unless `e` is an element type a CPU K/V store holds: f32,
/// or bf16 (f16's range, 65504, could overflow on large keys). Returns `e`.
inline io::dtype check_kv_element(io::dtype e, const char* parameter) {
    if (e != io::dtype::f32 && e != io::dtype::bf16)
        throw invalid_parameter(parameter, "a KV cache holds f32 or bf16, not " + kv_element_name(e) + " (f16's range, 65504, could overflow on large keys)");
    return e;
}

/// The layout of one (layer, KV head) block of K/V (see the file's comment).
struct kv_shape {
    io::dtype element = io::dtype::f32;
    index_t positions = 0;  ///< positions held (bf16: a multiple of bf16_k_align)
    index_t head_dim = 0;

    /// A block for at least `wanted` positions.
    [[nodiscard]] static kv_shape of(io::dtype element, index_t wanted, index_t head_dim) noexcept {
        return {element, element == io::dtype::bf16 ? round_up(wanted, bf16_k_align) : wanted, head_dim};
    }
    [[nodiscard]] index_t group() const noexcept { return element == io::dtype::bf16 ? 2 : 1; }
    [[nodiscard]] std::size_t element_size() const noexcept { return element == io::dtype::bf16 ? 2 : 4; }
    /// Dimensions the key rows hold (bf16: zero rows up to a whole AMX tile's depth).
    [[nodiscard]] index_t key_dims() const noexcept { return element == io::dtype::bf16 ? round_up(head_dim, bf16_k_align) : head_dim; }
    [[nodiscard]] index_t key_stride() const noexcept { return positions + panel_width; }
    [[nodiscard]] index_t value_stride() const noexcept { return round_up(head_dim, panel_width); }
    /// Elements of the keys and of the values.
    [[nodiscard]] std::size_t key_elements() const noexcept { return std::size_t(key_dims()) * std::size_t(key_stride()); }
    [[nodiscard]] std::size_t value_elements() const noexcept { return std::size_t(positions) * std::size_t(value_stride()); }
    [[nodiscard]] std::size_t bytes() const noexcept { return (key_elements() + value_elements()) * element_size(); }
    /// Where key element (dim, pos) and value element (pos, dim) sit.
    [[nodiscard]] std::ptrdiff_t key_at(index_t dim, index_t pos) const noexcept {
        const index_t g = group();
        return std::ptrdiff_t{dim / g} * key_stride() * g + std::ptrdiff_t{pos} * g + dim % g;
    }
    [[nodiscard]] std::ptrdiff_t value_at(index_t pos, index_t dim) const noexcept {
        const index_t g = group();
        return (std::ptrdiff_t{dim / panel_width} * positions + pos - pos % g) * panel_width + std::ptrdiff_t{dim % panel_width} * g + pos % g;
    }
    /// The products' views of the keys from position `pos` on (B of the scores: k = dims, columns =
    /// positions) and of the values from `pos` on (B of the output: k = positions, a multiple of g
    /// from the block's start; columns = dims).
    [[nodiscard]] std::ptrdiff_t key_panel_stride() const noexcept { return std::ptrdiff_t{panel_width} * group(); }
    [[nodiscard]] std::ptrdiff_t key_ldb() const noexcept { return std::ptrdiff_t{key_stride()} * group(); }
    [[nodiscard]] std::ptrdiff_t value_panel_stride() const noexcept { return std::ptrdiff_t{positions} * panel_width; }
    [[nodiscard]] std::ptrdiff_t value_ldb() const noexcept { return std::ptrdiff_t{panel_width} * group(); }
};

/// K/V blocks of `blocks` (layer, KV head) pairs of one shape, over bytes someone else holds; position
/// 0 of each block is canvas position `origin`.
struct kv_blocks {
    kv_shape shape;
    index_t origin = 0;
    std::byte* keys = nullptr;    // block b's keys at keys + b · key bytes
    std::byte* values = nullptr;  // block b's values at values + b · value bytes
    [[nodiscard]] std::byte* key_block(std::size_t b) const noexcept { return keys + b * shape.key_elements() * shape.element_size(); }
    [[nodiscard]] std::byte* value_block(std::size_t b) const noexcept { return values + b * shape.value_elements() * shape.element_size(); }
};

/// Copies the K/V of `count` positions from block `sb` of `src`, its positions [sp, sp + count),
/// to block `db` of `dst`, its positions [dp, dp + count) (one element type; block positions, not
/// canvas positions). Bits as they are.
inline void copy_positions(const kv_blocks& src, std::size_t sb, index_t sp, const kv_blocks& dst, std::size_t db, index_t dp, index_t count) {
    if (count <= 0) return;
    const kv_shape &s = src.shape, &d = dst.shape;
    const std::size_t es = s.element_size();
    const index_t g = s.group();
    const std::byte* sk = src.key_block(sb);
    std::byte* dk = dst.key_block(db);
    for (index_t i = 0; i < s.key_dims(); i += g)  // a key row: the run of positions is contiguous
        std::memcpy(dk + std::size_t(d.key_at(i, dp)) * es, sk + std::size_t(s.key_at(i, sp)) * es, std::size_t(count) * std::size_t(g) * es);
    const std::byte* sv = src.value_block(sb);
    std::byte* dv = dst.value_block(db);
    for (index_t dim = 0; dim < s.value_stride(); dim += panel_width) {
        const auto from = [&](index_t j) { return sv + std::size_t(s.value_at(sp + j, dim)) * es; };
        const auto to = [&](index_t j) { return dv + std::size_t(d.value_at(dp + j, dim)) * es; };
        const auto one = [&](index_t j) {  // a position's 32 dims of the panel, g elements apart
            for (index_t e = 0; e < panel_width; ++e) std::memcpy(to(j) + std::size_t(e * g) * es, from(j) + std::size_t(e * g) * es, es);
        };
        index_t j = 0;
        if ((sp - dp) % g != 0) {  // the pairs do not line up: position by position
            for (; j < count; ++j) one(j);
            continue;
        }
        for (; j < count && (sp + j) % g != 0; ++j) one(j);
        const index_t whole = (count - j) / g * g;  // whole groups of positions: one contiguous run of the panel
        if (whole > 0) std::memcpy(to(j), from(j), std::size_t(whole) * panel_width * es);
        for (j += whole; j < count; ++j) one(j);
    }
}

/// Per-sequence K/V store for `capacity` canvas positions: one block per layer and KV head (the
/// post-RoPE keys and the values, kv_shape's layouts, in `element`), plus a flag per position
/// saying whether its K/V were stored.
struct kv_cache {
    index_t capacity = 0, layers = 0, kv_heads = 0, head_dim = 0;
    kv_shape shape;
    std::vector<std::byte, aligned_allocator<std::byte>> keys, values;
    std::vector<unsigned char> stored;

    kv_cache() = default;
    kv_cache(index_t capacity_, index_t layers_, index_t kv_heads_, index_t head_dim_, io::dtype element = io::dtype::f32)
        : capacity(capacity_), layers(layers_), kv_heads(kv_heads_), head_dim(head_dim_),
          shape(kv_shape::of(check_kv_element(element, "element"), capacity_, head_dim_)),
          keys(shape.key_elements() * shape.element_size() * blocks()), values(shape.value_elements() * shape.element_size() * blocks()),
          stored(static_cast<std::size_t>(capacity_), 0) {}

    /// Bytes a cache of this shape holds (in 64 bits).
    [[nodiscard]] static std::uint64_t bytes_for(index_t capacity, index_t layers, index_t kv_heads, index_t head_dim,
                                                 io::dtype element = io::dtype::f32) noexcept {
        return std::uint64_t(layers) * std::uint64_t(kv_heads) * kv_shape::of(element, capacity, head_dim).bytes() + std::uint64_t(capacity);
    }
    [[nodiscard]] io::dtype element() const noexcept { return shape.element; }
    [[nodiscard]] std::size_t blocks() const noexcept { return std::size_t(layers) * std::size_t(kv_heads); }
    /// The blocks over this cache's bytes (block l · kv_heads + g is layer l's KV head g). A const
    /// cache's view is read only: the source of copy_positions, the attention's keys.
    [[nodiscard]] kv_blocks view() const noexcept {
        return {shape, 0, const_cast<std::byte*>(keys.data()), const_cast<std::byte*>(values.data())};
    }
    [[nodiscard]] std::size_t block(index_t layer, index_t g) const noexcept { return std::size_t(layer) * std::size_t(kv_heads) + std::size_t(g); }
    /// Forget everything stored.
    void clear() noexcept { std::fill(stored.begin(), stored.end(), 0); }
};

/// Copies the stored K/V of positions [src_begin, src_begin + count) of `src` to positions
/// [dst_begin, dst_begin + count) of `dst` and marks them stored (the prompt cache's hook; keys are
/// post-RoPE, so both ranges must be the same canvas positions). Bit-exact. Throws
/// dlm::contract_error for stores of different shapes or element types, a range outside either, or
/// an unstored source.
inline void copy_kv(const kv_cache& src, index_t src_begin, kv_cache& dst, index_t dst_begin, index_t count) {
    dlm::detail::check_kv_copy(src, src_begin, dst, dst_begin, count, "cpu::copy_kv");
    if (src.element() != dst.element())
        throw contract_error("cpu::copy_kv: the stores hold different element types (" + kv_element_name(src.element()) + " and " +
                             kv_element_name(dst.element()) + ")");
    for (std::size_t b = 0; b < src.blocks(); ++b) copy_positions(src.view(), b, src_begin, dst.view(), b, dst_begin, count);
    std::fill(dst.stored.begin() + dst_begin, dst.stored.begin() + dst_begin + count, 1);
}

/// Where the heads sit in a row of the fused q|k|v projection output.
struct head_geometry {
    index_t heads = 0, kv_heads = 0, head_dim = 0;
    std::ptrdiff_t qkv_ld = 0;  // floats per row of the q|k|v buffer: (heads + 2 kv_heads) * head_dim
    std::ptrdiff_t out_ld = 0;  // floats per row of the attention output: heads * head_dim
    [[nodiscard]] index_t q_dim() const noexcept { return heads * head_dim; }
    [[nodiscard]] index_t kv_dim() const noexcept { return kv_heads * head_dim; }
};

/// The K/V of one request's window for one layer: fresh rows [begin, end) (post-RoPE, from its
/// q|k|v rows), inside a block of positions [origin, origin + shape.positions) whose other positions
/// come from the cache (see the file's comment); one block per KV head.
struct window_kv {
    index_t begin = 0, end = 0;
    kv_blocks blocks;

    /// The window of rows [begin, end) in `element`, with the positions its block holds.
    [[nodiscard]] static window_kv of(io::dtype element, index_t begin, index_t end, index_t head_dim) noexcept {
        const index_t origin = begin / bf16_k_align * bf16_k_align;
        const index_t wanted = end > begin ? round_up(end, bf16_k_align) - origin : 0;
        return {begin, end, {kv_shape::of(element, wanted, head_dim), origin, nullptr, nullptr}};
    }
    /// Bytes of its blocks for `kv_heads` heads (aligned_bytes each half).
    [[nodiscard]] std::size_t bytes(index_t kv_heads) const noexcept {
        return 2 * aligned_bytes(std::max(blocks.shape.key_elements(), blocks.shape.value_elements()) * blocks.shape.element_size() * std::size_t(kv_heads));
    }
    /// Places its blocks at `at` (bytes(kv_heads) of them, 64-byte aligned) and zeroes the keys' padding dims.
    void place(std::byte* at, index_t kv_heads) noexcept {
        const std::size_t half = bytes(kv_heads) / 2;
        blocks.keys = at;
        blocks.values = at + half;
        const kv_shape& s = blocks.shape;
        if (s.key_dims() > s.head_dim)
            for (index_t g = 0; g < kv_heads; ++g) {
                std::byte* k = blocks.key_block(std::size_t(g));
                const std::size_t from = std::size_t(s.key_at(s.head_dim - s.head_dim % s.group(), 0)) * s.element_size();
                std::memset(k + from, 0, s.key_elements() * s.element_size() - from);
            }
    }
    [[nodiscard]] static std::size_t aligned_bytes(std::size_t n) noexcept { return (n + 63) / 64 * 64; }
};

/// The windows of a forward's requests (window_kv::of each plan's window) in `element`, their
/// blocks placed one after another in `store` (grown as needed).
template <class Request>
void lay_out_windows(std::span<const Request> requests, index_t kv_heads, index_t head_dim, io::dtype element,
                     std::vector<std::byte, aligned_allocator<std::byte>>& store, std::vector<window_kv>& windows) {
    windows.clear();
    std::size_t bytes = 0;
    for (const Request& rq : requests) {
        windows.push_back(window_kv::of(element, rq.plan.window_begin, rq.plan.window_end, head_dim));
        bytes += windows.back().bytes(kv_heads);
    }
    if (store.size() < bytes) store.resize(bytes);
    std::byte* at = store.data();
    for (window_kv& w : windows) {
        w.place(at, kv_heads);
        at += w.bytes(kv_heads);
    }
}

namespace detail {
/// Positions a fresh K/V run holds, and dims it rounds at a time (a multiple of panel_width and of g).
inline constexpr index_t kv_run_positions = 16, kv_run_dims = 64;

/// Stores the fresh keys and values of block positions [p0, p0 + nq) (nq <= kv_run_positions; their
/// rows `ld` floats apart from k_rows and v_rows, d dims each) into one block of shape s, E the
/// element (float, or bf16 bits) and G its k-group. A run of positions is converted 64 dims at a
/// time (bf16: the kernels' round_bf16), then stored a key row at a time (G dims of every position:
/// nq consecutive groups) and a value panel at a time (32 dims of a position, or of a pair of
/// positions for bf16: 32 consecutive pairs). Element by element (a key row and a value panel per
/// element), the stores took 11 % of the AMX vector side of a 168M forward (dlm-bench-forward
/// --amx-vector-side, perf).
template <class E, int G>
void store_fresh_kv(const kv_shape& s, E* keys, E* values, const float* k_rows, const float* v_rows, std::ptrdiff_t ld, index_t p0, index_t nq,
                    index_t d) {
    static_assert(kv_run_dims % panel_width == 0 && kv_run_dims % G == 0, "a run of dims is whole value panels and key groups");
    alignas(64) E kc[kv_run_positions][kv_run_dims], vc[kv_run_positions][kv_run_dims];
    const kernel_table& kt = kernels();
    const std::ptrdiff_t key_stride = s.key_stride(), positions = s.positions;
    for (index_t i0 = 0; i0 < d; i0 += kv_run_dims) {
        const index_t n = std::min(kv_run_dims, d - i0), groups = (n + G - 1) / G;
        for (index_t q = 0; q < nq; ++q) {
            if constexpr (G == 2) {
                kt.round_bf16(k_rows + q * ld + i0, n, kc[q], a_values::bf16_bits);
                kt.round_bf16(v_rows + q * ld + i0, n, vc[q], a_values::bf16_bits);
                if (n % G != 0) kc[q][n] = 0;  // an odd head_dim's last pair: its padding dim, zero
            } else {
                std::memcpy(kc[q], k_rows + q * ld + i0, std::size_t(n) * sizeof(E));
                std::memcpy(vc[q], v_rows + q * ld + i0, std::size_t(n) * sizeof(E));
            }
        }
        for (index_t r = 0; r < groups; ++r) {  // key row i0 / G + r: the run's positions side by side
            E row[kv_run_positions * G];
            for (index_t q = 0; q < nq; ++q) std::memcpy(row + q * G, &kc[q][r * G], G * sizeof(E));
            std::memcpy(keys + ((i0 / G + r) * key_stride + p0) * G, row, std::size_t(nq) * G * sizeof(E));
        }
        for (index_t e0 = 0; e0 < n; e0 += panel_width) {  // value panel (i0 + e0) / 32
            const index_t width = std::min(panel_width, n - e0);
            E* panel = values + (i0 + e0) / panel_width * positions * panel_width;
            for (index_t q = 0; q < nq;) {
                const index_t p = p0 + q;
                if (G == 2 && p % 2 == 0 && q + 1 < nq) {  // a pair of positions: 32 pairs in a row
                    E pair[2 * panel_width];
                    for (index_t e = 0; e < width; ++e) {
                        pair[2 * e] = vc[q][e0 + e];
                        pair[2 * e + 1] = vc[q + 1][e0 + e];
                    }
                    std::memcpy(panel + p * panel_width, pair, std::size_t(2 * width) * sizeof(E));
                    q += 2;
                    continue;
                }
                for (index_t e = 0; e < width; ++e) panel[(p - p % G) * panel_width + e * G + p % G] = vc[q][e0 + e];
                ++q;
            }
        }
    }
}
}  // namespace detail

/// Writes one request's K/V for KV head `g` of `layer` into its window `w` (fresh rows from
/// `qkv_rows`, the window's first row first; the block's other positions from the cache, zeros
/// past it or without one), and the rows [plan.store_begin, plan.store_end) into the cache.
inline void gather_window_kv(const head_geometry& hg, const float* qkv_rows, const forward_plan& plan, const window_kv& w, kv_cache* cache,
                             index_t layer, index_t g) {
    if (w.end <= w.begin) return;
    const kv_shape& s = w.blocks.shape;
    const index_t d = hg.head_dim;
    const float* k_src = qkv_rows + hg.q_dim() + g * d;
    const float* v_src = qkv_rows + hg.q_dim() + hg.kv_dim() + g * d;
    const auto fill = [&]<class E, int G>(E* k, E* v, std::integral_constant<int, G>) {
        for (index_t j0 = 0; j0 < w.end - w.begin; j0 += detail::kv_run_positions)
            detail::store_fresh_kv<E, G>(s, k, v, k_src + j0 * hg.qkv_ld, v_src + j0 * hg.qkv_ld, hg.qkv_ld, w.begin + j0 - w.blocks.origin,
                                         std::min(detail::kv_run_positions, w.end - w.begin - j0), d);
    };
    std::byte* kb = w.blocks.key_block(std::size_t(g));
    std::byte* vb = w.blocks.value_block(std::size_t(g));
    if (s.element == io::dtype::bf16) fill(reinterpret_cast<std::uint16_t*>(kb), reinterpret_cast<std::uint16_t*>(vb), std::integral_constant<int, 2>{});
    else fill(reinterpret_cast<float*>(kb), reinterpret_cast<float*>(vb), std::integral_constant<int, 1>{});
    // The block's positions before and after the fresh rows: from the cache where it holds them, else zeros.
    const index_t o = w.blocks.origin, cap = cache ? cache->capacity : 0;
    const auto around = [&](index_t b, index_t e) {
        const index_t c = std::clamp(cap, b, e);
        if (cache) copy_positions(cache->view(), cache->block(layer, g), b, w.blocks, std::size_t(g), b - o, c - b);
        for (index_t p = c; p < e; ++p) {
            for (index_t i = 0; i < d; ++i) std::memset(kb + std::size_t(s.key_at(i, p - o)) * s.element_size(), 0, s.element_size());
            for (index_t i = 0; i < d; ++i) std::memset(vb + std::size_t(s.value_at(p - o, i)) * s.element_size(), 0, s.element_size());
        }
    };
    around(o, w.begin);
    around(w.end, o + s.positions);
    if (plan.stores())
        copy_positions(w.blocks, std::size_t(g), plan.store_begin - o, cache->view(), cache->block(layer, g), plan.store_begin, plan.store_end - plan.store_begin);
}

}  // namespace dlm::cpu
