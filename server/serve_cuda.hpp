// server/serve_cuda.hpp — dlm-server --device cuda (server/serve_cuda.cu, compiled by nvcc when CMake
// finds a CUDA compiler; DLM_SERVER_CUDA is defined then).
#pragma once

#include <string>

#include "cli/model.hpp"
#include "cli/options.hpp"
#include "http_server.hpp"

namespace dlm::server {

/// Loads the model folder onto the GPU and serves it with the chosen preset: through
/// dlm::cuda::device_decoder (sampling and selection on the GPU) when the preset's policies have a
/// device step, else through dlm::decoder on the GPU model (its logits brought to the host). The same
/// engine, scheduler and routes as on the CPU.
int serve_on_cuda(const cli::options& o, cli::loaded_model& m, const registry::settings& s, const std::string& model_id,
                  http::server& http);

}  // namespace dlm::server
