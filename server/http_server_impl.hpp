// server/http_server_impl.hpp — the definitions of server/http_server.hpp (included by it).
#pragma once

namespace dlm::server::http {

namespace detail {

[[nodiscard]] inline std::string errno_text() { return std::strerror(errno); }

inline void set_blocking(int fd, bool blocking) {
    const int flags = ::fcntl(fd, F_GETFL, 0);
    ::fcntl(fd, F_SETFL, blocking ? flags & ~O_NONBLOCK : flags | O_NONBLOCK);
}

/// An accepted socket's options. TCP_NODELAY: an answer written in pieces (the head, then each SSE
/// event) goes out as written; with Nagle's algorithm a piece waits for the ACK of the one before,
/// which a client delays up to 40 ms on a reused connection (uvicorn sets it too).
inline void tune_accepted(int fd) {
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/// A bound, listening socket on host:port; throws dlm::error saying why not.
inline int listen_on(const std::string& host, int port, int& bound_port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    const std::string service = std::to_string(port);
    if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0)
        throw error("cannot listen on " + host + ":" + service + ": " + ::gai_strerror(rc));
    std::string why = "no address";
    int fd = -1;
    for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
        fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        const int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
            why = errno_text();
            ::close(fd);
            fd = -1;
        }
    }
    ::freeaddrinfo(found);
    if (fd < 0) throw error("cannot listen on " + host + ":" + service + ": " + why + " (in use, or not an address of this machine)");
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    bound_port = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    set_blocking(fd, false);
    return fd;
}

}  // namespace detail

inline server::server(server_limits limits, const std::string& host, int port) : limits_(limits) {
    listen_fd_ = detail::listen_on(host, port, port_);
    if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
        ::close(listen_fd_);
        throw error("cannot create a pipe: " + detail::errno_text());
    }
    try {
        workers_.reserve(limits_.workers);
        for (std::size_t i = 0; i < limits_.workers; ++i) workers_.emplace_back([this] { worker(); });
    } catch (const std::exception& e) {  // std::system_error: the threads' stacks did not fit, or too many threads
        const std::size_t started = workers_.size();
        stop();
        throw error("cannot start the " + std::to_string(limits_.workers) + " HTTP worker threads that --parallel + --queue + 4 ask for (" +
                    std::to_string(started) + " started): " + e.what() +
                    "; lower --parallel or --queue, or raise the process's limits (ulimit -v, ulimit -u)");
    }
    idle_workers_ = limits_.workers;
}

inline void server::stop() {
    if (stopped_) return;
    stopped_ = true;
    stop_ = true;
    const char b = 's';
    if (wake_[1] >= 0) [[maybe_unused]] auto n = ::write(wake_[1], &b, 1);
    if (io_.joinable()) io_.join();
    {
        const std::lock_guard lock(tasks_m_);
        for (const auto& t : tasks_) ::shutdown(t.fd, SHUT_RDWR);
    }
    for (auto& [fd, c] : conns_)
        if (c->st == state::working) ::shutdown(fd, SHUT_RDWR);  // a worker blocked in a write returns
    tasks_cv_.notify_all();
    for (auto& w : workers_)
        if (w.joinable()) w.join();
    for (auto& [fd, c] : conns_)  // after a drain, a request still arriving is answered, not cut
        if (draining_ && c->st == state::reading && c->parser.started() && !c->parser.failed())
            send_refusal(fd, c->parser.get(), 503, "the server is shutting down (draining); retry on another replica", {{"Retry-After", "1"}});
    for (auto& [fd, c] : conns_) ::close(fd);
    conns_.clear();
    for (const int fd : {listen_fd_, wake_[0], wake_[1]})
        if (fd >= 0) ::close(fd);
}

inline void server::wait_drained(std::chrono::duration<double> grace, const std::function<void()>& cancel_all) {
    while (!drain_counted_) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const auto until = clock::now() + std::chrono::duration_cast<clock::duration>(grace);
    while (in_flight_ > 0 && clock::now() < until && drain_requests_ < 2) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (busy_ > 0) {
        log("dlm-server: drain: " + std::to_string(busy_.load()) + " requests still running after the grace period; cancelling them");
        cancel_all();
        const auto hard = clock::now() + std::chrono::seconds(10);
        while (busy_ > 0 && clock::now() < hard) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    stop();
}

inline std::size_t server::open_count() const {
    std::size_t n = 0;
    for (const auto& [fd, c] : conns_) n += c->st != state::lingering;
    return n;
}

/// What the drain waits for: requests a worker holds (or has just handed back), requests partly
/// received, and quick answers being written. An idle keep-alive connection is none.
inline void server::count_in_flight() {
    std::size_t n = 0;
    for (const auto& [fd, c] : conns_)
        n += c->st == state::working || c->st == state::writing || (c->st == state::reading && c->parser.started());
    in_flight_ = n;
    if (draining_) drain_counted_ = true;
}

/// Counts a status the server gave itself (set_handlers' on_refusal, set while the I/O thread runs).
inline void server::refused(int status) {
    const std::lock_guard lock(handlers_m_);
    if (on_refusal_) on_refusal_(status);
}

inline void server::loop() {
    std::vector<pollfd> polled;
    while (!stop_) {
        polled.clear();
        polled.push_back({wake_[0], POLLIN, 0});
        polled.push_back({listen_fd_, POLLIN, 0});
        for (const auto& [fd, c] : conns_) {
            if (c->st == state::working) continue;
            polled.push_back({fd, static_cast<short>(c->st == state::writing ? POLLOUT : POLLIN), 0});
        }
        ::poll(polled.data(), polled.size(), 100);
        if (stop_) break;
        if (polled[0].revents) {
            char buf[64];
            while (::read(wake_[0], buf, sizeof buf) > 0) {
            }
            if (drain_requests_ > 0 && !draining_) {
                draining_ = true;
                log("dlm-server: draining: /ready answers 503, new requests get 503; " + std::to_string(busy_.load()) + " in flight");
            }
            take_returned();
        }
        if (polled[1].revents & POLLIN) accept_all();
        for (std::size_t i = 2; i < polled.size(); ++i) {
            if (!polled[i].revents) continue;
            const auto it = conns_.find(polled[i].fd);
            if (it == conns_.end()) continue;
            connection& c = *it->second;
            if (c.st == state::writing) on_writable(c);
            else if (c.st == state::reading || c.st == state::lingering) on_readable(c);
        }
        sweep(clock::now());
        count_in_flight();
    }
}

/// At --max-connections, frees a place for a newcomer among the connections the I/O thread holds, so
/// that a probe always gets in: the oldest still sending its head (or idle between requests) is
/// closed; else the one reading a body or writing a quick answer that has waited longest since its
/// last byte (a body's sender gets 503 first). False when workers hold every other connection.
inline bool server::evict_one(int except_fd) {
    connection *head = nullptr, *stale = nullptr;
    for (auto& [fd, c] : conns_) {
        if (fd == except_fd || (c->st != state::reading && c->st != state::writing)) continue;
        if (c->st == state::reading && !c->parser.headers_done()) {
            if (!head || c->since < head->since) head = c.get();
        } else if (!stale || c->active < stale->active) {
            stale = c.get();
        }
    }
    if (head) {
        refused(408);
        close_conn(head->fd);
        return true;
    }
    if (!stale) return false;
    if (stale->st == state::reading)
        send_refusal(stale->fd, stale->parser.get(), 503,
                     "the server has " + std::to_string(limits_.max_connections) +
                         " connections open (--max-connections) and this request's body was the slowest of them; retry later",
                     {{"Retry-After", "1"}});
    close_conn(stale->fd);
    return true;
}

/// A refusal of the HTTP layer's own (408, 503, ...), counted, logged and written at once, best
/// effort (one non-blocking send), before the connection is closed.
inline void server::send_refusal(int fd, const request& req, int status, const std::string& message, header_list extra) {
    refused(status);
    const std::string id = request_id_for(req.header("x-request-id"));
    log("dlm-server: [" + id + "] -> " + std::to_string(status) + ": " + message);
    const std::string text = serialize(error_response(status, message, std::move(extra)), id, true);
    [[maybe_unused]] const auto n = ::send(fd, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

inline void server::accept_all() {
    for (int i = 0; i < 64; ++i) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        detail::tune_accepted(fd);
        const auto now = clock::now();
        auto c = std::make_unique<connection>();
        c->fd = fd;
        c->parser = request_parser(limits_.parser);
        c->since = c->active = now;
        c->deadline = now + limits_.header_timeout;
        connection& ref = *c;
        conns_[fd] = std::move(c);
        if (open_count() > limits_.max_connections && !evict_one(fd)) {
            send_refusal(fd, ref.parser.get(), 503,
                         "the server has " + std::to_string(limits_.max_connections) +
                             " connections open already (--max-connections), each answering a request; retry later",
                         {{"Retry-After", "1"}});
            linger(ref);
        }
    }
}

inline void server::on_readable(connection& c) {
    char buf[65536];
    const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n <= 0) return close_conn(c.fd);  // the client has gone (or closed after a refusal)
    if (c.st == state::lingering) return;   // discarded: what a refused client was still sending
    c.active = clock::now();
    input(c, std::string_view(buf, static_cast<std::size_t>(n)));
}

/// Feeds `data` to the connection's parser; answers a refusal, or hands a whole request on.
inline void server::input(connection& c, std::string_view data) {
    const std::size_t used = c.parser.feed(data);
    if (c.parser.failed()) {
        const int status = c.parser.error_status();
        refused(status);
        request& req = c.parser.get();
        const std::string id = request_id_for(req.header("x-request-id"));
        log("dlm-server: [" + id + "] " + (req.method.empty() ? "-" : req.method) + " " + (req.path.empty() ? "-" : req.path.substr(0, 100)) +
            " -> " + std::to_string(status) + ": " + c.parser.error_message());
        c.out = serialize(error_response(status, c.parser.error_message()), id, true);
        c.out_pos = 0;
        c.close_after = true;
        c.st = state::writing;
        return on_writable(c);
    }
    if (c.parser.headers_done() && !c.head_seen) {
        c.head_seen = true;
        c.deadline = clock::now() + limits_.body_timeout;
        if (!c.parser.done() && c.parser.get().expects_continue() && !c.continue_sent) {
            c.continue_sent = true;
            constexpr std::string_view go = "HTTP/1.1 100 Continue\r\n\r\n";
            [[maybe_unused]] const auto n = ::send(c.fd, go.data(), go.size(), MSG_NOSIGNAL);
        }
    }
    if (!c.parser.done()) return;
    c.pending.assign(data.substr(used));
    dispatch(c);
}

inline std::optional<response> server::quick_answer(const request& req) {
    {
        const std::lock_guard lock(handlers_m_);
        if (quick_) return quick_(req);
    }
    if (req.path == "/health") return response{200, "application/json", R"({"status":"loading"})", {}};
    return error_response(503, "the server is loading its model", {{"Retry-After", "1"}});
}

inline void server::dispatch(connection& c) {
    request& req = c.parser.get();
    const auto received = clock::now();
    const std::string id = request_id_for(req.header("x-request-id"));
    std::erase_if(req.headers, [](const auto& h) { return h.first == "x-request-id"; });
    req.headers.emplace_back("x-request-id", id);
    const bool keep = req.keep_alive() && !draining_;
    std::optional<response> quick = quick_answer(req);
    if (!quick && (draining_ || !ready_)) {
        quick = error_response(503, draining_ ? "the server is shutting down (draining); retry on another replica" : "the server is loading its model",
                               {{"Retry-After", "1"}});
    } else if (!quick && idle_workers_ == 0) {
        quick = error_response(429, "the server is busy: every HTTP worker is taken; retry later", {{"Retry-After", "1"}});
    }
    if (quick) {
        if (quick->status == 503 || quick->status == 429) refused(quick->status);
        const bool probe = req.method == "GET" && (req.path == "/health" || req.path == "/ready" || req.path == "/metrics");
        if (!(probe && quick->status == 200)) access_log(req, quick->status, received);
        return queue_answer(c, *quick, keep && !(draining_ && quick->status == 503));
    }
    --idle_workers_;
    ++busy_;
    c.st = state::working;
    detail::set_blocking(c.fd, true);
    const timeval tv{static_cast<time_t>(limits_.write_timeout.count()), 0};
    ::setsockopt(c.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    {
        const std::lock_guard lock(tasks_m_);
        tasks_.push_back({c.fd, std::move(req), keep, !c.pending.empty(), received});
    }
    tasks_cv_.notify_one();
}

inline void server::access_log(const request& req, int status, clock::time_point received) const {
    const double ms = std::chrono::duration<double, std::milli>(clock::now() - received).count();
    char took[32];
    std::snprintf(took, sizeof took, "%.1f ms", ms);
    log("dlm-server: [" + std::string(req.header("x-request-id").value_or("-")) + "] " + req.method + " " + req.path.substr(0, 100) + " -> " +
        std::to_string(status) + " in " + took);
}

inline void server::queue_answer(connection& c, const response& r, bool keep_alive) {
    c.out = serialize(r, c.parser.get().header("x-request-id").value_or(""), !keep_alive);
    if (c.parser.get().method == "HEAD") c.out.resize(c.out.size() - r.body.size());  // GET's head, Content-Length included
    c.out_pos = 0;
    c.close_after = !keep_alive;
    c.st = state::writing;
    c.deadline = clock::now() + limits_.header_timeout;
    on_writable(c);
}

inline void server::on_writable(connection& c) {
    while (c.out_pos < c.out.size()) {
        const ssize_t n = ::send(c.fd, c.out.data() + c.out_pos, c.out.size() - c.out_pos, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
        if (n <= 0) return close_conn(c.fd);
        c.out_pos += static_cast<std::size_t>(n);
        c.active = clock::now();
    }
    std::string().swap(c.out);
    if (c.close_after) return linger(c);
    resume(c);
}

/// The connection waits for its next request (and reads what the client already sent of it).
inline void server::resume(connection& c) {
    const bool large = c.parser.get().body.capacity() >= (std::size_t{256} << 10);
    c.parser = request_parser(limits_.parser);
    if (large) ::malloc_trim(0);  // give a large body's pages back to the system
    c.st = state::reading;
    c.head_seen = c.continue_sent = false;
    c.since = c.active = clock::now();
    c.deadline = c.since + limits_.header_timeout;
    std::string pending;
    pending.swap(c.pending);
    if (!pending.empty()) input(c, pending);
}

/// After an answer that ends the connection: no more writes, and what the client still sends is
/// read and dropped for at most a second, so that it sees the answer rather than a reset.
inline void server::linger(connection& c) {
    const bool large = c.parser.get().body.capacity() >= (std::size_t{256} << 10);
    c.parser = request_parser(limits_.parser);
    if (large) ::malloc_trim(0);
    ::shutdown(c.fd, SHUT_WR);
    c.st = state::lingering;
    c.deadline = clock::now() + std::chrono::seconds(1);
    std::size_t lingering = 0;
    for (const auto& [fd, other] : conns_) lingering += other->st == state::lingering;
    if (lingering > limits_.max_connections) close_conn(c.fd);
}

inline void server::close_conn(int fd) {
    ::close(fd);
    conns_.erase(fd);
}

inline void server::sweep(clock::time_point now) {
    std::vector<int> late;
    for (const auto& [fd, c] : conns_)
        if (c->st != state::working && now >= c->deadline) late.push_back(fd);
    for (const int fd : late) {
        connection& c = *conns_.at(fd);
        if (c.st == state::reading && c.parser.started()) {  // too slow: a head or body past its deadline
            const bool head = !c.parser.headers_done();
            send_refusal(fd, c.parser.get(), 408,
                         std::string("the request's ") + (head ? "head" : "body") + " did not arrive within the server's " +
                             (head ? "--header-timeout" : "--body-timeout"));
        }
        close_conn(fd);  // an idle keep-alive connection, an unread answer, or the 408 above
    }
}

inline void server::take_returned() {
    std::vector<std::pair<int, bool>> back;
    {
        const std::lock_guard lock(tasks_m_);
        back.swap(returned_);
    }
    for (const auto& [fd, keep] : back) {
        const auto it = conns_.find(fd);
        if (it == conns_.end()) continue;
        connection& c = *it->second;
        detail::set_blocking(fd, false);
        if (!keep || (draining_ && c.pending.empty())) {  // draining: no request of its own follows
            close_conn(fd);
            continue;
        }
        resume(c);  // a request read after this one is answered (draining: 503, Connection: close)
    }
}

inline void server::worker() {
    for (;;) {
        std::unique_lock lock(tasks_m_);
        tasks_cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
        if (tasks_.empty()) return;  // stopping
        task t = std::move(tasks_.front());
        tasks_.pop_front();
        lock.unlock();
        exchange ex(t.fd, t.req, t.keep_alive, &draining_, t.pipelined);
        work_handler work;
        {
            const std::lock_guard hl(handlers_m_);
            work = work_;
        }
        try {
            work(t.req, ex);
        } catch (const std::exception& e) {
            if (!ex.started()) ex.reply(error_response(500, std::string("internal error: ") + e.what()));
        }
        if (!ex.started()) ex.reply(error_response(500, "internal error: no answer"));
        access_log(t.req, ex.status(), t.received);
        const bool keep = ex.keep_alive();
        const bool large = t.req.body.capacity() >= (std::size_t{256} << 10);
        t.req = request();
        if (large) ::malloc_trim(0);
        lock.lock();
        returned_.emplace_back(t.fd, keep);
        lock.unlock();
        --busy_;
        ++idle_workers_;
        const char b = 'r';
        [[maybe_unused]] const auto n = ::write(wake_[1], &b, 1);
    }
}

}  // namespace dlm::server::http
