// Samplers: tokens and confidences on hand-computed distributions; reproducible randomness.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>
#include <dlm/presets.hpp>
#include <dlm/sampler/samplers.hpp>

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_samplers {

using namespace dlm;

namespace {
// softmax(log p) = p
const std::array<float, 4> logits{std::log(0.1f), std::log(0.2f), std::log(0.3f), std::log(0.4f)};
const std::span<const float> row{logits};
constexpr random_key key{7, rng_stream::sampling, 0, 0};
const double neg_entropy = 0.1 * std::log(0.1) + 0.2 * std::log(0.2) + 0.3 * std::log(0.3) + 0.4 * std::log(0.4);
}  // namespace

TEST_CASE("greedy: argmax, p(token), top-1 minus top-2, sum p log p") {
    const slot_choice c = greedy_sampler{}.sample(row, key, {});
    CHECK(c.token == 3);
    CHECK(c.probability == doctest::Approx(0.4));
    CHECK(c.margin == doctest::Approx(0.1));
    CHECK(c.neg_entropy == doctest::Approx(neg_entropy));
}

TEST_CASE("greedy: banned tokens are never chosen and leave the distribution") {
    const std::array<token_id, 1> banned{3};
    const slot_choice c = greedy_sampler{}.sample(row, key, banned);
    CHECK(c.token == 2);
    CHECK(c.probability == doctest::Approx(0.5));  // 0.3 / 0.6
}

TEST_CASE("greedy: ties go to the lowest token id, as torch.argmax") {
    const std::array<float, 3> tied{1.f, 2.f, 2.f};
    CHECK(greedy_sampler{}.sample(tied, key, {}).token == 1);
}

TEST_CASE("categorical at temperature 0 is greedy") {
    const slot_choice c = categorical_sampler{}.sample(row, key, {});
    CHECK(c.token == 3);
    CHECK(c.probability == doctest::Approx(0.4));
}

TEST_CASE("categorical: a temperature so small that the logits over it overflow samples its greedy limit, never NaN") {
    // log p / 1e-40 overflows float; 1e-30 does not. Both are the limit T -> 0: the argmax, probability 1
    // (Dream's tempered confidence) or 0.4 (LLaDA's raw one); ties of the largest logit drawn among them.
    const std::array<float, 4> positive{0.5f, 3.f, -2.f, 1.f};
    for (const float t : {1e-40f, 1e-30f, 1e-45f}) {
        for (index_t pos = 0; pos < 32; ++pos) {
            const random_key k{1, rng_stream::sampling, 0, pos};
            const slot_choice a = categorical_sampler{t}.sample(row, k, {});
            CHECK(a.token == 3);
            CHECK(a.probability == doctest::Approx(1.0));
            CHECK(presets::llada_sampler(t).sample(row, k, {}).probability == doctest::Approx(0.4));
            const slot_choice b = categorical_sampler{t}.sample(positive, k, {});
            CHECK((b.token == 1 && std::isfinite(b.neg_entropy)));
        }
    }
    const std::array<float, 3> tied{2.f, 2.f, -1.f};
    int first = 0;
    for (index_t pos = 0; pos < 64; ++pos) first += categorical_sampler{1e-40f}.sample(tied, {1, rng_stream::sampling, 0, pos}, {}).token == 0;
    CHECK((first > 10 && first < 54));  // drawn between the tied largest, as T -> 0 does
    std::array<float, 4> plain{1.f, -3.f, 0.25f, 7.f};
    detail::divide_by_temperature(plain, 0.5f);
    CHECK(plain == std::array<float, 4>{2.f, -6.f, 0.5f, 14.f});  // an ordinary temperature: the plain division
}

TEST_CASE("categorical: temperature sharpens the reported distribution (Dream) or not (LLaDA)") {
    // T = 0.5: softmax(2 log p) = p^2 / sum p^2 = {1, 4, 9, 16} / 30.
    categorical_sampler s{0.5f};
    presets::llada_sampler raw(0.5f);
    for (index_t pos = 0; pos < 64; ++pos) {
        const random_key k{1, rng_stream::sampling, 0, pos};
        const slot_choice a = s.sample(row, k, {});
        const slot_choice b = raw.sample(row, k, {});
        CHECK(a.token == b.token);  // the same draw
        const double p2[4] = {1 / 30.0, 4 / 30.0, 9 / 30.0, 16 / 30.0};
        const double p1[4] = {0.1, 0.2, 0.3, 0.4};
        CHECK(a.probability == doctest::Approx(p2[a.token]));
        CHECK(b.probability == doctest::Approx(p1[b.token]));
    }
}

TEST_CASE("categorical: top-k keeps the k largest logits") {
    categorical_sampler s{0.f, 2};
    const slot_choice c = s.sample(row, key, {});
    CHECK(c.token == 3);
    CHECK(c.probability == doctest::Approx(4.0 / 7.0));
    CHECK(c.margin == doctest::Approx(1.0 / 7.0));
    categorical_sampler hot{1.f, 2};
    for (index_t pos = 0; pos < 200; ++pos) CHECK(hot.sample(row, {3, rng_stream::sampling, 0, pos}, {}).token >= 2);
}

TEST_CASE("categorical: top-p keeps the nucleus, including the token that crosses p") {
    // Sorted 0.4, 0.3, 0.2, 0.1; cumulative before each: 0, 0.4, 0.7, 0.9.
    categorical_sampler half{0.f, 0, 0.5f};
    CHECK(half.sample(row, key, {}).probability == doctest::Approx(4.0 / 7.0));
    categorical_sampler narrow{0.f, 0, 0.35f};
    CHECK(narrow.sample(row, key, {}).probability == doctest::Approx(1.0));
    categorical_sampler hot{1.f, 0, 0.5f};
    for (index_t pos = 0; pos < 200; ++pos) CHECK(hot.sample(row, {3, rng_stream::sampling, 0, pos}, {}).token >= 2);
}

TEST_CASE("categorical: top-p's partial sorts keep the nucleus a full stable sort keeps, ties, banned tokens and flat rows included") {
    // The reference is the filter as Dream's top_p_logits reads: every token ranked by a stable sort,
    // the cumulative probability summed in rank order, every token after the crossing dropped. The
    // sampler then draws from what is left; drawing from the reference's row at temperature 1
    // (which divides by 1: the same bits) must give the same token and the same confidences' bits.
    const auto reference = [](std::vector<float> z, float top_p) {
        std::vector<std::int32_t> ranked(z.size());
        std::iota(ranked.begin(), ranked.end(), 0);
        std::stable_sort(ranked.begin(), ranked.end(), [&](auto a, auto b) { return z[static_cast<std::size_t>(a)] > z[static_cast<std::size_t>(b)]; });
        const float m = z[static_cast<std::size_t>(ranked[0])];
        double sum = 0.0;
        for (float v : z) sum += v == -INFINITY ? 0.0 : std::exp(static_cast<double>(v) - m);
        double cumulative = 0.0;
        for (std::size_t r = 0; r < ranked.size(); ++r) {
            float& v = z[static_cast<std::size_t>(ranked[r])];
            const double p = v == -INFINITY ? 0.0 : std::exp(static_cast<double>(v) - m) / sum;
            if (r > 0 && cumulative > static_cast<double>(top_p)) v = -INFINITY;
            cumulative += p;
        }
        return z;
    };
    std::mt19937 rng(11);
    int rows = 0;
    for (const std::size_t n : {1u, 2u, 7u, 64u, 65u, 300u, 5000u})
        for (const int levels : {0, 3, 40})  // 0: continuous logits; else that many distinct values (ties)
            for (const float top_p : {1e-3f, 0.3f, 0.9f, 0.999f})
                for (const float temperature : {0.f, 0.7f, 1.f}) {
                    std::vector<float> z(n);
                    std::normal_distribution<float> spread(0.f, n > 1000 ? 0.3f : 2.f);  // a flat row: thousands of ranks to cross 0.9
                    for (float& v : z) v = levels == 0 ? spread(rng) : static_cast<float>(static_cast<int>(rng() % static_cast<unsigned>(levels))) * 0.25f;
                    std::vector<token_id> banned;
                    if (n > 2) banned = {static_cast<token_id>(rng() % n), static_cast<token_id>(rng() % n)};
                    std::vector<float> tempered(z);
                    for (token_id t : banned) tempered[static_cast<std::size_t>(t)] = -INFINITY;
                    if (temperature > 0.f) detail::divide_by_temperature(tempered, temperature);
                    const std::vector<float> filtered = reference(tempered, top_p);
                    const random_key k{5, rng_stream::sampling, 0, static_cast<index_t>(rows)};
                    const slot_choice got = categorical_sampler{temperature, 0, top_p}.sample(z, k, banned);
                    const slot_choice want = temperature > 0.f ? categorical_sampler{1.f}.sample(filtered, k, {}) : categorical_sampler{}.sample(filtered, k, {});
                    CAPTURE(n);
                    CAPTURE(levels);
                    CAPTURE(top_p);
                    CAPTURE(temperature);
                    CHECK(got.token == want.token);
                    CHECK(std::memcmp(&got.probability, &want.probability, sizeof(float)) == 0);
                    CHECK(std::memcmp(&got.margin, &want.margin, sizeof(float)) == 0);
                    CHECK(std::memcmp(&got.neg_entropy, &want.neg_entropy, sizeof(float)) == 0);
                    ++rows;
                }
    CHECK(rows == 7 * 3 * 4 * 3);
}

TEST_CASE("top-k and top-p together: Dream's order (nucleus first), SDAR's and LLaDA2's (top-k first)") {
    // p = 0.4, 0.3, 0.2, 0.1 (tokens 3..0), top_k 3, top_p 0.75. Nucleus first: cumulative before each 0,
    // 0.4, 0.7, 0.9 keeps three, top-3 keeps them: p(3) = 4/9. Top-k first: three renormalized to 4/9, 3/9,
    // 2/9, cumulative before each 0, 4/9, 7/9: the nucleus keeps two, p(3) = 4/7.
    CHECK(categorical_sampler{0.f, 3, 0.75f}.sample(row, key, {}).probability == doctest::Approx(4.0 / 9.0));
    CHECK(sdar_sampler{0.f, 3, 0.75f}.sample(row, key, {}).probability == doctest::Approx(4.0 / 7.0));
    const llada2_sampler hot{1.f, 3, 0.75f};
    for (index_t pos = 0; pos < 200; ++pos) {
        const slot_choice c = hot.sample(row, {3, rng_stream::sampling, 0, pos}, {});
        REQUIRE(c.token >= 2);
        CHECK(c.probability == doctest::Approx(c.token == 3 ? 4.0 / 7.0 : 3.0 / 7.0));
    }
}

TEST_CASE("llada2 sampler: at temperature 0 the argmax and its plain softmax probability, top-k and top-p unused") {
    // LLaDA2's _sample_with_temperature_topk_topp and Fast-dLLM v2's sample_with_top_p return before filtering.
    for (const llada2_sampler s : {llada2_sampler{0.f, 2, 1.f}, llada2_sampler{0.f, 0, 0.5f}, llada2_sampler{0.f, 3, 0.75f}}) {
        const slot_choice c = s.sample(row, key, {});
        CHECK(c.token == 3);
        CHECK(c.probability == doctest::Approx(0.4));
        CHECK(c.neg_entropy == doctest::Approx(neg_entropy));
    }
    CHECK(categorical_sampler{0.f, 2}.sample(row, key, {}).probability == doctest::Approx(4.0 / 7.0));  // Dream filters at T = 0
}

TEST_CASE("categorical: Gumbel-max draws follow softmax(logits / T)") {
    categorical_sampler s{1.f};
    std::array<int, 4> counts{};
    const int n = 20000;
    for (int i = 0; i < n; ++i) ++counts[static_cast<std::size_t>(s.sample(row, {11, rng_stream::sampling, i / 100, i % 100}, {}).token)];
    const double p[4] = {0.1, 0.2, 0.3, 0.4};
    for (std::size_t t = 0; t < 4; ++t) CHECK(static_cast<double>(counts[t]) / n == doctest::Approx(p[t]).epsilon(0.06));
}

TEST_CASE("sampling is a pure function of the key") {
    categorical_sampler s{1.f};
    const random_key k{42, rng_stream::sampling, 3, 17};
    const token_id first = s.sample(row, k, {}).token;
    for (int i = 0; i < 10; ++i) CHECK(s.sample(row, k, {}).token == first);
    int differs = 0;
    for (index_t pos = 0; pos < 50; ++pos) differs += s.sample(row, {43, rng_stream::sampling, 3, pos}, {}).token != first;
    CHECK(differs > 0);
}

TEST_CASE("non-finite logits give a NaN confidence, which the decoder reports") {
    const std::array<float, 3> bad{0.f, std::nanf(""), 1.f};
    CHECK(std::isnan(greedy_sampler{}.sample(bad, key, {}).probability));
    const std::array<float, 2> inf{0.f, INFINITY};
    CHECK(std::isnan(categorical_sampler{}.sample(inf, key, {}).probability));
}

TEST_CASE("categorical options are validated") {
    CHECK_THROWS_AS(categorical_sampler{-1.f}.validate(), invalid_parameter);
    CHECK_THROWS_WITH(categorical_sampler({0.f, 0, 0.f}).validate(), doctest::Contains("'top_p'"));
    CHECK_THROWS_WITH(categorical_sampler({0.f, -2}).validate(), doctest::Contains("'top_k'"));
}

TEST_CASE("random_key: every draw is in (0, 1), the one whose sum would round to 1 held just below it") {
    constexpr std::uint64_t top = (std::uint64_t{1} << 53) - 1;
    CHECK(random_key::unit_interval(top) == 0x1.fffffffffffffp-1);          // (2^53 - 1/2) / 2^53 rounds to 1
    CHECK(random_key::unit_interval(top - 1) == 1.0 - 0x1.0p-52);          // its neighbours are unchanged
    CHECK(random_key::unit_interval(0) == 0x1.0p-54);
    CHECK(random_key::unit_interval(std::uint64_t{1} << 52) == 0.5);  // 2^52 + 1/2 rounds to even: 2^52
    CHECK(std::isfinite(-std::log(-std::log(random_key::unit_interval(top)))));  // Gumbel noise stays finite (36.74)
}

TEST_CASE("Philox4x32-10 matches the Random123 known-answer vector") {
    // Random123 kat_vectors: philox4x32_10, counter and key all ones bits.
    std::uint32_t c[4] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu};
    philox4x32(c, 0xffffffffffffffffull);
    CHECK(c[0] == 0x408f276du);
    CHECK(c[1] == 0x41c83b0eu);
    CHECK(c[2] == 0xa20bc7c6u);
    CHECK(c[3] == 0x6d5451fdu);
    std::uint32_t z[4] = {0, 0, 0, 0};
    philox4x32(z, 0);
    CHECK(z[0] == 0x6627e8d5u);
    CHECK(z[1] == 0xe169c58du);
    CHECK(z[2] == 0xbc57ac4cu);
    CHECK(z[3] == 0x9b00dbd8u);
}

}  // namespace test_samplers
