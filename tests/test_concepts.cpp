// One concept per policy axis: a minimal archetype models each; a type missing a hook does not.
#include <doctest/doctest.h>

#include <cstdint>
#include <span>
#include <vector>

#include <dlm/dlm.hpp>
#include <dlm/testing/scripted_model.hpp>

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_concepts {

using namespace dlm;

namespace archetype {

struct mask {
    static constexpr bool committed_kv_is_final = false;
    bool allowed(const canvas_layout&, index_t, index_t) const { return true; }
    index_t key_end(const canvas_layout& l, index_t) const { return l.size(); }
    index_t block_length_for(index_t gen_length) const { return gen_length; }
};

struct cache {
    static constexpr bool is_exact = true;
    static constexpr bool needs_storage = false;
    template <class Mask>
    forward_plan plan(const Mask&, const canvas_layout& l, const block_cursor&) const {
        return {0, l.size(), l.prompt_length, l.size(), 0, 0, l.size()};
    }
};

struct schedule {
    void select(const step_context&, std::span<const candidate> c, std::vector<index_t>& chosen) const {
        for (std::size_t i = 0; i < c.size(); ++i) chosen.push_back(static_cast<index_t>(i));
    }
};

struct sampler {
    slot_choice sample(std::span<const float>, const random_key&, std::span<const token_id>) const { return {0, 1.f, 1.f, 0.f}; }
};

struct model {
    struct kv_cache {};
    index_t vocab_size() const { return 4; }
    token_id mask_id() const { return 3; }
    std::span<const token_id> eos_ids() const { return {}; }
    bool logits_shift() const { return false; }
    kv_cache make_kv_cache(index_t) const { return {}; }
    template <class Mask>
    void forward(std::span<const forward_request<kv_cache>>, const Mask&, std::span<float> logits) {
        for (auto& x : logits) x = 0.f;
    }
};

}  // namespace archetype

namespace broken {
struct mask_without_allowed {
    static constexpr bool committed_kv_is_final = false;
    index_t key_end(const canvas_layout& l, index_t) const { return l.size(); }
    index_t block_length_for(index_t g) const { return g; }
};
struct mask_without_trait {
    bool allowed(const canvas_layout&, index_t, index_t) const { return true; }
    index_t key_end(const canvas_layout& l, index_t) const { return l.size(); }
    index_t block_length_for(index_t g) const { return g; }
};
struct mask_with_runtime_trait : archetype::mask {
    static inline bool committed_kv_is_final = false;  // not a constant expression
};
struct cache_without_plan {
    static constexpr bool is_exact = true;
    static constexpr bool needs_storage = false;
};
struct cache_without_traits {
    template <class Mask>
    forward_plan plan(const Mask&, const canvas_layout&, const block_cursor&) const { return {}; }
};
struct schedule_with_wrong_signature {
    std::vector<index_t> select(std::span<const candidate>) const { return {}; }
};
struct not_a_schedule {};
struct sampler_returning_token {
    token_id sample(std::span<const float>, const random_key&, std::span<const token_id>) const { return 0; }
};
struct model_without_forward {
    struct kv_cache {};
    index_t vocab_size() const { return 4; }
    token_id mask_id() const { return 3; }
    std::span<const token_id> eos_ids() const { return {}; }
    bool logits_shift() const { return false; }
    kv_cache make_kv_cache(index_t) const { return {}; }
};
struct model_without_shift : archetype::model {
    void logits_shift() const {}
};
// Optional hooks misspelled (a near name of a known hook) or of another form: never called, so refused.
struct mask_with_misspelled_hook : archetype::mask {
    bool align_block = true;  // align_blocks
};
struct mask_with_mistyped_hook : archetype::mask {
    index_t block_length = 8;  // the option is std::optional<index_t>
};
struct mask_with_misspelled_trait : archetype::mask {
    static constexpr bool keys_are_prefix = true;  // allowed_is_prefix
};
struct mask_with_runtime_prefix_trait : archetype::mask {
    static inline bool allowed_is_prefix = true;  // not a constant expression
};
struct cache_with_misspelled_hook : archetype::cache {
    index_t sub_blocks = 8;  // sub_block
};
struct schedule_with_misspelled_hook : archetype::schedule {
    bool stop_after_blocks(const step_context&, std::span<const token_id>) const { return true; }  // stop_after_block
};
struct schedule_with_mistyped_hook : archetype::schedule {
    bool stop_after_block(const step_context&) const { return true; }  // the block's tokens are missing
};
struct sampler_with_misspelled_hook : archetype::sampler {
    void validates() const {}  // validate
};
struct sampler_with_mistyped_hook : archetype::sampler {
    void validate(int) const {}  // validate() takes nothing
};
struct sampler_with_member_opt_in : archetype::sampler {
    static constexpr bool concurrent = true;  // the opt-in is dlm::enable_concurrent_sampling<S>, outside the class
};
struct sampler_with_misspelled_trait : archetype::sampler {
    static constexpr bool thread_safe = true;
};
struct model_with_misspelled_hook : archetype::model {
    index_t max_context_length() const { return 16; }  // max_context
};
struct model_with_mistyped_hook : archetype::model {
    index_t max_context = 16;  // a function: index_t max_context() const
};
struct model_with_device_logits_but_no_device : archetype::model {
    std::uint64_t device_logits_bytes() const { return 0; }  // weighed against device_bytes_free, which it lacks
};
struct model_with_work_bytes_but_nothing_held : archetype::model {
    std::uint64_t work_bytes(index_t rows) const { return static_cast<std::uint64_t>(rows); }  // work_bytes_held() is missing
};
struct model_with_misspelled_work_hook : archetype::model {
    std::uint64_t forward_work_bytes(index_t rows) const { return static_cast<std::uint64_t>(rows); }  // work_bytes
};
struct model_with_work_bytes : archetype::model {
    std::uint64_t work_bytes(index_t rows) const { return static_cast<std::uint64_t>(rows); }
    std::uint64_t work_bytes_held() const { return 0; }
};
}  // namespace broken

TEST_CASE("archetypes model every concept") {
    static_assert(attention_mask<archetype::mask>);
    static_assert(kv_cache_policy<archetype::cache>);
    static_assert(unmask_schedule<archetype::schedule>);
    static_assert(token_sampler<archetype::sampler>);
    static_assert(language_model<archetype::model>);
    static_assert(language_model<dlm::testing::scripted_model>);
    archetype::model m;
    decoder<archetype::model, archetype::mask, archetype::cache, archetype::schedule, archetype::sampler> d(m);
    const auto r = d.generate(std::vector<token_id>{1, 2}, {4, 0});
    CHECK(r.tokens == std::vector<token_id>{0, 0, 0, 0});
    CHECK(r.stats.forwards == 1);
}

TEST_CASE("a type missing a hook models no concept") {
    static_assert(!attention_mask<broken::mask_without_allowed>);
    static_assert(!mask_has_allowed<broken::mask_without_allowed>);
    static_assert(!attention_mask<broken::mask_without_trait>);
    static_assert(!attention_mask<broken::mask_with_runtime_trait>);
    static_assert(!kv_cache_policy<broken::cache_without_plan>);
    static_assert(!kv_cache_policy<broken::cache_without_traits>);
    static_assert(!unmask_schedule<broken::schedule_with_wrong_signature>);
    static_assert(!unmask_schedule<broken::not_a_schedule>);
    static_assert(!token_sampler<broken::sampler_returning_token>);
    static_assert(!language_model<broken::model_without_forward>);
    static_assert(!model_has_forward<broken::model_without_forward>);
    static_assert(!language_model<broken::model_without_shift>);
    static_assert(!language_model<int>);
    CHECK(true);
}

TEST_CASE("a policy with a misspelled or mistyped optional hook models no concept") {
    static_assert(mask_hooks_known<archetype::mask> && mask_hooks_known<aligned_block_diffusion_mask>);
    static_assert(!attention_mask<broken::mask_with_misspelled_hook> && mask_hook_misnamed<broken::mask_with_misspelled_hook>);
    static_assert(!attention_mask<broken::mask_with_mistyped_hook> && mask_hook_mistyped<broken::mask_with_mistyped_hook>);
    static_assert(!attention_mask<broken::mask_with_misspelled_trait> && mask_hook_misnamed<broken::mask_with_misspelled_trait>);
    static_assert(!attention_mask<broken::mask_with_runtime_prefix_trait> && mask_hook_mistyped<broken::mask_with_runtime_prefix_trait>);
    static_assert(cache_hooks_known<archetype::cache> && cache_hooks_known<sub_block_cache>);
    static_assert(!kv_cache_policy<broken::cache_with_misspelled_hook>);
    static_assert(schedule_hooks_known<archetype::schedule> && schedule_hooks_known<sub_block_threshold_schedule>);
    static_assert(!unmask_schedule<broken::schedule_with_misspelled_hook> && schedule_hook_misnamed<broken::schedule_with_misspelled_hook>);
    static_assert(!unmask_schedule<broken::schedule_with_mistyped_hook> && schedule_hook_mistyped<broken::schedule_with_mistyped_hook>);
    static_assert(sampler_hooks_known<archetype::sampler> && sampler_hooks_known<categorical_sampler>);
    static_assert(!token_sampler<broken::sampler_with_misspelled_hook>);
    static_assert(!token_sampler<broken::sampler_with_mistyped_hook>);
    static_assert(!token_sampler<broken::sampler_with_misspelled_trait> && sampler_hook_misnamed<broken::sampler_with_misspelled_trait>);
    static_assert(!token_sampler<broken::sampler_with_member_opt_in> && sampler_hook_misnamed<broken::sampler_with_member_opt_in>);
    static_assert(model_hooks_known<archetype::model> && model_hooks_known<dlm::testing::scripted_model>);
    static_assert(!language_model<broken::model_with_misspelled_hook>);
    static_assert(!language_model<broken::model_with_mistyped_hook>);
    static_assert(!language_model<broken::model_with_device_logits_but_no_device> &&
                  model_hook_mistyped<broken::model_with_device_logits_but_no_device>);
    static_assert(!language_model<broken::model_with_work_bytes_but_nothing_held> &&
                  model_hook_mistyped<broken::model_with_work_bytes_but_nothing_held>);
    static_assert(!language_model<broken::model_with_misspelled_work_hook> && model_hook_misnamed<broken::model_with_misspelled_work_hook>);
    static_assert(language_model<broken::model_with_work_bytes> && model_reports_work_bytes<broken::model_with_work_bytes> &&
                  !work_on_device<broken::model_with_work_bytes>);  // a host model's work buffers are host memory
    CHECK(true);
}

TEST_CASE("shipped policies model their concepts") {
    static_assert(attention_mask<causal_mask> && attention_mask<block_causal_mask>);
    static_assert(kv_cache_policy<no_cache> && kv_cache_policy<dual_cache>);
    static_assert(unmask_schedule<llada_schedule> && unmask_schedule<dream_schedule> && unmask_schedule<cd4lm_schedule>);
    static_assert(unmask_schedule<presets::cdlm_schedule>);
    static_assert(token_sampler<greedy_sampler> && token_sampler<presets::llada_sampler>);
    // Every shipped sampler may draw a step's slots side by side; the archetype (a user's) may not.
    static_assert(sampler_is_concurrent<greedy_sampler> && sampler_is_concurrent<presets::llada_sampler>);
    static_assert(sampler_is_concurrent<sdar_sampler> && sampler_is_concurrent<llada2_sampler>);
    static_assert(!sampler_is_concurrent<archetype::sampler>);
    // Not inherited: a sampler derived from a shipped one, with a sample() (and state) of its own, is
    // drawn in turn until it opts in itself.
    struct stateful : presets::llada_sampler {
        mutable std::vector<float> buffer;
        slot_choice sample(std::span<const float> z, const random_key& k, std::span<const token_id> b) const {
            buffer.assign(z.begin(), z.end());
            return presets::llada_sampler::sample(buffer, k, b);
        }
    };
    static_assert(token_sampler<stateful> && !sampler_is_concurrent<stateful>);
    CHECK(true);
}

}  // namespace test_concepts
