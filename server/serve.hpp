// server/serve.hpp — dlm-server once its model is loaded: one preset's decoder on one model (the CPU
// transformer or cpu::diffusion_gemma, or the CUDA transformer with --device cuda: server/serve_cuda.cu)
// made into a registry::engine_of<Decoder> (dlm/registry/any_engine.hpp), then served by serve_engine (server/serve_engine.hpp), which is
// compiled once, in dlm_server.cpp, for every preset and device. Shared by both translation units.
#pragma once

#include <atomic>
#include <cstdint>
#include <iostream>
#include <optional>
#include <string>

#include <dlm/registry/any_engine.hpp>
#include <dlm/registry/table.hpp>

#include "cli/model.hpp"
#include "cli/options.hpp"
#include "http_server.hpp"

namespace dlm::server {

/// True once requests are served (a signal then drains instead of ending the process).
inline std::atomic<bool> serving{false};

/// Serves the engine `eng` (of the preset settings `s` on the folder `m`: cli::basic_loaded_model, its
/// tokenizer, chat format and config) until a signal has drained the server; 0 then. Defined in
/// server/serve_engine.hpp, instantiated in dlm_server.cpp.
template <class Loaded>
int serve_engine(const cli::options& o, registry::any_engine& eng, Loaded& m, const registry::settings& s, const std::string& model_id,
                 http::server& http);

/// Serves `model` with the preset's decoder `Decoder` (its engine runs the decoder's stepper: the
/// host's, or the GPU's for dlm::cuda::device_decoder); 2 for a prompt cache the preset cannot keep.
template <class Decoder, class Loaded>
int serve(const cli::options& o, typename Decoder::model_type& model, Loaded& m, const registry::settings& s,
          const std::string& model_id, http::server& http) {
    Decoder dec = registry::make_decoder<Decoder>(model, s);
    std::optional<registry::engine_of<Decoder>> made;
    try {
        made.emplace(dec, prompt_cache_options{.bytes = static_cast<std::uint64_t>(o.prompt_cache_mib) << 20});
    } catch (const invalid_parameter& e) {  // a prompt cache asked of a preset that cannot keep one exactly
        std::cerr << "dlm-server: --prompt-cache: " << e.what() << '\n';
        return 2;
    }
    return serve_engine(o, *made, m, s, model_id, http);
}

}  // namespace dlm::server
