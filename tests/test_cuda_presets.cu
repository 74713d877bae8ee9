// Every preset on the GPU: identical greedy tokens on CPU and GPU (f32 storage), and device-side
// decoding (dlm::cuda::device_decoder) equal to host-side decoding (dlm::decoder) on the same GPU model.
#include <algorithm>
#include <limits>
#include <map>

#include "cuda_test_util.cuh"

using namespace dlm_cuda_test;

namespace {

template <class Gpu>
void check_presets(cpu::transformer* cpu, Gpu& gpu, const std::vector<tvec>& prompts) {
    const index_t gen = 32;
    auto both = [&]<template <class> class Preset>(const std::string& name, auto... options) {  // a string: CAPTURE logs its text
        CAPTURE(name);
        const auto host = decode<Preset<Gpu>>(gpu, prompts, gen, options...);
        const auto device = decode<dlm::cuda::device_decoder_t<Preset<Gpu>>>(gpu, prompts, gen, options...);
        check_same_tokens(host, device);
        for (std::size_t i = 0; i < host.sequences.size(); ++i) {
            CHECK(host.sequences[i].stats.forwards == device.sequences[i].stats.forwards);
            CHECK(host.sequences[i].stats.rows_computed == device.sequences[i].stats.rows_computed);
            CHECK(host.sequences[i].settings.seed.value == device.sequences[i].settings.seed.value);
            check_no_mask_committed(device.sequences[i], gpu.mask_id());
        }
        if (cpu) check_same_tokens(decode<Preset<cpu::transformer>>(*cpu, prompts, gen, options...), host);
    };
    both.template operator()<presets::autoregressive>("autoregressive");
    both.template operator()<presets::llada>("llada");
    both.template operator()<presets::dream>("dream", bidirectional_mask{}, no_cache{}, dream_schedule{32});
    both.template operator()<presets::fast_dllm>("fast_dllm", semi_ar_mask{8});
    both.template operator()<presets::fast_dllm_dual>("fast_dllm_dual", semi_ar_mask{8});
    both.template operator()<presets::cdlm>("cdlm", block_causal_mask{8});
    both.template operator()<presets::cd4lm>("cd4lm", semi_ar_mask{8});
}


}  // namespace

TEST_SUITE("presets") {
    TEST_CASE("every preset: identical greedy tokens on CPU and GPU (f32), and device-side decoding equals host-side") {
        const std::vector<tvec> prompts{{5, 17, 42, 7, 99, 3}, {11, 12, 250, 31, 8, 200, 140, 77, 6, 2, 19}};
        for (const std::string name : {"llada_tiny", "dream_tiny"}) {
            CAPTURE(name);
            auto cpu = cpu::transformer::load(models_dir / name, {.weight_dtype = io::dtype::f32});  // as the f32 GPU model
            auto g32 = gpu32::load(models_dir / name);
            check_presets(&cpu, g32, prompts);
        }
    }

    TEST_CASE("device-side decoding equals host-side decoding with bf16 weights") {
        const std::vector<tvec> prompts{{5, 17, 42, 7, 99, 3}, {11, 12, 250, 31, 8, 200, 140, 77, 6, 2, 19}, {1}};
        for (const std::string name : {"llada_tiny", "dream_tiny"}) {
            CAPTURE(name);
            auto g16 = gpu16::load(models_dir / name);
            check_presets(static_cast<cpu::transformer*>(nullptr), g16, prompts);
        }
    }

    TEST_CASE("sampled decoding (temperature > 0) is the same on host and device, and on CPU and GPU") {
        auto cpu = cpu::transformer::load(models_dir / "llada_tiny");
        auto g32 = gpu32::load(models_dir / "llada_tiny");
        const std::vector<tvec> prompts{{5, 17, 42, 7, 99, 3}, {8, 9}};
        using P = presets::llada<gpu32>;
        const presets::llada_sampler hot(0.8f);
        const auto host = decode<P>(g32, prompts, 32, semi_ar_mask{8}, no_cache{}, llada_schedule{32}, hot);
        const auto device = decode<dlm::cuda::device_decoder_t<P>>(g32, prompts, 32, semi_ar_mask{8}, no_cache{}, llada_schedule{32}, hot);
        check_same_tokens(host, device);
        check_same_tokens(decode<presets::llada<cpu::transformer>>(cpu, prompts, 32, semi_ar_mask{8}, no_cache{}, llada_schedule{32}, hot), host);
    }

    TEST_CASE("each sequence draws from its own seed: identical prompts sample differently, on the device as on the host") {
        auto g = gpu32::load(models_dir / "llada_tiny");
        const std::vector<tvec> prompts{{5, 17, 42, 7}, {5, 17, 42, 7}, {5, 17, 42, 7}};
        using P = presets::llada<gpu32>;
        const presets::llada_sampler hot(1.0f);
        const auto host = decode<P>(g, prompts, 32, semi_ar_mask{8}, no_cache{}, llada_schedule{32}, hot);
        const auto device = decode<dlm::cuda::device_decoder_t<P>>(g, prompts, 32, semi_ar_mask{8}, no_cache{}, llada_schedule{32}, hot);
        check_same_tokens(host, device);
        CHECK(device.sequences[0].tokens != device.sequences[1].tokens);
        CHECK(device.sequences[1].tokens != device.sequences[2].tokens);
        CHECK(device.sequences[0].settings.seed.value == 5);
        CHECK(device.sequences[1].settings.seed.value == sequence_seed(5, 1));
        // Given seeds: the same seed, the same sample.
        generation_options o{32, 5};
        o.seeds = {9, 4, 9};
        dlm::cuda::device_decoder_t<P> d(g, semi_ar_mask{8}, no_cache{}, llada_schedule{32}, hot);
        const auto seeded = d.generate(std::span<const tvec>(prompts), o);
        CHECK(seeded.sequences[0].tokens == seeded.sequences[2].tokens);
        CHECK(seeded.sequences[0].tokens != seeded.sequences[1].tokens);
        check_same_tokens(P(g, semi_ar_mask{8}, no_cache{}, llada_schedule{32}, hot).generate(std::span<const tvec>(prompts), o), seeded);
    }

    TEST_CASE("a NaN query weight fails every sequence on the device as on the host (a head's NaN scores are never read as no key)") {
        const auto cfg = random_config(4, 2, 16, false, false);
        auto w = cpu::random_weights(cfg, 4);
        std::fill_n(w.layers[0].q_proj.data(), w.layers[0].q_proj.cols(), std::numeric_limits<float>::quiet_NaN());  // q[0] of head 0
        gpu32 g(cfg, w);
        const std::vector<tvec> prompts{{5, 6, 8}, {9, 10}};
        using P = presets::fast_dllm<gpu32>;
        const auto host = decode<P>(g, prompts, 16, semi_ar_mask{8});
        const auto device = decode<dlm::cuda::device_decoder_t<P>>(g, prompts, 16, semi_ar_mask{8});
        REQUIRE(device.sequences.size() == 2);
        for (std::size_t i = 0; i < 2; ++i) {
            CAPTURE(i);
            CHECK(host.sequences[i].failed());
            CHECK(device.sequences[i].failed());
            CHECK(device.sequences[i].message.find("NaN") != std::string::npos);
        }
    }

    TEST_CASE("a NaN in one sequence ends that sequence alone, with status failed, on the device as on the host") {
        const auto cfg = random_config(4, 2, 16, false, false);
        auto w = cpu::random_weights(cfg, 4);
        std::fill_n(w.embedding.data() + 7 * w.embedding.cols(), w.embedding.cols(),
                    std::numeric_limits<float>::quiet_NaN());  // token 7 poisons its sequence
        gpu32 g(cfg, w);
        const std::vector<tvec> prompts{{5, 6, 8}, {5, 7, 8}, {9, 10}};
        using P = presets::fast_dllm<gpu32>;
        const auto host = decode<P>(g, prompts, 16, semi_ar_mask{8});
        const auto device = decode<dlm::cuda::device_decoder_t<P>>(g, prompts, 16, semi_ar_mask{8});
        REQUIRE(device.sequences.size() == 3);
        CHECK(device.sequences[1].failed());
        CHECK(device.sequences[1].message.find("NaN") != std::string::npos);
        CHECK_THROWS_AS(device.sequences[1].rethrow_if_failed(), numeric_error);
        CHECK(!device.sequences[0].failed());
        CHECK(!device.sequences[2].failed());
        CHECK(host.sequences[1].failed());
        check_same_tokens(host, device);
        dlm::cuda::device_decoder_t<P> alone(g, semi_ar_mask{8});
        CHECK_THROWS_AS((void)alone.generate(prompts[1], {16, 5}), numeric_error);  // a single prompt's failure is thrown
    }

    TEST_CASE("CD4LM defers end-of-turn ids like EOS, on the device as on the host") {
        auto g = gpu32::load(models_dir / "llada_tiny");
        const std::vector<tvec> prompts{{5, 17, 42, 7, 99, 3}, {11, 12, 250, 31}};
        generation_options o{32, 5};
        // 114 is among the second prompt's early predictions, so the guard defers some slots and not
        // others and the commit order changes (checked with the CPU model). Deferring nearly every token
        // would not show it: with every masked slot deferred the guard commits the most probable ones,
        // which is the order it would have used anyway.
        o.end_of_turn_ids = std::vector<token_id>{114};
        using P = presets::cd4lm<gpu32>;
        const auto host = P(g, semi_ar_mask{8}).generate(std::span<const tvec>(prompts), o);
        dlm::cuda::device_decoder_t<P> d(g, semi_ar_mask{8});
        const auto device = d.generate(std::span<const tvec>(prompts), o);
        check_same_tokens(host, device);
        const auto plain = d.generate(std::span<const tvec>(prompts), {32, 5});
        CHECK((plain.sequences[0].commit_forward != device.sequences[0].commit_forward ||
               plain.sequences[1].commit_forward != device.sequences[1].commit_forward));
    }

    TEST_CASE("CUDA graphs: steps replayed from a captured graph decode what uncaptured steps decode") {
        auto g = gpu16::load(models_dir / "llada_tiny");
        const std::vector<tvec> prompts{{5, 17, 42, 7, 99, 3}, {11, 12, 250, 31, 8, 200, 140, 77, 6, 2, 19}};
        using P = presets::cdlm<gpu16>;
        dlm::cuda::device_decoder_t<P> with(g, block_causal_mask{8}), without(g, block_causal_mask{8});
        without.use_graphs(false);
        const auto a = with.generate(std::span<const tvec>(prompts), {48, 5});
        const auto b = without.generate(std::span<const tvec>(prompts), {48, 5});
        check_same_tokens(a, b);
        CHECK_MESSAGE(with.graph_status().empty(), with.graph_status());
        CHECK(with.graph_replays() > 0);
        CHECK(without.graph_replays() == 0);
        // A second decode replays the graphs of the first (same shapes, same buffers).
        const std::size_t before = with.graph_replays();
        check_same_tokens(with.generate(std::span<const tvec>(prompts), {48, 5}), a);
        CHECK(with.graph_replays() > before);
    }

    TEST_CASE("the engine steps on the device as on the host: sequences joining mid-batch, their own policies, guidance, cancel") {
        auto g = gpu32::load(models_dir / "llada_tiny");
        using P = presets::llada<gpu32>;
        using D = dlm::cuda::device_decoder_t<P>;
        const presets::llada_sampler hot(0.7f);
        P on_host(g, semi_ar_mask{8}, no_cache{}, llada_schedule{32}, hot);
        D on_device(g, semi_ar_mask{8}, no_cache{}, llada_schedule{32}, hot);
        // One script of adds, steps and a cancel; what each sequence decoded, and the prefixes streamed.
        const auto run = [](auto& dec) {
            dlm::engine e(dec);
            typename decltype(e)::policies own;
            own.mask = semi_ar_mask{16};
            own.schedule = llada_schedule{16};
            own.sampler = presets::llada_sampler(0.f);
            generation_options guided{32, 3};
            guided.cfg_scale = 1.0;
            std::vector<std::uint64_t> ids{e.add({5, 17, 42, 7}, {32, 1}), e.add({11, 12, 250}, guided)};
            std::map<std::uint64_t, sequence_result> done;
            std::vector<std::vector<token_id>> streamed;
            for (int step = 1; !e.idle(); ++step) {
                e.step();
                if (step == 2) ids.push_back(e.add({8, 9, 10, 11, 12}, {32, 7}, own));
                if (step == 3) ids.push_back(e.add({99, 98}, {32, 2}));
                if (step == 5) e.cancel(ids[3]);
                for (const auto id : ids)
                    if (done.find(id) == done.end()) {
                        const auto p = e.committed_prefix(id);
                        streamed.emplace_back(p.begin(), p.end());
                    }
                for (auto& [id, r] : e.take_finished()) done.emplace(id, std::move(r));
            }
            return std::pair(std::move(done), std::move(streamed));
        };
        const auto [host, host_streamed] = run(on_host);
        const auto [device, device_streamed] = run(on_device);
        REQUIRE(host.size() == 4);
        REQUIRE(device.size() == 4);
        for (const auto& [id, r] : host) {
            CAPTURE(id);
            const sequence_result& d = device.at(id);
            CHECK(d.status == r.status);
            CHECK(d.tokens == r.tokens);
            CHECK(d.commit_forward == r.commit_forward);
            CHECK(d.stats.forwards == r.stats.forwards);
        }
        CHECK(device.at(3).cancelled());
        CHECK(device_streamed == host_streamed);
        CHECK(device.at(2).stats.steps_per_block == std::vector<index_t>{8, 8});  // its own blocks of 16, 16 steps
    }

    TEST_CASE("the device decoder refuses by name what its kernels do not implement") {
        auto g = gpu32::load(models_dir / "llada_tiny");
        using D = dlm::cuda::device_decoder_t<presets::llada<gpu32>>;
        D d(g, semi_ar_mask{8}, no_cache{}, llada_schedule{32});
        dlm::engine e(d);
        typename decltype(e)::policies filtered;
        filtered.sampler = presets::llada_sampler(0.8f, 5);
        CHECK_THROWS_WITH_AS((void)e.add({5, 6}, {32, 1}, filtered), doctest::Contains("top_k"), invalid_parameter);
        CHECK(e.idle());  // nothing was queued
        CHECK_THROWS_WITH_AS(D(g, semi_ar_mask{8}, no_cache{}, llada_schedule{32}, presets::llada_sampler(0.8f, 0, 0.9f)),
                             doctest::Contains("top_p"), invalid_parameter);
    }

    TEST_CASE("the step callback sees the same events and can cancel") {
        auto g = gpu32::load(models_dir / "llada_tiny");
        dlm::cuda::device_decoder_t<presets::cdlm<gpu32>> d(g, block_causal_mask{8});
        int events = 0;
        const auto r = d.generate(tvec{5, 6, 7}, {32, 1}, [&](const step_event& e) {
            ++events;
            CHECK(!e.committed.empty());
            return events == 3 ? step_action::cancel : step_action::proceed;
        });
        CHECK(events == 3);
        CHECK(r.cancelled());
    }
}

namespace {

/// Decodes `prompts` on an engine of `d` with a prompt cache of `bytes` (0: none): the first alone
/// until its first forward stored its prompt, then the rest join it (batched), or each after the
/// previous finished (alone). Returns the results in order and the prompt cache's reused tokens.
template <class Decoder>
std::pair<std::vector<sequence_result>, std::uint64_t> run_engine(Decoder& d, const std::vector<tvec>& prompts, const generation_options& o,
                                                                   std::uint64_t bytes, bool batched) {
    dlm::engine e(d, prompt_cache_options{.bytes = bytes, .causal_block = 16});
    std::vector<sequence_result> out(prompts.size());
    (void)e.add(prompts[0], o);
    e.step();
    for (std::size_t i = 1; i < prompts.size(); ++i) {
        if (!batched)
            while (!e.idle()) e.step();
        (void)e.add(prompts[i], o);
    }
    while (!e.idle()) e.step();
    for (auto& [id, r] : e.take_finished()) out[static_cast<std::size_t>(id)] = std::move(r);
    const std::uint64_t hits = e.prompt_cache() ? e.prompt_cache()->stats().hit_tokens : 0;
    if (e.prompt_cache()) CHECK(e.prompt_cache()->bytes() <= e.prompt_cache()->capacity_bytes());
    return {std::move(out), hits};
}

}  // namespace

TEST_SUITE("cache") {
    TEST_CASE("copy_kv copies stored K/V between device stores of any capacity, and a forward reading the copy equals one reading the original") {
        auto g = gpu16::load(models_dir / "llada_tiny");
        const block_causal_mask mask{8};
        const canvas_layout l{16, 16, 8, false};
        tvec canvas = random_canvas(l.prompt_length, 0, g.mask_id(), g.mask_id(), 11);
        canvas.resize(static_cast<std::size_t>(l.size()), g.mask_id());
        auto original = g.make_kv_cache(l.size());
        const forward_plan first = prefix_cache{}.plan(mask, l, {0, 0}), next = prefix_cache{}.plan(mask, l, {0, 1});
        REQUIRE(first.store_end > 0);
        REQUIRE(next.window_begin >= first.store_end);  // the next forward reads the stored prompt, computes none of it
        (void)run(g, mask, canvas, l, first, &original);
        // A larger store: its slabs have another pitch than the source's, so a copy that ignored the
        // capacities would put keys of one (layer, head) into another's slab.
        auto copy = g.make_kv_cache(l.size() + 24);
        g.copy_kv(original, 0, copy, 0, first.store_end);
        for (index_t p = 0; p < copy.capacity; ++p) CHECK(static_cast<bool>(copy.stored[static_cast<std::size_t>(p)]) == (p < first.store_end));
        CHECK(g.kv_cache_bytes(l.size() + 24) == copy.bytes());
        const auto a = run(g, mask, canvas, l, next, &original);
        const auto b = run(g, mask, canvas, l, next, &copy);
        CHECK(a == b);  // the same bytes read by the same kernels: bit for bit
        // Refusals, before any copy is enqueued.
        auto empty = g.make_kv_cache(l.size());
        CHECK_THROWS_WITH_AS(g.copy_kv(empty, 0, copy, 0, 4), doctest::Contains("never stored"), contract_error);
        CHECK_THROWS_WITH_AS(g.copy_kv(original, 0, empty, l.size() - 2, 4), doctest::Contains("cuda::copy_kv: cannot copy 4 positions"),
                             contract_error);
        auto other = gpu16::random(random_config(4, 2, 16, false, true), 1);
        auto foreign = other.make_kv_cache(l.size());
        CHECK_THROWS_WITH_AS(g.copy_kv(original, 0, foreign, 0, 4), doctest::Contains("layers, heads or head size differ"), contract_error);
        g.copy_kv(original, 0, empty, 0, 0);  // nothing to copy: fine
    }

    TEST_CASE("with a prompt cache, device-side CDLM reuses an equal prompt and decodes the same tokens, bit for bit with batch-invariant products") {
        // An 8-token prompt and blocks of 8, one request at a time: every forward has at most 16 rows (the
        // skinny GEMM's batch invariant range) and 24 keys (one attention split), so a request whose
        // prompt K/V were copied from the cache computes every remaining row as the one that stored them.
        auto g = gpu16::load(models_dir / "llada_tiny");
        g.set_gemm_path(dlm::cuda::gemm_path::skinny);
        dlm::cuda::device_decoder_t<presets::cdlm<gpu16>> d(g, block_causal_mask{8});
        static_assert(dlm::detail::supports_prompt_cache<decltype(d)>);
        const std::vector<tvec> prompts(3, tvec{5, 17, 42, 7, 99, 3, 11, 12});
        const generation_options o{16, 5};
        const auto [plain, no_hits] = run_engine(d, prompts, o, 0, false);
        const auto [cached, hits] = run_engine(d, prompts, o, std::uint64_t{64} << 20, false);
        CHECK(no_hits == 0);
        CHECK(hits == 8 * (prompts.size() - 1));
        for (std::size_t i = 0; i < prompts.size(); ++i) {
            CAPTURE(i);
            CHECK(cached[i].tokens == plain[i].tokens);
            CHECK(cached[i].commit_forward == plain[i].commit_forward);
            CHECK(cached[i].commit_confidence == plain[i].commit_confidence);  // bit for bit
            CHECK(cached[i].stats.rows_computed == plain[i].stats.rows_computed - (i == 0 ? 0 : 8));
        }
    }

    TEST_CASE("with a prompt cache, device-side autoregressive requests sharing a prefix reuse its blocks and decode the same tokens") {
        // 40 shared tokens in blocks of 16: two blocks are reused. The first forwards differ in rows (45
        // against 13), so the GEMMs may differ in the last bits (docs/determinism.md); the greedy tokens
        // of these prompts are not near ties.
        auto g = gpu16::load(models_dir / "llada_tiny");
        dlm::cuda::device_decoder_t<presets::autoregressive<gpu16>> d(g);
        std::vector<tvec> prompts(3);
        for (std::size_t i = 0; i < prompts.size(); ++i) {
            for (std::size_t j = 0; j < 40; ++j) prompts[i].push_back(static_cast<token_id>((7 * j + 3) % 250));
            for (std::size_t j = 0; j < 5; ++j) prompts[i].push_back(static_cast<token_id>((11 * i + 5 * j + 1) % 250));
        }
        const generation_options o{12, 1};
        const auto [plain, no_hits] = run_engine(d, prompts, o, 0, true);
        const auto [cached, hits] = run_engine(d, prompts, o, std::uint64_t{64} << 20, true);
        CHECK(no_hits == 0);
        CHECK(hits == 32 * (prompts.size() - 1));
        for (std::size_t i = 0; i < prompts.size(); ++i) {
            CAPTURE(i);
            CHECK(cached[i].tokens == plain[i].tokens);
            CHECK(cached[i].stats.rows_computed == plain[i].stats.rows_computed - (i == 0 ? 0 : 32));
        }
    }
}
