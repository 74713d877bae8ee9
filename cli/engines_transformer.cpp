// cli/engines_transformer.cpp — every masked-diffusion and autoregressive preset's engine over the CPU
// transformer, compiled once for dlm's programs (cli/engines.hpp).
#include "engines.hpp"

template std::unique_ptr<dlm::registry::any_engine> dlm::registry::make_engine<dlm::cpu::transformer>(dlm::cpu::transformer&,
                                                                                                      const dlm::registry::settings&,
                                                                                                      const dlm::prompt_cache_options&);
