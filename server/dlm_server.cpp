// dlm-server — serves one model with one preset over HTTP, OpenAI-compatible (docs/server.md).
//
//   dlm-server                                   # the shipped CDLM student on 127.0.0.1:8080
//   dlm-server -m MODEL_DIR --preset llada --port 9000 --parallel 16
//   curl -s localhost:8080/v1/completions -d '{"prompt": "What is 3 + 4?"}'
//
// One engine thread runs the batch: requests join and leave it at forward boundaries; HTTP threads
// hand requests in through a bounded queue and wait for (or stream) their results. Flags are
// dlm-generate's (model, preset, decoding defaults) plus the server's (--host, --port, --parallel,
// --queue, --max-body, --timeout). Exit status: 0 after SIGINT/SIGTERM, 1 a dlm error (model, port),
// 2 a bad flag or value.
#include <atomic>
#include <csignal>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <thread>

#include <sys/socket.h>

// The model's headers (Eigen) before httplib.h: it brings <resolv.h>, whose `_res` macro would
// rename a parameter of Eigen's.
#include "cli/model.hpp"
#include "cli/options.hpp"
#include "cli/presets.hpp"
#include "routes.hpp"

namespace {

using namespace dlm;

httplib::Server* running_server = nullptr;

extern "C" void on_signal(int) {
    if (running_server) running_server->stop();
}

/// Whether `preset`'s policies have the option of dlm-generate's `flag`, by the CLI's own rule (a flag
/// for a preset without the option is refused), so that requests follow exactly the flags' rules.
bool preset_has(cli::preset_id preset, const char* flag) {
    cli::options o;
    o.preset = preset;
    o.given[flag] = flag;
    o.temperature = 1.f;  // a non-neutral value: read only when the flag is --temp
    try {
        cli::detail::check_preset_flags(o);
        return true;
    } catch (const invalid_parameter&) {
        return false;
    }
}

/// What requests may set, from the preset and the model.
server::request_rules rules_for(const cli::settings& s, const cli::loaded_model& m, const std::string& model_id) {
    server::request_rules r;
    r.model = model_id;
    r.preset = std::string(cli::name_of(s.preset));
    r.has_threshold = preset_has(s.preset, "--threshold");
    r.has_steps = preset_has(s.preset, "--steps");
    r.steps_total = s.preset == cli::preset_id::llada || s.preset == cli::preset_id::dream;  // as cli::resolve checks them
    r.has_blocks = s.has_blocks();
    r.samples = preset_has(s.preset, "--temp");
    r.default_max_tokens = s.gen_length;
    r.max_max_tokens = m.model.max_context();
    r.block_length = s.block_length;
    return r;
}

template <class Decoder>
int serve(const cli::options& o, cli::loaded_model& m, const cli::settings& s, const std::string& model_id) {
    Decoder dec = cli::make_decoder<Decoder>(m.model, s);
    engine<Decoder> eng(dec);
    server::metrics stats;
    server::scheduler<engine<Decoder>> sched(eng, {static_cast<std::size_t>(o.parallel), static_cast<std::size_t>(o.queue)}, &stats,
                                             [threads = o.threads] { cli::set_threads(threads); });
    server::service<Decoder> svc{m, s, rules_for(s, m, model_id), sched, stats, std::chrono::duration<double>(o.timeout),
                                 static_cast<std::int64_t>(std::time(nullptr))};
    svc.steps_given = o.was_given("--steps");

    httplib::Server http;
    // Every request waiting in the queue or the batch holds an HTTP thread; a few more serve
    // /health, /metrics and the 429s while the batch is full.
    const std::size_t threads = static_cast<std::size_t>(o.parallel + o.queue) + 8;
    http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    http.set_payload_max_length(o.max_body);
    http.set_read_timeout(std::chrono::seconds(10));
    http.set_keep_alive_timeout(2);
    server::add_routes(http, svc);

    // cpp-httplib 0.11 listens with a backlog of 5 connections: 16 clients connecting at once overflow
    // it, and the kernel resets some of them. The listening socket passes through the socket-options
    // hook, so it is made to listen again with the system's limit once bound.
    int listening = -1;
    http.set_socket_options([&listening](int sock) {
        httplib::default_socket_options(sock);
        listening = sock;
    });
    const int port = o.port == 0 ? http.bind_to_any_port(o.host) : (http.bind_to_port(o.host, o.port) ? o.port : -1);
    if (port < 0) throw error("dlm-server: cannot listen on " + o.host + ":" + std::to_string(o.port) + " (in use, or not an address of this machine)");
    if (listening >= 0) ::listen(listening, SOMAXCONN);
    running_server = &http;
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    std::cout << "dlm-server: " << cli::describe(s) << ", model " << model_id << ", listening on http://" << o.host << ":" << port
              << std::endl;
    http.listen_after_bind();
    running_server = nullptr;
    sched.stop();
    std::cerr << "dlm-server: stopped" << std::endl;
    return 0;
}

int run(const cli::options& o) {
    std::signal(SIGPIPE, SIG_IGN);  // a client that leaves mid-stream is a failed write, not a signal
    cli::set_threads(o.threads);
    cli::loaded_model m = cli::load_model(cli::resolve_model_dir(o), o.dtype);
    cli::settings s;
    try {
        const cli::preset_choice chosen = cli::choose_preset(o, cli::model_preset(m));
        std::cerr << "dlm-server: preset " << cli::name_of(chosen.preset) << ", " << chosen.reason << std::endl;
        s = cli::resolve(o, chosen.preset, m.hints);
    } catch (const invalid_parameter& e) {
        std::cerr << "dlm-server: " << e.what() << '\n';
        return 2;
    }
    std::filesystem::path dir = std::filesystem::absolute(m.dir).lexically_normal();
    if (!dir.has_filename()) dir = dir.parent_path();
    const std::string model_id = !o.alias.empty() ? o.alias : dir.filename().string();
    return cli::with_preset<cpu::transformer>(s.preset, [&]<class Decoder>(std::type_identity<Decoder>) {
        return serve<Decoder>(o, m, s, model_id);
    });
}

}  // namespace

int main(int argc, char** argv) {
    return dlm::cli::run_main(dlm::cli::program::server, "dlm-server", argc, argv, run);
}
