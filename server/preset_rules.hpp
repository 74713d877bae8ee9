// server/preset_rules.hpp — what a request may set, from the preset registry (dlm/registry/): the
// request's fields as the registry's choices, the settings a request decodes with, and the rules
// parse_request checks a request against.
//
//   dlm::server::request_rules rules = dlm::server::rules_for(base, steps_given, model.max_context(), "cdlm");
//   dlm::server::completion_request r = dlm::server::parse_request(body, kind, rules);  // 400 naming the field
//   dlm::registry::settings s = dlm::server::request_settings(base, steps_given, r);
//
// Whether an option applies to the preset and whether its value fits are the registry's validate
// (the policies' own checks), so a request is refused exactly where the flags are.
#pragma once

#include <algorithm>
#include <string>
#include <utility>

#include <dlm/registry/validate.hpp>
#include <dlm/server/request.hpp>

namespace dlm::server {

/// The decoding options a request sets, as the registry reads them.
[[nodiscard]] inline registry::choices choices_of(const completion_request& r) {
    registry::choices c;
    c.block_length = r.block_length;
    c.steps = r.steps;
    c.threshold = r.threshold;
    c.editing_threshold = r.editing_threshold;
    if (r.temperature) c.temperature = static_cast<float>(*r.temperature);
    if (r.top_p) c.top_p = static_cast<float>(*r.top_p);
    c.top_k = r.top_k;
    c.seed = r.seed;
    return c;
}

/// The settings of one request: the server's (from its flags and the model), with the request's
/// overrides laid over them as dlm-generate's flags are (registry::apply_user_options). Steps the
/// server's flags did not set follow the request's canvas (registry::default_steps: the generation
/// length, or the block length for steps per block).
[[nodiscard]] inline registry::settings request_settings(const registry::settings& base, bool steps_given, const completion_request& r) {
    using O = registry::option;
    registry::settings s = base;
    const registry::choices c = choices_of(r);
    s.gen_length = r.gen_length;
    s.set_source(O::gen_length, registry::source::user, "");
    if (c.block_length) s.block_length = *c.block_length, s.set_source(O::block_length, registry::source::user, "");
    if (const registry::accepted a = registry::builtin.accepts(s.preset); !steps_given && !a.steps_capped) registry::default_steps(s, a);
    registry::apply_user_options(s, c);
    return s;
}

/// Refuses a request's `steps` past what its canvas can use, for a schedule whose steps past a block's
/// slots are skipped (registry::accepted::steps_up_to_slots: llada): at most one per slot of the
/// canvas (registry::validate, run first, has made it whole blocks). dlm-generate runs them as
/// LLaDA's generate.py does (the skipped steps change nothing); a request is refused, not silently
/// clamped.
inline void check_steps_reachable(const registry::settings& s, const completion_request& q) {
    if (!q.steps || !registry::builtin.accepts(s.preset).steps_up_to_slots || s.block_length < 1) return;
    const index_t blocks = s.gen_length / s.block_length;
    if (*q.steps > s.gen_length)
        throw invalid_parameter("steps", "must be at most " + std::to_string(s.gen_length) + " for a canvas of " + std::to_string(s.gen_length) +
                                             " slots in " + std::to_string(blocks) + " blocks of " + std::to_string(s.block_length) +
                                             " (each forward commits at least one slot of its block; more steps would be skipped), got " +
                                             std::to_string(*q.steps));
}

/// What requests may set: the preset's options (checked by the registry), the model's context and
/// the server's defaults.
[[nodiscard]] inline request_rules rules_for(const registry::settings& base, bool steps_given, index_t max_context, std::string model_id) {
    request_rules r;
    r.model = std::move(model_id);
    r.preset = std::string(registry::builtin.name_of(base.preset));
    r.has_blocks = registry::builtin.accepts(base.preset).takes(registry::option::block_length);
    r.default_max_tokens = base.gen_length;
    r.max_context = max_context;
    r.max_max_tokens = std::min(max_context, max_slots);  // the programs' bound too (cli/bounds.hpp)
    r.block_length = base.block_length;
    r.check_options = [base, steps_given](const completion_request& q) {
        const registry::settings s = request_settings(base, steps_given, q);
        registry::validate(registry::builtin, s, choices_of(q));
        check_steps_reachable(s, q);
    };
    return r;
}

}  // namespace dlm::server
