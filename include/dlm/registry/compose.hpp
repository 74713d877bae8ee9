// dlm/registry/compose.hpp — a decoder composed at run time from a mask, a cache, a schedule and a
// sampler named in the policy name table (registry/policy_names.hpp), checked as dlm::decoder checks
// its policies at compile time, and configured by the same options as a preset.
//
//   const dlm::registry::composition c = dlm::registry::compose("block_causal", "prefix", "threshold", "greedy");
//   dlm::registry::settings s = dlm::registry::resolve_composition(c, choices, hints);   // validated
//   dlm::registry::visit_composition<Model>(c, [&]<class D>(std::type_identity<D>) {
//       D d = dlm::registry::make_decoder<D>(model, s);
//       ...
//   });
//
// Only the mask and the cache are compile-time types of the composed decoder (the attention kernel is
// templated on the mask; the cache's exactness is a trait the decoder checks): its schedule and sampler
// are one std::variant each (schedule_choice, sampler_choice) over the table's rows, so a build
// instantiates a decoder per mask x cache pair the decoder accepts (and per revising or not), not per
// four policies. A pair the decoder refuses (dlm::detail::cache_fits_mask, cache_fits_revision: the same
// traits as its static_asserts) is refused here with dlm::invalid_parameter naming the axis.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

#include "../cache/compatibility.hpp"
#include "../core/error.hpp"
#include "policy_names.hpp"
#include "validate.hpp"

namespace dlm::registry {

/// A schedule chosen at run time among S... (the table's rows); models dlm::unmask_schedule by
/// forwarding every hook to the chosen one (revising_schedule_choice: revise and block_done too).
template <class... S>
struct schedule_choice_base {
    std::variant<S...> policy;

    void validate(const canvas_layout& l) const {
        std::visit([&](const auto& p) { schedule_validate(p, l); }, policy);
    }
    [[nodiscard]] bool suppress_eos(const step_context& ctx) const {
        return std::visit([&](const auto& p) { return schedule_suppresses_eos(p, ctx); }, policy);
    }
    [[nodiscard]] bool stop_after_block(const step_context& ctx, std::span<const token_id> block) const {
        return std::visit([&](const auto& p) { return schedule_stops_after_block(p, ctx, block); }, policy);
    }
    void select(const step_context& ctx, std::span<const candidate> c, std::vector<index_t>& chosen) const {
        std::visit([&](const auto& p) { p.select(ctx, c, chosen); }, policy);
    }
};

template <class... S>
struct schedule_choice : schedule_choice_base<S...> {
    /// The schedule of row s.composed->schedule, its options from `s`.
    static schedule_choice from_settings(const settings& s);
};

template <class... S>
struct revising_schedule_choice : schedule_choice_base<S...> {
    static revising_schedule_choice from_settings(const settings& s);
    void revise(const step_context& ctx, std::span<const filled_candidate> f, std::vector<index_t>& edits) const {
        std::visit([&](const auto& p) { p.revise(ctx, f, edits); }, this->policy);
    }
    [[nodiscard]] bool block_done(const step_context& ctx, const block_step& b) const {
        return std::visit([&](const auto& p) { return schedule_block_done(p, ctx, b); }, this->policy);
    }
};

/// A sampler chosen at run time among S...; models dlm::token_sampler.
template <class... S>
struct sampler_choice {
    std::variant<S...> policy;

    static sampler_choice from_settings(const settings& s);
    [[nodiscard]] slot_choice sample(std::span<const float> logits, const random_key& key, std::span<const token_id> banned) const {
        return std::visit([&](const auto& p) { return p.sample(logits, key, banned); }, policy);
    }
    void validate() const {
        std::visit([](const auto& p) { sampler_validate(p); }, policy);
    }
};

}  // namespace dlm::registry

namespace dlm {
/// A run-time choice of concurrent samplers is concurrent.
template <class... S>
inline constexpr bool enable_concurrent_sampling<registry::sampler_choice<S...>> = (sampler_is_concurrent<S> && ...);
}  // namespace dlm

namespace dlm::registry {

namespace detail {

/// Out<T...> with the T of `Tuple` whose revising_schedule is `Revising` (never a uniform-state
/// schedule: those decode uniform-state models, through their preset).
template <template <class...> class Out, bool Revising, class Tuple>
struct choice_of;
template <template <class...> class Out, bool Revising, class... T>
struct choice_of<Out, Revising, std::tuple<T...>> {
    template <class... U>
    static Out<U...> from(std::tuple<U...>);
    using type = decltype(from(std::tuple_cat(std::conditional_t<revising_schedule<T> == Revising && !uniform_state_schedule<T>, std::tuple<T>, std::tuple<>>{}...)));
};
template <template <class...> class Out, class Tuple>
struct all_of;
template <template <class...> class Out, class... T>
struct all_of<Out, std::tuple<T...>> {
    using type = Out<T...>;
};

/// The variant `Choice` holding row `row` of axis A's list built from `s` (Choice must have its type).
template <axis A, class Choice>
Choice choose(std::size_t row, const settings& s) {
    Choice out{};
    bool found = false;
    with_policy<A>(row, [&]<class P>(std::type_identity<P>) {
        if constexpr (requires { out.policy.template emplace<P>(); }) {
            out.policy.template emplace<P>(make_named_policy<P>(s));
            found = true;
        }
    });
    if (!found) throw contract_error("dlm::registry: no " + std::string(name_of(A)) + " of row " + std::to_string(row) + " in this composed decoder");
    return out;
}

[[nodiscard]] inline const composition& composed_of(const settings& s) {
    if (!s.composed) throw contract_error("dlm::registry: a composed policy needs settings of a composition (settings::composed)");
    return *s.composed;
}

}  // namespace detail

/// The composed decoder's schedule (the non-revising rows), revising schedule and sampler types.
using composed_schedule = detail::choice_of<schedule_choice, false, decltype(schedules)::types>::type;
using composed_revising_schedule = detail::choice_of<revising_schedule_choice, true, decltype(schedules)::types>::type;
using composed_sampler = detail::all_of<sampler_choice, decltype(samplers)::types>::type;

template <class... S>
schedule_choice<S...> schedule_choice<S...>::from_settings(const settings& s) {
    return detail::choose<axis::schedule, schedule_choice>(detail::composed_of(s).schedule, s);
}
template <class... S>
revising_schedule_choice<S...> revising_schedule_choice<S...>::from_settings(const settings& s) {
    return detail::choose<axis::schedule, revising_schedule_choice>(detail::composed_of(s).schedule, s);
}
template <class... S>
sampler_choice<S...> sampler_choice<S...>::from_settings(const settings& s) {
    return detail::choose<axis::sampler, sampler_choice>(detail::composed_of(s).sampler, s);
}

static_assert(unmask_schedule<composed_schedule> && !revising_schedule<composed_schedule>);
static_assert(unmask_schedule<composed_revising_schedule> && revising_schedule<composed_revising_schedule>);
static_assert(token_sampler<composed_sampler>);

/// Does row `row` of the schedule list revise filled slots?
[[nodiscard]] inline bool schedule_revises(std::size_t row) {
    bool r = false;
    with_policy<axis::schedule>(row, [&]<class S>(std::type_identity<S>) { r = revising_schedule<S>; });
    return r;
}

/// "block_causal + prefix + cdlm + greedy"
[[nodiscard]] inline std::string name_of(const composition& c) {
    return std::string(masks.name_of(c.mask)) + " + " + std::string(caches.name_of(c.cache)) + " + " +
           std::string(schedules.name_of(c.schedule)) + " + " + std::string(samplers.name_of(c.sampler));
}

/// Refuses, naming the axis, a composition dlm::decoder would not compile: an exact cache under a
/// mask whose committed K/V change (cache_fits_mask), a revising schedule with a cache that computes
/// one sub-block (cache_fits_revision). Rows past a list are refused too.
inline void check_composable(const composition& c) {
    const std::pair<axis, std::size_t> rows[] = {{axis::mask, c.mask}, {axis::cache, c.cache}, {axis::schedule, c.schedule}, {axis::sampler, c.sampler}};
    const std::size_t sizes[] = {masks.size, caches.size, schedules.size, samplers.size};
    for (const auto& [a, row] : rows)
        if (row >= sizes[static_cast<std::size_t>(a)])
            throw invalid_parameter(std::string(name_of(a)), "no row " + std::to_string(row) + " in the " + std::string(name_of(a)) + " list");
    with_policy<axis::schedule>(c.schedule, [&]<class S>(std::type_identity<S>) {
        if constexpr (uniform_state_schedule<S>)
            throw invalid_parameter("schedule", "the " + std::string(schedules.name_of(c.schedule)) + " schedule is uniform-state: it decodes "
                                                "uniform-state models (DiffusionGemma) through its preset, diffusion-gemma, not a composition");
    });
    const bool revising = schedule_revises(c.schedule);
    with_policy<axis::mask>(c.mask, [&]<class M>(std::type_identity<M>) {
        with_policy<axis::cache>(c.cache, [&]<class C>(std::type_identity<C>) {
            if (!dlm::detail::cache_fits_mask<C, M>)
                throw invalid_parameter("cache", "the " + std::string(caches.name_of(c.cache)) + " cache cannot serve the " +
                                                     std::string(masks.name_of(c.mask)) + " mask: " DLM_EXACT_CACHE_NEEDS_FINAL_KV("dlm.compose"));
            if (revising && !dlm::detail::cache_fits_revision<C, composed_revising_schedule>)
                throw invalid_parameter("cache", "the " + std::string(caches.name_of(c.cache)) + " cache cannot serve the revising " +
                                                     std::string(schedules.name_of(c.schedule)) + " schedule: " DLM_REVISION_NEEDS_WHOLE_BLOCK("dlm.compose"));
        });
    });
}

/// The composition of the named policies (names as in the table; "-" read as "_"), checked
/// (check_composable). An unknown name is refused naming its axis and listing the names.
[[nodiscard]] inline composition compose(std::string_view mask, std::string_view cache, std::string_view schedule, std::string_view sampler) {
    const auto row = [](const auto& list, std::string_view name) {
        if (auto i = list.find(name)) return *i;
        const std::string axis_name(registry::name_of(list.which));
        throw invalid_parameter(axis_name, "unknown " + axis_name + " '" + std::string(name) + "' (one of " + list.list() + ")");
    };
    const composition c{row(masks, mask), row(caches, cache), row(schedules, schedule), row(samplers, sampler)};
    check_composable(c);
    return c;
}

/// What a composition accepts: gen_length, seed and its mask's, schedule's and sampler's options.
[[nodiscard]] inline accepted accepted_by(const composition& c) {
    accepted a;
    a.options = {option::gen_length, option::seed};
    a |= masks.accepts(c.mask);
    a |= caches.accepts(c.cache);
    a |= schedules.accepts(c.schedule);
    a |= samplers.accepts(c.sampler);
    return a;
}

namespace detail {

/// The axis whose policies carry option `o`.
[[nodiscard]] constexpr axis axis_of(option o) noexcept {
    if (o == option::block_length) return axis::mask;
    if (o == option::temperature || o == option::top_k || o == option::top_p) return axis::sampler;
    return axis::schedule;
}

/// "masks that take it: block_causal, semi_ar, ..." (empty when none does).
template <class List>
std::string rows_taking(const List& list, option o) {
    std::string where;
    for (std::size_t i = 0; i < List::size; ++i)
        if (list.accepts(i).takes(o)) where += (where.empty() ? "" : ", ") + std::string(list.name_of(i));
    return where.empty() ? where : "; " + std::string(name_of(List::which)) + "s that take it: " + where;
}

}  // namespace detail

/// Refuses an option set in `c` that the composition's policies do not have, naming the axis that
/// would carry it and the rows of that axis that do, and an algorithm its schedule does not rank by.
inline void check_accepted(const composition& comp, const choices& c, const option_namer& name = default_name) {
    const accepted a = accepted_by(comp);
    const option_set given = c.given();
    for (std::size_t i = 0; i < option_count; ++i) {
        const auto o = static_cast<option>(i);
        if (!given.contains(o) || a.takes(o)) continue;
        std::string where;
        if (detail::axis_of(o) == axis::mask) where = detail::rows_taking(masks, o);
        else if (detail::axis_of(o) == axis::sampler) where = detail::rows_taking(samplers, o);
        else where = detail::rows_taking(schedules, o);
        throw invalid_parameter(name(o), "does not apply to the composition " + name_of(comp) + " (" + detail::why_not_taken(o) + ")" + where);
    }
    if (c.alg && !a.takes(*c.alg))
        throw invalid_parameter(name(option::algorithm), "the " + std::string(schedules.name_of(comp.schedule)) + " schedule does not rank by " +
                                                             std::string(name_of(*c.alg)));
}

/// Checks settings `s` of composition s.composed as validate (registry/validate.hpp) checks a
/// preset's: the options given that its policies lack, then each policy built from `s`, and a
/// sub-block cache against the schedule's sub-blocks.
inline void validate(const composition& comp, const settings& s, const choices& given = {}, const option_namer& name = default_name) {
    check_composable(comp);
    check_accepted(comp, given, name);
    index_t block = 0;
    with_policy<axis::mask>(comp.mask, [&]<class M>(std::type_identity<M>) { block = validate_mask<M>(s, name); });
    with_policy<axis::schedule>(comp.schedule, [&]<class S>(std::type_identity<S>) { validate_schedule<S>(s, block, name); });
    with_policy<axis::sampler>(comp.sampler, [&]<class S>(std::type_identity<S>) { validate_sampler<S>(s, name); });
    with_policy<axis::cache>(comp.cache, [&]<class C>(std::type_identity<C>) {
        if constexpr (cache_has_sub_block<C>)
            with_policy<axis::schedule>(comp.schedule, [&]<class S>(std::type_identity<S>) {
                dlm::detail::check_sub_blocks(make_named_policy<C>(s), make_named_policy<S>(s));
            });
    });
}

/// The settings of composition `comp` for `c`, as resolve (registry/validate.hpp) makes a preset's:
/// the user's options, else the model's hints, else the policies' own defaults. Validated.
[[nodiscard]] inline settings resolve_composition(const composition& comp, const choices& c, const model_hints& h = {},
                                                  const option_namer& name = default_name) {
    check_composable(comp);
    settings s;
    s.composed = comp;
    with_policy<axis::schedule>(comp.schedule, [&]<class S>(std::type_identity<S>) { read_schedule_defaults<S>(s); });
    with_policy<axis::sampler>(comp.sampler, [&]<class S>(std::type_identity<S>) { read_sampler_defaults<S>(s); });
    mark_policy_defaults(s);
    detail::apply_choices(s, accepted_by(comp), c, h);
    validate(comp, s, c, name);
    return s;
}

/// Calls f(std::type_identity<D>{}) with D the composed decoder type of `comp` for Model:
/// decoder<Model, its mask, its cache, composed_schedule or composed_revising_schedule, composed_sampler>.
/// Throws as check_composable for a composition the decoder refuses.
template <class Model, class F>
void visit_composition(const composition& comp, F&& f) {
    check_composable(comp);
    const bool revising = schedule_revises(comp.schedule);
    with_policy<axis::mask>(comp.mask, [&]<class M>(std::type_identity<M>) {
        with_policy<axis::cache>(comp.cache, [&]<class C>(std::type_identity<C>) {
            if constexpr (dlm::detail::cache_fits_mask<C, M>) {
                if (!revising) f(std::type_identity<decoder<Model, M, C, composed_schedule, composed_sampler>>{});
                else if constexpr (dlm::detail::cache_fits_revision<C, composed_revising_schedule>)
                    f(std::type_identity<decoder<Model, M, C, composed_revising_schedule, composed_sampler>>{});
            }
        });
    });
}

}  // namespace dlm::registry
