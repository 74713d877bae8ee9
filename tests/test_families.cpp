// Natively block-causal families against their published reference code on tiny random models
// (tools/make_family_fixtures.py wrote tests/data/families/): the config.json and checkpoint load,
// logits under the family's own attention mask, and the decoded trajectory of each family's preset
// against the reference generate function, forward by forward.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <dlm/cpu/transformer.hpp>
#include <dlm/presets.hpp>

#include "io_test_util.hpp"
#include "support/compare.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_families {

using namespace dlm;
using dlm::cpu::transformer;
using kv = transformer::kv_cache;
using tvec = std::vector<token_id>;

namespace {

const std::filesystem::path families_dir = std::filesystem::path(DLM_TEST_DATA) / "families";

nlohmann::json read_json(const std::filesystem::path& p) {
    std::ifstream in(p);
    REQUIRE_MESSAGE(in, "missing fixture " << p << " (tools/make_family_fixtures.py)");
    return nlohmann::json::parse(in);
}

using dlm_test::max_rel_diff;  // support/compare.hpp: NaN-aware

/// The logits of every row of a fixture's canvas under `mask`, one full forward.
template <class Mask>
std::vector<float> full_logits(transformer& m, const Mask& mask, const nlohmann::json& e) {
    const tvec ids = e.at("input_ids").get<tvec>();
    const canvas_layout l{e.at("prompt_length").get<index_t>(), e.at("gen_length").get<index_t>(), e.at("block_length").get<index_t>(),
                          m.logits_shift()};
    const forward_plan p{0, l.size(), 0, l.size(), 0, 0, l.size()};
    std::vector<float> out(static_cast<std::size_t>(l.size()) * static_cast<std::size_t>(m.vocab_size()));
    const forward_request<kv> rq{ids, l, p, nullptr};
    m.forward(std::span<const forward_request<kv>>(&rq, 1), mask, out);
    return out;
}

/// Max relative difference between dlm's logits of fixture `fixture`'s canvas under `mask` and the
/// reference's logits of case `name` (expected.json).
template <class Mask>
double logits_diff(transformer& m, const std::string& fixture, const Mask& mask, const std::string& name) {
    const auto e = read_json(families_dir / fixture / "expected.json");
    return max_rel_diff(full_logits(m, mask, e), dlm_test::read_f32_file(families_dir / fixture / e.at("cases").at(name).get<std::string>()));
}

/// What one forward committed: (position, token) pairs, in position order.
using commits = std::vector<std::pair<index_t, token_id>>;

std::vector<commits> reference_forwards(const nlohmann::json& t) {
    std::vector<commits> out;
    for (const auto& f : t.at("forwards")) {
        commits c;
        for (const auto& pt : f) c.emplace_back(pt.at(0).get<index_t>(), pt.at(1).get<token_id>());
        std::sort(c.begin(), c.end());
        out.push_back(std::move(c));
    }
    return out;
}

template <class Decoder>
std::vector<commits> replay(Decoder& d, const nlohmann::json& t, sequence_result* result = nullptr) {
    generation_options options{};
    options.gen_length = t.at("gen_length").get<index_t>();
    std::vector<commits> out;
    sequence_result r = d.generate(t.at("prompt").get<tvec>(), options, [&](const step_event& ev) {
        commits c;
        for (index_t p : ev.committed) c.emplace_back(p, ev.canvas[static_cast<std::size_t>(p)]);
        std::sort(c.begin(), c.end());
        out.push_back(std::move(c));
        return step_action::proceed;
    });
    if (result) *result = std::move(r);
    return out;
}

std::string show(const std::vector<commits>& t) {
    std::string s;
    for (std::size_t f = 0; f < t.size(); ++f) {
        s += "\n  forward " + std::to_string(f) + ":";
        for (const auto& [p, tok] : t[f]) s += " " + std::to_string(p) + "=" + std::to_string(tok);
    }
    return s;
}

/// Replays trajectory fixture `t` with decoder `d`: the same commits at every forward and the same
/// final tokens as the reference. Returns dlm's result.
template <class Decoder>
sequence_result same_trajectory(Decoder& d, const nlohmann::json& t) {
    sequence_result r;
    const auto got = replay(d, t, &r);
    const auto want = reference_forwards(t);
    CHECK_MESSAGE(got == want, "dlm:" << show(got) << "\nreference:" << show(want));
    CHECK(r.tokens == t.at("final").get<tvec>());
    return r;
}

/// A mixture-of-experts fixture's logits under its family's block-diffusion mask: within 1e-4 of the
/// reference's, with `expert_layers` MoE calls in the one forward.
void check_moe_logits(const char* fixture, std::int64_t expert_layers) {
    auto m = transformer::load(families_dir / fixture);
    cpu::moe_timing timing;
    m.time_experts(&timing);
    const double diff = logits_diff(m, fixture, block_diffusion_mask{}, "block_diffusion");
    CHECK_MESSAGE(diff < 1e-4, "max relative difference " << diff);
    CHECK(timing.calls == expert_layers);
}

/// Replays each trajectory fixture `names` of `family` (same_trajectory) with the decoder that
/// make(model, fixture, params) builds; `block`, where given, is the block length the decoder must
/// have taken from the model's config.
template <class Make>
void replay_fixtures(const char* family, std::initializer_list<const char*> names, std::optional<index_t> block, Make make) {
    auto m = transformer::load(families_dir / family);
    for (const char* name : names) {
        CAPTURE(name);
        const auto t = read_json(families_dir / family / name);
        auto d = make(m, t, t.at("params"));
        const sequence_result r = same_trajectory(d, t);
        if (block) CHECK(r.settings.block_length.value == *block);
    }
}

}  // namespace

TEST_CASE("sdar_tiny: SDARForCausalLM's config.json and checkpoint load (q/k norms, head_dim, block_size, mask id)") {
    const auto m = transformer::load(families_dir / "sdar_tiny");
    const io::model_config& c = m.config();
    CHECK(c.arch == io::architecture::sdar);
    CHECK(c.qk_norm);
    CHECK_FALSE(c.qkv_bias);
    CHECK(c.head_dim == 24);  // given, and not hidden_size / heads (16)
    CHECK(m.mask_id() == 299);
    CHECK_FALSE(m.logits_shift());
    REQUIRE(c.decoding.block_length.value.has_value());
    CHECK(*c.decoding.block_length.value == 4);
    CHECK(c.decoding.block_length.origin.find("block_size") != std::string::npos);
    CHECK(std::find(c.eos_ids.begin(), c.eos_ids.end(), 296) != c.eos_ids.end());  // from generation_config.json
}

TEST_CASE("sdar_tiny: logits equal SDAR's modeling code under its block-diffusion mask") {
    auto m = transformer::load(families_dir / "sdar_tiny");
    const double diff = logits_diff(m, "sdar_tiny", block_diffusion_mask{}, "block_diffusion");
    CHECK_MESSAGE(diff < 1e-4, "max relative difference " << diff);
    // The mask matters: CDLM's block-causal mask (bidirectional prompt) gives other logits.
    CHECK(logits_diff(m, "sdar_tiny", block_causal_mask{}, "block_diffusion") > 1e-3);
}

TEST_CASE("sdar preset: the same commits, forward by forward, as SDAR's block_diffusion_generate") {
    // The fixture's draws are greedy (tools/make_family_fixtures.py): temperature 0 here, with the
    // confidence of the greedy token under softmax(logits), the reference's x0_p at temperature 1.
    // trajectory_sdar_unaligned_prompt: a 6-token prompt, so the first block [4, 8) holds two prompt
    // tokens and two slots (aligned_block_diffusion_mask's align_blocks), and 18 slots.
    replay_fixtures("sdar_tiny", {"trajectory_sdar_dynamic.json", "trajectory_sdar_low_threshold.json", "trajectory_sdar_unaligned_prompt.json"},
                    4,  // the model's block_size
                    [](transformer& m, const nlohmann::json&, const nlohmann::json& p) {
                        return presets::sdar<transformer>(m, {}, {},
                                                          dynamic_threshold_schedule{p.at("denoising_steps").get<index_t>(),
                                                                                     p.at("confidence_threshold").get<double>()},
                                                          presets::sdar_sampler{0.f});
                    });
}

TEST_CASE("sdar preset: a prompt that is not whole blocks shares its last block with the first slots") {
    auto m = transformer::load(families_dir / "sdar_tiny");
    const auto t = read_json(families_dir / "sdar_tiny" / "trajectory_sdar_unaligned_prompt.json");
    const auto& p = t.at("params");
    const dynamic_threshold_schedule schedule{p.at("denoising_steps").get<index_t>(), p.at("confidence_threshold").get<double>()};
    // Blocks from the prompt's end instead (block_diffusion_mask without align_blocks; 16 slots, a
    // multiple of the block): other commits from the first forward on, so the fixture tells them apart.
    auto shifted = decoder<transformer, block_diffusion_mask, prefix_cache, dynamic_threshold_schedule, presets::sdar_sampler>(
        m, block_diffusion_mask{4}, {}, schedule, presets::sdar_sampler{0.f});
    nlohmann::json t16 = t;
    t16["gen_length"] = 16;
    const auto got = replay(shifted, t16);
    REQUIRE_FALSE(got.empty());
    CHECK(got.front() != reference_forwards(t).front());
    // The aligned layout itself: block 0 is [4, 8) with two slots, the last block ends at the canvas end.
    const canvas_layout l{6, 17, 4, false, 2};
    CHECK(l.block_count() == 5);
    CHECK(l.block_begin(0) == 4);
    CHECK(l.slots_in_block(0) == 2);
    CHECK(l.block_of(6) == 0);
    CHECK(l.block_of(8) == 1);
    CHECK(l.block_end(4) == 23);
    CHECK(l.slots_in_block(4) == 3);
    const aligned_block_diffusion_mask mask{4};
    CHECK(mask.key_end(l, 3) == 4);  // a whole prompt block sees itself
    CHECK(mask.key_end(l, 5) == 8);  // a prompt position of block 0 sees the block's slots
    CHECK(mask.key_end(l, 9) == 12);
}

TEST_CASE("sdar_moe_tiny: SDARMoeForCausalLM's config.json and checkpoint load (Qwen3-MoE experts, mlp_only_layers)") {
    const auto m = transformer::load(families_dir / "sdar_moe_tiny");
    const io::model_config& c = m.config();
    CHECK(c.arch == io::architecture::sdar_moe);
    CHECK(io::architecture_class(c.arch) == "SDARMoeForCausalLM");
    CHECK(c.qk_norm);
    CHECK(c.head_dim == 24);
    REQUIRE(c.moe.has_value());
    CHECK(c.moe->score == io::moe_config::scoring::softmax);
    CHECK(c.moe->normalize == io::moe_config::normalization::always);  // norm_topk_prob
    CHECK(c.moe->num_experts == 8);
    CHECK(c.moe->experts_per_token == 2);
    CHECK(c.moe->shared_intermediate_size == 0);
    CHECK_FALSE(c.moe->is_moe_layer(0));  // mlp_only_layers [0]
    CHECK(c.moe->is_moe_layer(1));
    CHECK(c.moe->is_moe_layer(2));
    CHECK(m.mask_id() == 299);
    CHECK_FALSE(m.logits_shift());
    REQUIRE(c.decoding.block_length.value.has_value());
    CHECK(*c.decoding.block_length.value == 4);
    // decoder_sparse_step: experts on every second layer (1, 3, ...), as Qwen3MoeDecoderLayer places them.
    auto j = read_json(families_dir / "sdar_moe_tiny" / "config.json");
    j["decoder_sparse_step"] = 2;
    j["mlp_only_layers"] = nlohmann::json::array();
    const io::model_config stepped = io::parse_config(j, "config.json");
    CHECK_FALSE(stepped.moe->is_moe_layer(0));
    CHECK(stepped.moe->is_moe_layer(1));
    CHECK_FALSE(stepped.moe->is_moe_layer(2));
    j["norm_topk_prob"] = false;
    CHECK(io::parse_config(j, "config.json").moe->normalize == io::moe_config::normalization::none);
}

TEST_CASE("sdar_moe_tiny: logits equal SDAR's model with Qwen3-MoE's sparse block under its block-diffusion mask") {
    check_moe_logits("sdar_moe_tiny", 2);  // two expert layers after the dense one
}

TEST_CASE("sdar_moe_tiny: one expert per token gets weight 1 under norm_topk_prob, its softmax score without") {
    // Qwen3-MoE divides the picked scores by their sum for any k (LLaDA2 only when k > 1), so with
    // k = 1 the two settings of norm_topk_prob give different logits.
    namespace fs = std::filesystem;
    const auto e = read_json(families_dir / "sdar_moe_tiny" / "expected.json");
    std::vector<std::vector<float>> logits;
    for (const bool norm : {true, false}) {
        const fs::path dir = fs::temp_directory_path() / ("dlm_sdar_moe_k1_" + std::to_string(norm));
        fs::create_directories(dir);
        fs::copy_file(families_dir / "sdar_moe_tiny" / "model.safetensors", dir / "model.safetensors", fs::copy_options::overwrite_existing);
        auto j = read_json(families_dir / "sdar_moe_tiny" / "config.json");
        j["num_experts_per_tok"] = 1;
        j["norm_topk_prob"] = norm;
        std::ofstream(dir / "config.json") << j.dump();
        auto m = transformer::load(dir);
        logits.push_back(full_logits(m, block_diffusion_mask{}, e));
        fs::remove_all(dir);
    }
    CHECK(max_rel_diff(logits[0], logits[1]) > 1e-3);
}

TEST_CASE("sdar preset on SDAR-MoE: the same commits, forward by forward, as SDAR's block_diffusion_generate") {
    replay_fixtures("sdar_moe_tiny", {"trajectory_sdar_dynamic.json", "trajectory_sdar_low_threshold.json", "trajectory_sdar_unaligned_prompt.json"},
                    4, [](transformer& m, const nlohmann::json&, const nlohmann::json& p) {
                        return presets::sdar<transformer>(m, {}, {},
                                                          dynamic_threshold_schedule{p.at("denoising_steps").get<index_t>(),
                                                                                     p.at("confidence_threshold").get<double>()},
                                                          presets::sdar_sampler{0.f});
                    });
}

TEST_CASE("fast_dllm_v2_tiny: Fast_dLLM_QwenForCausalLM's config.json and checkpoint load (Qwen2 block, bd_size, shifted rows)") {
    const auto m = transformer::load(families_dir / "fast_dllm_v2_tiny");
    const io::model_config& c = m.config();
    CHECK(c.arch == io::architecture::fast_dllm_v2);
    CHECK(c.qkv_bias);
    CHECK_FALSE(c.qk_norm);
    CHECK(m.logits_shift());
    CHECK(m.mask_id() == 299);
    REQUIRE(c.decoding.block_length.value.has_value());
    CHECK(*c.decoding.block_length.value == 8);
    CHECK(c.decoding.block_length.origin.find("bd_size") != std::string::npos);
}

TEST_CASE("fast_dllm_v2_tiny: logits equal Fast-dLLM v2's modeling code under its block-diffusion mask") {
    auto m = transformer::load(families_dir / "fast_dllm_v2_tiny");
    const double diff = logits_diff(m, "fast_dllm_v2_tiny", block_diffusion_mask{}, "block_diffusion");
    CHECK_MESSAGE(diff < 1e-4, "max relative difference " << diff);
}

TEST_CASE("fast_dllm_v2 preset: the same commits, forward by forward, as Fast-dLLM v2's generate()") {
    // trajectory_fast_dllm_v2_unaligned_prompt: an 11-token prompt, so block 0 is [8, 16) with 3 prompt
    // tokens and 5 slots, decoded by sub-blocks from position 8 without a first slot of its own.
    replay_fixtures("fast_dllm_v2_tiny",
                    {"trajectory_fast_dllm_v2_threshold.json", "trajectory_fast_dllm_v2_low_threshold.json",
                     "trajectory_fast_dllm_v2_unaligned_prompt.json"},
                    8,  // the model's bd_size
                    [](transformer& m, const nlohmann::json&, const nlohmann::json& p) {
                        return presets::fast_dllm_v2<transformer>(
                            m, {}, {}, sub_block_threshold_schedule{p.at("threshold").get<double>(), p.at("small_block_size").get<index_t>()});
                    });
}

TEST_CASE("fast_dllm_v2_block_cache preset: the same commits, forward by forward, as batch_sample with use_block_cache") {
    // Fast-dLLM v2's sub-block cache (sub_block_cache): while the decoded sub-block's first slot is
    // committed, a forward recomputes that sub-block only, over the block's K/V of its last full forward.
    const char* names[] = {"trajectory_fast_dllm_v2_block_cache.json", "trajectory_fast_dllm_v2_block_cache_low_threshold.json",
                           "trajectory_fast_dllm_v2_block_cache_unaligned_prompt.json"};
    auto m = transformer::load(families_dir / "fast_dllm_v2_tiny");
    int differ_without_cache = 0;
    for (const char* name : names) {
        CAPTURE(name);
        const auto t = read_json(families_dir / "fast_dllm_v2_tiny" / name);
        const auto& p = t.at("params");
        const index_t sub = p.at("small_block_size").get<index_t>();
        REQUIRE(t.at("sub_block_forwards").get<int>() > 0);  // the fixture exercises the sub-block forwards
        presets::fast_dllm_v2_block_cache<transformer> d(m, {}, sub_block_cache{sub}, sub_block_threshold_schedule{p.at("threshold").get<double>(), sub});
        const sequence_result r = same_trajectory(d, t);
        presets::fast_dllm_v2<transformer> plain(m, {}, {}, sub_block_threshold_schedule{p.at("threshold").get<double>(), sub});
        sequence_result rp;
        if (replay(plain, t, &rp) != reference_forwards(t)) ++differ_without_cache;
        // Fewer rows per forward than without it (a sub-block forward computes 4 rows, a block forward 9).
        CHECK(static_cast<double>(r.stats.rows_computed) / static_cast<double>(r.stats.forwards) <
              static_cast<double>(rp.stats.rows_computed) / static_cast<double>(rp.stats.forwards));
    }
    CHECK(differ_without_cache > 0);  // the cache's approximation shows in the reference's commits
    // The cache and the schedule must cut the block alike.
    CHECK_THROWS_AS((presets::fast_dllm_v2_block_cache<transformer>(m, {}, sub_block_cache{4}, sub_block_threshold_schedule{0.9, 8})),
                    invalid_parameter);
}

TEST_CASE("llada2_tiny: LLaDA2MoeModelLM's config.json and checkpoint load (fused qkv, q/k norms, partial RoPE, experts)") {
    const auto m = transformer::load(families_dir / "llada2_tiny");
    const io::model_config& c = m.config();
    CHECK(c.arch == io::architecture::llada2_moe);
    CHECK(c.qk_norm);
    CHECK(c.rotary_dim == 8);  // partial_rotary_factor 0.5 of head_dim 16
    REQUIRE(c.moe.has_value());
    CHECK(c.moe->num_experts == 8);
    CHECK(c.moe->experts_per_token == 2);
    CHECK(c.moe->shared_intermediate_size == 32);
    CHECK_FALSE(c.moe->is_moe_layer(0));  // first_k_dense_replace 1
    CHECK(c.moe->is_moe_layer(1));
    CHECK(m.mask_id() == 299);
}

TEST_CASE("llada2_tiny: logits equal LLaDA2's modeling code under its block-diffusion mask") {
    check_moe_logits("llada2_tiny", 2);  // two mixture-of-experts layers
}

TEST_CASE("llada2 preset: the same commits, forward by forward, as LLaDA2MoeModelLM.generate()") {
    // trajectory_llada2_unaligned_prompt: an 11-token prompt, so block 1 [8, 16) holds 3 prompt tokens
    // and 5 slots; 21 slots end the canvas on a block boundary. short_answer: 5 slots, fewer than a
    // block, so generate() caps its 8 steps at 5 (2, 2, 2, 1, 1 slots each). greedy_filters: top-k 3
    // and top-p 0.5 at temperature 0, which generate()'s sampler (llada2_sampler) ignores.
    replay_fixtures("llada2_tiny",
                    {"trajectory_llada2_threshold.json", "trajectory_llada2_low_threshold.json", "trajectory_llada2_unaligned_prompt.json",
                     "trajectory_llada2_short_answer.json", "trajectory_llada2_greedy_filters.json"},
                    std::nullopt, [](transformer& m, const nlohmann::json& t, const nlohmann::json& p) {
                        return presets::llada2<transformer>(m, aligned_block_diffusion_mask{t.at("block_length").get<index_t>()}, {},
                                                            presets::llada2_schedule{p.at("steps").get<index_t>(), p.at("threshold").get<double>()},
                                                            presets::llada2_sampler{0.f, p.value("top_k", index_t{0}), p.value("top_p", 1.f)});
                    });
}

TEST_CASE("lladamoe_tiny: LLaDAMoEModelLM's config.json and checkpoint load (moe_layer_freq, softmax routing, shared expert)") {
    const auto m = transformer::load(families_dir / "lladamoe_tiny");
    const io::model_config& c = m.config();
    CHECK(c.arch == io::architecture::lladamoe);
    CHECK(c.qk_norm);
    REQUIRE(c.moe.has_value());
    CHECK(c.moe->score == io::moe_config::scoring::softmax);
    CHECK(c.moe->bias_in_weights);
    CHECK(c.moe->normalize == io::moe_config::normalization::none);
    CHECK_FALSE(c.moe->is_moe_layer(0));  // moe_layer_freq [0, 1, 1]
    CHECK(c.moe->is_moe_layer(2));
    CHECK(c.moe->shared_intermediate_size == 48);
    CHECK(m.mask_id() == 299);
    CHECK_FALSE(m.logits_shift());
}

TEST_CASE("lladamoe_tiny: logits equal LLaDA-MoE's modeling code, bidirectional") {
    auto m = transformer::load(families_dir / "lladamoe_tiny");
    const double diff = logits_diff(m, "lladamoe_tiny", bidirectional_mask{}, "bidirectional");
    CHECK_MESSAGE(diff < 1e-4, "max relative difference " << diff);
}

TEST_CASE("lladamoe_tiny: its mixture-of-experts layers share one set of work buffers, which work_bytes bounds") {
    auto m = transformer::load(families_dir / "lladamoe_tiny");
    const canvas_layout l{8, 56, 8};  // 64 rows from position 0
    const tvec ids(static_cast<std::size_t>(l.size()), 5);
    const forward_plan p{0, l.size(), 0, l.size(), 0, 0, l.size()};
    std::vector<float> out(static_cast<std::size_t>(l.size()) * static_cast<std::size_t>(m.vocab_size()));
    const forward_request<kv> rq{ids, l, p, nullptr};
    m.forward(std::span<const forward_request<kv>>(&rq, 1), bidirectional_mask{}, out);
    const std::uint64_t held = m.work_bytes_held();
    CHECK(held > 0);
    CHECK(held <= m.work_bytes(64));
    // The bound counts one set of expert buffers for both MoE layers: it exceeds what is held by less
    // than one layer's gathered and output rows.
    const io::moe_config& c = *m.config().moe;
    const std::uint64_t one_layer = 64ull * (2ull * static_cast<std::uint64_t>(c.experts_per_token) * static_cast<std::uint64_t>(m.config().hidden_size)) * sizeof(float);
    CHECK(m.work_bytes(64) < held + one_layer);
    m.forward(std::span<const forward_request<kv>>(&rq, 1), bidirectional_mask{}, out);
    CHECK(m.work_bytes_held() == held);  // kept, not grown
}

TEST_CASE("llada preset on LLaDA-MoE: the same commits, forward by forward, as LLaDA's generate.py") {
    replay_fixtures("lladamoe_tiny", {"trajectory_llada_low_confidence.json"}, std::nullopt,
                    [](transformer& m, const nlohmann::json&, const nlohmann::json& p) {
                        return presets::llada<transformer>(m, semi_ar_mask{p.at("block_length").get<index_t>()}, {},
                                                           llada_schedule{p.at("steps").get<index_t>()},
                                                           presets::llada_sampler{p.at("temperature").get<float>()});
                    });
}

TEST_CASE("families: an expert width in config.json the tensors do not hold is refused by the tensor before anything is allocated") {
    // 2^28: 1.6 TB of experts counted from the config was a memory_error; 2^20 allocated 512 MB
    // before the expert's [32, 64] refused it. The shapes are now checked first.
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / "dlm_lladamoe_width";
    fs::create_directories(dir);
    fs::copy_file(families_dir / "lladamoe_tiny" / "model.safetensors", dir / "model.safetensors", fs::copy_options::overwrite_existing);
    for (const std::int64_t width : {std::int64_t{1} << 28, std::int64_t{1} << 20}) {
        auto j = read_json(families_dir / "lladamoe_tiny" / "config.json");
        j["expert_intermediate_size"] = width;
        std::ofstream(dir / "config.json") << j.dump();
        CAPTURE(width);
        try {
            (void)transformer::load(dir);
            FAIL("no error");
        } catch (const tensor_error& e) {
            CHECK(e.tensor() == "model.layers.1.mlp.experts.0.gate_proj.weight");
            CHECK(std::string(e.what()).find("expected shape [" + std::to_string(width) + ", 64], found [32, 64]") != std::string::npos);
        }
    }
    fs::remove_all(dir);
}

TEST_CASE("families: what dlm does not compute is refused by the key that asks for it") {
    const auto refused = [](const std::string& fixture, const char* key, const nlohmann::json& value, const std::string& expected) {
        auto j = read_json(families_dir / fixture / "config.json");
        j[key] = value;
        CAPTURE(fixture);
        CAPTURE(key);
        CHECK_THROWS_WITH_AS((void)io::parse_config(j, "config.json"), doctest::Contains(expected.c_str()), file_error);
    };
    refused("sdar_tiny", "attention_bias", true, "key 'attention_bias'");
    refused("sdar_tiny", "use_sliding_window", true, "key 'use_sliding_window'");
    refused("llada2_tiny", "use_bias", true, "key 'use_bias'");
    refused("llada2_tiny", "score_function", "softmax", "key 'score_function'");
    refused("llada2_tiny", "norm_head", true, "key 'norm_head'");
    refused("llada2_tiny", "n_group", 3, "key 'n_group'");              // does not divide 8 experts
    refused("llada2_tiny", "topk_group", 5, "key 'topk_group'");        // more than n_group
    refused("llada2_tiny", "partial_rotary_factor", 0.1, "key 'partial_rotary_factor'");
    refused("lladamoe_tiny", "moe_layer_freq", nlohmann::json::array({0, 1}), "key 'moe_layer_freq'");
    refused("lladamoe_tiny", "clip_qkv", 8.0, "key 'clip_qkv'");
    refused("fast_dllm_v2_tiny", "bd_size", 0, "key 'bd_size'");
    refused("sdar_moe_tiny", "decoder_sparse_step", 0, "key 'decoder_sparse_step'");
    refused("sdar_moe_tiny", "mlp_only_layers", nlohmann::json::array({3}), "key 'mlp_only_layers'");  // 3 layers
    refused("sdar_moe_tiny", "num_experts_per_tok", 9, "key 'num_experts_per_tok'");
    refused("sdar_moe_tiny", "attention_bias", true, "key 'attention_bias'");
    auto j = read_json(families_dir / "sdar_tiny" / "config.json");
    j.erase("mask_token_id");
    CHECK_THROWS_WITH_AS((void)io::parse_config(j, "config.json"), doctest::Contains("key 'mask_token_id'"), file_error);
    j = read_json(families_dir / "sdar_moe_tiny" / "config.json");
    j.erase("norm_topk_prob");  // the references disagree on its default
    CHECK_THROWS_WITH_AS((void)io::parse_config(j, "config.json"), doctest::Contains("key 'norm_topk_prob'"), file_error);
    // Experts load from a checkpoint or are random; weights in memory have none.
    const io::model_config moe = transformer::load(families_dir / "llada2_tiny").config();
    CHECK_THROWS_WITH_AS(transformer(moe, cpu::random_weights(moe, 1)), doctest::Contains("mixture-of-experts"), invalid_parameter);
}

}  // namespace test_families
