// The step-wise engine: sequences that join a running batch decode exactly as alone; cancel and
// failure end one sequence; the committed prefix only grows, and never passes a masked slot.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <dlm/cpu/transformer.hpp>
#include <dlm/engine.hpp>
#include <dlm/presets.hpp>

#include "support/scripts.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_engine {

using namespace dlm;
using dlm::testing::scripted_model;
using tvec = std::vector<token_id>;

namespace {

constexpr token_id mask = 31, eos = 30;
scripted_model hashed(bool shift = false) { return {32, mask, {eos}, shift, dlm_test::context_hash()}; }

/// A sequence to add at a given step of the engine's run.
struct arrival {
    index_t at_step = 0;
    tvec prompt;
    generation_options options;
};

/// Checks, after every step, that each running sequence's committed prefix only grows, holds no mask
/// id, and stops at the first still-masked slot; returns every result by arrival index.
template <class Decoder>
std::vector<sequence_result> run_arrivals(Decoder& d, const std::vector<arrival>& arrivals) {
    engine eng(d);
    std::map<std::uint64_t, std::size_t> index_of;
    std::map<std::uint64_t, tvec> streamed;  // each sequence's committed prefix after the last step
    std::vector<sequence_result> out(arrivals.size());
    std::size_t added = 0, done = 0;
    const token_id mask_id = d.model().mask_id();
    for (index_t step = 0; done < arrivals.size(); ++step) {
        for (std::size_t i = 0; i < arrivals.size(); ++i)
            if (arrivals[i].at_step == step) {
                index_of[eng.add(arrivals[i].prompt, arrivals[i].options)] = i;
                ++added;
            }
        CHECK(eng.active() <= added - done);
        if (eng.idle()) {
            REQUIRE(added < arrivals.size());  // nothing to run until the next arrival
            continue;
        }
        eng.step();
        for (const auto& [id, i] : index_of) {
            if (out[i].tokens.size() > 0) continue;  // already taken
            const auto prefix = eng.committed_prefix(id);
            const tvec& before = streamed[id];
            CHECK(prefix.size() >= before.size());
            CHECK(std::equal(before.begin(), before.end(), prefix.begin()));  // what was streamed stays
            streamed[id].assign(prefix.begin(), prefix.end());
            for (token_id t : prefix) CHECK(t != mask_id);
            const auto canvas = eng.canvas(id);
            const std::size_t p = canvas.size() - arrivals[i].options.gen_length.value_or(0);
            if (p + prefix.size() < canvas.size()) CHECK(canvas[p + prefix.size()] == mask_id);
        }
        for (auto& [id, r] : eng.take_finished()) {
            const tvec& last = streamed[id];
            CHECK(std::equal(last.begin(), last.end(), r.tokens.begin()));  // the streamed prefix is the answer's start
            if (r.status == sequence_status::finished) CHECK(last.size() == r.tokens.size());
            out[index_of.at(id)] = std::move(r);
            ++done;
        }
    }
    CHECK(eng.idle());
    return out;
}

void check_same(const sequence_result& a, const sequence_result& b) {
    CHECK(a.status == b.status);
    CHECK(a.tokens == b.tokens);
    CHECK(a.commit_forward == b.commit_forward);
    CHECK(a.commit_confidence == b.commit_confidence);
    CHECK(a.stats.forwards == b.stats.forwards);
    CHECK(a.stats.steps_per_block == b.stats.steps_per_block);
    CHECK(a.answer_length == b.answer_length);
}

/// Sequences joining at steps 0, 0, 2 and 5, with their own seeds and lengths, each decode as alone.
template <class Decoder>
void check_joins(Decoder& d, index_t gen) {
    const std::vector<arrival> arrivals{{0, {1, 2, 3}, {.gen_length = gen, .seed = 11}},
                                        {0, {4, 5, 6, 7, 8}, {.gen_length = 2 * gen, .seed = 12}},
                                        {2, {9}, {.gen_length = gen, .seed = 13}},
                                        {5, {10, 11, 12, 13}, {.gen_length = gen, .seed = 14}}};
    const auto joined = run_arrivals(d, arrivals);
    for (std::size_t i = 0; i < arrivals.size(); ++i) {
        CAPTURE(i);
        check_same(d.generate(arrivals[i].prompt, arrivals[i].options), joined[i]);
    }
}

}  // namespace

TEST_CASE("engine: a sequence that joins a running batch decodes exactly as alone, every preset") {
    SUBCASE("autoregressive") {
        auto m = hashed(true);
        presets::autoregressive<scripted_model> d(m);
        check_joins(d, 8);
    }
    SUBCASE("llada, sampled") {
        auto m = hashed();
        presets::llada<scripted_model> d(m, semi_ar_mask{4}, {}, llada_schedule{}, presets::llada_sampler(0.8f));
        check_joins(d, 8);
    }
    SUBCASE("dream, sampled, shifted") {
        auto m = hashed(true);
        presets::dream<scripted_model> d(m, {}, {}, dream_schedule{}, categorical_sampler{0.7f, 0, 0.95f});
        check_joins(d, 8);
    }
    SUBCASE("fast_dllm") {
        auto m = hashed();
        presets::fast_dllm<scripted_model> d(m, semi_ar_mask{4}, {}, threshold_schedule{0.2});
        check_joins(d, 8);
    }
    SUBCASE("fast_dllm_dual") {
        auto m = hashed();
        presets::fast_dllm_dual<scripted_model> d(m, semi_ar_mask{4}, {}, threshold_schedule{0.2});
        check_joins(d, 8);
    }
    SUBCASE("cdlm, exact cache") {
        auto m = hashed();
        presets::cdlm<scripted_model> d(m, block_causal_mask{4}, {}, presets::cdlm_schedule{0.2});
        check_joins(d, 8);
    }
    SUBCASE("cd4lm") {
        auto m = hashed();
        presets::cd4lm<scripted_model> d(m, semi_ar_mask{4}, {}, cd4lm_schedule{0.3});
        check_joins(d, 8);
    }
}

TEST_CASE("engine: joining mid-run on the real CPU transformer gives the tokens of a solo decode") {
    auto m = cpu::transformer::load(std::filesystem::path(DLM_MODELS_DIR) / "cdlm");
    const index_t vocab = m.vocab_size();
    const std::vector<arrival> arrivals{{0, {1, 2, 3, 4}, {.gen_length = 16, .seed = 1}},
                                        {1, {5 % vocab, 6, 7}, {.gen_length = 24, .seed = 2}},
                                        {3, {8, 9, 10, 11, 12, 13}, {.gen_length = 16, .seed = 3}}};
    auto check = [&](auto&& d) {
        const auto joined = run_arrivals(d, arrivals);
        for (std::size_t i = 0; i < arrivals.size(); ++i) {
            CAPTURE(i);
            check_same(d.generate(arrivals[i].prompt, arrivals[i].options), joined[i]);
        }
    };
    check(presets::cdlm<cpu::transformer>(m, block_causal_mask{8}));
    check(presets::llada<cpu::transformer>(m, semi_ar_mask{8}, {}, llada_schedule{}, presets::llada_sampler(0.7f)));
    check(presets::fast_dllm_dual<cpu::transformer>(m, semi_ar_mask{8}));
}

TEST_CASE("engine: per-sequence sampler, schedule and block length decode as a decoder built with them") {
    auto m = hashed();
    using D = presets::llada<scripted_model>;
    D base(m, semi_ar_mask{4});
    engine eng(base);
    D::sampler_type hot(0.9f);
    const auto a = eng.add({1, 2}, {.gen_length = 8, .seed = 5}, {.mask = semi_ar_mask{2}, .schedule = llada_schedule{4}, .sampler = hot});
    const auto b = eng.add({3}, {.gen_length = 8, .seed = 6});
    while (!eng.idle()) eng.step();
    auto done = eng.take_finished();
    REQUIRE(done.size() == 2);
    for (auto& [id, r] : done) {
        if (id == a) check_same(D(m, semi_ar_mask{2}, {}, llada_schedule{4}, hot).generate(tvec{1, 2}, {.gen_length = 8, .seed = 5}), r);
        if (id == b) check_same(base.generate(tvec{3}, {.gen_length = 8, .seed = 6}), r);
        if (id == a) CHECK(r.settings.block_length.value == 2);
    }
    SUBCASE("a bad per-sequence option is refused in add, naming it, and the batch runs on") {
        const auto c = eng.add({1}, {.gen_length = 8});
        CHECK_THROWS_WITH_AS(eng.add({1}, {.gen_length = 8}, {.mask = semi_ar_mask{3}}), doctest::Contains("block_length"), invalid_parameter);
        CHECK_THROWS_WITH_AS(eng.add({1}, {.gen_length = 8}, {.sampler = D::sampler_type(-1.f)}), doctest::Contains("temperature"),
                             invalid_parameter);
        CHECK_THROWS_AS(eng.add(tvec{}, {.gen_length = 8}), invalid_parameter);
        CHECK(eng.active() == 1);
        while (!eng.idle()) eng.step();
        auto rest = eng.take_finished();
        REQUIRE(rest.size() == 1);
        CHECK(rest[0].first == c);
        check_same(base.generate(tvec{1}, {.gen_length = 8}), rest[0].second);
    }
}

TEST_CASE("engine: check_batch refuses what add_batch refuses, naming the prompt, and queues nothing") {
    scripted_model m = hashed();
    presets::cdlm<scripted_model> d(m, block_causal_mask{4});
    engine eng(d);
    const std::vector<tvec> bad = {{1, 2}, {}}, good = {{1, 2}, {3}};
    CHECK_THROWS_WITH_AS(eng.check_batch(bad, {.gen_length = 8}), doctest::Contains("prompts[1]"), invalid_parameter);
    CHECK_THROWS_WITH_AS((void)eng.add_batch(bad, {.gen_length = 8}), doctest::Contains("prompts[1]"), invalid_parameter);
    CHECK_THROWS_WITH_AS(eng.check_batch(good, {.gen_length = 0}), doctest::Contains("gen_length"), invalid_parameter);
    eng.check_batch(good, {.gen_length = 8});
    CHECK(eng.idle());
    CHECK(eng.active() == 0);
    CHECK(m.log().empty());
}

TEST_CASE("engine: a sequence's own schedule must cut sub-blocks as the decoder's cache does, as the decoder's constructor checks") {
    scripted_model m = hashed(true);  // Fast-dLLM v2 reads a block's first slot from the row before it
    presets::fast_dllm_v2_block_cache<scripted_model> d(m, aligned_block_diffusion_mask{8}, sub_block_cache{4}, sub_block_threshold_schedule{0.9, 4});
    engine eng(d);
    CHECK_THROWS_WITH_AS(eng.add({1, 2, 3}, {.gen_length = 16}, {.schedule = sub_block_threshold_schedule{0.9, 2}}),
                         doctest::Contains("the cache recomputes sub-blocks of 4 but the schedule decodes sub-blocks of 2"), invalid_parameter);
    CHECK(eng.idle());
    CHECK_NOTHROW(eng.add({1, 2, 3}, {.gen_length = 16}, {.schedule = sub_block_threshold_schedule{0.5, 4}}));
}

TEST_CASE("engine: classifier-free guidance per sequence, beside sequences without it") {
    auto m = hashed();
    presets::llada<scripted_model> d(m, semi_ar_mask{4}, {}, llada_schedule{}, presets::llada_sampler(0.5f));
    const std::vector<arrival> arrivals{{0, {1, 2, 3}, {.gen_length = 8, .seed = 3, .cfg_scale = 1.5}},
                                        {1, {4, 5}, {.gen_length = 8, .seed = 4}},
                                        {2, {6}, {.gen_length = 8, .seed = 5, .cfg_scale = 0.5}}};
    const auto joined = run_arrivals(d, arrivals);
    for (std::size_t i = 0; i < arrivals.size(); ++i) check_same(d.generate(arrivals[i].prompt, arrivals[i].options), joined[i]);
}

TEST_CASE("engine: cancel ends one sequence with what it committed; the others decode as alone") {
    auto m = hashed();
    presets::cdlm<scripted_model> d(m, block_causal_mask{4}, {}, presets::cdlm_schedule{0.99});
    engine eng(d);
    const auto a = eng.add({1, 2}, {.gen_length = 16, .seed = 1});
    const auto b = eng.add({3, 4}, {.gen_length = 16, .seed = 2});
    eng.step();
    eng.step();
    const std::vector<token_id> before(eng.committed_prefix(a).begin(), eng.committed_prefix(a).end());
    eng.cancel(a);  // between steps: at once
    CHECK(eng.active() == 1);
    auto gone = eng.take_finished();
    REQUIRE(gone.size() == 1);
    CHECK(gone[0].first == a);
    CHECK(gone[0].second.cancelled());
    CHECK(gone[0].second.stats.forwards == 2);
    CHECK(std::equal(before.begin(), before.end(), gone[0].second.tokens.begin()));
    CHECK(std::count(gone[0].second.tokens.begin(), gone[0].second.tokens.end(), mask) > 0);
    eng.cancel(a);    // already gone: ignored
    eng.cancel(999);  // never added: ignored
    CHECK_THROWS_AS((void)eng.committed_prefix(a), invalid_parameter);
    while (!eng.idle()) eng.step();
    auto rest = eng.take_finished();
    REQUIRE(rest.size() == 1);
    CHECK(rest[0].first == b);
    check_same(d.generate(tvec{3, 4}, {.gen_length = 16, .seed = 2}), rest[0].second);

    SUBCASE("from a step callback: the sequence takes no further step") {
        const auto c = eng.add({5}, {.gen_length = 16, .seed = 3});
        const auto e = eng.add({6}, {.gen_length = 16, .seed = 4});
        int calls = 0;
        eng.step([&](const step_event& ev) {
            ++calls;
            if (static_cast<std::uint64_t>(ev.sequence) == c) eng.cancel(e);  // e comes after c in this step
            return step_action::proceed;
        });
        CHECK(calls == 1);
        auto out = eng.take_finished();
        REQUIRE(out.size() == 1);
        CHECK(out[0].first == e);
        CHECK(out[0].second.cancelled());
        CHECK(out[0].second.stats.forwards == 0);
        CHECK(eng.active() == 1);
    }
}

TEST_CASE("engine: one sequence's failure ends only that sequence, joined or not") {
    // Non-finite logits for every sequence whose prompt is one token long.
    auto m = scripted_model(32, mask, {eos}, false, [hash = dlm_test::context_hash()](const testing::script_view& v, std::span<float> out) {
        hash(v, out);
        if (v.layout.prompt_length == 1) out[3] = std::nanf("");
    });
    presets::fast_dllm<scripted_model> d(m, semi_ar_mask{4});
    const std::vector<arrival> arrivals{{0, {1, 2}, {.gen_length = 8, .seed = 1}},
                                        {1, {7}, {.gen_length = 8, .seed = 2}},
                                        {2, {3, 4, 5}, {.gen_length = 8, .seed = 3}}};
    const auto r = run_arrivals(d, arrivals);
    CHECK(r[1].failed());
    CHECK_THROWS_AS(r[1].rethrow_if_failed(), numeric_error);
    check_same(d.generate(arrivals[0].prompt, arrivals[0].options), r[0]);
    check_same(d.generate(arrivals[2].prompt, arrivals[2].options), r[2]);
}

TEST_CASE("engine: idle and active") {
    auto m = hashed();
    presets::cdlm<scripted_model> d(m, block_causal_mask{4});
    engine eng(d);
    CHECK(eng.idle());
    CHECK(eng.active() == 0);
    CHECK(eng.step().empty());  // nothing to run: no forward
    CHECK(eng.stats().forwards == 0);
    const auto ids = eng.add_batch(std::vector<tvec>{{1}, {2, 3}}, {.gen_length = 8, .seed = 9});
    CHECK(ids.size() == 2);
    CHECK_FALSE(eng.idle());
    CHECK(eng.active() == 2);
    const auto& events = eng.step();
    CHECK(events.size() == 2);
    CHECK(eng.stats().forwards == 1);
    index_t forwards = 1;
    while (!eng.idle()) {
        eng.step();
        ++forwards;
    }
    CHECK(eng.active() == 0);
    CHECK(eng.stats().forwards == forwards);
    const auto out = eng.take_finished();
    CHECK(out.size() == 2);
    CHECK(eng.take_finished().empty());
    // The batch add seeds like generate: the same results.
    const auto batch = d.generate(std::vector<tvec>{{1}, {2, 3}}, {.gen_length = 8, .seed = 9});
    for (const auto& [id, r] : out) check_same(batch.sequences[static_cast<std::size_t>(id - ids.front())], r);
}

TEST_CASE("engine: a batch larger than one forward group of the CPU transformer decodes as alone") {
    auto m = cpu::transformer::load(std::filesystem::path(DLM_MODELS_DIR) / "teacher");
    presets::llada<cpu::transformer> d(m, semi_ar_mask{8}, {}, llada_schedule{8}, presets::llada_sampler(0.6f));
    std::vector<tvec> prompts;
    index_t rows = 0;
    for (token_id i = 0; rows <= 2 * m.group_rows(); ++i) {  // the first forward spans three groups
        prompts.push_back(tvec(static_cast<std::size_t>(20 + i % 7), static_cast<token_id>(1 + i)));
        rows += static_cast<index_t>(prompts.back().size()) + 16;
    }
    const auto batch = d.generate(prompts, {.gen_length = 16, .seed = 5});
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        CAPTURE(i);
        check_same(d.generate(prompts[i], {.gen_length = 16, .seed = sequence_seed(5, i)}), batch.sequences[i]);
    }
}

}  // namespace test_engine
