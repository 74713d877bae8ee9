// Decoding real models: the presets take their defaults from the model folder, and an exact cache is
// checked on the real tiny transformer, where a wrong cache policy shows (the scripted model cannot
// see it).
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <vector>

#include <dlm/cpu/transformer.hpp>
#include <dlm/presets.hpp>

#include "support/scripts.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_model_decoding {

using namespace dlm;
using tvec = std::vector<token_id>;
using prompts_t = std::vector<tvec>;

namespace {

const std::filesystem::path shipped = DLM_MODELS_DIR;
const std::filesystem::path fixtures = std::filesystem::path(DLM_TEST_DATA) / "models";

/// A wrong "exact" cache: it stores each slot's K/V once, in the first forward after the slot is
/// committed, and never again, though under a block-causal mask a slot's K/V still change while the
/// rest of its block is decoded. It assumes one commit per forward, left to right
/// (next_slot_schedule), so the slot committed last is block_begin + step - 1, and an unshifted model.
struct commit_time_cache {
    static constexpr bool is_exact = true;
    static constexpr bool needs_storage = true;

    template <attention_mask Mask>
    [[nodiscard]] forward_plan plan(const Mask&, const canvas_layout& l, const block_cursor& cur) const noexcept {
        const index_t bb = l.block_begin(cur.block), be = l.block_end(cur.block);
        forward_plan p{bb, be, bb, be, 0, 0, be};
        if (cur.step_in_block > 0) {  // the slot committed by the previous forward
            p.store_begin = bb + cur.step_in_block - 1;
            p.store_end = p.store_begin + 1;
        } else if (cur.block == 0) {  // the prompt
            p.window_begin = 0;
            p.store_end = l.prompt_length;
        } else {  // the previous block's last slot
            p.window_begin = p.store_begin = bb - 1;
            p.store_end = bb;
        }
        return p;
    }
};

template <class Model, class Cache>
using block_decoder = decoder<Model, block_causal_mask, Cache, next_slot_schedule, greedy_sampler>;

/// The largest difference of commit confidences between a decode under `Cache` and a full
/// recompute, over a batch (tokens must agree too, or the difference is reported as 1).
template <class Cache, class Model>
double divergence_from_full_recompute(Model& m) {
    const prompts_t prompts{{5, 17, 42, 7, 99, 3}, {11, 12, 250, 31, 8, 200, 140, 77, 6, 2, 19}};
    block_decoder<Model, Cache> cached(m, block_causal_mask{4}, {}, next_slot_schedule{false});
    block_decoder<Model, no_cache> full(m, block_causal_mask{4}, {}, next_slot_schedule{false});
    const auto a = cached.generate(std::span<const tvec>(prompts), {16, 0});
    const auto b = full.generate(std::span<const tvec>(prompts), {16, 0});
    double worst = 0;
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        REQUIRE(a.sequences[i].status == sequence_status::finished);
        if (a.sequences[i].tokens != b.sequences[i].tokens) return 1.0;
        for (std::size_t g = 0; g < a.sequences[i].commit_confidence.size(); ++g)
            worst = std::max(worst, std::abs(static_cast<double>(a.sequences[i].commit_confidence[g]) - b.sequences[i].commit_confidence[g]));
    }
    return worst;
}

}  // namespace

TEST_CASE("exact cache on the real tiny transformer: prefix_cache equals a full recompute, a commit-time cache does not") {
    auto m = cpu::transformer::load(fixtures / "llada_tiny");
    CHECK(divergence_from_full_recompute<prefix_cache>(m) == 0.0);
    // The wrong policy is caught: its stale K/V change the confidences (or the tokens).
    CHECK(divergence_from_full_recompute<commit_time_cache>(m) > 1e-4);
    // ... which the scripted model cannot see: its "K/V" is the token a slot held when stored, and a
    // committed token never changes.
    dlm::testing::scripted_model s(300, 299, {1}, false, dlm_test::context_hash());
    CHECK(divergence_from_full_recompute<commit_time_cache>(s) == 0.0);
}

TEST_CASE("model defaults: presets decode the shipped CDLM student with the blocks and length it was trained with") {
    auto m = cpu::transformer::load(shipped / "cdlm");
    const tvec prompt{5, 6, 7, 8};
    const sequence_result r = presets::cdlm<cpu::transformer>(m).generate(prompt, {});
    CHECK(r.tokens.size() == 48);
    CHECK(r.settings.gen_length.source == setting_source::model);
    CHECK(r.settings.gen_length.origin.find("key 'dlm_gen_length'") != std::string::npos);
    CHECK(r.settings.block_length.value == 8);  // not the library's 32
    CHECK(r.settings.block_length.source == setting_source::model);
    CHECK(r.settings.block_length.origin.find("config.json key 'dlm_block_length'") != std::string::npos);
    CHECK(r.settings.mask_id.value == 690);
    CHECK(r.settings.mask_id.origin.find("key 'mask_token_id'") != std::string::npos);
    CHECK(r.settings.eos_ids.value == tvec{689});
    CHECK(r.settings.end_of_turn_ids.value == tvec{692});  // <|im_end|> of its tokenizer.json
    CHECK(r.settings.end_of_turn_ids.origin.find("<|im_end|> 692") != std::string::npos);
    // The same defaults for every preset that has blocks.
    CHECK(presets::llada<cpu::transformer>(m).generate(prompt, {}).settings.block_length.value == 8);
    CHECK(presets::cd4lm<cpu::transformer>(m).generate(prompt, {}).settings.block_length.value == 8);
    CHECK(presets::fast_dllm<cpu::transformer>(m).generate(prompt, {}).settings.block_length.value == 8);
}

}  // namespace test_model_decoding
