// The policy name table and run-time composition (include/dlm/registry/policy_names.hpp, compose.hpp):
// every preset spelled as its four policies' names decodes exactly as the preset; the compositions
// refused are those the decoder's traits refuse, named by axis; options a composition's policies lack
// are refused naming the axis that would take them.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include <dlm/registry/compose.hpp>
#include <dlm/registry/describe.hpp>
#include <dlm/testing/scripted_model.hpp>

#include "support/scripts.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_compose {

using namespace dlm;
using dlm::testing::scripted_model;
namespace reg = dlm::registry;

namespace {

constexpr token_id mask = 15, eos = 14;

/// Confidences that differ slot by slot, so that schedules commit in different orders.
scripted_model model(bool shift) {
    std::vector<double> conf;
    for (int i = 0; i < 16; ++i) conf.push_back(0.5 + 0.03 * ((i * 7) % 16));
    // An EOS in the first block: the schedules that stop after a block holding it (cdlm, sdar, ...) stop there.
    return {16, mask, {eos}, shift, dlm_test::oracle({4, 5, 6, 7, 8, 9, eos, 11, 4, 5, 6, 7, 8, 9, 10, 11}, conf)};
}

template <class F>
std::string refused(F&& f) {
    try {
        f();
    } catch (const invalid_parameter& e) {
        return e.parameter() + ": " + e.rule();
    }
    return "";
}

template <class Decode>
sequence_result decode_with(scripted_model& m, const reg::settings& s, Decode&& visit) {
    sequence_result r;
    visit([&]<class D>(std::type_identity<D>) {
        D d = reg::make_decoder<D>(m, s);
        r = d.generate(std::vector<token_id>{1, 2, 3, 1, 2, 3, 1, 2}, {.gen_length = s.gen_length, .seed = s.seed});
    });
    return r;
}

}  // namespace

TEST_CASE("compose: every preset spelled as its four policies' names decodes exactly as the preset") {
    using M = scripted_model;
    for (std::size_t i = 0; i < reg::builtin.size; ++i) {
        const reg::preset_id pid{i};
        const std::string name(reg::builtin.name_of(pid));
        CAPTURE(name);
        if (name == "diffusion-gemma") {  // uniform-state: its preset only (test_diffusion_gemma), refused by name as a composition
            CHECK(refused([&] { reg::check_composable(reg::composition_of(reg::builtin, pid)); }).starts_with("schedule: the entropy_bound schedule is uniform-state"));
            continue;
        }
        auto m = model(name.starts_with("fast-dllm-v2") || name == "autoregressive");
        const reg::choices c = reg::accepted_only(reg::builtin, pid, {.gen_length = 16, .block_length = 8, .temperature = 0.7f, .seed = 5});
        const reg::settings ps = reg::resolve(reg::builtin, pid, c);
        const reg::composition comp = reg::composition_of(reg::builtin, pid);
        const reg::settings cs = reg::resolve_composition(comp, c);
        CHECK(reg::accepted_by(comp).options == reg::builtin.accepts(pid).options);
        CHECK(reg::accepted_by(comp).steps_in_all == reg::builtin.accepts(pid).steps_in_all);
        CHECK(reg::describe(reg::builtin, cs).substr(reg::describe(reg::builtin, cs).find(':')) ==
              reg::describe(reg::builtin, ps).substr(reg::describe(reg::builtin, ps).find(':')));
        const auto want = decode_with(m, ps, [&](auto f) { reg::visit<M>(reg::builtin, pid, f); });
        const auto got = decode_with(m, cs, [&](auto f) { reg::visit_composition<M>(comp, f); });
        CHECK(!got.failed());
        CHECK(got.tokens == want.tokens);
        CHECK(got.commit_forward == want.commit_forward);
        CHECK(got.stats.forwards == want.stats.forwards);
    }
}

TEST_CASE("compose: a composition is refused, naming the axis, exactly where the decoder's traits refuse it") {
    using M = scripted_model;
    std::size_t built = 0, refusals = 0;
    for (std::size_t mk = 0; mk < reg::masks.size; ++mk)
        for (std::size_t ca = 0; ca < reg::caches.size; ++ca)
            for (std::size_t sc = 0; sc < reg::schedules.size; ++sc) {
                const reg::composition comp{mk, ca, sc, 0};
                CAPTURE(reg::name_of(comp));
                int visited = 0;
                const std::string why = refused([&] { reg::visit_composition<M>(comp, [&](auto) { ++visited; }); });
                CHECK(why == refused([&] { reg::check_composable(comp); }));
                CHECK(visited == (why.empty() ? 1 : 0));  // every accepted composition has its decoder type
                if (why.empty()) ++built;
                else {
                    ++refusals;
                    CHECK((why.starts_with("cache: ") || why.starts_with("schedule: the entropy_bound schedule is uniform-state")));
                }
            }
    CHECK(built > 0);
    CHECK(refusals > 0);
    const std::string exact = refused([] { (void)reg::compose("semi_ar", "prefix", "threshold", "llada"); });
    CHECK(exact.find("an exact KV cache needs a mask under which committed keys and values are final") != std::string::npos);
    CHECK(refused([] { (void)reg::compose("bidirectional", "prefix", "dream", "categorical"); }).starts_with("cache: "));
    const std::string revising = refused([] { (void)reg::compose("block_causal", "sub_block", "llada21", "greedy"); });
    CHECK(revising.find("a revising schedule") != std::string::npos);
    CHECK(refused([] { (void)reg::compose("block_causal", "prefix", "llada21", "greedy"); }).empty());
    CHECK(refused([] { (void)reg::compose("semi_ar", "dual", "cd4lm", "llada"); }).empty());
}

TEST_CASE("compose: unknown names and options the policies lack are refused naming the axis") {
    CHECK(refused([] { (void)reg::compose("diagonal", "none", "threshold", "greedy"); }).starts_with("mask: unknown mask 'diagonal' (one of causal,"));
    CHECK(refused([] { (void)reg::compose("causal", "nope", "threshold", "greedy"); }).starts_with("cache: "));
    CHECK(refused([] { (void)reg::compose("causal", "none", "fastest", "greedy"); }).starts_with("schedule: "));
    CHECK(refused([] { (void)reg::compose("causal", "none", "threshold", "beam"); }).starts_with("sampler: "));
    CHECK(reg::compose("block-causal", "approx-prefix", "threshold", "greedy") == reg::compose("block_causal", "approx_prefix", "threshold", "greedy"));

    const reg::composition c = reg::compose("block_causal", "prefix", "threshold", "greedy");
    const std::string steps = refused([&] { (void)reg::resolve_composition(c, {.steps = 4}); });
    CHECK(steps.starts_with("steps: does not apply to the composition block_causal + prefix + threshold + greedy"));
    CHECK(steps.find("schedules that take it: llada, dream,") != std::string::npos);
    const std::string temp = refused([&] { (void)reg::resolve_composition(c, {.temperature = 0.5f}); });
    CHECK(temp.find("samplers that take it: categorical, llada, sdar, llada2") != std::string::npos);
    CHECK(refused([] { (void)reg::resolve_composition(reg::compose("causal", "prefix", "next_slot", "greedy"), {.block_length = 4}); })
              .find("masks that take it: block_causal, semi_ar, aligned_block_diffusion") != std::string::npos);
    // The policies' own checks, as for a preset: a threshold outside [0, 1], a block that does not divide.
    CHECK(refused([&] { (void)reg::resolve_composition(c, {.threshold = 1.5}); }).starts_with("threshold: "));
    CHECK(refused([&] { (void)reg::resolve_composition(c, {.gen_length = 12, .block_length = 8}); }).starts_with("block_length: "));
    // Options the composition has: set, and described.
    const reg::settings s = reg::resolve_composition(reg::compose("semi_ar", "none", "llada", "llada"), {.gen_length = 16, .block_length = 8,
                                                                                                        .steps = 8, .temperature = 0.5f});
    CHECK(s.steps == 8);
    CHECK(reg::describe(reg::builtin, s) == "semi_ar + none + llada + llada: gen 16, block 8, steps 8, maskgit_plus, temp 0.5");
}

TEST_CASE("compose: the name table has unique names and a line for every policy") {
    const auto check = [](const auto& list) {
        std::set<std::string> seen;
        for (std::size_t i = 0; i < list.size; ++i) {
            CHECK(seen.insert(std::string(list.name_of(i))).second);
            CHECK(!list.description_of(i).empty());
            CHECK(list.find(list.name_of(i)) == i);
        }
    };
    check(reg::masks);
    check(reg::caches);
    check(reg::schedules);
    check(reg::samplers);
    CHECK(reg::masks.index_of<int>() == reg::masks.size);
    CHECK(reg::composition_of(reg::builtin, reg::builtin.find("cdlm").value()) == reg::compose("block_causal", "prefix", "cdlm", "greedy"));
}

}  // namespace test_compose
