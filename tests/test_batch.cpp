// A batch: per-sequence seeds, one failure ending one sequence, defaults taken from the model and the
// record of where each setting came from, end-of-turn ids in CD4LM's deferral.
#include <doctest/doctest.h>

#include <cmath>
#include <dlm/presets.hpp>

#include "support/scripts.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_batch {

using namespace dlm;
using dlm::testing::scripted_model;
using dlm_test::context_hash;
using dlm_test::oracle;
using tvec = std::vector<token_id>;
using ivec = std::vector<index_t>;
using prompts_t = std::vector<std::vector<token_id>>;

namespace {
constexpr token_id mask = 31, eos = 30;
scripted_model hashed() { return {32, mask, {eos}, false, context_hash()}; }
}  // namespace

TEST_CASE("batch: identical prompts draw different samples; a sequence's own seed reproduces it anywhere") {
    auto m = hashed();
    presets::llada<scripted_model> d(m, semi_ar_mask{8}, {}, llada_schedule{16}, presets::llada_sampler(1.0f));
    const prompts_t same{{1, 2, 3}, {1, 2, 3}, {1, 2, 3}};
    const auto r = d.generate(same, {16, 7});
    CHECK(r.sequences[0].tokens != r.sequences[1].tokens);
    CHECK(r.sequences[1].tokens != r.sequences[2].tokens);
    CHECK(r.sequences[0].settings.seed.value == 7);  // sequence 0 keeps the seed: a single prompt decodes as before
    CHECK(r.sequences[0].tokens == d.generate(tvec{1, 2, 3}, {16, 7}).tokens);

    // Per-sequence seeds: the same seed gives the same sequence at any position of any batch.
    generation_options o{.gen_length = 16};
    o.seeds = {11, 7, 11};
    const auto s = d.generate(same, o);
    CHECK(s.sequences[0].tokens == s.sequences[2].tokens);
    CHECK(s.sequences[1].tokens == r.sequences[0].tokens);
    CHECK(s.sequences[2].settings.seed.origin == "generation_options::seeds[2]");
    o.seeds = {1, 2};
    CHECK_THROWS_WITH_AS((void)d.generate(same, o), doctest::Contains("'seeds'"), invalid_parameter);
}

TEST_CASE("batch: NaN logits in one sequence end that sequence only; the others finish as they would alone") {
    // Sequence 1 (prompt {9, 9}) gets a NaN at its second forward.
    scripted_model m(32, mask, {eos}, false, [hash = context_hash()](const dlm::testing::script_view& v, std::span<float> out) {
        hash(v, out);
        if (v.layout.prompt_length == 2 && v.visible[0] == 9 && v.forward >= 1) out[4] = std::nanf("");
    });
    presets::cdlm<scripted_model> d(m, block_causal_mask{4}, {}, presets::cdlm_schedule{0.3});
    const prompts_t batch{{1, 2, 3}, {9, 9}, {4, 5, 6, 7}};
    const auto r = d.generate(batch, {12, 0});
    REQUIRE(r.sequences.size() == 3);
    CHECK(r.sequences[1].status == sequence_status::failed);
    CHECK(r.sequences[1].message.find("sequence 1, forward 1") != std::string::npos);
    CHECK_THROWS_AS(r.sequences[1].rethrow_if_failed(), numeric_error);
    for (const std::size_t i : {std::size_t{0}, std::size_t{2}}) {
        CHECK(r.sequences[i].status == sequence_status::finished);
        CHECK(r.sequences[i].message.empty());
        const auto alone = d.generate(batch[i], {.gen_length = 12, .seed = sequence_seed(0, i)});
        CHECK(alone.tokens == r.sequences[i].tokens);
        CHECK(alone.commit_forward == r.sequences[i].commit_forward);
    }
}

TEST_CASE("batch: a policy that breaks its contract fails its own sequence") {
    struct picky {  // chooses a candidate that does not exist, for prompts of length 1 only
        void select(const step_context& ctx, std::span<const candidate> c, std::vector<index_t>& chosen) const {
            chosen.push_back(ctx.layout.prompt_length == 1 ? static_cast<index_t>(c.size()) : 0);
        }
    };
    auto m = hashed();
    decoder<scripted_model, semi_ar_mask, no_cache, picky, greedy_sampler> d(m, {4});
    const auto r = d.generate(prompts_t{{1, 2}, {3}}, {8, 0});
    CHECK(r.sequences[0].status == sequence_status::finished);
    CHECK(r.sequences[1].failed());
    CHECK_THROWS_AS(r.sequences[1].rethrow_if_failed(), contract_error);
}

namespace {
// At namespace scope: a local class may not declare a member template (GCC refuses it).
struct blind_cache : no_cache {  // for prompts of length 1, the logits of the prompt's row only
    template <attention_mask Mask>
    [[nodiscard]] forward_plan plan(const Mask& mask, const canvas_layout& l, const block_cursor& cur) const noexcept {
        forward_plan p = no_cache::plan(mask, l, cur);
        if (l.prompt_length == 1) p.logits_begin = 0, p.logits_end = 1;
        return p;
    }
};
}  // namespace

TEST_CASE("batch: a cache whose plan reads no masked slot's row fails its own sequence at its first forward, not at the step bound") {
    auto m = hashed();
    decoder<scripted_model, semi_ar_mask, blind_cache, threshold_schedule, greedy_sampler> d(m, {4}, {}, threshold_schedule{0.9});
    const auto r = d.generate(prompts_t{{1, 2}, {3}}, {8, 0});
    CHECK(r.sequences[0].status == sequence_status::finished);
    REQUIRE(r.sequences[1].failed());
    CHECK_THROWS_AS(r.sequences[1].rethrow_if_failed(), contract_error);
    CHECK(r.sequences[1].stats.forwards == 0);
    CHECK(r.sequences[1].message.find("planned logits rows [0, 1), which predict no masked slot of block 0 (slots [1, 5))") != std::string::npos);
}

TEST_CASE("defaults: block and generation length come from the model unless the user sets them, and the result says which") {
    auto m = scripted_model(32, mask, {eos}, false, oracle(tvec(48, 4), std::vector<double>(48, 0.95)));
    decoding_hints h;
    h.gen_length = {48, "config.json key 'dlm_gen_length'"};
    h.block_length = {8, "config.json key 'dlm_block_length'"};
    h.mask_id_origin = "config.json key 'mask_token_id'";
    m.set_decoding_hints(h);
    SUBCASE("every preset with blocks") {
        const auto check_model_defaults = [&](auto&& d) {
            const sequence_result r = d.generate(tvec{1, 2}, {});
            CHECK(r.tokens.size() == 48);
            CHECK(r.settings.gen_length.source == setting_source::model);
            CHECK(r.settings.gen_length.origin == "config.json key 'dlm_gen_length'");
            CHECK(r.settings.block_length.value == 8);
            CHECK(r.settings.block_length.source == setting_source::model);
            CHECK(r.settings.mask_id.value == mask);
            CHECK(r.settings.mask_id.origin == "config.json key 'mask_token_id'");
            CHECK(r.settings.eos_ids.value == tvec{eos});
            CHECK(r.stats.steps_per_block.size() == 6);
        };
        check_model_defaults(presets::cdlm<scripted_model>(m));
        check_model_defaults(presets::llada<scripted_model>(m));
        check_model_defaults(presets::fast_dllm<scripted_model>(m));
        check_model_defaults(presets::fast_dllm_dual<scripted_model>(m));
        check_model_defaults(presets::cd4lm<scripted_model>(m));
    }
    SUBCASE("the user's values win") {
        presets::cdlm<scripted_model> d(m, block_causal_mask{4});
        generation_options o{.gen_length = 16};
        o.eos_ids = tvec{29};
        const auto r = d.generate(tvec{1, 2}, o);
        CHECK(r.settings.gen_length.value == 16);
        CHECK(r.settings.gen_length.source == setting_source::user);
        CHECK(r.settings.block_length.value == 4);
        CHECK(r.settings.block_length.source == setting_source::user);
        CHECK(r.settings.eos_ids.value == tvec{29});
        CHECK(r.settings.eos_ids.source == setting_source::user);
    }
    SUBCASE("masks with a fixed block size, and models that say nothing") {
        const auto r = presets::dream<scripted_model>(m).generate(tvec{1, 2}, {});
        CHECK(r.settings.block_length.value == 48);  // one block, whatever the model says
        auto plain = hashed();
        const auto p = presets::cdlm<scripted_model>(plain, {}, {}, presets::cdlm_schedule{0.1}).generate(tvec{1}, {});
        CHECK(p.settings.gen_length.value == default_gen_length);
        CHECK(p.settings.gen_length.source == setting_source::library);
        CHECK(p.settings.block_length.value == default_block_length);
        CHECK(p.settings.block_length.source == setting_source::library);
    }
    SUBCASE("a model block length that does not divide the user's generation length says where it came from") {
        presets::cdlm<scripted_model> d(m);
        CHECK_THROWS_WITH_AS((void)d.generate(tvec{1}, {.gen_length = 20}),
                             doctest::Contains("must divide gen_length (20), got 8 (config.json key 'dlm_block_length')"), invalid_parameter);
    }
    SUBCASE("EOS and end-of-turn ids outside the vocabulary are refused") {
        presets::cdlm<scripted_model> d(m);
        generation_options o;
        o.end_of_turn_ids = tvec{40};
        CHECK_THROWS_WITH_AS((void)d.generate(tvec{1}, o), doctest::Contains("'end_of_turn_ids'"), invalid_parameter);
    }
}

TEST_CASE("cd4lm defers end-of-turn tokens as the released decoder does, not only EOS") {
    constexpr token_id eot = 29;
    // Every slot predicts the end-of-turn token with p 0.99: deferred while fewer than 0.3 * 8 slots
    // are committed (one per step, the most probable, for 3 steps), then all at once.
    auto m = scripted_model(32, mask, {eos}, false, oracle(tvec(8, eot), std::vector<double>(8, 0.99)));
    decoding_hints h;
    h.end_of_turn_ids = {tvec{eot}, "tokenizer.json added tokens <|im_end|> 29"};
    m.set_decoding_hints(h);
    presets::cd4lm<scripted_model> d(m, semi_ar_mask{8});
    const auto r = d.generate(tvec{1, 2, 3}, {8, 0});
    CHECK(r.commit_forward == ivec{0, 1, 2, 3, 3, 3, 3, 3});
    CHECK(r.settings.end_of_turn_ids.value == tvec{eot});
    CHECK(r.settings.end_of_turn_ids.source == setting_source::model);
    generation_options none{.gen_length = 8};
    none.end_of_turn_ids = tvec{};  // the user may switch it off
    CHECK(d.generate(tvec{1, 2, 3}, none).commit_forward == ivec(8, 0));
}

TEST_CASE("cfg_scale: an unconditional forward with the prompt masked, combined as LLaDA's generate()") {
    // Conditional rows (they see the prompt token 1) favour token 4 (logit 2) over 5 (logit 1.5); the
    // unconditional rows (prompt masked) favour 4 more strongly (logit 3 vs 1). Combined with scale
    // 1: un + 2 (cond - un) -> token 4: 1, token 5: 2, so guidance flips the choice to 5.
    scripted_model m(8, 7, {6}, false, [](const dlm::testing::script_view& v, std::span<float> out) {
        for (auto& x : out) x = 0.f;
        const bool conditional = v.visible[0] == 1;
        out[4] = conditional ? 2.f : 3.f;
        out[5] = conditional ? 1.5f : 1.f;
    });
    presets::llada<scripted_model> d(m, semi_ar_mask{4});
    CHECK(d.generate(tvec{1, 2}, {4, 0}).tokens == tvec(4, 4));
    m.clear_log();
    const auto r = d.generate(prompts_t{{1, 2}, {1, 3}}, {.gen_length = 4, .cfg_scale = 1.0});
    CHECK(r.sequences[0].tokens == tvec(4, 5));
    CHECK(r.sequences[1].tokens == tvec(4, 5));
    REQUIRE(m.log().size() == 4);
    CHECK(m.log()[0].size() == 4);  // each sequence's forward and its unconditional twin
    CHECK(r.stats.forwards == 4);
    CHECK(r.sequences[0].stats.forwards == 4);  // counted once per step

    SUBCASE("with an approximate cache the unconditional canvas keeps its own K/V") {
        presets::fast_dllm<scripted_model> f(m, semi_ar_mask{4});
        CHECK(f.generate(tvec{1, 2}, {.gen_length = 8, .cfg_scale = 1.0}).tokens == tvec(8, 5));
    }
    SUBCASE("refused with an exact cache, and for a negative scale or one past 1e6") {
        presets::cdlm<scripted_model> c(m, block_causal_mask{4});
        CHECK_THROWS_WITH_AS((void)c.generate(tvec{1, 2}, {.gen_length = 4, .cfg_scale = 1.0}),
                             doctest::Contains("'cfg_scale': classifier-free guidance is not available with an exact KV cache"),
                             invalid_parameter);
        CHECK_THROWS_WITH_AS((void)d.generate(tvec{1, 2}, {.gen_length = 4, .cfg_scale = -1.0}), doctest::Contains("'cfg_scale'"),
                             invalid_parameter);
        CHECK_THROWS_WITH_AS((void)d.generate(tvec{1, 2}, {.gen_length = 4, .cfg_scale = 1e39}),
                             doctest::Contains("'cfg_scale': must be a number in [0, 1e6]"), invalid_parameter);
        CHECK(d.generate(tvec{1, 2}, {.gen_length = 4, .cfg_scale = 1e6}).tokens == tvec(4, 5));
    }
}

}  // namespace test_batch
