// The CPU transformer: parity with Hugging Face transformers on tiny random models (fixtures from
// tools/make_model_fixtures.py), exact KV caching, batch invariance, loading, errors, presets.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <dlm/cpu/transformer.hpp>
#include <dlm/io/safetensors_writer.hpp>
#include <dlm/presets.hpp>
#include <dlm/schedule/next_slot.hpp>
#include <dlm/schedule/threshold.hpp>

#include "cache_walk.hpp"
#include "io_test_util.hpp"
#include "support/amx_model.hpp"
#include "support/transformer_testing.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_transformer {

using namespace dlm;
using namespace dlm_test::cpu_model;

namespace {

const std::filesystem::path models_dir = std::filesystem::path(DLM_TEST_DATA) / "models";

struct fixture {
    tvec ids;
    canvas_layout layout;
    nlohmann::json cases;
    std::filesystem::path dir;

    std::vector<float> logits(const std::string& name) const { return dlm_test::read_f32_file(dir / cases.at(name).get<std::string>()); }
};

fixture read_fixture(const std::string& name, bool shift) {
    fixture f;
    f.dir = models_dir / name;
    std::ifstream in(f.dir / "expected.json");
    REQUIRE_MESSAGE(in, "missing fixture " << f.dir << " (tools/make_model_fixtures.py)");
    const auto j = nlohmann::json::parse(in);
    f.ids = j.at("input_ids").get<tvec>();
    f.layout = {j.at("prompt_length").get<index_t>(), j.at("gen_length").get<index_t>(), j.at("block_length").get<index_t>(), shift};
    f.cases = j.at("cases");
    return f;
}

}  // namespace

TEST_CASE("the vector exp is accurate, finite, and exactly 0 for -inf") {
    double worst = 0;
    for (int i = 0; i <= 20000; ++i) {
        const float x = -87.0f + 175.0f * static_cast<float>(i) / 20000.0f;
        const float e = cpu::vexp(cpu::vbroadcast(x))[0];
        worst = std::max(worst, std::abs(e - std::exp(static_cast<double>(x))) / std::exp(static_cast<double>(x)));
    }
    CHECK(worst < 3e-7);
    CHECK(cpu::vexp(cpu::vbroadcast(-std::numeric_limits<float>::infinity()))[0] == 0.0f);
    CHECK(cpu::vexp(cpu::vbroadcast(-100.0f))[0] == 0.0f);
    CHECK(std::isfinite(cpu::vexp(cpu::vbroadcast(1000.0f))[0]));
    CHECK(std::isfinite(cpu::vexp(cpu::vbroadcast(std::numeric_limits<float>::infinity()))[0]));
}

TEST_CASE("llada_tiny (f32, LLaDA names and config) matches transformers: bidirectional and block-causal") {
    auto m = transformer::load(models_dir / "llada_tiny");
    CHECK(m.config().arch == io::architecture::llada);
    CHECK(m.vocab_size() == 300);
    CHECK(m.mask_id() == 299);
    CHECK_FALSE(m.logits_shift());
    const fixture f = read_fixture("llada_tiny", false);
    const auto bidi = run(m, bidirectional_mask{}, f.ids, f.layout, full_plan(f.layout));
    CHECK(max_rel_diff(bidi, f.logits("bidirectional")) < 1e-4);
    const auto bc = run(m, block_causal_mask{f.layout.block_length}, f.ids, f.layout, full_plan(f.layout));
    CHECK(max_rel_diff(bc, f.logits("block_causal")) < 1e-4);
    MESSAGE("llada_tiny: max rel diff bidirectional " << max_rel_diff(bidi, f.logits("bidirectional")) << ", block-causal "
                                                       << max_rel_diff(bc, f.logits("block_causal")));
}

TEST_CASE("dream_tiny (bf16, tied head, q/k/v biases) matches transformers: bidirectional and causal") {
    // transformers ran the bf16 weights in f32: so does dlm when asked to widen them at load.
    auto m = transformer::load(models_dir / "dream_tiny", {.weight_dtype = io::dtype::f32});
    CHECK(m.config().arch == io::architecture::dream);
    CHECK(m.logits_shift());
    CHECK(m.weight_type() == "f32");
    const fixture f = read_fixture("dream_tiny", true);
    const auto bidi = run(m, bidirectional_mask{}, f.ids, f.layout, full_plan(f.layout));
    CHECK(max_rel_diff(bidi, f.logits("bidirectional")) < 1e-4);
    const auto causal = run(m, causal_mask{}, f.ids, f.layout, full_plan(f.layout));
    CHECK(max_rel_diff(causal, f.logits("causal")) < 1e-4);
    MESSAGE("dream_tiny (f32): max rel diff bidirectional " << max_rel_diff(bidi, f.logits("bidirectional")) << ", causal "
                                                             << max_rel_diff(causal, f.logits("causal")));

    // Held as stored (bf16), the products take activations rounded to bf16 (relative error up to
    // 2^-8 per element, docs/models.md), in all 8 matrix products a row passes: the logits of this
    // random model (|logit| up to about 8) stay within 0.15 of max(1, |logit|) of f32 compute
    // (measured 0.076 and 0.089), and the top token of each row is the same in most rows.
    auto b = transformer::load(models_dir / "dream_tiny");
    CHECK(b.weight_type() == "bf16");
    CHECK(b.weight_bytes() < m.weight_bytes());
    const auto bidi16 = run(b, bidirectional_mask{}, f.ids, f.layout, full_plan(f.layout));
    const auto causal16 = run(b, causal_mask{}, f.ids, f.layout, full_plan(f.layout));
    CHECK(max_rel_diff(bidi16, f.logits("bidirectional")) < 0.15);
    CHECK(max_rel_diff(causal16, f.logits("causal")) < 0.15);
    auto same_top = [&](const std::vector<float>& a, const std::vector<float>& ref) {
        const std::size_t v = static_cast<std::size_t>(b.vocab_size()), rows = a.size() / v;
        std::size_t same = 0;
        for (std::size_t r = 0; r < rows; ++r)
            same += std::max_element(a.begin() + r * v, a.begin() + (r + 1) * v) - (a.begin() + r * v) ==
                    std::max_element(ref.begin() + r * v, ref.begin() + (r + 1) * v) - (ref.begin() + r * v);
        return static_cast<double>(same) / static_cast<double>(rows);
    };
    CHECK(same_top(bidi16, f.logits("bidirectional")) >= 0.8);
    CHECK(same_top(causal16, f.logits("causal")) >= 0.8);
    MESSAGE("dream_tiny (bf16): max rel diff bidirectional " << max_rel_diff(bidi16, f.logits("bidirectional")) << ", causal "
                                                              << max_rel_diff(causal16, f.logits("causal")) << "; same top token in "
                                                              << same_top(bidi16, f.logits("bidirectional")) << " / "
                                                              << same_top(causal16, f.logits("causal")) << " of the rows");
}

TEST_CASE("logits are computed only for the planned rows, and equal the full forward's rows") {
    auto m = transformer::load(models_dir / "llada_tiny");
    const fixture f = read_fixture("llada_tiny", false);
    const auto full = run(m, bidirectional_mask{}, f.ids, f.layout, full_plan(f.layout));
    forward_plan p = full_plan(f.layout);
    p.logits_begin = 9;
    p.logits_end = 13;
    const auto part = run(m, bidirectional_mask{}, f.ids, f.layout, p);
    const std::vector<float> rows(full.begin() + 9 * 300, full.begin() + 13 * 300);
    CHECK(bitwise_equal(part, rows));
}

TEST_CASE("a sequence gets bit-identical logits alone and inside a batch, on every kernel path") {
  for (const kernel_path& path : kernel_paths()) {
    CAPTURE(cpu::isa_name(path.isa));
    CAPTURE(path.name());
    const path_scope on(path);
    transformer m = make_model(small_config(io::architecture::dream, false, true), 7, path);
    const block_causal_mask mask{8};
    // Three sequences of different lengths and plans; the second one uses a KV cache.
    const canvas_layout la{5, 16, 8, true}, lb{37, 32, 8, true}, lc{11, 8, 8, true};
    const tvec a = random_canvas(5, 16, 96, 96, 1), b = random_canvas(37, 32, 96, 96, 2), c = random_canvas(11, 8, 96, 96, 3);
    const forward_plan pa = full_plan(la), pc = no_cache{}.plan(mask, lc, {0, 0});
    const forward_plan pb = prefix_cache{}.plan(mask, lb, {0, 0});  // stores the prompt
    kv cache_b = m.make_kv_cache(lb.size()), cache_b_alone = m.make_kv_cache(lb.size());

    const auto alone_a = run(m, mask, a, la, pa);
    const auto alone_b = run(m, mask, b, lb, pb, &cache_b_alone);
    const auto alone_c = run(m, mask, c, lc, pc);

    const std::vector<forward_request<kv>> batch{{a, la, pa, nullptr}, {b, lb, pb, &cache_b}, {c, lc, pc, nullptr}};
    std::vector<float> out(static_cast<std::size_t>(pa.logits_rows() + pb.logits_rows() + pc.logits_rows()) * 97);
    m.forward(std::span<const forward_request<kv>>(batch), mask, out);
    const auto at = [&](std::size_t row0, const forward_plan& p) {
        return std::vector<float>(out.begin() + static_cast<std::ptrdiff_t>(row0 * 97),
                                  out.begin() + static_cast<std::ptrdiff_t>((row0 + static_cast<std::size_t>(p.logits_rows())) * 97));
    };
    CHECK(bitwise_equal(at(0, pa), alone_a));
    CHECK(bitwise_equal(at(static_cast<std::size_t>(pa.logits_rows()), pb), alone_b));
    CHECK(bitwise_equal(at(static_cast<std::size_t>(pa.logits_rows() + pb.logits_rows()), pc), alone_c));
    CHECK(cache_b.keys == cache_b_alone.keys);
    CHECK(cache_b.values == cache_b_alone.values);
    CHECK(cache_b.stored == cache_b_alone.stored);
  }
}

#if defined(_OPENMP)
TEST_CASE("logits are the same bits on 1, 2 and 3 threads, on every kernel path") {
  for (const kernel_path& path : kernel_paths()) {
    CAPTURE(cpu::isa_name(path.isa));
    CAPTURE(path.name());
    const path_scope on(path);
    // Large enough that every stage (products, attention, norms) runs on several threads.
    auto cfg = small_config(io::architecture::dream, false, true);
    cfg.hidden_size = 128;
    cfg.num_heads = 8;
    cfg.num_kv_heads = 4;
    cfg.head_dim = 16;
    cfg.intermediate_size = 352;
    cfg.vocab_size = 1000;
    cfg.mask_id = 999;
    transformer m = make_model(cfg, 5, path);
    const canvas_layout l{150, 64, 16, true};
    const tvec canvas = random_canvas(150, 64, 999, 999, 8);
    const block_causal_mask mask{16};
    forward_plan p = full_plan(l);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const auto one = run(m, mask, canvas, l, p);
    for (const int many : {2, 3}) {  // 2: every split in halves; 3: tasks that do not divide evenly
      CAPTURE(many);
      omp_set_num_threads(many);
      CHECK(bitwise_equal(run(m, mask, canvas, l, p), one));
    }
    omp_set_num_threads(threads);
  }
}
#endif


namespace {

/// The kernel path (isa, type, quant) when this run tests it: the CPU runs the instruction set and
/// DLM_TEST_KERNEL_PATHS (all, or best: only the best instruction set's) selects it; else none.
std::optional<kernel_path> selected_path(cpu::isa isa, io::dtype type, std::optional<cpu::quant::file_type> quant) {
    for (const kernel_path& p : kernel_paths())
        if (p.isa == isa && p.type == type && p.quant == quant) return p;
    return std::nullopt;
}

/// Exact prefix cache = full recompute on one kernel path (one ctest test per path, so that ctest
/// spreads the paths over the cores).
void exact_prefix_cache_on(cpu::isa isa, io::dtype type, std::optional<cpu::quant::file_type> quant) {
    const std::optional<kernel_path> selected = selected_path(isa, type, quant);
    if (!selected) {
        MESSAGE("skipped: " << cpu::isa_name(isa) << " is not run here (this CPU lacks it and AVX-512 BF16 for the model of its tiles, or DLM_TEST_KERNEL_PATHS=best)"
                            << (isa == cpu::isa::amx && !cpu::amx_unavailable_reason().empty() ? "; AMX: " : "")
                            << (isa == cpu::isa::amx ? cpu::amx_unavailable_reason() : ""));
        return;
    }
    const kernel_path& path = *selected;
    CAPTURE(cpu::isa_name(path.isa));
    CAPTURE(path.name());
    const path_scope on(path);
    transformer llada = make_model(small_config(io::architecture::llada, true, false), 11, path);
    transformer dream = make_model(small_config(io::architecture::dream, false, true), 12, path);
    check_cached_walks(llada, dream);
    if (path.quant) return;  // the fixtures' widths are not whole blocks
    {
        INFO("causal, real fixture");
        auto m = transformer::load(models_dir / "dream_tiny", {.weight_dtype = path.type});
        CHECK(compare_with_full_recompute<prefix_cache>(m, causal_mask{}, {7, 12, 1, true}, 4, 1) == 12);
    }
    {
        INFO("block-causal, real fixture");
        auto m = transformer::load(models_dir / "llada_tiny", {.weight_dtype = path.type});
        CHECK(compare_with_full_recompute<prefix_cache>(m, block_causal_mask{4}, {8, 16, 4, false}, 5, 3) == 12);
    }
}

}  // namespace

// One case per kernel path: instruction set x weight type (an element type or a GGUF file type).
#define DLM_EXACT_PREFIX_CACHE_CASE(which, label, type, quant)                                                           \
    TEST_CASE("exact prefix cache: same logits as a full recompute, block-causal and causal, on " #which " " label) { \
        exact_prefix_cache_on(cpu::isa::which, io::dtype::type, quant);                                                  \
    }
#define DLM_EXACT_PREFIX_CACHE_CASES(which)                                                              \
    DLM_EXACT_PREFIX_CACHE_CASE(which, "f32", f32, std::nullopt)                                         \
    DLM_EXACT_PREFIX_CACHE_CASE(which, "bf16", bf16, std::nullopt)                                       \
    DLM_EXACT_PREFIX_CACHE_CASE(which, "f16", f16, std::nullopt)                                         \
    DLM_EXACT_PREFIX_CACHE_CASE(which, "Q8_0", f32, cpu::quant::file_type::q8_0)                         \
    DLM_EXACT_PREFIX_CACHE_CASE(which, "Q4_0", f32, cpu::quant::file_type::q4_0)                         \
    DLM_EXACT_PREFIX_CACHE_CASE(which, "Q4_K_M", f32, cpu::quant::file_type::q4_k_m)
DLM_EXACT_PREFIX_CACHE_CASES(baseline)
DLM_EXACT_PREFIX_CACHE_CASES(avx2)
DLM_EXACT_PREFIX_CACHE_CASES(avx512)
DLM_EXACT_PREFIX_CACHE_CASES(avx512_vnni)
DLM_EXACT_PREFIX_CACHE_CASES(avx512_bf16)
DLM_EXACT_PREFIX_CACHE_CASES(amx)
#undef DLM_EXACT_PREFIX_CACHE_CASES
#undef DLM_EXACT_PREFIX_CACHE_CASE

TEST_CASE("Fast-dLLM caches: the refresh forward equals a full recompute") {
    auto m = transformer::load(models_dir / "llada_tiny");
    const canvas_layout l{8, 16, 4, false};
    const tvec canvas = random_canvas(8, 16, 299, 299, 9);
    kv cache = m.make_kv_cache(l.size());
    const semi_ar_mask mask{4};
    const auto refresh = run(m, mask, canvas, l, approx_prefix_cache{}.plan(mask, l, {1, 0}), &cache);
    CHECK(bitwise_equal(refresh, run(m, mask, canvas, l, no_cache{}.plan(mask, l, {1, 0}))));
    // Later steps read the cached (here: unchanged, so still exact) prefix and suffix.
    CHECK(bitwise_equal(run(m, mask, canvas, l, approx_prefix_cache{}.plan(mask, l, {1, 1}), &cache), refresh));
    CHECK(bitwise_equal(run(m, mask, canvas, l, dual_cache{}.plan(mask, l, {1, 1}), &cache), refresh));
}

namespace {
template <class Mask, class Schedule>
void decode_both_ways(transformer& m, Mask mask, Schedule schedule, const std::vector<tvec>& prompts, index_t gen) {
    decoder<transformer, Mask, prefix_cache, Schedule, greedy_sampler> cached(m, mask, {}, schedule);
    decoder<transformer, Mask, no_cache, Schedule, greedy_sampler> full(m, mask, {}, schedule);
    const auto a = cached.generate(std::span<const tvec>(prompts), {gen, 5});
    const auto b = full.generate(std::span<const tvec>(prompts), {gen, 5});
    REQUIRE(a.sequences.size() == b.sequences.size());
    for (std::size_t i = 0; i < a.sequences.size(); ++i) {
        CHECK(a.sequences[i].tokens == b.sequences[i].tokens);
        CHECK(a.sequences[i].commit_forward == b.sequences[i].commit_forward);
        CHECK(a.sequences[i].commit_confidence == b.sequences[i].commit_confidence);
        CHECK(a.sequences[i].stats.rows_computed < b.sequences[i].stats.rows_computed);
    }
}
}  // namespace

TEST_CASE("decoder: prefix_cache and no_cache decode the same tokens (block-causal + threshold, causal + next slot)") {
    auto llada = transformer::load(models_dir / "llada_tiny");
    auto dream = transformer::load(models_dir / "dream_tiny");
    const std::vector<tvec> prompts{{5, 17, 42, 7, 99, 3}, {11, 12, 250, 31, 8, 200, 140, 77, 6, 2, 19}};
    decode_both_ways(llada, block_causal_mask{4}, threshold_schedule{0.9}, prompts, 16);
    decode_both_ways(dream, block_causal_mask{4}, threshold_schedule{0.5}, prompts, 12);
    decode_both_ways(dream, causal_mask{}, next_slot_schedule{false}, prompts, 10);
    decode_both_ways(llada, causal_mask{}, next_slot_schedule{false}, prompts, 10);
}

TEST_CASE("every preset decodes with the CPU transformer") {
    auto m = transformer::load(models_dir / "llada_tiny");
    const std::vector<token_id> prompt{5, 17, 42, 7, 99, 3};
    const generation_options o{32, 1};
    auto ok = [&](const sequence_result& r) {
        CHECK(r.tokens.size() == 32);
        for (token_id t : r.tokens) CHECK((t >= 0 && t < m.vocab_size()));
    };
    ok(presets::autoregressive<transformer>(m).generate(prompt, o));
    ok(presets::llada<transformer>(m).generate(prompt, o));
    ok(presets::dream<transformer>(m, {}, {}, dream_schedule{32}).generate(prompt, o));
    ok(presets::fast_dllm<transformer>(m, semi_ar_mask{8}).generate(prompt, o));
    ok(presets::fast_dllm_dual<transformer>(m, semi_ar_mask{8}).generate(prompt, o));
    ok(presets::cdlm<transformer>(m).generate(prompt, o));
    ok(presets::cd4lm<transformer>(m).generate(prompt, o));
}

TEST_CASE("weights written with each family's names load back to the same model") {
    for (const auto arch : {io::architecture::llada, io::architecture::dream}) {
        for (const bool tied : {false, true}) {
            CAPTURE(io::architecture_name(arch));
            CAPTURE(tied);
            const auto cfg = small_config(arch, tied, arch != io::architecture::llada);
            const auto w = cpu::random_weights(cfg, 21);
            transformer direct(cfg, w);
            // Write a model folder.
            const auto dir = std::filesystem::temp_directory_path() / ("dlm_test_transformer_" + std::string(io::architecture_name(arch)) + (tied ? "_tied" : ""));
            std::filesystem::create_directories(dir);
            std::vector<std::pair<std::string, io::tensor_data>> tensors;
            auto add = [&](cpu::tensor_role role, index_t l, const float* data) {
                const auto shape = cpu::tensor_shape(cfg, role);
                std::int64_t count = 1;
                for (auto s : shape) count *= s;
                tensors.push_back({cpu::tensor_name(arch, role, l), {shape, std::vector<float>(data, data + count)}});
            };
            add(cpu::tensor_role::embedding, 0, w.embedding.data());
            for (index_t l = 0; l < cfg.num_layers; ++l) {
                const auto& L = w.layers[static_cast<std::size_t>(l)];
                using r = cpu::tensor_role;
                add(r::attn_norm, l, L.attn_norm.data());
                add(r::q_proj, l, L.q_proj.data());
                add(r::k_proj, l, L.k_proj.data());
                add(r::v_proj, l, L.v_proj.data());
                if (cfg.qkv_bias) {
                    add(r::q_bias, l, L.q_bias.data());
                    add(r::k_bias, l, L.k_bias.data());
                    add(r::v_bias, l, L.v_bias.data());
                }
                add(r::o_proj, l, L.o_proj.data());
                add(r::mlp_norm, l, L.mlp_norm.data());
                add(r::gate_proj, l, L.gate_proj.data());
                add(r::up_proj, l, L.up_proj.data());
                add(r::down_proj, l, L.down_proj.data());
            }
            add(cpu::tensor_role::final_norm, 0, w.final_norm.data());
            if (!tied) add(cpu::tensor_role::lm_head, 0, w.lm_head.data());
            io::write_safetensors(dir / "model.safetensors", tensors, io::dtype::f32);
            nlohmann::json config;
            if (arch == io::architecture::llada) {
                config = {{"model_type", "llada"}, {"d_model", 40}, {"n_heads", 4}, {"n_kv_heads", 2}, {"n_layers", 2},
                          {"mlp_hidden_size", 72}, {"vocab_size", 97}, {"max_sequence_length", 512}, {"rms_norm_eps", 1e-6},
                          {"weight_tying", tied}, {"mask_token_id", 96}, {"eos_token_id", 3}};
            } else {
                config = {{"model_type", "Dream"}, {"hidden_size", 40}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                          {"num_hidden_layers", 2}, {"intermediate_size", 72}, {"vocab_size", 97}, {"max_position_embeddings", 512},
                          {"rms_norm_eps", 1e-6}, {"tie_word_embeddings", tied}, {"mask_token_id", 96}, {"eos_token_id", 3}};
            }
            std::ofstream(dir / "config.json") << config.dump();
            auto loaded = transformer::load(dir);
            CHECK(loaded.parameter_count() == direct.parameter_count());
            const canvas_layout l{9, 8, 8, cfg.logits_shift};
            const tvec canvas = random_canvas(9, 8, 96, 96, 4);
            CHECK(bitwise_equal(run(loaded, bidirectional_mask{}, canvas, l, full_plan(l)), run(direct, bidirectional_mask{}, canvas, l, full_plan(l))));

            // A tensor the model does not use is refused by name.
            tensors.push_back({"model.extra.weight", {{2}, {1.f, 2.f}}});
            io::write_safetensors(dir / "model.safetensors", tensors, io::dtype::f32);
            CHECK_THROWS_WITH_AS((void)transformer::load(dir), doctest::Contains("model.extra.weight"), tensor_error);
            std::filesystem::remove_all(dir);
        }
    }
}

TEST_CASE("errors name what is wrong") {
    const auto cfg = small_config(io::architecture::llada, false, false);
    auto w = cpu::random_weights(cfg, 3);
    transformer m(cfg, w);
    const canvas_layout l{10, 8, 4, false};
    const tvec canvas = random_canvas(10, 8, 96, 96, 6);

    SUBCASE("a key that is neither in the window nor cached") {
        kv cache = m.make_kv_cache(l.size());
        const forward_plan p{10, 14, 10, 14, 0, 0, 14};  // needs the prompt's K/V, never stored
        CHECK_THROWS_WITH_AS(run(m, block_causal_mask{4}, canvas, l, p, &cache), doctest::Contains("needs key 0"), contract_error);
        CHECK_THROWS_AS(run(m, block_causal_mask{4}, canvas, l, p), contract_error);
    }
    SUBCASE("a store outside the window, a store without a cache") {
        kv cache = m.make_kv_cache(l.size());
        CHECK_THROWS_WITH_AS(run(m, bidirectional_mask{}, canvas, l, {4, 18, 4, 18, 0, 18, 18}, &cache), doctest::Contains("store range"),
                             contract_error);
        CHECK_THROWS_WITH_AS(run(m, bidirectional_mask{}, canvas, l, {0, 18, 4, 18, 0, 10, 18}), doctest::Contains("no cache"), contract_error);
    }
    SUBCASE("a logits span of the wrong size") {
        std::vector<float> out(5);
        const forward_request<kv> rq{canvas, l, full_plan(l), nullptr};
        CHECK_THROWS_WITH_AS(m.forward(std::span<const forward_request<kv>>(&rq, 1), bidirectional_mask{}, out), doctest::Contains("logits holds 5"),
                             contract_error);
    }
    SUBCASE("a token outside the vocabulary") {
        tvec bad = canvas;
        bad[3] = 97;
        CHECK_THROWS_WITH_AS(run(m, bidirectional_mask{}, bad, l, full_plan(l)), doctest::Contains("position 3"), invalid_parameter);
    }
    SUBCASE("a weight of the wrong shape") {
        w.layers[1].k_proj.resize(3, 40);
        CHECK_THROWS_WITH_AS(transformer(cfg, w), doctest::Contains("weights.layers[1].k_proj"), invalid_parameter);
    }
    SUBCASE("a config that cannot work") {
        auto bad = cfg;
        bad.num_kv_heads = 3;
        CHECK_THROWS_WITH_AS(transformer(bad, w), doctest::Contains("config.num_kv_heads"), invalid_parameter);
    }
    SUBCASE("a cache made for another model") {
        auto c = m.make_kv_cache(l.size());
        c.head_dim = 4;
        CHECK_THROWS_WITH_AS(run(m, bidirectional_mask{}, canvas, l, full_plan(l), &c), doctest::Contains("another model"), contract_error);
    }
}

TEST_CASE("the weight-size check counts shapes past 2^31 rows in 64 bits, and prints the right figure") {
    auto c = small_config(io::architecture::llada, false, false);
    c.num_heads = c.num_kv_heads = 1 << 16;
    c.head_dim = 1 << 16;  // q = k = v = 2^32 rows: 0 in 32-bit arithmetic
    const std::uint64_t q = std::uint64_t{1} << 32, h = static_cast<std::uint64_t>(c.hidden_size), pw = cpu::panel_width;
    const std::uint64_t h_rows = (h + pw - 1) / pw * pw;  // o_proj's h rows, rounded up to whole panels
    // Per layer: q/k/v (3q rows, multiples of the panel width) and o (h rows of q columns), f32, plus
    // the small matrices and vectors whose figures never overflowed.
    const std::uint64_t big = 3 * q * h * 4 + h_rows * q * 4;
    using cpu::packed_matrix;
    const std::uint64_t small = packed_matrix::bytes_for(2 * c.intermediate_size, c.hidden_size, io::dtype::f32) +
                                packed_matrix::bytes_for(c.hidden_size, c.intermediate_size, io::dtype::f32) + 2 * h * sizeof(float);
    const std::uint64_t whole = 2 * packed_matrix::bytes_for(c.vocab_size, c.hidden_size, io::dtype::f32) + h * sizeof(float);
    const std::uint64_t expected = static_cast<std::uint64_t>(c.num_layers) * (big + small) + whole;
    try {
        (void)transformer::random(c, 1, io::dtype::f32);
        FAIL("a model of " << expected << " bytes was built");
    } catch (const memory_error& e) {
        CHECK(e.needed() == expected);
        CHECK(std::string(e.what()).find(std::to_string(expected) + " bytes") != std::string::npos);
    }
    // Without the memory check, the rows that cannot be indexed are refused by name before anything is allocated.
    CHECK_THROWS_WITH_AS((void)transformer::random(c, 1, io::dtype::f32, 1.0f, false), doctest::Contains("(num_heads + 2 num_kv_heads) x head_dim = 12884901888"),
                         invalid_parameter);
}

TEST_CASE("the work buffers a forward of 64 rows leaves are the bytes work_bytes(64) says it needs, f32 and bf16 K/V alike") {
    for (const io::dtype kv : {io::dtype::f32, io::dtype::bf16}) {
        auto m = transformer::random(small_config(io::architecture::llada, false, false), 3, io::dtype::f32);
        m.set_kv_dtype(kv);
        CHECK(m.work_bytes_held() == 0);
        const canvas_layout l{8, 56, 8};  // 64 rows from position 0: one window of two whole 32-position runs
        tvec canvas(static_cast<std::size_t>(l.size()), 1);
        (void)run(m, bidirectional_mask{}, canvas, l, full_plan(l));
        CHECK(m.work_bytes_held() == m.work_bytes(64));
        CHECK(m.work_bytes(128) > m.work_bytes(64));
        (void)run(m, bidirectional_mask{}, canvas, l, full_plan(l));  // kept, not grown
        CHECK(m.work_bytes_held() == m.work_bytes(64));
    }
}

}  // namespace test_transformer
