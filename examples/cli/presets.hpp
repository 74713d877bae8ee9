// examples/cli/presets.hpp — from a preset's run-time name to its compile-time decoder type.
//
//   dlm::cli::settings s = dlm::cli::resolve(opts, preset, hints);
//   auto result = dlm::cli::with_preset<Model>(preset, [&]<class Decoder>(std::type_identity<Decoder>) {
//       Decoder d = dlm::cli::make_decoder<Decoder>(model, s);
//       return d.generate(prompts, {.gen_length = s.gen_length, .seed = s.seed});
//   });
//
// One generic lambda serves every preset: with_preset calls it with the preset's decoder type, and
// make_decoder builds each of that type's four policies from the settings by the policy's type, so
// nothing is written once per preset.
#pragma once

#include <cstdio>
#include <string>
#include <type_traits>

#include <dlm/dlm.hpp>

#include "options.hpp"

namespace dlm::cli {

/// What a model folder's config.json says about how it was trained to be decoded (dlm's shipped
/// models write dlm_gen_length and dlm_block_length); 0 where it says nothing.
struct model_hints {
    index_t gen_length = 0;
    index_t block_length = 0;
};

/// Every run-time option of every policy, resolved: the flags, else the model's hints, else the
/// presets' own defaults (docs/policies.md).
struct settings {
    preset_id preset = preset_id::cdlm;
    index_t gen_length = 128;   ///< generation_options' default
    index_t block_length = 32;  ///< semi_ar_mask's and block_causal_mask's default
    index_t steps = 128;        ///< llada, dream: gen_length (LLaDA's 128 / 128, Dream's 512 / 512)
    double threshold = 0.9;     ///< fast-dllm, cdlm 0.9; cd4lm 0.95
    double eps = 1e-3;
    double alg_temp = 0.0;
    algorithm alg = algorithm::origin;  ///< dream: origin; llada: maskgit_plus (low confidence)
    float temperature = 0.f;
    index_t top_k = 0;
    float top_p = 1.f;
    std::uint64_t seed = 0;

    /// Whether the preset's mask has blocks whose size the user chooses.
    [[nodiscard]] bool has_blocks() const noexcept { return preset != preset_id::dream && preset != preset_id::autoregressive; }
    /// The block length of the decode (1 for autoregressive, gen_length for dream).
    [[nodiscard]] index_t effective_block_length() const noexcept {
        return preset == preset_id::autoregressive ? 1 : preset == preset_id::dream ? gen_length : block_length;
    }
};

/// The settings of `preset` from the flags and the model's hints. Throws dlm::invalid_parameter
/// naming the flag when the combination cannot decode (a block length that does not divide the
/// generation length, steps that are not a multiple of the blocks).
[[nodiscard]] inline settings resolve(const options& o, preset_id preset, const model_hints& hints) {
    using P = preset_id;
    settings s;
    s.preset = preset;
    s.gen_length = o.gen_length.value_or(hints.gen_length > 0 ? hints.gen_length : s.gen_length);
    s.block_length = o.block_length.value_or(hints.block_length > 0 ? hints.block_length : s.block_length);
    s.steps = o.steps.value_or(preset == P::sdar || preset == P::llada2 ? s.block_length : s.gen_length);
    s.threshold = o.threshold.value_or(preset == P::cd4lm || preset == P::llada2 ? 0.95 : preset == P::sdar ? 0.85 : 0.9);
    s.eps = o.eps.value_or(s.eps);
    s.alg_temp = o.alg_temp.value_or(s.alg_temp);
    s.alg = o.alg.value_or(preset == P::llada ? algorithm::maskgit_plus : algorithm::origin);
    // Under --compare, an option meant for some presets leaves the others at their defaults.
    if (preset == P::llada && s.alg != algorithm::random) s.alg = algorithm::maskgit_plus;
    if (preset == P::dream && s.alg == algorithm::random) s.alg = algorithm::origin;
    s.temperature = o.temperature.value_or(preset == P::sdar ? 1.f : 0.f);  // SDAR generate.py samples at temperature 1
    s.top_k = o.top_k.value_or(0);
    s.top_p = o.top_p.value_or(1.f);
    s.seed = o.seed;

    const std::string n = o.spelling("--gen-length") + " " + std::to_string(s.gen_length) +
                          (!o.gen_length && hints.gen_length > 0 ? " (the model's dlm_gen_length)" : "");
    const bool aligned = preset == P::sdar || preset == P::llada2 || preset == P::fast_dllm_v2 ||
                         preset == P::fast_dllm_v2_block_cache;  // blocks from position 0, any gen length
    if (s.has_blocks() && !aligned && s.gen_length % s.block_length != 0) {
        const std::string origin = o.block_length ? "" : hints.block_length > 0 ? " (the model's dlm_block_length)" : " (the preset's default)";
        throw invalid_parameter(o.block_length ? o.spelling("--block-length") : "--block-length",
                                std::to_string(s.block_length) + origin + " must divide " + n + "; pass --block-length or -n");
    }
    if (preset == P::llada || preset == P::dream) {
        const index_t blocks = s.gen_length / s.effective_block_length();
        if (s.steps % blocks != 0)
            throw invalid_parameter(o.steps ? o.spelling("--steps") : "--steps",
                                    std::to_string(s.steps) + " must be a multiple of the number of blocks (" + std::to_string(blocks) +
                                        " = " + n + " / block length " + std::to_string(s.effective_block_length()) + ")");
    }
    return s;
}

/// Calls f(std::type_identity<D>{}) with D the decoder type of `preset` for `Model`, and returns
/// what f returns (the same type for every preset).
template <class Model, class F>
decltype(auto) with_preset(preset_id preset, F&& f) {
    switch (preset) {
        case preset_id::autoregressive: return f(std::type_identity<presets::autoregressive<Model>>{});
        case preset_id::llada: return f(std::type_identity<presets::llada<Model>>{});
        case preset_id::dream: return f(std::type_identity<presets::dream<Model>>{});
        case preset_id::fast_dllm: return f(std::type_identity<presets::fast_dllm<Model>>{});
        case preset_id::fast_dllm_dual: return f(std::type_identity<presets::fast_dllm_dual<Model>>{});
        case preset_id::cdlm: return f(std::type_identity<presets::cdlm<Model>>{});
        case preset_id::sdar: return f(std::type_identity<presets::sdar<Model>>{});
        case preset_id::fast_dllm_v2: return f(std::type_identity<presets::fast_dllm_v2<Model>>{});
        case preset_id::llada2: return f(std::type_identity<presets::llada2<Model>>{});
        case preset_id::fast_dllm_v2_block_cache: return f(std::type_identity<presets::fast_dllm_v2_block_cache<Model>>{});
        case preset_id::cd4lm: break;
    }
    return f(std::type_identity<presets::cd4lm<Model>>{});
}

// One builder per policy type the presets use; make_decoder picks them by the decoder's types.
namespace detail {

inline causal_mask policy(std::type_identity<causal_mask>, const settings&) { return {}; }
inline bidirectional_mask policy(std::type_identity<bidirectional_mask>, const settings&) { return {}; }
inline semi_ar_mask policy(std::type_identity<semi_ar_mask>, const settings& s) { return {s.block_length}; }
inline block_causal_mask policy(std::type_identity<block_causal_mask>, const settings& s) { return {s.block_length}; }
inline block_diffusion_mask policy(std::type_identity<block_diffusion_mask>, const settings& s) { return {s.block_length}; }
inline aligned_block_diffusion_mask policy(std::type_identity<aligned_block_diffusion_mask>, const settings& s) { return aligned_block_diffusion_mask{s.block_length}; }

template <class Cache>
    requires kv_cache_policy<Cache>
Cache policy(std::type_identity<Cache>, const settings&) { return {}; }  // sub_block_cache: sub-blocks of 8, as the schedule's

inline next_slot_schedule policy(std::type_identity<next_slot_schedule>, const settings&) { return {}; }
inline llada_schedule policy(std::type_identity<llada_schedule>, const settings& s) {
    return {s.steps, s.alg == algorithm::random ? remasking::random : remasking::low_confidence};
}
inline dream_schedule policy(std::type_identity<dream_schedule>, const settings& s) {
    const dream_alg a = s.alg == algorithm::maskgit_plus  ? dream_alg::maskgit_plus
                        : s.alg == algorithm::topk_margin ? dream_alg::topk_margin
                        : s.alg == algorithm::entropy     ? dream_alg::entropy
                                                          : dream_alg::origin;
    return {s.steps, s.eps, a, s.alg_temp};
}
inline threshold_schedule policy(std::type_identity<threshold_schedule>, const settings& s) { return {s.threshold}; }
inline presets::cdlm_schedule policy(std::type_identity<presets::cdlm_schedule>, const settings& s) {
    return presets::cdlm_schedule{s.threshold};
}
inline dynamic_threshold_schedule policy(std::type_identity<dynamic_threshold_schedule>, const settings& s) {
    return {s.steps, s.threshold};
}
inline presets::llada2_schedule policy(std::type_identity<presets::llada2_schedule>, const settings& s) {
    return presets::llada2_schedule{s.steps, s.threshold};
}
inline sub_block_threshold_schedule policy(std::type_identity<sub_block_threshold_schedule>, const settings& s) {
    sub_block_threshold_schedule c;  // sub-blocks of 8 (Fast-dLLM v2's evaluation)
    c.threshold = s.threshold;
    return c;
}
inline cd4lm_schedule policy(std::type_identity<cd4lm_schedule>, const settings& s) {
    cd4lm_schedule c;
    c.tau = s.threshold;
    return c;
}

inline greedy_sampler policy(std::type_identity<greedy_sampler>, const settings&) { return {}; }
inline categorical_sampler policy(std::type_identity<categorical_sampler>, const settings& s) {
    return {s.temperature, s.top_k, s.top_p};
}
inline presets::sdar_sampler policy(std::type_identity<presets::sdar_sampler>, const settings& s) {
    return presets::sdar_sampler{s.temperature, s.top_k, s.top_p};
}
inline presets::llada_sampler policy(std::type_identity<presets::llada_sampler>, const settings& s) {
    return presets::llada_sampler{s.temperature, s.top_k, s.top_p};
}

}  // namespace detail

/// A decoder of type D over `model`, its policies configured from `s`.
template <class D>
[[nodiscard]] D make_decoder(typename D::model_type& model, const settings& s) {
    using detail::policy;
    return D(model, policy(std::type_identity<typename D::mask_type>{}, s), policy(std::type_identity<typename D::cache_type>{}, s),
             policy(std::type_identity<typename D::schedule_type>{}, s), policy(std::type_identity<typename D::sampler_type>{}, s));
}

/// One line describing the settings that matter for the preset ("cdlm: gen 48, block 8, threshold 0.9").
[[nodiscard]] inline std::string describe(const settings& s) {
    using P = preset_id;
    auto num = [](double d) {
        char b[32];
        std::snprintf(b, sizeof b, "%g", d);
        return std::string(b);
    };
    std::string out = std::string(name_of(s.preset)) + ": gen " + std::to_string(s.gen_length);
    if (s.has_blocks()) out += ", block " + std::to_string(s.block_length);
    if (s.preset == P::llada || s.preset == P::dream) out += ", steps " + std::to_string(s.steps) + ", " + std::string(name_of(s.alg));
    if (s.preset == P::dream) out += ", eps " + num(s.eps) + (s.alg_temp > 0 ? ", alg-temp " + num(s.alg_temp) : "");
    if (s.preset == P::sdar || s.preset == P::llada2) out += ", steps " + std::to_string(s.steps) + " per block";
    if (s.preset == P::fast_dllm_v2) out += ", sub-blocks of 8";
    if (s.preset == P::fast_dllm_v2_block_cache) out += ", sub-blocks of 8 with the sub-block cache";
    if (s.preset == P::fast_dllm || s.preset == P::fast_dllm_dual || s.preset == P::cdlm || s.preset == P::cd4lm || s.preset == P::sdar ||
        s.preset == P::fast_dllm_v2 || s.preset == P::fast_dllm_v2_block_cache || s.preset == P::llada2)
        out += ", threshold " + num(s.threshold);
    if (s.temperature > 0) out += ", temp " + num(s.temperature);
    if (s.top_k > 0) out += ", top-k " + std::to_string(s.top_k);
    if (s.top_p < 1) out += ", top-p " + num(s.top_p);
    return out;
}

}  // namespace dlm::cli
