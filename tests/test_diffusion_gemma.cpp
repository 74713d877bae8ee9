// DiffusionGemma against transformers' DiffusionGemmaForBlockDiffusion on a tiny random model
// (tools/make_diffusion_gemma_fixtures.py): the config and checkpoint load, every key read or refused
// by name, and the canvas logits of the decoder (with and without self-conditioning, over one or two
// encoded blocks) within f32 tolerance of the reference.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <dlm/cpu/diffusion_gemma.hpp>
#include <dlm/io/model_config.hpp>
#include <dlm/engine.hpp>
#include <dlm/presets.hpp>

#include "io_test_util.hpp"
#include "support/compare.hpp"
#include "support/drafts.hpp"
#include "support/kernel_testing.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_diffusion_gemma {

using namespace dlm;
using dlm::cpu::diffusion_gemma;
using dlm_test::read_f32_file;
namespace fs = std::filesystem;

namespace {

const fs::path tiny = fs::path(DLM_TEST_DATA) / "families" / "diffusion_gemma_tiny";

nlohmann::json read_json(const fs::path& p) {
    std::ifstream in(p);
    REQUIRE_MESSAGE(in, "missing fixture " << p << " (tools/make_diffusion_gemma_fixtures.py)");
    return nlohmann::json::parse(in);
}

std::vector<token_id> ids(const nlohmann::json& j) { return j.get<std::vector<token_id>>(); }

/// max |a − b| over the rows (logits are soft-capped at 30); +inf where either side holds a NaN.
using dlm_test::max_abs_diff;

std::vector<index_t> argmax_rows(const std::vector<float>& l, index_t vocab) {
    std::vector<index_t> out;
    for (std::size_t r = 0; r * static_cast<std::size_t>(vocab) < l.size(); ++r) {
        const auto* row = l.data() + r * static_cast<std::size_t>(vocab);
        out.push_back(static_cast<index_t>(std::max_element(row, row + vocab) - row));
    }
    return out;
}

std::vector<index_t> e_argmax(const nlohmann::json& e, const char* name) { return e["argmax"][name].get<std::vector<index_t>>(); }

struct run {
    diffusion_gemma m = diffusion_gemma::load(tiny);
    nlohmann::json e = read_json(tiny / "expected.json");
    index_t v = m.vocab_size();
    std::vector<float> decode(const cpu::gemma_context& ctx, const std::vector<token_id>& canvas, const float* sc = nullptr) {
        std::vector<float> l(canvas.size() * static_cast<std::size_t>(v));
        m.decode(ctx, canvas, sc, l);
        return l;
    }
    void check(const std::string& name, const std::vector<float>& got) {
        const std::vector<float> want = read_f32_file(tiny / ("logits_" + name + ".f32"));
        CAPTURE(name);
        CHECK(max_abs_diff(got, want) < 2e-4);
        CHECK(argmax_rows(got, v) == e["argmax"][name].get<std::vector<index_t>>());
    }
};

}  // namespace

TEST_CASE("diffusion_gemma_tiny: the config and checkpoint load, every layer's geometry as DiffusionGemmaTextConfig resolves it") {
    const diffusion_gemma m = diffusion_gemma::load(tiny);
    const auto& c = m.config();
    CHECK(c.vocab_size == 512);
    CHECK(c.canvas_length == 16);
    CHECK(c.sliding_window == 8);
    REQUIRE(c.layers.size() == 3);
    CHECK(c.layers[0].sliding);
    CHECK_FALSE(c.layers[2].sliding);
    CHECK(c.layers[0].head_dim == 16);
    CHECK(c.layers[2].head_dim == 32);  // per_layer_config: global_head_dim
    CHECK(c.layers[2].kv_heads == 1);   // num_global_key_value_heads
    CHECK(c.layers[2].k_eq_v);
    CHECK(c.full_rope.rotated_pairs == 4);  // proportional: int(0.25 · 32 / 2)
    CHECK(c.sliding_rope.rotated_pairs == 8);
    CHECK(c.final_logit_softcapping == 30.f);
    CHECK(c.eos_ids == std::vector<token_id>{1});
}

TEST_CASE("diffusion_gemma_tiny: the load reports its progress after the embedding and each block, ending at weight_bytes()") {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
    cpu::load_options opt;
    opt.progress = [&](std::uint64_t done, std::uint64_t total) { calls.emplace_back(done, total); };
    const diffusion_gemma m = diffusion_gemma::load(tiny, opt);
    REQUIRE(calls.size() == m.config().layers.size() + 2);  // embedding, each block, the end
    for (std::size_t i = 0; i < calls.size(); ++i) {
        CHECK(calls[i].second == m.weight_bytes());
        if (i > 0) CHECK(calls[i].first > calls[i - 1].first);
    }
    CHECK(calls.back().first == m.weight_bytes());
}

TEST_CASE("diffusion_gemma_tiny: decoder logits equal transformers' on the first step (encoded prompt longer than the sliding window)") {
    run r;
    auto ctx = r.m.new_context(64);
    r.m.encode(ctx, ids(r.e["prompt"]));
    CHECK(ctx.length == 13);
    r.check("first", r.decode(ctx, ids(r.e["canvas_a"])));
}

TEST_CASE("diffusion_gemma_tiny: decoder logits equal transformers' with the previous step's logits as self-conditioning") {
    run r;
    auto ctx = r.m.new_context(64);
    r.m.encode(ctx, ids(r.e["prompt"]));
    std::vector<float> sc = r.decode(ctx, ids(r.e["canvas_a"]));
    const float t = r.e["selfcond_temperature"].get<float>();
    for (float& x : sc) x /= t;
    r.check("selfcond", r.decode(ctx, ids(r.e["canvas_b"]), sc.data()));
}

TEST_CASE("diffusion_gemma_tiny: a second block reads the first canvas the encoder appended, whole or in chunks") {
    run r;
    auto ctx = r.m.new_context(64);
    r.m.encode(ctx, ids(r.e["prompt"]));
    r.m.encode(ctx, ids(r.e["canvas_a"]));
    const std::vector<float> whole = r.decode(ctx, ids(r.e["canvas_b"]));
    r.check("second", whole);
    auto chunked = r.m.new_context(64);
    const auto p = ids(r.e["prompt"]);
    r.m.encode(chunked, std::vector<token_id>(p.begin(), p.begin() + 5));
    r.m.encode(chunked, std::vector<token_id>(p.begin() + 5, p.end()));
    r.m.encode(chunked, ids(r.e["canvas_a"]));
    CHECK(dlm_test::same_bits(r.decode(chunked, ids(r.e["canvas_b"])), whole));  // the same bits: no row depends on its chunk
}

TEST_CASE("diffusion_gemma_tiny: prompts and canvases of several 32-row attention tasks give the same bits whole or in chunks, on 1, 2 and 3 threads") {
    std::vector<token_id> prompt(75), canvas(70);
    for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<token_id>(2 + (i * 53) % 500);
    for (std::size_t i = 0; i < canvas.size(); ++i) canvas[i] = static_cast<token_id>((i * 37 + 5) % 512);
    const std::array<std::pair<std::size_t, std::size_t>, 3> chunks{{{0, 7}, {7, 40}, {40, 75}}};
    std::vector<std::vector<float>> runs;
    for (int threads : {1, 2, 3}) {
        CAPTURE(threads);
        dlm_test::omp_threads t(threads);
        run r;
        auto whole = r.m.new_context(256);
        r.m.encode(whole, prompt);
        runs.push_back(r.decode(whole, canvas));
        auto chunked = r.m.new_context(256);
        for (const auto& c : chunks) r.m.encode(chunked, std::vector<token_id>(prompt.begin() + c.first, prompt.begin() + c.second));
        CHECK(dlm_test::same_bits(r.decode(chunked, canvas), runs.back()));
    }
    CHECK(dlm_test::same_bits(runs[0], runs[1]));
    CHECK(dlm_test::same_bits(runs[0], runs[2]));
    CHECK(std::all_of(runs[0].begin(), runs[0].end(), [](float x) { return std::isfinite(x); }));
    CHECK(std::set<float>(runs[0].begin(), runs[0].end()).size() > 1000);
}

TEST_CASE("diffusion_gemma_tiny: a context holds sliding_window - 1 positions on a sliding layer, every position on a full one, as kv_cache_bytes says") {
    const diffusion_gemma m = diffusion_gemma::load(tiny);
    const auto& c = m.config();
    const auto ctx = m.new_context(4096);
    std::uint64_t want = 0;
    for (const io::gemma_layer& g : c.layers)
        want += 2ull * sizeof(float) * static_cast<std::uint64_t>(g.kv_heads) * g.head_dim * (g.sliding ? c.sliding_window - 1 : 4096);
    CHECK(ctx.bytes() == want);
    CHECK(m.kv_cache_bytes(4096) == want);  // what the engine weighs before a batch's contexts are made
    CHECK(m.new_context(5).bytes() < want);  // a context shorter than the window holds its own length
    CHECK(m.kv_cache_bytes(5) == m.new_context(5).bytes());
}

TEST_CASE("diffusion_gemma: bad input is refused by name") {
    run r;
    auto ctx = r.m.new_context(20);
    CHECK_THROWS_WITH_AS(r.m.encode(ctx, std::vector<token_id>{3, 512}), doctest::Contains("outside the vocabulary"), invalid_parameter);
    CHECK_THROWS_WITH_AS(r.m.encode(ctx, std::vector<token_id>(21, 3)), doctest::Contains("do not fit the context's 20"), invalid_parameter);
    CHECK_THROWS_AS((void)r.m.new_context(5000), invalid_parameter);  // past max_position_embeddings 4096
    std::vector<float> small(10);
    CHECK_THROWS_WITH_AS(r.m.decode(ctx, ids(r.e["canvas_a"]), nullptr, small), doctest::Contains("logits"), invalid_parameter);
    CHECK_THROWS_WITH_AS((void)diffusion_gemma::load(tiny / "no-such-model"), doctest::Contains("no-such-model: no such model folder or file"),
                         file_error);
    CHECK_THROWS_WITH_AS((void)diffusion_gemma::load(tiny / "expected.json"), doctest::Contains("expected.json: is a file, not a model folder"),
                         file_error);
}

TEST_CASE("diffusion_gemma: config keys dlm does not compute are refused by name") {
    const auto base = read_json(tiny / "config.json");
    auto refused = [&](const std::string& key, const nlohmann::json& value, const std::string& expect) {
        auto j = base;
        j["text_config"][key] = value;
        CAPTURE(key);
        CHECK_THROWS_WITH_AS((void)io::parse_diffusion_gemma_config(j, "config.json"), doctest::Contains(expect.c_str()), file_error);
    };
    refused("hidden_activation", "gelu", "key 'hidden_activation'");
    refused("use_bidirectional_attention", "all", "key 'use_bidirectional_attention'");
    refused("attention_bias", true, "key 'attention_bias'");
    refused("some_new_feature", 1, "key 'some_new_feature'");
    refused("num_experts", 0, "key 'num_experts'");
    auto j = base;
    j["text_config"]["rope_parameters"]["full_attention"]["rope_type"] = "yarn";
    CHECK_THROWS_WITH_AS((void)io::parse_diffusion_gemma_config(j, "config.json"), doctest::Contains("'yarn' is not implemented"), file_error);
}

TEST_CASE("diffusion_gemma: a bf16 checkpoint's weights load held in bf16 and decode close to the f32 reference") {
    run f32;
    const diffusion_gemma bf = diffusion_gemma::load(tiny, {.weight_dtype = io::dtype::bf16});
    CHECK(bf.weight_bytes() < f32.m.weight_bytes());
    diffusion_gemma m = bf;
    auto ctx = m.new_context(64);
    m.encode(ctx, ids(f32.e["prompt"]));
    std::vector<float> l(16 * static_cast<std::size_t>(f32.v));
    m.decode(ctx, ids(f32.e["canvas_a"]), nullptr, l);
    const std::vector<float> want = read_f32_file(tiny / "logits_first.f32");
    const double d = max_abs_diff(l, want);
    CHECK(d > 0);     // held in bf16: not the f32 bits
    CHECK(d < 1.0);   // but bf16 rounding of the weights only (logits span about ±16)
    const auto a = argmax_rows(l, f32.v), b = e_argmax(f32.e, "first");
    CHECK(std::inner_product(a.begin(), a.end(), b.begin(), 0, std::plus<>(), std::equal_to<>()) >= 12);  // of 16 rows
}

TEST_CASE("diffusion_gemma: sizes in config.json the tensors do not hold are refused by the tensor before anything is allocated") {
    // A vocabulary of 200,000,000 was a memory_error (its transposed embedding counted from the config),
    // 8,000,000 allocated 2 GB before the embedding's shape refused it; the experts likewise.
    const auto base = read_json(tiny / "config.json");
    const fs::path dir = fs::temp_directory_path() / "dlm_test_gemma_sizes";
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::copy_file(tiny / "model.safetensors", dir / "model.safetensors");
    const auto refused = [&](const char* key, std::int64_t value, const char* tensor, const char* expect) {
        auto j = base;
        j["text_config"][key] = value;
        std::ofstream(dir / "config.json") << j.dump();
        CAPTURE(key);
        try {
            (void)diffusion_gemma::load(dir);
            FAIL("no error");
        } catch (const tensor_error& e) {
            CHECK(e.tensor() == tensor);
            CHECK(std::string(e.what()).find(expect) != std::string::npos);
        }
    };
    refused("vocab_size", 200'000'000, "model.decoder.embed_tokens.weight", "expected shape [200000000, 64]");
    refused("vocab_size", 8'000'000, "model.decoder.embed_tokens.weight", "expected shape [8000000, 64]");
    refused("moe_intermediate_size", 1 << 20, "model.decoder.layers.0.experts.gate_up_proj", "expected shape [");
    fs::remove_all(dir);
}

TEST_CASE("diffusion_gemma: the transformer refuses a DiffusionGemma folder, naming the class that loads it") {
    CHECK_THROWS_WITH_AS((void)io::load_config(tiny), doctest::Contains("dlm::cpu::diffusion_gemma"), file_error);
}

namespace {

/// presets::diffusion_gemma over the tiny model with a trajectory fixture's settings: its tokens, its
/// forwards and the draft after every forward equal transformers' generate() given dlm's random draws.
/// `sampler`: the sampler to decode with instead of the reference's (greedy or temperature 1).
void replay(const std::string& name, std::optional<sdar_sampler> sampler = std::nullopt) {
    const nlohmann::json t = read_json(tiny / ("trajectory_" + name + ".json"));
    diffusion_gemma model = diffusion_gemma::load(tiny);
    const entropy_bound_schedule schedule = dlm_test::trajectory_schedule(t["settings"]);
    presets::diffusion_gemma<diffusion_gemma> dec(model, block_causal_mask{}, prefix_cache{}, schedule,
                                                  sampler.value_or(sdar_sampler(t["greedy"].get<bool>() ? 0.f : 1.f)));
    std::vector<std::vector<index_t>> drafts;
    const sequence_result r = dec.generate(ids(t["prompt"]), {.gen_length = t["gen_length"].get<index_t>(), .seed = t["seed"].get<std::uint64_t>()},
                                           dlm_test::record_drafts(drafts, 16));
    CAPTURE(name);
    CHECK(r.stats.forwards == t["forwards"].get<index_t>());
    CHECK(r.stats.steps_per_block == t["steps_per_block"].get<std::vector<index_t>>());
    const auto want_drafts = t["drafts"].get<std::vector<std::vector<index_t>>>();
    REQUIRE(drafts.size() == want_drafts.size());
    for (std::size_t k = 0; k < drafts.size(); ++k) {
        CAPTURE(k);
        if (drafts[k] != want_drafts[k]) {
            std::string a, b;
            for (std::size_t j = 0; j < drafts[k].size(); ++j) a += std::to_string(drafts[k][j]) + " ", b += std::to_string(want_drafts[k][j]) + " ";
            MESSAGE("draft " << k << ": dlm " << a << "| reference " << b);
        }
        CHECK(drafts[k] == want_drafts[k]);
    }
    // The answer: the reference's tokens up to its first EOS (after which it pads).
    std::vector<token_id> want = ids(t["tokens"]);
    if (const auto eos = std::find(want.begin(), want.end(), 1); eos != want.end()) want.erase(eos, want.end());
    CHECK(std::vector<token_id>(r.tokens.begin(), r.tokens.begin() + r.answer_length) == want);
}

}  // namespace

TEST_CASE("diffusion_gemma preset: greedy denoising equals transformers' generate(), draft by draft, over two canvases") { replay("greedy"); }

TEST_CASE("diffusion_gemma preset: sampled denoising equals transformers' generate() given dlm's random draws") { replay("sampled"); }

TEST_CASE("diffusion_gemma preset: the sampler's top-k and top-p change no entropy the schedule weighs") {
    // Greedy over a nucleus of 0.5, or over the top 2, draws the same argmax; the entropy-bound acceptance and
    // the stop rule read the step-tempered rows (the reference's processed logits), so the greedy reference replays.
    replay("greedy", sdar_sampler(0.f, 0, 0.5f));
    replay("greedy_early_stop", sdar_sampler(0.f, 2));
}

TEST_CASE("diffusion_gemma preset: the stable-and-confident rule ends a canvas early as the reference's does") {
    const nlohmann::json t = read_json(tiny / "trajectory_greedy_early_stop.json");
    const auto steps = t["steps_per_block"].get<std::vector<index_t>>();
    CHECK(std::any_of(steps.begin(), steps.end(), [&](index_t s) { return s < t["settings"]["max_denoising_steps"].get<index_t>(); }));
    replay("greedy_early_stop");
}

TEST_CASE("diffusion_gemma preset: a sequence decodes the same alone and in a batch, and its stream holds final canvases only") {
    diffusion_gemma model = diffusion_gemma::load(tiny);
    entropy_bound_schedule schedule;
    schedule.steps = 4;
    presets::diffusion_gemma<diffusion_gemma> dec(model, block_causal_mask{}, prefix_cache{}, schedule, sdar_sampler(1.f));
    const std::vector<std::vector<token_id>> prompts = {{5, 6, 7, 8, 9}, {40, 41, 42}};
    const generation_options o{.gen_length = 32, .seeds = {3, 4}};
    const decode_result batch = dec.generate(prompts, o);
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        const sequence_result alone = dec.generate(prompts[i], {.gen_length = 32, .seed = o.seeds[i]});
        CHECK(alone.tokens == batch.sequences[i].tokens);
        CHECK(alone.stats.forwards == batch.sequences[i].stats.forwards);
    }
    engine eng(dec);
    const auto id = eng.add(prompts[0], {.gen_length = 32, .seed = 3});
    std::size_t shown = 0;
    while (!eng.idle()) {
        eng.step();
        const auto prefix = eng.committed_prefix(id);
        CHECK((prefix.size() == shown || prefix.size() % 16 == 0 || eng.idle()));  // a whole canvas at a time
        shown = prefix.size();
    }
    CHECK(eng.take_finished().front().second.tokens == batch.sequences[0].tokens);
}

TEST_CASE("diffusion_gemma: a prompt holding the image placeholder is refused (the vision tower is not loaded), a canvas may hold it") {
    dlm_test::temp_dir dir;
    auto j = read_json(tiny / "config.json");
    j["image_token_id"] = 500;
    dlm_test::write_text(dir.path() / "config.json", j.dump());
    fs::copy_file(tiny / "model.safetensors", dir.path() / "model.safetensors");
    diffusion_gemma m = diffusion_gemma::load(dir.path());
    auto ctx = m.new_context(64);
    CHECK_THROWS_WITH_AS(m.encode(ctx, std::vector<token_id>{3, 500}), doctest::Contains("is the image placeholder"), invalid_parameter);
    m.encode(ctx, std::vector<token_id>{3, 4});
    std::vector<float> l(16 * static_cast<std::size_t>(m.vocab_size()));
    std::vector<token_id> canvas(16, 500);  // uniform noise may draw it
    m.decode(ctx, canvas, nullptr, l);
    CHECK(std::isfinite(l.front()));
}

namespace {

/// The tiny model's config at sizes GGUF blocks tile (hidden 256: K-quant rows; 96-wide MLPs and
/// 32-wide experts: the types llama.cpp falls back to).
io::diffusion_gemma_config blockable_config() {
    nlohmann::json j = read_json(tiny / "config.json");
    j["text_config"]["hidden_size"] = 256;
    j["text_config"]["moe_intermediate_size"] = 32;
    return io::parse_diffusion_gemma_config(j, "blockable");
}

/// Canvas logits of `m` after encoding a prompt: without and with self-conditioning.
std::vector<float> two_steps(diffusion_gemma& m) {
    auto ctx = m.new_context(64);
    m.encode(ctx, std::vector<token_id>{2, 10, 11, 12, 13, 14, 15, 16, 17, 18});
    std::vector<token_id> canvas(16);
    for (std::size_t i = 0; i < canvas.size(); ++i) canvas[i] = static_cast<token_id>((i * 37 + 5) % 512);
    std::vector<float> first(canvas.size() * 512), second(first.size());
    m.decode(ctx, canvas, nullptr, first);
    m.decode(ctx, canvas, first.data(), second);
    first.insert(first.end(), second.begin(), second.end());
    return first;
}

}  // namespace

TEST_CASE("diffusion_gemma: random weights decode finitely in bf16, Q8_0 and Q4_K_M blocks, the same on 1 and 2 threads") {
    const io::diffusion_gemma_config c = blockable_config();
    std::vector<std::size_t> bytes;
    for (const cpu::weight_spec spec : {cpu::weight_spec{io::dtype::bf16}, cpu::weight_spec{cpu::quant::file_type::q8_0},
                                        cpu::weight_spec{cpu::quant::file_type::q4_k_m}}) {
        std::vector<std::vector<float>> runs;
        std::string type;
        for (int threads : {1, 2}) {
            dlm_test::omp_threads t(threads);
            diffusion_gemma m = diffusion_gemma::random(c, 11, spec, 1.f);
            runs.push_back(two_steps(m));
            type = m.weight_type();
            if (threads == 1) bytes.push_back(m.weight_bytes());
        }
        CAPTURE(type);
        CHECK(std::all_of(runs[0].begin(), runs[0].end(), [](float x) { return std::isfinite(x); }));
        CHECK(dlm_test::same_bits(runs[0], runs[1]));
        CHECK(std::set<float>(runs[0].begin(), runs[0].end()).size() > 1000);  // not a constant
    }
    CHECK(bytes[0] > bytes[1]);  // bf16 > Q8_0 > Q4_K_M
    CHECK(bytes[1] > bytes[2]);
}

TEST_CASE("diffusion_gemma preset: a canvas's draws side by side on the threads give the same tokens as on one, sampled and greedy") {
    nlohmann::json j = read_json(tiny / "config.json");
    j["text_config"]["vocab_size"] = 8192;  // a step's 16 rows of 8192 logits: enough to draw them on the threads
    const io::diffusion_gemma_config c = io::parse_diffusion_gemma_config(j, "wide");
    REQUIRE(static_cast<std::size_t>(c.canvas_length) * static_cast<std::size_t>(c.vocab_size) >= dlm::detail::parallel_slot_logits);
    diffusion_gemma model = diffusion_gemma::random(c, 5, cpu::weight_spec{io::dtype::f32}, 1.f);
    for (const float temperature : {1.f, 0.f}) {
        std::vector<sequence_result> runs;
        for (const int threads : {1, 2}) {
            dlm_test::omp_threads t(threads);
            entropy_bound_schedule schedule;
            schedule.steps = 6;
            presets::diffusion_gemma<diffusion_gemma> dec(model, block_causal_mask{}, prefix_cache{}, schedule, sdar_sampler(temperature));
            runs.push_back(dec.generate(std::vector<token_id>{5, 6, 7, 8, 9}, {.gen_length = 32, .seed = 17}));
        }
        CAPTURE(temperature);
        CHECK(runs[0].tokens == runs[1].tokens);
        CHECK(runs[0].stats.steps_per_block == runs[1].stats.steps_per_block);
        CHECK(dlm_test::same_bits(runs[0].commit_confidence, runs[1].commit_confidence));
        CHECK(std::set<token_id>(runs[0].tokens.begin(), runs[0].tokens.end()).size() > 4);  // drawn, not one token
    }
}

TEST_CASE("diffusion_gemma: llama.cpp's block types for Q4_K_M, and its fallback where K-quant blocks do not tile a row") {
    using T = io::gguf_type;
    using cpu::quant::file_type;
    CHECK(cpu::quant::file_type_of(file_type::q4_k_m, 30, true, false, 5) == T::q6_k);    // the tied head
    CHECK(cpu::quant::file_type_of(file_type::q4_k_m, 30, false, true, 0) == T::q6_k);    // ffn_down in the first eighth
    CHECK(cpu::quant::file_type_of(file_type::q4_k_m, 30, false, true, 4) == T::q4_k);    // (4 − 3) % 3 != 2
    CHECK(cpu::quant::file_type_of(file_type::q4_k_m, 30, false, true, 5) == T::q6_k);    // (5 − 3) % 3 == 2
    CHECK(cpu::quant::file_type_of(file_type::q4_k_m, 30, false, false, 5) == T::q4_k);
    CHECK(cpu::quant::column_fallback(T::q4_k, 2816) == T::q4_k);  // 11 blocks of 256
    CHECK(cpu::quant::column_fallback(T::q4_k, 704) == T::q4_0);   // llama.cpp: Q5_0, which dlm does not multiply
    CHECK(cpu::quant::column_fallback(T::q6_k, 704) == T::q8_0);
    CHECK(cpu::quant::column_fallback(T::q8_0, 704) == T::q8_0);
}

TEST_CASE("diffusion_gemma: timed phases add up to no more than the forwards took, each measured") {
    diffusion_gemma m = diffusion_gemma::load(tiny);
    cpu::gemma_timing t;
    m.time_phases(&t);
    const auto t0 = std::chrono::steady_clock::now();
    auto ctx = m.new_context(64);
    m.encode(ctx, std::vector<token_id>{2, 10, 11, 12});
    std::vector<token_id> canvas(16, 7);
    std::vector<float> a(16 * 512), b(a.size());
    m.decode(ctx, canvas, nullptr, a);
    m.decode(ctx, canvas, a.data(), b);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    m.time_phases(nullptr);
    m.decode(ctx, canvas, a.data(), b);  // not counted
    CHECK(t.decodes == 2);
    for (double phase : {t.encoder, t.projections, t.attention, t.dense_mlp, t.experts, t.self_conditioning, t.head}) CHECK(phase > 0);
    CHECK(t.total() <= wall);
}

}  // namespace test_diffusion_gemma
