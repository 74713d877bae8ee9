// cli/presets.hpp — the command line's view of the preset registry (dlm/registry/): settings from the
// flags, and from a preset's run-time name to its compile-time decoder type.
//
//   dlm::cli::settings s = dlm::cli::resolve(opts, preset, hints);
//   auto result = dlm::cli::with_preset<Model>(preset, [&]<class Decoder>(std::type_identity<Decoder>) {
//       Decoder d = dlm::cli::make_decoder<Decoder>(model, s);
//       return d.generate(prompts, {.gen_length = s.gen_length, .seed = s.seed});
//   });
//
// Everything about a preset (its name, its decoder type, what its policies accept, their defaults,
// whether a value is valid) is the registry's; this file only translates flags to the registry's
// choices and its refusals back to flags.
#pragma once

#include <string>
#include <type_traits>

#include <dlm/core/layout.hpp>
#include <dlm/registry/describe.hpp>
#include <dlm/registry/validate.hpp>

#include "options.hpp"

namespace dlm::cli {

using registry::model_hints;
using registry::settings;

/// The settings of `preset` from the flags, the model's hints and the preset's policies. Throws
/// dlm::invalid_parameter naming the flag as typed when the combination cannot decode (a block length
/// that does not divide the generation length, steps that are not a multiple of the blocks, a flag
/// the preset has no option for). Under --compare a flag applies to the presets that have its option.
[[nodiscard]] inline settings resolve(const options& o, preset_id preset, const model_hints& hints) {
    const registry::choices c = o.compare ? registry::accepted_only(registry::builtin, preset, detail::choices_of(o)) : detail::choices_of(o);
    return registry::resolve(registry::builtin, preset, c, hints, detail::flag_namer(o));
}

/// Calls f(std::type_identity<D>{}) with D the decoder type of `preset` for `Model`, and returns
/// what f returns (the same type for every preset).
template <class Model, class F>
decltype(auto) with_preset(preset_id preset, F&& f) {
    return registry::visit<Model>(registry::builtin, preset, std::forward<F>(f));
}

/// Throws dlm::invalid_parameter naming `flag` (the flag that chose the preset: --preset, or
/// --compare / --compare-presets) when `preset` does not fit Model (uniform-state presets decode
/// uniform-state models only, registry::preset_fits_model).
template <class Model>
void check_fits(preset_id preset, const std::string& flag = "--preset") {
    try {
        registry::check_fits<Model>(registry::builtin, preset);
    } catch (const invalid_parameter& e) {
        throw invalid_parameter(flag, e.rule());
    }
}

/// Throws dlm::invalid_parameter naming `name` (the preset as the caller's user spells it: "--preset",
/// Python's "preset") when preset s.preset's schedule cannot run on `model`'s logits shift: Fast-dLLM
/// v2's schedule commits a block's first slot from the previous block's last row, so fast-dllm-v2 and
/// fast-dllm-v2-block-cache need a model that predicts slot p from row p - 1. The schedule's own check
/// (its validate, run against a canvas with the model's shift) says why; the registry's resolve ran it
/// with a shifted canvas, so only the shift can fail here. A composition of policies (s.composed) is
/// checked when the engine adds a sequence.
template <class Model>
void check_fits_shift(const settings& s, const Model& model, const std::string& name) {
    if (s.composed) return;
    registry::visit<registry::any_model>(registry::builtin, s.preset, [&]<class D>(std::type_identity<D>) {
        using schedule_type = typename registry::policies_of<D>::schedule;
        const index_t block = registry::effective_block_length(registry::builtin, s);
        try {
            schedule_validate(registry::make_policy<schedule_type>(s), canvas_layout{0, s.gen_length, block, model.logits_shift()});
        } catch (const invalid_parameter& e) {
            throw invalid_parameter(name, "the " + std::string(name_of(s.preset)) + " preset does not fit this model (its logits are " +
                                              (model.logits_shift() ? "" : "not ") + "shifted): its schedule " + e.rule());
        }
    });
}

/// The engine's refusal of the generation length, named by what set it: -n as typed (run_main exits 2,
/// as for any bad value), or the model file's key (dlm_gen_length in config.json: a malformed file,
/// exit 1) when no flag gave it.
[[noreturn]] inline void refuse_gen_length(const options& o, const settings& s, const invalid_parameter& e) {
    if (s.source_of(registry::option::gen_length) == registry::source::model)
        throw invalid_parameter(s.origin_of(registry::option::gen_length), e.rule() + " (give -n for another length)");
    throw invalid_parameter(o.spelling("--gen-length"), e.rule());
}

/// f(), with the engine's refusal of the canvas named by what set it: "gen_length" (alone too long for
/// the model's context) as refuse_gen_length names it, "prompts[0]" (the prompt too long beside it) as -p.
template <class F>
decltype(auto) as_flags(const options& o, const settings& s, F&& f) {
    try {
        return f();
    } catch (const invalid_parameter& e) {
        if (e.parameter() == "gen_length") refuse_gen_length(o, s, e);
        if (e.parameter() == "prompts[0]") throw invalid_parameter(o.spelling("--prompt"), e.rule());
        throw;
    }
}

/// A decoder of type D over `model`, its policies configured from `s`.
template <class D>
[[nodiscard]] D make_decoder(typename D::model_type& model, const settings& s) {
    return registry::make_decoder<D>(model, s);
}

/// The block length of the decode (1 for autoregressive, gen_length for dream).
[[nodiscard]] inline index_t effective_block_length(const settings& s) { return registry::effective_block_length(registry::builtin, s); }

/// One line describing the settings that matter for the preset ("cdlm: gen 48, block 8, threshold 0.9").
[[nodiscard]] inline std::string describe(const settings& s) { return registry::describe(registry::builtin, s); }

}  // namespace dlm::cli
