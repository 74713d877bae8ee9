// The AMX kernels (dlm/cpu/kernels/amx.hpp): amx-bf16 is its own determinism class, so its
// invariances are pinned here on their own; the quantized products' bits are pinned against every
// other path by test_quant. Where the CPU or the OS offers no AMX, every case runs the same kernels
// on the software model of the tile instructions (tests/support/amx_model.cpp) where AVX-512
// BF16 can run their epilogues, saying so, and reports itself skipped, with the reason, elsewhere.
#include <doctest/doctest.h>

#include <dlm/cpu/gemm.hpp>

#include "support/amx_model.hpp"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_amx {

using namespace dlm;
using namespace dlm::cpu;

namespace {

struct amx_scope {
    amx_scope() { set_isa(isa::amx); }
    ~amx_scope() { set_isa(detect_isa()); }
    amx_scope(const amx_scope&) = delete;
    amx_scope& operator=(const amx_scope&) = delete;
};

/// Runs `check` with the AMX kernels active: on the tile unit where the CPU and the OS offer it,
/// else on the model of the tile instructions where AVX-512 BF16 runs their epilogues. False, saying
/// why the case is skipped, where neither can.
template <class F>
bool on_amx(F&& check) {
    if (detect_isa() == isa::amx) {
        const amx_scope on;
        check();
        return true;
    }
#if defined(__x86_64__)
    if (dlm_test::amx_model::runnable()) {
        MESSAGE("no AMX here (" << amx_unavailable_reason() << "): the AMX kernels run on the model of the tile instructions");
        const dlm_test::amx_model::scope on;
        check();
        return true;
    }
#endif
    MESSAGE("skipped: no AMX here (" << amx_unavailable_reason() << "), and no AVX-512 BF16 for the model of its tiles");
    return false;
}

std::vector<float> random_values(std::size_t n, unsigned seed, float scale = 1.0f) {
    std::mt19937 g(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = d(g);
    return v;
}

packed_matrix bf16_weights(index_t n, index_t k, unsigned seed) {
    packed_matrix w(n, k, io::dtype::bf16);
    const auto v = random_values(static_cast<std::size_t>(n * k), seed);
    w.set_rows(0, v.data(), n);
    return w;
}

std::vector<float> product(index_t m, index_t k, const float* x, const packed_matrix& w) {
    std::vector<float> y(static_cast<std::size_t>(m * w.rows()));
    linear(m, x, k, w, y.data(), w.rows());
    return y;
}

bool same_bits(const float* a, const float* b, std::size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

}  // namespace

TEST_CASE("amx-bf16: products are within f32 accumulation's bound of the exact sum, as the FMA form's, on partial tiles and panels") {
    const index_t m = 37, n = 70, k = 300;  // a tile pair and a partial tile; a partial panel; k padded to 320
    const auto x = random_values(static_cast<std::size_t>(m * k), 1);
    const packed_matrix w = bf16_weights(n, k, 2);
    std::vector<float> row(static_cast<std::size_t>(k));
    std::vector<float> amx, fma;
    if (!on_amx([&] { amx = product(m, k, x.data(), w); })) return;
    set_isa(isa::avx512_bf16);
    fma = product(m, k, x.data(), w);
    set_isa(detect_isa());
    double worst_amx = 0, worst_fma = 0, scale = 0;
    for (index_t j = 0; j < n; ++j) {
        w.row(j, row.data());
        for (index_t i = 0; i < m; ++i) {
            double s = 0, a = 0;
            for (index_t t = 0; t < k; ++t) {
                const double p = double(io::bf16_to_f32(to_bf16_daz(x[i * k + t]))) * row[t];
                s += p;
                a += std::fabs(p);
            }
            const std::size_t e = static_cast<std::size_t>(i * n + j);
            worst_amx = std::max(worst_amx, std::fabs(amx[e] - s) / a);
            worst_fma = std::max(worst_fma, std::fabs(fma[e] - s) / a);
            scale = std::max(scale, a);
        }
    }
    CAPTURE(worst_amx);
    CAPTURE(worst_fma);
    // f32 accumulation over k = 300: both within k · 2^-24 of Σ|products|, relative. The same bound,
    // not the same errors: the tile unit sums in its own order (docs/determinism.md), so the two
    // forms' errors differ output by output and are not compared with each other.
    CHECK(worst_amx < 300 * 6e-8);
    CHECK(worst_fma < 300 * 6e-8);
}

TEST_CASE("amx-bf16: a row's bits do not depend on the batch, its position in a tile, or the thread count") {
    on_amx([] {
        const index_t n = 96, k = 256;
        const packed_matrix w = bf16_weights(n, k, 3);
        const index_t big = 150;  // tasks of 128 rows: a second task with a tile pair and a partial tile
        const auto x = random_values(static_cast<std::size_t>(big * k), 4);
        const auto all = product(big, k, x.data(), w);
        for (index_t m : {1, 2, 15, 16, 17, 31, 32, 33, 64, 129}) {
            for (index_t r0 : {index_t{0}, index_t{3}, big - m}) {
                if (r0 + m > big) continue;
                CAPTURE(m);
                CAPTURE(r0);
                const auto y = product(m, k, x.data() + r0 * k, w);
                CHECK(same_bits(y.data(), all.data() + r0 * n, y.size()));
            }
        }
#if defined(_OPENMP)
        const int threads = omp_get_max_threads();
        for (int t : {1, 2, 3}) {
            omp_set_num_threads(t);
            CAPTURE(t);
            CHECK(same_bits(product(big, k, x.data(), w).data(), all.data(), all.size()));
        }
        omp_set_num_threads(threads);
#endif
    });
}

TEST_CASE("amx-bf16: a row's bits do not depend on how many rows share its call, C held between a pass's blocks or not") {
    on_amx([] {
        // k = 544: 17 steps, so a pass of 2-8 row-tile pairs runs in blocks of 8, 8 and 1
        // (bf16_block_steps), C in the held buffer between them; 300 rows are 10 pairs, more than the
        // buffer takes, and run whole passes, as one pair does. dlm::cpu::gemm takes every row in one
        // call (linear splits 300 rows into tasks of 160 and 140), so all three run; each must give the others' bits.
        const index_t n = 80, k = 544, big = 300;
        const packed_matrix w = bf16_weights(n, k, 9);
        const auto x = random_values(static_cast<std::size_t>(big * k), 10);
        std::vector<float> all(static_cast<std::size_t>(big * n));
        gemm(big, n, k, x.data(), k, w.view16(), all.data(), n);
        for (index_t m : {1, 17, 32, 33, 129, 256}) {
            for (index_t r0 : {index_t{0}, index_t{5}, big - m}) {
                CAPTURE(m);
                CAPTURE(r0);
                std::vector<float> y(static_cast<std::size_t>(m * n));
                gemm(m, n, k, x.data() + r0 * k, k, w.view16(), y.data(), n);
                CHECK(same_bits(y.data(), all.data() + r0 * n, y.size()));
            }
        }
        CHECK(same_bits(product(big, k, x.data(), w).data(), all.data(), all.size()));  // linear's tasks of 160 and 140 rows
    });
}

TEST_CASE("amx-bf16: a product split in k continues the same sum exactly (accumulate), and k = 0 zeroes C") {
    on_amx([] {
        const index_t m = 20, n = 64, k = 2080, k0 = 288;  // 9 tile steps, off the kernel's own 1024-k passes; 2080 = 2 passes + 1 step
        const packed_matrix w = bf16_weights(n, k, 5);
        const auto x = random_values(static_cast<std::size_t>(m * k), 6);
        const product16& p = kernels().bf16;
        REQUIRE(std::string(p.name) == "amx-bf16");
        auto packed = [&](index_t kb, index_t ke) {
            std::vector<std::uint16_t> a(packed_a_size(m, ke - kb, p.a.mr, p.a.group));
            pack_a(m, ke - kb, x.data() + kb, k, p.a.mr, p.a.group, a.data(), cpu::detail::bf16_bits{});
            return a;
        };
        const auto whole = packed(0, k), first = packed(0, k0), second = packed(k0, k);
        const panel_view16 b = w.view16(), b2{b.data + k0 / 2 * b.ldb, b.panel_stride, b.ldb};
        std::vector<float> one(static_cast<std::size_t>(m * n)), split(one.size());
        p.run(m, n, k, whole.data(), b, 0, w.panels(), one.data(), n, false);
        p.run(m, n, k0, first.data(), b, 0, w.panels(), split.data(), n, false);
        p.run(m, n, k - k0, second.data(), b2, 0, w.panels(), split.data(), n, true);
        CHECK(same_bits(one.data(), split.data(), one.size()));
        std::vector<float> zeroed(one.size(), 7.0f);
        p.run(m, n, 0, whole.data(), b, 0, w.panels(), zeroed.data(), n, false);
        for (float v : zeroed) REQUIRE(v == 0.0f);
    });
}

}  // namespace test_amx
