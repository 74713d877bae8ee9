// bench/bandwidth.hpp — the machine's read bandwidth from memory: a buffer (1 GiB by default, far
// past any cache) summed with 512-bit loads (256-bit where the CPU lacks AVX-512, 64-bit words on
// the baseline), on `threads` OpenMP threads, each summing its own contiguous slice; the best of
// three passes, in bytes per second (bytes read / wall time of the pass).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>

#include <dlm/cpu/dispatch.hpp>

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(_OPENMP)
#include <omp.h>
#endif

namespace dlm::bench {

namespace detail {
#if defined(__x86_64__)
__attribute__((target("avx512f"))) inline std::uint64_t sum512(const std::uint64_t* p, std::size_t words) {
    __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
    for (std::size_t i = 0; i + 32 <= words; i += 32) {
        s0 = _mm512_add_epi64(s0, _mm512_load_si512(p + i));
        s1 = _mm512_add_epi64(s1, _mm512_load_si512(p + i + 8));
        s2 = _mm512_add_epi64(s2, _mm512_load_si512(p + i + 16));
        s3 = _mm512_add_epi64(s3, _mm512_load_si512(p + i + 24));
    }
    return static_cast<std::uint64_t>(_mm512_reduce_add_epi64(_mm512_add_epi64(_mm512_add_epi64(s0, s1), _mm512_add_epi64(s2, s3))));
}
__attribute__((target("avx2"))) inline std::uint64_t sum256(const std::uint64_t* p, std::size_t words) {
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    for (std::size_t i = 0; i + 16 <= words; i += 16) {
        s0 = _mm256_add_epi64(s0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
        s1 = _mm256_add_epi64(s1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
        s2 = _mm256_add_epi64(s2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
        s3 = _mm256_add_epi64(s3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 12)));
    }
    alignas(32) std::uint64_t out[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(out), _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3)));
    return out[0] + out[1] + out[2] + out[3];
}
#endif
inline std::uint64_t sum_words(const std::uint64_t* p, std::size_t words) {
#if defined(__x86_64__)
    const cpu::isa best = cpu::detect_isa();
    if (best >= cpu::isa::avx512) return sum512(p, words);
    if (best >= cpu::isa::avx2) return sum256(p, words);
#endif
    std::uint64_t s = 0;
    for (std::size_t i = 0; i < words; ++i) s += p[i];
    return s;
}
}  // namespace detail

/// A buffer of `mib` MiB, written once by `threads` threads (each its own slice, so its pages
/// are placed as the reads will use them), for read_bandwidth.
class bandwidth_buffer {
public:
    bandwidth_buffer(std::size_t mib, int threads) : words_(mib * (std::size_t{1} << 20) / sizeof(std::uint64_t)) {
        words_ -= words_ % (64 * static_cast<std::size_t>(std::max(1, threads)));
        data_.reset(static_cast<std::uint64_t*>(std::aligned_alloc(4096, std::max<std::size_t>(4096, words_ * sizeof(std::uint64_t)))));
        if (!data_) throw std::bad_alloc();
        const auto n = static_cast<std::ptrdiff_t>(words_);
#pragma omp parallel for schedule(static) num_threads(threads)
        for (std::ptrdiff_t i = 0; i < n; ++i) data_.get()[i] = static_cast<std::uint64_t>(i) * 0x9e3779b97f4a7c15ull + 1;
    }
    [[nodiscard]] std::size_t bytes() const noexcept { return words_ * sizeof(std::uint64_t); }

    /// Bytes per second read by `threads` threads summing the buffer (each a contiguous slice of
    /// whole 512-byte lines), the best of 3 passes.
    [[nodiscard]] double read_bandwidth(int threads) const {
        const std::size_t slice = words_ / static_cast<std::size_t>(std::max(1, threads)) / 64 * 64;
        double best = 0;
        std::uint64_t sink = 0;
        for (int pass = 0; pass < 3; ++pass) {
            const auto t0 = std::chrono::steady_clock::now();
            std::uint64_t x = 0;
#pragma omp parallel num_threads(threads) reduction(^ : x)
            {
                int me = 0;
#if defined(_OPENMP)
                me = omp_get_thread_num();
#endif
                x ^= detail::sum_words(data_.get() + static_cast<std::size_t>(me) * slice, slice);
            }
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            best = std::max(best, static_cast<double>(slice * static_cast<std::size_t>(threads) * sizeof(std::uint64_t)) / s);
            sink ^= x;
        }
        volatile std::uint64_t keep = sink;
        (void)keep;
        return best;
    }

private:
    struct free_deleter {
        void operator()(std::uint64_t* p) const noexcept { std::free(p); }
    };
    std::size_t words_;
    std::unique_ptr<std::uint64_t, free_deleter> data_;
};

/// Resets the process's peak resident memory (Linux's VmHWM, what cpu::peak_resident_memory
/// reads) to the current one, so that a freed bandwidth buffer does not count as the model's peak.
inline void forget_peak_resident() {
#if defined(__linux__)
    std::ofstream("/proc/self/clear_refs") << "5";
#endif
}

}  // namespace dlm::bench
