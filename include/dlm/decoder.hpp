// dlm/decoder.hpp — the one decoding loop, composed from four policies.
//
//   dlm::decoder<Model, Mask, Cache, Schedule, Sampler>
//
// Every decoder of a masked-diffusion LM (and plain autoregressive decoding) is the same loop over a
// canvas [prompt | MASK ...]: plan a forward (Cache), run it with the attention mask (Mask), draw a
// token and confidence for each masked slot of the active block (Sampler), commit some of them
// (Schedule), and move to the next block when the active one has no masked slot left. The loop itself
// is dlm::engine (engine.hpp, the layer below); the decoder names the policies, checks at compile time
// that they fit, and generate() (detail::generate_api) runs an engine with the host stepper to the end.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/caches.hpp"
#include "cache/compatibility.hpp"
#include "core/error.hpp"
#include "core/result.hpp"
#include "engine.hpp"
#include "mask/masks.hpp"
#include "model/concept.hpp"
#include "sampler/samplers.hpp"
#include "schedule/concept.hpp"

namespace dlm {

template <class Model, class Mask, class Cache, class Schedule, class Sampler>
class decoder : public detail::generate_api<decoder<Model, Mask, Cache, Schedule, Sampler>> {
    // Sentence-style checks: a policy missing a hook fails here, where the decoder is named, with the
    // name of the hook.
    static_assert(model_has_traits<Model>,
                  "dlm::decoder: the Model must provide vocab_size(), mask_id(), eos_ids() and logits_shift().");
    static_assert(model_has_kv_cache<Model>,
                  "dlm::decoder: the Model must provide a nested type kv_cache and make_kv_cache(capacity).");
    static_assert(model_has_forward<Model>,
                  "dlm::decoder: the Model must provide forward(requests, mask, logits), templated on the mask.");
    static_assert(mask_has_allowed<Mask>,
                  "dlm::decoder: the Mask policy must provide `bool allowed(const canvas_layout&, index_t q, index_t k) const`.");
    static_assert(mask_has_key_end<Mask>,
                  "dlm::decoder: the Mask policy must provide `index_t key_end(const canvas_layout&, index_t q) const`.");
    static_assert(mask_has_block_length<Mask>,
                  "dlm::decoder: the Mask policy must provide `index_t block_length_for(index_t gen_length) const`.");
    static_assert(mask_has_finality_trait<Mask>,
                  "dlm::decoder: the Mask policy must declare `static constexpr bool committed_kv_is_final`.");
    static_assert(cache_has_plan<Cache>,
                  "dlm::decoder: the Cache policy must provide `forward_plan plan(const Mask&, const canvas_layout&, const block_cursor&) const` "
                  "(or with a trailing `const canvas_view&`).");
    static_assert(cache_has_exactness_trait<Cache> && cache_has_storage_trait<Cache>,
                  "dlm::decoder: the Cache policy must declare `static constexpr bool is_exact` and `needs_storage`.");
    static_assert(schedule_has_select<Schedule>,
                  "dlm::decoder: the Schedule policy must provide `void select(const step_context&, std::span<const candidate>, std::vector<index_t>&) const`.");
    static_assert(sampler_has_sample<Sampler>,
                  "dlm::decoder: the Sampler policy must provide `slot_choice sample(std::span<const float>, const random_key&, std::span<const token_id>) const`.");
    // Where policies must agree.
    static_assert(detail::cache_fits_mask<Cache, Mask>, DLM_EXACT_CACHE_NEEDS_FINAL_KV("dlm::decoder"));
    // Optional hooks: each one a policy has is one the loop knows, in its known form.
    DLM_CHECK_ALL_OPTIONAL_HOOKS("dlm::decoder", Model, Mask, Cache, Schedule, Sampler);

public:
    using model_type = Model;
    using mask_type = Mask;
    using cache_type = Cache;
    using schedule_type = Schedule;
    using sampler_type = Sampler;

    explicit decoder(Model& model, Mask mask = {}, Cache cache = {}, Schedule schedule = {}, Sampler sampler = {})
        : model_(&model), mask_(mask), cache_(cache), schedule_(schedule), sampler_(sampler) {
        sampler_validate(sampler_);
        detail::check_sub_blocks(cache_, schedule_);
    }

    [[nodiscard]] const Mask& mask() const noexcept { return mask_; }
    [[nodiscard]] const Cache& cache() const noexcept { return cache_; }
    [[nodiscard]] const Schedule& schedule() const noexcept { return schedule_; }
    [[nodiscard]] const Sampler& sampler() const noexcept { return sampler_; }
    [[nodiscard]] Model& model() const noexcept { return *model_; }

private:
    Model* model_;
    Mask mask_;
    Cache cache_;
    Schedule schedule_;
    Sampler sampler_;
};

}  // namespace dlm
