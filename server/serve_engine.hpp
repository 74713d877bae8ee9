// server/serve_engine.hpp — serve_engine (declared in server/serve.hpp): the scheduler, the routes
// and the drain around one any_engine. Included by dlm_server.cpp alone, which instantiates it once
// per model folder type; the CUDA translation unit only builds engines.
#pragma once

#include <chrono>
#include <cstdint>
#include <ctime>
#include <iostream>
#include <string>

#include <dlm/registry/describe.hpp>

#include "preset_rules.hpp"
#include "routes.hpp"
#include "serve.hpp"

namespace dlm::server {

template <class Loaded>
int serve_engine(const cli::options& o, registry::any_engine& eng, Loaded& m, const registry::settings& s, const std::string& model_id,
                 http::server& http) {
    metrics stats;
    stats.model_name = model_id;
    stats.batch_capacity = static_cast<std::size_t>(o.parallel);  // vllm:kv_cache_usage_perc: the batch's occupancy
    scheduler<registry::any_engine> sched(eng, {static_cast<std::size_t>(o.parallel), static_cast<std::size_t>(o.queue)}, &stats,
                                [threads = o.threads] { cli::set_threads(threads); });
    const bool steps_given = o.was_given("--steps");
    service<Loaded> svc{m,     eng,   s,     rules_for(s, steps_given, m.model.max_context(), model_id),
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
