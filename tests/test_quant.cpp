// GGUF block types: dlm's decoder against the `gguf` package's numpy decoder (fixtures written by
// tools/make_quant_fixtures.py), and the encoders' round trip.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstddef>
#include <filesystem>
#include <limits>
#include <fstream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <dlm/cpu/quant/blocks.hpp>
#include <dlm/cpu/quant/matrix.hpp>
#include <dlm/cpu/transformer.hpp>
#include <dlm/mask/masks.hpp>

#include "support/kernel_testing.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_quant {

using namespace dlm;
using io::gguf_type;

namespace {

const std::filesystem::path quant_dir = std::filesystem::path(DLM_TEST_DATA) / "quant";

template <class T>
std::vector<T> read_file(const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    REQUIRE_MESSAGE(f.good(), "missing fixture " << p.string());
    const auto size = std::filesystem::file_size(p);
    std::vector<T> v(size / sizeof(T));
    f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
    return v;
}

struct named_type {
    const char* file;
    gguf_type type;
};
constexpr named_type block_types[] = {{"q8_0", gguf_type::q8_0}, {"q4_0", gguf_type::q4_0}, {"q4_k", gguf_type::q4_k},
                                      {"q5_k", gguf_type::q5_k}, {"q6_k", gguf_type::q6_k}};

}  // namespace

TEST_CASE("dequantize_row decodes every block type as the gguf package's numpy decoder does") {
    constexpr std::int64_t rows = 6, cols = 512;
    for (const named_type& t : block_types) {
        CAPTURE(t.file);
        const auto blocks = read_file<std::byte>(quant_dir / (std::string(t.file) + ".blocks"));
        const auto want = read_file<float>(quant_dir / (std::string(t.file) + ".f32"));
        const std::size_t rb = cpu::quant::row_bytes(t.type, cols);
        REQUIRE(blocks.size() == rows * rb);
        REQUIRE(want.size() == static_cast<std::size_t>(rows * cols));
        std::vector<float> got(static_cast<std::size_t>(cols));
        for (std::int64_t r = 0; r < rows; ++r) {
            cpu::quant::dequantize_row(t.type, blocks.data() + r * rb, got.data(), cols);
            for (std::int64_t c = 0; c < cols; ++c) {
                const float w = want[static_cast<std::size_t>(r * cols + c)], g = got[static_cast<std::size_t>(c)];
                // The K-quants compute d·sc·q − dmin·m; numpy rounds the product and the difference
                // separately, a compiler may fuse them: one rounding apart at most.
                INFO("row " << r << " col " << c);
                CHECK(std::fabs(g - w) <= 1e-6f * std::fabs(w) + 1e-12f);
            }
        }
    }
}

TEST_CASE("quantize_row writes blocks that decode to within a quant step of the input") {
    std::mt19937 rng(3);
    std::normal_distribution<float> dist(0.1f, 1.0f);
    constexpr std::int64_t cols = 1024;
    std::vector<float> x(cols), y(cols);
    for (float& v : x) v = dist(rng);
    x[700] = 6.0f;  // an outlier
    // Largest error as a fraction of the block's range: half a step of the quant grid, plus the
    // K-quants' rounding of the scales to 6 (8) bits.
    const struct {
        gguf_type type;
        float bound;
    } cases[] = {{gguf_type::q8_0, 0.5f / 127}, {gguf_type::q4_0, 0.5f / 8}, {gguf_type::q4_k, 1.0f / 15},
                 {gguf_type::q5_k, 1.0f / 31}, {gguf_type::q6_k, 1.0f / 31}};
    for (const auto& c : cases) {
        CAPTURE(io::gguf_type_name(c.type));
        std::vector<std::byte> blocks(cpu::quant::row_bytes(c.type, cols));
        cpu::quant::quantize_row(c.type, x.data(), blocks.data(), cols);
        cpu::quant::dequantize_row(c.type, blocks.data(), y.data(), cols);
        const std::int64_t bl = io::gguf_block_size(c.type);
        for (std::int64_t b = 0; b < cols / bl; ++b) {
            float lo = 0, hi = 0;
            for (std::int64_t i = b * bl; i < (b + 1) * bl; ++i) lo = std::min(lo, x[static_cast<std::size_t>(i)]), hi = std::max(hi, x[static_cast<std::size_t>(i)]);
            const float range = std::max(hi, -lo) * 2;
            for (std::int64_t i = b * bl; i < (b + 1) * bl; ++i) {
                INFO("element " << i);
                CHECK(std::fabs(y[static_cast<std::size_t>(i)] - x[static_cast<std::size_t>(i)]) <= c.bound * range * 1.05f + 1e-6f);
            }
        }
    }
}

TEST_CASE("the encoders round a quant as lround does, ties away from zero, then clamp it to the type's range") {
    using cpu::quant::detail::round_clamp;
    for (const float v : {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 0.49999997f, -0.49999997f, 2.4999998f, 6.7f, -7.3f, 0.0f, -0.0f}) {
        CAPTURE(v);
        CHECK(round_clamp(v, -128, 127) == static_cast<int>(std::lround(v)));
    }
    CHECK(round_clamp(7.6f, -8, 7) == 7);
    CHECK(round_clamp(-8.7f, -8, 7) == -8);
    CHECK(round_clamp(1e30f, 0, 63) == 63);
    CHECK(round_clamp(-1e30f, 0, 63) == 0);
    CHECK(round_clamp(std::numeric_limits<float>::quiet_NaN(), -32, 31) == 0);
    CHECK(round_clamp(std::numeric_limits<float>::quiet_NaN(), 1, 31) == 1);
}

TEST_CASE("row_bytes refuses a row that is not a whole number of blocks") {
    CHECK(cpu::quant::row_bytes(gguf_type::q4_k, 512) == 288);
    CHECK_THROWS_AS((void)cpu::quant::row_bytes(gguf_type::q4_k, 500), invalid_parameter);
    CHECK_THROWS_AS((void)cpu::quant::row_bytes(gguf_type::q8_0, 33), invalid_parameter);
}

// ---- products with quantized weights ----

namespace {

using cpu::runnable_isas;

using dlm_test::for_each_path;

struct quant_case {
    cpu::quant::matrix w;
    std::vector<float> dequantized;  // [n × k]
};

/// A matrix of `parts`, random values quantized by quantize_row, and its dequantized copy.
quant_case make_matrix(std::int64_t k, const std::vector<cpu::quant::part_spec>& parts, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, 0.05f);
    quant_case qc{cpu::quant::matrix(k, parts), {}};
    std::int64_t row0 = 0;
    std::vector<float> x(static_cast<std::size_t>(k));
    for (const auto& p : parts) {
        const std::size_t rb = cpu::quant::row_bytes(p.type, k);
        std::vector<std::byte> blocks(rb * static_cast<std::size_t>(p.rows));
        for (std::int64_t r = 0; r < p.rows; ++r) {
            for (float& v : x) v = dist(rng);
            cpu::quant::quantize_row(p.type, x.data(), blocks.data() + r * rb, k);
            std::vector<float> back(static_cast<std::size_t>(k));
            cpu::quant::dequantize_row(p.type, blocks.data() + r * rb, back.data(), k);
            qc.dequantized.insert(qc.dequantized.end(), back.begin(), back.end());
        }
        // In two slices, as a loader hands them over.
        const std::int64_t half = p.rows / 2;
        qc.w.set_rows(row0, blocks.data(), half);
        qc.w.set_rows(row0 + half, blocks.data() + half * rb, p.rows - half);
        row0 += p.rows;
    }
    return qc;
}

}  // namespace

TEST_CASE("quant::matrix holds the blocks it was given: every row decodes as dequantize_row does") {
    const quant_case qc = make_matrix(512, {{20, gguf_type::q4_k}, {17, gguf_type::q6_k}, {5, gguf_type::q5_k}}, 1);
    const quant_case q8 = make_matrix(64, {{33, gguf_type::q8_0}, {3, gguf_type::q4_0}}, 2);
    for (const quant_case* c : {&qc, &q8}) {
        std::vector<float> row(static_cast<std::size_t>(c->w.cols()));
        for (std::int64_t j = 0; j < c->w.rows(); ++j) {
            c->w.row(j, row.data());
            for (std::int64_t i = 0; i < c->w.cols(); ++i) REQUIRE(row[static_cast<std::size_t>(i)] == c->dequantized[static_cast<std::size_t>(j * c->w.cols() + i)]);
        }
    }
}

TEST_CASE("quantized products: every instruction set gives the same bits, close to the dequantized f32 product, batch-invariant") {
    struct shape {
        std::int64_t k;
        std::vector<cpu::quant::part_spec> parts;
    };
    const shape shapes[] = {{256, {{37, gguf_type::q8_0}}}, {96, {{16, gguf_type::q4_0}, {9, gguf_type::q8_0}}},
                            {512, {{21, gguf_type::q4_k}, {16, gguf_type::q6_k}}}, {256, {{35, gguf_type::q5_k}}},
                            {256, {{3, gguf_type::q6_k}, {14, gguf_type::q4_k}, {8, gguf_type::q8_0}}},
                            // Deep enough that AMX builds its B operands in several chunks of a tile
                            // column (K-quants 2 blocks a chunk, Q4_0 16: chunk_blocks), the last short.
                            {1280, {{19, gguf_type::q4_k}, {5, gguf_type::q5_k}, {17, gguf_type::q6_k}, {18, gguf_type::q4_0}}}};
    unsigned seed = 10;
    for (const shape& sh : shapes) {
        const quant_case qc = make_matrix(sh.k, sh.parts, seed++);
        CAPTURE(seed);
        const std::int64_t n = qc.w.rows(), k = sh.k, m = 45;  // AMX: a tile pair, then a partial tile
        std::mt19937 rng(seed);
        std::normal_distribution<float> dist(0.0f, 1.0f);
        std::vector<float> x(static_cast<std::size_t>(m * k));
        for (float& v : x) v = dist(rng);
        // Reference: the dequantized weights times the unquantized activations, in double.
        std::vector<double> ref(static_cast<std::size_t>(m * n));
        for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < n; ++j) {
                double s = 0;
                for (std::int64_t e = 0; e < k; ++e) s += double(x[i * k + e]) * qc.dequantized[static_cast<std::size_t>(j * k + e)];
                ref[static_cast<std::size_t>(i * n + j)] = s;
            }
        std::vector<float> first;
        for_each_path([&](std::string_view path) {
            CAPTURE(path);
            std::vector<float> y(static_cast<std::size_t>(m * n), -1.0f);
            cpu::quant::linear(m, x.data(), k, qc.w, y.data(), n);
            // Activations are rounded to 8 bits (relative error 1/254 of each block's largest
            // value): the product is within that of the reference, scaled by Σ|x·w|.
            for (std::int64_t i = 0; i < m; ++i)
                for (std::int64_t j = 0; j < n; ++j) {
                    double bound = 0;
                    for (std::int64_t e = 0; e < k; ++e) bound += std::fabs(double(x[i * k + e]) * qc.dequantized[static_cast<std::size_t>(j * k + e)]);
                    INFO("row " << i << " col " << j);
                    REQUIRE(std::fabs(y[static_cast<std::size_t>(i * n + j)] - ref[static_cast<std::size_t>(i * n + j)]) <= 0.02 * bound + 1e-6);
                }
            if (first.empty()) first = y;
            else CHECK(std::memcmp(first.data(), y.data(), y.size() * sizeof(float)) == 0);
            // A row alone gives the bits it gives in the batch.
            for (std::int64_t i : {std::int64_t{0}, std::int64_t{7}, std::int64_t{33}, m - 1}) {
                std::vector<float> one(static_cast<std::size_t>(n));
                cpu::quant::linear(1, x.data() + i * k, k, qc.w, one.data(), n);
                CHECK(std::memcmp(one.data(), y.data() + i * n, one.size() * sizeof(float)) == 0);
            }
            // So do the first 2, 3, 6 rows (register tiles of every height the kernels have) and 16 (one
            // whole AMX tile, alone).
            for (std::int64_t rows : {2, 3, 6, 16}) {
                std::vector<float> few(static_cast<std::size_t>(rows * n));
                cpu::quant::linear(rows, x.data(), k, qc.w, few.data(), n);
                CHECK(std::memcmp(few.data(), y.data(), few.size() * sizeof(float)) == 0);
            }
        });
    }
}

/// Blocks of `type` whose quants are all at their largest (every quant byte 0xff; Q8_0: -128), with
/// the given f16 scales (Q6_K's sub-block scales alternate -128 and 127).
std::vector<std::byte> extreme_blocks(gguf_type type, std::int64_t k, std::int64_t rows) {
    using cpu::quant::detail::k_layout;
    const std::size_t bs = io::gguf_type_size(type), per_row = cpu::quant::row_bytes(type, k);
    std::vector<std::byte> b(per_row * static_cast<std::size_t>(rows), std::byte{0xff});
    const auto put_f16 = [](std::byte* at, float v) {
        const std::uint16_t h = io::f32_to_f16(v);
        std::memcpy(at, &h, 2);
    };
    for (std::size_t at = 0; at < b.size(); at += bs) {
        std::byte* blk = b.data() + at;
        switch (type) {
            case gguf_type::q8_0: put_f16(blk, 0.01f); std::memset(blk + 2, 0x80, 32); break;
            case gguf_type::q4_0: put_f16(blk, 0.01f); break;
            case gguf_type::q4_k:
            case gguf_type::q5_k: put_f16(blk, 0.001f); put_f16(blk + 2, 0.002f); break;
            default:
                put_f16(blk + k_layout::q6k_d, 0.0001f);
                for (int j = 0; j < 16; ++j) blk[k_layout::q6k_sc + j] = std::byte{j % 2 ? std::uint8_t{0x7f} : std::uint8_t{0x80}};
        }
    }
    return b;
}

TEST_CASE("quantized products: quants at their largest against activations at ±127 give the same bits on every instruction set") {
    // The vpmaddubsw kernels keep runs of u8·s8 products in 16-bit lanes (quant_body.inl, i16_run):
    // here every such sum reaches its bound, so a run one quad too long would saturate and differ
    // from the baseline kernels, which widen every product to 32 bits.
    const std::int64_t k = 512, n = 24, m = 7;
    std::vector<float> x(static_cast<std::size_t>(m * k));
    for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t e = 0; e < k; ++e) x[static_cast<std::size_t>(i * k + e)] = i % 3 == 0 ? 1.0f : i % 3 == 1 ? -2.0f : (e / 32 % 2 ? 3.0f : -3.0f);
    for (gguf_type type : {gguf_type::q8_0, gguf_type::q4_0, gguf_type::q4_k, gguf_type::q5_k, gguf_type::q6_k}) {
        CAPTURE(io::gguf_type_name(type));
        const std::vector<std::byte> blocks = extreme_blocks(type, k, n);
        cpu::quant::matrix w(k, {{n, type}});
        w.set_rows(0, blocks.data(), n);
        std::vector<float> dq(static_cast<std::size_t>(k));
        std::vector<float> first;
        for_each_path([&](std::string_view path) {
            CAPTURE(path);
            std::vector<float> y(static_cast<std::size_t>(m * n));
            cpu::quant::linear(m, x.data(), k, w, y.data(), n);
            for (std::int64_t j = 0; j < n; ++j) {
                cpu::quant::dequantize_row(type, blocks.data() + j * cpu::quant::row_bytes(type, k), dq.data(), k);
                for (std::int64_t i = 0; i < m; ++i) {
                    double ref = 0, bound = 0;
                    for (std::int64_t e = 0; e < k; ++e) {
                        ref += double(x[static_cast<std::size_t>(i * k + e)]) * dq[static_cast<std::size_t>(e)];
                        bound += std::fabs(double(x[static_cast<std::size_t>(i * k + e)]) * dq[static_cast<std::size_t>(e)]);
                    }
                    INFO("row " << i << " col " << j);
                    REQUIRE(std::fabs(y[static_cast<std::size_t>(i * n + j)] - ref) <= 1e-5 * bound + 1e-6);
                }
            }
            if (first.empty()) first = y;
            else CHECK(std::memcmp(first.data(), y.data(), y.size() * sizeof(float)) == 0);
        });
    }
}

namespace {

/// Values on which the quantizer's rounding shows: for a block whose largest value is `amax`, x
/// such that the float product x·(127/amax) is exactly j + ½ while the exact product is not, so a
/// product fused into the rounding add (one rounding) and one rounded first (two) give different
/// quants about half the time. A random value where the search finds none nearby.
float tie_value(float amax, std::mt19937& rng) {
    const float inv = 127.0f / amax;
    const float t = static_cast<float>(std::uniform_int_distribution<int>(-126, 125)(rng)) + 0.5f;
    float up = t / inv, down = up;
    for (int i = 0; i < 32; ++i, up = std::nextafter(up, INFINITY), down = std::nextafter(down, -INFINITY))
        for (float x : {up, down}) {
            const double exact = double(x) * double(inv);  // exact: 24 + 24 bits
            if (static_cast<float>(exact) == t && exact != double(t) && std::fabs(x) <= amax) return x;
        }
    return std::uniform_real_distribution<float>(-amax, amax)(rng);
}

}  // namespace

TEST_CASE("the activation quantizer rounds each x·127/amax once, to nearest even, and sums its quants, on every instruction set (a NaN or an infinity: scale NaN, quants 0)") {
    // The contract (quant/layout.hpp): scale amax/127, quant round-half-even(fl(x · fl(127/amax))),
    // the float product rounded on its own. Fused into the rounding add (FMA), a product that
    // rounds to j + ½ gives j or j + 1 by its lost bits instead of the even one: such values are
    // most of each block here, and the reference below counts how many of them an FMA would change.
    const std::int64_t m = 19, k = 512;  // a partial row tile on every path
    std::mt19937 rng(77);
    for (int block : {32, 256}) {
        CAPTURE(block);
        std::vector<float> x(static_cast<std::size_t>(m * k));
        for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t s = 0; s < k / block; ++s) {
                float* b = x.data() + i * k + s * block;
                if (i == 3 && s == 1) continue;  // an all-zero block: scale 0, quants 0
                const float amax = std::uniform_real_distribution<float>(0.25f, 8.0f)(rng);
                for (int e = 0; e < block; ++e) b[e] = tie_value(amax, rng);
                b[(s * 7 + i) % block] = (s + i) % 2 ? amax : -amax;  // the largest magnitude, either sign
            }
        // Blocks holding a NaN or an infinity (scale NaN, quants and sums 0), in the middle of a block.
        x[static_cast<std::size_t>(5 * k + 17)] = std::numeric_limits<float>::quiet_NaN();
        x[static_cast<std::size_t>(6 * k + k - 3)] = std::numeric_limits<float>::infinity();
        x[static_cast<std::size_t>(7 * k + block + 1)] = -std::numeric_limits<float>::infinity();
        // The reference, row by row and block by block.
        std::vector<int> ref_q(x.size());
        std::vector<float> ref_scale(static_cast<std::size_t>(m * (k / block)));
        long fused_differs = 0;
        for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t s = 0; s < k / block; ++s) {
                const float* b = x.data() + i * k + s * block;
                float amax = 0;
                bool finite = true;
                for (int e = 0; e < block; ++e) {
                    amax = std::max(amax, std::fabs(b[e]));
                    finite = finite && std::isfinite(b[e]);
                }
                const float inv = amax > 0 ? 127.0f / amax : 0.0f;
                ref_scale[static_cast<std::size_t>(i * (k / block) + s)] = finite ? amax / 127.0f : std::numeric_limits<float>::quiet_NaN();
                for (int e = 0; e < block && !finite; ++e) ref_q[static_cast<std::size_t>(i * k + s * block + e)] = 0;
                for (int e = 0; e < block && finite; ++e) {
                    const double exact = double(b[e]) * double(inv);
                    const int q = static_cast<int>(std::nearbyint(static_cast<float>(exact)));
                    ref_q[static_cast<std::size_t>(i * k + s * block + e)] = q;
                    fused_differs += static_cast<int>(std::nearbyint(exact)) != q;
                }
            }
        MESSAGE("block " << block << ": " << fused_differs << " of " << x.size() << " quants would differ if the product were fused");
        REQUIRE(fused_differs > 1000);
        for_each_path([&](std::string_view path) {
            CAPTURE(path);
            const cpu::quant_product& kq = cpu::kernels().quant;
            cpu::quant::activations a;
            a.quantize(m, k, x.data(), k, block, kq);
            const cpu::quant::activation_view v = a.view();
            long wrong_q = 0, wrong_sums = 0, wrong_scale = 0, wrong_pairs = 0;
            for (std::int64_t i = 0; i < m; ++i) {
                const std::int64_t tile = i / v.mr, r = i % v.mr;
                for (std::int64_t s = 0; s < v.blocks; ++s) {
                    const std::int64_t ts = tile * v.blocks + s;
                    const float got_scale = v.scale[ts * v.mr + r], want_scale = ref_scale[static_cast<std::size_t>(i * v.blocks + s)];
                    wrong_scale += std::isnan(want_scale) ? !std::isnan(got_scale) : got_scale != want_scale;
                    int s16[16] = {};
                    for (int e = 0; e < block; ++e) {
                        const int q = v.q[ts * block * v.mr + (e / v.group * v.mr + r) * v.group + e % v.group];
                        const int want = ref_q[static_cast<std::size_t>(i * k + s * block + e)];
                        wrong_q += q != want;
                        s16[e / 16] += want;
                    }
                    for (int u = 0; u < block / 16; ++u) wrong_sums += v.sums[(ts * (block / 16) + u) * v.mr + r] != s16[u];
                    const std::int32_t* pw = v.pairs + ts * cpu::quant::pair_words(block) * v.mr + r;
                    for (int p = 0; p < block / 32; ++p) {
                        const std::int32_t w = pw[p * v.mr];
                        wrong_pairs += static_cast<std::int16_t>(w & 0xffff) != s16[2 * p] || static_cast<std::int16_t>(w >> 16) != s16[2 * p + 1];
                    }
                    for (int p = 0; p < block / 64; ++p) {
                        const std::int32_t w = pw[(block / 32 + p) * v.mr];
                        wrong_pairs += static_cast<std::int16_t>(w & 0xffff) != s16[4 * p] + s16[4 * p + 1] ||
                                       static_cast<std::int16_t>(w >> 16) != s16[4 * p + 2] + s16[4 * p + 3];
                    }
                }
            }
            CHECK(wrong_q == 0);
            CHECK(wrong_scale == 0);
            CHECK(wrong_sums == 0);
            CHECK(wrong_pairs == 0);
        });
    }
}

TEST_CASE("quantized products: a NaN or an infinity in a row's activations makes that row's outputs NaN, and leaves the other rows' bits alone") {
    // As an f32 product's outputs would be non-finite: a model that overflows is reported by the
    // sampler (non-finite logits), not decoded from quants that dropped the NaN.
    const std::int64_t k = 512, m = 9;
    std::mt19937 rng(5);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> x(static_cast<std::size_t>(m * k));
    for (float& v : x) v = dist(rng);
    std::vector<float> bad = x;
    bad[static_cast<std::size_t>(3 * k + 100)] = std::numeric_limits<float>::quiet_NaN();
    bad[static_cast<std::size_t>(5 * k + 7)] = std::numeric_limits<float>::infinity();
    for (gguf_type type : {gguf_type::q8_0, gguf_type::q4_k, gguf_type::q6_k}) {
        CAPTURE(io::gguf_type_name(type));
        const quant_case qc = make_matrix(k, {{20, type}}, 30);
        const std::int64_t n = qc.w.rows();
        for_each_path([&](std::string_view path) {
            CAPTURE(path);
            std::vector<float> clean(static_cast<std::size_t>(m * n)), y(static_cast<std::size_t>(m * n));
            cpu::quant::linear(m, x.data(), k, qc.w, clean.data(), n);
            cpu::quant::linear(m, bad.data(), k, qc.w, y.data(), n);
            for (std::int64_t i = 0; i < m; ++i) {
                CAPTURE(i);
                const float* row = y.data() + i * n;
                if (i == 3 || i == 5) CHECK(std::all_of(row, row + n, [](float v) { return std::isnan(v); }));
                else CHECK(std::memcmp(row, clean.data() + i * n, static_cast<std::size_t>(n) * sizeof(float)) == 0);
            }
        });
    }
}

TEST_CASE("a model held in GGUF blocks gives the logits of its blocks decoded to f32, to the activations' 8-bit rounding") {
    io::model_config c;
    c.arch = io::architecture::llada;
    c.vocab_size = 300;
    c.hidden_size = 256;
    c.intermediate_size = 512;
    c.num_layers = 2;
    c.num_heads = 4;
    c.num_kv_heads = 4;
    c.head_dim = 64;
    c.max_context = 64;
    c.rope_theta = 10000.0;
    c.rms_norm_eps = 1e-5;
    c.mask_id = 299;
    c.eos_ids = {1};
    const canvas_layout l{8, 16, 16, false};
    std::vector<token_id> canvas(24);
    for (std::size_t i = 0; i < canvas.size(); ++i) canvas[i] = i < 8 ? static_cast<token_id>(i * 37 % 299) : 299;
    const forward_plan p{0, l.size(), 0, l.size(), 0, 0, l.size()};
    auto logits = [&](cpu::transformer& m) {
        std::vector<float> out(static_cast<std::size_t>(l.size() * c.vocab_size));
        const forward_request<cpu::kv_cache> rq{canvas, l, p, nullptr};
        m.forward(std::span<const forward_request<cpu::kv_cache>>(&rq, 1), bidirectional_mask{}, out);
        return out;
    };
    for (auto f : {cpu::quant::file_type::q8_0, cpu::quant::file_type::q4_0, cpu::quant::file_type::q4_k_m}) {
        CAPTURE(static_cast<int>(f));
        cpu::transformer q = cpu::transformer::random(c, 4, f);
        // The same values (random_quant_source draws random_weights' stream) through the same
        // encoder, decoded to f32: the reference computes with the exact weights of q's blocks.
        cpu::transformer_weights w = cpu::random_weights(c, 4);
        auto decode = [&](cpu::matrix& m, cpu::tensor_role r, index_t layer) {
            const auto t = *cpu::quant::file_type_of(f, c, r, layer);
            std::vector<std::byte> row(cpu::quant::row_bytes(t, m.cols()));
            for (index_t i = 0; i < m.rows(); ++i) {
                cpu::quant::quantize_row(t, m.data() + i * m.cols(), row.data(), m.cols());
                cpu::quant::dequantize_row(t, row.data(), m.data() + i * m.cols(), m.cols());
            }
        };
        using R = cpu::tensor_role;
        decode(w.embedding, R::embedding, 0);
        decode(w.lm_head, R::lm_head, 0);
        for (index_t layer = 0; layer < c.num_layers; ++layer) {
            cpu::layer_weights& L = w.layers[static_cast<std::size_t>(layer)];
            for (auto [m, r] : {std::pair{&L.q_proj, R::q_proj}, {&L.k_proj, R::k_proj}, {&L.v_proj, R::v_proj}, {&L.o_proj, R::o_proj},
                                {&L.gate_proj, R::gate_proj}, {&L.up_proj, R::up_proj}, {&L.down_proj, R::down_proj}})
                decode(*m, r, layer);
        }
        cpu::transformer ref(c, w, {});
        const auto a = logits(q), b = logits(ref);
        // The only difference is the activations' rounding to 8 bits per block (relative 1/254 of a
        // block's largest value) before each product: logits agree to a few percent of their spread.
        float spread = 0, worst = 0;
        for (float v : b) spread = std::max(spread, std::fabs(v));
        for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
        MESSAGE("file type " << static_cast<int>(f) << ": largest logit difference " << worst << " of largest logit " << spread);
        CHECK(worst <= 0.03f * spread);
        CHECK(q.weight_bytes() < ref.weight_bytes() / 3);
    }
}

}  // namespace test_quant
