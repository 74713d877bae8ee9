// The preset registry (include/dlm/registry/): every preset of the table builds its decoder and
// decodes; what a preset accepts is read from its policy types; options it lacks are refused by
// name; values are checked by the policies' own rules; defaults and their sources; a table extended
// by one line (examples/custom_preset.cpp does the same, run by tests/registry.cmake).
#include <doctest/doctest.h>

#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <dlm/registry/describe.hpp>
#include <dlm/registry/validate.hpp>
#include <dlm/testing/scripted_model.hpp>

#include "support/scripts.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_registry {

using namespace dlm;
using dlm::testing::scripted_model;
namespace reg = dlm::registry;
using reg::option;

namespace {

constexpr token_id mask = 15, eos = 14;

scripted_model model(bool shift) {
    return {16, mask, {eos}, shift, dlm_test::oracle({4, 5, 6, 7, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11}, std::vector<double>(16, 0.95))};
}

reg::preset_id id(std::string_view name) { return reg::builtin.find(name).value(); }

/// The parameter an invalid_parameter names, or "" when `f` does not throw.
template <class F>
std::string refused(F&& f) {
    try {
        f();
    } catch (const invalid_parameter& e) {
        return e.parameter();
    }
    return "";
}

}  // namespace

TEST_CASE("registry: every preset name builds the decoder of dlm/presets.hpp and decodes with it") {
    using M = scripted_model;
    namespace p = dlm::presets;
    const std::tuple expected{std::type_identity<p::autoregressive<M>>{}, std::type_identity<p::llada<M>>{},
                              std::type_identity<p::dream<M>>{},          std::type_identity<p::fast_dllm<M>>{},
                              std::type_identity<p::fast_dllm_dual<M>>{}, std::type_identity<p::cdlm<M>>{},
                              std::type_identity<p::cd4lm<M>>{},          std::type_identity<p::sdar<M>>{},
                              std::type_identity<p::fast_dllm_v2<M>>{},   std::type_identity<p::llada2<M>>{},
                              std::type_identity<p::fast_dllm_v2_block_cache<M>>{}, std::type_identity<p::llada21<M>>{},
                              std::type_identity<p::llada21_s<M>>{},      std::type_identity<p::cdlm_edit<M>>{},
                              std::type_identity<p::fast_dllm_edit<M>>{}, std::type_identity<p::diffusion_gemma<M>>{}};
    static_assert(std::tuple_size_v<decltype(expected)> == reg::builtin.size);
    for (std::size_t i = 0; i < reg::builtin.size; ++i) {
        const reg::preset_id pid{i};
        const std::string name(reg::builtin.name_of(pid));
        CAPTURE(name);
        CHECK(reg::builtin.find(name) == pid);
        CHECK(!reg::builtin.description_of(pid).empty());
        // Fast-dLLM v2 commits a block's first slot from the previous row: a shifted model.
        auto m = model(name.starts_with("fast-dllm-v2") || name == "autoregressive");
        if (name == "diffusion-gemma") {  // uniform-state: a masked-diffusion model is refused (test_diffusion_gemma decodes it)
            CHECK(refused([&] { (void)reg::visit<M>(reg::builtin, pid, [](auto) { return 0; }); }) == "preset");
            continue;
        }
        // 16 slots in blocks of 8 where the mask has blocks (Fast-dLLM v2's sub-blocks of 8 must divide them).
        const reg::settings s = reg::resolve(reg::builtin, pid, reg::accepted_only(reg::builtin, pid, {.gen_length = 16, .block_length = 8}));
        const auto r = reg::visit<M>(reg::builtin, pid, [&]<class D>(std::type_identity<D>) {
            const bool same = [&]<std::size_t... I>(std::index_sequence<I...>) {
                return ((i == I && std::is_same_v<D, typename std::tuple_element_t<I, decltype(expected)>::type>) || ...);
            }(std::make_index_sequence<reg::builtin.size>{});
            CHECK(same);
            D d = reg::make_decoder<D>(m, s);
            // A prompt of whole blocks: the aligned presets' blocks then start where the prompt ends.
            return d.generate(std::vector<token_id>{1, 2, 3, 1, 2, 3, 1, 2}, {.gen_length = s.gen_length, .seed = s.seed});
        });
        CHECK(r.tokens.size() == 16);
        CHECK(!r.failed());
    }
    CHECK(reg::builtin.find("fast_dllm") == id("fast-dllm"));  // underscores read as hyphens
    CHECK(!reg::builtin.find("turbo"));
    CHECK(refused([] { (void)reg::visit<scripted_model>(reg::builtin, reg::preset_id{reg::builtin.size}, [](auto) { return 0; }); }) == "preset");
}

TEST_CASE("registry: what a preset accepts is read from its policies' members") {
    constexpr auto cdlm = reg::builtin.accepts(reg::builtin.id("cdlm"));
    static_assert(cdlm.takes(option::block_length) && cdlm.takes(option::threshold));  // block_causal_mask, cdlm_schedule's tau
    static_assert(!cdlm.takes(option::steps) && !cdlm.takes(option::temperature) && !cdlm.takes(option::algorithm));
    constexpr auto llada = reg::builtin.accepts(reg::builtin.id("llada"));
    static_assert(llada.takes(option::steps) && llada.steps_in_all && llada.takes(option::temperature) && !llada.takes(option::threshold));
    static_assert(llada.takes(reg::algorithm::random) && llada.takes(reg::algorithm::maskgit_plus) && !llada.takes(reg::algorithm::entropy));
    constexpr auto dream = reg::builtin.accepts(reg::builtin.id("dream"));
    static_assert(!dream.takes(option::block_length) && dream.takes(option::eps) && dream.takes(option::alg_temp));
    static_assert(dream.takes(reg::algorithm::entropy) && !dream.takes(reg::algorithm::random));
    constexpr auto sdar = reg::builtin.accepts(reg::builtin.id("sdar"));
    static_assert(sdar.takes(option::steps) && !sdar.steps_in_all && sdar.takes(option::threshold) && sdar.takes(option::temperature));
    // Only LLaDA's steps each commit a share of the block, so that steps past its slots would be skipped
    // (dlm-server refuses them: server/preset_rules.hpp, check_steps_reachable).
    static_assert(llada.steps_up_to_slots && !dream.steps_up_to_slots && !sdar.steps_up_to_slots && !cdlm.steps_up_to_slots);
    constexpr auto ar = reg::builtin.accepts(reg::builtin.id("autoregressive"));
    static_assert(ar.options == reg::option_set{option::gen_length, option::seed});

    // A policy of one's own: its members say what it takes.
    struct stepped {
        index_t steps = 3;
        void select(const step_context&, std::span<const candidate>, std::vector<index_t>& c) const { c.push_back(0); }
    };
    using D = decoder<reg::any_model, causal_mask, no_cache, stepped, categorical_sampler>;
    static_assert(reg::accepted_by<D>().takes(option::steps) && !reg::accepted_by<D>().steps_in_all);
    static_assert(reg::accepted_by<D>().takes(option::top_p) && !reg::accepted_by<D>().takes(option::block_length));
}

TEST_CASE("registry: an option a preset's policies lack is refused by its name, a neutral value passes") {
    for (std::size_t i = 0; i < reg::builtin.size; ++i) {
        const reg::preset_id pid{i};
        CAPTURE(reg::builtin.name_of(pid));
        const reg::accepted a = reg::builtin.accepts(pid);
        const std::pair<option, reg::choices> cases[] = {
            {option::block_length, {.block_length = 8}}, {option::steps, {.steps = 8}},
            {option::threshold, {.threshold = 0.5}},     {option::eps, {.eps = 0.01}},
            {option::alg_temp, {.alg_temp = 0.1}},       {option::temperature, {.temperature = 0.5f}},
            {option::top_k, {.top_k = 3}},               {option::top_p, {.top_p = 0.5f}},
            {option::editing_threshold, {.editing_threshold = 0.3}},
        };
        for (const auto& oc : cases) {
            const auto& o = oc.first;
            const auto& c = oc.second;
            CAPTURE(reg::name_of(o));
            const std::string p = refused([&] { reg::check_accepted(reg::builtin, pid, c); });
            CHECK(p == (a.takes(o) ? "" : std::string(reg::name_of(o))));
        }
        CHECK(refused([&] { reg::check_accepted(reg::builtin, pid, {.temperature = 0.f, .top_k = 0, .top_p = 1.f, .seed = 7}); }).empty());
    }
    try {
        reg::check_accepted(reg::builtin, id("cdlm"), {.temperature = 0.7f}, [](option o) { return "--" + std::string(reg::name_of(o)); });
        FAIL("cdlm samples greedily");
    } catch (const invalid_parameter& e) {
        CHECK(e.parameter() == "--temperature");  // named as the caller names it
        CHECK(std::string(e.what()).find("does not apply to the cdlm preset (it samples greedily); it applies to llada") != std::string::npos);
    }
    CHECK(refused([] { reg::check_accepted(reg::builtin, id("llada"), {.alg = reg::algorithm::entropy}); }) == "algorithm");
    CHECK(refused([] { reg::check_accepted(reg::builtin, id("dream"), {.alg = reg::algorithm::entropy}); }).empty());
}

TEST_CASE("registry: validate runs the policies' own checks and names the option") {
    const auto check = [](std::string_view preset, reg::choices c) {
        return refused([&] { (void)reg::resolve(reg::builtin, id(preset), c); });
    };
    CHECK(check("llada", {.gen_length = 16, .block_length = 8, .steps = 3}) == "steps");  // 2 blocks
    CHECK(check("llada", {.gen_length = 16, .block_length = 8, .steps = 4}).empty());
    CHECK(check("dream", {.gen_length = 16, .steps = 3}).empty());  // one block
    CHECK(check("sdar", {.gen_length = 16, .block_length = 8, .steps = 3}).empty());  // steps per block
    CHECK(check("cdlm", {.gen_length = 20, .block_length = 8}) == "block_length");
    CHECK(check("sdar", {.gen_length = 20, .block_length = 8}).empty());  // aligned blocks: any generation length
    CHECK(check("cdlm", {.threshold = 1.5}) == "threshold");             // cdlm_schedule calls it tau
    CHECK(check("llada", {.top_p = 0.f}) == "top_p");
    CHECK(check("cdlm", {.gen_length = 0}) == "gen_length");
    try {
        (void)reg::resolve(reg::builtin, id("cdlm"), {.gen_length = 20}, {.block_length = 8});
        FAIL("8 does not divide 20");
    } catch (const invalid_parameter& e) {
        CHECK(e.parameter() == "block_length");
        CHECK(e.rule() == "must divide gen_length (20), got 8; block length 8 (the model's dlm_block_length), gen_length 20");
    }
}

TEST_CASE("registry: defaults come from the user, the model's hints, the preset's policies, then dlm, each with its source") {
    const reg::settings c = reg::resolve(reg::builtin, id("cdlm"), {});
    CHECK(c.gen_length == 128);
    CHECK(c.source_of(option::gen_length) == reg::source::library);
    CHECK(c.block_length == 32);
    CHECK(c.threshold == 0.9);
    CHECK(c.source_of(option::threshold) == reg::source::preset);
    const reg::settings h = reg::resolve(reg::builtin, id("cdlm"), {.threshold = 0.7}, {48, 8});
    CHECK(h.gen_length == 48);
    CHECK(h.source_of(option::gen_length) == reg::source::model);
    CHECK(h.origin_of(option::block_length) == "the model's dlm_block_length");
    CHECK(h.threshold == 0.7);
    CHECK(h.source_of(option::threshold) == reg::source::user);
    CHECK(reg::resolve(reg::builtin, id("cd4lm"), {}).threshold == 0.95);
    CHECK(reg::resolve(reg::builtin, id("sdar"), {}).threshold == 0.85);
    CHECK(reg::resolve(reg::builtin, id("sdar"), {}).temperature == 1.f);  // sdar_sampler: SDAR samples at temperature 1
    CHECK(reg::resolve(reg::builtin, id("llada2"), {}).threshold == 0.95);
    // LLaDA 2.1's two modes: the schedules' own defaults; the editing threshold is the user's to change.
    CHECK(reg::resolve(reg::builtin, id("llada21"), {}).threshold == 0.7);
    CHECK(reg::resolve(reg::builtin, id("llada21"), {}).editing_threshold == 0.5);
    CHECK(reg::resolve(reg::builtin, id("llada21-s"), {}).threshold == 0.5);
    CHECK(reg::resolve(reg::builtin, id("llada21-s"), {}).editing_threshold == 0.0);
    CHECK(reg::resolve(reg::builtin, id("llada21"), {.editing_threshold = 0.8}).source_of(option::editing_threshold) == reg::source::user);
    CHECK(reg::describe(reg::builtin, reg::resolve(reg::builtin, id("llada21-s"), {})) ==
          "llada21-s: gen 128, block 32, threshold 0.5, editing threshold 0");
    CHECK(refused([] { (void)reg::resolve(reg::builtin, id("llada2"), {.editing_threshold = 0.5}); }) == "editing_threshold");
    CHECK(reg::resolve(reg::builtin, id("llada"), {}, {48, 8}).steps == 48);  // in all: the generation length
    CHECK(reg::resolve(reg::builtin, id("sdar"), {}, {48, 8}).steps == 8);    // per block: the block length
    CHECK(reg::resolve(reg::builtin, id("llada"), {}).alg == reg::algorithm::maskgit_plus);
    CHECK(reg::resolve(reg::builtin, id("dream"), {}).alg == reg::algorithm::origin);
    CHECK(reg::describe(reg::builtin, h) == "cdlm: gen 48, block 8, threshold 0.7");
    CHECK(reg::describe(reg::builtin, reg::resolve(reg::builtin, id("fast-dllm-v2-block-cache"), {})) ==
          "fast-dllm-v2-block-cache: gen 128, block 32, sub-blocks of 8 with the sub-block cache, threshold 0.9");
    CHECK(reg::effective_block_length(reg::builtin, reg::resolve(reg::builtin, id("dream"), {.gen_length = 24})) == 24);
    CHECK(reg::effective_block_length(reg::builtin, reg::resolve(reg::builtin, id("autoregressive"), {})) == 1);
}

TEST_CASE("registry: the user's options laid over resolved settings change what they set, and default steps follow the canvas") {
    reg::settings s = reg::resolve(reg::builtin, id("llada"), {}, {48, 8});
    const reg::settings before = s;
    reg::apply_user_options(s, {.temperature = 0.5f, .seed = 7});
    CHECK(s.temperature == 0.5f);
    CHECK(s.source_of(option::temperature) == reg::source::user);
    CHECK(s.seed == 7u);
    CHECK(s.steps == before.steps);
    CHECK(s.source_of(option::steps) == before.source_of(option::steps));
    CHECK(s.top_k == before.top_k);
    CHECK(s.source_of(option::top_k) == before.source_of(option::top_k));
    s.gen_length = 96;  // a request's canvas (dlm-server's request_settings)
    reg::default_steps(s, reg::builtin.accepts(id("llada")));
    CHECK(s.steps == 96);  // in all: the generation length
    CHECK(s.origin_of(option::steps) == "the generation length");
    reg::apply_user_options(s, {.steps = 5});
    CHECK(s.steps == 5);
    CHECK(s.source_of(option::steps) == reg::source::user);
    reg::settings b = reg::resolve(reg::builtin, id("sdar"), {}, {48, 8});
    b.block_length = 16;
    reg::default_steps(b, reg::builtin.accepts(id("sdar")));
    CHECK(b.steps == 16);  // per block: the block length
    CHECK(b.origin_of(option::steps) == "the block length");
}

namespace {

/// A preset of a test's own: CDLM's policies with the dual cache's semi-AR mask swapped in.
template <class Model>
using own_preset = decoder<Model, semi_ar_mask, no_cache, threshold_schedule, greedy_sampler>;

inline constexpr auto extended = reg::builtin.with(reg::preset<own_preset>{"own", "a test's own preset"});

}  // namespace

TEST_CASE("registry: a table extended by one line finds, builds, checks and decodes its own preset") {
    static_assert(extended.size == reg::builtin.size + 1);
    const reg::preset_id own = extended.find("own").value();
    CHECK(own.index == reg::builtin.size);
    CHECK(extended.find("cdlm") == reg::builtin.find("cdlm"));
    CHECK(extended.accepts(own).takes(option::threshold));
    CHECK(refused([&] { reg::check_accepted(extended, own, {.steps = 4}); }) == "steps");
    const reg::settings s = reg::resolve(extended, own, {.gen_length = 8, .block_length = 4, .threshold = 0.5});
    CHECK(reg::describe(extended, s) == "own: gen 8, block 4, threshold 0.5");
    auto m = model(false);
    const auto r = reg::visit<scripted_model>(extended, own, [&]<class D>(std::type_identity<D>) {
        CHECK(std::is_same_v<D, own_preset<scripted_model>>);  // visit instantiates every row; it calls this one
        D d = reg::make_decoder<D>(m, s);
        if constexpr (std::is_same_v<D, own_preset<scripted_model>>) CHECK(d.schedule().tau == 0.5);
        return d.generate(std::vector<token_id>{1, 2, 3}, {.gen_length = s.gen_length});
    });
    CHECK(r.tokens == std::vector<token_id>{4, 5, 6, 7, 8, 9, 10, 11});  // the oracle's first 8
}

}  // namespace test_registry
