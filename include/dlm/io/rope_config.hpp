// dlm/io/rope_config.hpp — the rotary-embedding keys of a Hugging Face config, as transformers 4.x and
// 5.x write them, read into one base frequency (theta), or refused by name.
//
//   transformers 4.x   top-level `rope_theta`; `rope_scaling`: null, or {"type" | "rope_type": ..., "factor": ...}
//   transformers 5.x   `rope_parameters`: {"rope_theta": ..., "rope_type": ...}, possibly one per layer type
//                      ({"full_attention": {...}, "sliding_attention": {...}}); a `rope_scaling` found in an
//                      old file is read as rope_parameters (RotaryEmbeddingConfigMixin.convert_rope_params_to_dict)
//
// dlm's transformers implement plain RoPE (rope_type "default", the whole head rotated). Every other
// rope type ("linear", "dynamic", "yarn", "longrope", "llama3", ...) and a partial_rotary_factor other
// than 1 are refused, naming the key and its value. When two keys give different thetas, the config is
// ambiguous (transformers 5 would silently prefer rope_parameters) and is refused, naming both.
#pragma once

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "config_reader.hpp"

namespace dlm::io {

/// The rotary base and where it came from ("config.json key 'rope_parameters.rope_theta'", or which
/// default applies and why).
struct rope_settings {
    double theta = 10000.0;
    std::string source;
};

/// The rotary bases dlm takes: above 1 (the frequencies theta^(-2i/d) fall with i) and at most
/// 1e12, so that every frequency is a normal f32 number (the smallest is above 1e-12) and no
/// position's angle is lost. A base outside, as 1e308 (whose f32 frequencies are all 0 but the
/// first: no position information, answers that silently degrade), is refused by the key.
inline constexpr double min_rope_theta = 1.0, max_rope_theta = 1e12;

/// Why `theta` cannot be a rotary base; empty when it can.
[[nodiscard]] inline std::string rope_theta_problem(double theta) {
    if (std::isfinite(theta) && theta > min_rope_theta && theta <= max_rope_theta) return {};
    return "must be a finite number above 1 and at most 1e12 (dlm's bound, so that every rotary frequency is a normal f32 "
           "number), got " + detail::json_quote(nlohmann::json(theta));
}

/// The largest rms_norm_eps dlm takes: an epsilon is a guard against division by zero, far below the
/// activations' mean square (1e-5, 1e-6 in the models dlm runs); one above 1 would swamp it.
inline constexpr double max_rms_norm_eps = 1.0;

namespace detail {

struct rope_theta_candidate {
    std::string key;
    double value;
};

/// Reads one rope dict (`key` names it: "rope_parameters", "rope_scaling", "rope_parameters.full_attention").
inline void read_rope_dict(const config_reader& r, const std::string& key, const nlohmann::json& d,
                           std::vector<rope_theta_candidate>& thetas) {
    if (!d.is_object()) r.fail(key, "expected an object (or null), found " + json_kind(d) + " " + json_quote(d));
    const auto member = [&](const char* name) -> const nlohmann::json* {
        const auto it = d.find(name);
        return it == d.end() || it->is_null() ? nullptr : &*it;
    };
    // transformers 4.x wrote "type", 5.x "rope_type"; both name the same thing.
    for (const char* type_key : {"rope_type", "type"}) {
        if (const nlohmann::json* t = member(type_key)) {
            if (!t->is_string()) r.fail(key + "." + type_key, "expected a string, found " + json_kind(*t) + " " + json_quote(*t));
            if (t->get<std::string>() != "default")
                r.fail(key + "." + type_key, json_quote(*t) + " is not supported: dlm implements plain RoPE only (rope type "
                                             "\"default\"); a scaled rope would give logits unlike the model's");
        }
    }
    if (const nlohmann::json* f = member("partial_rotary_factor")) {
        if (!f->is_number() || f->get<double>() != 1.0)
            r.fail(key + ".partial_rotary_factor", json_quote(*f) + " is not supported: dlm rotates the whole head (1.0)");
    }
    if (const nlohmann::json* t = member("rope_theta")) {
        if (!t->is_number()) r.fail(key + ".rope_theta", "expected a number, found " + json_kind(*t) + " " + json_quote(*t));
        const double v = t->get<double>();
        if (const std::string why = rope_theta_problem(v); !why.empty()) r.fail(key + ".rope_theta", why);
        thetas.push_back({key + ".rope_theta", v});
    }
}

/// Reads `rope_parameters` or `rope_scaling`: one dict, or one dict per layer type (transformers 5
/// nests them under the names of `layer_types`, e.g. "full_attention").
inline void read_rope_key(const config_reader& r, const char* key, std::vector<rope_theta_candidate>& thetas) {
    if (!r.has(key)) return;
    const nlohmann::json& d = r.object().at(key);
    if (!d.is_object()) r.fail(key, "expected an object (or null), found " + json_kind(d) + " " + json_quote(d));
    bool nested = !d.empty();
    for (const auto& [name, value] : d.items())
        nested = nested && value.is_object() && (name == "full_attention" || name == "sliding_attention");
    if (!nested) return read_rope_dict(r, key, d, thetas);
    for (const auto& [name, value] : d.items()) read_rope_dict(r, std::string(key) + "." + name, value, thetas);
}

/// The rope settings of a config. `family_default` is the theta transformers' configuration class of
/// the architecture uses when no key gives one, and `default_note` names that class.
[[nodiscard]] inline rope_settings parse_rope(const config_reader& r, double family_default, const std::string& default_note) {
    std::vector<rope_theta_candidate> thetas;
    if (r.has("rope_theta")) {
        const double v = r.number_or("rope_theta", family_default);
        if (const std::string why = rope_theta_problem(v); !why.empty()) r.fail("rope_theta", why);
        thetas.push_back({"rope_theta", v});
    }
    read_rope_key(r, "rope_parameters", thetas);
    read_rope_key(r, "rope_scaling", thetas);
    if (thetas.empty())
        return {family_default, "default " + json_quote(nlohmann::json(family_default)) + ": the config has no rope_theta, " +
                                    "rope_parameters.rope_theta or rope_scaling.rope_theta, and " + default_note};
    for (const auto& t : thetas)
        if (t.value != thetas.front().value)
            r.fail(thetas.front().key, json_quote(nlohmann::json(thetas.front().value)) + " conflicts with '" + t.key + "' " +
                                           json_quote(nlohmann::json(t.value)) + "; the rotary base must be given once, or the same everywhere");
    return {thetas.front().value, r.source() + " key '" + thetas.front().key + "'"};
}

}  // namespace detail

}  // namespace dlm::io
