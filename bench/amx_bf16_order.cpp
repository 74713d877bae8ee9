// dlm-amx-bf16-order — measures whether AMX's TDPBF16PS sums bf16 products in any sequential f32
// order the vector paths could reproduce (docs/determinism.md, why amx-bf16 is its own class).
//
//   dlm-amx-bf16-order [TRIALS]      (default 200 products of 16 × 16 × 32: 51 200 outputs)
//
// Runs dlm's own amx-bf16 product on random bf16 operands (exponents within ±20, so no subnormal
// results) and counts the outputs that differ from five models of the sum: pairs even-first with an
// FMA each, odd-first (vdpbf16ps's order), each pair's sum rounded then added, each pair added with
// one rounding, the whole step exact then rounded once. Exits 2 where the CPU has no AMX.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include <dlm/cpu/gemm.hpp>

using namespace dlm;
using namespace dlm::cpu;

namespace {
float bf(std::uint16_t h) { return io::bf16_to_f32(h); }
float ftz(float x) { return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x; }
}  // namespace

int main(int argc, char** argv) {
    const int trials = argc > 1 ? std::atoi(argv[1]) : 200;
    if (detect_isa() != isa::amx) {
        std::printf("dlm-amx-bf16-order: no AMX here (%s)\n", std::string(amx_unavailable_reason()).c_str());
        return 2;
    }
    set_isa(isa::amx);
    const product16& p = kernels().bf16;
    constexpr index_t m = 16, n = 16, k = 32;
    std::mt19937 g(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_int_distribution<int> ex(-20, 20);
    long total = 0, differ[5] = {};
    std::vector<float> a(m * k), w(n * k), c(m * n);
    for (int trial = 0; trial < trials; ++trial) {
        for (float& v : a) v = bf(to_bf16_daz(std::ldexp(nd(g), ex(g))));
        for (float& v : w) v = bf(to_bf16_daz(std::ldexp(nd(g), ex(g))));
        packed_matrix wm(n, k, io::dtype::bf16);
        wm.set_rows(0, w.data(), n);
        std::vector<std::uint16_t> packed(packed_a_size(m, k, p.a.mr, p.a.group));
        p.pack(m, k, a.data(), k, packed.data());
        p.run(m, n, k, packed.data(), wm.view16(), 0, 1, c.data(), n, false);
        for (index_t i = 0; i < m; ++i)
            for (index_t j = 0; j < n; ++j) {
                float e1 = 0, e2 = 0, e3 = 0, e4 = 0;
                double e5 = 0;
                for (index_t t = 0; t < k / 2; ++t) {
                    const float a0 = a[i * k + 2 * t], a1 = a[i * k + 2 * t + 1], b0 = w[j * k + 2 * t], b1 = w[j * k + 2 * t + 1];
                    e1 = ftz(std::fma(a1, b1, ftz(std::fma(a0, b0, e1))));
                    e2 = ftz(std::fma(a0, b0, ftz(std::fma(a1, b1, e2))));
                    e3 = ftz(e3 + ftz(a0 * b0 + a1 * b1));
                    e4 = ftz(static_cast<float>(static_cast<double>(e4) + static_cast<double>(a0) * b0 + static_cast<double>(a1) * b1));
                    e5 += static_cast<double>(a0) * b0 + static_cast<double>(a1) * b1;
                }
                const float got = c[i * n + j], model[5] = {e1, e2, e3, e4, static_cast<float>(e5)};
                for (int s = 0; s < 5; ++s) differ[s] += std::memcmp(&model[s], &got, sizeof got) != 0;
                ++total;
            }
    }
    std::printf("amx-bf16 against sequential f32 sums, %ld outputs of %d products of 16 x 16 x 32:\n", total, trials);
    const char* names[5] = {"pairs even-first, an FMA each", "pairs odd-first (vdpbf16ps)", "each pair summed, then added",
                            "each pair added, one rounding", "the step exact, one rounding"};
    for (int s = 0; s < 5; ++s) std::printf("  %-32s %7ld differ (%.1f %%)\n", names[s], differ[s], 100.0 * differ[s] / total);
    return 0;
}
