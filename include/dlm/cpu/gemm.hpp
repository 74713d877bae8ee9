// dlm/cpu/gemm.hpp — matrix products of the CPU transformer: weights packed once in their own
// element type (f32, f16 or bf16), products by the kernels dispatch.hpp picked for this CPU.
//
//   C[m × n] (= or +=) A[m × k] · B[k × n]
//
// B is read in panels of `panel_width` columns (kernels/table.hpp); weights are packed once at load
// into exactly that form (`packed_matrix`), and the attention reads its keys and values through the
// same panel view.
//
// Why not Eigen's GEMM: its blocking sizes and kernel paths depend on the matrix shapes and on where
// a row falls in a register panel (some paths split the k-sum over two accumulators), so a row's
// result changes with the number of rows stacked around it. Here every output element is one lane
// of one accumulator that sums A(i, k) · B(k, j) for k = 0, 1, 2, ... in order, whatever m, n, the
// row's position, the k-blocking or the thread count: a row of C depends on its row of A and on B
// only. Splitting k into several calls with `accumulate` continues the same sum exactly (the
// accumulator goes through memory as an f32 and comes back unchanged).
//
// Element types of the weights: f32 and f16 multiply f32 activations (f16 widened in registers);
// bf16 weights multiply activations rounded to bf16 (round to nearest even, subnormals flushed to
// zero), summed in f32 in pairs exactly as vdpbf16ps does, so every instruction set computes the
// same bits (kernels/bf16_emulation.inl).
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../core/memory.hpp"
#include "../io/dtype.hpp"
#include "dispatch.hpp"
#include "quant/matrix.hpp"
#include "simd.hpp"
#include "tasks.hpp"

namespace dlm::cpu {

namespace detail {
using dlm::detail::saturating_add;  // byte counts (core/memory.hpp)
using dlm::detail::saturating_mul;

/// Sixteen bytes of a packed panel: four 32-bit words (two bf16 each, or one f32), or eight f16.
using words4 = std::uint32_t __attribute__((vector_size(16)));
using halves8 = std::uint16_t __attribute__((vector_size(16)));

/// The bits packing gives stored bf16 values (to_bf16_daz of their f32 values), 8 at once: a
/// subnormal flushed to a zero of its sign, a NaN quieted, every other pattern unchanged.
[[nodiscard]] inline words4 bf16_as_packed(words4 w) noexcept {
    const auto h = std::bit_cast<halves8>(w);
    const halves8 e = h & 0x7f80;
    const auto subnormal = static_cast<halves8>(e == 0), nan = static_cast<halves8>((e == 0x7f80) & ((h & 0x7f) != 0));
    const halves8 out = (h & ~(subnormal & 0x7fff)) | (nan & 0x40);
    return std::bit_cast<words4>(out);
}

/// The bits packing gives stored f16 values (f32_to_f16 of their f32 values), 8 at once: a NaN
/// quieted, every other pattern unchanged.
[[nodiscard]] inline words4 f16_as_packed(words4 w) noexcept {
    const auto h = std::bit_cast<halves8>(w);
    const auto nan = static_cast<halves8>(((h & 0x7c00) == 0x7c00) & ((h & 0x3ff) != 0));
    const halves8 out = h | (nan & 0x200);
    return std::bit_cast<words4>(out);
}

/// Column q of the 4 × 4 words r[0..3] into c[q].
inline void transpose4(const words4* r, words4* c) noexcept {
    const words4 lo01 = __builtin_shufflevector(r[0], r[1], 0, 4, 1, 5), lo23 = __builtin_shufflevector(r[2], r[3], 0, 4, 1, 5);
    const words4 hi01 = __builtin_shufflevector(r[0], r[1], 2, 6, 3, 7), hi23 = __builtin_shufflevector(r[2], r[3], 2, 6, 3, 7);
    c[0] = __builtin_shufflevector(lo01, lo23, 0, 1, 4, 5);
    c[1] = __builtin_shufflevector(lo01, lo23, 2, 3, 6, 7);
    c[2] = __builtin_shufflevector(hi01, hi23, 0, 1, 4, 5);
    c[3] = __builtin_shufflevector(hi01, hi23, 2, 3, 6, 7);
}

/// Column q of the 8 × 8 halves r[0..7] into c[q]: rows interleaved in pairs, then each pair of
/// halves moved as a word (transpose4 of the row pairs, columns 0-3 and 4-7).
inline void transpose8(const words4* r, words4* c) noexcept {
    words4 lo[4], hi[4];
    for (int q = 0; q < 4; ++q) {
        const auto a = std::bit_cast<halves8>(r[2 * q]), b = std::bit_cast<halves8>(r[2 * q + 1]);
        const halves8 l = __builtin_shufflevector(a, b, 0, 8, 1, 9, 2, 10, 3, 11), h = __builtin_shufflevector(a, b, 4, 12, 5, 13, 6, 14, 7, 15);
        lo[q] = std::bit_cast<words4>(l);
        hi[q] = std::bit_cast<words4>(h);
    }
    transpose4(lo, c);
    transpose4(hi, c + 4);
}

/// A whole panel from `src`: panel_width rows of `count` elements of E (4-byte words or 2-byte
/// halves) each, row-major, any alignment; element g of row i written to element g · panel_width + i
/// of `dst`, through `fix` (on 16 bytes at a time). Blocks of 16 bytes by as many rows are
/// transposed in registers, so each of the panel's cache lines is written whole, in order.
template <class E, class Fix>
void transpose_panel(const std::byte* src, std::size_t count, std::byte* dst, Fix fix) noexcept {
    static_assert(sizeof(E) == 4 || sizeof(E) == 2, "a panel moves as words or halves");
    constexpr std::size_t lanes = 16 / sizeof(E), pw = panel_width, es = sizeof(E);
    static_assert(pw % lanes == 0, "a panel transposes in blocks of 16 bytes by as many rows");
    std::size_t g = 0;
    for (; g + lanes <= count; g += lanes)
        for (std::size_t i = 0; i < pw; i += lanes) {
            words4 r[lanes], c[lanes];
            for (std::size_t q = 0; q < lanes; ++q) {
                std::memcpy(&r[q], src + ((i + q) * count + g) * es, 16);
                r[q] = fix(r[q]);
            }
            if constexpr (lanes == 4) transpose4(r, c);
            else transpose8(r, c);
            for (std::size_t q = 0; q < lanes; ++q) std::memcpy(dst + ((g + q) * pw + i) * es, &c[q], 16);
        }
    for (; g < count; ++g)  // the last elements of a row, fewer than a block
        for (std::size_t i = 0; i < pw; ++i) {
            words4 v{};
            std::memcpy(&v, src + (i * count + g) * es, es);
            v = fix(v);
            std::memcpy(dst + (g * pw + i) * es, &v, es);
        }
}

}  // namespace detail

/// C[m × n] (=|+=) A[m × kdim] · B (f32), serial (callers parallelize around it): the attention's
/// products. A is read in place (f32_product::run_rows).
inline void gemm(index_t m, index_t n, index_t kdim, const float* a, std::ptrdiff_t lda, const panel_view& b, float* c,
                 std::ptrdiff_t ldc, bool accumulate = false) {
    if (m <= 0 || n <= 0) return;
    kernels().f32.run_rows(m, n, kdim, a, lda, b, 0, (n + panel_width - 1) / panel_width, c, ldc, accumulate);
}

/// How a (stacked) weight matrix is held: in one element type, or, when `parts` is not empty, in
/// GGUF blocks, a block type per part (quant/matrix.hpp).
struct weight_layout {
    io::dtype type = io::dtype::f32;
    std::vector<quant::part_spec> parts;
    [[nodiscard]] bool quantized() const noexcept { return !parts.empty(); }
    /// "bf16", "q4_k", "q4_k+q6_k" (the parts' types).
    [[nodiscard]] std::string name() const {
        std::string s;
        if (!quantized()) s = io::dtype_name(type);
        for (const quant::part_spec& p : parts) {
            const std::string n(io::gguf_type_name(p.type));
            if (s.find(n) != std::string::npos) continue;
            if (!s.empty()) s += '+';
            s += n;
        }
        for (char& ch : s) ch = static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
        return s;
    }
};

/// A weight matrix W[n × k] (n outputs, k inputs, row-major as stored in checkpoints), packed for
/// y = W x in its element type: panel p holds rows [p·32, p·32 + 32) of W transposed, in k-groups
/// of one element (f32, f16) or two (bf16), zero-padded (see kernels/table.hpp). Or held in GGUF
/// blocks (a quant::matrix), filled by set_blocks.
class packed_matrix {
public:
    packed_matrix() = default;
    /// W held as `layout` says (quantized parts must add up to n rows).
    packed_matrix(index_t n, index_t k, const weight_layout& layout) : n_(n), k_(k), type_(layout.type) {
        if (!layout.quantized()) {
            *this = packed_matrix(n, k, layout.type);
            return;
        }
        quant_ = quant::matrix(k, layout.parts);
        if (quant_.rows() != n)
            throw contract_error("packed_matrix: quantized parts hold " + std::to_string(quant_.rows()) + " rows, not " + std::to_string(n));
    }
    /// Bytes a matrix of this shape and layout holds, before allocating it.
    /// Bytes an n x k matrix held as `layout` takes, in 64 bits (a shape past 2^31 is counted, not
    /// overflowed; a product past 2^64 saturates at its maximum).
    [[nodiscard]] static std::size_t bytes_for(std::int64_t n, std::int64_t k, const weight_layout& layout) {
        return layout.quantized() ? quant::matrix::bytes_for(static_cast<index_t>(k), layout.parts) : bytes_for(n, k, layout.type);
    }
    [[nodiscard]] bool quantized() const noexcept { return quant_.rows() > 0; }
    [[nodiscard]] const quant::matrix& quantized_matrix() const noexcept { return quant_; }
    /// Stores rows [row0, row0 + rows) of a quantized W from their GGUF blocks (one part's type).
    void set_blocks(index_t row0, const std::byte* src, index_t rows) { quant_.set_rows(row0, src, rows); }
    packed_matrix(index_t n, index_t k, io::dtype type = io::dtype::f32) : n_(n), k_(k), type_(type) {
        if (n < 0 || k < 0) throw contract_error("packed_matrix: negative shape");
        const std::size_t elements = static_cast<std::size_t>(panels()) * static_cast<std::size_t>(panel_stride());
        if (type_ == io::dtype::f32) zero_fill(f32_, elements);
        else zero_fill(h16_, elements);
    }

    /// Stores rows [row0, row0 + rows) of W from row-major f32 `src` (rows × k floats), converted
    /// to the matrix's type (exact when the values came from that type, as a checkpoint's do).
    void set_rows(index_t row0, const float* src, index_t rows) {
        pack_rows(row0, rows, [src, k = std::size_t(k_)](index_t r, index_t j) { return src[std::size_t(r) * k + std::size_t(j)]; });
    }

    /// As set_rows, from rows as a checkpoint stores them: rows × k little-endian elements of
    /// `stored` (f32, f16 or bf16) at `src`, any alignment. The packed bits are those set_rows gives
    /// the elements' f32 values, without an f32 copy of the slice. Rows stored in the matrix's own
    /// type move as they are, whole panels transposed in registers (bf16 only with k even, so that
    /// every pair is whole); other rows are converted element by element.
    void set_stored(index_t row0, const std::byte* src, io::dtype stored, index_t rows) {
        check_rows(row0, rows);
        const bool as_is = std::endian::native == std::endian::little && stored == type_ && (type_ != io::dtype::bf16 || k_ % 2 == 0);
        if (as_is) return copy_stored(row0, src, rows);
        convert_stored(row0, src, stored, rows);
    }

    /// Row `j` of W (k values) as f32: an embedding lookup from the packed head. The row's k-groups
    /// lie panel_width · group apart, a cache line each, so the line 48 groups ahead is prefetched
    /// with each: missed one after another, they took 5.7 µs per row of 1024 bf16 values, a
    /// thirteenth of the 168M shape's AMX vector side, and 1.75x less with 48 ahead (16: 1.5x less;
    /// dlm-bench-forward --amx-vector-side, perf).
    void row(index_t j, float* out) const {
        if (quantized()) return quant_.row(j, out);
        const auto gather = [&]<int G>(const auto* data, auto&& cvt) {
            constexpr index_t groups_ahead = 48;
            constexpr std::ptrdiff_t step = std::ptrdiff_t{panel_width} * G;
            const auto* p = data + offset(j, 0);
            for (index_t i = 0; i + G <= k_; i += G, p += step) {
                if (i + groups_ahead * G < k_) __builtin_prefetch(p + groups_ahead * step);  // only lines of the row
                for (int e = 0; e < G; ++e) out[i + e] = cvt(p[e]);
            }
            for (index_t i = k_ / G * G, e = 0; i < k_; ++i, ++e) out[i] = cvt(p[e]);  // an odd k's last bf16 value
        };
        switch (type_) {
            case io::dtype::f32: return gather.template operator()<1>(f32_.data(), [](float x) { return x; });
            case io::dtype::f16: return gather.template operator()<1>(h16_.data(), io::f16_to_f32);
            case io::dtype::bf16: return gather.template operator()<2>(h16_.data(), io::bf16_to_f32);
        }
    }

    [[nodiscard]] index_t rows() const noexcept { return n_; }
    [[nodiscard]] index_t cols() const noexcept { return k_; }
    [[nodiscard]] io::dtype type() const noexcept { return type_; }
    [[nodiscard]] index_t panels() const noexcept { return (n_ + panel_width - 1) / panel_width; }
    /// Elements per k-group: 2 for bf16 (the pairs of vdpbf16ps), 1 otherwise.
    [[nodiscard]] index_t group() const noexcept { return type_ == io::dtype::bf16 ? 2 : 1; }
    /// k as the panels hold it: bf16 padded with zeros to a multiple of bf16_k_align (whole AMX
    /// tiles; no padding for k a multiple of 32, as every model's is), else k rounded to a group.
    [[nodiscard]] static std::int64_t padded_k(std::int64_t k, io::dtype type) noexcept {
        const std::int64_t align = type == io::dtype::bf16 ? bf16_k_align : 1;
        return (k + align - 1) / align * align;
    }
    /// Elements per panel.
    [[nodiscard]] std::ptrdiff_t panel_stride() const noexcept {
        return static_cast<std::ptrdiff_t>(padded_k(k_, type_)) * panel_width;
    }
    /// Bytes held.
    [[nodiscard]] std::size_t bytes() const noexcept {
        return f32_.size() * sizeof(float) + h16_.size() * sizeof(std::uint16_t) + quant_.bytes();
    }
    /// Bytes a matrix of this shape and type holds, before allocating it.
    [[nodiscard]] static std::size_t bytes_for(std::int64_t n, std::int64_t k, io::dtype type) noexcept {
        const auto panels = static_cast<std::uint64_t>((n + panel_width - 1) / panel_width);
        return detail::saturating_mul(detail::saturating_mul(panels, static_cast<std::uint64_t>(padded_k(k, type))),
                                      static_cast<std::uint64_t>(panel_width) * io::dtype_size(type));
    }
    [[nodiscard]] panel_view view() const noexcept { return {f32_.data(), panel_stride(), panel_width}; }
    [[nodiscard]] panel_view16 view16() const noexcept { return {h16_.data(), panel_stride(), panel_width * group()}; }

private:
    /// The little-endian T at `p` (any alignment).
    template <class T>
    [[nodiscard]] static T load_bits(const std::byte* p) noexcept {
        T v{};
        if constexpr (std::endian::native == std::endian::little) {
            std::memcpy(&v, p, sizeof v);
        } else {
            for (std::size_t b = 0; b < sizeof v; ++b) v = static_cast<T>(v | static_cast<T>(std::to_integer<unsigned>(p[b])) << (8 * b));
        }
        return v;
    }

    void check_rows(index_t row0, index_t rows) const {
        if (row0 < 0 || rows < 0 || row0 + rows > n_)
            throw contract_error("packed_matrix::set_rows: rows [" + std::to_string(row0) + ", " + std::to_string(row0 + rows) +
                                 ") outside [0, " + std::to_string(n_) + ")");
    }

    /// set_stored element by element, through each element's f32 value.
    void convert_stored(index_t row0, const std::byte* src, io::dtype stored, index_t rows) {
        const auto at = [src, k = std::size_t(k_)](index_t r, index_t j, std::size_t es) { return src + (std::size_t(r) * k + std::size_t(j)) * es; };
        switch (stored) {
            case io::dtype::f32:
                return pack_rows(row0, rows, [at](index_t r, index_t j) { return std::bit_cast<float>(load_bits<std::uint32_t>(at(r, j, 4))); });
            case io::dtype::f16: return pack_rows(row0, rows, [at](index_t r, index_t j) { return io::f16_to_f32(load_bits<std::uint16_t>(at(r, j, 2))); });
            case io::dtype::bf16:
                return pack_rows(row0, rows, [at](index_t r, index_t j) { return io::bf16_to_f32(load_bits<std::uint16_t>(at(r, j, 2))); });
        }
    }

    /// set_stored for rows in the matrix's own type, as they are: the panels the slice holds whole
    /// are transposed (detail::transpose_panel: bf16 pairs and f32 as words, f16 as halves), the
    /// rows of a panel it holds in part are converted one by one.
    void copy_stored(index_t row0, const std::byte* src, index_t rows) {
        const index_t p0 = (row0 + panel_width - 1) / panel_width, p1 = (row0 + rows) / panel_width;
        if (p0 >= p1) return convert_stored(row0, src, type_, rows);
        const std::size_t row_bytes = std::size_t(k_) * io::dtype_size(type_);
        const index_t head = p0 * panel_width - row0, tail_row = p1 * panel_width;
        convert_stored(row0, src, type_, head);
        convert_stored(tail_row, src + std::size_t(tail_row - row0) * row_bytes, type_, row0 + rows - tail_row);
        auto* base = type_ == io::dtype::f32 ? reinterpret_cast<std::byte*>(f32_.data()) : reinterpret_cast<std::byte*>(h16_.data());
        const std::size_t panel_bytes = std::size_t(panel_stride()) * io::dtype_size(type_);
        [[maybe_unused]] const bool parallel = static_cast<double>(rows) * k_ > 4e6;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (parallel)
#endif
        for (index_t p = p0; p < p1; ++p) {
            const std::byte* s = src + std::size_t(p * panel_width - row0) * row_bytes;
            std::byte* d = base + std::size_t(p) * panel_bytes;
            switch (type_) {
                case io::dtype::f32: detail::transpose_panel<std::uint32_t>(s, row_bytes / 4, d, [](detail::words4 w) { return w; }); break;
                case io::dtype::bf16: detail::transpose_panel<std::uint32_t>(s, row_bytes / 4, d, detail::bf16_as_packed); break;
                case io::dtype::f16: detail::transpose_panel<std::uint16_t>(s, row_bytes / 2, d, detail::f16_as_packed); break;
            }
        }
    }

    /// Stores rows [row0, row0 + rows) of W, element (r, j) of the slice given as f32 by
    /// `value(r, j)` and converted to the matrix's type; the threads split panels.
    template <class Value>
    void pack_rows(index_t row0, index_t rows, Value&& value) {
        check_rows(row0, rows);
        const index_t p_first = row0 / panel_width, p_last = (row0 + rows + panel_width - 1) / panel_width;
        [[maybe_unused]] const bool parallel = static_cast<double>(rows) * k_ > 4e6;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (parallel)
#endif
        for (index_t p = p_first; p < p_last; ++p) {  // one panel per iteration: threads never share a cache line
            const index_t r_begin = std::max(row0, p * panel_width), r_end = std::min(row0 + rows, (p + 1) * panel_width);
            switch (type_) {  // once per panel, not per element
                case io::dtype::f32: store_rows<1>(f32_.data(), row0, r_begin, r_end, value, [](float x) { return x; }); break;
                case io::dtype::f16: store_rows<1>(h16_.data(), row0, r_begin, r_end, value, [](float x) { return io::f32_to_f16(x); }); break;
                case io::dtype::bf16: store_rows<2>(h16_.data(), row0, r_begin, r_end, value, [](float x) { return to_bf16_daz(x); }); break;
            }
        }
    }

    /// Rows [r_begin, r_end) of one panel, element (row - row0, j) from `value`, each converted by
    /// `cvt`, at offset(row, col) for k-groups of G: a row's groups are panel_width · G elements
    /// apart, the G values of a group side by side.
    template <int G, class Out, class Value, class Convert>
    void store_rows(Out* dst, index_t row0, index_t r_begin, index_t r_end, const Value& value, Convert&& cvt) noexcept {
        constexpr std::ptrdiff_t step = std::ptrdiff_t{panel_width} * G;
        for (index_t row = r_begin; row < r_end; ++row) {
            const index_t r = row - row0;
            Out* o = dst + offset(row, 0);
            index_t j = 0;
            for (; j + G <= k_; j += G, o += step)
                for (int q = 0; q < G; ++q) o[q] = cvt(value(r, j + q));
            for (int q = 0; j < k_; ++j, ++q) o[q] = cvt(value(r, j));  // a last, partial group
        }
    }
    /// Where element (row, col) of W is stored (kernels/table.hpp's panel layout).
    [[nodiscard]] std::size_t offset(index_t row, index_t col) const noexcept {
        const auto g = static_cast<std::size_t>(group());
        return static_cast<std::size_t>(row / panel_width) * static_cast<std::size_t>(panel_stride()) +
               static_cast<std::size_t>(col) / g * static_cast<std::size_t>(panel_width) * g + static_cast<std::size_t>(row % panel_width) * g +
               static_cast<std::size_t>(col) % g;
    }

    index_t n_ = 0, k_ = 0;
    io::dtype type_ = io::dtype::f32;
    weight_storage<float> f32_;
    weight_storage<std::uint16_t> h16_;
    quant::matrix quant_;
};

/// The product form bf16 weights use on the active kernels (amx-bf16, vdpbf16ps or the FMA form).
[[nodiscard]] inline const product16& bf16_product() {
    const kernel_table& kt = kernels();
    return bf16_products().dot ? kt.bf16_alt : kt.bf16;
}

/// The 16-bit product for weights of `type` (f16 or bf16) on the active kernels.
[[nodiscard]] inline const product16& product_for(io::dtype type) { return type == io::dtype::bf16 ? bf16_product() : kernels().f16; }

namespace detail {
/// A[m × k] (rows `lda` apart) packed by `pack` into `af` with `values` (floats, or bf16 bits), in
/// this thread's buffer: valid until this thread packs again (linear packs before its parallel
/// loop, the attention's gemm inside its task).
inline const void* pack_for(pack_fn pack, a_format af, a_values values, index_t m, index_t k, const float* a, std::ptrdiff_t lda) {
    thread_local std::vector<float, aligned_allocator<float>> xf;
    thread_local std::vector<std::uint16_t, aligned_allocator<std::uint16_t>> xh;
    const std::size_t size = packed_a_size(m, k, af.mr, af.group);
    if (values == a_values::bf16_bits) {
        xh.resize(size);
        pack(m, k, a, lda, xh.data());
        return xh.data();
    }
    xf.resize(size);
    pack(m, k, a, lda, xf.data());
    return xf.data();
}
}  // namespace detail

/// A[m × k] (rows `lda` apart) rounded to bf16 as `values` say, into `out`, rows `ld` elements apart
/// (bf16 bits: 16-bit elements; bf16_f32: floats holding the bf16 values), each row padded with a
/// zero to a whole k-group of 2: what product16::run_rows reads in place. The values the packers of
/// the same form store (to_bf16_daz), so the products' bits are those of packed A.
inline void round_rows(a_values values, index_t m, index_t k, const float* a, std::ptrdiff_t lda, void* out, std::ptrdiff_t ld) noexcept {
    const kernel_table& kt = kernels();
    const bool bits = values == a_values::bf16_bits;
    for (index_t r = 0; r < m; ++r) {
        kt.round_bf16(a + r * lda, k, bits ? static_cast<void*>(static_cast<std::uint16_t*>(out) + r * ld) : static_cast<float*>(out) + r * ld,
                      values);
        if (k % 2 == 0) continue;
        if (bits) static_cast<std::uint16_t*>(out)[r * ld + k] = 0;
        else static_cast<float*>(out)[r * ld + k] = 0.0f;
    }
}

/// C[m × n] (=|+=) A[m × kdim] · B (bf16), serial: the attention's products on a bf16 K/V store
/// (kv_cache.hpp). A (f32, rows `lda` apart: the queries or the softmax's weights) is rounded to
/// bf16 and packed as the bf16 weights' product wants it, in this thread's buffer; the product is
/// that of bf16 weights, so its bits are too (docs/determinism.md).
inline void gemm(index_t m, index_t n, index_t kdim, const float* a, std::ptrdiff_t lda, const panel_view16& b, float* c,
                 std::ptrdiff_t ldc, bool accumulate = false) {
    if (m <= 0 || n <= 0) return;
    const product16& p = bf16_product();
    const void* at = detail::pack_for(p.pack, p.a, p.values, m, kdim, a, lda);
    p.run(m, n, kdim, at, b, 0, (n + panel_width - 1) / panel_width, c, ldc, accumulate);
}

/// Products deeper than `linear_chunked_depth` (DiffusionGemma self-conditioning's, k = the
/// vocabulary) run in k chunks of `linear_k_chunk`: unchunked, each row tile streamed a whole 16 MB
/// panel (and its 8 MB of A) from memory. In chunks, a panel's chunk (256 KB in bf16) stays in L2
/// across a task's row tiles. Each element still sums k in order in one accumulator (a chunk
/// continues the sum exactly: `accumulate`), so the bits are those of one call over all of k.
/// Shallower products stay whole: at LLaDA-8B's k = 12288 (the down projection), 32 and 256 rows,
/// chunks measured no faster on a Zen 3 host.
inline constexpr index_t linear_k_chunk = 4096, linear_chunked_depth = 32768;
static_assert(linear_k_chunk % bf16_k_align == 0, "a k chunk must start on a k-group of every A layout and B panel (32: an AMX tile's depth)");

namespace detail {
/// One task of a chunked linear: rows [r0, r0 + rows) of Y over panels [p0, p1), k chunk by chunk;
/// in a chunk, panel by panel, the row tiles in turn. `a` is the task's first packed row tile of
/// `tile_bytes`, `run(tile_rows, kc, a, k0, p, y)` one kernel call.
template <class Call>
void linear_chunked_task(index_t rows, index_t k, int mr, std::size_t tile_bytes, std::size_t a_bytes, const char* a, index_t p0, index_t p1,
                         float* y, std::ptrdiff_t ldy, Call&& run) {
    for (index_t k0 = 0; k0 < k; k0 += linear_k_chunk) {
        const index_t kc = std::min(linear_k_chunk, k - k0);
        for (index_t p = p0; p < p1; ++p)
            for (index_t t = 0; t * mr < rows; ++t)
                run(std::min<index_t>(mr, rows - t * mr), kc, a + static_cast<std::size_t>(t) * tile_bytes + static_cast<std::size_t>(k0) * mr * a_bytes,
                    k0, p, y + t * mr * ldy);
    }
}
}  // namespace detail

/// Y[m × n] = X[m × k] · Wᵀ, split over threads by (group of column panels, block of rows)
/// (tasks.hpp). X is packed once into the layout the chosen kernel wants (bf16 weights: rounded
/// to bf16 first, row by row). Each element is computed by one thread with the same instruction
/// sequence, so results do not depend on the thread count, and the kernel never depends on m.
inline void linear(index_t m, const float* x, std::ptrdiff_t ldx, const packed_matrix& w, float* y, std::ptrdiff_t ldy) {
    if (m <= 0) return;
    if (w.quantized()) return quant::linear(m, x, ldx, w.quantized_matrix(), y, ldy);
    const index_t n = w.rows(), k = w.cols(), panels = w.panels();
    const bool f32 = w.type() == io::dtype::f32;
    const f32_product* pf = f32 ? &kernels().f32 : nullptr;
    const product16* p16 = f32 ? nullptr : &product_for(w.type());
    const a_format af = f32 ? pf->a : p16->a;
    const a_values values = f32 ? a_values::f32 : p16->values;
    const void* a = detail::pack_for(f32 ? pf->pack : p16->pack, af, values, m, k, x, ldx);  // the caller's buffer, read by every thread
    const std::size_t a_bytes = values == a_values::bf16_bits ? sizeof(std::uint16_t) : sizeof(float);
    const std::size_t tile_bytes = packed_a_size(af.mr, k, af.mr, af.group) * a_bytes;
    const bool chunked = k > linear_chunked_depth;
    // amx-bf16's tile product passes over k (1024 at a time) across a call's panels, so with 8 of
    // them a full row block's packed A is read from L2, not L3, 8 times as seldom: LLaDA-8B's
    // 256-row products 18-25 % faster. Fewer rows stream B from memory, faster one panel a call.
    // Its row blocks are of up to 16 row tiles (256 rows), whose pass of A (512 KB) still stays in
    // L2: each panel then comes from memory once for 256 rows, not twice (256 × 4096 × 12288, 1
    // thread: 34.7 → 29.0 ms), and as even as whole tiles allow (544 rows: 1-5 % less time on 2
    // threads than 256 + 256 + 32; docs/benchmarks.md, "256-row tasks").
    // (Only the split changes: each element's sum is the same, docs/determinism.md.)
    const bool tile_groups = p16 == &kernels().bf16 && kernels().id == isa::amx && m >= task_rows(af.mr);
    const index_t row_block = tile_groups ? even_row_block(m, 2 * task_rows(af.mr), af.mr) : task_rows(af.mr);
    const index_t group_panels = chunked || tile_groups ? 8 : task_columns(k, std::min(m, row_block));
    const long groups = (panels + group_panels - 1) / group_panels;
    // One kernel call over k [k0, k0 + kc) (B's panels from k0 on: k0 · panel_width elements in, whatever the k-grouping).
    const auto call = [&](index_t rows, index_t kc, const void* at, index_t k0, index_t p0, index_t p1, float* yr) {
        const std::ptrdiff_t b_at = static_cast<std::ptrdiff_t>(k0) * panel_width;
        if (f32) {
            panel_view b = w.view();
            b.data += b_at;
            pf->run(rows, n, kc, static_cast<const float*>(at), b, p0, p1, yr, ldy, k0 > 0);
        } else {
            panel_view16 b = w.view16();
            b.data += b_at;
            p16->run(rows, n, kc, at, b, p0, p1, yr, ldy, k0 > 0);
        }
    };
    for_each_task(m, row_block, groups, static_cast<double>(m) * n * k, [&](long gi, index_t r0, index_t rows) {
        const index_t p0 = static_cast<index_t>(gi) * group_panels, p1 = std::min(panels, p0 + group_panels);
        const char* at = static_cast<const char*>(a) + static_cast<std::size_t>(r0 / af.mr) * tile_bytes;
        if (!chunked) return call(rows, k, at, 0, p0, p1, y + r0 * ldy);
        detail::linear_chunked_task(rows, k, af.mr, tile_bytes, a_bytes, at, p0, p1, y + r0 * ldy, ldy,
                                    [&](index_t tr, index_t kc, const char* ta, index_t k0, index_t p, float* yt) { call(tr, kc, ta, k0, p, p + 1, yt); });
    });
}

}  // namespace dlm::cpu
