// dlm/registry/validate.hpp — the settings of a preset from the user's choices, the model's hints and
// the preset's policies, and the one check of settings against a preset.
//
//   dlm::registry::settings s = dlm::registry::resolve(dlm::registry::builtin, id, choices, hints);  // validated
//   dlm::registry::check_accepted(dlm::registry::builtin, id, choices);  // only: options the preset lacks
//
// Both throw dlm::invalid_parameter naming the option ("steps", "block_length", "threshold", ...,
// registry/settings.hpp); a `namer` turns an option into what the caller's user typed ("--steps",
// a request's "steps") for parameter() and the messages. The rules themselves are the policies':
// validate builds the preset's policies from the settings and runs the checks the engine runs when
// a sequence is added (the mask's block length, the schedule's and the sampler's validate), so an
// option is valid or not in one place.
#pragma once

#include <functional>
#include <string>

#include "../core/error.hpp"
#include "../core/layout.hpp"
#include "../mask/concept.hpp"
#include "../sampler/concept.hpp"
#include "../schedule/concept.hpp"
#include "policies.hpp"
#include "settings.hpp"
#include "table.hpp"

namespace dlm::registry {

/// How a caller calls an option in refusals (default: its registry name).
using option_namer = std::function<std::string(option)>;

[[nodiscard]] inline std::string default_name(option o) { return std::string(name_of(o)); }

/// The presets of `t` whose policies take option `o`, comma-separated ("fast-dllm, cdlm, ..."): what a
/// refusal lists, and what dlm-generate's --help lists for a flag.
template <class Table>
[[nodiscard]] std::string presets_taking(const Table& t, option o) {
    std::string out;
    for (std::size_t i = 0; i < Table::size; ++i)
        if (t.accepts(preset_id{i}).takes(o)) out += (out.empty() ? "" : ", ") + std::string(t.name_of(preset_id{i}));
    return out;
}

namespace detail {

/// Why a decoder refuses option `o` its policies lack ("its schedule has no threshold").
[[nodiscard]] constexpr const char* why_not_taken(option o) noexcept {
    return o == option::block_length                  ? "its mask has no blocks to size"
                      : o == option::steps                        ? "its schedule decides the number of forwards"
                      : o == option::threshold                    ? "its schedule has no threshold"
                      : o == option::eps                          ? "its schedule has no eps (Dream's timestep schedule has)"
                      : o == option::alg_temp                     ? "its schedule draws no slots with a temperature"
                      : o == option::algorithm                    ? "its schedule ranks slots by probability"
                      : o == option::editing_threshold            ? "its schedule never edits a filled slot"
                                                                  : "it samples greedily";
}

/// "does not apply to the cdlm preset (its schedule has no threshold); it applies to fast-dllm, ..."
template <class Table>
[[noreturn]] void refuse_option(const Table& t, preset_id id, option o, const option_namer& name) {
    const char* why = why_not_taken(o);
    const std::string where = presets_taking(t, o);
    throw invalid_parameter(name(o), "does not apply to the " + std::string(t.name_of(id)) + " preset (" + why + ")" +
                                         (where.empty() ? std::string() : "; it applies to " + where));
}

/// A setting and where it came from, for a message: "-n 20" (as the user typed it), "block length 8
/// (the model's dlm_block_length)".
inline std::string said(const settings& s, option o, const char* label, index_t value, const option_namer& name) {
    if (s.source_of(o) == source::user) return name(o) + " " + std::to_string(value);
    return std::string(label) + " " + std::to_string(value) + " (" + s.origin_of(o) + ")";
}

/// Runs `check`; an invalid_parameter it throws is rethrown naming the option as the caller does,
/// with `lengths` (where the generation and block lengths came from) after a rule about them.
template <class F>
void as_option(F&& check, const option_namer& name, const std::string& lengths) {
    try {
        check();
    } catch (const invalid_parameter& e) {
        const auto o = option_of_parameter(e.parameter());
        const bool about_lengths = o == option::block_length || o == option::steps || o == option::gen_length;
        throw invalid_parameter(o ? name(*o) : e.parameter(), e.rule() + (about_lengths ? lengths : std::string()));
    }
}

/// "; block length 8 (the model's dlm_block_length), generation length 48 (dlm's default)": where the
/// lengths a rule about them speaks of came from.
inline std::string lengths_said(const settings& s, const option_namer& name) {
    return "; " + said(s, option::block_length, "block length", s.block_length, name) + ", " +
           said(s, option::gen_length, "generation length", s.gen_length, name);
}

}  // namespace detail

/// The checks of one policy built from `s` (make_policy), as the engine runs them when a sequence is
/// added: a mask's block length against the generation length (returns the block length), a
/// schedule against a canvas of s.gen_length slots in blocks of `block`, a sampler's options.
template <class Mask>
index_t validate_mask(const settings& s, const option_namer& name = default_name) {
    if (s.gen_length < 1) throw invalid_parameter(name(option::gen_length), "must be >= 1, got " + std::to_string(s.gen_length));
    index_t block = 0;
    detail::as_option([&] { block = make_policy<Mask>(s).block_length_for(s.gen_length); }, name, detail::lengths_said(s, name));
    return block;
}
template <class Schedule>
void validate_schedule(const settings& s, index_t block, const option_namer& name = default_name) {
    const canvas_layout l{0, s.gen_length, block, true};  // the model's shift is the engine's to check
    detail::as_option([&] { schedule_validate(make_policy<Schedule>(s), l); }, name, detail::lengths_said(s, name));
}
template <class Sampler>
void validate_sampler(const settings& s, const option_namer& name = default_name) {
    detail::as_option([&] { sampler_validate(make_policy<Sampler>(s)); }, name, detail::lengths_said(s, name));
}
/// The three checks above for a decoder of these policies.
template <class Mask, class Schedule, class Sampler>
void validate_policies(const settings& s, const option_namer& name = default_name) {
    validate_schedule<Schedule>(s, validate_mask<Mask>(s, name), name);
    validate_sampler<Sampler>(s, name);
}

/// Refuses an option set in `c` that preset `id`'s policies do not have (a neutral value of a
/// sampling option passes), and an algorithm its schedule does not rank by.
template <class Table>
void check_accepted(const Table& t, preset_id id, const choices& c, const option_namer& name = default_name) {
    const accepted a = t.accepts(id);
    const option_set given = c.given();
    for (std::size_t i = 0; i < option_count; ++i)
        if (given.contains(static_cast<option>(i)) && !a.takes(static_cast<option>(i))) detail::refuse_option(t, id, static_cast<option>(i), name);
    if (c.alg && !a.takes(*c.alg)) {
        std::string ok;
        for (std::size_t i = 0; i < algorithm_names.size(); ++i)
            if (a.algorithms[i]) ok += (ok.empty() ? "" : ", ") + std::string(algorithm_names[i]);
        throw invalid_parameter(name(option::algorithm), "the " + std::string(t.name_of(id)) + " preset's schedule takes " + ok + ", not " +
                                                             std::string(name_of(*c.alg)));
    }
}

/// Checks settings `s` of preset s.preset: the options the user set that the preset lacks, then the
/// preset's policies, built from `s`, against a canvas of s.gen_length slots, as the engine checks
/// them (the block length must divide the generation length unless the mask aligns its blocks,
/// steps counted in all must be a multiple of the blocks, every value in its range). The model's
/// own checks (its context, its logits shift) wait for the engine.
template <class Table>
void validate(const Table& t, const settings& s, const choices& given = {}, const option_namer& name = default_name) {
    check_accepted(t, s.preset, given, name);
    visit<any_model>(t, s.preset, [&]<class D>(std::type_identity<D>) {
        using P = policies_of<D>;
        validate_policies<typename P::mask, typename P::schedule, typename P::sampler>(s, name);
    });
}

/// `c` without the options preset `id` lacks (an algorithm its schedule does not rank by included):
/// what a run of several presets with one set of choices applies to each (dlm-generate --compare).
template <class Table>
[[nodiscard]] choices accepted_only(const Table& t, preset_id id, choices c) {
    const accepted a = t.accepts(id);
    const auto keep = [&](option o, auto& v) {
        if (!a.takes(o)) v.reset();
    };
    keep(option::block_length, c.block_length);
    keep(option::steps, c.steps);
    keep(option::threshold, c.threshold);
    keep(option::eps, c.eps);
    keep(option::alg_temp, c.alg_temp);
    keep(option::algorithm, c.alg);
    if (c.alg && !a.takes(*c.alg)) c.alg.reset();
    keep(option::temperature, c.temperature);
    keep(option::top_k, c.top_k);
    keep(option::top_p, c.top_p);
    keep(option::editing_threshold, c.editing_threshold);
    return c;
}

/// Steps where neither the user nor the schedule's own cap fixed them: the generation length where
/// the schedule counts them in all (one slot per forward), the block length where it counts them per
/// block. Reads s.gen_length and s.block_length, so it follows whatever set those.
inline void default_steps(settings& s, const accepted& a) {
    s.steps = a.steps_in_all ? s.gen_length : s.block_length;
    s.set_source(option::steps, source::preset, a.steps_in_all ? "the generation length" : "the block length");
}

/// Every option after the canvas (steps and the policies' own) that `c` sets, laid over `s` with the
/// user as its source: the one place a user's choices enter settings, for dlm-generate's flags
/// (resolve) and the server's requests alike.
inline void apply_user_options(settings& s, const choices& c) {
    const auto user = [&](option o, auto& out, const auto& v) {
        if (v) out = *v, s.set_source(o, source::user, "");
    };
    user(option::steps, s.steps, c.steps);
    user(option::threshold, s.threshold, c.threshold);
    user(option::eps, s.eps, c.eps);
    user(option::alg_temp, s.alg_temp, c.alg_temp);
    user(option::algorithm, s.alg, c.alg);
    user(option::temperature, s.temperature, c.temperature);
    user(option::top_k, s.top_k, c.top_k);
    user(option::top_p, s.top_p, c.top_p);
    user(option::seed, s.seed, c.seed);
    user(option::editing_threshold, s.editing_threshold, c.editing_threshold);
}

namespace detail {

/// The options of `c` into `s` (whose policy defaults are read), as resolve describes: each option the
/// user set, else the model's hint, else what `s` holds; steps default by `a.steps_in_all`.
inline void apply_choices(settings& s, const accepted& a, const choices& c, const model_hints& h) {
    const auto pick = [&](option o, index_t& out, std::optional<index_t> user, index_t hint, const char* key, const char* library) {
        if (user) out = *user, s.set_source(o, source::user, "");
        else if (hint > 0) out = hint, s.set_source(o, source::model, std::string("the model's ") + key);
        else s.set_source(o, source::library, library);
    };
    pick(option::gen_length, s.gen_length, c.gen_length, h.gen_length, "dlm_gen_length", "dlm's default");
    pick(option::block_length, s.block_length, c.block_length, h.block_length, "dlm_block_length", "dlm's default");
    if (a.steps_capped) s.set_source(option::steps, source::preset, "the schedule's own cap per block");  // read_schedule_defaults set it
    else default_steps(s, a);
    apply_user_options(s, c);
}

}  // namespace detail

/// The settings of preset `id` for `c`: each option the user set, else the model's hint (generation
/// and block length), else the preset's policy's own default, else dlm's; steps default to the
/// generation length where the schedule counts them in all (one slot per forward) and to the block
/// length where it counts them per block. Validated (validate above).
template <class Table>
[[nodiscard]] settings resolve(const Table& t, preset_id id, const choices& c, const model_hints& h = {}, const option_namer& name = default_name) {
    settings s;
    s.preset = id;
    visit<any_model>(t, id, [&]<class D>(std::type_identity<D>) { read_policy_defaults<D>(s); });
    detail::apply_choices(s, t.accepts(id), c, h);
    validate(t, s, c, name);
    return s;
}

/// The block length preset s.preset decodes with: 1 for a causal mask, the generation length for one
/// bidirectional block, else the settings' (throws as validate does when it does not fit).
template <class Table>
[[nodiscard]] index_t effective_block_length(const Table& t, const settings& s) {
    return visit<any_model>(t, s.preset, [&]<class D>(std::type_identity<D>) {
        return make_policy<typename policies_of<D>::mask>(s).block_length_for(s.gen_length);
    });
}

}  // namespace dlm::registry
