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

#include <concepts>
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

/// A policy whose options settings set (or that builds itself from them, P::from_settings): one a
/// sequence's own settings may change. Any other (a schedule calling a Python function) is the same
/// for every sequence, the decoder's own.
template <class P>
concept configured_by_settings =
    requires(const settings& s) {
        { P::from_settings(s) } -> std::same_as<P>;
    } || mask_takes_block_length<P> || schedule_takes_steps<P> || schedule_takes_threshold<P> || schedule_takes_eps<P> ||
    schedule_takes_editing_threshold<P> || schedule_takes_alg_temp<P> || schedule_remasks<P> || schedule_ranks_by_alg<P> || sampler_draws<P>;

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
    /// Each step of a block commits a share of its slots (LLaDA's): steps past a block's slot count
    /// would commit nothing, and the decoder skips them (the block ends with its last masked slot).
    bool steps_up_to_slots = false;
    std::array<bool, algorithm_names.size()> algorithms{};  ///< by algorithm, where `algorithm` is accepted
    [[nodiscard]] constexpr bool takes(option o) const noexcept { return options.contains(o); }
    [[nodiscard]] constexpr bool takes(registry::algorithm a) const noexcept { return algorithms[static_cast<std::size_t>(a)]; }
    /// What either accepts (a decoder's options are its policies' together).
    constexpr accepted& operator|=(const accepted& o) noexcept {
        for (std::size_t i = 0; i < option_count; ++i)
            if (o.takes(static_cast<option>(i))) options.add(static_cast<option>(i));
        steps_in_all = steps_in_all || o.steps_in_all;
        steps_capped = steps_capped || o.steps_capped;
        steps_up_to_slots = steps_up_to_slots || o.steps_up_to_slots;
        for (std::size_t i = 0; i < algorithms.size(); ++i) algorithms[i] = algorithms[i] || o.algorithms[i];
        return *this;
    }
};

/// What one policy type accepts on its own (no gen_length, no seed): the options its members carry.
/// A mask, cache, schedule or sampler: each test reads only the members of its own axis.
template <class P>
[[nodiscard]] constexpr accepted accepted_by_policy() noexcept {
    accepted a;
    if constexpr (mask_takes_block_length<P>) a.options.add(option::block_length);
    if constexpr (schedule_takes_steps<P>) {
        a.options.add(option::steps);
        a.steps_in_all = schedule_step_count<P>() == step_count::in_all;
        a.steps_capped = schedule_step_count<P>() == step_count::capped;
        if constexpr (requires { P::steps_up_to_slots; }) a.steps_up_to_slots = P::steps_up_to_slots;
    }
    if constexpr (schedule_takes_threshold<P>) a.options.add(option::threshold);
    if constexpr (schedule_takes_eps<P>) a.options.add(option::eps);
    if constexpr (schedule_takes_editing_threshold<P>) a.options.add(option::editing_threshold);
    if constexpr (schedule_takes_alg_temp<P>) a.options.add(option::alg_temp);
    if constexpr (schedule_remasks<P>) {
        a.options.add(option::algorithm);
        a.algorithms[static_cast<std::size_t>(algorithm::maskgit_plus)] = a.algorithms[static_cast<std::size_t>(algorithm::random)] = true;
    }
    if constexpr (schedule_ranks_by_alg<P>) {
        a.options.add(option::algorithm);
        for (algorithm x : {algorithm::origin, algorithm::maskgit_plus, algorithm::topk_margin, algorithm::entropy})
            a.algorithms[static_cast<std::size_t>(x)] = true;
    }
    if constexpr (sampler_draws<P>) {
        a.options.add(option::temperature);
        a.options.add(option::top_k);
        a.options.add(option::top_p);
    }
    return a;
}

/// What a decoder of these policies accepts: gen_length, seed and what each policy accepts.
template <class Mask, class Schedule, class Sampler>
[[nodiscard]] constexpr accepted accepted_by_policies() noexcept {
    accepted a;
    a.options = {option::gen_length, option::seed};
    a |= accepted_by_policy<Mask>();
    a |= accepted_by_policy<Schedule>();
    a |= accepted_by_policy<Sampler>();
    return a;
}

/// Read from the types of decoder D.
template <class D>
[[nodiscard]] constexpr accepted accepted_by() noexcept {
    using P = policies_of<D>;
    return accepted_by_policies<typename P::mask, typename P::schedule, typename P::sampler>();
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

/// A policy type with its options as members (a mask, cache, schedule or sampler type),
/// default-constructed, with every option it has set from `s`.
template <class P>
[[nodiscard]] P make_named_policy(const settings& s) {
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

/// Policy P, its options set from `s`: make_named_policy, or P::from_settings for a policy chosen at
/// run time (registry/compose.hpp).
template <class P>
[[nodiscard]] P make_policy(const settings& s) {
    if constexpr (requires { { P::from_settings(s) } -> std::same_as<P>; }) return P::from_settings(s);
    else return make_named_policy<P>(s);
}

/// A decoder of type D over `model`, its policies configured from `s`.
template <class D>
[[nodiscard]] D make_decoder(typename D::model_type& model, const settings& s) {
    return D(model, make_policy<typename D::mask_type>(s), make_policy<typename D::cache_type>(s), make_policy<typename D::schedule_type>(s),
             make_policy<typename D::sampler_type>(s));
}

/// The defaults of a schedule type: what a default-constructed one holds for each option it has,
/// written into `s` (options it lacks keep their values).
template <class Schedule>
void read_schedule_defaults(settings& s) {
    const Schedule sch{};
    if constexpr (requires { sch.threshold + 0.0; }) s.threshold = sch.threshold;
    else if constexpr (requires { sch.tau + 0.0; }) s.threshold = sch.tau;
    if constexpr (schedule_takes_eps<Schedule>) s.eps = sch.eps;
    if constexpr (schedule_takes_steps<Schedule>)
        if (schedule_step_count<Schedule>() == step_count::capped) s.steps = sch.steps;
    if constexpr (schedule_takes_editing_threshold<Schedule>) s.editing_threshold = sch.editing_threshold;
    if constexpr (schedule_takes_alg_temp<Schedule>) s.alg_temp = sch.alg_temp;
    if constexpr (schedule_remasks<Schedule>) s.alg = detail::algorithm_of(sch.mode);
    if constexpr (schedule_ranks_by_alg<Schedule>) s.alg = detail::algorithm_of(sch.alg);
}
/// The defaults of a sampler type, as read_schedule_defaults.
template <class Sampler>
void read_sampler_defaults(settings& s) {
    if constexpr (sampler_draws<Sampler>) {
        const Sampler smp{};
        s.temperature = smp.temperature;
        s.top_k = smp.top_k;
        s.top_p = smp.top_p;
    }
}
/// Marks the options the policies' defaults set as coming from the preset's policies.
inline void mark_policy_defaults(settings& s) {
    for (option o : {option::threshold, option::eps, option::alg_temp, option::algorithm, option::temperature, option::top_k, option::top_p,
                     option::editing_threshold})
        s.set_source(o, source::preset, "the preset's policy default");
}

/// The defaults of D's policies (read_schedule_defaults, read_sampler_defaults), with source preset.
template <class D>
void read_policy_defaults(settings& s) {
    read_schedule_defaults<typename policies_of<D>::schedule>(s);
    read_sampler_defaults<typename policies_of<D>::sampler>(s);
    mark_policy_defaults(s);
}

}  // namespace dlm::registry
