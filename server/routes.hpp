// server/routes.hpp — dlm-server's HTTP routes (on server/http_server.hpp): each request is parsed and checked
// (dlm/server/request.hpp), tokenized, handed to the engine thread (dlm/server/scheduler.hpp) and
// answered whole or streamed as server-sent events (dlm/server/response.hpp, text_stream.hpp).
// Compiled once for every preset: the engine is a registry::any_engine (dlm/registry/any_engine.hpp), whose
// decoder type dlm_server.cpp picks at start. The quick routes
// (/health, /ready, /metrics, /v1/models, unknown routes) are answered on the HTTP layer's I/O
// thread; the completions on a worker thread, which waits for (or streams) the engine's results.
#pragma once

#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "cli/model.hpp"
#include "http_server.hpp"
#include "preset_rules.hpp"

#include <dlm/engine.hpp>
#include <dlm/registry/any_engine.hpp>
#include <dlm/registry/policies.hpp>
#include <dlm/server/metrics.hpp>
#include <dlm/server/request.hpp>
#include <dlm/server/response.hpp>
#include <dlm/server/scheduler.hpp>
#include <dlm/server/text_stream.hpp>

namespace dlm::server {

/// What every route shares: the model folder (`Loaded`: cli::basic_loaded_model of the CPU model the
/// folder loaded as, whichever model the decoder runs), the engine, the server's settings and rules,
/// the engine's scheduler.
template <class Loaded = cli::loaded_model>
struct service {
    using scheduler_type = scheduler<registry::any_engine>;
    using job = typename scheduler_type::job;

    const Loaded& model;
    const registry::any_engine& engine;
    registry::settings base;     ///< the preset's settings from the flags and the model's hints
    request_rules rules;
    scheduler_type& sched;
    metrics& stats;
    std::chrono::duration<double> timeout;
    std::int64_t started_at = 0;  ///< Unix time, /v1/models' "created"
    std::atomic<std::uint64_t> next_id{0};
    bool steps_given = false;  ///< --steps was given: it stays the default whatever max_tokens is

    /// The decoder settings of one request: the server's, with the request's overrides.
    [[nodiscard]] registry::settings settings_for(const completion_request& r) const { return request_settings(base, steps_given, r); }

    [[nodiscard]] registry::any_engine::policies policies_for(const registry::settings& s) const { return engine.make_policies(s); }

    /// The answer's tokens that may be shown: before the first EOS, at most max_tokens.
    [[nodiscard]] std::span<const token_id> shown(std::span<const token_id> tokens, index_t max_tokens) const {
        const auto eos = model.model.eos_ids();
        std::size_t n = 0;
        while (n < tokens.size() && n < static_cast<std::size_t>(max_tokens) && std::find(eos.begin(), eos.end(), tokens[n]) == eos.end()) ++n;
        return tokens.first(n);
    }
    [[nodiscard]] std::string text_of(std::span<const token_id> tokens) const { return model.tokenizer.decode(tokens, true); }

    /// Where stop strings cut `answer` (the shown tokens): the tokens its client is billed for, through
    /// the one that completes the first stop string (tokens_through_stop, vLLM's count); nullopt when
    /// no stop string is in its text.
    [[nodiscard]] std::optional<std::size_t> stop_cut(std::span<const token_id> answer, const std::vector<std::string>& stop) const {
        if (std::string text = text_of(answer); !cut_at_stop(text, stop)) return std::nullopt;
        return tokens_through_stop(answer.size(), stop, [&](std::size_t k) { return text_of(answer.first(k)); });
    }
};

namespace detail {

[[nodiscard]] inline http::response json_response(int status, const nlohmann::json& body) {
    http::response r{status, "application/json", dump(body), {}};
    if (status == 429) r.headers.emplace_back("Retry-After", "1");
    return r;
}

inline void reply_error(http::exchange& ex, const request_error& e) { ex.reply(json_response(e.status(), error_body(e))); }

/// How the job ended, as the refusal to send (nullopt: it has a result to send).
template <class Job>
std::optional<request_error> refusal_of(const Job& j, endpoint kind) {
    switch (j.end) {
        case job_end::refused: return request_error(field_of(j.error_param, kind), j.error_message);
        case job_end::timed_out:
            return request_error("", "the request took longer than the server's --timeout", 504, "timeout_error", "timeout");
        case job_end::failed: return request_error("", "decoding failed: " + j.error_message, 500, "server_error");
        case job_end::finished:
            if (j.result && j.result->failed()) return request_error("", "decoding failed: " + j.result->message, 500, "server_error");
            return std::nullopt;
        case job_end::none: break;
    }
    return std::nullopt;
}

/// "stop": the answer ended (EOS) within max_tokens or at a stop string; "length": max_tokens ran out.
inline const char* finish_reason(const sequence_result& r, index_t max_tokens, bool stopped) {
    return stopped || (r.answer_length < static_cast<index_t>(r.tokens.size()) && r.answer_length <= max_tokens) ? "stop" : "length";
}

/// Frees job `j`'s sequence at the engine's next forward boundary.
template <class Service, class Job>
void cancel(Service& svc, Job& j) {
    j.cancel = true;
    svc.sched.poke();
}

/// The end of a response written in pieces: a response that did not complete (the client left)
/// cancels its sequence (499 in the metrics); either way the request and its latency are counted.
template <class Service, class Job>
auto on_release(Service& svc, std::shared_ptr<Job> j, std::string route, clock::time_point received) {
    return [&svc, j = std::move(j), route = std::move(route), received](bool success) {
        if (!success) cancel(svc, *j);
        svc.stats.request(route, success ? 200 : 499);
        svc.stats.latency.observe(std::chrono::duration<double>(clock::now() - received).count());
    };
}

}  // namespace detail

/// How often a response in progress looks for a client that has gone: a stream writes an SSE comment
/// (a write is what finds a closed connection there), a whole answer checks its socket.
inline constexpr auto heartbeat = std::chrono::milliseconds(100);

/// Counts one answered request by route and status, and its latency.
template <class Service>
void count_request(Service& svc, const std::string& route, clock::time_point received, int status) {
    svc.stats.request(route, status);
    svc.stats.latency.observe(std::chrono::duration<double>(clock::now() - received).count());
}

/// The refusal of a prompt that leaves no room for an answer in the model's context, naming it
/// (`prompt`, or `messages` on chat): `length` is "is 130 tokens", or "is more than 120 tokens" where
/// tokenizing stopped (prompt_bound).
[[nodiscard]] inline request_error no_room(endpoint kind, const std::string& length, index_t block, index_t context) {
    const std::string blocks = block > 1 ? " (whole blocks of " + std::to_string(block) + ")" : "";
    return request_error(kind == endpoint::chat ? "messages" : "prompt",
                         length + ", which leave no room for an answer" + blocks + " in the model's context of " + std::to_string(context));
}

/// The most tokens a prompt of request `r` may hold: one more leaves the context less than one
/// block (the smallest canvas), which fit_canvas refuses whatever max_tokens says. The request's
/// text is tokenized only so far (io::tokenizer::encode_at_most).
[[nodiscard]] inline std::size_t prompt_bound(const completion_request& r, const request_rules& rules) {
    const index_t block = detail::canvas_block(r, rules);
    return rules.max_context > block ? static_cast<std::size_t>(rules.max_context - block) : 0;
}

/// Fits the canvas to the model's context beside a prompt of `prompt_length` tokens. A request that
/// left max_tokens out gets the server's default cut to what fits (vLLM's default is the context
/// left); one that set it is refused naming it, with what would fit; a prompt that leaves no room is
/// refused naming it.
template <class Service>
void fit_canvas(const Service& svc, endpoint kind, completion_request& r, index_t prompt_length) {
    const request_rules& rules = svc.rules;
    const index_t room = std::min(rules.max_context - prompt_length, rules.max_max_tokens);
    if (r.gen_length <= room) return;
    const index_t block = detail::canvas_block(r, rules);
    const index_t fits = room > 0 ? room / block * block : 0;
    const std::string blocks = block > 1 ? " (whole blocks of " + std::to_string(block) + ")" : "";
    if (fits < 1) throw no_room(kind, "is " + std::to_string(prompt_length) + " tokens", block, rules.max_context);
    if (r.max_tokens_field.empty()) {
        // The largest canvas of whole blocks that fits and that the options allow: steps fixed by the
        // server's --steps must suit it (llada: a multiple of its blocks, at most its slots). The
        // default canvas passed these checks (parse_request), so a refusal here is the size's.
        std::string why;
        for (index_t g = fits; g >= block; g -= block) {
            detail::size_canvas(r, g, rules);
            try {
                if (rules.check_options) rules.check_options(r);
                return;
            } catch (const invalid_parameter& e) {
                why = e.what();
            }
        }
        throw request_error(kind == endpoint::chat ? "messages" : "prompt",
                            "is " + std::to_string(prompt_length) + " tokens, which leave " + std::to_string(fits) +
                                " slots of the model's context for an answer, and no canvas of whole blocks within them suits the "
                                "decoding options, the request's and the server's (" + why + ")");
    }
    const std::string canvas = r.gen_length != r.max_tokens ? " (a canvas of " + std::to_string(r.gen_length) + " slots" + blocks + ")" : "";
    throw request_error(r.max_tokens_field, "is " + std::to_string(r.max_tokens) + canvas + "; beside the prompt's " + std::to_string(prompt_length) +
                                                " tokens the model's context of " + std::to_string(rules.max_context) + " holds " + std::to_string(fits) +
                                                " at most");
}

/// Tokenizes request `r` into job `j` and sets the job's decoding options and what it publishes.
template <class Service>
void prepare_job(Service& svc, endpoint kind, completion_request& r, typename Service::job& j) {
    if (kind == endpoint::chat && svc.model.chat == io::chat_format::unsupported)
        throw request_error("messages", std::string(io::unsupported_chat_template_rule) + " (to /v1/completions)");
    if (r.prompt_ids) {
        j.prompt = std::move(*r.prompt_ids);
    } else {  // the tokenizer's own special tokens for a plain prompt (vLLM's add_special_tokens), as cli::encode_prompt
        const std::size_t most = prompt_bound(r, svc.rules);
        std::optional<std::vector<token_id>> ids = svc.model.tokenizer.encode_at_most(
            kind == endpoint::chat ? io::apply_chat_template(svc.model.chat, r.messages, true, r.thinking) : r.prompt, most,
            cli::adds_special_tokens(svc.model, kind == endpoint::chat));
        if (!ids) throw no_room(kind, "is more than " + std::to_string(most) + " tokens", detail::canvas_block(r, svc.rules), svc.rules.max_context);
        j.prompt = std::move(*ids);
    }
    fit_canvas(svc, kind, r, static_cast<index_t>(std::min<std::size_t>(j.prompt.size(), std::numeric_limits<index_t>::max())));
    const registry::settings s = svc.settings_for(r);
    j.options.gen_length = s.gen_length;
    j.options.seed = s.seed;  // a request without one draws the next of --seed's sequence when the engine takes it
    j.draw_seed = !r.seed;
    j.policies = svc.policies_for(s);
    j.want_updates = r.stream || !r.stop.empty();  // a whole answer is watched for its stop strings too
    j.want_canvas = r.stream_canvas;
    j.max_tokens = static_cast<std::size_t>(r.max_tokens);
    const auto eos = svc.model.model.eos_ids();  // where shown() cuts the answer, for the metrics
    j.eos_ids.assign(eos.begin(), eos.end());
    if (!r.stop.empty()) j.billed = [&svc, stop = r.stop](std::span<const token_id> answer) { return svc.stop_cut(answer, stop); };
}

/// Waits until job `j` has joined the batch or ended. A queued job may wait long (for a place, or for
/// memory: scheduler.hpp), so every `heartbeat` the worker asks the socket whether its client has gone,
/// as reply_whole does; then it cancels the job (the scheduler drops it from the queue) and returns false.
template <class Service, class Job>
bool wait_joined(Service& svc, http::exchange& ex, Job& j) {
    for (;;) {
        {
            std::unique_lock lock(j.m);
            if (j.cv.wait_until(lock, clock::now() + heartbeat, [&] { return j.joined || j.ended(); })) return true;
        }
        if (ex.peer_gone()) {
            detail::cancel(svc, j);
            return false;
        }
    }
}

/// Parses, checks and tokenizes a completion request into job `j`, submits it and waits until it has
/// joined the batch. A refusal (the request's own, a full queue, the engine's) is answered here with
/// its status, a client that left while it waited is counted 499; then it returns false.
template <class Service>
bool admit_completion(Service& svc, endpoint kind, const http::request& req, http::exchange& ex, completion_request& r,
                      const std::shared_ptr<typename Service::job>& j, const std::string& route, clock::time_point received) {
    try {
        r = parse_request(req.body, kind, svc.rules);
        prepare_job(svc, kind, r, *j);
        j->received = received;
        j->deadline = received + std::chrono::duration_cast<clock::duration>(svc.timeout);
        if (!svc.sched.submit(j))
            throw request_error("", "the server is busy: its " + std::to_string(svc.sched.limits().max_active) + " running and " +
                                        std::to_string(svc.sched.limits().max_queue) + " waiting places (--parallel, --queue) are taken; retry later",
                                429, "rate_limit_error", "queue_full");
        // Wait until it joins the batch (or is refused), so that a refusal still gets its status.
        if (!wait_joined(svc, ex, *j)) {  // its client left while it waited
            ex.abandon(499);
            count_request(svc, route, received, 499);
            return false;
        }
        {
            const std::lock_guard lock(j->m);
            if (auto e = detail::refusal_of(*j, kind)) throw *e;
        }
    } catch (const request_error& e) {
        count_request(svc, route, received, e.status());
        detail::reply_error(ex, e);
        return false;
    } catch (const invalid_parameter& e) {  // a policy option the engine's policies refuse while being built
        count_request(svc, route, received, 400);
        detail::reply_error(ex, request_error(field_of(e.parameter(), kind), e.rule()));
        return false;
    }
    return true;
}

/// The body of a whole answer of `answer` (its shown tokens), the sequence's `result` (null: a stop
/// string in the committed prefix ended it before the engine did). Counts the billed tokens in the metrics.
template <class Service>
nlohmann::json whole_body(Service& svc, const typename Service::job& j, const completion_request& r, const response_head& head,
                          std::span<const token_id> answer, const sequence_result* result) {
    const std::optional<std::size_t> cut = svc.stop_cut(answer, r.stop);
    std::string text = svc.text_of(answer);
    if (cut) cut_at_stop(text, r.stop);
    const std::size_t billed = cut.value_or(answer.size());
    svc.stats.completion_tokens += billed;
    const char* reason = cut || !result ? "stop" : detail::finish_reason(*result, r.max_tokens, false);
    return completion_body(head, text, reason, {static_cast<std::int64_t>(j.prompt.size()), static_cast<std::int64_t>(billed)});
}

/// A non-streamed answer, with its own status once it is ready. While it waits, the worker checks
/// every 100 ms whether the client has closed its connection (http::exchange::peer_gone), so a client
/// that leaves frees its sequence at once; with stop strings it also watches the committed prefix and
/// ends the sequence at the first one.
template <class Service>
void reply_whole(Service& svc, http::exchange& ex, const std::shared_ptr<typename Service::job>& j,
                 const completion_request& r, const response_head& head, const std::string& route, clock::time_point received) {
    std::uint64_t seen = 0;
    for (;;) {
        std::unique_lock lock(j->m);
        const bool news = j->wait_update(lock, seen, clock::now() + heartbeat);
        seen = j->version;
        std::optional<std::pair<int, nlohmann::json>> reply;
        if (j->ended()) {
            if (auto e = detail::refusal_of(*j, head.kind)) reply.emplace(e->status(), error_body(*e));
            else reply.emplace(200, whole_body(svc, *j, r, head, svc.shown(j->result->tokens, r.max_tokens), &*j->result));
        } else if (news && !r.stop.empty()) {
            const std::span<const token_id> answer = svc.shown(j->prefix, r.max_tokens);
            if (const std::optional<std::size_t> cut = svc.stop_cut(answer, r.stop)) {  // a stop string ended the answer: free the sequence now
                j->stop_tokens = *cut;
                j->stop_string = true;
                detail::cancel(svc, *j);
                reply.emplace(200, whole_body(svc, *j, r, head, answer, nullptr));
            }
        }
        lock.unlock();
        if (reply) {
            count_request(svc, route, received, reply->first);  // before the client can read it (and scrape /metrics)
            ex.reply(detail::json_response(reply->first, reply->second));
            return;
        }
        if (ex.peer_gone()) {
            detail::cancel(svc, *j);
            ex.abandon(499);
            count_request(svc, route, received, 499);
            return;
        }
    }
}

/// A streamed answer: server-sent events as the committed prefix grows.
template <class Service>
void reply_stream(Service& svc, http::exchange& ex, const std::shared_ptr<typename Service::job>& j,
                  const completion_request& r, const response_head& head, const std::string& route, clock::time_point received) {
    // Streamed: text goes out as the committed prefix grows; a heartbeat comment every 100 ms without
    // news finds a client that has gone (the second write after its close fails), which cancels the
    // sequence within about 0.2 s.
    struct stream_state {
        text_stream text;
        std::uint64_t seen = 0;
        bool first = true, first_text = true;
        bool counted = false;  ///< the request is in dlm_requests_total (before its [DONE] is written)
        clock::time_point last_write = clock::now();
    };
    auto st = std::make_shared<stream_state>(stream_state{text_stream(r.stop)});
    const bool stream_sent = ex.stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}}, [&svc, j, st, r, head, route, received](http::sink& sink) {
            const auto send = [&](const std::string& s) {
                st->last_write = clock::now();
                return sink.write(s.data(), s.size());
            };
            std::vector<token_id> prefix, canvas;
            std::int64_t forwards = 0;  // the engine thread writes j->forwards under j->m too
            bool ended = false, updated = false;
            {
                std::unique_lock lock(j->m);
                updated = j->wait_update(lock, st->seen, clock::now() + heartbeat);
                st->seen = j->version;
                ended = j->ended();
                prefix = j->prefix;
                canvas = j->canvas;
                forwards = j->forwards;
            }
            bool ok = true;
            if (updated && j->want_canvas && !canvas.empty()) {
                std::vector<std::optional<std::string>> slots;
                for (const token_id t : canvas)
                    slots.push_back(t == svc.model.model.mask_id() ? std::nullopt
                                                                   : std::optional(svc.model.tokenizer.decode(std::span(&t, 1), false)));
                ok = send(sse_event(canvas_body(head, forwards, slots)));
            }
            const std::span<const token_id> answer = svc.shown(prefix, r.max_tokens);
            const std::string piece = st->text.advance(svc.text_of(answer), ended && !detail::refusal_of(*j, head.kind));
            if (ok && (!piece.empty() || (st->first && head.kind == endpoint::chat))) {
                if (!piece.empty() && st->first_text) {
                    svc.stats.first_text.observe(std::chrono::duration<double>(clock::now() - received).count());
                    st->first_text = false;
                }
                ok = send(sse_event(chunk_body(head, piece, std::nullopt, st->first)));
                st->first = false;
            }
            if (ok && (ended || st->text.stopped())) {
                const std::size_t billed = st->text.stopped() ? svc.stop_cut(answer, r.stop).value_or(answer.size()) : answer.size();
                if (!ended) {  // a stop string ended the answer: free the sequence now
                    j->stop_tokens = billed;
                    j->stop_string = true;
                    detail::cancel(svc, *j);
                }
                if (const auto e = ended ? detail::refusal_of(*j, head.kind) : std::nullopt) {
                    ok = send(sse_event(error_body(*e)));
                } else {
                    const char* reason = st->text.stopped() ? "stop" : detail::finish_reason(*j->result, r.max_tokens, false);
                    ok = send(sse_event(chunk_body(head, "", std::string(reason))));
                    if (ok && r.include_usage)
                        ok = send(sse_event(usage_chunk(head, {static_cast<std::int64_t>(j->prompt.size()), static_cast<std::int64_t>(billed)})));
                }
                svc.stats.completion_tokens += billed;
                if (ok) {  // counted before the client can read [DONE] (and scrape /metrics)
                    count_request(svc, route, received, 200);
                    st->counted = true;
                    ok = send(sse_done());
                }
                if (ok) sink.done();
                return ok;
            }
            if (ok && clock::now() - st->last_write > heartbeat) ok = send(": keep-alive\n\n");
            if (!ok) detail::cancel(svc, *j);  // the client has gone
            return ok;
        });
    if (!st->counted) detail::on_release(svc, j, route, received)(stream_sent);
}

/// One completion request, whole or streamed.
template <class Service>
void handle_completion(Service& svc, endpoint kind, const http::request& req, http::exchange& ex) {
    using job = typename Service::job;
    const auto received = clock::now();
    const std::string route = kind == endpoint::chat ? "/v1/chat/completions" : "/v1/completions";
    completion_request r;
    auto j = std::make_shared<job>();
    if (!admit_completion(svc, kind, req, ex, r, j, route, received)) return;
    svc.stats.prompt_tokens += j->prompt.size();
    const response_head head{std::string(kind == endpoint::chat ? "chatcmpl-" : "cmpl-") + std::to_string(svc.started_at) + "-" +
                                 std::to_string(svc.next_id++),
                             static_cast<std::int64_t>(std::time(nullptr)), svc.rules.model, kind};

    if (r.stream) reply_stream(svc, ex, j, r, head, route, received);
    else reply_whole(svc, ex, j, r, head, route, received);
}

/// The methods a known path answers ("" for an unknown path): another gets 405 with this as Allow.
[[nodiscard]] inline std::string_view allowed_methods(std::string_view path) {
    if (path == "/v1/completions" || path == "/v1/chat/completions") return "POST";
    if (path == "/health" || path == "/ready" || path == "/metrics" || path == "/v1/models") return "GET, HEAD";
    return "";
}

/// The routes answered on the I/O thread (they never wait): /health (liveness), /ready (readiness:
/// 503 while loading or draining), /metrics, /v1/models (HEAD: GET's answer, whose body the HTTP
/// layer leaves out), 405 with Allow for a known path's other methods, and 404 for an unknown route;
/// nullopt for the completions, which go to a worker thread.
template <class Service>
std::optional<http::response> quick_route(Service& svc, const http::server& srv, const http::request& req) {
    const bool get = req.method == "GET" || req.method == "HEAD";
    const std::string_view allow = allowed_methods(req.path);
    if (req.method == "POST" && allow == "POST") return std::nullopt;
    http::response res;
    std::string route = req.path;
    if (get && req.path == "/health") {
        res = detail::json_response(200, {{"status", "ok"}, {"active", svc.sched.active()}, {"queued", svc.sched.queue_length()}});
    } else if (get && req.path == "/ready") {
        res = detail::json_response(srv.ready() ? 200 : 503, {{"status", srv.ready() ? "ready" : srv.draining() ? "draining" : "loading"}});
    } else if (get && req.path == "/metrics") {
        res = {200, "text/plain; version=0.0.4", svc.stats.render(svc.sched.queue_length(), svc.sched.active()), {}};
    } else if (get && req.path == "/v1/models") {
        res = detail::json_response(200, models_body(svc.rules.model, svc.started_at));
    } else if (!allow.empty()) {
        res = detail::json_response(405, error_body("method " + req.method.substr(0, 20) + " is not allowed on " + req.path + " (it takes " +
                                                        std::string(allow) + ")",
                                                    "invalid_request_error", ""));
        res.headers.emplace_back("Allow", std::string(allow));
    } else {
        res = detail::json_response(404, error_body("no route " + req.method + " " + req.path.substr(0, 100), "invalid_request_error", ""));
        route = "other";
    }
    svc.stats.request(route, res.status);
    return res;
}

/// Hands dlm-server's routes to `srv`.
template <class Service>
void add_routes(http::server& srv, Service& svc) {
    srv.set_handlers([&svc, &srv](const http::request& req) { return quick_route(svc, srv, req); },
                     [&svc](const http::request& req, http::exchange& ex) {
                         handle_completion(svc, req.path == "/v1/chat/completions" ? endpoint::chat : endpoint::completions, req, ex);
                     },
                     [&svc](int status) { svc.stats.request("other", status); });
}

}  // namespace dlm::server
