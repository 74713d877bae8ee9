// GGUF block types: dlm's decoder against the `gguf` package's numpy decoder (fixtures written by
// tools/make_quant_fixtures.py), and the encoders' round trip.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <dlm/cpu/quant/blocks.hpp>

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

TEST_CASE("row_bytes refuses a row that is not a whole number of blocks") {
    CHECK(cpu::quant::row_bytes(gguf_type::q4_k, 512) == 288);
    CHECK_THROWS_AS((void)cpu::quant::row_bytes(gguf_type::q4_k, 500), invalid_parameter);
    CHECK_THROWS_AS((void)cpu::quant::row_bytes(gguf_type::q8_0, 33), invalid_parameter);
}
