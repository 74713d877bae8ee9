// The engine behind one run-time interface (dlm/registry/any_engine.hpp), as dlm-server and the
// Python package drive it: every preset decodes through it as through its typed engine, a sequence's
// own settings become its own policies, a policy the settings do not configure stays the decoder's,
// and a bad option is refused by name while the batch runs on; a preset's engine from make_engine
// (dlm/registry/preset_engine.hpp), run to the end, decodes as the decoder's generate.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <dlm/registry/any_engine.hpp>
#include <dlm/registry/preset_engine.hpp>
#include <dlm/registry/table.hpp>
#include <dlm/registry/validate.hpp>
#include <dlm/testing/scripted_model.hpp>

#include "support/scripts.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_any_engine {

using namespace dlm;
using dlm::testing::scripted_model;
namespace reg = dlm::registry;
using tvec = std::vector<token_id>;

namespace {

constexpr token_id mask = 31, eos = 30;
scripted_model hashed(bool shift) { return {32, mask, {eos}, shift, dlm_test::context_hash()}; }

void check_same(const sequence_result& a, const sequence_result& b) {
    CHECK(a.status == b.status);
    CHECK(a.tokens == b.tokens);
    CHECK(a.commit_forward == b.commit_forward);
    CHECK(a.stats.forwards == b.stats.forwards);
    CHECK(a.answer_length == b.answer_length);
}

/// Steps `eng` until idle; returns each sequence's result and the positions its reports named.
struct run_result {
    std::map<std::uint64_t, sequence_result> results;
    std::map<std::uint64_t, std::set<index_t>> filled, edited;
};
run_result run(reg::any_engine& eng) {
    run_result out;
    while (!eng.idle()) {
        for (const auto& r : eng.step()) {
            out.filled[r.id].insert(r.committed.begin(), r.committed.end());
            out.edited[r.id].insert(r.edited.begin(), r.edited.end());
        }
        for (auto& [id, res] : eng.take_finished()) out.results.emplace(id, std::move(res));
    }
    return out;
}

/// Commits the first `n` candidates of each step: an option the settings have no name for.
struct first_n_schedule {
    index_t n = 1;
    void select(const step_context&, std::span<const candidate> c, std::vector<index_t>& chosen) const {
        for (index_t i = 0; i < std::min<index_t>(n, static_cast<index_t>(c.size())); ++i) chosen.push_back(i);
    }
};

}  // namespace

static_assert(reg::configured_by_settings<threshold_schedule> && reg::configured_by_settings<semi_ar_mask> &&
                  reg::configured_by_settings<greedy_sampler> == false && !reg::configured_by_settings<first_n_schedule>,
              "a policy is configured by settings exactly when it has an option they set");

TEST_CASE("any_engine: every preset decodes through the interface as its typed engine, a sequence's own settings as a decoder built with them") {
    for (std::size_t i = 0; i < reg::builtin.size; ++i) {
        const reg::preset_id pid{i};
        const std::string name(reg::builtin.name_of(pid));
        if (name == "diffusion-gemma") continue;  // uniform-state: test_diffusion_gemma drives its engine
        CAPTURE(name);
        auto m = hashed(name.starts_with("fast-dllm-v2") || name == "autoregressive");
        const reg::settings base = reg::resolve(reg::builtin, pid, reg::accepted_only(reg::builtin, pid, {.gen_length = 16, .block_length = 8}));
        // Another temperature, threshold and step count where the preset takes them.
        const reg::settings own = reg::resolve(
            reg::builtin, pid,
            reg::accepted_only(reg::builtin, pid, {.gen_length = 8, .block_length = 8, .steps = 4, .threshold = 0.3, .temperature = 0.7}));
        reg::visit<scripted_model>(reg::builtin, pid, [&]<class D>(std::type_identity<D>) {
            reg::engine_of<D> typed(std::in_place, reg::make_decoder<D>(m, base));
            reg::any_engine& eng = typed;
            const tvec p{1, 2, 3, 1, 2, 3, 1, 2};
            const auto a = eng.add(p, {.gen_length = 16, .seed = 3});
            const auto b = eng.add(p, {.gen_length = 8, .seed = 4}, eng.make_policies(own));
            const auto out = run(eng);
            REQUIRE(out.results.size() == 2);
            check_same(out.results.at(a), reg::make_decoder<D>(m, base).generate(p, {.gen_length = 16, .seed = 3}));
            check_same(out.results.at(b), reg::make_decoder<D>(m, own).generate(p, {.gen_length = 8, .seed = 4}));
            // The reports name every slot a sequence filled, within its generation.
            const auto& ra = out.results.at(a);
            for (index_t g = 0; g < static_cast<index_t>(ra.tokens.size()); ++g)
                if (ra.tokens[static_cast<std::size_t>(g)] != mask && ra.commit_forward[static_cast<std::size_t>(g)] >= 0)
                    CHECK(out.filled.at(a).count(static_cast<index_t>(p.size()) + g) == 1);
            for (index_t pos : out.edited.count(a) ? out.edited.at(a) : std::set<index_t>{}) CHECK(pos >= static_cast<index_t>(p.size()));
            CHECK(eng.stats().forwards >= ra.stats.forwards);
            CHECK(eng.prompt_cache() == nullptr);
        });
    }
}

TEST_CASE("any_engine: a policy the settings do not configure stays the decoder's for a sequence with its own settings") {
    auto m = hashed(false);
    using D = decoder<scripted_model, block_causal_mask, prefix_cache, first_n_schedule, greedy_sampler>;
    D d(m, block_causal_mask{4}, {}, first_n_schedule{3});
    reg::engine_of<D> eng(d);
    const tvec p{1, 2};
    // Settings that would make a default first_n_schedule (n = 1) if they built one.
    const auto id = eng.add(p, {.gen_length = 8, .seed = 1}, eng.make_policies(reg::settings{.gen_length = 8, .block_length = 2}));
    const auto out = run(eng);
    const sequence_result& r = out.results.at(id);
    CHECK(r.settings.block_length.value == 2);  // the mask is the sequence's own
    check_same(r, D(m, block_causal_mask{2}, {}, first_n_schedule{3}).generate(p, {.gen_length = 8, .seed = 1}));
    CHECK(r.stats.forwards < D(m, block_causal_mask{2}, {}, first_n_schedule{1}).generate(p, {.gen_length = 8, .seed = 1}).stats.forwards);
}

TEST_CASE("any_engine: a bad option in a sequence's own settings is refused by name, and the batch runs on") {
    auto m = hashed(false);
    using D = presets::llada<scripted_model>;
    D d(m, semi_ar_mask{4});
    reg::engine_of<D> eng(d);
    const auto a = eng.add({1, 2}, {.gen_length = 8, .seed = 2});
    eng.step();
    CHECK_THROWS_WITH_AS(eng.add({1}, {.gen_length = 8}, eng.make_policies(reg::settings{.gen_length = 8, .block_length = 3})),
                         doctest::Contains("block_length"), invalid_parameter);
    CHECK_THROWS_WITH_AS(eng.add({1}, {.gen_length = 8}, eng.make_policies(reg::settings{.temperature = -1.f})),
                         doctest::Contains("temperature"), invalid_parameter);
    CHECK(eng.active() == 1);
    const auto out = run(eng);
    REQUIRE(out.results.size() == 1);
    check_same(out.results.at(a), d.generate(tvec{1, 2}, {.gen_length = 8, .seed = 2}));
}

TEST_CASE("any_engine: make_engine builds the preset's engine, and run_to_end decodes through it as the decoder's generate, step events included") {
    for (std::size_t i = 0; i < reg::builtin.size; ++i) {
        const reg::preset_id pid{i};
        const std::string name(reg::builtin.name_of(pid));
        if (name == "diffusion-gemma") continue;  // uniform-state: test_diffusion_gemma decodes it
        CAPTURE(name);
        auto m = hashed(name.starts_with("fast-dllm-v2") || name == "autoregressive");
        const reg::settings s = reg::resolve(reg::builtin, pid, reg::accepted_only(reg::builtin, pid, {.gen_length = 16, .block_length = 8}));
        const std::vector<tvec> prompts{{1, 2, 3, 1, 2, 3, 1, 2}, {3, 2, 1}};
        const generation_options o{.gen_length = 16, .seed = 5};
        std::vector<std::pair<int, int>> seen, expected;  // (sequence, committed) of every step event
        const auto record = [](std::vector<std::pair<int, int>>& into) {
            return [&into](const step_event& e) {
                into.emplace_back(static_cast<int>(e.sequence), static_cast<int>(e.committed.size()));
                return step_action::proceed;
            };
        };
        const std::unique_ptr<reg::any_engine> eng = reg::make_engine(m, s);
        const decode_result got = run_to_end(*eng, prompts, o, record(seen));
        decode_result want;
        reg::visit<scripted_model>(reg::builtin, pid, [&]<class D>(std::type_identity<D>) {
            want = reg::make_decoder<D>(m, s).generate(prompts, o, record(expected));
        });
        REQUIRE(got.sequences.size() == 2);
        for (std::size_t k = 0; k < 2; ++k) check_same(got.sequences[k], want.sequences[k]);
        CHECK(got.stats.forwards == want.stats.forwards);
        CHECK(seen == expected);
        CHECK_FALSE(seen.empty());
        // Its statistics are the result's, so an engine that has run is refused rather than miscounted.
        CHECK_THROWS_AS(run_to_end(*eng, prompts, o), contract_error);
    }
    reg::settings composed = reg::resolve(reg::builtin, reg::builtin.find("cdlm").value(), {.gen_length = 16, .block_length = 8});
    composed.composed = reg::composition{};
    auto m = hashed(false);
    CHECK_THROWS_AS((void)reg::make_engine(m, composed), contract_error);
}

}  // namespace test_any_engine
