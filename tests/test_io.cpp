// Tests of dlm::io's safetensors reader and writer, and of the f16/bf16 conversions.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "dlm/io/safetensors.hpp"
#include "io_test_util.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_io {

using namespace dlm::io;
using dlm_test::expect_error;
using dlm_test::temp_dir;
using dlm_test::write_text;

namespace {

bool same_bits(float a, float b) { return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }

/// The value a float takes once stored as `t` and read back.
float stored(float v, dtype t) {
    switch (t) {
        case dtype::f32: return v;
        case dtype::f16: return f16_to_f32(f32_to_f16(v));
        case dtype::bf16: return bf16_to_f32(f32_to_bf16(v));
    }
    return v;
}

/// A raw safetensors file: the 8-byte length, then `header` as given, then `data_bytes` zero bytes.
std::string raw_file(const std::string& header, std::size_t data_bytes, std::uint64_t claimed_len = UINT64_MAX) {
    const std::uint64_t len = claimed_len == UINT64_MAX ? header.size() : claimed_len;
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((len >> (8 * i)) & 0xff);
    return s + header + std::string(data_bytes, '\0');
}

/// Writes a raw file into `dir` and tries to open it; returns the file path for message checks.
std::string write_raw(const temp_dir& dir, const std::string& content, const char* name = "model.safetensors") {
    const auto p = dir / name;
    write_text(p, content);
    return p.string();
}

template <class E = dlm::tensor_error>
void expect_open_error(const std::string& header, std::size_t data_bytes, std::initializer_list<std::string_view> parts) {
    temp_dir dir;
    const std::string path = write_raw(dir, raw_file(header, data_bytes));
    INFO("header: " << header);
    expect_error<E>([&] { (void)checkpoint::open(dir.path()); }, {path});
    expect_error<E>([&] { (void)checkpoint::open(dir.path()); }, parts);
}

}  // namespace

TEST_CASE("bf16 -> f32 is the top half of the f32 bits") {
    CHECK(bf16_to_f32(0x3f80) == 1.0f);
    CHECK(bf16_to_f32(0xc000) == -2.0f);
    CHECK(bf16_to_f32(0x7f7f) == std::bit_cast<float>(0x7f7f0000u));  // largest finite bf16
    CHECK(bf16_to_f32(0x0001) == std::ldexp(1.0f, -133));              // smallest subnormal
    CHECK(std::isinf(bf16_to_f32(0x7f80)));
    CHECK(bf16_to_f32(0xff80) == -std::numeric_limits<float>::infinity());
    CHECK(std::isnan(bf16_to_f32(0x7fc0)));
    for (std::uint32_t h = 0; h <= 0xffff; ++h) {
        const float f = bf16_to_f32(static_cast<std::uint16_t>(h));
        REQUIRE(std::bit_cast<std::uint32_t>(f) == h << 16);
        if (!std::isnan(f)) REQUIRE(f32_to_bf16(f) == h);  // exact round trip
    }
}

TEST_CASE("f32 -> bf16 rounds to nearest even") {
    CHECK(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);      // tie, down to even
    CHECK(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);  // tie, up to even
    CHECK(f32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)) == 0x3f81);
    CHECK(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
    CHECK(std::isnan(bf16_to_f32(f32_to_bf16(std::bit_cast<float>(0x7f800001u)))));  // payload only in the low bits
    CHECK(f32_to_bf16(std::numeric_limits<float>::max()) == 0x7f80);                 // rounds up to infinity
}

TEST_CASE("f16 -> f32 is exact: normals, subnormals, max, infinities, NaN") {
    CHECK(f16_to_f32(0x3c00) == 1.0f);
    CHECK(f16_to_f32(0xc000) == -2.0f);
    CHECK(f16_to_f32(0x3555) == 0.333251953125f);
    CHECK(f16_to_f32(0x7bff) == 65504.0f);                   // max
    CHECK(f16_to_f32(0x0400) == std::ldexp(1.0f, -14));      // smallest normal
    CHECK(f16_to_f32(0x0001) == std::ldexp(1.0f, -24));      // smallest subnormal
    CHECK(f16_to_f32(0x03ff) == 1023 * std::ldexp(1.0f, -24));  // largest subnormal
    CHECK(f16_to_f32(0x8001) == -std::ldexp(1.0f, -24));
    CHECK(f16_to_f32(0x7c00) == std::numeric_limits<float>::infinity());
    CHECK(f16_to_f32(0xfc00) == -std::numeric_limits<float>::infinity());
    CHECK(std::isnan(f16_to_f32(0x7e00)));
    CHECK(std::isnan(f16_to_f32(0x7c01)));
    CHECK(std::signbit(f16_to_f32(0x8000)));
    CHECK(f16_to_f32(0x8000) == 0.0f);
    // Every pattern against an independent formula, and back.
    for (std::uint32_t h = 0; h <= 0xffff; ++h) {
        const int exponent = static_cast<int>((h >> 10) & 0x1f);
        const int mantissa = static_cast<int>(h & 0x3ff);
        const float sign = (h & 0x8000) ? -1.0f : 1.0f;
        const float f = f16_to_f32(static_cast<std::uint16_t>(h));
        if (exponent == 31) {
            REQUIRE((mantissa == 0 ? std::isinf(f) : std::isnan(f)));
            continue;
        }
        const float expected = exponent == 0 ? sign * std::ldexp(static_cast<float>(mantissa), -24)
                                             : sign * std::ldexp(static_cast<float>(1024 + mantissa), exponent - 25);
        REQUIRE(same_bits(f, expected));
        REQUIRE(f32_to_f16(f) == h);
    }
}

TEST_CASE("f32 -> f16 rounds to nearest even, overflows to infinity, underflows through subnormals") {
    CHECK(f32_to_f16(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);      // tie, down to even
    CHECK(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);  // tie, up to even
    CHECK(f32_to_f16(65519.0f) == 0x7bff);
    CHECK(f32_to_f16(65520.0f) == 0x7c00);  // the tie between 65504 and 65536 goes to infinity
    CHECK(f32_to_f16(-1e9f) == 0xfc00);
    CHECK(f32_to_f16(std::ldexp(1.0f, -25)) == 0x0000);         // tie between 0 and the smallest subnormal
    CHECK(f32_to_f16(1.5f * std::ldexp(1.0f, -25)) == 0x0001);
    CHECK(f32_to_f16(3 * std::ldexp(1.0f, -25)) == 0x0002);     // tie between 1 and 2 subnormal units, to even
    CHECK(f32_to_f16(1023.5f * std::ldexp(1.0f, -24)) == 0x0400);  // rounds up into the normals
    CHECK(f32_to_f16(1e-10f) == 0x0000);
    CHECK(f32_to_f16(-1e-10f) == 0x8000);
    CHECK(std::isnan(f16_to_f32(f32_to_f16(std::numeric_limits<float>::quiet_NaN()))));
    CHECK(std::isnan(f16_to_f32(f32_to_f16(std::bit_cast<float>(0x7f800001u)))));
}

TEST_CASE("write_safetensors then checkpoint::open round-trips f32, f16 and bf16") {
    const std::vector<float> w = {1.0f, -2.5f, 0.1f, 65504.0f, 1e-7f, -0.0f, 3.14159f, 1e30f, -7.0f, 0.5f, 2.0f, 1e-3f};
    for (const dtype t : {dtype::f32, dtype::f16, dtype::bf16}) {
        CAPTURE(dtype_name(t));
        temp_dir dir;
        write_safetensors(dir / "model.safetensors",
                          {{"layer.weight", {{3, 4}, w}},
                           {"layer.bias", {{4}, {1, 2, 3, 4}}},
                           {"scalar", {{}, {42.0f}}},
                           {"empty", {{0, 3}, {}}}},
                          t, {{"format", "pt"}});
        const auto path = (dir / "model.safetensors").string();
        for (const auto& where : {dir.path(), dir / "model.safetensors"}) {
            const checkpoint ckpt = checkpoint::open(where);
            CHECK(ckpt.size() == 4);
            CHECK(ckpt.names() == std::vector<std::string>{"empty", "layer.bias", "layer.weight", "scalar"});
            CHECK(ckpt.contains("layer.weight"));
            CHECK_FALSE(ckpt.contains("layer"));
            const tensor_info& info = ckpt.info("layer.weight");
            CHECK(info.type == t);
            CHECK(info.shape == std::vector<std::int64_t>{3, 4});
            CHECK(info.file == path);
            CHECK(info.bytes.size() == 12 * dtype_size(t));
            CHECK(reinterpret_cast<std::uintptr_t>(info.bytes.data()) % 8 == 0);  // header padded to 8 bytes
            const std::vector<float> got = ckpt.read_f32("layer.weight", {3, 4});
            REQUIRE(got.size() == w.size());
            for (std::size_t i = 0; i < w.size(); ++i) CHECK(same_bits(got[i], stored(w[i], t)));
            CHECK(ckpt.read_f32("layer.bias", {4}) == std::vector<float>{1, 2, 3, 4});
            CHECK(ckpt.read_f32("scalar", {}) == std::vector<float>{42.0f});
            CHECK(ckpt.read_f32("empty", {0, 3}).empty());
            std::vector<float> into(4);
            ckpt.read_f32_into("layer.bias", {4}, into);
            CHECK(into == std::vector<float>{1, 2, 3, 4});
            ckpt.check_all_read();
        }
    }
}

TEST_CASE("large bf16 and f16 tensors convert exactly (the parallel path)") {
    temp_dir dir;
    std::vector<float> v(3 << 19);
    std::mt19937 gen(7);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (float& x : v) x = normal(gen);
    for (const dtype t : {dtype::f16, dtype::bf16}) {
        write_safetensors(dir / "model.safetensors", {{"w", {{3, 1 << 19}, v}}}, t);
        const auto got = checkpoint::open(dir.path()).read_f32("w", {3, 1 << 19});
        std::size_t bad = 0;
        for (std::size_t i = 0; i < v.size(); ++i) bad += !same_bits(got[i], stored(v[i], t));
        CHECK(bad == 0);
    }
}

TEST_CASE("read_f32 checks the shape, and lookups name the missing tensor") {
    temp_dir dir;
    write_safetensors(dir / "model.safetensors", {{"w", {{4, 3}, std::vector<float>(12, 1.0f)}}}, dtype::bf16);
    const checkpoint ckpt = checkpoint::open(dir.path());
    const std::string path = (dir / "model.safetensors").string();
    expect_error<dlm::tensor_error>([&] { (void)ckpt.read_f32("w", {3, 4}); },
                                    {path, "'w'", "expected shape [3, 4]", "found [4, 3]"});
    expect_error<dlm::tensor_error>([&] { (void)ckpt.read_f32("w", {12}); }, {"[12]", "[4, 3]"});
    expect_error<dlm::tensor_error>([&] { (void)ckpt.info("v"); }, {dir.path().string(), "'v'", "not in the checkpoint"});
    expect_error<dlm::tensor_error>([&] { (void)ckpt.read_f32("v", {1}); }, {"'v'"});
    std::vector<float> small(5);
    expect_error<dlm::tensor_error>([&] { ckpt.read_f32_into("w", {4, 3}, small); }, {"'w'", "5 floats"});
}

TEST_CASE("a checkpoint hands out the stored bytes of a tensor's rows, and refuses rows outside it") {
    temp_dir dir;
    std::vector<float> w(12);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
    write_safetensors(dir / "model.safetensors", {{"w", {{4, 3}, w}}}, dtype::bf16);
    const checkpoint ckpt = checkpoint::open(dir.path());
    const std::int64_t shape[] = {4, 3};
    const std::span<const std::byte> rows = ckpt.row_bytes("w", shape, 1, 2);  // rows 1 and 2: elements 3..8
    REQUIRE(rows.size() == 6 * 2);
    for (std::size_t i = 0; i < 6; ++i) {
        std::uint16_t h = 0;
        std::memcpy(&h, rows.data() + 2 * i, 2);
        CHECK(bf16_to_f32(h) == static_cast<float>(3 + i));
    }
    std::vector<float> two(6);
    ckpt.read_rows_f32("w", shape, 1, 2, two);
    CHECK(two == std::vector<float>(w.begin() + 3, w.begin() + 9));
    expect_error<dlm::tensor_error>([&] { (void)ckpt.row_bytes("w", shape, 3, 2); }, {"'w'", "rows [3, 5) outside the tensor's 4 rows of 3"});
    expect_error<dlm::tensor_error>([&] { ckpt.read_rows_f32("w", shape, 0, 3, two); }, {"'w'", "rows [0, 3) do not fit into 6 floats"});
    const std::int64_t wrong[] = {3, 4};
    expect_error<dlm::tensor_error>([&] { (void)ckpt.row_bytes("w", wrong, 0, 1); }, {"expected shape [3, 4]", "found [4, 3]"});
}

TEST_CASE("check_all_read names a tensor the model never read") {
    temp_dir dir;
    write_safetensors(dir / "model.safetensors",
                      {{"a", {{1}, {1}}}, {"b", {{1}, {2}}}, {"c", {{1}, {3}}}}, dtype::f32);
    const checkpoint ckpt = checkpoint::open(dir.path());
    (void)ckpt.read_f32("a", {1});
    expect_error<dlm::tensor_error>([&] { ckpt.check_all_read(); },
                                    {(dir / "model.safetensors").string(), "'b'", "never read", "2 unread", "'c'"});
    (void)ckpt.read_f32("b", {1});
    ckpt.mark_read("c");
    ckpt.check_all_read();
    try {
        (void)ckpt.read_f32("a", {2});
        FAIL("a shape mismatch must throw");
    } catch (const dlm::tensor_error& e) {
        CHECK(e.tensor() == "a");
        CHECK(e.path() == (dir / "model.safetensors").string());
    }
}

TEST_CASE("open: missing paths and folders without weights") {
    temp_dir dir;
    expect_error<dlm::file_error>([&] { (void)checkpoint::open(dir / "nope"); }, {"nope", "no such file"});
    expect_error<dlm::file_error>([&] { (void)checkpoint::open(dir.path()); },
                                  {dir.path().string(), "model.safetensors.index.json"});
}

TEST_CASE("open: a FIFO in place of the weights is refused as not a regular file, without waiting for a writer") {
    temp_dir dir;
    const auto fifo = dir / "model.safetensors";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    expect_error<dlm::file_error>([&] { (void)mapped_file(fifo); }, {fifo.string(), "not a regular file"});
}

TEST_CASE("JSON nested past max_json_depth is refused as it is parsed, and the quoting of a deep value in an error stays bounded") {
    const auto nested = [](int depth) { return std::string(static_cast<std::size_t>(depth), '[') + std::string(static_cast<std::size_t>(depth), ']'); };
    CHECK_NOTHROW((void)detail::parse_json_strict(nested(detail::max_json_depth), "f.json", "config"));
    expect_error<dlm::file_error>([&] { (void)detail::parse_json_strict(nested(detail::max_json_depth + 1), "f.json", "config"); },
                                  {"f.json", "config nests arrays and objects more than 128 deep"});
    // 200,000 deep (400 KB): quoting it in an error message overflowed the stack (a segfault).
    expect_error<dlm::file_error>([&] { (void)detail::parse_json_strict("{\"a\": " + nested(200000) + "}", "f.json", "config"); }, {"128 deep"});
    // A safetensors header whose shape nests past the bound: refused naming the file.
    expect_open_error<dlm::file_error>(R"({"w": {"dtype": "F32", "shape": )" + nested(200000) + R"(, "data_offsets": [0, 4]}})", 4,
                                       {"header nests arrays and objects more than 128 deep"});
    // A long but shallow value is quoted cut, not whole.
    std::string wide = "[";
    for (int i = 0; i < 100000; ++i) wide += "1,";
    wide += "1]";
    expect_open_error<dlm::file_error>(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": )" + wide + "}}", 4, {"'data_offsets' [1,1,1,", "... is not a pair"});
}

TEST_CASE("writer refuses bad input") {
    temp_dir dir;
    const auto p = dir / "x.safetensors";
    expect_error<dlm::invalid_parameter>([&] { write_safetensors(p, {{"a", {{2}, {1}}}}, dtype::f32); },
                                         {"'a'", "needs 2 values, got 1"});
    expect_error<dlm::invalid_parameter>([&] { write_safetensors(p, {{"a", {{1}, {1}}}, {"a", {{1}, {1}}}}, dtype::f32); },
                                         {"'a'", "twice"});
    expect_error<dlm::invalid_parameter>([&] { write_safetensors(p, {{"__metadata__", {{1}, {1}}}}, dtype::f32); },
                                         {"reserved"});
    expect_error<dlm::invalid_parameter>([&] { write_safetensors(p, {{"a", {{-1}, {}}}}, dtype::f32); }, {"[-1]"});
    expect_error<dlm::file_error>([&] { write_safetensors(dir / "no" / "such" / "dir.safetensors", {}, dtype::f32); },
                                  {"cannot open for writing"});
}

// ---- malformed files: every case names the file, and the tensor where there is one ----

TEST_CASE("header errors: length field") {
    temp_dir dir;
    const std::string p1 = write_raw(dir, std::string(5, '\0'));
    expect_error<dlm::file_error>([&] { (void)checkpoint::open(dir.path()); }, {p1, "5 bytes", "8-byte header length"});
    const std::string p2 = write_raw(dir, raw_file("{}", 0, 200'000'000));
    expect_error<dlm::file_error>([&] { (void)checkpoint::open(dir.path()); }, {p2, "200000000", "exceeds"});
    const std::string p3 = write_raw(dir, raw_file("{}", 0, 1000));
    expect_error<dlm::file_error>([&] { (void)checkpoint::open(dir.path()); }, {p3, "1000", "runs past the end of the 10-byte file"});
}

TEST_CASE("header errors: not JSON, not an object, duplicate names, bad metadata") {
    expect_open_error<dlm::file_error>("{\"a\": ", 0, {"not valid JSON"});
    expect_open_error<dlm::file_error>("[1, 2]", 0, {"header is a JSON array, not an object"});
    expect_open_error<dlm::file_error>(
        R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
        8, {"'w'", "twice"});
    expect_open_error<dlm::file_error>(R"({"w": {"dtype": "F32", "dtype": "F16", "shape": [1], "data_offsets": [0, 4]}})", 4,
                                       {"'dtype'", "twice"});
    expect_open_error<dlm::file_error>(R"({"__metadata__": [1]})", 0, {"'__metadata__'", "not an object"});
    expect_open_error<dlm::file_error>(R"({"__metadata__": {"k": 1}})", 0, {"'__metadata__'", "'k'", "not a string"});
}

TEST_CASE("header errors: entries without dtype, shape or data_offsets") {
    expect_open_error(R"({"w": 3})", 0, {"'w'", "not an object"});
    expect_open_error(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", 4, {"'w'", "no 'dtype'"});
    expect_open_error(R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})", 4, {"'w'", "no 'shape'"});
    expect_open_error(R"({"w": {"dtype": "F32", "shape": [1]}})", 4, {"'w'", "no 'data_offsets'"});
    expect_open_error(R"({"w": {"dtype": 3, "shape": [1], "data_offsets": [0, 4]}})", 4, {"'w'", "'dtype'", "not a string"});
}

TEST_CASE("header errors: unsupported dtypes are refused by name") {
    for (const char* name : {"I64", "F64", "U8", "BOOL", "F8_E4M3", "f32"}) {
        const std::string header = std::string(R"({"w": {"dtype": ")") + name + R"(", "shape": [1], "data_offsets": [0, 8]}})";
        expect_open_error(header, 8, {"'w'", std::string("dtype '") + name + "'", "not supported"});
    }
}

TEST_CASE("header errors: shapes") {
    expect_open_error(R"({"w": {"dtype": "F32", "shape": [2, -1], "data_offsets": [0, 0]}})", 0, {"'w'", "[2, -1]", "negative"});
    expect_open_error(R"({"w": {"dtype": "F32", "shape": [1099511627776, 1099511627776], "data_offsets": [0, 0]}})", 0,
                      {"'w'", "overflows"});
    expect_open_error(R"({"w": {"dtype": "BF16", "shape": [4611686018427387904], "data_offsets": [0, 0]}})", 0,
                      {"'w'", "overflows"});  // fits in int64, but not as bytes
    expect_open_error(R"({"w": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}})", 8, {"'w'", "'shape'"});
    expect_open_error(R"({"w": {"dtype": "F32", "shape": 2, "data_offsets": [0, 8]}})", 8, {"'w'", "not an array"});
    expect_open_error(R"({"w": {"dtype": "F32", "shape": [18446744073709551615], "data_offsets": [0, 8]}})", 8, {"'w'", "'shape'"});
}

TEST_CASE("header errors: data_offsets") {
    expect_open_error(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4, {"'w'", "[0, 8]", "run past the data area", "4 bytes"});
    expect_open_error(R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})", 8, {"'w'", "begin is after end"});
    expect_open_error(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 16, {"'w'", "hold 8 bytes", "[3]", "needs 12"});
    expect_open_error(R"({"w": {"dtype": "F16", "shape": [3], "data_offsets": [0, 12]}})", 16, {"'w'", "F16", "needs 6"});
    expect_open_error(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 4, {"'w'", "not a pair"});
    expect_open_error(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", 4, {"'w'", "non-negative"});
    expect_open_error(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": ["0", "4"]}})", 4, {"'w'", "non-negative integers"});
}

TEST_CASE("header errors: overlapping tensors, gaps and metadata are fine") {
    expect_open_error(
        R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
        12, {"'b'", "overlap tensor 'a'", "[4, 12)", "[0, 8)"});
    expect_open_error(
        R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
        8, {"overlap"});

    // A gap between tensors, trailing bytes, a zero-size tensor inside another's extent, and metadata.
    temp_dir dir;
    const std::string header =
        R"({"__metadata__": {"format": "pt"}, "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
        R"( "z": {"dtype": "F32", "shape": [0], "data_offsets": [2, 2]},)"
        R"( "b": {"dtype": "BF16", "shape": [2], "data_offsets": [12, 16]}})";
    std::string file = raw_file(header, 20);
    const std::size_t data = 8 + header.size();
    const float one = 1.0f;
    std::memcpy(file.data() + data, &one, 4);
    const unsigned char b[4] = {0x00, 0x40, 0x80, 0xbf};  // bf16 2.0, -1.0 (little-endian)
    std::memcpy(file.data() + data + 12, b, 4);
    write_raw(dir, file);
    const checkpoint ckpt = checkpoint::open(dir.path());
    CHECK(ckpt.size() == 3);
    CHECK(ckpt.read_f32("a", {1}) == std::vector<float>{1.0f});
    CHECK(ckpt.read_f32("b", {2}) == std::vector<float>{2.0f, -1.0f});
}

TEST_CASE("parse_safetensors never fails with anything but dlm::error on corrupted bytes") {
    temp_dir dir;
    write_safetensors(dir / "model.safetensors", {{"a.weight", {{2, 3}, {1, 2, 3, 4, 5, 6}}}, {"b", {{2}, {7, 8}}}},
                      dtype::bf16);
    const std::string good = dlm::io::detail::read_text_file(dir / "model.safetensors");
    std::mt19937 gen(1234);
    int parsed = 0, refused = 0;
    for (int round = 0; round < 3000; ++round) {
        std::string bad = good;
        const int edits = 1 + static_cast<int>(gen() % 4);
        for (int k = 0; k < edits; ++k) {
            const std::size_t at = gen() % (round % 3 == 0 ? 8 : bad.size());  // a third hit the length field
            bad[at] = static_cast<char>(gen() % 3 == 0 ? "{}[]\",:-0123456789e."[gen() % 21] : gen() & 0xff);
        }
        if (round % 7 == 0) bad.resize(gen() % bad.size());
        try {
            const auto tensors = parse_safetensors(std::as_bytes(std::span(bad.data(), bad.size())), "fuzz.safetensors");
            ++parsed;
            for (const auto& t : tensors) {  // whatever parsed must lie inside the buffer
                CHECK(t.bytes.data() >= reinterpret_cast<const std::byte*>(bad.data()));
                CHECK(t.bytes.data() + t.bytes.size() <= reinterpret_cast<const std::byte*>(bad.data() + bad.size()));
            }
        } catch (const dlm::error& e) {
            ++refused;
            CHECK(std::string(e.what()).find("fuzz.safetensors") != std::string::npos);
        }
    }
    CHECK(parsed + refused == 3000);
    CHECK(refused > 0);
}

// ---- sharded checkpoints ----

namespace {

/// Two shards: shard 1 holds a and b, shard 2 holds c. `index` is the weight_map JSON to write.
void write_two_shards(const temp_dir& dir, const std::string& weight_map) {
    write_safetensors(dir / "model-00001-of-00002.safetensors", {{"a", {{2}, {1, 2}}}, {"b", {{1}, {3}}}}, dtype::bf16);
    write_safetensors(dir / "model-00002-of-00002.safetensors", {{"c", {{2, 2}, {4, 5, 6, 7}}}}, dtype::f16);
    write_text(dir / "model.safetensors.index.json", R"({"metadata": {"total_size": 14}, "weight_map": )" + weight_map + "}");
}

const std::string good_map =
    R"({"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"})";

}  // namespace

TEST_CASE("sharded checkpoint: two shards named by the index") {
    temp_dir dir;
    write_two_shards(dir, good_map);
    for (const auto& where : {dir.path(), dir / "model.safetensors.index.json"}) {
        const checkpoint ckpt = checkpoint::open(where);
        CHECK(ckpt.names() == std::vector<std::string>{"a", "b", "c"});
        CHECK(ckpt.info("a").file == (dir / "model-00001-of-00002.safetensors").string());
        CHECK(ckpt.info("c").file == (dir / "model-00002-of-00002.safetensors").string());
        CHECK(ckpt.info("c").type == dtype::f16);
        CHECK(ckpt.read_f32("a", {2}) == std::vector<float>{1, 2});
        CHECK(ckpt.read_f32("c", {2, 2}) == std::vector<float>{4, 5, 6, 7});
        expect_error<dlm::tensor_error>([&] { ckpt.check_all_read(); }, {"model-00001-of-00002.safetensors", "'b'"});
        (void)ckpt.read_f32("b", {1});
        ckpt.check_all_read();
    }
}

TEST_CASE("sharded checkpoint errors") {
    SUBCASE("the index names a shard that does not exist") {
        temp_dir dir;
        write_two_shards(dir, R"({"a": "model-00001-of-00002.safetensors", "c": "model-00003-of-00002.safetensors"})");
        expect_error<dlm::tensor_error>([&] { (void)checkpoint::open(dir.path()); },
                                        {"model.safetensors.index.json", "'c'", "model-00003-of-00002.safetensors", "does not exist"});
    }
    SUBCASE("a tensor is not in the shard the index names") {
        temp_dir dir;
        write_two_shards(dir, R"({"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors", "c": "model-00001-of-00002.safetensors"})");
        expect_error<dlm::tensor_error>([&] { (void)checkpoint::open(dir.path()); },
                                        {"model-00001-of-00002.safetensors", "'c'", "does not hold it"});
    }
    SUBCASE("a tensor stored in two shards") {
        temp_dir dir;
        write_two_shards(dir, good_map);
        write_safetensors(dir / "model-00002-of-00002.safetensors", {{"c", {{2, 2}, {4, 5, 6, 7}}}, {"a", {{2}, {1, 2}}}}, dtype::f16);
        expect_error<dlm::tensor_error>([&] { (void)checkpoint::open(dir.path()); },
                                        {"'a'", "also stored in shard", "model-00001-of-00002.safetensors"});
    }
    SUBCASE("a shard holds a tensor the index does not list") {
        temp_dir dir;
        write_two_shards(dir, R"({"a": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"})");
        expect_error<dlm::tensor_error>([&] { (void)checkpoint::open(dir.path()); },
                                        {"model-00001-of-00002.safetensors", "'b'", "does not place it here"});
    }
    SUBCASE("shard names that leave the folder") {
        temp_dir dir;
        write_two_shards(dir, R"({"a": "../model-00001-of-00002.safetensors"})");
        expect_error<dlm::tensor_error>([&] { (void)checkpoint::open(dir.path()); }, {"'a'", "not a file name inside the folder"});
        write_two_shards(dir, R"({"a": "/etc/passwd"})");
        expect_error<dlm::tensor_error>([&] { (void)checkpoint::open(dir.path()); }, {"'a'", "/etc/passwd"});
    }
    SUBCASE("malformed index") {
        temp_dir dir;
        write_two_shards(dir, "[]");
        expect_error<dlm::file_error>([&] { (void)checkpoint::open(dir.path()); }, {"index.json", "'weight_map'", "not an object"});
        write_two_shards(dir, R"({"a": "model-00001-of-00002.safetensors", "a": "model-00002-of-00002.safetensors"})");
        expect_error<dlm::file_error>([&] { (void)checkpoint::open(dir.path()); }, {"index.json", "'a' twice"});
        write_two_shards(dir, "{}");
        expect_error<dlm::file_error>([&] { (void)checkpoint::open(dir.path()); }, {"'weight_map' is empty"});
        write_two_shards(dir, R"({"a": 3})");
        expect_error<dlm::tensor_error>([&] { (void)checkpoint::open(dir.path()); }, {"'a'", "not a file name"});
        write_text(dir / "model.safetensors.index.json", "{\"weight_map\": ");
        expect_error<dlm::file_error>([&] { (void)checkpoint::open(dir.path()); }, {"index.json", "not valid JSON"});
        write_text(dir / "model.safetensors.index.json", "{\"metadata\": {}}");
        expect_error<dlm::file_error>([&] { (void)checkpoint::open(dir.path()); }, {"index.json", "no 'weight_map'"});
    }
    SUBCASE("a corrupt shard is named") {
        temp_dir dir;
        write_two_shards(dir, good_map);
        write_text(dir / "model-00002-of-00002.safetensors", "abc");
        expect_error<dlm::file_error>([&] { (void)checkpoint::open(dir.path()); }, {"model-00002-of-00002.safetensors", "3 bytes"});
    }
}

}  // namespace test_io
