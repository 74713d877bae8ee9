// dlm/engine/parallel.hpp — a step's per-slot work on the host's threads: each slot's draw is its
// own (its row, its random key), so running them side by side gives the same tokens as in order.
#pragma once

#include <cstddef>
#include <exception>
#include <vector>

namespace dlm::detail {

/// Logits a fork must have to share, at least: below it the threads' start costs more than they save.
inline constexpr std::size_t parallel_slot_logits = std::size_t{1} << 16;

/// Calls f(i) for every i in [0, n). On OpenMP's threads when `concurrent` (f may run on several at
/// once), the program is built with OpenMP, and the n rows of `row_length` logits are worth it;
/// otherwise in order on this thread. f(i) writes only its own i-th results. An exception thrown by
/// some f(i) is rethrown once every call has ended: the one of the smallest i, which is the first
/// one running in order would have thrown (f has no other effect, so the rest do not matter).
template <class F>
void for_each_slot(std::size_t n, std::size_t row_length, bool concurrent, F&& f) {
    [[maybe_unused]] const bool parallel = concurrent && n > 1 && n * row_length >= parallel_slot_logits;
#if defined(_OPENMP)
    if (parallel) {
        std::vector<std::exception_ptr> failed(n);
#pragma omp parallel for schedule(dynamic, 1)
        for (std::ptrdiff_t i = 0; i < static_cast<std::ptrdiff_t>(n); ++i) {
            try {
                f(static_cast<std::size_t>(i));
            } catch (...) {
                failed[static_cast<std::size_t>(i)] = std::current_exception();
            }
        }
        for (const std::exception_ptr& e : failed)
            if (e) std::rethrow_exception(e);
        return;
    }
#endif
    for (std::size_t i = 0; i < n; ++i) f(i);
}

}  // namespace dlm::detail
