// Determinism with the CPU transformer (tests/data/models/llada_tiny) under sampled presets: the same
// seed gives bit-identical results across runs, OpenMP thread counts and batch positions; another seed
// gives other tokens. docs/determinism.md says what is guaranteed and what may differ on a GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <dlm/cpu/transformer.hpp>
#include <dlm/presets.hpp>

#include "support/scripts.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_determinism {

using namespace dlm;
using dlm::cpu::transformer;
using tvec = std::vector<token_id>;
using prompts_t = std::vector<std::vector<token_id>>;

namespace {

transformer& tiny() {
    static transformer m = transformer::load(std::filesystem::path(DLM_TEST_DATA) / "models" / "llada_tiny");
    return m;
}

/// Tokens, commit forwards and the confidences' bits are all equal.
void check_identical(const sequence_result& a, const sequence_result& b) {
    CHECK(a.tokens == b.tokens);
    CHECK(a.commit_forward == b.commit_forward);
    REQUIRE(a.commit_confidence.size() == b.commit_confidence.size());
    CHECK(std::memcmp(a.commit_confidence.data(), b.commit_confidence.data(), a.commit_confidence.size() * sizeof(float)) == 0);
    CHECK(a.stats.forwards == b.stats.forwards);
}

const prompts_t batch{{5, 17, 42, 7, 99, 3}, {11, 12}, {200, 201, 202, 203, 204, 205, 206, 207, 208, 209, 210}, {64, 65, 66}};
constexpr index_t gen = 32;

/// The sampled decoders under test: LLaDA (Gumbel-max at temperature 0.8, low-confidence remasking),
/// Dream (temperature 1, top-p 0.95, origin transfer coin flips), Fast-dLLM with each of its
/// approximate caches (the prefix cache, and the dual cache of prefix and suffix; temperature 0.7,
/// threshold).
struct decoders {
    presets::llada<transformer> llada{tiny(), semi_ar_mask{8}, {}, llada_schedule{16}, presets::llada_sampler{0.8f}};
    presets::dream<transformer> dream{tiny(), {}, {}, dream_schedule{16}, categorical_sampler{1.f, 0, 0.95f}};
    presets::fast_dllm<transformer> fast{tiny(), semi_ar_mask{8}, {}, threshold_schedule{0.5}, presets::llada_sampler{0.7f}};
    presets::fast_dllm_dual<transformer> dual{tiny(), semi_ar_mask{8}, {}, threshold_schedule{0.5}, presets::llada_sampler{0.7f}};

    template <class F>
    void each(F&& f) {
        f("llada", llada);
        f("dream", dream);
        f("fast_dllm", fast);
        f("fast_dllm_dual", dual);
    }
};


/// Categorical sampling (temperature 0.9, top-p 0.95) that notes the threads it draws on, marked
/// concurrent or not; with `fail_at`, it returns a token outside the vocabulary at those positions.
template <bool Concurrent>
struct noting_sampler : categorical_sampler {
    std::shared_ptr<std::mutex> lock = std::make_shared<std::mutex>();
    std::shared_ptr<std::set<std::thread::id>> threads = std::make_shared<std::set<std::thread::id>>();
    std::vector<index_t> fail_at;

    noting_sampler() : categorical_sampler{0.9f, 0, 0.95f} {}
    [[nodiscard]] slot_choice sample(std::span<const float> z, const random_key& key, std::span<const token_id> banned) const {
        {
            const std::lock_guard<std::mutex> hold(*lock);
            threads->insert(std::this_thread::get_id());
        }
        slot_choice c = categorical_sampler::sample(z, key, banned);
        if (std::find(fail_at.begin(), fail_at.end(), key.position) != fail_at.end()) c.token = static_cast<token_id>(z.size());
        return c;
    }
};

}  // namespace
}  // namespace test_determinism

namespace dlm {
// The opt-in of the concurrent noting sampler (dlm/sampler/concept.hpp).
template <bool Concurrent>
inline constexpr bool enable_concurrent_sampling<test_determinism::noting_sampler<Concurrent>> = Concurrent;
}  // namespace dlm

namespace test_determinism {
namespace {

constexpr index_t wide_vocab = 4096;  // a block of 32 slots: 2^17 logits, past engine/parallel.hpp's 2^16

template <bool Concurrent>
using noting_decoder = decoder<testing::scripted_model, semi_ar_mask, no_cache, llada_schedule, noting_sampler<Concurrent>>;

testing::scripted_model& wide() {
    static testing::scripted_model m(wide_vocab, wide_vocab - 1, {wide_vocab - 2}, false, dlm_test::context_hash());
    return m;
}

#if defined(_OPENMP)
/// Restores OpenMP's thread count when the test ends, passed or not.
struct omp_threads_restored {
    int before = omp_get_max_threads();
    ~omp_threads_restored() { omp_set_num_threads(before); }
};
#endif

/// Token editing over the same model: the filled slots of a block are drawn again each step (revise).
template <bool Concurrent>
using noting_editor = decoder<testing::scripted_model, block_causal_mask, prefix_cache, cdlm_editing_schedule, noting_sampler<Concurrent>>;

/// Two prompts decoded (64 slots in blocks of 32; llada: 8 steps a block) on `threads` OpenMP
/// threads, by LLaDA's decoder or (`editing`) one that revises its blocks; the threads the sampler
/// drew on.
template <bool Concurrent>
std::pair<decode_result, std::size_t> decode_wide(int threads, bool editing = false) {
#if defined(_OPENMP)
    omp_set_num_threads(threads);
#endif
    const noting_sampler<Concurrent> s;
    const prompts_t prompts{{5, 17, 42, 7, 99, 3}, {11, 12}};
    if (editing) {
        noting_editor<Concurrent> d(wide(), block_causal_mask{32}, {}, {}, s);
        decode_result r = d.generate(prompts, {64, 21});
        return {std::move(r), s.threads->size()};
    }
    noting_decoder<Concurrent> d(wide(), semi_ar_mask{32}, {}, llada_schedule{16}, s);
    decode_result r = d.generate(prompts, {64, 21});
    return {std::move(r), s.threads->size()};
}

}  // namespace

TEST_CASE("determinism: the same seed gives the same tokens across runs, other seeds other tokens") {
    decoders d;
    d.each([](const char* name, auto& dec) {
        CAPTURE(name);
        const auto first = dec.generate(batch, {gen, 1234});
        const auto again = dec.generate(batch, {gen, 1234});
        for (std::size_t i = 0; i < batch.size(); ++i) check_identical(first.sequences[i], again.sequences[i]);
        bool any_differs = false;
        for (const std::uint64_t seed : {1ull, 2ull, 3ull})
            any_differs = any_differs || dec.generate(batch, {gen, seed}).sequences[0].tokens != first.sequences[0].tokens;
        CHECK(any_differs);  // the samplers really sample
    });
}

TEST_CASE("determinism: the same tokens on 1, 2 and 3 OpenMP threads") {
#if !defined(_OPENMP)
    MESSAGE("skipped: built without OpenMP");
#else
    const int threads_before = omp_get_max_threads();
    decoders d;
    d.each([](const char* name, auto& dec) {
        CAPTURE(name);
        omp_set_num_threads(1);
        const auto one = dec.generate(batch, {gen, 77});
        for (const int threads : {2, 3}) {
            CAPTURE(threads);
            omp_set_num_threads(threads);
            const auto many = dec.generate(batch, {gen, 77});
            for (std::size_t i = 0; i < batch.size(); ++i) check_identical(one.sequences[i], many.sequences[i]);
        }
    });
    omp_set_num_threads(threads_before);
#endif
}

TEST_CASE("determinism: a step's slots drawn side by side on 2 threads give the tokens drawn in turn, filled slots revised too; a sampler not marked concurrent draws on one thread") {
#if !defined(_OPENMP)
    MESSAGE("skipped: built without OpenMP");
#else
    const omp_threads_restored restore;  // whatever CHECK fails
    for (const bool editing : {false, true}) {  // choose()'s draws of masked slots; and revise()'s of filled ones
        CAPTURE(editing);
        const auto [one, one_threads] = decode_wide<true>(1, editing);
        CHECK(one_threads == 1);
        const auto [side_by_side, side_threads] = decode_wide<true>(2, editing);
        CHECK(side_threads == 2);  // the parallel path ran
        const auto [in_turn, turn_threads] = decode_wide<false>(2, editing);
        CHECK(turn_threads == 1);
        for (std::size_t i = 0; i < one.sequences.size(); ++i) {
            CAPTURE(i);
            check_identical(one.sequences[i], side_by_side.sequences[i]);
            check_identical(one.sequences[i], in_turn.sequences[i]);
        }
    }
#endif
}

TEST_CASE("determinism: a sampler's broken draws on 2 threads are reported at the first position, as drawing in turn reports them") {
#if !defined(_OPENMP)
    MESSAGE("skipped: built without OpenMP");
#else
    const omp_threads_restored restore;
    for (const int threads : {1, 2}) {
        CAPTURE(threads);
        omp_set_num_threads(threads);
        noting_sampler<true> s;
        s.fail_at = {36, 11, 23};  // the prompt holds positions 0-5
        noting_decoder<true> d(wide(), semi_ar_mask{32}, {}, llada_schedule{16}, s);
        CHECK_THROWS_WITH_AS(d.generate(tvec{5, 17, 42, 7, 99, 3}, {64, 21}), doctest::Contains("for position 11 of sequence 0"), contract_error);
    }
#endif
}

TEST_CASE("determinism: a sequence decodes the same alone and at any position of a batch, with the same seed") {
    decoders d;
    d.each([](const char* name, auto& dec) {
        CAPTURE(name);
        const tvec& prompt = batch[0];
        const auto alone = dec.generate(prompt, {gen, 5});
        for (std::size_t at = 0; at < batch.size(); ++at) {
            CAPTURE(at);
            prompts_t shuffled = batch;
            std::swap(shuffled[0], shuffled[at]);
            generation_options o{.gen_length = gen};
            for (std::size_t i = 0; i < batch.size(); ++i) o.seeds.push_back(i == at ? 5 : 100 + i);
            const auto together = dec.generate(shuffled, o);
            check_identical(alone, together.sequences[at]);
            // With one batch seed, sequence i gets sequence_seed(5, i): alone with that seed, the same.
            const auto derived = dec.generate(shuffled, {gen, 5});
            check_identical(dec.generate(prompt, {.gen_length = gen, .seed = sequence_seed(5, at)}), derived.sequences[at]);
        }
    });
}

TEST_CASE("determinism: experts run side by side, or in turn with each product split over the threads, give the same bits, and a row alone the same as in a batch") {
#if !defined(_OPENMP)
    MESSAGE("skipped: built without OpenMP");
#else
    // 32 experts of which each row picks 4: a 64-row batch keeps about 30 experts busy with ~8 rows
    // each, so on 2 and 3 threads whole experts go to the threads (cpu::moe_mlp::run_experts); one
    // row alone, or 1 thread, runs them in turn. A row repeated 16 times gives its 4 experts 16 rows
    // each: too few experts to share out, so they run in turn, and each of their products (16 rows
    // of hidden 512 and experts 256 wide: 2 and 4 million multiply-adds, 16 column panels) is over
    // tasks.hpp's 10^6 and split over the threads.
    io::moe_config c;
    c.num_experts = 32;
    c.experts_per_token = 4;
    c.expert_intermediate_size = 256;
    c.act = io::moe_config::activation::gelu_tanh;
    const index_t h = 512, rows = 64, copies = 16;
    REQUIRE(double(copies) * h * c.expert_intermediate_size > 1e6);  // the down product, the smaller one, is split
    std::uint64_t state = 12345;
    const auto random = [&](index_t n, index_t k, io::dtype t) {
        std::vector<float> v(static_cast<std::size_t>(n * k));
        for (auto& x : v) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            x = static_cast<float>(static_cast<double>(state >> 11) * 0x1.0p-53 - 0.5);
        }
        cpu::packed_matrix m(n, k, t);
        m.set_rows(0, v.data(), n);
        return m;
    };
    std::vector<cpu::packed_matrix> gate_up, down;
    for (index_t e = 0; e < c.num_experts; ++e) {
        gate_up.push_back(random(2 * c.expert_intermediate_size, h, io::dtype::bf16));
        down.push_back(random(h, c.expert_intermediate_size, io::dtype::bf16));
    }
    auto moe = cpu::moe_mlp::from_parts(c, h, random(c.num_experts, h, io::dtype::f32), {}, std::move(gate_up), std::move(down));
    std::vector<float> x(static_cast<std::size_t>(rows * h));
    for (index_t r = 0; r < rows; ++r)
        for (index_t j = 0; j < h; ++j) x[static_cast<std::size_t>(r * h + j)] = std::sin(0.37f * static_cast<float>(r * h + j));
    const int threads_before = omp_get_max_threads();
    std::vector<float> other(x.rbegin(), x.rend());
    cpu::moe_work work;
    const auto run = [&](int threads, index_t m, const float* in) {
        omp_set_num_threads(threads);
        std::vector<float> y(static_cast<std::size_t>(m * h));
        moe.forward(rows, other.data(), h, std::vector<float>(static_cast<std::size_t>(rows * h)).data(), nullptr, work);  // other rows in its buffers
        moe.forward(m, in, h, y.data(), nullptr, work);
        return y;
    };
    const std::vector<float> one = run(1, rows, x.data());
    CHECK_FALSE(moe.last_ran_side_by_side());
    std::set<index_t> busy(work.picks.begin(), work.picks.end());
    REQUIRE(busy.size() >= 12);  // enough experts for the side-by-side path on 3 threads
    for (const int threads : {2, 3}) {
        CAPTURE(threads);
        CHECK(std::memcmp(run(threads, rows, x.data()).data(), one.data(), one.size() * sizeof(float)) == 0);
        CHECK(moe.last_ran_side_by_side());  // the path under test ran
    }
    for (const index_t r : {0, 17, 63}) {
        CAPTURE(r);
        const float* row = one.data() + r * h;
        // alone: 4 experts of 1 row, run in turn
        const std::vector<float> alone = run(2, 1, x.data() + r * h);
        CHECK_FALSE(moe.last_ran_side_by_side());
        CHECK(std::memcmp(alone.data(), row, static_cast<std::size_t>(h) * sizeof(float)) == 0);
        // repeated: 4 experts of 16 rows, run in turn, each product split on 2 and 3 threads
        std::vector<float> repeated;
        for (index_t i = 0; i < copies; ++i) repeated.insert(repeated.end(), x.begin() + r * h, x.begin() + (r + 1) * h);
        for (const int threads : {1, 2, 3}) {
            CAPTURE(threads);
            const std::vector<float> y = run(threads, copies, repeated.data());
            REQUIRE(std::set<index_t>(work.picks.begin(), work.picks.end()).size() == 4);  // < 4 a thread: in turn
            CHECK_FALSE(moe.last_ran_side_by_side());
            for (index_t i = 0; i < copies; ++i) CHECK(std::memcmp(y.data() + i * h, row, static_cast<std::size_t>(h) * sizeof(float)) == 0);
        }
    }
    omp_set_num_threads(threads_before);
#endif
}

}  // namespace test_determinism
