// dlm/cache/compatibility.hpp — where the cache policy must agree with the mask, the schedule or the
// options: the rules every decoder (host and CUDA) checks, written once.
#pragma once

#include <string>

#include "../core/error.hpp"
#include "../mask/concept.hpp"
#include "../schedule/concept.hpp"
#include "concept.hpp"

namespace dlm::detail {

/// Does the cache reuse K/V across forwards and promise they equal a full recompute?
template <class C>
constexpr bool reuses_exact_kv() {
    if constexpr (cache_has_exactness_trait<C> && cache_has_storage_trait<C>) return C::is_exact && C::needs_storage;
    else return false;
}
/// Are committed keys and values final under the mask (no key attends to a later block)?
template <class M>
constexpr bool kv_final_under() {
    if constexpr (mask_has_finality_trait<M>) return M::committed_kv_is_final;
    else return true;
}
/// An exact cache needs a mask under which committed K/V are final.
template <class Cache, class Mask>
inline constexpr bool cache_fits_mask = !reuses_exact_kv<Cache>() || kv_final_under<Mask>();

/// A revising schedule (schedule/concept.hpp: revise and block_done) samples every filled slot of the
/// active block at every forward, so every forward must compute all of the block's rows: a cache
/// that recomputes one sub-block (sub_block_cache) cannot serve it.
template <class Cache, class Schedule>
inline constexpr bool cache_fits_revision = !revising_schedule<Schedule> || !cache_has_sub_block<Cache>;

/// Why classifier-free guidance cannot run with this cache ("" when it can).
template <class Cache>
std::string cfg_refusal() {
    if constexpr (reuses_exact_kv<Cache>())
        return "classifier-free guidance is not available with an exact KV cache: its unconditional canvas masks the prompt, "
               "which an exact cache's plans do not account for; use a preset with no cache or an approximate one (llada, "
               "dream, fast_dllm, fast_dllm_dual, cd4lm)";
    else return "";
}

/// A cache that recomputes one sub-block must cut the block where the schedule decodes it: throws
/// dlm::invalid_parameter("sub_block") when both have a sub_block and they differ.
template <class Cache, class Schedule>
void check_sub_blocks(const Cache& cache, const Schedule& schedule) {
    if constexpr (cache_has_sub_block<Cache> && schedule_has_sub_block<Schedule>)
        if (cache.sub_block != schedule.sub_block)
            throw invalid_parameter("sub_block", "the cache recomputes sub-blocks of " + std::to_string(cache.sub_block) +
                                                     " but the schedule decodes sub-blocks of " + std::to_string(schedule.sub_block));
}

}  // namespace dlm::detail

/// The message of both decoders (host and CUDA) when an exact KV cache meets a mask whose keys
/// change; a macro because static_assert takes only a string literal in C++20.
#define DLM_EXACT_CACHE_NEEDS_FINAL_KV(who)                                                                                  \
    who ": an exact KV cache needs a mask under which committed keys and values are final (causal_mask or block_causal_mask). " \
        "Under a bidirectional mask every key changes whenever any slot is committed, so reusing cached K/V would not be "     \
        "exact: use no_cache, or Fast-dLLM's approximate approx_prefix_cache or dual_cache."

/// The message of both decoders when a revising schedule meets a cache that does not compute every
/// row of the active block.
#define DLM_REVISION_NEEDS_WHOLE_BLOCK(who)                                                                                        \
    who ": a revising schedule (one with revise and block_done) may replace any filled slot of the active block, so every "     \
    "forward must compute all of the block's rows; this cache recomputes one sub-block only (sub_block_cache): use "            \
    "prefix_cache, or a schedule that never revises."

/// Every optional hook of the five policies in its known form (core/hooks.hpp); `who` names the decoder.
#define DLM_CHECK_ALL_OPTIONAL_HOOKS(who, Model, Mask, Cache, Schedule, Sampler) \
    DLM_CHECK_OPTIONAL_HOOKS(who, model, Model, DLM_MODEL_HOOKS);                 \
    DLM_CHECK_OPTIONAL_HOOKS(who, mask, Mask, DLM_MASK_HOOKS);                    \
    DLM_CHECK_OPTIONAL_HOOKS(who, cache, Cache, DLM_CACHE_HOOKS);                 \
    DLM_CHECK_OPTIONAL_HOOKS(who, schedule, Schedule, DLM_SCHEDULE_HOOKS);        \
    DLM_CHECK_OPTIONAL_HOOKS(who, sampler, Sampler, DLM_SAMPLER_HOOKS)
