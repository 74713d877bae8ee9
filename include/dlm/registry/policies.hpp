// dlm/registry/policies.hpp — what a preset's policies accept, read from the policy types, and the
// policies built from settings.
//
//   constexpr dlm::registry::accepted a = dlm::registry::accepted_by<dlm::presets::llada<M>>();
//   a.options.contains(dlm::registry::option::steps);   // true: llada_schedule has `steps`
//   auto d = dlm::registry::make_decoder<dlm::presets::llada<M>>(model, settings);
//
// Nothing here lists presets: an option is accepted when the policy type has the member it sets
// (a mask's `block_length`, a schedule's `steps`, `threshold` or `tau`, `eps`, `alg_temp`, `mode`
// or `alg`, a sampler's `temperature`, `top_k`, `top_p`), so a new policy with such a member takes
// the option with no change here, and its own default is the preset's default.
#pragma once

#include <type_traits>

#include "../decoder.hpp"
#include "../schedule/dream.hpp"
#include "../schedule/llada.hpp"
#include "settings.hpp"

namespace dlm::registry {

// The members that carry each option, tested on the policy types.
template <class M>
concept mask_takes_block_length = requires(M m) { m.block_length = index_t{}; };
template <class S>
concept schedule_takes_steps = requires(S s) { s.steps = index_t{}; };
template <class S>
concept schedule_takes_threshold = requires(S s) { s.threshold = 0.5; } || requires(S s) { s.tau = 0.5; };
template <class S>
concept schedule_takes_eps = requires(S s) { s.eps = 0.5; };
template <class S>
concept schedule_takes_editing_threshold = requires(S s) { s.editing_threshold = 0.5; };
template <class S>
concept schedule_takes_alg_temp = requires(S s) { s.alg_temp = 0.5; };
/// LLaDA's remasking (`mode`) or Dream's algorithm (`alg`).
template <class S>
concept schedule_remasks = requires(S s) { s.mode = remasking::low_confidence; };
template <class S>
concept schedule_ranks_by_alg = requires(S s) { s.alg = dream_alg::origin; };
template <class S>
concept sampler_draws = requires(S s) {
    s.temperature = 0.f;
    s.top_k = index_t{};
    s.top_p = 1.f;
};

/// The policy types of a decoder type, read without instantiating it.
template <class D>
struct policies_of;
template <class Model, class Mask, class Cache, class Schedule, class Sampler>
struct policies_of<decoder<Model, Mask, Cache, Schedule, Sampler>> {
    using mask = Mask;
    using cache = Cache;
    using schedule = Schedule;
    using sampler = Sampler;
};

/// What a preset's policies accept.
struct accepted {
    option_set options;                 ///< gen_length and seed always
    bool steps_in_all = false;          ///< steps count every forward (a multiple of the blocks); else per block
    bool steps_capped = false;          ///< steps cap each block's forwards, defaulting to the schedule's own (not the block length)
    std::array<bool, algorithm_names.size()> algorithms{};  ///< by algorithm, where `algorithm` is accepted
    [[nodiscard]] constexpr bool takes(option o) const noexcept { return options.contains(o); }
    [[nodiscard]] constexpr bool takes(registry::algorithm a) const noexcept { return algorithms[static_cast<std::size_t>(a)]; }
};

/// Read from the types of decoder D.
template <class D>
[[nodiscard]] constexpr accepted accepted_by() noexcept {
    using P = policies_of<D>;
    accepted a;
    a.options = {option::gen_length, option::seed};
    if constexpr (mask_takes_block_length<typename P::mask>) a.options.add(option::block_length);
    using S = typename P::schedule;
    if constexpr (schedule_takes_steps<S>) {
        a.options.add(option::steps);
        a.steps_in_all = schedule_step_count<S>() == step_count::in_all;
        a.steps_capped = schedule_step_count<S>() == step_count::capped;
    }
    if constexpr (schedule_takes_threshold<S>) a.options.add(option::threshold);
    if constexpr (schedule_takes_eps<S>) a.options.add(option::eps);
    if constexpr (schedule_takes_editing_threshold<S>) a.options.add(option::editing_threshold);
    if constexpr (schedule_takes_alg_temp<S>) a.options.add(option::alg_temp);
    if constexpr (schedule_remasks<S>) {
        a.options.add(option::algorithm);
        a.algorithms[static_cast<std::size_t>(algorithm::maskgit_plus)] = a.algorithms[static_cast<std::size_t>(algorithm::random)] = true;
    }
    if constexpr (schedule_ranks_by_alg<S>) {
        a.options.add(option::algorithm);
        for (algorithm x : {algorithm::origin, algorithm::maskgit_plus, algorithm::topk_margin, algorithm::entropy})
            a.algorithms[static_cast<std::size_t>(x)] = true;
    }
    if constexpr (sampler_draws<typename P::sampler>) {
        a.options.add(option::temperature);
        a.options.add(option::top_k);
        a.options.add(option::top_p);
    }
    return a;
}

namespace detail {

[[nodiscard]] constexpr remasking remasking_of(algorithm a) noexcept { return a == algorithm::random ? remasking::random : remasking::low_confidence; }
[[nodiscard]] constexpr algorithm algorithm_of(remasking r) noexcept { return r == remasking::random ? algorithm::random : algorithm::maskgit_plus; }
[[nodiscard]] constexpr dream_alg dream_alg_of(algorithm a) noexcept {
    return a == algorithm::maskgit_plus ? dream_alg::maskgit_plus : a == algorithm::topk_margin ? dream_alg::topk_margin
                                                                  : a == algorithm::entropy     ? dream_alg::entropy
                                                                                                : dream_alg::origin;
}
[[nodiscard]] constexpr algorithm algorithm_of(dream_alg d) noexcept {
    return d == dream_alg::maskgit_plus ? algorithm::maskgit_plus : d == dream_alg::topk_margin ? algorithm::topk_margin
                                                                  : d == dream_alg::entropy     ? algorithm::entropy
                                                                                                : algorithm::origin;
}

}  // namespace detail

/// Policy P (a mask, cache, schedule or sampler type), default-constructed, with every option it has
/// set from `s`.
template <class P>
[[nodiscard]] P make_policy(const settings& s) {
    P p{};
    if constexpr (mask_takes_block_length<P>) p.block_length = s.block_length;
    if constexpr (schedule_takes_steps<P>) p.steps = s.steps;
    if constexpr (requires { p.threshold = 0.5; }) p.threshold = s.threshold;
    else if constexpr (requires { p.tau = 0.5; }) p.tau = s.threshold;
    if constexpr (schedule_takes_eps<P>) p.eps = s.eps;
    if constexpr (schedule_takes_editing_threshold<P>) p.editing_threshold = s.editing_threshold;
    if constexpr (schedule_takes_alg_temp<P>) p.alg_temp = s.alg_temp;
    if constexpr (schedule_remasks<P>) p.mode = detail::remasking_of(s.alg);
    if constexpr (schedule_ranks_by_alg<P>) p.alg = detail::dream_alg_of(s.alg);
    if constexpr (sampler_draws<P>) {
        p.temperature = s.temperature;
        p.top_k = s.top_k;
        p.top_p = s.top_p;
    }
    return p;
}

/// A decoder of type D over `model`, its policies configured from `s`.
template <class D>
[[nodiscard]] D make_decoder(typename D::model_type& model, const settings& s) {
    return D(model, make_policy<typename D::mask_type>(s), make_policy<typename D::cache_type>(s), make_policy<typename D::schedule_type>(s),
             make_policy<typename D::sampler_type>(s));
}

/// The defaults of D's policies: what a default-constructed policy holds for each option it has,
/// written into `s` with source preset (options D lacks keep their values).
template <class D>
void read_policy_defaults(settings& s) {
    using P = policies_of<D>;
    const typename P::schedule sch{};
    const typename P::sampler smp{};
    if constexpr (requires { sch.threshold + 0.0; }) s.threshold = sch.threshold;
    else if constexpr (requires { sch.tau + 0.0; }) s.threshold = sch.tau;
    if constexpr (schedule_takes_eps<typename P::schedule>) s.eps = sch.eps;
    if constexpr (schedule_takes_steps<typename P::schedule>)
        if (schedule_step_count<typename P::schedule>() == step_count::capped) s.steps = sch.steps;
    if constexpr (schedule_takes_editing_threshold<typename P::schedule>) s.editing_threshold = sch.editing_threshold;
    if constexpr (schedule_takes_alg_temp<typename P::schedule>) s.alg_temp = sch.alg_temp;
    if constexpr (schedule_remasks<typename P::schedule>) s.alg = detail::algorithm_of(sch.mode);
    if constexpr (schedule_ranks_by_alg<typename P::schedule>) s.alg = detail::algorithm_of(sch.alg);
    if constexpr (sampler_draws<typename P::sampler>) {
        s.temperature = smp.temperature;
        s.top_k = smp.top_k;
        s.top_p = smp.top_p;
    }
    for (option o : {option::threshold, option::eps, option::alg_temp, option::algorithm, option::temperature, option::top_k, option::top_p,
                     option::editing_threshold})
        s.set_source(o, source::preset, "the preset's policy default");
}

}  // namespace dlm::registry
