// The CPU attention's kernels on every instruction set (dlm/cpu/attention.hpp, kernels/body.inl):
// the products that read their A operand in place, the softmax's scale_max and exp_shifted_sum,
// and attend_run's rows alone and among others.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string_view>
#include <vector>

#include <dlm/cpu/attention.hpp>

#include "support/kernel_testing.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_attention_kernels {

using namespace dlm;
using namespace dlm::cpu;
using dlm_test::isa_scope;
using dlm_test::random_values;
using dlm_test::same_bits;

TEST_CASE("kernels: an f32 product reading A in place gives the bits of the packed product, for keys and values alike") {
    // The attention's two B forms: keys (panels side by side, rows key_ld apart) and values (each
    // panel's rows contiguous). Ragged row tiles (every path's mr: 6 or 8), partial panels, depths
    // across a 256-step k-block, rows an odd number of floats apart, with and without accumulating.
    for (isa i : runnable_isas()) {
        const isa_scope on(i);
        const f32_product& f = kernels().f32;
        for (const index_t m : {1, 5, 8, 9, 17, 32})
            for (const index_t n : {1, 31, 64, 100})
                for (const index_t k : {1, 7, 64, 300})
                    for (const bool values : {false, true})
                        for (const bool accumulate : {false, true}) {
                            CAPTURE(isa_name(i));
                            CAPTURE(m);
                            CAPTURE(n);
                            CAPTURE(k);
                            CAPTURE(values);
                            CAPTURE(accumulate);
                            const index_t panels = (n + panel_width - 1) / panel_width;
                            const std::ptrdiff_t lda = k + 3, key_ld = panels * panel_width + 5;
                            const std::vector<float> a = random_values(static_cast<std::size_t>(m * lda), 11);
                            const std::size_t b_size = values ? static_cast<std::size_t>(panels * k * panel_width) : static_cast<std::size_t>(k * key_ld);
                            const std::vector<float> b = random_values(b_size, 12);
                            const panel_view bv = values ? panel_view{b.data(), k * panel_width, panel_width} : panel_view{b.data(), panel_width, key_ld};
                            const std::ptrdiff_t ldc = n + 2;
                            const std::vector<float> c0 = random_values(static_cast<std::size_t>(m * ldc), 13);
                            std::vector<float> packed_c = c0, rows_c = c0;
                            std::vector<float, aligned_allocator<float>> packed(packed_a_size(m, k, f.a.mr, f.a.group));
                            f.pack(m, k, a.data(), lda, packed.data());
                            f.run(m, n, k, packed.data(), bv, 0, panels, packed_c.data(), ldc, accumulate);
                            f.run_rows(m, n, k, a.data(), lda, bv, 0, panels, rows_c.data(), ldc, accumulate);
                            CHECK(same_bits(packed_c, rows_c));
                            // And it is the product: the last column of each row, in double.
                            for (index_t r = 0; r < m; ++r) {
                                const index_t j = n - 1;
                                double want = accumulate ? c0[static_cast<std::size_t>(r * ldc + j)] : 0.0;
                                for (index_t t = 0; t < k; ++t) {
                                    const std::ptrdiff_t at = values ? (j / panel_width) * k * panel_width + t * panel_width + j % panel_width
                                                                     : t * key_ld + j;
                                    want += static_cast<double>(a[static_cast<std::size_t>(r * lda + t)]) * b[static_cast<std::size_t>(at)];
                                }
                                CHECK(std::abs(rows_c[static_cast<std::size_t>(r * ldc + j)] - want) < 1e-4);
                            }
                        }
    }
}

TEST_CASE("kernels: a bf16 product reading A rounded in place gives the bits of the packed product, for keys and values alike") {
    // product16::run_rows on A that round_rows rounded (bf16 bits for vdpbf16ps and amx-bf16, bf16
    // values as floats for the FMA form), against the packed product of the same A: odd depths (A
    // padded with a zero to the pair), depths past a tile step of 32 and an AMX pass of 1024, ragged
    // row tiles (6 or 8 rows; AMX's 16) and partial panels, with and without accumulating. Past each
    // row's pad and past the last row, the rounded buffer holds NaNs: a product reading them fails.
    dlm_test::for_each_path([](std::string_view path) {
        for (const product16* p : {&kernels().bf16, &kernels().bf16_alt}) {
            if (p->run_rows == nullptr) continue;
            for (const index_t m : {1, 5, 9, 16, 32, 37})
                for (const index_t n : {1, 64, 100})
                    for (const index_t k : {1, 7, 64, 301, 1090})
                        for (const bool values : {false, true})
                            for (const bool accumulate : {false, true}) {
                                CAPTURE(path);
                                CAPTURE(p->name);
                                CAPTURE(m);
                                CAPTURE(n);
                                CAPTURE(k);
                                CAPTURE(values);
                                CAPTURE(accumulate);
                                const index_t panels = (n + panel_width - 1) / panel_width, kp = k + k % 2;
                                const index_t kb = round_up(kp, 32);  // B's depth: amx-bf16's panels are padded to a tile step
                                const std::ptrdiff_t lda = k + 3, ldr = kp + 4, key_ld = panels * panel_width + 6;
                                const std::vector<float> a = random_values(static_cast<std::size_t>(m * lda), 21);
                                // B in bf16 pairs: values (each panel's rows side by side) or keys (panels side by side, rows key_ld apart).
                                std::vector<std::uint16_t> b(values ? static_cast<std::size_t>(panels * kb * panel_width) : static_cast<std::size_t>(kb * key_ld));
                                const std::vector<float> bf = random_values(b.size(), 22);
                                for (std::size_t e = 0; e < b.size(); ++e) b[e] = to_bf16_daz(bf[e]);
                                const panel_view16 bv = values ? panel_view16{b.data(), kb * panel_width, 2 * panel_width}
                                                               : panel_view16{b.data(), 2 * panel_width, key_ld};
                                const std::ptrdiff_t ldc = n + 2;
                                const std::vector<float> c0 = random_values(static_cast<std::size_t>(m * ldc), 23);
                                std::vector<float> packed_c = c0, rows_c = c0;
                                const bool bits = p->values == a_values::bf16_bits;
                                std::vector<float, aligned_allocator<float>> packed(packed_a_size(m, k, p->a.mr, p->a.group));
                                p->pack(m, k, a.data(), lda, packed.data());
                                p->run(m, n, k, packed.data(), bv, 0, panels, packed_c.data(), ldc, accumulate);
                                // m rows of ldr elements (bits: two in a float), NaN wherever round_rows writes nothing (as
                                // a float and as either bf16 half).
                                std::vector<float> rounded(static_cast<std::size_t>(bits ? (m * ldr + 1) / 2 : m * ldr), std::bit_cast<float>(0x7fc07fc0u));
                                round_rows(p->values, m, k, a.data(), lda, rounded.data(), ldr);
                                p->run_rows(m, n, k, rounded.data(), ldr, bv, 0, panels, rows_c.data(), ldc, accumulate);
                                CHECK(same_bits(packed_c, rows_c));
                                if (bits) continue;
                                int wrong = 0;  // floats: each the bf16 value of A's, then the pad's zero
                                for (index_t r = 0; r < m; ++r)
                                    for (index_t t = 0; t < kp; ++t)
                                        wrong += rounded[std::size_t(r * ldr + t)] != (t < k ? io::bf16_to_f32(to_bf16_daz(a[std::size_t(r * lda + t)])) : 0.0f);
                                CHECK(wrong == 0);
                            }
        }
    });
}

TEST_CASE("kernels: the softmax's scale_max scales each score and returns the largest, the same bits on every path") {
    // Rows of every length around the vector widths (4, 8, 16 lanes), with masked keys (-inf) and,
    // in one row, a NaN score, which must never be taken as the largest.
    constexpr float inf = std::numeric_limits<float>::infinity();
    const float scale = 0.125f;
    for (const index_t n : {0, 1, 3, 4, 5, 15, 16, 17, 31, 33, 100}) {
        for (int variant = 0; variant < 3; ++variant) {
            std::vector<float> row = random_values(static_cast<std::size_t>(n), 40 + static_cast<unsigned>(n));
            for (index_t i = 0; i < n; ++i)
                if (variant == 1 ? i % 3 == 0 : variant == 2) row[static_cast<std::size_t>(i)] = -inf;  // masked keys; all of them in variant 2
            if (variant == 1 && n > 2) row[static_cast<std::size_t>(n / 2)] = std::numeric_limits<float>::quiet_NaN();
            float expected = -inf;
            for (float v : row)
                if (v * scale > expected) expected = v * scale;
            for (isa i : runnable_isas()) {
                CAPTURE(isa_name(i));
                CAPTURE(n);
                CAPTURE(variant);
                const isa_scope on(i);
                std::vector<float> x = row;
                const float top = kernels().scale_max(x.data(), n, scale);
                CHECK(std::memcmp(&top, &expected, sizeof top) == 0);
                for (index_t j = 0; j < n; ++j) {
                    const float want = row[static_cast<std::size_t>(j)] * scale, got = x[static_cast<std::size_t>(j)];
                    CHECK((std::isnan(want) ? std::isnan(got) : std::memcmp(&got, &want, sizeof got) == 0));
                }
            }
        }
    }
}

TEST_CASE("kernels: the softmax's exp_shifted_sum takes each exp and sums them in the order every path shares") {
    // Lengths around every vector width and the 16 partial sums, masked keys (-inf: weight 0) among
    // them. The exps must be near std::exp and the same bits on every path with FMA (the baseline
    // rounds its products on their own); the sum must be the scalar model's on every path: x[i]
    // into partial i mod 16, each in order, then folded in halves.
    constexpr float inf = std::numeric_limits<float>::infinity();
    constexpr index_t parts = softmax_sum_parts;
    for (const index_t n : {0, 1, 3, 4, 5, 8, 15, 16, 17, 31, 32, 33, 47, 100, 1000}) {
        for (int variant = 0; variant < 2; ++variant) {
            std::vector<float> row = random_values(static_cast<std::size_t>(n), 70 + static_cast<unsigned>(n));
            for (index_t i = 0; i < n; ++i)
                if (variant == 1 && i % 5 == 2) row[static_cast<std::size_t>(i)] = -inf;
            const float shift = n > 0 ? *std::max_element(row.begin(), row.end()) : 0.0f;
            std::vector<float> first;
            for (isa i : runnable_isas()) {
                CAPTURE(isa_name(i));
                CAPTURE(n);
                CAPTURE(variant);
                const isa_scope on(i);
                std::vector<float> x = row;
                const float sum = kernels().exp_shifted_sum(x.data(), n, shift);
                float part[parts] = {};
                for (index_t j = 0; j < n; ++j) {
                    const double want = std::exp(static_cast<double>(row[static_cast<std::size_t>(j)]) - shift);
                    CHECK(std::abs(x[static_cast<std::size_t>(j)] - want) <= 1e-6 * want);
                    part[j % parts] += x[static_cast<std::size_t>(j)];
                }
                for (index_t w = parts / 2; w >= 1; w /= 2)
                    for (index_t j = 0; j < w; ++j) part[j] += part[j + w];
                CHECK(std::memcmp(&sum, &part[0], sizeof sum) == 0);
                // The same sum wherever the row starts: behind `lead` masked keys (exp 0).
                for (index_t lead = 1; lead < parts; lead += 3) {
                    std::vector<float> y(static_cast<std::size_t>(lead), -inf);
                    y.insert(y.end(), row.begin(), row.end());
                    const float moved = kernels().exp_shifted_sum(y.data(), lead + n, shift);
                    CHECK(std::memcmp(&moved, &sum, sizeof sum) == 0);
                }
                if (i == isa::baseline || n == 0) continue;  // n = 0: no exps (and memcmp must not see null)
                if (first.empty()) first = x;
                CHECK(std::memcmp(x.data(), first.data(), x.size() * sizeof(float)) == 0);
            }
        }
    }
}

TEST_CASE("attention: a row whose allowed scores are all NaN (a NaN weight upstream) gets a NaN sum, never the zeros of a row with no key") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    // Row 0: NaN at every key of its range; then a row whose range is empty (no key allowed); a row
    // with one NaN among finite scores; and a row whose one allowed key (a predicate) scores NaN.
    std::vector<float> s = {nan, nan, nan, nan, 1.f, nan, 2.f, 3.f, 1.f, 2.f, 3.f, 4.f, 1.f, nan, 2.f, 3.f};
    float inv[4] = {};
    const kernel_table& kt = kernels();
    masked_exp_rows(s.data(), 4, 2, 4, 0.5f, [](index_t) { return key_range{0, 4}; }, kt, inv, [](index_t) {});
    masked_exp_rows(s.data() + 8, 4, 1, 4, 0.5f, [](index_t) { return key_range{2, 2}; }, kt, inv + 2, [](index_t) {});
    masked_exp_rows(s.data() + 12, 4, 1, 4, 0.5f, [](index_t) { return key_range{0, 4}; }, kt, inv + 3, [](index_t) {});
    CHECK(std::isnan(inv[0]));
    CHECK(std::isnan(inv[3]));
    CHECK(inv[2] == 0.f);  // no key: its weights are zeros and so is its output
    float row1[4] = {1.f, nan, 2.f, 3.f};
    float inv1 = 0.f;
    masked_exp_rows(row1, 4, 1, 4, 0.5f, [](index_t) { return [](index_t k) { return k == 1; }; }, kt, &inv1, [](index_t) {});
    CHECK(std::isnan(inv1));
}

TEST_CASE("attention: attend_run gives a row the bits it gets alone among rows whose keys start elsewhere (sliding windows)") {
    // 32 query rows, row r at position 40 + r attending a window of 21 keys ending at itself, so
    // the task's keys start at 20 and row r's own at 20 + r: alone, its scores start 0 to 31 places
    // earlier in the softmax's row than in the task (kernel_table::exp_shifted_sum: the same sum).
    constexpr index_t d = 64, keys = 72, rows = 32, window = 21;
    const std::ptrdiff_t key_ld = keys + panel_width, value_ld = d;
    const std::vector<float> q = random_values(static_cast<std::size_t>(rows * d), 1);
    const std::vector<float> k = random_values(static_cast<std::size_t>(d * key_ld), 2);
    const std::vector<float> v = random_values(static_cast<std::size_t>(keys * value_ld), 3);
    const auto range = [](index_t pos) { return key_range{std::max<index_t>(0, pos - window + 1), pos + 1}; };
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    for (isa i : runnable_isas()) {
        CAPTURE(isa_name(i));
        const isa_scope on(i);
        std::vector<float> all(static_cast<std::size_t>(rows * d));
        attend_run(rows, d, q.data(), d, k.data(), key_ld, v.data(), value_ld, scale, [&](index_t r) { return range(40 + r); }, all.data(), d);
        for (index_t r = 0; r < rows; ++r) {
            CAPTURE(r);
            std::vector<float> alone(static_cast<std::size_t>(d));
            attend_run(1, d, q.data() + r * d, d, k.data(), key_ld, v.data(), value_ld, scale, [&](index_t) { return range(40 + r); },
                       alone.data(), d);
            CHECK(std::memcmp(alone.data(), all.data() + r * d, sizeof(float) * d) == 0);
            // And the output is the softmax-weighted values, to f32 accuracy.
            const key_range kr = range(40 + r);
            std::vector<double> s;
            double top = -INFINITY, sum = 0;
            for (index_t j = kr.begin; j < kr.end; ++j) {
                double dot = 0;
                for (index_t t = 0; t < d; ++t) dot += static_cast<double>(q[static_cast<std::size_t>(r * d + t)]) * k[static_cast<std::size_t>(t * key_ld + j)];
                s.push_back(dot * scale);
                top = std::max(top, s.back());
            }
            for (double& x : s) sum += (x = std::exp(x - top));
            for (index_t t = 0; t < d; t += 7) {
                double want = 0;
                for (index_t j = kr.begin; j < kr.end; ++j)
                    want += s[static_cast<std::size_t>(j - kr.begin)] / sum * v[static_cast<std::size_t>(j * value_ld + t)];
                CHECK(std::abs(alone[static_cast<std::size_t>(t)] - want) < 1e-5);
            }
        }
    }
}

}  // namespace test_attention_kernels
