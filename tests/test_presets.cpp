// Every preset end to end on a scripted model: exact commit order, number of forwards, stopping.
#include <doctest/doctest.h>

#include <dlm/presets.hpp>

#include "support/scripts.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_presets {

using namespace dlm;
using dlm::testing::scripted_model;
using dlm_test::oracle;
using ivec = std::vector<index_t>;
using tvec = std::vector<token_id>;

namespace {
constexpr token_id mask = 15, eos = 14;
const std::vector<std::vector<token_id>> prompt{{1, 2, 3}};

scripted_model model(tvec answer, std::vector<double> conf, bool shift = false) {
    return {16, mask, {eos}, shift, oracle(std::move(answer), std::move(conf))};
}
}  // namespace

TEST_CASE("autoregressive: one slot per forward, per-token cache, stops at EOS") {
    auto m = model({4, 5, eos, 6, 7, 8}, {0.6, 0.6, 0.6, 0.6, 0.6, 0.6}, true);
    presets::autoregressive<scripted_model> d(m);
    const auto r = d.generate(prompt, {6, 0});
    const auto& s = r.sequences[0];
    CHECK(s.tokens == tvec{4, 5, eos, eos, eos, eos});
    CHECK(s.commit_forward == ivec{0, 1, 2, -1, -1, -1});
    CHECK(s.stopped_early);
    CHECK(s.answer_length == 2);
    CHECK(r.stats.forwards == 3);
    // Prefill of the prompt, then one row per token.
    CHECK(m.log()[0][0] == forward_plan{0, 3, 2, 3, 0, 3, 3});
    CHECK(m.log()[1][0] == forward_plan{3, 4, 3, 4, 3, 4, 4});
    CHECK(s.stats.rows_computed == 5);
}

TEST_CASE("llada: fixed steps per block, low-confidence order") {
    // gen 8 in blocks of 4, 4 steps -> 2 steps per block, 2 tokens per step.
    auto m = model({4, 5, 6, 7, 8, 9, 10, 11}, {0.3, 0.9, 0.5, 0.8, 0.7, 0.6, 0.95, 0.1});
    presets::llada<scripted_model> d(m, semi_ar_mask{4}, {}, llada_schedule{4});
    const auto r = d.generate(prompt, {8, 0});
    const auto& s = r.sequences[0];
    CHECK(s.tokens == tvec{4, 5, 6, 7, 8, 9, 10, 11});
    CHECK(s.commit_forward == ivec{1, 0, 1, 0, 2, 3, 2, 3});
    CHECK(r.stats.forwards == 4);
    CHECK(s.stats.steps_per_block == ivec{2, 2});
    CHECK(s.stats.tokens_per_forward() == doctest::Approx(2.0));
    // p = 0.9 of 16 tokens, the mask id's share (0.1 / 15) banned from the draw: 0.9 / (1 - 0.1 / 15).
    CHECK(s.commit_confidence[1] == doctest::Approx(0.9 / (1.0 - 0.1 / 15.0)));
    for (const auto& f : m.log()) CHECK(f[0].window_size() == 11);  // full recompute
}

TEST_CASE("llada defaults: steps = gen_length, blocks of 32, low-confidence, greedy") {
    auto m = model(tvec(64, 4), std::vector<double>(64, 0.5));
    presets::llada<scripted_model> d(m);
    CHECK(d.schedule().steps == 0);  // gen_length: generate()'s 128 steps for 128 slots
    CHECK_FALSE(d.mask().block_length.has_value());  // the model's, else 32
    CHECK(d.sampler().temperature == 0.f);
    // gen 64 = 2 blocks of 32, 64 steps -> one token per forward.
    const auto r = d.generate(prompt, {64, 0});
    CHECK(r.stats.forwards == 64);
    CHECK(r.sequences[0].stats.steps_per_block == ivec{32, 32});
    CHECK(r.sequences[0].settings.block_length.value == 32);
    CHECK(r.sequences[0].settings.block_length.source == setting_source::library);
    // With 128 steps over 2 blocks the last 32 steps of each block would commit nothing. LLaDA runs
    // those; the decoder ends a block once it has no masked slot, so they are skipped with identical output.
    presets::llada<scripted_model> d128(m, {}, {}, llada_schedule{128});
    CHECK(d128.generate(prompt, {64, 0}).stats.forwards == 64);
}

TEST_CASE("dream: maskgit_plus over the timestep schedule, shifted logits") {
    auto m = model({4, 5, 6, 7, 8, 9, 10, 11}, {0.3, 0.9, 0.5, 0.8, 0.7, 0.6, 0.95, 0.1}, true);
    presets::dream<scripted_model> d(m, {}, {}, dream_schedule{4, 1e-3, dream_alg::maskgit_plus});
    const auto r = d.generate(prompt, {8, 0});
    const auto& s = r.sequences[0];
    // k per step: floor(8*0.24975)=1, floor(7*0.3331)=2, floor(5*0.49900)=2, then the last 3.
    CHECK(s.commit_forward == ivec{3, 1, 3, 1, 2, 2, 0, 3});
    CHECK(s.tokens == tvec{4, 5, 6, 7, 8, 9, 10, 11});
    CHECK(r.stats.forwards == 4);
    CHECK(m.log()[0][0].logits_begin == 2);  // slot 3 predicted by row 2
}

TEST_CASE("dream defaults: 512 steps, eps 1e-3, origin, greedy") {
    auto m = model(tvec(16, 4), std::vector<double>(16, 0.5), true);
    presets::dream<scripted_model> d(m);
    CHECK(d.schedule().steps == 512);
    CHECK(d.schedule().eps == 1e-3);
    CHECK(d.schedule().alg == dream_alg::origin);
    const auto r = d.generate(prompt, {16, 3});
    // Dream runs all 512 steps; once origin has committed every slot the rest would change nothing,
    // so the decoder stops there.
    CHECK(r.stats.forwards > 16);
    CHECK(r.stats.forwards <= 512);
    CHECK(r.sequences[0].tokens == tvec(16, 4));
    CHECK(r.sequences[0].stats.committed == 16);
}

TEST_CASE("fast_dllm: threshold inside each block, cache refreshed at each block start") {
    auto m = model({4, 5, 6, 7, 8, 9, 10, 11}, {0.95, 0.5, 0.92, 0.3, 0.99, 0.99, 0.99, 0.99});
    presets::fast_dllm<scripted_model> d(m, semi_ar_mask{4});
    const auto r = d.generate(prompt, {8, 0});
    const auto& s = r.sequences[0];
    CHECK(s.commit_forward == ivec{0, 1, 0, 2, 3, 3, 3, 3});
    CHECK(r.stats.forwards == 4);
    CHECK(m.log()[0][0] == forward_plan{0, 11, 3, 7, 0, 11, 11});  // refresh
    CHECK(m.log()[1][0] == forward_plan{3, 11, 3, 7, 0, 0, 11});   // block + suffix
    CHECK(m.log()[3][0] == forward_plan{0, 11, 7, 11, 0, 11, 11}); // refresh at block 1
}

TEST_CASE("fast_dllm_dual: later steps compute only the block") {
    auto m = model({4, 5, 6, 7, 8, 9, 10, 11}, {0.95, 0.5, 0.92, 0.3, 0.99, 0.99, 0.99, 0.99});
    presets::fast_dllm_dual<scripted_model> d(m, semi_ar_mask{4});
    const auto r = d.generate(prompt, {8, 0});
    CHECK(r.sequences[0].commit_forward == ivec{0, 1, 0, 2, 3, 3, 3, 3});
    CHECK(m.log()[1][0] == forward_plan{3, 7, 3, 7, 0, 0, 11});
    CHECK(r.sequences[0].stats.rows_computed == 11 + 4 + 4 + 11);
}

TEST_CASE("cdlm: threshold inside block-causal blocks with the exact cache, stop after a block with EOS") {
    auto m = model({4, 5, 6, 7, 8, eos, 10, 11, 12, 13, 4, 5}, {0.95, 0.5, 0.92, 0.3, 0.99, 0.99, 0.99, 0.99, 0.99, 0.99, 0.99, 0.99});
    presets::cdlm<scripted_model> d(m, block_causal_mask{4});
    const auto r = d.generate(prompt, {12, 0});
    const auto& s = r.sequences[0];
    CHECK(s.tokens == tvec{4, 5, 6, 7, 8, eos, 10, 11, eos, eos, eos, eos});
    CHECK(s.commit_forward == ivec{0, 1, 0, 2, 3, 3, 3, 3, -1, -1, -1, -1});
    CHECK(s.stopped_early);
    CHECK(s.answer_length == 5);
    CHECK(r.stats.forwards == 4);
    CHECK(s.stats.steps_per_block == ivec{3, 1});
    CHECK(m.log()[0][0] == forward_plan{0, 7, 3, 7, 0, 3, 7});
    CHECK(m.log()[1][0] == forward_plan{3, 7, 3, 7, 0, 0, 7});
    CHECK(m.log()[3][0] == forward_plan{3, 11, 7, 11, 3, 7, 11});  // block 0 stored with block 1's first step
}

TEST_CASE("cdlm defaults: blocks of 32, tau 0.9, greedy") {
    auto m = model(tvec(64, 4), std::vector<double>(64, 0.95));
    presets::cdlm<scripted_model> d(m);
    CHECK_FALSE(d.mask().block_length.has_value());  // the model's, else 32
    CHECK(d.schedule().tau == 0.9);
    const auto r = d.generate(prompt, {64, 0});
    CHECK(r.stats.forwards == 2);  // every slot confident: one forward per block
    CHECK(r.sequences[0].settings.block_length.value == 32);
}

TEST_CASE("cd4lm: confidence-adaptive, at most max_tokens per step") {
    auto m = model({4, 5, 6, 7, 8, 9, 10, 11}, {0.97, 0.5, 0.96, 0.99, 0.99, 0.99, 0.99, 0.2});
    cd4lm_schedule cad;
    cad.max_tokens = 2;
    presets::cd4lm<scripted_model> d(m, semi_ar_mask{4}, {}, cad);
    const auto r = d.generate(prompt, {8, 0});
    const auto& s = r.sequences[0];
    // Block 0: {0.97, 0.96, 0.99} confident, capped at 2 -> slots 3, 0; then 2; then 1.
    CHECK(s.commit_forward == ivec{0, 2, 1, 0, 3, 3, 4, 5});
    CHECK(r.stats.forwards == 6);
}

TEST_CASE("cd4lm defaults: tau 0.95, 1-32 tokens, EOS guard 0.3, blocks of 32") {
    auto m = model(tvec(8, eos), std::vector<double>(8, 0.99));
    presets::cd4lm<scripted_model> d(m, semi_ar_mask{8});
    CHECK(d.schedule().tau == 0.95);
    CHECK(d.schedule().max_tokens == 32);
    CHECK(d.schedule().eos_guard == 0.3);
    CHECK_FALSE(presets::cd4lm<scripted_model>(m).mask().block_length.has_value());  // the model's, else 32
    // All-EOS predictions are deferred until 0.3 * 8 = 2.4 slots exist: one per step for 3 steps.
    const auto r = d.generate(prompt, {8, 0});
    CHECK(r.sequences[0].commit_forward == ivec{0, 1, 2, 3, 3, 3, 3, 3});
}

TEST_CASE("the aligned block presets decode a shifted model whose prompt is shorter than one block") {
    // Aligned blocks put a 3-token prompt inside block 0, so the row before the block is row -1: the
    // plans start at row 0 instead (a prompt row), and every slot is still decoded.
    const tvec answer{4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 4, 5, 6};
    const std::vector<double> conf(answer.size(), 0.95);
    auto m = model(answer, conf, true);
    presets::fast_dllm_v2<scripted_model> v2(m, aligned_block_diffusion_mask{8});
    const auto r = v2.generate(prompt, {13, 0});
    CHECK(r.sequences[0].tokens == answer);
    auto c = model(answer, conf, true);
    presets::fast_dllm_v2_block_cache<scripted_model> cached(c, aligned_block_diffusion_mask{8});
    CHECK(cached.generate(prompt, {13, 0}).sequences[0].tokens == answer);
    auto s = model(answer, conf, true);
    presets::sdar<scripted_model> sdar(s, aligned_block_diffusion_mask{8});
    CHECK(sdar.generate(prompt, {13, 0}).sequences[0].tokens == answer);
    for (const auto& f : m.log()) CHECK(f[0].logits_begin >= 0);
}

}  // namespace test_presets
