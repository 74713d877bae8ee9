// python/src/gemma_engine.cpp — the engine of DiffusionGemma's preset (any_engine.hpp's
// make_gemma_engine), kept out of module.cpp so the two compile in parallel.
#include "any_engine.hpp"

namespace dlm::python {

std::unique_ptr<any_engine> make_gemma_engine(cpu::diffusion_gemma& model, const registry::settings& s) {
    if (s.composed) throw invalid_parameter("mask", "DiffusionGemma decodes with its diffusion-gemma preset's policies, not policies named one by one");
    return registry::visit<cpu::diffusion_gemma>(registry::builtin, s.preset, [&]<class D>(std::type_identity<D>) -> std::unique_ptr<any_engine> {
        return std::make_unique<engine_of<D>>(std::in_place, registry::make_decoder<D>(model, s));
    });
}

}  // namespace dlm::python
