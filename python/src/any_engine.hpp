// python/src/any_engine.hpp — the engines Python picks by name, each a registry::any_engine
// (dlm/registry/any_engine.hpp, the interface dlm-server drives too): a preset's engine over the CPU
// transformer or DiffusionGemma, as every dlm program gets it (registry::make_engine, compiled once in
// dlm_cli: cli/engines.hpp); an engine whose schedule is a Python callable over the mask, cache and
// sampler of a preset (the registry's visitor, dlm/registry/table.hpp, instantiates one per preset
// here); or the composed decoder of four policies named in the policy name table (registry/compose.hpp:
// only its mask x cache pairs are instantiated, in composed_engine.cpp).
//
//   auto eng = dlm::python::make_engine(*model, settings, nullptr);         // the preset's own schedule
//   auto id = eng->add(prompt, {.gen_length = settings.gen_length, .seed = 7});
//   while (!eng->idle()) eng->step();
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <dlm/cpu/diffusion_gemma.hpp>
#include <dlm/cpu/transformer.hpp>
#include <dlm/engine.hpp>
#include <dlm/registry/any_engine.hpp>
#include <dlm/registry/compose.hpp>
#include <dlm/registry/policies.hpp>
#include <dlm/registry/table.hpp>

#include "cli/engines.hpp"
#include "py_model.hpp"
#include "py_schedule.hpp"

namespace dlm::python {

using registry::any_engine;
using registry::engine_of;
using registry::step_report;

/// The engine of composition s.composed over `model` (registry::visit_composition), its policies
/// configured from `s`. Compiled in its own translation unit (composed_engine.cpp): its decoder
/// types, one per mask x cache pair, build beside the presets' rather than after them.
[[nodiscard]] std::unique_ptr<any_engine> make_composed_engine(cpu::transformer& model, const registry::settings& s);

/// The engine of preset s.preset over the transformer `model`, its policies configured from `s`; with `fn`, the
/// preset's mask, cache and sampler and a schedule calling `fn` (stop_at_eos: CDLM's early stop).
/// With s.composed, the composed decoder of those four policies (registry/compose.hpp); a Python
/// schedule then is refused (it runs over a preset's policies). Throws dlm::invalid_parameter naming
/// "schedule" for a preset whose cache depends on its schedule's sub-blocks (fast-dllm-v2 and its
/// block-cache variant), which a Python schedule does not have.
[[nodiscard]] inline std::unique_ptr<any_engine> make_transformer_engine(cpu::transformer& model, const registry::settings& s,
                                                             std::shared_ptr<py_callable> fn, bool stop_at_eos = true) {
    using registry::builtin;
    if (s.composed) {
        if (fn) throw invalid_parameter("schedule", "a Python schedule runs over a preset's mask, cache and sampler: give a preset, not policy names");
        return make_composed_engine(model, s);
    }
    return registry::visit<cpu::transformer>(builtin, s.preset, [&]<class D>(std::type_identity<D>) -> std::unique_ptr<any_engine> {
        if (!fn) return registry::make_engine(model, s);  // compiled once, in dlm_cli (cli/engines.hpp)
        using P = registry::policies_of<D>;
        if constexpr (schedule_has_sub_block<typename P::schedule>) {
            throw invalid_parameter("schedule", "the " + std::string(builtin.name_of(s.preset)) +
                                                    " preset's cache follows its schedule's sub-blocks, which a Python schedule does not "
                                                    "have; use the mask and cache of another preset (cdlm, fast-dllm, llada, cd4lm, ...)");
        } else {
            using custom = decoder<cpu::transformer, typename P::mask, typename P::cache, py_schedule, typename P::sampler>;
            custom d(model, registry::make_policy<typename P::mask>(s), registry::make_policy<typename P::cache>(s), py_schedule{fn, stop_at_eos},
                     registry::make_policy<typename P::sampler>(s));
            return std::make_unique<engine_of<custom>>(std::in_place, std::move(d));
        }
    });
}

/// The engine of settings `s` over the folder `m` holds, whichever model it is (make_transformer_engine
/// or, for DiffusionGemma, registry::make_engine). DiffusionGemma refuses a Python schedule, naming "schedule": its steps redraw
/// every slot of the canvas, not a choice among masked slots.
[[nodiscard]] inline std::unique_ptr<any_engine> make_engine(py_model& m, const registry::settings& s, std::shared_ptr<py_callable> fn,
                                                             bool stop_at_eos = true) {
    return m.visit([&]<class Model>(cli::basic_loaded_model<Model>& folder) -> std::unique_ptr<any_engine> {
        if constexpr (std::is_same_v<Model, cpu::diffusion_gemma>) {
            if (fn)
                throw invalid_parameter("schedule", "DiffusionGemma is a uniform-state model: each step redraws every slot of its canvas, "
                                                    "so there is no choice among masked slots for a Python schedule to make; use its "
                                                    "diffusion-gemma preset");
            if (s.composed)
                throw invalid_parameter("mask", "DiffusionGemma decodes with its diffusion-gemma preset's policies, not policies named one by one");
            return registry::make_engine(folder.model, s);  // compiled once, in dlm_cli (cli/engines.hpp)
        } else {
            return make_transformer_engine(folder.model, s, std::move(fn), stop_at_eos);
        }
    });
}

}  // namespace dlm::python
