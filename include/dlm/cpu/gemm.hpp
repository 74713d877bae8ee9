// dlm/cpu/gemm.hpp — a small f32 matrix product with fixed blocking, for the CPU transformer.
//
//   C[m × n] (= or +=) A[m × k] · B[k × n]
//
// B is read in panels of `gemm_nr` columns; weights are packed once at load into exactly that form
// (`packed_matrix`), and the attention reads its keys and values through the same panel view.
//
// Why not Eigen's GEMM: its blocking sizes and kernel paths depend on the matrix shapes and on where
// a row falls in a register panel (some paths split the k-sum over two accumulators), so a row's
// result changes with the number of rows stacked around it. Here every output element is one lane
// of one accumulator that sums A(i, k) · B(k, j) for k = 0, 1, 2, ... in order, whatever m, n, the
// row's position, the k-blocking or the thread count: a row of C depends on its row of A and on B
// only. Splitting k into several calls with `accumulate` continues the same sum exactly (the
// accumulator goes through memory as an f32 and comes back unchanged).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "simd.hpp"

namespace dlm::cpu {

/// Columns of B per panel: two vectors.
inline constexpr int gemm_nr = 2 * simd_width;
/// Rows of A per register tile: the accumulators (2 × gemm_mr vectors) fill most of the registers.
inline constexpr int gemm_mr = simd_width == 16 ? 8 : 6;
/// k-block: a B panel block of gemm_kc × gemm_nr floats stays in L1/L2 while the row tiles pass.
inline constexpr index_t gemm_kc = 256;

/// The B operand: element (k, j) of panel p (columns [p·nr, p·nr + nr)) is at
/// `data[p * panel_stride + k * ldb + (j - p·nr)]`. Whole panels are read, so the storage must hold
/// the columns of the last, partial panel too (their values do not matter: they are never stored).
struct panel_view {
    const float* data = nullptr;
    std::ptrdiff_t panel_stride = 0;
    std::ptrdiff_t ldb = 0;
};

namespace detail {

/// One register tile: C[MR × n_valid] (=|+=) A[MR × kc] · panel[kc × nr].
template <int MR>
inline void micro_kernel(index_t kc, const float* a, std::ptrdiff_t lda, const float* b, std::ptrdiff_t ldb, float* c,
                         std::ptrdiff_t ldc, int n_valid, bool accumulate) noexcept {
    vfloat acc0[MR], acc1[MR];
    const bool full = n_valid == gemm_nr;
    for (int r = 0; r < MR; ++r) {
        if (!accumulate) {
            acc0[r] = vfloat{};
            acc1[r] = vfloat{};
        } else if (full) {
            acc0[r] = vload(c + r * ldc);
            acc1[r] = vload(c + r * ldc + simd_width);
        } else {
            acc0[r] = vload_partial(c + r * ldc, std::min(n_valid, simd_width));
            acc1[r] = vload_partial(c + r * ldc + simd_width, std::max(n_valid - simd_width, 0));
        }
    }
    for (index_t k = 0; k < kc; ++k) {
        const vfloat b0 = vload(b + k * ldb), b1 = vload(b + k * ldb + simd_width);
#pragma GCC unroll 16
        for (int r = 0; r < MR; ++r) {
            const vfloat ar = vbroadcast(a[r * lda + k]);
            acc0[r] = vfma(ar, b0, acc0[r]);
            acc1[r] = vfma(ar, b1, acc1[r]);
        }
    }
    for (int r = 0; r < MR; ++r) {
        if (full) {
            vstore(c + r * ldc, acc0[r]);
            vstore(c + r * ldc + simd_width, acc1[r]);
        } else {
            vstore_partial(c + r * ldc, acc0[r], std::min(n_valid, simd_width));
            vstore_partial(c + r * ldc + simd_width, acc1[r], std::max(n_valid - simd_width, 0));
        }
    }
}

using micro_kernel_fn = void (*)(index_t, const float*, std::ptrdiff_t, const float*, std::ptrdiff_t, float*, std::ptrdiff_t,
                                 int, bool) noexcept;

template <std::size_t... I>
constexpr std::array<micro_kernel_fn, sizeof...(I)> make_kernels(std::index_sequence<I...>) {
    return {&micro_kernel<static_cast<int>(I) + 1>...};
}
/// kernels[r - 1] handles a tile of r rows.
inline constexpr auto kernels = make_kernels(std::make_index_sequence<gemm_mr>{});

}  // namespace detail

/// C rows [0, m), columns [p0·nr, p1·nr) ∩ [0, n): serial.
inline void gemm_panels(index_t m, index_t n, index_t kdim, const float* a, std::ptrdiff_t lda, const panel_view& b, index_t p0,
                        index_t p1, float* c, std::ptrdiff_t ldc, bool accumulate) noexcept {
    for (index_t p = p0; p < p1; ++p) {
        const index_t col = p * gemm_nr;
        const int n_valid = static_cast<int>(std::min<index_t>(gemm_nr, n - col));
        const float* panel = b.data + p * b.panel_stride;
        index_t k0 = 0;
        do {  // runs once for kdim == 0, so C is still zeroed
            const index_t kc = std::min(gemm_kc, kdim - k0);
            const bool acc = accumulate || k0 > 0;
            for (index_t i = 0; i < m; i += gemm_mr) {
                const index_t rows = std::min<index_t>(gemm_mr, m - i);
                detail::kernels[static_cast<std::size_t>(rows - 1)](kc, a + i * lda + k0, lda, panel + k0 * b.ldb, b.ldb,
                                                                    c + i * ldc + col, ldc, n_valid, acc);
            }
            k0 += kc;
        } while (k0 < kdim);
    }
}

/// C[m × n] (=|+=) A[m × kdim] · B, serial (callers parallelize around it).
inline void gemm(index_t m, index_t n, index_t kdim, const float* a, std::ptrdiff_t lda, const panel_view& b, float* c,
                 std::ptrdiff_t ldc, bool accumulate = false) noexcept {
    if (m <= 0 || n <= 0) return;
    gemm_panels(m, n, kdim, a, lda, b, 0, (n + gemm_nr - 1) / gemm_nr, c, ldc, accumulate);
}

/// A weight matrix W[n × k] (n outputs, k inputs, row-major as stored in checkpoints), packed for
/// y = W x: panel p holds rows [p·nr, p·nr + nr) of W transposed, k × nr floats, zero-padded.
class packed_matrix {
public:
    packed_matrix() = default;
    packed_matrix(index_t n, index_t k)
        : n_(n), k_(k), data_(static_cast<std::size_t>((n + gemm_nr - 1) / gemm_nr) * static_cast<std::size_t>(k) * gemm_nr, 0.f) {}

    /// Copies rows [row0, row0 + rows) of W from row-major `src` (rows × k floats).
    void set_rows(index_t row0, const float* src, index_t rows) {
        if (row0 < 0 || rows < 0 || row0 + rows > n_)
            throw contract_error("packed_matrix::set_rows: rows [" + std::to_string(row0) + ", " + std::to_string(row0 + rows) +
                                 ") outside [0, " + std::to_string(n_) + ")");
        for (index_t r = 0; r < rows; ++r) {
            const index_t row = row0 + r;
            float* dst = data_.data() + static_cast<std::size_t>(row / gemm_nr) * static_cast<std::size_t>(k_) * gemm_nr + row % gemm_nr;
            const float* s = src + static_cast<std::size_t>(r) * static_cast<std::size_t>(k_);
            for (index_t j = 0; j < k_; ++j) dst[static_cast<std::size_t>(j) * gemm_nr] = s[j];
        }
    }

    [[nodiscard]] index_t rows() const noexcept { return n_; }
    [[nodiscard]] index_t cols() const noexcept { return k_; }
    [[nodiscard]] index_t panels() const noexcept { return (n_ + gemm_nr - 1) / gemm_nr; }
    [[nodiscard]] std::size_t bytes() const noexcept { return data_.size() * sizeof(float); }
    [[nodiscard]] panel_view view() const noexcept {
        return {data_.data(), static_cast<std::ptrdiff_t>(k_) * gemm_nr, gemm_nr};
    }

private:
    index_t n_ = 0, k_ = 0;
    std::vector<float, aligned_allocator<float>> data_;
};

/// Y[m × n] = X[m × k] · Wᵀ, split over threads by (column panel, block of rows). Each element is
/// computed by one thread with the same instruction sequence, so results do not depend on the
/// thread count.
inline void linear(index_t m, const float* x, std::ptrdiff_t ldx, const packed_matrix& w, float* y, std::ptrdiff_t ldy) {
    if (m <= 0) return;
    const index_t n = w.rows(), panels = w.panels();
    constexpr index_t row_block = 8 * gemm_mr;
    const index_t row_blocks = (m + row_block - 1) / row_block;
    // Panels per task: enough work per task to amortize scheduling on small matrices.
    const index_t group = std::max<index_t>(1, std::min<index_t>(8, (1 << 16) / std::max<index_t>(1, w.cols() * std::min(m, row_block))));
    const index_t groups = (panels + group - 1) / group;
    const long tasks = static_cast<long>(groups) * row_blocks;
    const panel_view b = w.view();
    // Threads only for products of more than ~1M multiply-adds (tens of microseconds of work).
    [[maybe_unused]] const bool parallel = static_cast<double>(m) * n * w.cols() > 1e6 && tasks > 1;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (parallel)
#endif
    for (long t = 0; t < tasks; ++t) {
        const index_t g = static_cast<index_t>(t / row_blocks), rb = static_cast<index_t>(t % row_blocks);
        const index_t r0 = rb * row_block, rows = std::min(row_block, m - r0);
        gemm_panels(rows, n, w.cols(), x + r0 * ldx, ldx, b, g * group, std::min(panels, (g + 1) * group), y + r0 * ldy, ldy, false);
    }
}

}  // namespace dlm::cpu
