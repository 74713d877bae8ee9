// Schedules: which candidates each one commits, on hand-computed confidences.
#include <doctest/doctest.h>

#include <algorithm>
#include <dlm/presets.hpp>

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_schedules {

using namespace dlm;

namespace {
// prompt 2, one block of 8 slots at [2, 10); EOS is token 9.
constexpr canvas_layout layout{2, 8, 8, false};
const std::array<token_id, 1> eos{9};

std::vector<candidate> make(std::initializer_list<float> probs, std::initializer_list<token_id> tokens = {}) {
    std::vector<candidate> c;
    auto t = tokens.begin();
    index_t pos = 2;
    for (float p : probs) c.push_back({pos++, t != tokens.end() ? *t++ : 1, p, p / 2, -p});
    return c;
}

step_context ctx(index_t step = 0, index_t masked_at_start = 8, index_t committed = 0, canvas_layout l = layout) {
    return {l, {0, step}, masked_at_start, committed, step, 5, eos, {}};
}

template <class S>
std::vector<index_t> pick(const S& s, const step_context& c, const std::vector<candidate>& cands) {
    std::vector<index_t> chosen;
    s.select(c, cands, chosen);
    std::sort(chosen.begin(), chosen.end());
    return chosen;
}
using v = std::vector<index_t>;
}  // namespace

TEST_CASE("next_slot commits the leftmost masked slot and stops at EOS") {
    const next_slot_schedule s;
    CHECK(pick(s, ctx(), make({0.1f, 0.9f})) == v{0});
    const std::array<token_id, 2> with_eos{3, 9}, without{3, 4};
    CHECK(s.stop_after_block(ctx(), with_eos));
    CHECK_FALSE(s.stop_after_block(ctx(), without));
    CHECK_FALSE(next_slot_schedule{false}.stop_after_block(ctx(), with_eos));
}

TEST_CASE("llada: transfer counts split evenly, remainder to the earliest steps") {
    CHECK(llada_schedule::transfer_count(10, 4, 0) == 3);
    CHECK(llada_schedule::transfer_count(10, 4, 1) == 3);
    CHECK(llada_schedule::transfer_count(10, 4, 2) == 2);
    CHECK(llada_schedule::transfer_count(10, 4, 3) == 2);
    CHECK(llada_schedule::transfer_count(3, 4, 3) == 0);
}

TEST_CASE("llada: low-confidence remasking commits the k most probable, random commits k random") {
    const llada_schedule s{4};  // 1 block of 8 slots, 4 steps: 2 per step
    const auto c = make({0.2f, 0.9f, 0.5f, 0.95f, 0.1f, 0.3f, 0.4f, 0.6f});
    CHECK(pick(s, ctx(0), c) == v{1, 3});
    const llada_schedule r{4, remasking::random};
    const auto chosen = pick(r, ctx(0), c);
    CHECK(chosen.size() == 2);
    CHECK(pick(r, ctx(0), c) == chosen);                              // reproducible
    const auto other = pick(r, {layout, {0, 0}, 8, 0, 1, 5, eos, {}}, c);  // another forward draws anew
    CHECK(other.size() == 2);
}

TEST_CASE("llada: ties broken by position") {
    const llada_schedule s{8};
    CHECK(pick(s, ctx(0), make({0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f})) == v{0});
}

TEST_CASE("llada: steps must divide into the blocks") {
    CHECK_THROWS_WITH(llada_schedule{6}.validate({2, 8, 2, false}),
                      doctest::Contains("'steps': must be a multiple of the number of blocks"));
    CHECK_THROWS_AS(llada_schedule{-1}.validate(layout), invalid_parameter);
    CHECK(llada_schedule{0}.steps_for({2, 8, 2, false}) == 8);  // 0: gen_length, one slot per forward
    CHECK_NOTHROW(llada_schedule{0}.validate({2, 8, 2, false}));
    CHECK_NOTHROW(llada_schedule{8}.validate({2, 8, 2, false}));
    CHECK(llada_schedule{4, remasking::low_confidence, true}.suppress_eos(ctx()));
}

TEST_CASE("dream: timesteps linspace(1, eps, steps + 1), k = floor(n (1 - s/t)), all at the last step") {
    const dream_schedule s{4, 1e-3, dream_alg::maskgit_plus};
    // t = 1, s = 1 - 0.999/4 = 0.75025 -> 1 - s/t = 0.24975; n = 8 -> k = 1.
    CHECK(s.transfer_fraction(0, 4) == doctest::Approx(0.24975));
    // t = 0.5005, s = 0.25075 -> 1 - s/t = 0.49900...
    CHECK(s.transfer_fraction(2, 4) == doctest::Approx(1 - 0.25075 / 0.5005));
    CHECK(s.transfer_fraction(3, 4) == 1.0);
    const auto c = make({0.2f, 0.9f, 0.5f, 0.95f, 0.1f, 0.3f, 0.4f, 0.6f});
    CHECK(pick(s, ctx(0), c) == v{3});
    CHECK(pick(s, ctx(3), c).size() == 8);
    // step 2 with 8 masked: floor(8 * 0.499) = 3
    CHECK(pick(s, ctx(2), c) == v{1, 3, 7});
}

TEST_CASE("dream: more steps per block than the decoders let a block take are refused naming steps, before the work") {
    const canvas_layout one_block{2, 48, 48, false};  // Dream's one block of 48 slots: 64 forwards per slot at most
    CHECK_NOTHROW(dream_schedule{3072}.validate(one_block));
    CHECK_THROWS_WITH_AS(dream_schedule{4800}.validate(one_block),
                         doctest::Contains("'steps': must be at most 3072 (64 forwards per slot of each block of 48"), invalid_parameter);
    const canvas_layout blocks{2, 16, 8, false};  // 2 blocks of 8: 512 per block, 1024 in all
    CHECK_NOTHROW(dream_schedule{1024}.validate(blocks));
    CHECK_THROWS_AS(dream_schedule{1026}.validate(blocks), invalid_parameter);
}

TEST_CASE("dream: rankings by margin and by negative entropy") {
    std::vector<candidate> c{{2, 1, 0.9f, 0.1f, -2.f}, {3, 1, 0.5f, 0.4f, -0.1f}, {4, 1, 0.1f, 0.05f, -1.f}};
    const canvas_layout l{2, 3, 3, false};
    const step_context x{l, {0, 0}, 3, 0, 0, 5, eos, {}};
    // 2 steps: fraction = 1 - (1 - 0.999/2) = 0.4995 -> k = floor(3 * 0.4995) = 1.
    CHECK(pick(dream_schedule{2, 1e-3, dream_alg::maskgit_plus}, x, c) == v{0});
    CHECK(pick(dream_schedule{2, 1e-3, dream_alg::topk_margin}, x, c) == v{1});
    CHECK(pick(dream_schedule{2, 1e-3, dream_alg::entropy}, x, c) == v{1});
}

TEST_CASE("dream: origin commits each slot with probability 1 - s/t, alg_temp samples the ranking") {
    const dream_schedule origin{4};
    const auto c = make({0.2f, 0.9f, 0.5f, 0.95f, 0.1f, 0.3f, 0.4f, 0.6f});
    std::size_t total = 0;
    for (index_t f = 0; f < 400; ++f) total += pick(origin, {layout, {0, 0}, 8, 0, f, 5, eos, {}}, c).size();
    CHECK(static_cast<double>(total) / (400 * 8) == doctest::Approx(0.24975).epsilon(0.1));
    CHECK(pick(origin, ctx(3), c).size() == 8);
    const dream_schedule sampled{4, 1e-3, dream_alg::maskgit_plus, 0.5};
    int not_top = 0;
    for (index_t f = 0; f < 200; ++f) {
        const auto chosen = pick(sampled, {layout, {0, 0}, 8, 0, f, 5, eos, {}}, c);
        CHECK(chosen.size() == 1);
        not_top += chosen != v{3};
    }
    CHECK(not_top > 0);  // a sample, not the deterministic top-1
    CHECK_THROWS_AS((dream_schedule{4, 0.0}.validate(layout)), invalid_parameter);
}

TEST_CASE("threshold: every slot with confidence >= tau, and always the best") {
    const threshold_schedule s{0.9};
    CHECK(pick(s, ctx(), make({0.5f, 0.95f, 0.9f, 0.2f})) == v{1, 2});
    CHECK(pick(s, ctx(), make({0.5f, 0.6f, 0.3f})) == v{1});
    CHECK_THROWS_WITH(threshold_schedule{1.5}.validate(layout), doctest::Contains("'tau': must be in (0, 1]"));
    CHECK_THROWS_AS(threshold_schedule{0.0}.validate(layout), invalid_parameter);
}

TEST_CASE("factor: walk ranks while (n + 1)(1 - c_n) <= f, with the reference's last-rank quirk") {
    const factor_schedule s{1.0};  // rank thresholds 1 - 1/(n+1): n=2: 0.667, n=3: 0.75, n=4: 0.8
    const std::array<double, 4> stop_at_3{0.99, 0.7, 0.6, 0.1};
    CHECK(s.count(stop_at_3) == 2);
    const std::array<double, 3> stop_at_2{0.99, 0.5, 0.4};
    CHECK(s.count(stop_at_2) == 1);
    const std::array<double, 3> last_fails{0.99, 0.9, 0.1};
    CHECK(s.count(last_fails) == 3);
    const std::array<double, 3> all_pass{0.99, 0.9, 0.8};
    CHECK(s.count(all_pass) == 3);
    const std::array<double, 1> one{0.1};
    CHECK(s.count(one) == 1);
    CHECK(pick(s, ctx(), make({0.7f, 0.99f, 0.1f, 0.6f})) == v{0, 1});
}

TEST_CASE("llada2: an answer shorter than a block plans at most gen_length steps, as generate() caps them; sdar does not") {
    // gen_length 4 in a block of 8: LLaDA2's generate() plans min(8, 4) = 4 steps of 2 slots, SDAR 8 of 1.
    const canvas_layout short_answer{2, 4, 8, false};
    const auto low = make({0.5f, 0.4f, 0.3f, 0.2f});
    CHECK(pick(presets::llada2_schedule{}, ctx(0, 4, 0, short_answer), low) == v{0, 1});
    CHECK(pick(presets::llada2_schedule{8, 0.95}, ctx(0, 4, 0, short_answer), low) == v{0, 1});
    CHECK(pick(dynamic_threshold_schedule{0, 0.95}, ctx(0, 4, 0, short_answer), low) == v{0});
    // A gen_length of whole blocks leaves the planned steps as they are.
    CHECK(pick(presets::llada2_schedule{}, ctx(0, 8, 0, layout), make({0.5f, 0.4f, 0.3f, 0.2f, 0.1f, 0.1f, 0.1f, 0.1f})) == v{0});
}

TEST_CASE("cd4lm: tau, min and max tokens, EOS guard, forced finish") {
    const cd4lm_schedule s{0.9, 1, 2, 0.3, 3};
    // Three confident slots, capped at max_tokens = 2.
    CHECK(pick(s, ctx(), make({0.95f, 0.5f, 0.99f, 0.97f})) == v{2, 3});
    // None confident: min_tokens = 1, the best.
    CHECK(pick(s, ctx(), make({0.5f, 0.6f, 0.3f})) == v{1});
    // EOS (token 9) deferred while fewer than 0.3 * 8 = 2.4 slots are committed.
    const auto c = make({0.99f, 0.5f}, {9, 4});
    CHECK(pick(s, ctx(0, 8, 2), c) == v{1});
    CHECK(pick(s, ctx(0, 8, 3), c) == v{0});
    // Every candidate deferred: still commit min_tokens of them.
    CHECK(pick(s, ctx(0, 8, 0), make({0.99f, 0.5f}, {9, 9})) == v{0});
    // After max_steps_per_block forwards, everything left is committed.
    CHECK(pick(s, ctx(3), make({0.1f, 0.2f, 0.3f})) == v{0, 1, 2});
    CHECK_THROWS_WITH(cd4lm_schedule({0.9, 3, 2}).validate(layout), doctest::Contains("'max_tokens'"));
    CHECK_THROWS_AS(cd4lm_schedule({0.9, 0}).validate(layout), invalid_parameter);
    CHECK_THROWS_AS(cd4lm_schedule({0.9, 1, 2, 1.5}).validate(layout), invalid_parameter);
}

TEST_CASE("cdlm schedule: threshold 0.9 that stops after a block holding EOS") {
    const presets::cdlm_schedule s;
    CHECK(s.tau == 0.9);
    const std::array<token_id, 2> with_eos{3, 9};
    CHECK(s.stop_after_block(ctx(), with_eos));
    CHECK_FALSE(threshold_schedule{}.stop_after_block(ctx(), with_eos));
}

}  // namespace test_schedules
