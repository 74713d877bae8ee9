// dlm/cpu/kernels/table.hpp — what every instruction-set kernel file provides: one table of
// function pointers, filled once per instruction set and picked at run time (dispatch.hpp).
//
// Matrix products read their B operand (weights, keys, values) in *panels* of `panel_width` columns.
// The panel width is the same for every instruction set, so one packed copy of the weights serves
// every kernel: a process can switch kernels (DLM_ISA, cpu::set_isa) without repacking, and the
// tests run every path on the same model object.
//
// Element (k, j) of panel p (columns [p·32, p·32 + 32)) sits in k-groups of `g` consecutive k
// (g = 1 for f32 and f16, g = 2 for bf16, whose dot-product instruction consumes pairs):
//     data[p * panel_stride + (k / g) * ldb + (j - p·32) * g + k % g]
// so for weights ldb = 32·g elements. Whole panels are read, so the storage holds the columns of
// the last, partial panel and the k padding (their values are never stored in C).
#pragma once

#include <cstddef>
#include <cstdint>

#include "../../core/config.hpp"
#include "../quant/layout.hpp"

namespace dlm::cpu {

/// Columns per panel, for every instruction set and element type.
inline constexpr index_t panel_width = 32;

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
enum class isa { baseline, avx2, avx512, avx512_bf16 };

/// The kernels of one instruction set. Every product computes each element of C as one
/// accumulator summing over k = 0, 1, 2, ... in order (in pairs for bf16), whatever m, n, the
/// element's position in a register tile, the panel range or the caller's threads: that is what
/// makes the transformer's results batch- and thread-invariant. Products over [k0, k1) continue an
/// earlier sum exactly when `accumulate` is set (the accumulator passes through memory as an f32).
struct kernel_table {
    isa id;
    const char* name;   ///< "avx512-bf16", "avx512", "avx2", "baseline"
    int lanes;          ///< f32 lanes per vector
    /// Rows per tile of packed A (gemm.hpp, pack_a): for gemm_f32, gemm_f16 and gemm_bf16_dot, and
    /// for gemm_bf16.
    int mr, mr_bf16;
    /// C[m × n] (=|+=) A[m × k] · B over panels [p0, p1): A f32 packed in tiles of `mr` rows, B f32.
    void (*gemm_f32)(index_t m, index_t n, index_t k, const float* a, const panel_view& b, index_t p0, index_t p1, float* c,
                     std::ptrdiff_t ldc, bool accumulate) noexcept;
    /// As gemm_f32 with B in IEEE f16, widened to f32 in registers.
    void (*gemm_f16)(index_t m, index_t n, index_t k, const float* a, const panel_view16& b, index_t p0, index_t p1, float* c,
                     std::ptrdiff_t ldc, bool accumulate) noexcept;
    /// B in bfloat16, A f32 holding bf16 values, packed in pairs in tiles of `mr_bf16` rows:
    /// products in pairs exactly as vdpbf16ps forms them, acc += a[2i+1]·b[2i+1], then
    /// acc += a[2i]·b[2i], each by an FMA (exact products, one rounding per step).
    void (*gemm_bf16)(index_t m, index_t n, index_t k, const float* a, const panel_view16& b, index_t p0, index_t p1, float* c,
                      std::ptrdiff_t ldc, bool accumulate) noexcept;
    /// The same product with A as bfloat16 bits (pairs, tiles of `mr` rows), by vdpbf16ps: the same
    /// bits as gemm_bf16 but for the instruction's flushing of subnormal results. nullptr where the
    /// instruction set lacks it.
    void (*gemm_bf16_dot)(index_t m, index_t n, index_t k, const std::uint16_t* a, const panel_view16& b, index_t p0, index_t p1,
                          float* c, std::ptrdiff_t ldc, bool accumulate) noexcept;
    /// x[i] = exp(x[i] - shift) for i in [0, n).
    void (*exp_shifted)(float* x, index_t n, float shift) noexcept;
    /// out[i] = silu(gate[i]) · up[i] for i in [0, n).
    void (*silu_gate)(const float* gate, const float* up, float* out, index_t n) noexcept;
    /// Rows per tile of quantized activations (quant::activation_view::mr).
    int mr_q;
    /// C[m × n] = A · Wᵀ for tile columns [g0, g1) of block-quantized W (n rows), A quantized per
    /// row and block (quant/layout.hpp): integer sums, then a fixed f32 step per block, so every
    /// instruction set computes the same bits.
    void (*gemm_quant)(index_t m, index_t n, const quant::activation_view& a, const quant::tile_view& b, index_t g0, index_t g1,
                       float* c, std::ptrdiff_t ldc) noexcept;
};

}  // namespace dlm::cpu
