// The kernel table's row operations on every instruction set (kernels/body.inl): RMSNorm, and the
// rotary embedding's rotation, each the same bits on every path, the baseline included.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string_view>
#include <vector>

#include <dlm/cpu/ops.hpp>

#include "support/kernel_testing.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_row_kernels {

using namespace dlm;
using namespace dlm::cpu;
using dlm_test::random_values;

/// kernel_table::rms_norm as its comment states it, one value at a time.
std::vector<float> rms_norm_model(const std::vector<float>& x, const std::vector<float>& w, float eps) {
    constexpr index_t parts = rms_norm_sum_parts;
    double part[parts] = {};
    const auto n = static_cast<index_t>(x.size());
    for (index_t i = 0; i < n; ++i) part[i % parts] += static_cast<double>(x[std::size_t(i)]) * x[std::size_t(i)];
    for (index_t h = parts / 2; h >= 1; h /= 2)
        for (index_t j = 0; j < h; ++j) part[j] += part[j + h];
    const float inv = 1.0f / std::sqrt(static_cast<float>(part[0] / static_cast<double>(n)) + eps);
    std::vector<float> out(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) out[i] = w[i] * (x[i] * inv);
    return out;
}

TEST_CASE("kernels: rms_norm gives every path, the baseline included, the bits of one model of it, an RMSNorm to f32 accuracy") {
    // Widths around every vector width and the 16 partials, and a model's; values spread over
    // eight orders of magnitude. (A sum in f32 would round differently; another order of the
    // double sum almost never shows in a float: the next case builds a row where it does.)
    const float eps = 1e-6f;
    for (const index_t n : {1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 100, 1024, 1025, 2816}) {
        std::vector<float> x = random_values(std::size_t(n), 90 + unsigned(n));
        const std::vector<float> w = random_values(std::size_t(n), 190 + unsigned(n));
        for (index_t i = 0; i < n; ++i) x[std::size_t(i)] *= std::ldexp(1.0f, static_cast<int>(i * 7 % 27) - 13);
        const std::vector<float> want = rms_norm_model(x, w, eps);
        long double ss = 0;  // the norm it should be, to f32 accuracy
        for (float v : x) ss += static_cast<long double>(v) * v;
        const long double inv = 1.0L / std::sqrt(ss / n + eps);
        for (index_t i = 0; i < n; ++i) {
            const long double exact = w[std::size_t(i)] * (x[std::size_t(i)] * inv);
            CHECK(std::abs(static_cast<long double>(want[std::size_t(i)]) - exact) <= 4e-7L * std::abs(exact) + 1e-30L);
        }
        dlm_test::for_each_path([&](std::string_view path) {
            CAPTURE(path);
            CAPTURE(n);
            std::vector<float> out(x.size(), -1.0f);
            kernels().rms_norm(x.data(), n, w.data(), eps, out.data());
            CHECK(std::memcmp(out.data(), want.data(), out.size() * sizeof(float)) == 0);
            std::vector<float> in_place = x;  // out may be x
            kernels().rms_norm(in_place.data(), n, w.data(), eps, in_place.data());
            CHECK(std::memcmp(in_place.data(), want.data(), want.size() * sizeof(float)) == 0);
        });
    }
}

TEST_CASE("kernels: rms_norm keeps the order of its sum where the order decides the float, on every path") {
    // Two 2^-48 squares share partial 1 and add exactly to 2^-47 there, which the sum keeps; summed
    // one after another, each meets 16 + ... or 32 + ... as half an ulp (or less) and rounds away.
    // With these other squares the difference reaches the float mean, its root and the outputs (a
    // search over rows of this form found b = 109/1024).
    std::vector<float> x(32, 0.0f);
    x[0] = x[16] = 4.0f;                     // 16 + 16
    x[1] = x[17] = std::ldexp(1.0f, -24);    // 2^-48 twice
    x[2] = x[18] = std::ldexp(109.0f, -10);  // (109/1024)^2 twice, exact in double
    const std::vector<float> w(x.size(), 1.0f);
    double serial = 0;
    for (float v : x) serial += static_cast<double>(v) * v;
    std::vector<float> serial_out(x.size());  // what a serial sum gives
    const float serial_inv = 1.0f / std::sqrt(static_cast<float>(serial / 32));
    for (std::size_t i = 0; i < x.size(); ++i) serial_out[i] = w[i] * (x[i] * serial_inv);
    const std::vector<float> want = rms_norm_model(x, w, 0.0f);
    REQUIRE(want[0] != serial_out[0]);  // the case tells the orders apart
    dlm_test::for_each_path([&](std::string_view path) {
        CAPTURE(path);
        std::vector<float> out(x.size());
        kernels().rms_norm(x.data(), index_t(x.size()), w.data(), 0.0f, out.data());
        CHECK(std::memcmp(out.data(), want.data(), out.size() * sizeof(float)) == 0);
    });
}

TEST_CASE("rms_norm normalizes each row on its own, with its rows any distance apart") {
    constexpr index_t rows = 5, width = 40, ldx = 53, ldo = 47;
    const std::vector<float> x = random_values(std::size_t(rows * ldx), 7), w = random_values(std::size_t(width), 8);
    std::vector<float> out(std::size_t(rows * ldo), 3.0f);
    rms_norm(rows, width, x.data(), ldx, w.data(), 1e-5f, out.data(), ldo);
    for (index_t r = 0; r < rows; ++r) {
        const std::vector<float> row(x.begin() + r * ldx, x.begin() + r * ldx + width);
        const std::vector<float> want = rms_norm_model(row, w, 1e-5f);
        CHECK(std::memcmp(out.data() + r * ldo, want.data(), want.size() * sizeof(float)) == 0);
        for (index_t i = width; i < ldo && r + 1 < rows; ++i) CHECK(out[std::size_t(r * ldo + i)] == 3.0f);  // nothing written between rows
    }
}

TEST_CASE("kernels: rotate_half rounds each product before its addition and gives the same bits on every path") {
    // Half-widths around every vector width (partial RoPE rotates fewer dims than a head holds).
    // Each product through a volatile: rounded on its own here whatever the compiler would fuse.
    for (const index_t h : {1, 3, 4, 8, 11, 16, 32, 40, 64}) {
        const std::vector<float> v0 = random_values(std::size_t(2 * h), 300 + unsigned(h));
        const std::vector<float> c = random_values(std::size_t(h), 400 + unsigned(h)), sn = random_values(std::size_t(h), 500 + unsigned(h));
        std::vector<float> want = v0;
        for (index_t i = 0; i < h; ++i) {
            const auto at = [](const std::vector<float>& a, index_t j) { return a[std::size_t(j)]; };
            volatile float a = at(v0, i) * at(c, i), b = at(v0, i + h) * at(sn, i), p = at(v0, i + h) * at(c, i), q = at(v0, i) * at(sn, i);
            want[std::size_t(i)] = a - b;
            want[std::size_t(i + h)] = p + q;
        }
        dlm_test::for_each_path([&](std::string_view path) {
            CAPTURE(path);
            CAPTURE(h);
            std::vector<float> v = v0;
            kernels().rotate_half(v.data(), c.data(), sn.data(), h);
            CHECK(std::memcmp(v.data(), want.data(), v.size() * sizeof(float)) == 0);
        });
    }
}

}  // namespace test_row_kernels
