// dlm/cpu/kernels/table.hpp — what every instruction-set kernel file provides: one table of
// products, one entry per operation and weight format, each entry with the layout it wants its A
// operand (the activations) in. dispatch.hpp picks the table at run time.
//
// Matrix products read their B operand (weights, keys, values) in *panels* of `panel_width` columns.
// The panel width is the same for every instruction set, so one packed copy of the weights serves
// every kernel: a process can switch kernels (DLM_ISA, cpu::set_isa) without repacking, and the
// tests run every path on the same model object.
//
// Element (k, j) of panel p (columns [p·32, p·32 + 32)) sits in k-groups of `g` consecutive k
// (g = 1 for f32 and f16, g = 2 for bf16, whose dot-product instructions consume pairs):
//     data[p * panel_stride + (k / g) * ldb + (j - p·32) * g + k % g]
// so for weights ldb = 32·g elements. Whole panels are read, so the storage holds the columns of
// the last, partial panel and the k padding (their values are never stored in C); bf16 panels are
// padded with zeros to a multiple of `bf16_k_align` in k, the depth of one AMX tile.
//
// A, by contrast, belongs to the kernel: each entry names its `a_format`, and the callers
// (gemm.hpp, quant/matrix.hpp) pack or quantize the activations into it once per product.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "../../core/config.hpp"
#include "../quant/layout.hpp"
#include "pack.hpp"

namespace dlm::cpu {

/// Columns per panel, for every instruction set and element type.
inline constexpr index_t panel_width = 32;
/// bf16 weights are padded in k to a multiple of this (an AMX tile's 32 elements of k).
inline constexpr index_t bf16_k_align = 32;
/// Partial sums of a softmax row (`kernel_table::exp_shifted_sum`): element i joins partial i mod 16
/// on every instruction set (one 16-lane vector, two of 8 or four of 4), so every path sums alike.
inline constexpr index_t softmax_sum_parts = 16;
/// Partial sums of an RMSNorm's squares (`kernel_table::rms_norm`): x[i]² joins partial i mod 16,
/// in double, on every instruction set (two vectors of 8 doubles, four of 4 or eight of 2).
inline constexpr index_t rms_norm_sum_parts = 16;

/// An f32 B operand.
struct panel_view {
    const float* data = nullptr;
    std::ptrdiff_t panel_stride = 0;
    std::ptrdiff_t ldb = 0;
};

/// A 16-bit B operand (IEEE f16 or bfloat16 bits).
struct panel_view16 {
    const std::uint16_t* data = nullptr;
    std::ptrdiff_t panel_stride = 0;
    std::ptrdiff_t ldb = 0;
};

/// The instruction sets dlm has kernels for, lowest first.
enum class isa { baseline, avx2, avx512, avx512_vnni, avx512_bf16, amx };

/// Every instruction set and the name DLM_ISA takes for it: the one list the dispatcher, the
/// parser and the tests read.
struct isa_info {
    isa id;
    std::string_view name;
};
inline constexpr std::array<isa_info, 6> isa_list{{{isa::baseline, "baseline"},
                                                   {isa::avx2, "avx2"},
                                                   {isa::avx512, "avx512"},
                                                   {isa::avx512_vnni, "avx512-vnni"},
                                                   {isa::avx512_bf16, "avx512-bf16"},
                                                   {isa::amx, "amx"}}};

/// How a kernel wants its A operand packed: tiles of `mr` rows; within a tile, k in groups of
/// `group` consecutive elements, group t of row r at (t · mr + r) · group; rows past m and k past
/// its end are zero. group 1 or 2 suits a kernel that broadcasts one value (or pair) of a row per
/// step, group 32 one that loads a row's 32 values at once (an AMX tile row).
struct a_format {
    int mr = 1;
    int group = 1;
};

/// How the values of A are held for a 16-bit product.
enum class a_values {
    f32,        ///< as they are (f16 weights)
    bf16_f32,   ///< rounded to bf16 (nearest even, subnormals to zero), held as floats
    bf16_bits,  ///< rounded so, held as bf16 bits
};

/// C[m × n] (=|+=) A[m × k] · B over panels [p0, p1), B f32, A f32 in `a_format`.
using gemm_f32_fn = void (*)(index_t m, index_t n, index_t k, const float* a, const panel_view& b, index_t p0, index_t p1, float* c,
                             std::ptrdiff_t ldc, bool accumulate) noexcept;
/// The same with A f32 in place, rows `lda` apart (no packing).
using gemm_f32_rows_fn = void (*)(index_t m, index_t n, index_t k, const float* a, std::ptrdiff_t lda, const panel_view& b, index_t p0,
                                  index_t p1, float* c, std::ptrdiff_t ldc, bool accumulate) noexcept;
/// The same with B 16-bit; A as the entry's a_values say (floats or bf16 bits).
using gemm16_fn = void (*)(index_t m, index_t n, index_t k, const void* a, const panel_view16& b, index_t p0, index_t p1, float* c,
                           std::ptrdiff_t ldc, bool accumulate) noexcept;
/// The same with A in place, rows `lda` elements apart, its values already as the entry's a_values
/// say (bf16 bits, or floats holding bf16 values) and k padded with zeros to a whole k-group.
using gemm16_rows_fn = void (*)(index_t m, index_t n, index_t k, const void* a, std::ptrdiff_t lda, const panel_view16& b, index_t p0,
                                index_t p1, float* c, std::ptrdiff_t ldc, bool accumulate) noexcept;
/// C[m × n] = A · Wᵀ for tile columns [g0, g1) of block-quantized W (n rows), A quantized per row
/// and block (quant/layout.hpp) in the entry's a_format (group in bytes).
using gemm_quant_fn = void (*)(index_t m, index_t n, const quant::activation_view& a, const quant::tile_view& b, index_t g0, index_t g1,
                               float* c, std::ptrdiff_t ldc) noexcept;

/// Packs A[m × k] (rows `lda` apart, f32) into the entry's a_format and values at `out`
/// (packed_a_size(m, k, mr, group) elements: floats, or bf16 bits for a_values::bf16_bits).
using pack_fn = void (*)(index_t m, index_t k, const float* a, std::ptrdiff_t lda, void* out) noexcept;
/// Quantizes X[m × k] per row and block of `block` into quant::activation_view's layout for the
/// entry's a_format, with `group` = min(its group, block): quants at q, scales at scale, sums of
/// each 16 quants at sums, their 16-bit pairs at pairs (quant/layout.hpp).
using quantize_fn = void (*)(index_t m, index_t k, const float* x, std::ptrdiff_t ldx, int block, int group, std::int8_t* q, float* scale,
                             std::int32_t* sums, std::int32_t* pairs) noexcept;

/// One way to compute a product: its name (for --stats), the A layout it wants, the packer that
/// writes it, the kernel.
struct f32_product {
    const char* name;
    a_format a;
    pack_fn pack;
    gemm_f32_fn run;
    /// `run` reading A in place: the same bits, without the packing (the attention's products,
    /// whose A, the queries or the softmax's weights, is read once per panel of B).
    gemm_f32_rows_fn run_rows;
};
struct product16 {
    const char* name;  ///< "fma", "vdpbf16ps", "amx-bf16"
    a_format a;
    a_values values;
    pack_fn pack;
    gemm16_fn run;  ///< nullptr where the instruction set lacks this form
    /// `run` reading A in place (the attention's products on a bf16 K/V store, whose A is rounded
    /// once per task: gemm.hpp, round_rows), the bits of `run`; nullptr where the form packs A
    /// regardless (f16 weights). amx-bf16 loads whole tiles from the rows and packs only the edges a
    /// tile would read past (amx_body.inl, gemm_bf16_rows).
    gemm16_rows_fn run_rows = nullptr;
};
struct quant_product {
    const char* name;  ///< "vpdpbusd", "vpmaddubsw", "amx-int8", ...
    a_format a;        ///< group: bytes of a row's quants side by side (4, or 64 capped at the block: AMX)
    quantize_fn quantize;
    gemm_quant_fn run;
};

/// The kernels of one instruction set. Every product computes each element of C as one
/// accumulator summing over k in order (in pairs for bf16; in the tile unit's own order within
/// each 32 of k for amx-bf16, docs/determinism.md), whatever m, n, the element's position in a
/// register tile, the panel range or the caller's threads: that is what makes the transformer's
/// results batch- and thread-invariant. Products over [k0, k1) continue an earlier sum exactly
/// when `accumulate` is set (the accumulator passes through memory as an f32).
struct kernel_table {
    isa id;
    const char* name;  ///< as isa_list names it
    int lanes;         ///< f32 lanes per vector
    f32_product f32;
    product16 f16;
    /// bf16 weights: `bf16` the instruction set's first form, `bf16_alt` a second one or none
    /// (avx512-bf16: the FMA form and vdpbf16ps, the same bits; dispatch.hpp times which is faster).
    product16 bf16, bf16_alt;
    quant_product quant;
    /// x[i] = exp(x[i] - shift) for i in [0, n).
    void (*exp_shifted)(float* x, index_t n, float shift) noexcept;
    /// exp_shifted, returning the sum of the new x[i] in the order every path shares
    /// (`softmax_sum_parts`): x[i] joins partial sum i mod 16, each partial in order of i, and the
    /// partials fold in halves (p[j] += p[j + 8], then + 4, + 2, + 1). Sums of exps are never -0,
    /// so zeros anywhere (masked keys) leave the sum's bits as they are; and the sum is the same
    /// wherever the values start: shifting them by s moves partial j to j + s mod 16, and the fold,
    /// which adds partials whose indices differ by 8, then 4, 2, 1 (a commutative addition each),
    /// pairs the same values at every level.
    float (*exp_shifted_sum)(float* x, index_t n, float shift) noexcept;
    /// x[i] *= scale for i in [0, n); returns the largest x[i] after it (-inf for n = 0; a NaN is
    /// never the largest). Products and comparisons are exact, so the same bits on every path.
    float (*scale_max)(float* x, index_t n, float scale) noexcept;
    /// out[i] = silu(gate[i]) · up[i] for i in [0, n).
    void (*silu_gate)(const float* gate, const float* up, float* out, index_t n) noexcept;
    /// out[i] = to_bf16_daz(x[i]) for i in [0, n): bf16 bits (a_values::bf16_bits) or the floats they
    /// hold (bf16_f32): a product16::run_rows operand (gemm.hpp, round_rows), a bf16 cache's keys and values (kv_cache.hpp).
    void (*round_bf16)(const float* x, index_t n, void* out, a_values values) noexcept;
    /// One row of RMSNorm as HF computes it: out[i] = weight[i] · (x[i] · inv), inv = 1 / sqrt(mean
    /// of x² + eps), the mean of squares summed in double in the order every path shares
    /// (`rms_norm_sum_parts`: x[i]² joins partial i mod 16, each partial in order of i, folded in
    /// halves). Squares of floats are exact in double, so fused or not, every path gives the same
    /// bits. out may be x.
    void (*rms_norm)(const float* x, index_t n, const float* weight, float eps, float* out) noexcept;
    /// A rotary embedding's rotate-half step on one head: v[i], v[i + h] = v[i]·c[i] − v[i + h]·s[i],
    /// v[i + h]·c[i] + v[i]·s[i] for i in [0, h), every product rounded before its addition (the same
    /// bits on every path).
    void (*rotate_half)(float* v, const float* c, const float* s, index_t h) noexcept;
};

}  // namespace dlm::cpu
