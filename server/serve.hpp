// server/serve.hpp — dlm-server once its model is loaded: the engine of one preset's decoder on one
// model (a registry::any_engine: the CPU models' from cli/engines.hpp, compiled once; the CUDA
// transformer's from server/serve_cuda.cu, by serve<Decoder>), served by serve_engine
// (server/serve_engine.hpp), which is compiled once, in dlm_server.cpp, for every preset and device.
// Shared by both translation units.
#pragma once

#include <atomic>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <utility>

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

/// Serves the engine `make(cache)` builds for a prompt cache of --prompt-cache MiB (a
/// std::unique_ptr<registry::any_engine>); 2 for a prompt cache the preset cannot keep.
template <class Make, class Loaded>
int serve_made(const cli::options& o, Make&& make, Loaded& m, const registry::settings& s, const std::string& model_id, http::server& http) {
    std::unique_ptr<registry::any_engine> made;
    try {
        made = std::forward<Make>(make)(prompt_cache_options{.bytes = static_cast<std::uint64_t>(o.prompt_cache_mib) << 20});
    } catch (const invalid_parameter& e) {  // a prompt cache asked of a preset that cannot keep one exactly
        if (e.parameter() != "prompt_cache_bytes") throw;
        std::cerr << "dlm-server: --prompt-cache: " << e.what() << '\n';
        return 2;
    }
    return serve_engine(o, *made, m, s, model_id, http);
}

/// Serves `model` with the preset's decoder `Decoder` (its engine runs the decoder's stepper: the
/// host's, or the GPU's for dlm::cuda::device_decoder); 2 for a prompt cache the preset cannot keep.
/// The CPU models' engines come compiled from cli/engines.hpp instead (dlm_server.cpp).
template <class Decoder, class Loaded>
int serve(const cli::options& o, typename Decoder::model_type& model, Loaded& m, const registry::settings& s,
          const std::string& model_id, http::server& http) {
    const auto make = [&](const prompt_cache_options& cache) -> std::unique_ptr<registry::any_engine> {
        return std::make_unique<registry::engine_of<Decoder>>(std::in_place, registry::make_decoder<Decoder>(model, s), cache);
    };
    return serve_made(o, make, m, s, model_id, http);
}

}  // namespace dlm::server
