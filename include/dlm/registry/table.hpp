// dlm/registry/table.hpp — the preset table: each preset's name, description and decoder type, and
// the visitor that calls a generic function with the decoder type of a preset chosen at run time.
//
//   const dlm::registry::preset_id id = dlm::registry::builtin.find("fast-dllm").value();
//   auto r = dlm::registry::visit<Model>(dlm::registry::builtin, id, [&]<class D>(std::type_identity<D>) {
//       D d = dlm::registry::make_decoder<D>(model, settings);
//       return d.generate(prompts, {.gen_length = settings.gen_length, .seed = settings.seed});
//   });
//
// A program adds a preset with one line, its decoder an alias template over the model type
// (examples/custom_preset.cpp):
//
//   inline constexpr auto my_presets = dlm::registry::builtin.with(dlm::registry::preset<my_decoder>{"mine", "what it does"});
//
// What each preset accepts and its defaults are read from its policy types (registry/policies.hpp).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../core/error.hpp"
#include "../presets.hpp"
#include "policies.hpp"
#include "settings.hpp"

namespace dlm::registry {

/// A stand-in model type, to read a preset's policy types without a model (policies_of does not
/// instantiate the decoder).
struct any_model;

/// One row of a table: a decoder alias template and its name and description.
template <template <class> class Decoder>
struct preset {
    std::string_view name;         ///< its command-line name, hyphenated ("fast-dllm-v2")
    std::string_view description;  ///< one line: the reference it reproduces
    template <class Model>
    using decoder_type = Decoder<Model>;
    /// What its policies accept (registry/policies.hpp).
    static constexpr accepted accepts = accepted_by<Decoder<any_model>>();
};

/// A preset name with underscores spelled as hyphens ("fast_dllm" → "fast-dllm").
[[nodiscard]] inline std::string canonical_name(std::string_view s) {
    std::string n(s);
    std::replace(n.begin(), n.end(), '_', '-');
    return n;
}

/// A table of presets; a preset_id indexes it.
template <class... Presets>
class table {
public:
    static constexpr std::size_t size = sizeof...(Presets);
    static_assert(size > 0, "a preset table holds at least one preset");

    constexpr explicit table(Presets... p) : rows_(p...) {}

    /// This table with `more` presets after its own.
    template <class... More>
    [[nodiscard]] constexpr table<Presets..., More...> with(More... more) const {
        return std::apply([&](const Presets&... own) { return table<Presets..., More...>(own..., more...); }, rows_);
    }

    [[nodiscard]] constexpr std::string_view name_of(preset_id id) const { return names()[id.index]; }
    [[nodiscard]] constexpr std::string_view description_of(preset_id id) const {
        return std::apply([](const Presets&... p) { return std::array<std::string_view, size>{p.description...}; }, rows_)[id.index];
    }
    [[nodiscard]] constexpr std::array<std::string_view, size> names() const {
        return std::apply([](const Presets&... p) { return std::array<std::string_view, size>{p.name...}; }, rows_);
    }
    [[nodiscard]] static constexpr accepted accepts(preset_id id) {
        constexpr std::array<accepted, size> all{Presets::accepts...};
        return all[id.index];
    }
    /// A preset by name ("fast-dllm" or "fast_dllm").
    [[nodiscard]] std::optional<preset_id> find(std::string_view name) const {
        const std::string n = canonical_name(name);
        const auto all = names();
        for (std::size_t i = 0; i < size; ++i)
            if (all[i] == n) return preset_id{i};
        return std::nullopt;
    }
    /// A preset by a name known at compile time; an unknown name does not compile.
    [[nodiscard]] consteval preset_id id(std::string_view name) const {
        const auto all = names();
        for (std::size_t i = 0; i < size; ++i)
            if (all[i] == name) return preset_id{i};
        throw "no preset of that name in the table";
    }
    /// The names, comma-separated ("autoregressive, llada, ...").
    [[nodiscard]] std::string list() const {
        std::string s;
        for (auto n : names()) s += (s.empty() ? "" : ", ") + std::string(n);
        return s;
    }

    template <std::size_t I>
    using row = std::tuple_element_t<I, std::tuple<Presets...>>;

private:
    std::tuple<Presets...> rows_;
};

// clang-format off
/// dlm's presets (dlm/presets.hpp). A new preset is one row here plus its policies.
inline constexpr table builtin{
    preset<presets::autoregressive>{"autoregressive", "any autoregressive LM: causal mask, exact KV cache, next slot, greedy"},
    preset<presets::llada>{"llada", "LLaDA generate.py: semi-AR blocks, no cache, fixed steps per block, low-confidence remasking"},
    preset<presets::dream>{"dream", "Dream diffusion_generate: one bidirectional block, timestep schedule"},
    preset<presets::fast_dllm>{"fast-dllm", "Fast-dLLM v1: semi-AR blocks, approximate prefix cache, threshold"},
    preset<presets::fast_dllm_dual>{"fast-dllm-dual", "Fast-dLLM v1 with the dual cache (prefix and suffix)"},
    preset<presets::cdlm>{"cdlm", "CDLM: block-causal mask, exact block KV cache, threshold inside the block, early stop"},
    preset<presets::cd4lm>{"cd4lm", "CD4LM: semi-AR blocks, confidence-adaptive decoding"},
    preset<presets::sdar>{"sdar", "SDAR generate.py: aligned block-causal blocks, exact KV, low-confidence dynamic steps per block"},
    preset<presets::fast_dllm_v2>{"fast-dllm-v2", "Fast-dLLM v2: aligned blocks, exact block cache, sub-blocks of 8 with a threshold"},
    preset<presets::llada2>{"llada2", "LLaDA2.0: aligned block-causal blocks, exact KV, steps per block with threshold 0.95"},
    preset<presets::fast_dllm_v2_block_cache>{"fast-dllm-v2-block-cache", "Fast-dLLM v2 with its approximate sub-block cache"},
    preset<presets::llada21>{"llada21", "LLaDA 2.1 Quality mode: llada2's blocks with token editing (fill > 0.7, edit > 0.5, 16 post steps)"},
    preset<presets::llada21_s>{"llada21-s", "LLaDA 2.1 Speedy mode: token editing with fill > 0.5, edit > 0.0, 16 post steps"},
    preset<presets::cdlm_edit>{"cdlm-edit", "cdlm with LLaDA 2.1's token editing (fill > 0.9, edit > 0.9, 16 post steps): an experiment"},
    preset<presets::fast_dllm_edit>{"fast-dllm-edit", "fast-dllm with LLaDA 2.1's token editing (fill > 0.9, edit > 0.9, 16 post steps): an experiment"},
    preset<presets::diffusion_gemma>{"diffusion-gemma", "DiffusionGemma generate(): canvases denoised from uniform noise, entropy-bound acceptance, temperature ramp, stable-and-confident stop"},
};
// clang-format on

namespace detail {

/// A uniform-state model (`static constexpr bool uniform_state = true`: DiffusionGemma) runs only
/// uniform-state presets, and a masked-diffusion model only the others: the noise a block starts from
/// is what the model was trained to denoise.
template <class Model>
concept uniform_state_model = requires {
    requires Model::uniform_state;
};
/// (any_model, the registry's stand-in for reading policy types, fits every preset.)
template <class Model, class Row>
inline constexpr bool preset_fits_model =
    std::is_same_v<Model, any_model> ||
    uniform_state_model<Model> == uniform_state_schedule<typename policies_of<typename Row::template decoder_type<any_model>>::schedule>;

/// f called with the first row that fits Model (never reached at run time: it gives call_row's type).
template <class Model, std::size_t I, class Table, class F>
decltype(auto) visit_fitting(const Table& t, F&& f) {
    using Row = typename Table::template row<I>;
    if constexpr (preset_fits_model<Model, Row>) return std::forward<F>(f)(std::type_identity<typename Row::template decoder_type<Model>>{});
    else return visit_fitting<Model, I + 1>(t, std::forward<F>(f));
}

template <class Model, std::size_t I, class Table, class F>
decltype(auto) call_row(const Table& t, F&& f) {
    using Row = typename Table::template row<I>;
    if constexpr (preset_fits_model<Model, Row>) {
        return std::forward<F>(f)(std::type_identity<typename Row::template decoder_type<Model>>{});
    } else {  // the first fitting row gives the return type; this one is refused at run time
        constexpr bool uniform = uniform_state_model<Model>;
        throw invalid_parameter("preset", "'" + std::string(t.name_of(preset_id{I})) + "' " +
                                              (uniform ? "decodes masked-diffusion models, and this model is a uniform-state diffusion model "
                                                         "(its canvases start from random tokens): use diffusion-gemma"
                                                       : "denoises canvases of uniformly random tokens, which only a uniform-state diffusion "
                                                         "model (DiffusionGemma) was trained to do"));
        return visit_fitting<Model, 0>(t, std::forward<F>(f));
    }
}

template <class Model, std::size_t I, class Table, class F>
decltype(auto) visit_from(const Table& t, preset_id id, F&& f) {
    if constexpr (I + 1 == Table::size) {
        if (id.index != I)
            throw invalid_parameter("preset", "no preset " + std::to_string(id.index) + " in a table of " + std::to_string(Table::size));
        return call_row<Model, I>(t, std::forward<F>(f));
    } else {
        if (id.index == I) return call_row<Model, I>(t, std::forward<F>(f));
        return visit_from<Model, I + 1>(t, id, std::forward<F>(f));
    }
}

}  // namespace detail

/// Calls f(std::type_identity<D>{}) with D the decoder type of preset `id` of `t` for `Model`, and
/// returns what f returns (the same type for every preset). Throws dlm::invalid_parameter for an id
/// past the table, or a preset that does not fit the model (preset_fits_model: uniform-state presets
/// for uniform-state models only, and the others for the others); only fitting presets are instantiated.
template <class Model, class Table, class F>
decltype(auto) visit(const Table& t, preset_id id, F&& f) {
    return detail::visit_from<Model, 0>(t, id, std::forward<F>(f));
}

/// Throws dlm::invalid_parameter naming `preset` when preset `id` of `t` does not fit Model
/// (detail::preset_fits_model): the check a program makes before it resolves a preset's settings, so
/// that a model's own refusal comes first. Instantiates no decoder.
template <class Model, class Table>
void check_fits(const Table& t, preset_id id) {
    visit<Model>(t, id, []<class D>(std::type_identity<D>) { return 0; });
}

}  // namespace dlm::registry
