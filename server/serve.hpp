// server/serve.hpp — dlm-server once its model is loaded: one preset's decoder on one model (the CPU
// transformer or cpu::diffusion_gemma, or the CUDA transformer with --device cuda: server/serve_cuda.cu), its engine and scheduler,
// the routes, and the drain at the end. Shared by both translation units of dlm-server.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <iostream>
#include <optional>
#include <string>

#include <dlm/registry/describe.hpp>
#include <dlm/registry/table.hpp>

#include "cli/model.hpp"
#include "cli/options.hpp"
#include "preset_rules.hpp"
#include "routes.hpp"

namespace dlm::server {

/// True once requests are served (a signal then drains instead of ending the process).
inline std::atomic<bool> serving{false};

/// Serves `model` with the preset's decoder `Decoder` (its engine runs the decoder's stepper: the
/// host's, or the GPU's for dlm::cuda::device_decoder) until a signal has drained the server.
/// `m` is the loaded model folder (cli::basic_loaded_model): its tokenizer, chat format and config (limits, EOS).
template <class Decoder, class Loaded>
int serve(const cli::options& o, typename Decoder::model_type& model, Loaded& m, const registry::settings& s,
          const std::string& model_id, http::server& http) {
    Decoder dec = registry::make_decoder<Decoder>(model, s);
    std::optional<engine<Decoder>> made;
    try {
        made.emplace(dec, prompt_cache_options{.bytes = static_cast<std::uint64_t>(o.prompt_cache_mib) << 20});
    } catch (const invalid_parameter& e) {  // a prompt cache asked of a preset that cannot keep one exactly
        std::cerr << "dlm-server: --prompt-cache: " << e.what() << '\n';
        return 2;
    }
    engine<Decoder>& eng = *made;
    metrics stats;
    stats.model_name = model_id;
    scheduler<engine<Decoder>> sched(eng, {static_cast<std::size_t>(o.parallel), static_cast<std::size_t>(o.queue)}, &stats,
                                     [threads = o.threads] { cli::set_threads(threads); });
    const bool steps_given = o.was_given("--steps");
    service<Decoder, Loaded> svc{m,     s,     rules_for(s, steps_given, m.model.max_context(), model_id),
                         sched, stats, std::chrono::duration<double>(o.timeout),
                         static_cast<std::int64_t>(std::time(nullptr))};
    svc.steps_given = steps_given;
    add_routes(http, svc);
    http.set_ready(true);
    serving = true;
    std::cout << "dlm-server: " << registry::describe(registry::builtin, s) << ", model " << model_id << ", listening on http://" << o.host
              << ":" << http.port() << std::endl;
    // Returns once a signal has asked for the drain and the requests in flight have finished (or
    // been cancelled after --drain-timeout: stopping the scheduler ends them with an error).
    http.wait_drained(std::chrono::duration<double>(o.drain_timeout), [&sched] { sched.stop(); });
    sched.stop();
    serving = false;  // a later signal ends the process at once
    std::cerr << "dlm-server: stopped" << std::endl;
    return 0;
}

}  // namespace dlm::server
