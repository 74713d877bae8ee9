// dlm/cpu/tasks.hpp — how the CPU products split their work over threads: one helper for the
// float (gemm.hpp) and the quantized (quant/matrix.hpp) products.
//
// A product's output is cut into tasks of (a group of columns, a block of rows); each task is
// computed whole by one thread, with every k of its elements, so a result never depends on how
// many threads there are or which one ran it (no reduction is ever split over threads).
#pragma once

#include <algorithm>

#include "../core/config.hpp"

namespace dlm::cpu {

/// Rows per task: eight of a kernel's row tiles.
[[nodiscard]] constexpr index_t task_rows(int mr) noexcept { return 8 * static_cast<index_t>(mr); }

/// Rows per task for m rows cut into blocks of at most `most` rows, as even as whole row tiles of
/// `mr` allow: 544 rows in blocks of at most 256 are 192, 192 and 160, not 256, 256 and 32 (a last
/// task that streams every panel of the weights for 32 rows).
[[nodiscard]] constexpr index_t even_row_block(index_t m, index_t most, int mr) noexcept {
    const index_t blocks = std::max<index_t>(1, (m + most - 1) / most), per = (m + blocks - 1) / blocks;
    return (per + mr - 1) / mr * mr;
}

/// Column units (panels, tile columns) per task: enough multiply-adds per task (~64 Ki per unit of
/// `unit_depth`) to amortize scheduling on small matrices, at most 8.
[[nodiscard]] constexpr index_t task_columns(index_t unit_depth, index_t rows) noexcept {
    return std::max<index_t>(1, std::min<index_t>(8, (1 << 16) / std::max<index_t>(1, unit_depth * rows)));
}

/// Calls run(column_group, row0, rows) for every column group in [0, groups) and block of
/// `row_block` rows of [0, m), in parallel (OpenMP, static schedule) when the product has more
/// than ~1M multiply-adds (`work`) and more than one task.
template <class Run>
void for_each_task(index_t m, index_t row_block, long groups, double work, Run&& run) {
    const index_t row_blocks = (m + row_block - 1) / row_block;
    const long tasks = groups * static_cast<long>(row_blocks);
    [[maybe_unused]] const bool parallel = work > 1e6 && tasks > 1;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (parallel)
#endif
    for (long t = 0; t < tasks; ++t) {
        const index_t r0 = static_cast<index_t>(t % row_blocks) * row_block;
        run(t / row_blocks, r0, std::min(row_block, m - r0));
    }
}

}  // namespace dlm::cpu
