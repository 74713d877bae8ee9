// server/serve_cuda.cu — dlm-server's GPU half (serve_cuda.hpp): the CUDA transformer, and each
// preset's decoder mapped to the device decoder where its policies have a device step.
#include <iostream>
#include <type_traits>

#include <dlm/cuda/device_decoder.cuh>
#include <dlm/cuda/transformer.cuh>

#include "serve.hpp"
#include "serve_cuda.hpp"

namespace dlm::server {

int serve_on_cuda(const cli::options& o, cli::loaded_model& m, const registry::settings& s, const std::string& model_id,
                  http::server& http) {
    cuda::transformer gpu = cuda::transformer::load(m.dir);
    return registry::visit<cuda::transformer>(registry::builtin, s.preset, [&]<class Decoder>(std::type_identity<Decoder>) {
        if constexpr (cuda::has_device_step<Decoder>) {
            std::cerr << "dlm-server: on the GPU, sampling and selecting there (dlm::cuda::device_decoder)" << std::endl;
            return serve<cuda::device_decoder_t<Decoder>>(o, gpu, m, s, model_id, http);
        } else {
            std::cerr << "dlm-server: on the GPU; this preset's schedule has no device step, so its logits are sampled on the host "
                         "(dlm::decoder)"
                      << std::endl;
            return serve<Decoder>(o, gpu, m, s, model_id, http);
        }
    });
}

}  // namespace dlm::server
