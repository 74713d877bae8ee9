// dlm/registry/settings.hpp — the run-time options of every preset's policies, what a user chose of
// them, and the settings a decode runs with, each with where its value came from.
//
//   dlm::registry::choices c;           // what the user set (flags, a request's fields); unset: the default
//   c.threshold = 0.8;
//   dlm::registry::settings s = dlm::registry::resolve(dlm::registry::builtin, id, c, hints);
//
// The options are named as the engine's policies name them ("block_length", "steps", "threshold",
// ...): dlm::invalid_parameter carries these names, and the CLI and the server translate them to
// their flags and request fields.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "../core/config.hpp"
#include "../core/defaults.hpp"

namespace dlm::registry {

/// How a schedule ranks the slots it commits: Dream's four algorithms, and LLaDA's random remasking.
enum class algorithm { origin, maskgit_plus, topk_margin, entropy, random };
inline constexpr std::array<std::string_view, 5> algorithm_names = {"origin", "maskgit_plus", "topk_margin", "entropy", "random"};

[[nodiscard]] constexpr std::string_view name_of(algorithm a) noexcept { return algorithm_names[static_cast<std::size_t>(a)]; }

/// An algorithm by name or by llama.cpp's number: 0 origin, 1 entropy, 2 margin (topk_margin),
/// 3 random, 4 confidence (maskgit_plus). Also accepted: confidence / low_confidence, margin.
[[nodiscard]] inline std::optional<algorithm> algorithm_from_name(std::string_view s) {
    static constexpr std::pair<std::string_view, algorithm> table[] = {
        {"origin", algorithm::origin},           {"0", algorithm::origin},
        {"entropy", algorithm::entropy},         {"1", algorithm::entropy},
        {"topk_margin", algorithm::topk_margin}, {"margin", algorithm::topk_margin}, {"2", algorithm::topk_margin},
        {"random", algorithm::random},           {"3", algorithm::random},
        {"maskgit_plus", algorithm::maskgit_plus}, {"confidence", algorithm::maskgit_plus},
        {"low_confidence", algorithm::maskgit_plus}, {"4", algorithm::maskgit_plus},
    };
    for (const auto& [name, a] : table)
        if (name == s) return a;
    return std::nullopt;
}

/// The options a preset's policies may have. gen_length and seed belong to every decode.
/// editing_threshold is a revising schedule's (LLaDA 2.1's token editing: schedule/editing.hpp).
enum class option { gen_length, block_length, steps, threshold, eps, alg_temp, algorithm, temperature, top_k, top_p, seed, editing_threshold };
inline constexpr std::size_t option_count = 12;
inline constexpr std::array<std::string_view, option_count> option_names = {
    "gen_length", "block_length", "steps", "threshold", "eps", "alg_temp", "algorithm", "temperature", "top_k", "top_p", "seed",
    "editing_threshold"};

[[nodiscard]] constexpr std::string_view name_of(option o) noexcept { return option_names[static_cast<std::size_t>(o)]; }

/// The option a policy's parameter name stands for ("tau" is the threshold of threshold_schedule and
/// cd4lm_schedule), or nullopt for a parameter no option sets (sub_block, min_tokens, ...).
[[nodiscard]] inline std::optional<option> option_of_parameter(std::string_view parameter) {
    if (parameter == "tau") return option::threshold;
    for (std::size_t i = 0; i < option_count; ++i)
        if (option_names[i] == parameter) return static_cast<option>(i);
    return std::nullopt;
}

/// A set of options.
class option_set {
public:
    constexpr option_set() = default;
    constexpr option_set(std::initializer_list<option> os) {
        for (option o : os) add(o);
    }
    constexpr void add(option o) noexcept { bits_ |= bit(o); }
    [[nodiscard]] constexpr bool contains(option o) const noexcept { return (bits_ & bit(o)) != 0; }
    friend constexpr bool operator==(option_set, option_set) = default;

private:
    static constexpr unsigned bit(option o) noexcept { return 1u << static_cast<unsigned>(o); }
    unsigned bits_ = 0;
};

/// What the user set; an unset option takes the model's hint or the preset's default.
struct choices {
    std::optional<index_t> gen_length{}, block_length{}, steps{};
    std::optional<double> threshold{}, eps{}, alg_temp{};
    std::optional<registry::algorithm> alg{};
    std::optional<float> temperature{};
    std::optional<index_t> top_k{};
    std::optional<float> top_p{};
    std::optional<std::uint64_t> seed{};
    std::optional<double> editing_threshold{};

    /// The options set to a value that asks something of the policies. A neutral value of a
    /// sampling option (temperature 0, top_k 0, top_p 1) asks nothing, so every preset takes it.
    [[nodiscard]] option_set given() const noexcept {
        option_set s;
        if (gen_length) s.add(option::gen_length);
        if (block_length) s.add(option::block_length);
        if (steps) s.add(option::steps);
        if (threshold) s.add(option::threshold);
        if (eps) s.add(option::eps);
        if (alg_temp) s.add(option::alg_temp);
        if (alg) s.add(option::algorithm);
        if (temperature && *temperature != 0.f) s.add(option::temperature);
        if (top_k && *top_k != 0) s.add(option::top_k);
        if (top_p && *top_p != 1.f) s.add(option::top_p);
        if (seed) s.add(option::seed);
        if (editing_threshold) s.add(option::editing_threshold);
        return s;
    }
};

/// What a model folder says about how it was trained to be decoded (dlm's shipped models write
/// dlm_gen_length and dlm_block_length in config.json); 0 where it says nothing.
struct model_hints {
    index_t gen_length = 0;
    index_t block_length = 0;
};

/// Where a setting came from: the user, the model's config, the preset's policies (their own
/// defaults, or a rule of the registry such as "steps: the generation length"), or dlm's default.
enum class source { user, model, preset, library };

[[nodiscard]] constexpr std::string_view name_of(source s) noexcept {
    switch (s) {
        case source::user: return "user";
        case source::model: return "model";
        case source::preset: return "preset";
        case source::library: return "library";
    }
    return "?";
}

/// An index into a registry table (registry/table.hpp): a preset at run time.
struct preset_id {
    std::size_t index = 0;
    friend constexpr bool operator==(preset_id, preset_id) = default;
};

/// Four policies chosen by name from the policy name table (registry/policy_names.hpp), one per axis:
/// indices into its mask, cache, schedule and sampler lists (registry/compose.hpp).
struct composition {
    std::size_t mask = 0, cache = 0, schedule = 0, sampler = 0;
    friend constexpr bool operator==(const composition&, const composition&) = default;
};

/// Every run-time option of a preset's policies, resolved, and where each value came from. An option
/// the preset's policies lack keeps its default here and is not read.
struct settings {
    preset_id preset{};
    std::optional<registry::composition> composed{};  ///< set: the policies are these, not the preset's
    index_t gen_length = default_gen_length;
    index_t block_length = default_block_length;  ///< the mask's block option (presets without one: unused)
    index_t steps = default_gen_length;
    double threshold = 0.9;
    double eps = 1e-3;
    double alg_temp = 0.0;
    registry::algorithm alg = registry::algorithm::origin;
    float temperature = 0.f;
    index_t top_k = 0;
    float top_p = 1.f;
    std::uint64_t seed = 0;
    double editing_threshold = 0.5;
    std::array<source, option_count> sources{};  ///< indexed by option; value-initialized: user
    std::array<std::string, option_count> origins{};  ///< the key or the rule, in words ("" for the user's)

    [[nodiscard]] source source_of(option o) const noexcept { return sources[static_cast<std::size_t>(o)]; }
    [[nodiscard]] const std::string& origin_of(option o) const noexcept { return origins[static_cast<std::size_t>(o)]; }
    void set_source(option o, source s, std::string origin) {
        sources[static_cast<std::size_t>(o)] = s;
        origins[static_cast<std::size_t>(o)] = std::move(origin);
    }
};

}  // namespace dlm::registry
