// Golden trajectories: every preset replays, forward by forward, what its reference implementation
// (LLaDA generate.py, Dream diffusion_generate, Fast-dLLM v1 and dInfer's port of its factor rule, CD4LM's dynamic decoder) committed on the
// tiny fixture models. tools/make_trajectory_fixtures.py ran the references and wrote
// tests/data/trajectories/*.json; docs/policies.md lists the intended deviations and the case that
// pins each one.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <dlm/cpu/transformer.hpp>
#include <dlm/presets.hpp>

#include "io_test_util.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_golden {

using namespace dlm;
using dlm::cpu::transformer;
using tvec = std::vector<token_id>;

namespace {

const std::filesystem::path data_dir = DLM_TEST_DATA;

/// What one forward committed: (position, token) pairs, in position order.
using commits = std::vector<std::pair<index_t, token_id>>;

struct golden {
    nlohmann::json j;
    std::vector<commits> forwards;
    tvec prompt;

    explicit golden(const std::string& name) {
        std::ifstream in(data_dir / "trajectories" / (name + ".json"));
        REQUIRE_MESSAGE(in, "missing fixture " << name << " (tools/make_trajectory_fixtures.py)");
        j = nlohmann::json::parse(in);
        prompt = j.at("prompt").get<tvec>();
        for (const auto& f : j.at("forwards")) {
            commits c;
            for (const auto& pt : f) c.emplace_back(pt.at(0).get<index_t>(), pt.at(1).get<token_id>());
            std::sort(c.begin(), c.end());
            forwards.push_back(std::move(c));
        }
    }
    [[nodiscard]] index_t gen_length() const { return j.at("gen_length").get<index_t>(); }
    [[nodiscard]] const nlohmann::json& params() const { return j.at("params"); }
};

transformer& model(const std::string& name) {
    static transformer llada = transformer::load(data_dir / "models" / "llada_tiny");
    static transformer dream = transformer::load(data_dir / "models" / "dream_tiny");
    return name == "dream_tiny" ? dream : llada;
}

/// Whether generation_options has LLaDA's classifier-free guidance (landing with issue 13).
template <class O>
concept has_cfg_scale = requires(O o) { o.cfg_scale = 1.0; };

/// Runs `decoder` on the fixture's prompt and returns what each forward committed.
template <class Decoder, class Options = generation_options>
std::vector<commits> replay(Decoder& decoder, const golden& g, std::uint64_t seed = 0, double cfg_scale = 0.0) {
    Options options{};
    options.gen_length = g.gen_length();
    options.seed = seed;
    if constexpr (has_cfg_scale<Options>) options.cfg_scale = cfg_scale;
    std::vector<commits> out;
    const auto result = decoder.generate(g.prompt, options, [&](const step_event& ev) {
        commits c;
        for (index_t p : ev.committed) c.emplace_back(p, ev.canvas[static_cast<std::size_t>(p)]);
        std::sort(c.begin(), c.end());
        if (static_cast<std::size_t>(ev.forward) >= out.size()) out.resize(static_cast<std::size_t>(ev.forward) + 1);
        out[static_cast<std::size_t>(ev.forward)] = std::move(c);
        return step_action::proceed;
    });
    CHECK(result.answer_length >= 0);
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

/// The exact check: the same commits at the same forwards.
void same_trajectory(const std::vector<commits>& got, const golden& g) {
    CHECK_MESSAGE(got == g.forwards, "dlm:" << show(got) << "\nreference:" << show(g.forwards));
}

/// The check where the reference draws from torch's generator: the same number of commits per forward.
void same_counts(const std::vector<commits>& got, const golden& g) {
    std::vector<std::size_t> a, b;
    for (const auto& c : got) a.push_back(c.size());
    for (const auto& c : g.forwards) b.push_back(c.size());
    CHECK_MESSAGE(a == b, "dlm:" << show(got) << "\nreference:" << show(g.forwards));
}

dlm::presets::dream<transformer> make_dream(const golden& g, dream_alg alg) {
    const auto& p = g.params();
    const double alg_temp = p.at("alg_temp").is_null() ? 0.0 : p.at("alg_temp").get<double>();
    return presets::dream<transformer>(model("dream_tiny"), {}, {},
                                       dream_schedule{p.at("steps").get<index_t>(), p.at("eps").get<double>(), alg, alg_temp});
}

presets::llada<transformer> make_llada(const golden& g, remasking mode) {
    const auto& p = g.params();
    return presets::llada<transformer>(model("llada_tiny"), semi_ar_mask{p.at("block_length").get<index_t>()}, {},
                                       llada_schedule{p.at("steps").get<index_t>(), mode},
                                       presets::llada_sampler{p.at("temperature").get<float>()});
}

}  // namespace

TEST_CASE("golden: LLaDA generate.py, low-confidence remasking, temperature 0") {
    const golden g("llada_low_confidence");
    auto d = make_llada(g, remasking::low_confidence);
    same_trajectory(replay(d, g), g);
}

TEST_CASE("golden: LLaDA generate.py, classifier-free guidance (cfg_scale 1.5), low-confidence remasking") {
    const golden g("llada_cfg");
    if constexpr (!has_cfg_scale<generation_options>) {
        MESSAGE("generation_options has no cfg_scale yet: the llada_cfg fixture is not replayed");
        return;
    }
    auto d = make_llada(g, remasking::low_confidence);
    same_trajectory(replay(d, g, 0, g.params().at("cfg_scale").get<double>()), g);
}

TEST_CASE("golden: LLaDA generate.py, random remasking (torch's draws): the same commits per forward") {
    const golden g("llada_random");
    auto d = make_llada(g, remasking::random);
    for (std::uint64_t seed : {0u, 1u, 2u}) same_counts(replay(d, g, seed), g);
}

TEST_CASE("golden: LLaDA generate.py, Gumbel-max sampling at temperature 1 (torch's draws): the same commits per forward") {
    const golden g("llada_gumbel");
    auto d = make_llada(g, remasking::low_confidence);
    for (std::uint64_t seed : {0u, 1u, 2u}) same_counts(replay(d, g, seed), g);
}

TEST_CASE("golden: Dream diffusion_generate, maskgit_plus, topk_margin and entropy at temperature 0") {
    for (const auto& case_ : {std::pair{"dream_maskgit_plus", dream_alg::maskgit_plus},
                              std::pair{"dream_topk_margin", dream_alg::topk_margin},
                              std::pair{"dream_entropy", dream_alg::entropy}}) {
        const auto& [name, alg] = case_;
        CAPTURE(case_.first);
        const golden g(name);
        auto d = make_dream(g, alg);
        same_trajectory(replay(d, g), g);
    }
}

TEST_CASE("golden: Dream diffusion_generate, alg_temp 0.5 (torch's multinomial): the same commits per forward") {
    const golden g("dream_alg_temp");
    auto d = make_dream(g, dream_alg::maskgit_plus);
    for (std::uint64_t seed : {0u, 1u, 2u}) same_counts(replay(d, g, seed), g);
}

TEST_CASE("golden: Dream diffusion_generate, origin (torch's draws): every slot committed within the steps") {
    const golden g("dream_origin");
    auto d = make_dream(g, dream_alg::origin);
    const auto steps = g.params().at("steps").get<std::size_t>();
    REQUIRE(g.forwards.size() == steps);
    for (std::uint64_t seed : {0u, 1u, 2u}) {
        const auto got = replay(d, g, seed);
        CHECK(got.size() <= steps);
        std::size_t committed = 0;
        for (const auto& c : got) committed += c.size();
        CHECK(committed == static_cast<std::size_t>(g.gen_length()));
    }
}

TEST_CASE("golden: the mask id is never committed (dream_tiny's head predicts it at masked rows)") {
    // A reference leaves a slot whose draw is the mask id masked, and returns it when its steps run out;
    // dlm bans it from every draw (the Dream tests above run the preset as it is, with no sampler adapter).
    for (const auto& case_ : {std::pair{"dream_maskgit_plus", dream_alg::maskgit_plus},
                              std::pair{"dream_topk_margin", dream_alg::topk_margin},
                              std::pair{"dream_entropy", dream_alg::entropy}, std::pair{"dream_origin", dream_alg::origin}}) {
        const auto& [name, alg] = case_;
        CAPTURE(case_.first);
        const golden g(name);
        auto d = make_dream(g, alg);
        generation_options options{};
        options.gen_length = g.gen_length();
        const auto result = d.generate(g.prompt, options);
        std::string tokens;
        for (token_id t : result.tokens) tokens += " " + std::to_string(t);
        CHECK_MESSAGE(std::count(result.tokens.begin(), result.tokens.end(), model("dream_tiny").mask_id()) == 0,
                      "mask id committed:" << tokens);
    }
}

/// Fast-dLLM v1's decoders with the rule `rule`: the prefix cache or, for a "dual" fixture, the dual cache.
template <class Rule>
void replay_fast_dllm(const char* name, const Rule& rule) {
    CAPTURE(name);
    const golden g(name);
    const semi_ar_mask mask{g.params().at("block_length").get<index_t>()};
    if (std::string(name).find("dual") != std::string::npos) {
        decoder<transformer, semi_ar_mask, dual_cache, Rule, presets::llada_sampler> d(model("llada_tiny"), mask, {}, rule);
        same_trajectory(replay(d, g), g);
    } else {
        decoder<transformer, semi_ar_mask, approx_prefix_cache, Rule, presets::llada_sampler> d(model("llada_tiny"), mask, {}, rule);
        same_trajectory(replay(d, g), g);
    }
}

TEST_CASE("golden: Fast-dLLM v1 prefix and dual cache, threshold rule") {
    for (const char* name : {"fast_dllm_prefix_threshold", "fast_dllm_dual_threshold"})
        replay_fast_dllm(name, threshold_schedule{golden(name).params().at("threshold").get<double>()});
}

TEST_CASE("golden: Fast-dLLM v1 prefix and dual cache, factor rule (dInfer's port of get_transfer_index_dynamic)") {
    // factor 1: one slot a step, and both of the last two (the reference's loop quirk); factor 4: three a step.
    for (const char* name : {"fast_dllm_prefix_factor", "fast_dllm_dual_factor", "fast_dllm_prefix_factor4", "fast_dllm_dual_factor4"})
        replay_fast_dllm(name, factor_schedule{golden(name).params().at("factor").get<double>()});
}

/// presets::cd4lm on a copy of llada_tiny whose end token is the fixture's (CD4LM defers it).
std::vector<commits> replay_cd4lm(const golden& g) {
    const auto& p = g.params();
    dlm_test::temp_dir dir;
    const auto src = data_dir / "models" / "llada_tiny";
    std::filesystem::copy_file(src / "model.safetensors", dir / "model.safetensors");
    std::ifstream in(src / "config.json");
    auto config = nlohmann::json::parse(in);
    config["eos_token_id"] = p.at("eos_token_id").get<token_id>();
    dlm_test::write_text(dir / "config.json", config.dump());
    auto m = transformer::load(dir.path());
    presets::cd4lm<transformer> d(m, semi_ar_mask{p.at("block_length").get<index_t>()}, {},
                                  cd4lm_schedule{p.at("confidence_threshold").get<double>(),
                                                 p.at("min_tokens_per_step").get<index_t>(),
                                                 p.at("max_tokens_per_step").get<index_t>(),
                                                 p.at("eos_threshold_ratio").get<double>(),
                                                 p.at("max_steps_per_block").get<index_t>()});
    return replay(d, g);
}

TEST_CASE("golden: CD4LM generate_block, confidence-adaptive with EOS deferral and forced finish") {
    const golden g("cd4lm");
    same_trajectory(replay_cd4lm(g), g);
}

TEST_CASE("golden: CD4LM generate_block, every slot deferred: dlm commits the most probable, the reference torch.topk's pick among -inf") {
    const golden g("cd4lm_all_deferred");
    const auto got = replay_cd4lm(g);
    const auto eos = g.params().at("eos_token_id").get<token_id>();
    std::size_t f = 0;
    while (f < got.size() && f < g.forwards.size() && got[f] == g.forwards[f]) ++f;
    REQUIRE_MESSAGE(f < g.forwards.size(), "the fixture no longer reaches a step with every slot deferred");
    // The first difference is that step: each commits min_tokens_per_step slots holding the end token.
    const auto min_tokens = g.params().at("min_tokens_per_step").get<std::size_t>();
    REQUIRE(f < got.size());
    CHECK(got[f].size() == min_tokens);
    CHECK(g.forwards[f].size() == min_tokens);
    for (const auto& [pos, tok] : got[f]) CHECK(tok == eos);
    for (const auto& [pos, tok] : g.forwards[f]) CHECK(tok == eos);
    CHECK(got[f] != g.forwards[f]);
}

}  // namespace test_golden
