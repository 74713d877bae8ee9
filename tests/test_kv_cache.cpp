// The CPU transformer's bf16 KV cache (dlm/cpu/kv_cache.hpp, load_options::kv_dtype): its own
// determinism class, held to the f32 cache's logits within a tolerance, and to every exactness
// property the f32 cache has: an exact cache = a full recompute, a sequence alone = in a batch, any
// thread count, copies between stores (the prompt cache's hook) bit for bit.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <dlm/cpu/transformer.hpp>

#include "io_test_util.hpp"
#include "support/transformer_testing.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_kv_cache {

using namespace dlm;
using namespace dlm_test::cpu_model;

namespace {

using dlm_test::scaled_diff;  // the CUDA bf16 cache's measure; +inf where either side holds a NaN

/// Load options with a KV cache of `kv` (and weights of `weights`).
cpu::load_options with_kv(io::dtype kv, std::optional<io::dtype> weights = std::nullopt) {
    cpu::load_options o;
    o.weight_dtype = weights;
    o.kv_dtype = kv;
    return o;
}

/// The f32-weight paths of this CPU: the bf16 KV cache's products are those of bf16 weights on
/// every path, whatever the weights' type. With f32 weights the attention's output enters the
/// output projection as it is, so a last bit that differs there reaches the logits; bf16 weights
/// would round it to bf16 first and hide nearly every such difference.
std::vector<kernel_path> kv_paths() {
    std::vector<kernel_path> out;
    for (const kernel_path& p : kernel_paths())
        if (!p.quant && p.type == io::dtype::f32) out.push_back(p);
    return out;
}

/// A model with a bf16 KV cache on `path`.
transformer bf16_kv_model(io::model_config c, std::uint64_t seed, const kernel_path& path) {
    transformer m = make_model(std::move(c), seed, path);
    m.set_kv_dtype(io::dtype::bf16);
    return m;
}

}  // namespace

TEST_CASE("test comparisons: a NaN on either side is an infinite difference, and bit for bit tells -0 from +0") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    CHECK(scaled_diff({nan, 1.f}, {1.f, 1.f}) == std::numeric_limits<double>::infinity());
    CHECK(scaled_diff({1.f, 1.f}, {1.f, nan}) == std::numeric_limits<double>::infinity());
    CHECK(dlm_test::max_rel_diff({nan}, {nan}) == std::numeric_limits<double>::infinity());
    CHECK(scaled_diff({1.f, 2.f}, {1.f, 2.f}) == 0.0);
    CHECK(scaled_diff({-0.f}, {0.f}) == 0.0);
    const float inf = std::numeric_limits<float>::infinity();
    CHECK(scaled_diff({-inf, 1.f}, {-inf, 1.f}) == 0.0);  // a banned (-inf) logit equal on both sides
    CHECK(scaled_diff({-inf, 0.5f}, {-inf, 1.f}) == doctest::Approx(0.5));  // and it does not hide the rest (scale 1)
    CHECK(scaled_diff({inf}, {1.f}) == std::numeric_limits<double>::infinity());
    CHECK_FALSE(dlm_test::bitwise_equal({-0.f}, {0.f}));
}

TEST_CASE("bf16 KV cache: an exact prefix cache gives a full recompute's logits bit for bit, windows at any offset, on every kernel path") {
    for (const kernel_path& path : kv_paths()) {
        CAPTURE(cpu::isa_name(path.isa));
        CAPTURE(path.name());
        const path_scope on(path);
        transformer llada = bf16_kv_model(small_config(io::architecture::llada, true, false), 11, path);
        transformer dream = bf16_kv_model(small_config(io::architecture::dream, false, true), 12, path);
        check_cached_walks(llada, dream);
    }
}

TEST_CASE("bf16 KV cache: every path with FMA, in both bf16 forms, gives the same logits bit for bit, full forwards and exact-cache steps alike") {
    // docs/determinism.md: the bf16 cache's attention products are bf16 weights' products, one class
    // on every vector path (the FMA form and vdpbf16ps alike); the rest of an f32 model's forward is
    // the same bits on every path with FMA (the baseline rounds its exps' products, amx sums in the
    // tile unit's order: neither is compared). An exact prefix cache's walk, each step's cached and
    // full forward, Dream's layout block-causal with a prompt of 37 (windows off multiples of 32).
    std::vector<std::vector<float>> runs;
    std::vector<std::string> names;
    for (const kernel_path& path : kv_paths()) {
        if (path.isa == cpu::isa::baseline || path.isa == cpu::isa::amx) continue;
        for (const bool dot : {false, true}) {
            const path_scope on(path);
            if (dot && cpu::kernels().bf16_alt.run == nullptr) continue;
            cpu::set_bf16_dot(dot);
            CHECK(cpu::bf16_products().dot == dot);
            transformer m = bf16_kv_model(small_config(io::architecture::dream, false, true), 31, path);
            const block_causal_mask mask{16};
            const canvas_layout l{37, 48, 16, true};
            std::vector<float> all;
            const int steps = dlm_test::walk_cached_steps<prefix_cache>(
                m, mask, l, random_canvas(37, 48, 96, 96, 6), 6, 2,
                [&](const tvec& canvas, const forward_plan& p, kv* cache) { return run(m, mask, canvas, l, p, cache); },
                [&](const forward_plan&, const forward_plan&, const std::vector<float>& cached, const std::vector<float>& full, index_t, index_t) {
                    all.insert(all.end(), cached.begin(), cached.end());
                    all.insert(all.end(), full.begin(), full.end());
                });
            CHECK(steps == 6);
            runs.push_back(std::move(all));
            names.push_back(std::string(cpu::isa_name(path.isa)) + (dot ? " vdpbf16ps" : ""));
        }
    }
    if (runs.size() < 2) MESSAGE("fewer than two FMA paths on this CPU: nothing to compare");
    for (std::size_t i = 1; i < runs.size(); ++i) {
        CAPTURE(names[i]);
        CAPTURE(names[0]);
        CHECK(bitwise_equal(runs[i], runs[0]));
    }
}

TEST_CASE("bf16 KV cache: logits stay within 2e-2 of the f32 cache's scale, and differ from them") {
    for (const kernel_path& path : kv_paths()) {
        CAPTURE(cpu::isa_name(path.isa));
        const path_scope on(path);
        transformer m = make_model(small_config(io::architecture::dream, false, true), 21, path);
        const canvas_layout l{37, 48, 16, true};
        const tvec canvas = random_canvas(37, 48, 96, 96, 4);
        const block_causal_mask mask{16};
        const auto f32 = run(m, mask, canvas, l, full_plan(l));
        m.set_kv_dtype(io::dtype::bf16);
        const auto bf16 = run(m, mask, canvas, l, full_plan(l));
        const double diff = scaled_diff(bf16, f32);
        MESSAGE("bf16 KV against f32 KV, " << cpu::isa_name(path.isa) << ": " << diff << " of the logits' scale");
        CHECK(diff <= 2e-2);
        CHECK(diff > 0);  // the bf16 store is not the f32 one under another name
    }
}

TEST_CASE("bf16 KV cache: a sequence gets bit-identical logits alone and inside a batch, on every kernel path") {
    for (const kernel_path& path : kv_paths()) {
        CAPTURE(cpu::isa_name(path.isa));
        const path_scope on(path);
        transformer m = bf16_kv_model(small_config(io::architecture::dream, false, true), 7, path);
        const block_causal_mask mask{8};
        const canvas_layout la{5, 16, 8, true}, lb{37, 32, 8, true};
        const tvec a = random_canvas(5, 16, 96, 96, 1), b = random_canvas(37, 32, 96, 96, 2);
        const forward_plan pa = full_plan(la), pb = prefix_cache{}.plan(mask, lb, {0, 0});  // pb stores the prompt
        kv cache_b = m.make_kv_cache(lb.size()), cache_b_alone = m.make_kv_cache(lb.size());
        const auto alone_a = run(m, mask, a, la, pa);
        const auto alone_b = run(m, mask, b, lb, pb, &cache_b_alone);
        const std::vector<forward_request<kv>> batch{{a, la, pa, nullptr}, {b, lb, pb, &cache_b}};
        std::vector<float> out(static_cast<std::size_t>(pa.logits_rows() + pb.logits_rows()) * 97);
        m.forward(std::span<const forward_request<kv>>(batch), mask, out);
        const auto split = out.begin() + static_cast<std::ptrdiff_t>(pa.logits_rows()) * 97;
        CHECK(bitwise_equal(std::vector<float>(out.begin(), split), alone_a));
        CHECK(bitwise_equal(std::vector<float>(split, out.end()), alone_b));
        CHECK(cache_b.keys == cache_b_alone.keys);
        CHECK(cache_b.values == cache_b_alone.values);
    }
}

#if defined(_OPENMP)
TEST_CASE("bf16 KV cache: logits do not depend on the thread count") {
    auto cfg = small_config(io::architecture::dream, false, true);
    cfg.hidden_size = 128;
    cfg.num_heads = 8;
    cfg.num_kv_heads = 4;
    cfg.head_dim = 16;
    cfg.intermediate_size = 352;
    transformer m(cfg, cpu::random_weights(cfg, 5), with_kv(io::dtype::bf16));
    const canvas_layout l{150, 64, 16, true};
    const tvec canvas = random_canvas(150, 64, 96, 96, 8);
    const block_causal_mask mask{16};
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const auto one = run(m, mask, canvas, l, full_plan(l));
    omp_set_num_threads(std::max(threads, 3));
    const auto many = run(m, mask, canvas, l, full_plan(l));
    omp_set_num_threads(threads);
    CHECK(bitwise_equal(one, many));
}
#endif

TEST_CASE("bf16 KV cache: copy_kv moves stored positions bit for bit, at odd offsets too, and a forward reads them as its own") {
    const auto cfg = small_config(io::architecture::llada, true, false);
    transformer m(cfg, cpu::random_weights(cfg, 3), with_kv(io::dtype::bf16));
    const block_causal_mask mask{16};
    const canvas_layout l{45, 32, 16, false};
    const tvec canvas = random_canvas(45, 32, 96, 96, 6);
    kv filled = m.make_kv_cache(l.size());
    (void)run(m, mask, canvas, l, prefix_cache{}.plan(mask, l, {0, 0}), &filled);  // stores the prompt, [0, 45)
    REQUIRE(std::count(filled.stored.begin(), filled.stored.end(), 1) == 45);
    // Two copies: odd start and length, then the rest; the copy must then hold the same bytes.
    kv copied = m.make_kv_cache(l.size());
    m.copy_kv(filled, 7, copied, 7, 29);
    m.copy_kv(filled, 0, copied, 0, 7);
    m.copy_kv(filled, 36, copied, 36, 9);
    CHECK(copied.keys == filled.keys);
    CHECK(copied.values == filled.values);
    CHECK(copied.stored == filled.stored);
    // The next block's step reads the prompt from either store alike.
    const forward_plan step = prefix_cache{}.plan(mask, l, {0, 1});
    CHECK(bitwise_equal(run(m, mask, canvas, l, step, &copied), run(m, mask, canvas, l, step, &filled)));
}

TEST_CASE("bf16 KV cache: half the f32 cache's bytes at head sizes of whole tiles, counted before allocating") {
    for (const index_t head_dim : {64, 128}) {
        CAPTURE(head_dim);
        const std::uint64_t f32 = cpu::kv_cache::bytes_for(4096, 32, 32, head_dim, io::dtype::f32);
        const std::uint64_t bf16 = cpu::kv_cache::bytes_for(4096, 32, 32, head_dim, io::dtype::bf16);
        CHECK(double(bf16) / double(f32) < 0.51);
        CHECK(double(bf16) / double(f32) > 0.49);
    }
    const auto cfg = small_config(io::architecture::llada, true, false);
    transformer m(cfg, cpu::random_weights(cfg, 3), with_kv(io::dtype::bf16));
    const kv c = m.make_kv_cache(100);
    CHECK(c.element() == io::dtype::bf16);
    CHECK(m.kv_cache_bytes(100) == c.keys.size() + c.values.size() + c.stored.size());
}

TEST_CASE("bf16 KV cache: keys, values and the attention's operands are rounded as to_bf16_daz rounds one value, ties, NaNs, infinities and subnormals included, on every instruction set") {
    // kernel_table::round_bf16 (the stores of fresh keys and values, the attention's queries and
    // weights) against the scalar definition, as bits and as the floats they hold, on the bit
    // patterns that take each branch and on pseudo-random ones.
    std::vector<std::uint32_t> bits = {0x00000000u, 0x80000000u, 0x00000001u, 0x80400000u, 0x007fffffu, 0x00800000u, 0x00807fffu,
                                       0x3f808000u, 0x3f818000u, 0x3f817fffu, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u,
                                       0x7f800001u, 0xff800001u, 0x7fc00000u, 0x7fffffffu, 0x00008000u, 0x0000ffffu, 0x807fffffu,
                                       0x007f8000u, 0x807f7fffu, 0x007f8001u, 0x807f0000u};
    std::uint32_t x = 12345u;
    for (int i = 0; i < 4093; ++i) bits.push_back(x = x * 1664525u + 1013904223u);  // an odd count: the vector loop's tail too
    std::vector<float> values(bits.size());
    std::memcpy(values.data(), bits.data(), bits.size() * sizeof(float));
    std::vector<std::uint16_t> want(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) want[i] = cpu::to_bf16_daz(values[i]);
    CHECK(want[14] == 0x7fc0u);  // a signalling NaN whose payload is in the low bits: quiet, not an infinity
    CHECK(want[2] == 0x0000u);   // a subnormal: a zero
    CHECK(want[3] == 0x8000u);   // of its sign
    CHECK(want[20] == 0x8080u);  // unless it rounds up to the smallest normal
    CHECK(want[21] == 0x0080u);  // from the tie at 0x007f8000 up
    CHECK(want[22] == 0x8000u);  // and not from just below it
    for (const cpu::isa_info& info : cpu::isa_list) {
        if (static_cast<int>(info.id) > static_cast<int>(cpu::detect_isa())) continue;
        CAPTURE(info.name);
        cpu::set_isa(info.id);
        std::vector<std::uint16_t> h(values.size());
        std::vector<float> f(values.size());
        cpu::kernels().round_bf16(values.data(), index_t(values.size()), h.data(), cpu::a_values::bf16_bits);
        cpu::kernels().round_bf16(values.data(), index_t(values.size()), f.data(), cpu::a_values::bf16_f32);
        int wrong_bits = 0, wrong_floats = 0;
        for (std::size_t i = 0; i < values.size(); ++i) {
            wrong_bits += h[i] != want[i];
            wrong_floats += std::bit_cast<std::uint32_t>(f[i]) != std::uint32_t{want[i]} << 16;
        }
        CHECK(wrong_bits == 0);
        CHECK(wrong_floats == 0);
    }
    cpu::set_isa(cpu::detect_isa());
}

TEST_CASE("KV window: fresh keys and values land where key_at and value_at say, f32 and bf16, at head sizes and offsets of every run") {
    // gather_window_kv stores a run of 16 positions 64 dims at a time: windows longer than a run,
    // starting at odd and even block positions (a bf16 value panel pairs positions), head sizes not
    // a multiple of 64 (a last run of dims short of a value panel) and odd (bf16's padding dim).
    for (const io::dtype element : {io::dtype::f32, io::dtype::bf16})
        for (const index_t d : {6, 7, 64, 80, 130})
            for (const index_t begin : {0, 5, 32, 45})
                for (const index_t rows : {1, 2, 17, 40}) {
                    CAPTURE(cpu::kv_element_name(element));
                    CAPTURE(d);
                    CAPTURE(begin);
                    CAPTURE(rows);
                    const index_t heads = 2, kv_heads = 2;
                    const cpu::head_geometry hg{heads, kv_heads, d, (heads + 2 * kv_heads) * d, heads * d};
                    std::vector<float> qkv(std::size_t(rows) * std::size_t(hg.qkv_ld));
                    for (std::size_t i = 0; i < qkv.size(); ++i) qkv[i] = static_cast<float>(std::sin(0.37 * double(i) + 0.1 * double(d)));
                    cpu::window_kv w = cpu::window_kv::of(element, begin, begin + rows, d);
                    std::vector<std::byte, cpu::aligned_allocator<std::byte>> store(w.bytes(kv_heads));
                    w.place(store.data(), kv_heads);
                    const forward_plan plan{begin, begin + rows, 0, 0, 0, 0, begin + rows};
                    const cpu::kv_shape& sh = w.blocks.shape;
                    for (index_t g = 0; g < kv_heads; ++g) {
                        cpu::gather_window_kv(hg, qkv.data(), plan, w, nullptr, 0, g);
                        const std::byte* kb = w.blocks.key_block(std::size_t(g));
                        const std::byte* vb = w.blocks.value_block(std::size_t(g));
                        const auto held = [&](const std::byte* base, std::ptrdiff_t at) {
                            if (element == io::dtype::f32) {
                                float f;
                                std::memcpy(&f, base + at * 4, 4);
                                return f;
                            }
                            std::uint16_t h;
                            std::memcpy(&h, base + at * 2, 2);
                            return io::bf16_to_f32(h);
                        };
                        const auto as_held = [&](float x) { return element == io::dtype::f32 ? x : io::bf16_to_f32(cpu::to_bf16_daz(x)); };
                        for (index_t j = 0; j < rows; ++j) {
                            const index_t p = begin + j - w.blocks.origin;
                            const float* row = qkv.data() + std::ptrdiff_t{j} * hg.qkv_ld;
                            for (index_t i = 0; i < d; ++i) {
                                REQUIRE(held(kb, sh.key_at(i, p)) == as_held(row[hg.q_dim() + g * d + i]));
                                REQUIRE(held(vb, sh.value_at(p, i)) == as_held(row[hg.q_dim() + hg.kv_dim() + g * d + i]));
                            }
                            if (d % sh.group() != 0) REQUIRE(held(kb, sh.key_at(d, p)) == 0.0f);  // bf16's padding dim of an odd head
                        }
                    }
                }
}

TEST_CASE("bf16 KV cache: errors name the element type and the store that is wrong") {
    const auto cfg = small_config(io::architecture::llada, true, false);
    transformer m(cfg, cpu::random_weights(cfg, 3));
    dlm_test::expect_error<invalid_parameter>([&] { m.set_kv_dtype(io::dtype::f16); }, {"'kv_dtype'", "f16", "65504"});
    dlm_test::expect_error<invalid_parameter>([&] { transformer(cfg, cpu::random_weights(cfg, 1), with_kv(io::dtype::f16)); },
                                              {"'kv_dtype'"});
    kv f32_cache = m.make_kv_cache(40);
    m.set_kv_dtype(io::dtype::bf16);
    kv bf16_cache = m.make_kv_cache(40);
    const block_causal_mask mask{16};
    const canvas_layout l{8, 32, 16, false};
    const tvec canvas = random_canvas(8, 32, 96, 96, 2);
    dlm_test::expect_error<contract_error>([&] { (void)run(m, mask, canvas, l, prefix_cache{}.plan(mask, l, {0, 0}), &f32_cache); },
                                           {"request 0", "holds f32", "computes bf16"});
    (void)run(m, mask, canvas, l, prefix_cache{}.plan(mask, l, {0, 0}), &bf16_cache);
    dlm_test::expect_error<contract_error>([&] { m.copy_kv(bf16_cache, 0, f32_cache, 0, 8); }, {"cpu::copy_kv", "bf16 and f32"});
}

}  // namespace test_kv_cache
