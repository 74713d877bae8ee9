// server/http_server.hpp — dlm-server's HTTP/1.x server: one I/O thread that owns every connection
// while it is read (poll(2), non-blocking sockets), and a fixed pool of worker threads for the requests
// that wait on the engine (docs/server.md, "The HTTP layer").
//
//   dlm::server::http::server srv(limits, "127.0.0.1", 0);   // binds and starts the workers, or throws
//   srv.start();                                               // the I/O thread: /health answers now
//   srv.set_handlers(quick, work, on_refusal);  srv.set_ready(true);  // after the model has loaded
//   srv.wait_drained(grace, cancel_all);                       // returns after request_drain()
//
// The I/O thread reads requests with request_parser (bounded sizes), enforces a deadline for the
// head (--header-timeout, from the connection's first byte of wait) and one for the body
// (--body-timeout), caps the connections (--max-connections: at the cap the I/O thread drops one of
// its own for the newcomer, the oldest still sending its head, else the one reading a body that has
// waited longest since its last byte; only when workers hold them all does the newcomer get 503),
// and answers the quick routes (`quick`: /health, /ready, /metrics, ...) itself, so that no client,
// however slow or however many, delays them. A request `quick` does not answer goes to a free worker
// (none free: 429), which runs `work` with the socket in blocking mode and hands the connection back
// for its next request.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <dlm/core/error.hpp>
#include <dlm/server/response.hpp>

#include "http_exchange.hpp"
#include "http_parser.hpp"

namespace dlm::server::http {

struct server_limits {
    parser_limits parser;
    std::size_t max_connections = 128;                ///< open connections at most (--max-connections)
    std::chrono::milliseconds header_timeout{10000};  ///< the request line and headers within (--header-timeout)
    std::chrono::milliseconds body_timeout{60000};    ///< the body within, after the head (--body-timeout)
    std::chrono::seconds write_timeout{30};           ///< one send may block at most (a client that stops reading)
    std::size_t workers = 40;                         ///< threads for requests that wait on the engine
};

/// A JSON error answer in OpenAI's format.
[[nodiscard]] inline response error_response(int status, const std::string& message, header_list extra = {}) {
    const char* type = status == 429 ? "rate_limit_error" : status >= 500 ? "server_error" : "invalid_request_error";
    return {status, "application/json", dump(error_body(message, type, "")), std::move(extra)};
}

/// `id` if it is a sane request id (1 to 64 characters of [A-Za-z0-9._:-]), else a new one.
[[nodiscard]] inline std::string request_id_for(std::optional<std::string_view> id) {
    const auto sane = [](std::string_view s) {
        return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
                   return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':' ||
                          c == '-';
               });
    };
    if (id && sane(*id)) return std::string(*id);
    static std::atomic<std::uint64_t> counter{std::random_device{}()};
    std::uint64_t x = counter.fetch_add(0x9e3779b97f4a7c15ULL) + 0x9e3779b97f4a7c15ULL;  // splitmix64
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
    char out[17];
    std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(x));
    return out;
}

class server {
public:
    using clock = std::chrono::steady_clock;
    /// Runs on the I/O thread and must not block: an answer, or nullopt for a worker's request.
    using quick_handler = std::function<std::optional<response>(const request&)>;
    /// Runs on a worker thread and writes its answer through the exchange.
    using work_handler = std::function<void(const request&, exchange&)>;

    /// Listens on host:port (0: any free port) and starts the workers; throws dlm::error saying why not.
    server(server_limits limits, const std::string& host, int port);
    ~server() { stop(); }
    server(const server&) = delete;
    server& operator=(const server&) = delete;

    [[nodiscard]] int port() const noexcept { return port_; }
    void start() { io_ = std::thread([this] { loop(); }); }
    /// Set while the I/O thread runs (after the model has loaded): under a lock, as the I/O thread
    /// reads them. `on_refusal` is called with each status the server gives itself (413, 408, 503, ...), for the metrics.
    void set_handlers(quick_handler quick, work_handler work, std::function<void(int)> on_refusal = {}) {
        const std::lock_guard lock(handlers_m_);
        quick_ = std::move(quick);
        work_ = std::move(work);
        on_refusal_ = std::move(on_refusal);
    }
    void set_ready(bool ready) noexcept { ready_ = ready; }
    [[nodiscard]] bool ready() const noexcept { return ready_ && !draining_; }
    [[nodiscard]] bool draining() const noexcept { return draining_; }
    /// Requests in a worker's hands.
    [[nodiscard]] std::size_t busy() const noexcept { return busy_; }
    /// Requests the server has begun to receive or answer (in a worker's hands, being read, or a
    /// quick answer being written), as the I/O thread last counted them.
    [[nodiscard]] std::size_t in_flight() const noexcept { return in_flight_; }
    /// Calls `log` for each request's access line (from the I/O and worker threads).
    std::function<void(const std::string&)> log = [](const std::string& line) { std::cerr << line + "\n" << std::flush; };

    /// Starts the drain: /ready says 503, new work gets 503; async-signal-safe. A second call ends
    /// the grace period.
    void request_drain() noexcept {
        ++drain_requests_;
        const char b = 'd';
        [[maybe_unused]] const auto n = ::write(wake_[1], &b, 1);
    }
    /// Waits for request_drain(), then for the requests in flight to finish (those a worker holds,
    /// and those still being received, which get 503); after `grace` (or a second request_drain)
    /// calls `cancel_all` and waits up to 10 s more for the workers; then stops the server, answering
    /// 503 to a request still being received.
    void wait_drained(std::chrono::duration<double> grace, const std::function<void()>& cancel_all);
    /// Stops the I/O thread and the workers (connections in a worker's hands are shut down).
    void stop();

private:
    enum class state { reading, writing, lingering, working };
    struct connection {
        int fd = -1;
        state st = state::reading;
        request_parser parser;
        std::string pending;  ///< bytes after the request just read (pipelined)
        std::string out;
        std::size_t out_pos = 0;
        bool close_after = false, continue_sent = false, head_seen = false;
        clock::time_point since, deadline;
        clock::time_point active;  ///< its last byte received or sent (--max-connections drops the stalest)
    };
    struct task {
        int fd;
        request req;
        bool keep_alive;
        bool pipelined;  ///< bytes of the client's next request were read with this one
        clock::time_point received;
    };

    void loop();
    void accept_all();
    void on_readable(connection& c);
    void input(connection& c, std::string_view data);
    void dispatch(connection& c);
    void queue_answer(connection& c, const response& r, bool keep_alive);
    void on_writable(connection& c);
    void resume(connection& c);
    void close_conn(int fd);
    void linger(connection& c);
    void sweep(clock::time_point now);
    void take_returned();
    void worker();
    bool evict_one(int except_fd);
    void send_refusal(int fd, const request& req, int status, const std::string& message, header_list extra = {});
    void count_in_flight();
    void refused(int status);
    void access_log(const request& req, int status, clock::time_point received) const;
    [[nodiscard]] std::size_t open_count() const;
    [[nodiscard]] std::optional<response> quick_answer(const request& req);

    server_limits limits_;
    int listen_fd_ = -1, port_ = 0;
    int wake_[2] = {-1, -1};
    std::map<int, std::unique_ptr<connection>> conns_;  // I/O thread only
    std::atomic<bool> ready_{false}, draining_{false}, stop_{false};
    std::atomic<bool> drain_counted_{false};  ///< in_flight_ was counted after draining_ was set
    std::atomic<std::size_t> in_flight_{0};
    std::atomic<int> drain_requests_{0};
    std::atomic<std::size_t> busy_{0}, idle_workers_{0};
    std::mutex handlers_m_;
    quick_handler quick_;
    work_handler work_;
    std::function<void(int)> on_refusal_;
    std::mutex tasks_m_;
    std::condition_variable tasks_cv_;
    std::deque<task> tasks_;
    std::vector<std::pair<int, bool>> returned_;  // (fd, keep alive), under tasks_m_
    std::vector<std::thread> workers_;
    std::thread io_;
    bool stopped_ = false;
};

}  // namespace dlm::server::http

#include "http_server_impl.hpp"
