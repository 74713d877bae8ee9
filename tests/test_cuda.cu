// The CUDA transformer against the CPU one: logits on the shipped fixtures and on random models of
// every head size the attention kernel specializes for, batches, exact caching on the GPU, and the
// errors. f32 storage checks the arithmetic tightly; bf16 (the default) within bf16's rounding.
// Every preset's tokens: test_cuda_presets.cu.
#include "cuda_test_util.cuh"

#include <concepts>
#include <utility>

using namespace dlm_cuda_test;

namespace {

template <class Mask>
void check_fixture(const std::string& name, bool shift, const Mask& mask, const std::string& mask_name) {  // strings: CAPTURE logs text
    CAPTURE(name);
    CAPTURE(mask_name);
    // The f32 GPU model against the CPU model holding f32 weights; the bf16 one against the CPU model
    // holding the checkpoint's type (bf16 checkpoints: the CPU's bf16 path, whose rounding it follows).
    auto cpu32 = cpu::transformer::load(models_dir / name, {.weight_dtype = io::dtype::f32});
    auto cpu = cpu::transformer::load(models_dir / name);
    auto g32 = gpu32::load(models_dir / name);
    auto g16 = gpu16::load(models_dir / name);
    const fixture f = read_fixture(name, shift);
    const double d32 = scaled_diff(run(g32, mask, f.ids, f.layout, full_plan(f.layout)), run(cpu32, mask, f.ids, f.layout, full_plan(f.layout)));
    const double d16 = scaled_diff(run(g16, mask, f.ids, f.layout, full_plan(f.layout)), run(cpu, mask, f.ids, f.layout, full_plan(f.layout)));
    MESSAGE(name << ", " << mask_name << ": GPU f32 vs CPU " << d32 << ", GPU bf16 vs CPU " << d16);
    CHECK(d32 < f32_tolerance);
    CHECK(d16 < bf16_tolerance);
}



}  // namespace

TEST_SUITE("parity") {
    TEST_CASE("the shipped fixtures: GPU logits match the CPU model's") {
        check_fixture("llada_tiny", false, bidirectional_mask{}, "bidirectional");
        check_fixture("llada_tiny", false, block_causal_mask{4}, "block-causal");
        check_fixture("dream_tiny", true, bidirectional_mask{}, "bidirectional");
        check_fixture("dream_tiny", true, causal_mask{}, "causal");
        check_fixture("dream_tiny", true, semi_ar_mask{4}, "semi-AR");
    }

    TEST_CASE("random models of every head size the attention kernel specializes for") {
        for (const auto& [heads, kv_heads, head_dim] : {std::tuple{6, 2, 16}, std::tuple{4, 4, 64}, std::tuple{4, 2, 96}, std::tuple{2, 1, 128},
                                                        std::tuple{2, 2, 256}}) {
            CAPTURE(head_dim);
            const auto cfg = random_config(heads, kv_heads, head_dim, head_dim % 64 == 0, head_dim == 16);
            const auto w = cpu::random_weights(cfg, 17);
            cpu::transformer cpu(cfg, w);
            gpu32 g32(cfg, w);
            const canvas_layout l{45, 64, 16, cfg.logits_shift};  // 109 rows: several key tiles and row tiles
            const tvec canvas = random_canvas(45, 64, 300, 300, 2);
            for (int which = 0; which < 2; ++which) {
                const auto ref = which ? run(cpu, block_causal_mask{16}, canvas, l, full_plan(l)) : run(cpu, bidirectional_mask{}, canvas, l, full_plan(l));
                const auto got = which ? run(g32, block_causal_mask{16}, canvas, l, full_plan(l)) : run(g32, bidirectional_mask{}, canvas, l, full_plan(l));
                CHECK(scaled_diff(got, ref) < f32_tolerance);
            }
        }
    }

    TEST_CASE("random weights made on the device give finite logits") {
        auto m = gpu16::random(random_config(4, 2, 32, true, false), 5);
        const canvas_layout l{20, 12, 4, true};
        const auto z = run(m, bidirectional_mask{}, random_canvas(20, 12, 300, 300, 1), l, full_plan(l));
        CHECK(std::all_of(z.begin(), z.end(), [](float v) { return std::isfinite(v); }));
        CHECK(m.weight_bytes() > 0);
    }

    TEST_CASE("a batch of requests with different plans matches each request alone, only planned rows are computed") {
        const auto cfg = random_config(4, 2, 24, true, false);
        const auto w = cpu::random_weights(cfg, 7);
        gpu32 m(cfg, w);
        const block_causal_mask mask{8};
        const canvas_layout la{5, 16, 8, true}, lb{37, 32, 8, true}, lc{11, 8, 8, true};
        const tvec a = random_canvas(5, 16, 300, 300, 1), b = random_canvas(37, 32, 300, 300, 2), c = random_canvas(11, 8, 300, 300, 3);
        const forward_plan pa = full_plan(la), pb = prefix_cache{}.plan(mask, lb, {0, 0}), pc = no_cache{}.plan(mask, lc, {0, 0});
        auto cache_b = m.make_kv_cache(lb.size()), cache_b_alone = m.make_kv_cache(lb.size());
        const auto alone_a = run(m, mask, a, la, pa), alone_b = run(m, mask, b, lb, pb, &cache_b_alone), alone_c = run(m, mask, c, lc, pc);
        using kv = gpu32::kv_cache;
        const std::vector<forward_request<kv>> batch{{a, la, pa, nullptr}, {b, lb, pb, &cache_b}, {c, lc, pc, nullptr}};
        const std::size_t V = 301;
        std::vector<float> out(static_cast<std::size_t>(pa.logits_rows() + pb.logits_rows() + pc.logits_rows()) * V);
        m.forward(std::span<const forward_request<kv>>(batch), mask, out);
        const auto part = [&](std::size_t row0, const forward_plan& p) {
            return std::vector<float>(out.begin() + static_cast<std::ptrdiff_t>(row0 * V),
                                      out.begin() + static_cast<std::ptrdiff_t>((row0 + static_cast<std::size_t>(p.logits_rows())) * V));
        };
        CHECK(scaled_diff(part(0, pa), alone_a) < 1e-5);
        CHECK(scaled_diff(part(static_cast<std::size_t>(pa.logits_rows()), pb), alone_b) < 1e-5);
        CHECK(scaled_diff(part(static_cast<std::size_t>(pa.logits_rows() + pb.logits_rows()), pc), alone_c) < 1e-5);
        CHECK(cache_b.stored == cache_b_alone.stored);
        // Only the planned rows.
        forward_plan rows = full_plan(la);
        rows.logits_begin = 9;
        rows.logits_end = 13;
        const auto full = run(m, mask, a, la, full_plan(la));
        CHECK(scaled_diff(run(m, mask, a, la, rows), std::vector<float>(full.begin() + 9 * 301, full.begin() + 13 * 301)) < 1e-5);
    }
}

TEST_SUITE("cache") {
    TEST_CASE("exact prefix cache on the GPU: each step's logits equal a full recompute's") {
        auto llada = gpu32::load(models_dir / "llada_tiny");
        auto dream = gpu32::load(models_dir / "dream_tiny");
        CHECK(compare_with_full_recompute<prefix_cache>(llada, block_causal_mask{4}, {8, 16, 4, false}, 5, 3, f32_tolerance) == 12);
        CHECK(compare_with_full_recompute<prefix_cache>(dream, block_causal_mask{4}, {9, 16, 4, true}, 6, 2, f32_tolerance) == 8);
        CHECK(compare_with_full_recompute<prefix_cache>(dream, causal_mask{}, {7, 12, 1, true}, 4, 1, f32_tolerance) == 12);
        auto llada16 = gpu16::load(models_dir / "llada_tiny");
        CHECK(compare_with_full_recompute<prefix_cache>(llada16, block_causal_mask{4}, {8, 16, 4, false}, 5, 3, bf16_tolerance) == 12);
    }

    TEST_CASE("many large KV caches made right before the forward that fills them: cached logits equal the CPU's") {
        // A cache zeroed on another stream than the model's (the legacy default stream) could be zeroed
        // after the first forward stored into it; 32 caches of 10 MB made just before that forward make
        // the window wide. The model is made last, so its rotary table is uploaded just before too.
        auto cfg = random_config(8, 8, 128, true, false);
        cfg.num_layers = 4;
        const auto w = cpu::random_weights(cfg, 23);
        cpu::transformer cpu(cfg, w);
        gpu32 g(cfg, w);
        const canvas_layout l{280, 32, 16, true};
        const block_causal_mask mask{16};
        const std::size_t n = 32, V = 301;
        const index_t b = l.block_begin(l.block_count() - 1);
        const forward_plan fill{0, l.size(), l.size() - 1, l.size(), 0, l.size(), l.size()};  // stores every position
        const forward_plan step{b, l.size(), b, l.size(), 0, 0, l.size()};                    // the last block over the cache
        const forward_plan full{0, l.size(), b, l.size(), 0, 0, l.size()};                    // the CPU: no cache
        std::vector<tvec> canvases;
        for (std::size_t i = 0; i < n; ++i) canvases.push_back(random_canvas(280, 32, 300, 300, static_cast<unsigned>(100 + i)));
        std::vector<gpu32::kv_cache> caches;
        caches.reserve(n);
        for (std::size_t i = 0; i < n; ++i) caches.push_back(g.make_kv_cache(l.size()));
        CHECK(caches.front().bytes() > std::size_t{10000000});
        std::vector<forward_request<gpu32::kv_cache>> fills, steps;
        std::vector<forward_request<cpu::transformer::kv_cache>> refs;
        for (std::size_t i = 0; i < n; ++i) {
            fills.push_back({canvases[i], l, fill, &caches[i]});
            steps.push_back({canvases[i], l, step, &caches[i]});
            refs.push_back({canvases[i], l, full, nullptr});
        }
        std::vector<float> first(n * V), got(n * static_cast<std::size_t>(l.size() - b) * V), want(got.size());
        g.forward(std::span<const forward_request<gpu32::kv_cache>>(fills), mask, first);
        g.forward(std::span<const forward_request<gpu32::kv_cache>>(steps), mask, got);
        cpu.forward(std::span<const forward_request<cpu::transformer::kv_cache>>(refs), mask, want);
        CHECK(scaled_diff(got, want) < f32_tolerance);
    }

    TEST_CASE("Fast-dLLM caches: the refresh forward equals a full recompute") {
        auto m = gpu32::load(models_dir / "llada_tiny");
        const canvas_layout l{8, 16, 4, false};
        const tvec canvas = random_canvas(8, 16, 299, 299, 9);
        auto cache = m.make_kv_cache(l.size());
        const semi_ar_mask mask{4};
        const auto refresh = run(m, mask, canvas, l, approx_prefix_cache{}.plan(mask, l, {1, 0}), &cache);
        CHECK(scaled_diff(refresh, run(m, mask, canvas, l, no_cache{}.plan(mask, l, {1, 0}))) < 1e-5);
        CHECK(scaled_diff(run(m, mask, canvas, l, approx_prefix_cache{}.plan(mask, l, {1, 1}), &cache), refresh) < 1e-5);
        CHECK(scaled_diff(run(m, mask, canvas, l, dual_cache{}.plan(mask, l, {1, 1}), &cache), refresh) < 1e-5);
    }

    TEST_CASE("prefix_cache and no_cache decode the same tokens on the GPU") {
        auto llada = gpu32::load(models_dir / "llada_tiny");
        auto dream = gpu32::load(models_dir / "dream_tiny");
        const std::vector<tvec> prompts{{5, 17, 42, 7, 99, 3}, {11, 12, 250, 31, 8, 200, 140, 77, 6, 2, 19}};
        using M = gpu32;
        check_same_tokens(decode<decoder<M, block_causal_mask, prefix_cache, threshold_schedule, greedy_sampler>>(llada, prompts, 16, block_causal_mask{4}),
                          decode<decoder<M, block_causal_mask, no_cache, threshold_schedule, greedy_sampler>>(llada, prompts, 16, block_causal_mask{4}));
        check_same_tokens(decode<decoder<M, causal_mask, prefix_cache, next_slot_schedule, greedy_sampler>>(dream, prompts, 10),
                          decode<decoder<M, causal_mask, no_cache, next_slot_schedule, greedy_sampler>>(dream, prompts, 10));
    }
}

// A bf16 KV cache (transformer_bf16_kv) against the f32 one of the same bf16 model: both run the same
// products on the same shapes, so they differ only by the rounding of K and V, whose effect on the
// logits bf16_kv_tolerance bounds (its argument: cuda_test_util.cuh and docs/determinism.md).
TEST_SUITE("parity") {
    TEST_CASE("a bf16 KV cache: logits within bf16_kv_tolerance of the f32 cache's, at half the cache's bytes") {
        using gpu_kv16 = dlm::cuda::transformer_bf16_kv;
        static_assert(std::same_as<gpu_kv16::kv_element, dlm::cuda::bf16>);
        for (const auto& [name, shift] : {std::pair{"llada_tiny", false}, std::pair{"dream_tiny", true}}) {
            CAPTURE(std::string(name));
            auto f32_kv = gpu16::load(models_dir / name);
            auto bf16_kv = gpu_kv16::load(models_dir / name);
            const fixture f = read_fixture(name, shift);
            const block_causal_mask mask{4};
            const auto reference = run(f32_kv, mask, f.ids, f.layout, full_plan(f.layout));
            const auto halved = run(bf16_kv, mask, f.ids, f.layout, full_plan(f.layout));
            const double d = scaled_diff(halved, reference);
            MESSAGE(name << ": bf16 KV vs f32 KV " << d);
            CHECK(d > 0);  // the bf16 model really rounds its keys and values
            CHECK(d < bf16_kv_tolerance);
            CHECK(bf16_kv.make_kv_cache(16).bytes() * 2 == f32_kv.make_kv_cache(16).bytes());
        }
    }
}

TEST_SUITE("cache") {
    TEST_CASE("a bf16 KV cache is exact too: cached steps equal a full recompute, and prefix_cache decodes as no_cache") {
        // Window keys and cached keys are rounded alike, so a cache reads what a recompute computes.
        auto llada = dlm::cuda::transformer_bf16_kv::load(models_dir / "llada_tiny");
        CHECK(compare_with_full_recompute<prefix_cache>(llada, block_causal_mask{4}, {8, 16, 4, false}, 5, 3, bf16_tolerance) == 12);
        const std::vector<tvec> prompts{{5, 17, 42, 7, 99, 3}, {11, 12, 250, 31, 8, 200, 140, 77, 6, 2, 19}};
        using M = dlm::cuda::transformer_bf16_kv;
        check_same_tokens(decode<decoder<M, block_causal_mask, prefix_cache, threshold_schedule, greedy_sampler>>(llada, prompts, 16, block_causal_mask{4}),
                          decode<decoder<M, block_causal_mask, no_cache, threshold_schedule, greedy_sampler>>(llada, prompts, 16, block_causal_mask{4}));
    }
}

TEST_SUITE("cache") {
    TEST_CASE("with batch-invariant products, an exact cache equals a full recompute bit for bit, with an f32 or a bf16 KV cache") {
        // The skinny GEMM gives a row the same bits in a product of 1 or 16 rows (skinny_gemm.cuh), the
        // other kernels work row by row, and keys of at most 32 positions take one attention split in
        // either forward: a cached step (the block's rows) and the full recompute (16 rows) then compute
        // every row alike, and the cache holds the very keys and values (rounded once, to KV) that the
        // recompute computes in its window. So the logits must be equal, not only close.
        const canvas_layout l{8, 8, 4, false};  // 16 positions: every product takes the skinny kernel
        auto f32_kv = gpu16::load(models_dir / "llada_tiny");
        auto bf16_kv = dlm::cuda::transformer_bf16_kv::load(models_dir / "llada_tiny");
        f32_kv.set_gemm_path(dlm::cuda::gemm_path::skinny);
        bf16_kv.set_gemm_path(dlm::cuda::gemm_path::skinny);
        CHECK(compare_with_full_recompute<prefix_cache>(f32_kv, block_causal_mask{4}, l, 5, 3, 0.0) == 6);
        CHECK(compare_with_full_recompute<prefix_cache>(bf16_kv, block_causal_mask{4}, l, 5, 3, 0.0) == 6);
    }
}

TEST_SUITE("presets") {
    TEST_CASE("with a bf16 KV cache, device-side decoding equals host-side decoding") {
        auto g = dlm::cuda::transformer_bf16_kv::load(models_dir / "dream_tiny");
        const std::vector<tvec> prompts{{5, 17, 42, 7, 99, 3}, {11, 12, 250, 31, 8, 200, 140, 77, 6, 2, 19}};
        using P = presets::cdlm<dlm::cuda::transformer_bf16_kv>;
        const auto host = decode<P>(g, prompts, 32, block_causal_mask{8});
        const auto device = decode<dlm::cuda::device_decoder_t<P>>(g, prompts, 32, block_causal_mask{8});
        check_same_tokens(host, device);
        for (const auto& s : device.sequences) check_no_mask_committed(s, g.mask_id());
    }
}

TEST_SUITE("errors") {
    TEST_CASE("a failed launch names its kernel") {
        dlm::cuda::stream_context ctx;
        dlm::cuda::device_buffer<float> d(4, "a test buffer");
        // 2048 threads per block: an invalid configuration, reported at the launch (not sticky).
        dlm::cuda::kernels::convert<float, float><<<1, 2048, 0, ctx.stream()>>>(d.data(), d.data(), 4);
        CHECK_THROWS_WITH_AS(dlm::cuda::check_launch("dlm::cuda my_kernel (layer 3)", ctx.stream()), doctest::Contains("my_kernel (layer 3)"),
                             dlm::cuda::cuda_error);
        CHECK_NOTHROW(ctx.synchronize("after a failed launch"));
    }

    TEST_CASE("refused: missing keys, wrong sizes, unsupported options, bad folders") {
        auto m = gpu32::load(models_dir / "llada_tiny");
        const canvas_layout l{8, 16, 4, false};
        const tvec canvas = random_canvas(8, 16, 299, 299, 1);
        auto cache = m.make_kv_cache(l.size());
        // The prefix plan of block 1 reads keys that were never stored.
        CHECK_THROWS_WITH_AS(run(m, block_causal_mask{4}, canvas, l, prefix_cache{}.plan(block_causal_mask{4}, l, {1, 1}), &cache),
                             doctest::Contains("nor stored in the KV cache"), contract_error);
        std::vector<float> wrong(7);
        const forward_request<gpu32::kv_cache> rq{canvas, l, full_plan(l), nullptr};
        CHECK_THROWS_AS(m.forward(std::span<const forward_request<gpu32::kv_cache>>(&rq, 1), bidirectional_mask{}, wrong), contract_error);
        tvec bad = canvas;
        bad[2] = 5000;
        CHECK_THROWS_WITH_AS(run(m, bidirectional_mask{}, bad, l, full_plan(l)), doctest::Contains("outside the vocabulary"), invalid_parameter);
        using D = dlm::cuda::device_decoder<gpu32, semi_ar_mask, no_cache, llada_schedule, categorical_sampler>;
        CHECK_THROWS_WITH_AS(D(m, semi_ar_mask{8}, {}, {}, categorical_sampler{0.5f, 10}), doctest::Contains("top_k"), invalid_parameter);
        // A block over the device selection's 1024 slots, on a model whose context holds it (the context
        // is checked first, as by dlm::decoder).
        auto wide_cfg = random_config(2, 2, 16, false, false);
        wide_cfg.max_context = 4096;
        gpu32 wide(wide_cfg, cpu::random_weights(wide_cfg, 3));
        D d(wide, semi_ar_mask{0}, {}, llada_schedule{2048});
        CHECK_THROWS_WITH_AS(d.generate(tvec{1, 2}, {2048, 0}), doctest::Contains("block_length"), invalid_parameter);
        D narrow(m, semi_ar_mask{0}, {}, llada_schedule{2048});
        CHECK_THROWS_WITH_AS(narrow.generate(tvec{1, 2}, {2048, 0}), doctest::Contains("context of 256"), invalid_parameter);
        CHECK_THROWS_AS((void)gpu32::load(models_dir / "no_such_model"), file_error);
        auto cfg = random_config(2, 2, 320, false, false);
        CHECK_THROWS_WITH_AS(gpu32(cfg, cpu::random_weights(cfg, 1)), doctest::Contains("head_dim"), invalid_parameter);
    }
}
