// The CPU kernels of every instruction set (dlm/cpu/kernels/*.hpp) and their run-time dispatch
// (dlm/cpu/dispatch.hpp): products against a double-precision reference for each weight type, the
// bf16 products' identical bits on every path, a whole forward's bits on every path with FMA, a
// prefix mask's keys taken as a range, DLM_ISA, the bf16 form's choice, full-size random models
// built without an f32 copy, and the memory check that refuses a model that cannot fit.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <dlm/cpu/attention.hpp>
#include <dlm/cpu/transformer.hpp>
#include <dlm/mask/block_diffusion.hpp>
#include <dlm/io/safetensors_writer.hpp>

#include "support/amx_model.hpp"
#include "io_test_util.hpp"
#include "support/kernel_testing.hpp"

#include <unistd.h>

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_kernels {

using namespace dlm;
using namespace dlm::cpu;
using dlm_test::isa_scope;
using dlm_test::random_values;
using dlm_test::same_bits;

namespace {

std::vector<isa> runnable() { return runnable_isas(); }

/// Y = X Wᵀ in double from the values the kernels see: W as stored in `w`, X as `type` takes it.
std::vector<double> reference(index_t m, index_t k, const std::vector<float>& x, const packed_matrix& w) {
    const index_t n = w.rows();
    std::vector<float> row(static_cast<std::size_t>(k));
    std::vector<double> y(static_cast<std::size_t>(m) * static_cast<std::size_t>(n));
    for (index_t j = 0; j < n; ++j) {
        w.row(j, row.data());
        for (index_t i = 0; i < m; ++i) {
            double s = 0;
            for (index_t t = 0; t < k; ++t) {
                float a = x[static_cast<std::size_t>(i * k + t)];
                if (w.type() == io::dtype::bf16) a = io::bf16_to_f32(to_bf16_daz(a));
                s += static_cast<double>(a) * row[static_cast<std::size_t>(t)];
            }
            y[static_cast<std::size_t>(i * n + j)] = s;
        }
    }
    return y;
}

std::vector<float> product(index_t m, index_t k, const std::vector<float>& x, const packed_matrix& w) {
    std::vector<float> y(static_cast<std::size_t>(m) * static_cast<std::size_t>(w.rows()));
    linear(m, x.data(), k, w, y.data(), w.rows());
    return y;
}

/// A small Dream-shaped model: 2 layers, 4 heads over 2 KV heads, a vocabulary of 120 (mask 119).
io::model_config small_dream(index_t hidden, index_t intermediate, index_t head_dim) {
    io::model_config c;
    c.arch = io::architecture::dream;
    c.vocab_size = 120;
    c.hidden_size = hidden;
    c.intermediate_size = intermediate;
    c.num_layers = 2;
    c.num_heads = 4;
    c.num_kv_heads = 2;
    c.head_dim = head_dim;
    c.max_context = 256;
    c.mask_id = 119;
    c.eos_ids = {1};
    c.logits_shift = true;
    return c;
}

/// One forward's logits at every position of a canvas of `prompt` tokens (2, 3, 4, ...) and `gen`
/// masks in blocks of `block` (0: one block), under `mask`.
template <class Mask>
std::vector<float> canvas_logits(transformer& m, const Mask& mask, index_t prompt, index_t gen, index_t block = 0) {
    const canvas_layout l{prompt, gen, block > 0 ? block : gen, true};
    std::vector<token_id> canvas(static_cast<std::size_t>(l.size()), m.config().mask_id);
    for (index_t i = 0; i < prompt; ++i) canvas[static_cast<std::size_t>(i)] = 2 + i;
    const forward_plan p{0, l.size(), 0, l.size(), 0, 0, l.size()};
    std::vector<float> out(static_cast<std::size_t>(l.size()) * static_cast<std::size_t>(m.vocab_size()));
    const forward_request<transformer::kv_cache> rq{canvas, l, p, nullptr};
    m.forward(std::span<const forward_request<transformer::kv_cache>>(&rq, 1), mask, out);
    return out;
}

/// Mask `M` without its allowed_is_prefix trait: the attention asks its `allowed` key by key.
template <class M>
struct asked_key_by_key : M {
    static constexpr bool allowed_is_prefix = false;
};

}  // namespace

TEST_CASE("attention: keys taken as a prefix (allowed_is_prefix) give the bits of asking allowed key by key, on every path") {
    // A prompt of 7 and 16 slots in blocks of 4: rows whose keys end inside a panel, tasks whose
    // rows end their keys at different places (causal), and whole-canvas rows.
    const io::model_config c = small_dream(64, 96, 16);
    transformer m = transformer::random(c, 5, io::dtype::f32, 0.5f);
    const auto same = [&](const auto& mask) {
        using M = std::remove_cvref_t<decltype(mask)>;
        static_assert(mask_allowed_is_prefix<M>() && !mask_allowed_is_prefix<asked_key_by_key<M>>());
        CHECK(same_bits(canvas_logits(m, mask, 7, 16, 4), canvas_logits(m, asked_key_by_key<M>{mask}, 7, 16, 4)));
    };
    for (isa i : runnable()) {
        CAPTURE(isa_name(i));
        const isa_scope on(i);
        same(causal_mask{});
        same(bidirectional_mask{});
        same(block_causal_mask{4});
        same(block_diffusion_mask{4});
    }
}

TEST_CASE("tasks: rows are cut into blocks of at most the bound, as even as whole row tiles allow") {
    CHECK(dlm::cpu::even_row_block(544, 256, 16) == 192);  // 192, 192, 160: not 256, 256, 32
    CHECK(dlm::cpu::even_row_block(300, 256, 16) == 160);  // 160, 140
    CHECK(dlm::cpu::even_row_block(256, 256, 16) == 256);  // one block
    CHECK(dlm::cpu::even_row_block(129, 256, 16) == 144);  // one block, whole tiles
    CHECK(dlm::cpu::even_row_block(513, 256, 16) == 176);  // three blocks of at most 176
    for (dlm::index_t m = 1; m <= 2000; ++m) {
        const dlm::index_t b = dlm::cpu::even_row_block(m, 256, 16);
        CHECK(b % 16 == 0);
        CHECK(b <= 256);
        CHECK((m + b - 1) / b == (m + 255) / 256);  // no more blocks than the bound needs
    }
}

TEST_CASE("kernels: every instruction set computes f32, f16 and bf16 products to f32 accuracy") {
    // Shapes that leave partial panels, partial register tiles and an odd k (a bf16 pair padded).
    const index_t m = 13, n = 77, k = 131;
    const auto x = random_values(static_cast<std::size_t>(m * k), 1), wv = random_values(static_cast<std::size_t>(n * k), 2);
    for (io::dtype type : {io::dtype::f32, io::dtype::f16, io::dtype::bf16}) {
        packed_matrix w(n, k, type);
        w.set_rows(0, wv.data(), n);
        const auto ref = reference(m, k, x, w);
        for (isa i : runnable()) {
            CAPTURE(isa_name(i));
            CAPTURE(io::dtype_name(type));
            const isa_scope on(i);
            const auto y = product(m, k, x, w);
            double worst = 0;
            for (std::size_t e = 0; e < y.size(); ++e) worst = std::max(worst, std::abs(y[e] - ref[e]));
            CHECK(worst < 1e-4);  // k = 131 terms of magnitude < 1, summed in f32
        }
    }
}

TEST_CASE("kernels: packed weights keep their type's values, and rows read back") {
    const index_t n = 45, k = 37;
    auto wv = random_values(static_cast<std::size_t>(n * k), 3);
    wv[5] = 1e-40f;  // an f32 subnormal: bf16 flushes it to zero (as vdpbf16ps reads it), f16 to zero
    for (io::dtype type : {io::dtype::f32, io::dtype::f16, io::dtype::bf16}) {
        CAPTURE(io::dtype_name(type));
        packed_matrix w(n, k, type);
        w.set_rows(0, wv.data(), n);
        CHECK(w.bytes() == packed_matrix::bytes_for(n, k, type));
        std::vector<float> row(static_cast<std::size_t>(k));
        for (index_t j = 0; j < n; ++j) {
            w.row(j, row.data());
            for (index_t t = 0; t < k; ++t) {
                const float v = wv[static_cast<std::size_t>(j * k + t)];
                const float want = type == io::dtype::f32   ? v
                                   : type == io::dtype::f16 ? io::f16_to_f32(io::f32_to_f16(v))
                                                            : io::bf16_to_f32(to_bf16_daz(v));
                REQUIRE(row[static_cast<std::size_t>(t)] == want);
            }
        }
    }
}

/// The bytes a packed (unquantized) matrix holds.
std::vector<unsigned char> packed_bytes(const packed_matrix& w) {
    const auto* p = w.type() == io::dtype::f32 ? reinterpret_cast<const unsigned char*>(w.view().data)
                                               : reinterpret_cast<const unsigned char*>(w.view16().data);
    return {p, p + w.bytes()};
}

TEST_CASE("kernels: weights packed from their stored bytes hold the bits set_rows gives their values, for every pair of types") {
    // Every 16-bit pattern (subnormals, infinities, NaNs with payloads) for f16 and bf16; f32 bits
    // at random with the special patterns mixed in. Shapes: whole panels and a partial one (70 rows),
    // an odd k (a partial bf16 pair), k under four words; slices that start and end inside panels.
    for (const auto& shape : {std::pair<index_t, index_t>{70, 1024}, {45, 37}, {96, 2}, {33, 6}, {64, 13}}) {
        const index_t n = shape.first, k = shape.second;  // named, not bound: CAPTURE's lambda takes them (clang 14)
        const std::size_t count = static_cast<std::size_t>(n) * static_cast<std::size_t>(k);
        std::mt19937 g(7);
        for (io::dtype stored : {io::dtype::f32, io::dtype::f16, io::dtype::bf16}) {
            const std::size_t es = io::dtype_size(stored);
            std::vector<std::byte> bytes(1 + count * es);  // one byte in: the elements sit unaligned
            std::vector<float> values(count);
            for (std::size_t i = 0; i < count; ++i) {
                const std::uint32_t bits = es == 2 ? static_cast<std::uint32_t>(i * 40503u % 65536u) : (i % 7 == 0 ? 0x7f800001u + (i % 3) * 0x80000000u : g());
                std::memcpy(bytes.data() + 1 + i * es, &bits, es);  // little-endian
                values[i] = stored == io::dtype::f32 ? std::bit_cast<float>(bits)
                            : stored == io::dtype::f16 ? io::f16_to_f32(static_cast<std::uint16_t>(bits))
                                                       : io::bf16_to_f32(static_cast<std::uint16_t>(bits));
            }
            for (io::dtype held : {io::dtype::f32, io::dtype::f16, io::dtype::bf16}) {
                CAPTURE(n);
                CAPTURE(k);
                CAPTURE(io::dtype_name(stored));
                CAPTURE(io::dtype_name(held));
                packed_matrix from_values(n, k, held), from_bytes(n, k, held);
                from_values.set_rows(0, values.data(), n);
                for (auto [r0, r1] : {std::pair<index_t, index_t>{0, 5}, {5, n - 3}, {n - 3, n}})
                    from_bytes.set_stored(r0, bytes.data() + 1 + static_cast<std::size_t>(r0) * static_cast<std::size_t>(k) * es, stored, r1 - r0);
                CHECK(packed_bytes(from_bytes) == packed_bytes(from_values));
            }
        }
    }
}

TEST_CASE("kernels: bf16 products give the same bits on every vector instruction set, vdpbf16ps included (amx is its own class)") {
    const index_t m = 21, n = 70, k = 300;
    const auto x = random_values(static_cast<std::size_t>(m * k), 4), wv = random_values(static_cast<std::size_t>(n * k), 5);
    packed_matrix w(n, k, io::dtype::bf16);
    w.set_rows(0, wv.data(), n);
    std::vector<float> first;
    for (isa i : runnable()) {
        if (i == isa::amx) continue;  // tests/test_amx.cpp
        const isa_scope on(i);
        for (bool dot : {false, true}) {
            if (dot && kernels().bf16_alt.run == nullptr) continue;
            CAPTURE(isa_name(i));
            CAPTURE(dot);
            set_bf16_dot(dot);
            CHECK(bf16_products().dot == dot);
            const auto y = product(m, k, x, w);
            if (first.empty()) first = y;
            CHECK(same_bits(y, first));
        }
    }
}

TEST_CASE("kernels: f32 and f16 products give the same bits on every path with FMA, amx's included (the baseline is its own class)") {
    // docs/determinism.md's class {avx2, avx512, avx512-vnni, avx512-bf16, amx}: one fused
    // multiply-add per term, over k in order (amx runs avx512-bf16's f32 and f16 kernels: on the
    // tile unit, or on the model of its tiles where the CPU has none). The baseline rounds each
    // product first: its own class, and different bits. Shapes as the bf16 case's.
    const index_t m = 21, n = 70, k = 300;
    const auto x = random_values(static_cast<std::size_t>(m * k), 8), wv = random_values(static_cast<std::size_t>(n * k), 9);
    for (io::dtype type : {io::dtype::f32, io::dtype::f16}) {
        packed_matrix w(n, k, type);
        w.set_rows(0, wv.data(), n);
        std::vector<float> first, baseline;
        int paths = 0;
        dlm_test::for_each_path([&](std::string_view path) {
            CAPTURE(path);
            CAPTURE(io::dtype_name(type));
            const auto y = product(m, k, x, w);
            if (path == "baseline") {
                baseline = y;
                return;
            }
            if (first.empty()) first = y;
            CHECK(same_bits(y, first));
            ++paths;
        });
        if (paths < 2) MESSAGE("fewer than two FMA paths on this CPU: nothing to compare");
        if (!baseline.empty() && !first.empty()) CHECK_FALSE(same_bits(baseline, first));  // the FMA paths do fuse
    }
}

TEST_CASE("kernels: every path packs A as pack.hpp's scalar pack_a does, bf16 rounding, NaN, subnormals and ragged edges included") {
    // Shapes around the 8 × 8 transposes (rows per tile 4, 6, 8; k around 8 words of f32 and of bf16
    // pairs, odd k for a half pair), values with every special case of the bf16 rounding.
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const float specials[] = {nan, -nan, inf, -inf, 0.0f, -0.0f, 1e-40f, -1e-40f, 1.00390625f, 1.01171875f, 1.0f + 0x1p-8f + 0x1p-20f,
                              std::numeric_limits<float>::max(), std::numeric_limits<float>::min(), 1.1754942e-38f,
                              std::bit_cast<float>(0x807f8000u), std::bit_cast<float>(0x007f7fffu)};
    const std::uint32_t signalling = 0x7f800001u;
    for (const index_t m : {1, 5, 8, 9, 19})
        for (const index_t k : {1, 3, 8, 15, 16, 17, 33, 70}) {
            std::vector<float> x = random_values(static_cast<std::size_t>(m * (k + 3)), 60 + static_cast<unsigned>(m * k));
            for (std::size_t i = 0; i < x.size(); i += 3) x[i] = specials[i / 3 % std::size(specials)];
            if (x.size() > 5) std::memcpy(&x[5], &signalling, sizeof signalling);
            const std::ptrdiff_t lda = k + 3;  // rows apart by more than k
            std::vector<std::pair<std::string_view, const kernel_table*>> tables;
            for (isa i : runnable()) {
                const isa_scope on(i);
                tables.emplace_back(isa_name(i), &kernels());
            }
#if defined(__x86_64__)
            // The AMX kernels' packers, on a CPU without AMX: the tile model's table has them as they are.
            if (detect_isa() != isa::amx && dlm_test::amx_model::runnable()) tables.emplace_back("amx (tile model)", &dlm_test::amx_model::table());
#endif
            for (const auto& named : tables) {  // (not a structured binding: clang 14's lambdas, CAPTURE's, cannot take one)
                const std::string_view path = named.first;
                const kernel_table& t = *named.second;
                struct entry {
                    const char* name;
                    a_format a;
                    a_values values;
                    pack_fn pack;
                };
                const entry entries[] = {{"f32", t.f32.a, a_values::f32, t.f32.pack},
                                         {"f16", t.f16.a, t.f16.values, t.f16.pack},
                                         {t.bf16.name, t.bf16.a, t.bf16.values, t.bf16.pack},
                                         {t.bf16_alt.name, t.bf16_alt.a, t.bf16_alt.values, t.bf16_alt.pack}};
                for (const entry& e : entries) {
                    if (e.pack == nullptr) continue;
                    CAPTURE(path);
                    const std::string_view form = e.name;
                    CAPTURE(form);
                    CAPTURE(m);
                    CAPTURE(k);
                    const std::size_t size = packed_a_size(m, k, e.a.mr, e.a.group);
                    std::vector<std::uint32_t> got(size, 0xdeadbeefu), want(size, 0xdeadbeefu);  // 32 bits per element: room for either
                    e.pack(m, k, x.data(), lda, got.data());
                    const bool bits = e.values == a_values::bf16_bits;
                    if (bits) pack_a(m, k, x.data(), lda, e.a.mr, e.a.group, reinterpret_cast<std::uint16_t*>(want.data()), cpu::detail::bf16_bits{});
                    else if (e.values == a_values::bf16_f32)
                        pack_a(m, k, x.data(), lda, e.a.mr, e.a.group, reinterpret_cast<float*>(want.data()), cpu::detail::bf16_value{});
                    else pack_a(m, k, x.data(), lda, e.a.mr, e.a.group, reinterpret_cast<float*>(want.data()), cpu::detail::identity{});
                    CHECK(std::memcmp(got.data(), want.data(), size * (bits ? 2 : 4)) == 0);
                }
            }
        }
}

TEST_CASE("kernels: a whole forward gives the same logits on every path with FMA, for every weight type") {
    // docs/determinism.md's classes for whole forwards: products, softmax exps and SiLU agree bit for
    // bit on avx2, avx512, avx512-vnni and avx512-bf16 (bf16 in either form), whatever the weights.
    // (The baseline rounds products on their own, amx-bf16 sums in the tile unit's order: neither
    // is compared.) Widths of 256 hold whole K-quant super-blocks; 40 positions pass 16 keys.
    const io::model_config c = small_dream(256, 256, 64);
    std::vector<isa> fma;
    for (isa i : runnable())
        if (i != isa::baseline && i != isa::amx) fma.push_back(i);
    if (fma.size() < 2) MESSAGE("fewer than two FMA paths on this CPU: nothing to compare");
    for (int w = 0; w < 5; ++w) {
        const io::dtype types[] = {io::dtype::f32, io::dtype::bf16, io::dtype::f16};
        const quant::file_type files[] = {quant::file_type::q8_0, quant::file_type::q4_k_m};
        std::vector<float> first;
        for (isa i : fma)
            for (bool dot : {false, true}) {
                const isa_scope on(i);
                if (dot && (w != 1 || kernels().bf16_alt.run == nullptr)) continue;
                set_bf16_dot(dot);
                CAPTURE(isa_name(i));
                CAPTURE(w);
                CAPTURE(dot);
                transformer m = w < 3 ? transformer::random(c, 5, types[w], 0.5f) : transformer::random(c, 5, files[w - 3], 0.5f);
                const std::vector<float> got = canvas_logits(m, block_causal_mask{8}, 24, 16);
                if (first.empty()) first = got;
                CHECK(same_bits(got, first));
            }
    }
}

TEST_CASE("kernels: a product deeper than linear_chunked_depth, run in k chunks, has the bits of one call over all of k, at any row count, on 1 and 3 threads") {
    // DiffusionGemma self-conditioning's product is vocabulary-deep; linear runs it chunk by chunk
    // (gemm.hpp), whatever the rows or the threads. Rows: one, a partial row tile, and 70 over two
    // row blocks with a partial tile (split over the threads); a partial panel, an odd k.
    const index_t most = 70, n = 40, k = linear_chunked_depth + 1235;
    const auto x = random_values(static_cast<std::size_t>(most * k), 6), wv = random_values(static_cast<std::size_t>(n * k), 7);
    for (io::dtype type : {io::dtype::f32, io::dtype::f16, io::dtype::bf16}) {
        packed_matrix w(n, k, type);
        w.set_rows(0, wv.data(), n);
        dlm_test::for_each_path([&](std::string_view path) {  // the AMX tile model too, where the CPU has no AMX
            for (bool dot : {false, true}) {
                if (dot && (type != io::dtype::bf16 || kernels().bf16_alt.run == nullptr)) continue;
                set_bf16_dot(dot);
                for (const index_t m : {index_t{1}, index_t{3}, most}) {
                    // One kernel call over every row and all of k: linear's arithmetic before chunking.
                    const bool f32 = type == io::dtype::f32;
                    const a_format af = f32 ? kernels().f32.a : product_for(type).a;
                    std::vector<float, aligned_allocator<float>> a(packed_a_size(m, k, af.mr, af.group));
                    (f32 ? kernels().f32.pack : product_for(type).pack)(m, k, x.data(), k, a.data());
                    std::vector<float> whole(static_cast<std::size_t>(m * n));
                    if (f32) kernels().f32.run(m, n, k, a.data(), w.view(), 0, w.panels(), whole.data(), n, false);
                    else product_for(type).run(m, n, k, a.data(), w.view16(), 0, w.panels(), whole.data(), n, false);
                    // (a bf16-bits A takes half the floats' room: the float buffer holds either)
                    for (const int threads : {1, 3}) {
                        CAPTURE(path);
                        CAPTURE(io::dtype_name(type));
                        CAPTURE(dot);
                        CAPTURE(m);
                        CAPTURE(threads);
                        const dlm_test::omp_threads t(threads);
                        CHECK(same_bits(product(m, k, x, w), whole));
                    }
                }
            }
        });
    }
}

TEST_CASE("dispatch: the path follows the CPU's features: Haswell avx2, Skylake-X avx512, Ice Lake avx512-vnni, Zen 4 avx512-bf16") {
    using cpu::detail::best_vector_isa;
    using cpu::detail::vector_features;
    const vector_features haswell{.avx = true, .fma = true, .f16c = true, .avx2 = true};
    vector_features skylake_x = haswell;
    skylake_x.avx512 = true;
    vector_features ice_lake = skylake_x;  // Cascade Lake, Ice Lake, Tiger Lake, Rocket Lake
    ice_lake.vnni = true;
    vector_features zen4 = ice_lake;  // Cooper Lake, Sapphire Rapids (and AMX above it)
    zen4.bf16 = true;
    CHECK(best_vector_isa(vector_features{}) == isa::baseline);
    CHECK(best_vector_isa(haswell) == isa::avx2);
    CHECK(best_vector_isa(skylake_x) == isa::avx512);
    CHECK(best_vector_isa(ice_lake) == isa::avx512_vnni);
    CHECK(best_vector_isa(zen4) == isa::avx512_bf16);
    vector_features bf16_alone = skylake_x;  // no CPU has it; vdpbf16ps alone makes no level
    bf16_alone.bf16 = true;
    CHECK(best_vector_isa(bf16_alone) == isa::avx512);
    vector_features no_zmm_state = zen4;  // an OS that does not save the zmm registers
    no_zmm_state.avx512 = false;
    CHECK(best_vector_isa(no_zmm_state) == isa::avx2);
    vector_features no_f16c = haswell;
    no_f16c.f16c = false;
    CHECK(best_vector_isa(no_f16c) == isa::baseline);
#if defined(__x86_64__)
    unsigned long long xcr0 = 0;  // this CPU: its features give the path dispatch picked (below AMX)
    const isa here = best_vector_isa(cpu::detail::read_vector_features(xcr0));
    CHECK(here == (detect_isa() == isa::amx ? isa::avx512_bf16 : detect_isa()));
#endif
}

TEST_CASE("dispatch: DLM_ISA names, and paths the CPU lacks are refused by name") {
    CHECK(parse_isa("avx2") == isa::avx2);
    CHECK(parse_isa("avx512-bf16") == isa::avx512_bf16);
    CHECK(parse_isa("avx512-vnni") == isa::avx512_vnni);
    CHECK(parse_isa("baseline") == isa::baseline);
    try {
        (void)parse_isa("sse9");
        FAIL("no error");
    } catch (const invalid_parameter& e) {
        CHECK(e.parameter() == "DLM_ISA");
        CHECK(std::string(e.what()).find("sse9") != std::string::npos);
    }
    CHECK(kernels_for(isa::baseline).id == isa::baseline);
    CHECK(std::string(kernels_for(detect_isa()).name) == isa_name(detect_isa()));
    CHECK(parse_isa("amx") == isa::amx);
    if (detect_isa() != isa::amx) {  // refused, with the reason AMX is not offered here
        CHECK(!amx_unavailable_reason().empty());
        try {
            set_isa(isa::amx);
            FAIL("no error");
        } catch (const invalid_parameter& e) {
            CHECK(std::string(e.what()).find(std::string(amx_unavailable_reason())) != std::string::npos);
        }
    } else {
        CHECK(amx_unavailable_reason().empty());
    }
    {
        const isa_scope on(isa::baseline);
        CHECK(kernels().id == isa::baseline);
        CHECK_FALSE(bf16_products().dot);  // the baseline has no vdpbf16ps
    }
    CHECK(kernels().id == detect_isa());
}

TEST_CASE("random models: built in their type without an f32 copy, the model a checkpoint of random_weights loads as") {
    io::model_config c = small_dream(48, 80, 12);
    c.qkv_bias = true;
    c.tie_word_embeddings = false;
    const auto logits = [](transformer& m) { return canvas_logits(m, bidirectional_mask{}, 20, 12); };
    // The checkpoint: random_weights in the family's names, in the load order, stored as `type`.
    const transformer_weights w = random_weights(c, 9, 0.5f);
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("dlm_test_kernels_random_" + std::to_string(::getpid()));
    for (io::dtype type : {io::dtype::f32, io::dtype::bf16, io::dtype::f16}) {
        CAPTURE(io::dtype_name(type));
        std::filesystem::create_directories(dir);
        std::vector<std::pair<std::string, io::tensor_data>> tensors;
        const memory_source src(w, c);
        for (const auto& [role, layer] : weight_order(c)) {
            const auto shape = tensor_shape(c, role);
            io::tensor_data t{shape, std::vector<float>(static_cast<std::size_t>(shape[0] * (shape.size() == 2 ? shape[1] : 1)))};
            src.read(role, layer, 0, static_cast<index_t>(shape[0]), t.values.data());
            tensors.emplace_back(tensor_name(c.arch, role, layer), std::move(t));
        }
        io::write_safetensors(dir / "model.safetensors", tensors, type);
        std::ofstream(dir / "config.json") << R"({"architectures": ["DreamModel"], "model_type": "Dream", "hidden_size": 48,
            "intermediate_size": 80, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 120,
            "max_position_embeddings": 256, "tie_word_embeddings": false, "mask_token_id": 119, "eos_token_id": 1,
            "rope_theta": 10000.0, "rms_norm_eps": 1e-5})";
        transformer loaded = transformer::load(dir);
        c = loaded.config();
        transformer streamed = transformer::random(c, 9, type, 0.5f);
        CHECK(loaded.weight_type() == streamed.weight_type());
        CHECK(streamed.weight_bytes() == loaded.weight_bytes());
        CHECK(same_bits(logits(streamed), logits(loaded)));
        std::filesystem::remove_all(dir);
    }
}

TEST_CASE("memory: a model that cannot fit is refused before allocating, with the bytes needed and available") {
    io::model_config c;
    c.arch = io::architecture::llada;
    c.vocab_size = 126464;
    c.hidden_size = 4096;
    c.intermediate_size = 12288;
    c.num_layers = 32 * 1024;  // an 8B model's layers, a thousand times over: about 14 TB in bf16
    c.num_heads = 32;
    c.num_kv_heads = 32;
    c.head_dim = 128;
    c.max_context = 4096;
    c.mask_id = 126336;
    try {
        (void)transformer::random(c, 1, io::dtype::bf16);
        FAIL("no error");
    } catch (const memory_error& e) {
        CHECK(e.needed() > (std::uint64_t{1} << 43));
        CHECK(e.available() < e.needed());
        const std::string what = e.what();
        CHECK(what.find(std::to_string(e.needed()) + " bytes") != std::string::npos);
        CHECK(what.find(std::to_string(e.available()) + " bytes") != std::string::npos);
        CHECK(what.find("bf16") != std::string::npos);
        // Already bf16: no narrower type to suggest (the hint once said --dtype bf16 here too).
        CHECK(what.find("--dtype bf16") == std::string::npos);
        CHECK(what.find("load a quantized GGUF file") != std::string::npos);
    }
    try {
        (void)transformer::random(c, 1, io::dtype::f32);
        FAIL("no error");
    } catch (const memory_error& e) {
        CHECK(std::string(e.what()).find("hold them in a narrower type (load_options::weight_dtype, dlm-generate --dtype bf16)") != std::string::npos);
    }
    CHECK_NOTHROW(check_fits("a small buffer", 1024));
    CHECK(available_memory() > 0);
    const std::size_t now = resident_memory();  // read before the peak: the peak can only have grown since
    CHECK(now > 0);
    CHECK(peak_resident_memory() >= now);
}

}  // namespace test_kernels
