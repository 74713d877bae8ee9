// The row-wise kernels of the CUDA transformer (kernels.cuh) on their own: RMSNorm against a host
// reference at every width class its launcher tells apart (register-resident quads of 4 and 8 per thread,
// the generic loop), and SiLU·up in quads against single elements. The q/k/v epilogue is checked through
// the model (test_cuda.cu's parity and cache suites: every head layout, biases, caches).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <dlm/cpu/kernels/pack.hpp>
#include <dlm/cuda/kernels.cuh>

using namespace dlm;
namespace kernels = dlm::cuda::kernels;
using dlm::cuda::bf16;

namespace {

template <class T>
dlm::cuda::device_buffer<T> upload(const std::vector<T>& host) {
    dlm::cuda::device_buffer<T> d(host.size(), "test input");
    dlm::cuda::check(cudaMemcpy(d.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
    return d;
}

std::vector<float> normal(std::size_t n, unsigned seed, float sd) {
    std::mt19937 g(seed);
    std::normal_distribution<float> d(0.0f, sd);
    std::vector<float> v(n);
    for (float& x : v) x = d(g);
    return v;
}

/// The CPU model's RMSNorm of one row: mean of squares in double, the rest in f32 (kernel_table::
/// rms_norm sums in 16 partials, this one serially, the GPU per thread and then over the block; an
/// order of a double sum reaches an f32 result only on rows built for it, as test_row_kernels' is).
std::vector<float> host_rms_norm(const float* x, const float* w, index_t width, float eps) {
    double ss = 0;
    for (index_t i = 0; i < width; ++i) ss += static_cast<double>(x[i]) * x[i];
    const float inv = 1.0f / std::sqrt(static_cast<float>(ss / width) + eps);
    std::vector<float> out(static_cast<std::size_t>(width));
    for (index_t i = 0; i < width; ++i) out[static_cast<std::size_t>(i)] = w[i] * (x[i] * inv);
    return out;
}

}  // namespace

TEST_SUITE("rows") {
    TEST_CASE("RMSNorm gives the CPU model's values at every width form: quads in registers (4 or 8 a thread) and the generic loop") {
        const float eps = 1e-6f;
        // 64 and 3584: 4 quads a thread at most; 4100: 8; 8196 (past 8192) and 3585 (odd): the generic loop.
        for (const index_t width : {64, 3584, 4100, 8196, 3585}) {
            CAPTURE(width);
            const index_t m = 5, sources = 7;
            const auto x = normal(static_cast<std::size_t>(sources * width), 11u + static_cast<unsigned>(width), 2.0f);
            const auto w = normal(static_cast<std::size_t>(width), 3u, 1.0f);
            const std::vector<index_t> rows = {6, 0, 3, 3, 1};  // output row r normalises input row rows[r]
            auto dx = upload(x);
            auto dw = upload(w);
            auto drows = upload(rows);
            dlm::cuda::device_buffer<float> out32(static_cast<std::size_t>(m * width));
            dlm::cuda::device_buffer<bf16> out16(static_cast<std::size_t>(m * width));
            kernels::launch_rms_norm<float>(m, dx.data(), drows.data(), width, dw.data(), eps, out32.data(), nullptr);
            kernels::launch_rms_norm<bf16>(m, dx.data(), drows.data(), width, dw.data(), eps, out16.data(), nullptr);
            dlm::cuda::check(cudaDeviceSynchronize(), "rms_norm");
            std::vector<float> got32(static_cast<std::size_t>(m * width));
            std::vector<bf16> got16(got32.size());
            dlm::cuda::check(cudaMemcpy(got32.data(), out32.data(), got32.size() * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
            dlm::cuda::check(cudaMemcpy(got16.data(), out16.data(), got16.size() * 2, cudaMemcpyDeviceToHost), "cudaMemcpy");
            int wrong32 = 0, wrong16 = 0;
            for (index_t r = 0; r < m; ++r) {
                const auto ref = host_rms_norm(x.data() + rows[static_cast<std::size_t>(r)] * width, w.data(), width, eps);
                for (index_t i = 0; i < width; ++i) {
                    const std::size_t at = static_cast<std::size_t>(r * width + i);
                    const float want = ref[static_cast<std::size_t>(i)];
                    // The sums differ only in the order of double additions: the f32 results are the same.
                    wrong32 += std::memcmp(&got32[at], &want, 4) != 0;
                    std::uint16_t bits = 0;
                    std::memcpy(&bits, &got16[at], 2);
                    wrong16 += bits != dlm::cpu::to_bf16_daz(want);
                }
            }
            CHECK(wrong32 == 0);
            CHECK(wrong16 == 0);
        }
    }

    TEST_CASE("SiLU·up in quads gives the same bits as one element at a time") {
        const index_t rows = 3, width = 4 * 37;
        auto gu = normal(static_cast<std::size_t>(rows * 2 * width), 5u, 4.0f);
        gu[7] = -0.0f;
        gu[9] = 90.0f;  // silu of large and signed-zero gates
        gu[10] = -90.0f;
        auto dgu = upload(gu);
        // The quad form writes to an aligned buffer; one element further on, the launcher takes the single form.
        dlm::cuda::device_buffer<bf16> quads(static_cast<std::size_t>(rows * width)), singles(static_cast<std::size_t>(rows * width) + 1);
        kernels::launch_silu_gate<bf16>(dgu.data(), rows, width, quads.data(), nullptr);
        kernels::launch_silu_gate<bf16>(dgu.data(), rows, width, singles.data() + 1, nullptr);
        dlm::cuda::check(cudaDeviceSynchronize(), "silu_gate");
        std::vector<std::uint16_t> a(static_cast<std::size_t>(rows * width)), b(a.size() + 1);
        dlm::cuda::check(cudaMemcpy(a.data(), quads.data(), a.size() * 2, cudaMemcpyDeviceToHost), "cudaMemcpy");
        dlm::cuda::check(cudaMemcpy(b.data(), singles.data(), b.size() * 2, cudaMemcpyDeviceToHost), "cudaMemcpy");
        int differ = 0, nonzero = 0;
        for (std::size_t i = 0; i < a.size(); ++i) {
            differ += a[i] != b[i + 1];
            nonzero += (a[i] & 0x7fffu) != 0;
        }
        CHECK(differ == 0);
        CHECK(nonzero > static_cast<int>(a.size()) / 2);  // a real product, not two zero buffers
        // And the values are SiLU(gate)·up to within bf16 rounding (expf on the device: a few ulp of f32).
        for (index_t r = 0; r < rows; ++r)
            for (index_t j = 0; j < width; j += 13) {
                const float g = gu[static_cast<std::size_t>(r * 2 * width + j)], u = gu[static_cast<std::size_t>(r * 2 * width + width + j)];
                const float want = g / (1.0f + std::exp(-g)) * u;
                std::uint32_t bits = static_cast<std::uint32_t>(a[static_cast<std::size_t>(r * width + j)]) << 16;
                float got = 0;
                std::memcpy(&got, &bits, 4);
                CHECK(std::abs(got - want) <= 1e-2f * std::abs(want) + 1e-30f);
            }
    }
}
