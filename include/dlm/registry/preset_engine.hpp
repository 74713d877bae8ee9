// dlm/registry/preset_engine.hpp — the engine of a preset chosen at run time, as a registry::any_engine:
// the one place a program that picks presets by name (dlm-generate, dlm-eval, dlm-bench-batch,
// dlm-server, the Python package) gets its engines from. A program may compile it once for its models
// (`extern template`, as dlm's own programs do in cli/engines.hpp) instead of in every translation unit.
//
//   auto eng = dlm::registry::make_engine(model, settings);              // settings.preset's decoder
//   dlm::decode_result r = dlm::run_to_end(*eng, prompts, {.gen_length = settings.gen_length});
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

#include "../core/error.hpp"
#include "any_engine.hpp"
#include "table.hpp"

namespace dlm::registry {

/// A new engine of preset s.preset of the builtin table over `model`, its decoder's policies
/// configured from `s` (make_decoder), with a prompt cache of `cache.bytes` when > 0. Throws
/// dlm::invalid_parameter naming `preset` for a preset that does not fit Model (visit), and naming
/// prompt_cache_bytes for a prompt cache the preset cannot keep exactly (dlm::engine's constructor).
/// Settings of policies composed by name (s.composed) are visit_composition's (registry/compose.hpp).
template <class Model>
[[nodiscard]] std::unique_ptr<any_engine> make_engine(Model& model, const settings& s, const prompt_cache_options& cache = {}) {
    if (s.composed) throw contract_error("dlm: registry::make_engine builds a preset's engine; policies composed by name are visit_composition's");
    return visit<Model>(builtin, s.preset, [&]<class D>(std::type_identity<D>) -> std::unique_ptr<any_engine> {
        return std::make_unique<engine_of<D>>(std::in_place, make_decoder<D>(model, s), cache);
    });
}

}  // namespace dlm::registry
