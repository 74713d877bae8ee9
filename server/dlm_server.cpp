// dlm-server — serves one model with one preset over HTTP, OpenAI-compatible (docs/server.md).
//
//   dlm-server                                   # the shipped CDLM student on 127.0.0.1:8080
//   dlm-server -m MODEL_DIR --preset llada --port 9000 --parallel 16
//   curl -s localhost:8080/v1/completions -d '{"prompt": "What is 3 + 4?"}'
//
// One engine thread runs the batch: requests join and leave it at forward boundaries; the HTTP
// layer's worker threads hand requests in through a bounded queue and wait for (or stream) their
// results, while its I/O thread reads every request under deadlines and size bounds and answers
// /health, /ready and /metrics itself (server/http_server.hpp). Flags are dlm-generate's (model,
// preset, decoding defaults) plus the server's (--host, --port, --parallel, --queue, --max-body,
// --timeout, --max-connections, --header-timeout, --body-timeout, --drain-timeout). The port is bound
// and /health answers before the model loads; "listening on" is printed once requests are served.
// SIGINT/SIGTERM drains (new requests 503, in-flight ones finish within --drain-timeout, then are
// cancelled). --device cuda runs the model on the GPU (server/serve_cuda.cu). Exit status: 0 after
// SIGINT/SIGTERM, 1 a dlm error (model, port, threads, GPU), 2 a bad flag.
#include <atomic>
#include <csignal>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <optional>
#include <type_traits>

#include <unistd.h>

#include <dlm/registry/describe.hpp>
#include <dlm/registry/table.hpp>

#include "cli/engines.hpp"
#include "serve.hpp"
#include "serve_engine.hpp"
#ifdef DLM_SERVER_CUDA
#include "serve_cuda.hpp"
#endif

// The HTTP service once per model folder type (serve_cuda.cu's engines call the first).
template int dlm::server::serve_engine<dlm::cli::loaded_model>(const dlm::cli::options&, dlm::registry::any_engine&, dlm::cli::loaded_model&,
                                                               const dlm::registry::settings&, const std::string&, dlm::server::http::server&);

namespace {

using namespace dlm;

server::http::server* running_server = nullptr;
using server::serving;

/// SIGINT/SIGTERM: before the model is loaded there is nothing to finish, so the process ends at
/// once; after, the server drains (a second signal ends the grace period).
extern "C" void on_signal(int) {
    if (!serving || !running_server) ::_exit(0);
    running_server->request_drain();
}

/// The HTTP layer's bounds from the flags: every request waiting in the queue or the batch holds a
/// worker thread, and a few more take the 429s while the queue is full.
server::http::server_limits http_limits(const cli::options& o) {
    server::http::server_limits l;
    l.parser.max_body = o.max_body;
    l.max_connections = o.max_connections;
    l.header_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o.header_timeout * 1000));
    l.body_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o.body_timeout * 1000));
    l.workers = static_cast<std::size_t>(o.parallel + o.queue) + 4;
    return l;
}

/// Serves the loaded folder `m` (the CPU transformer's, or DiffusionGemma's) with the preset the flags
/// or the model choose; the transformer also on the GPU with --device cuda.
template <class Model>
int serve_loaded(const cli::options& o, cli::basic_loaded_model<Model>& m, server::http::server& http) {
    registry::settings s;
    try {
        const cli::preset_choice chosen = cli::choose_preset(o, cli::model_preset(m));
        std::cerr << "dlm-server: preset " << cli::name_of(chosen.preset) << ", " << chosen.reason << std::endl;
        cli::check_fits<Model>(chosen.preset);  // uniform-state presets for DiffusionGemma, the others for the transformer
        s = cli::resolve(o, chosen.preset, m.hints);
    } catch (const invalid_parameter& e) {
        std::cerr << "dlm-server: " << e.what() << '\n';
        return 2;
    }
    if (m.chat == io::chat_format::unsupported)
        std::cerr << "dlm-server: note: " << m.dir.string() << "'s chat template is not one dlm writes: /v1/chat/completions "
                  << "answers 400; send prompts in the template's form to /v1/completions\n";
    const std::string model_id = !o.alias.empty() ? o.alias : cli::model_name(m.dir);
    if (o.device == "cuda") {
#ifdef DLM_SERVER_CUDA
        if constexpr (std::is_same_v<Model, cpu::transformer>) return server::serve_on_cuda(o, m, s, model_id, http);
        std::cerr << "dlm-server: --device cuda: the CUDA backend runs the transformer families; serve DiffusionGemma with --device cpu\n";
        return 2;
#else
        std::cerr << "dlm-server: --device cuda: this dlm-server was built without CUDA (CMake found no CUDA compiler); "
                     "rebuild where nvcc works, or serve with --device cpu\n";
        return 2;
#endif
    }
    const auto make = [&](const prompt_cache_options& cache) { return registry::make_engine(m.model, s, cache); };  // cli/engines.hpp
    return server::serve_made(o, make, m, s, model_id, http);
}

int run(const cli::options& o) {
    std::signal(SIGPIPE, SIG_IGN);  // a client that leaves mid-stream is a failed write, not a signal
    cli::set_threads(o.threads);
    // Bound first (a port in use, or threads that cannot start, end the program before the model
    // loads); /health answers and /ready says 503 while it loads.
    server::http::server http(http_limits(o), o.host, o.port);
    running_server = &http;
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    http.start();
    std::cerr << "dlm-server: port " << http.port() << " bound, loading the model (/ready answers 503 until it is served)" << std::endl;
    return cli::with_loaded_model(cli::resolve_model_dir(o), {o.dtype, o.kv}, [&](auto& m) { return serve_loaded(o, m, http); }, cli::load_bar_if(o.progress));
}

}  // namespace

int main(int argc, char** argv) {
    return dlm::cli::run_main(dlm::cli::program::server, "dlm-server", argc, argv, run);
}
