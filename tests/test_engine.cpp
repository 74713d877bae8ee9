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

#include "support/child.hpp"
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

TEST_CASE("engine: sequences whose states and logits rows cannot fit are refused with memory_error before anything is allocated, summed with those added before the step; check_batch weighs each alone") {
    // A vocabulary of 2^30: a block of 65536 rows of logits is 2^48 bytes (256 TiB), which no machine
    // has; the script must never run.
    constexpr index_t vocab = index_t{1} << 30;
    scripted_model huge(vocab, vocab - 1, {vocab - 2}, false, [](const testing::script_view&, std::span<float>) { FAIL("a forward ran"); });
    using decoder_t = decoder<scripted_model, semi_ar_mask, no_cache, threshold_schedule, greedy_sampler>;
    decoder_t wide(huge, semi_ar_mask{65536}, {}, threshold_schedule{0.9});
    try {
        (void)wide.generate(tvec{1, 2}, {.gen_length = 65536});
        FAIL("no memory_error");
    } catch (const memory_error& e) {
        CHECK(e.needed() > (std::uint64_t{1} << 47));
        CHECK(std::string(e.what()).find("the decoding state and logits rows of 1 sequence(s) (gen_length 65536 in blocks of 65536, a vocabulary of 1073741824)") !=
              std::string::npos);
    }
#if defined(DLM_TEST_SANITIZER) || !defined(__unix__)
    MESSAGE("the sum is checked without sanitizers on Unix: it limits a child's address space (RLIMIT_AS)");
#else
    // Two sequences of 8 rows, each needing 60 % of what a child limited to 1 GiB more address space
    // than it maps may allocate: either fits alone (check_batch, which a caller adding a few at a time
    // asks), both together do not (add_batch, or add twice before a step). The limit, not the
    // machine, sets the figure.
    const int code = dlm_test::in_child_with_room(std::uint64_t{1} << 30, [&](std::uint64_t avail) {
        const auto v = static_cast<index_t>(avail / 10 * 6 / (8 * sizeof(float)));
        scripted_model big(v, v - 1, {v - 2}, false, [](const testing::script_view&, std::span<float>) { std::abort(); });
        decoder_t d(big, semi_ar_mask{8}, {}, threshold_schedule{0.9});
        engine<decoder_t> eng(d);
        const std::vector<tvec> two{{1, 2}, {3, 4}};
        try {
            eng.check_batch(two, {.gen_length = 8});
        } catch (...) {
            return 2;
        }
        try {
            (void)eng.add_batch(two, {.gen_length = 8});
            return 3;
        } catch (const memory_error&) {
            if (!eng.idle()) return 4;
        } catch (...) {
            return 5;
        }
        // One at a time before a step: the first's rows are promised (not yet allocated), so the
        // second is weighed beside them and refused.
        try {
            (void)eng.add(two[0], {.gen_length = 8});
        } catch (...) {
            return 6;
        }
        try {
            (void)eng.add(two[1], {.gen_length = 8});
            return 8;
        } catch (const memory_error&) {
            return eng.active() == 1 ? 0 : 9;
        } catch (...) {
            return 10;
        }
    });
    if (code == dlm_test::room_unmeasurable) MESSAGE("skipped the sum: less than 1 GiB available");
    else CHECK(code == 0);
#endif
}

/// A scripted model whose K/V stores say they hold `claimed` bytes each (the store made is the
/// scripted one), and which counts the stores it makes.
struct claiming_model : scripted_model {
    claiming_model(std::uint64_t bytes, index_t vocab_size = 32)
        : scripted_model(vocab_size, vocab_size - 1, {vocab_size - 2}, false, dlm_test::context_hash()), claimed(bytes) {}
    [[nodiscard]] std::uint64_t kv_cache_bytes(index_t) const noexcept { return claimed; }
    [[nodiscard]] kv_cache make_kv_cache(index_t capacity) const {
        ++*made;
        return scripted_model::make_kv_cache(capacity);
    }
    std::uint64_t claimed;
    std::shared_ptr<int> made = std::make_shared<int>(0);
};

TEST_CASE("engine: a batch whose K/V stores cannot fit is refused before any store is made, the stores of all its sequences summed, twice with guidance") {
    using cached_t = decoder<claiming_model, block_causal_mask, prefix_cache, threshold_schedule, greedy_sampler>;
    claiming_model huge(std::uint64_t{1} << 50);  // a petabyte a store: no machine has one
    cached_t d(huge, block_causal_mask{4}, {}, threshold_schedule{0.9});
    try {
        (void)d.generate(tvec{1, 2}, {.gen_length = 8});
        FAIL("no memory_error");
    } catch (const memory_error& e) {
        CHECK(e.needed() >= (std::uint64_t{1} << 50));
        CHECK(std::string(e.what()).find("the decoding state, K/V stores and logits rows of 1 sequence(s)") != std::string::npos);
    }
    CHECK(*huge.made == 0);
    // A cache that keeps no K/V makes no store, so the model's claim is not weighed.
    decoder<claiming_model, semi_ar_mask, no_cache, threshold_schedule, greedy_sampler> uncached(huge, semi_ar_mask{4}, {}, threshold_schedule{0.9});
    CHECK(uncached.generate(tvec{1, 2}, {.gen_length = 8}).tokens.size() == 8);
#if defined(DLM_TEST_SANITIZER) || !defined(__unix__)
    MESSAGE("the sum is checked without sanitizers on Unix: it limits a child's address space (RLIMIT_AS)");
#else
    // Stores claiming 60 % of what a child limited to 1 GiB more address space than it maps may
    // allocate: one sequence fits (its one store; check_batch weighs each prompt alone), two together
    // do not, nor one with guidance (a second store for the unconditional pass).
    const int code = dlm_test::in_child_with_room(std::uint64_t{1} << 30, [&](std::uint64_t avail) {
        claiming_model big(avail / 10 * 6);
        decoder<claiming_model, semi_ar_mask, approx_prefix_cache, threshold_schedule, greedy_sampler> dec(big, semi_ar_mask{4}, {}, threshold_schedule{0.9});
        engine eng(dec);
        const std::vector<tvec> two{{1, 2}, {3, 4}};
        try {
            eng.check_batch(two, {.gen_length = 8});
            (void)eng.add(two[0], {.gen_length = 8});
        } catch (...) {
            return 2;
        }
        for (const bool guided : {false, true}) {
            try {
                if (guided) (void)eng.add(two[1], {.gen_length = 8, .cfg_scale = 1.0});
                else (void)eng.add_batch(two, {.gen_length = 8});
                return 3;
            } catch (const memory_error&) {
            } catch (...) {
                return 4;
            }
        }
        return *big.made == 1 && eng.active() == 1 ? 0 : 5;
    });
    if (code == dlm_test::room_unmeasurable) MESSAGE("skipped the sum: less than 1 GiB available");
    else CHECK(code == 0);
#endif
}

/// A claiming_model whose stores are device memory, on a device with `free` bytes free before any
/// store is made (each store made takes its claim).
struct device_model : claiming_model {
    static constexpr bool kv_on_device = true;
    device_model(std::uint64_t bytes, std::uint64_t free_bytes) : claiming_model(bytes), free(free_bytes) {}
    [[nodiscard]] std::uint64_t device_bytes_free() const noexcept {
        const std::uint64_t used = detail::saturating_mul(static_cast<std::uint64_t>(*made), claimed);
        return free > used ? free - used : 0;
    }
    std::uint64_t free;
};

TEST_CASE("engine: a batch whose device K/V stores cannot fit in the device's free memory together is refused naming the device before any store is made; one that fits joins") {
    static_assert(model_reports_device_memory<device_model> && !model_reports_device_memory<claiming_model>);
    // Stores of 40 MiB (each below the size a store is weighed at alone) on a device with 100 MiB free.
    device_model m(std::uint64_t{40} << 20, std::uint64_t{100} << 20);
    decoder<device_model, semi_ar_mask, approx_prefix_cache, threshold_schedule, greedy_sampler> d(m, semi_ar_mask{4}, {}, threshold_schedule{0.9});
    engine eng(d);
    const std::vector<tvec> three{{1, 2}, {3, 4}, {5, 6}};
    try {
        (void)eng.add_batch(three, {.gen_length = 8});
        FAIL("no memory_error");
    } catch (const memory_error& e) {
        CHECK(e.where() == memory_kind::device);
        CHECK(e.needed() == (std::uint64_t{120} << 20));
        CHECK(e.available() == (std::uint64_t{100} << 20));
        CHECK(std::string(e.what()).find("the device K/V stores of 3 sequence(s) (up to 10 positions each) on the device") != std::string::npos);
    }
    CHECK(*m.made == 0);
    CHECK(eng.idle());
    eng.check_batch(three, {.gen_length = 8});  // each alone fits
    (void)eng.add(three[0], {.gen_length = 8, .cfg_scale = 1.0});  // guided: two stores, 80 MiB of the 100
    CHECK(*m.made == 2);
    CHECK(eng.held_bytes() >= (std::uint64_t{80} << 20));
    CHECK_THROWS_AS((void)eng.add_batch(std::span(three).subspan(1), {.gen_length = 8}), memory_error);  // 80 MiB of the 20 left
    CHECK(*m.made == 2);
    CHECK(eng.active() == 1);
    // The host's own check counts no device store: stores of a petabyte on a device said to have more.
    device_model vast(std::uint64_t{1} << 50, std::numeric_limits<std::uint64_t>::max());
    decoder<device_model, semi_ar_mask, approx_prefix_cache, threshold_schedule, greedy_sampler> dv(vast, semi_ar_mask{4}, {}, threshold_schedule{0.9});
    engine big(dv);
    CHECK_NOTHROW((void)big.add(three[0], {.gen_length = 8}));
}

TEST_CASE("engine: the stepper's spare logits rows offset a joining sequence's rows, never its K/V stores") {
#if defined(DLM_TEST_SANITIZER) || !defined(__unix__)
    MESSAGE("checked without sanitizers on Unix: it limits a child's address space (RLIMIT_AS)");
#else
    claiming_model m(0, index_t{1} << 16);
    decoder<claiming_model, block_causal_mask, prefix_cache, threshold_schedule, greedy_sampler> dec(m, block_causal_mask{32}, {}, threshold_schedule{0.9});
    engine eng(dec);
    const auto ids = eng.add_batch(std::vector<tvec>(8, tvec{1, 2}), {.gen_length = 32});
    (void)eng.step();  // 8 sequences' 32 rows of 2^16 logits: a buffer of 64 MiB, all of it spare once they leave
    for (const auto id : ids) eng.cancel(id);
    (void)eng.take_finished();
    REQUIRE(eng.idle());
    // In a child (forked after the forward: it runs none, so OpenMP's threads are not needed there).
    const int code = dlm_test::in_child_with_room(std::uint64_t{1} << 30, [&](std::uint64_t avail) {
        m.claimed = avail + (std::uint64_t{32} << 20);  // a store 32 MiB larger than there is
        try {
            (void)eng.add(tvec{1, 2}, {.gen_length = 32});  // its 8 MiB of rows fit in the buffer; its store does not fit anywhere
            return 3;
        } catch (const memory_error&) {
            return *m.made == 8 ? 0 : 4;
        } catch (...) {
            return 5;
        }
    });
    if (code == dlm_test::room_unmeasurable) MESSAGE("skipped: less than 1 GiB available");
    else CHECK(code == 0);
#endif
}

}  // namespace test_engine
