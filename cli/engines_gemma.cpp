// cli/engines_gemma.cpp — the uniform-state preset's engine over DiffusionGemma, compiled once for
// dlm's programs (cli/engines.hpp), beside the transformer's (engines_transformer.cpp).
#include "engines.hpp"

template std::unique_ptr<dlm::registry::any_engine> dlm::registry::make_engine<dlm::cpu::diffusion_gemma>(dlm::cpu::diffusion_gemma&,
                                                                                                          const dlm::registry::settings&,
                                                                                                          const dlm::prompt_cache_options&);
