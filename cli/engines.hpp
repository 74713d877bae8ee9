// cli/engines.hpp — the engines of dlm's programs (dlm-generate, dlm-eval, dlm-bench-batch,
// dlm-server, the Python package): registry::make_engine (dlm/registry/preset_engine.hpp) for the CPU
// transformer and DiffusionGemma, compiled once in the dlm_cli library (cli/engines_transformer.cpp,
// cli/engines_gemma.cpp) rather than in each program. Every preset's decoder and engine are
// instantiated there; a program that includes this header instantiates none.
//
//   auto eng = dlm::registry::make_engine(m.model, settings);
//   dlm::sequence_result r = dlm::run_to_end(*eng, prompt, {.gen_length = settings.gen_length, .seed = settings.seed});
#pragma once

#include <memory>

#include <dlm/cpu/diffusion_gemma.hpp>
#include <dlm/cpu/transformer.hpp>
#include <dlm/registry/preset_engine.hpp>

namespace dlm::registry {

extern template std::unique_ptr<any_engine> make_engine<cpu::transformer>(cpu::transformer&, const settings&, const prompt_cache_options&);
extern template std::unique_ptr<any_engine> make_engine<cpu::diffusion_gemma>(cpu::diffusion_gemma&, const settings&,
                                                                               const prompt_cache_options&);

}  // namespace dlm::registry
