// The decoding loop itself: batching, reproducibility, cache exactness, callback, errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <dlm/presets.hpp>

#include "support/scripts.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_decoder {

using namespace dlm;
using dlm::testing::scripted_model;
using dlm_test::context_hash;
using dlm_test::oracle;
using tvec = std::vector<token_id>;
using prompts_t = std::vector<std::vector<token_id>>;

namespace {
constexpr token_id mask = 31, eos = 30;
scripted_model hashed(bool shift = false) { return {32, mask, {eos}, shift, context_hash()}; }

void check_same(const sequence_result& a, const sequence_result& b) {
    CHECK(a.tokens == b.tokens);
    CHECK(a.commit_forward == b.commit_forward);
    CHECK(a.commit_confidence == b.commit_confidence);
    CHECK(a.stats.forwards == b.stats.forwards);
}

template <class Decoder>
void check_batch_invariance(Decoder& d, index_t gen) {
    const prompts_t batch{{1, 2, 3}, {4, 5, 6, 7, 8}, {9}, {10, 11, 12, 13}};
    const auto together = d.generate(batch, {gen, 99});
    for (std::size_t i = 0; i < batch.size(); ++i) {
        // Sequence i of a batch decoded with seed 99 gets sequence_seed(99, i): alone with that seed, the same.
        const auto alone = d.generate(batch[i], {.gen_length = gen, .seed = sequence_seed(99, i)});
        check_same(alone, together.sequences[i]);
        CHECK(together.sequences[i].settings.seed.value == sequence_seed(99, i));
    }
}
}  // namespace

TEST_CASE("a sequence decodes identically alone and inside a batch of 4") {
    SUBCASE("llada, sampled") {
        auto m = hashed();
        presets::llada<scripted_model> d(m, semi_ar_mask{4}, {}, llada_schedule{8}, presets::llada_sampler(0.8f));
        check_batch_invariance(d, 16);
    }
    SUBCASE("dream, origin, sampled, shifted") {
        auto m = hashed(true);
        presets::dream<scripted_model> d(m, {}, {}, dream_schedule{16}, categorical_sampler{0.7f, 0, 0.95f});
        check_batch_invariance(d, 16);
    }
    SUBCASE("cdlm, exact cache") {
        auto m = hashed();
        presets::cdlm<scripted_model> d(m, block_causal_mask{4}, {}, presets::cdlm_schedule{0.2});
        check_batch_invariance(d, 16);
    }
    SUBCASE("cd4lm") {
        auto m = hashed();
        presets::cd4lm<scripted_model> d(m, semi_ar_mask{8}, {}, cd4lm_schedule{0.3});
        check_batch_invariance(d, 16);
    }
}

TEST_CASE("the same seed gives the same tokens, another seed other tokens") {
    auto m = hashed();
    presets::llada<scripted_model> d(m, semi_ar_mask{8}, {}, llada_schedule{16}, presets::llada_sampler(1.0f));
    const tvec p{1, 2, 3};
    const auto a = d.generate(p, {16, 5});
    const auto b = d.generate(p, {16, 5});
    check_same(a, b);
    const auto c = d.generate(p, {16, 6});
    CHECK(c.tokens != a.tokens);
}

TEST_CASE("exact caches reproduce a full recompute: block-causal and causal") {
    SUBCASE("block-causal, blocks of 4") {
        auto m = hashed();
        decoder<scripted_model, block_causal_mask, prefix_cache, threshold_schedule, greedy_sampler> cached(m, {4}, {}, {0.3});
        decoder<scripted_model, block_causal_mask, no_cache, threshold_schedule, greedy_sampler> full(m, {4}, {}, {0.3});
        const prompts_t batch{{1, 2, 3}, {4, 5}};
        const auto a = cached.generate(batch, {16, 0});
        const auto b = full.generate(batch, {16, 0});
        for (std::size_t i = 0; i < batch.size(); ++i) check_same(a.sequences[i], b.sequences[i]);
        CHECK(a.sequences[0].stats.rows_computed < b.sequences[0].stats.rows_computed);
    }
    SUBCASE("causal, shifted (autoregressive)") {
        auto m = hashed(true);
        presets::autoregressive<scripted_model> cached(m, {}, {}, next_slot_schedule{false});
        decoder<scripted_model, causal_mask, no_cache, next_slot_schedule, greedy_sampler> full(m, {}, {}, {false});
        check_same(cached.generate(tvec{1, 2, 3}, {12, 0}), full.generate(tvec{1, 2, 3}, {12, 0}));
    }
}

TEST_CASE("the step callback sees every step and can cancel") {
    auto m = scripted_model(16, 15, {14}, false, oracle({4, 5, 6, 7, 8, 9, 10, 11}, std::vector<double>(8, 0.5)));
    presets::llada<scripted_model> d(m, semi_ar_mask{4}, {}, llada_schedule{8});
    std::vector<index_t> forwards;
    std::vector<std::vector<index_t>> committed;
    const auto r = d.generate(tvec{1, 2}, {8, 0}, [&](const step_event& e) {
        forwards.push_back(e.forward);
        committed.emplace_back(e.committed.begin(), e.committed.end());
        CHECK(e.canvas.size() == 10);
        for (index_t p : e.committed) CHECK(e.canvas[static_cast<std::size_t>(p)] != 15);
        return step_action::proceed;
    });
    CHECK(forwards == std::vector<index_t>{0, 1, 2, 3, 4, 5, 6, 7});
    CHECK(committed[0] == std::vector<index_t>{2});
    CHECK(committed[7] == std::vector<index_t>{9});
    CHECK_FALSE(r.cancelled());

    m.clear_log();
    const auto c = d.generate(tvec{1, 2}, {8, 0}, [](const step_event& e) {
        return e.forward == 2 ? step_action::cancel : step_action::proceed;
    });
    CHECK(c.cancelled());
    CHECK(m.log().size() == 3);
    CHECK(c.stats.forwards == 3);
    CHECK(c.tokens[7] == 15);  // never committed: still the mask id
    CHECK(c.commit_forward[7] == -1);
}

TEST_CASE("statistics: forwards, committed tokens, wall time split") {
    auto m = hashed();
    presets::cdlm<scripted_model> d(m, block_causal_mask{4}, {}, presets::cdlm_schedule{0.05});
    const auto r = d.generate(prompts_t{{1, 2, 3}}, {16, 0});
    const auto& s = r.sequences[0].stats;
    CHECK(s.forwards == r.stats.forwards);
    index_t steps = 0;
    for (index_t n : s.steps_per_block) steps += n;
    CHECK(steps == s.forwards);
    CHECK(s.tokens_per_forward() == doctest::Approx(static_cast<double>(s.committed) / s.forwards));
    CHECK(r.stats.model_seconds >= 0.0);
    CHECK(r.stats.overhead_seconds >= 0.0);
    CHECK(r.stats.total_seconds() >= r.stats.model_seconds);
}

TEST_CASE("bad parameters are rejected before any forward, naming the parameter") {
    auto m = hashed();
    presets::llada<scripted_model> d(m, semi_ar_mask{4}, {}, llada_schedule{5});
    const auto rejects = [&](auto&& call, const char* parameter) {
        m.clear_log();
        try {
            call();
            FAIL("no error for " << std::string(parameter));
        } catch (const invalid_parameter& e) {
            CHECK(e.parameter() == parameter);
        }
        CHECK(m.log().empty());
    };
    rejects([&] { (void)d.generate(prompts_t{}, {8, 0}); }, "prompts");
    rejects([&] { (void)d.generate(prompts_t{{1}, {}}, {8, 0}); }, "prompts[1]");
    rejects([&] { (void)d.generate(prompts_t{{1, 40}}, {8, 0}); }, "prompts[0]");
    rejects([&] { (void)d.generate(prompts_t{{1, -1}}, {8, 0}); }, "prompts[0]");
    rejects([&] { (void)d.generate(prompts_t{{1}}, {0, 0}); }, "gen_length");
    rejects([&] { (void)d.generate(prompts_t{{1}}, {10, 0}); }, "block_length");
    rejects([&] { (void)d.generate(prompts_t{{1}}, {8, 0}); }, "steps");  // 5 steps over 2 blocks
    presets::cdlm<scripted_model> bad_tau(m, block_causal_mask{4}, {}, presets::cdlm_schedule{0.0});
    rejects([&] { (void)bad_tau.generate(prompts_t{{1}}, {8, 0}); }, "tau");
    CHECK_THROWS_AS(presets::dream<scripted_model>(m, {}, {}, {}, categorical_sampler{-1.f}), invalid_parameter);
}

TEST_CASE("a mask id outside the vocabulary is rejected") {
    scripted_model m(8, 9, {7}, false, context_hash());
    presets::cdlm<scripted_model> d(m, block_causal_mask{4});
    CHECK_THROWS_WITH((void)d.generate(tvec{1}, {4, 0}), doctest::Contains("'mask_id'"));
}

TEST_CASE("NaN logits are reported with the sequence, forward and row") {
    scripted_model m(8, 7, {6}, false, [](const dlm::testing::script_view& v, std::span<float> out) {
        for (auto& x : out) x = 0.f;
        if (v.forward == 1 && v.row == 5) out[2] = std::nanf("");
    });
    presets::cdlm<scripted_model> d(m, block_causal_mask{4}, {}, presets::cdlm_schedule{0.99});
    const auto r = d.generate(prompts_t{{1, 2}}, {8, 0});  // a batch: the failure is on the sequence's result
    REQUIRE(r.sequences[0].failed());
    CHECK(r.sequences[0].message.find("sequence 0, forward 1, row 5") != std::string::npos);
    try {
        r.sequences[0].rethrow_if_failed();
        FAIL("no error");
    } catch (const numeric_error& e) {
        CHECK(e.forward() == 1);
        CHECK(e.row() == 5);
        CHECK(e.sequence() == 0);
    }
    m.clear_log();  // a single prompt has no other sequence to spare: its failure is thrown
    CHECK_THROWS_AS((void)d.generate(tvec{1, 2}, {8, 0}), numeric_error);
}

namespace {
struct lazy_schedule {  // commits nothing, ever
    void select(const step_context&, std::span<const candidate>, std::vector<index_t>&) const {}
};
struct greedy_twice {  // chooses the same slot twice
    void select(const step_context&, std::span<const candidate>, std::vector<index_t>& c) const {
        c.push_back(0);
        c.push_back(0);
    }
};
}  // namespace

TEST_CASE("a schedule that breaks the contract gets a contract_error, not a hang") {
    auto m = hashed();
    decoder<scripted_model, semi_ar_mask, no_cache, lazy_schedule, greedy_sampler> lazy(m, {2});
    CHECK_THROWS_AS((void)lazy.generate(tvec{1}, {4, 0}), contract_error);
    decoder<scripted_model, semi_ar_mask, no_cache, greedy_twice, greedy_sampler> twice(m, {2});
    CHECK_THROWS_WITH_AS((void)twice.generate(tvec{1}, {4, 0}), doctest::Contains("twice"), contract_error);
}

namespace {
/// A sampler that ignores its logits and `banned` and returns `token` with `probability`.
struct fixed_sampler {
    token_id token = 0;
    float probability = 1.f;
    [[nodiscard]] slot_choice sample(std::span<const float>, const random_key&, std::span<const token_id>) const {
        return {token, probability, 0.f, 0.f};
    }
};
struct own_mask : semi_ar_mask {  // a block length no block can have
    [[nodiscard]] index_t block_length_for(index_t) const { return 0; }
};
}  // namespace

TEST_CASE("a sampler that breaks the contract on a sound row gets a contract_error naming what it returned, not a numeric_error") {
    auto m = hashed();  // vocabulary 32, mask id 31, EOS 30
    const auto decode = [&](fixed_sampler s) {
        decoder<scripted_model, semi_ar_mask, no_cache, threshold_schedule, fixed_sampler> d(m, {4}, {}, threshold_schedule{0.9}, s);
        return d.generate(tvec{1, 2}, {4, 0});
    };
    CHECK_THROWS_WITH_AS((void)decode({31}), doctest::Contains("the sampler returned token 31, which it was told not to draw"), contract_error);
    CHECK_THROWS_WITH_AS((void)decode({1000}), doctest::Contains("token 1000, outside the vocabulary [0, 32)"), contract_error);
    CHECK_THROWS_WITH_AS((void)decode({3, std::numeric_limits<float>::quiet_NaN()}), doctest::Contains("probability nan for token 3"), contract_error);
    CHECK(decode({3}).tokens == tvec{3, 3, 3, 3});
}

namespace {
struct all_then_stop {  // commits every candidate, then stops after the first block
    void select(const step_context&, std::span<const candidate> c, std::vector<index_t>& chosen) const {
        for (std::size_t i = 0; i < c.size(); ++i) chosen.push_back(static_cast<index_t>(i));
    }
    [[nodiscard]] bool stop_after_block(const step_context&, std::span<const token_id>) const noexcept { return true; }
};
}  // namespace

TEST_CASE("a schedule that stops early on a model without EOS ids ends the answer at the filled slots, not after them") {
    scripted_model m{32, mask, {}, false, context_hash()};  // no EOS id to fill the rest with: the mask id fills it
    decoder<scripted_model, semi_ar_mask, no_cache, all_then_stop, greedy_sampler> d(m, {4});
    const sequence_result r = d.generate(tvec{1}, {8, 0});
    CHECK(r.stopped_early);
    CHECK(r.answer_length == 4);
    CHECK(std::count(r.tokens.begin(), r.tokens.begin() + r.answer_length, mask) == 0);
}

TEST_CASE("a mask whose block length is not positive gets a contract_error before any forward") {
    auto m = hashed();
    decoder<scripted_model, own_mask, no_cache, threshold_schedule, greedy_sampler> d(m);
    CHECK_THROWS_WITH_AS((void)d.generate(tvec{1}, {4, 0}), doctest::Contains("block_length_for(4) returned 0"), contract_error);
    CHECK(m.log().empty());
}

TEST_CASE("prompts of different lengths share every forward") {
    auto m = hashed();
    presets::cdlm<scripted_model> d(m, block_causal_mask{4}, {}, presets::cdlm_schedule{0.01});
    const auto r = d.generate(prompts_t{{1}, {1, 2, 3, 4, 5, 6}}, {8, 0});
    CHECK(r.stats.forwards == 2);  // tau 0.01: every block in one forward, both sequences together
    CHECK(m.log()[0].size() == 2);
    CHECK(m.log()[0][1].window_end == 10);
}

}  // namespace test_decoder
