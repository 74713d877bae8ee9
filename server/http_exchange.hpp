// server/http_exchange.hpp — writing dlm-server's HTTP answers: the response head, whole bodies
// (Content-Length), and bodies written as they are produced (chunked for HTTP/1.1, close-delimited
// for HTTP/1.0), on a socket in blocking mode with a send timeout (a client that stops reading is a
// failed write, not a stuck thread).
#pragma once

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "http_parser.hpp"

namespace dlm::server::http {

using header_list = std::vector<std::pair<std::string, std::string>>;

/// A whole answer.
struct response {
    int status = 200;
    std::string content_type = "application/json";
    std::string body;
    header_list headers;
};

[[nodiscard]] inline std::string_view reason_phrase(int status) {
    switch (status) {
        case 100: return "Continue";
        case 200: return "OK";
        case 400: return "Bad Request";
        case 404: return "Not Found";
        case 405: return "Method Not Allowed";
        case 408: return "Request Timeout";
        case 413: return "Content Too Large";
        case 415: return "Unsupported Media Type";
        case 429: return "Too Many Requests";
        case 431: return "Request Header Fields Too Large";
        case 499: return "Client Closed Request";
        case 500: return "Internal Server Error";
        case 501: return "Not Implemented";
        case 503: return "Service Unavailable";
        case 504: return "Gateway Timeout";
        case 505: return "HTTP Version Not Supported";
        default: return "Unknown";
    }
}

/// The head of an answer: status line, Content-Type, X-Request-Id, `extra`, the body's framing
/// (`framing`: "Content-Length: N", "Transfer-Encoding: chunked" or empty for close-delimited) and
/// Connection: close when the connection ends after it.
[[nodiscard]] inline std::string response_head(int status, std::string_view content_type, std::string_view request_id, const header_list& extra,
                                               std::string_view framing, bool close) {
    std::string h = "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason_phrase(status)) + "\r\n";
    if (!content_type.empty()) h.append("Content-Type: ").append(content_type).append("\r\n");
    h.append("X-Request-Id: ").append(request_id).append("\r\n");
    for (const auto& [n, v] : extra) h.append(n).append(": ").append(v).append("\r\n");
    if (!framing.empty()) h.append(framing).append("\r\n");
    if (close) h.append("Connection: close\r\n");
    return h + "\r\n";
}

/// The head and body of a whole answer.
[[nodiscard]] inline std::string serialize(const response& r, std::string_view request_id, bool close) {
    return response_head(r.status, r.content_type, request_id, r.headers, "Content-Length: " + std::to_string(r.body.size()), close) + r.body;
}

/// Writes all of `data` on blocking socket `fd`; false when the peer has gone or the send timed out.
inline bool send_all(int fd, std::string_view data) {
    while (!data.empty()) {
        const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        data.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

/// What a body provider writes into; done() marks the body complete.
class sink {
public:
    sink(int fd, bool chunked) : fd_(fd), chunked_(chunked) {}
    bool write(const char* data, std::size_t size) {
        if (!ok_ || size == 0) return ok_;
        if (!chunked_) return ok_ = send_all(fd_, std::string_view(data, size));
        char size_line[24];
        const int n = std::snprintf(size_line, sizeof size_line, "%zx\r\n", size);
        std::string piece(size_line, static_cast<std::size_t>(n));
        piece.append(data, size).append("\r\n");
        return ok_ = send_all(fd_, piece);
    }
    void done() {
        if (ok_ && !done_ && chunked_) ok_ = send_all(fd_, "0\r\n\r\n");
        done_ = true;
    }
    [[nodiscard]] bool ok() const noexcept { return ok_; }
    [[nodiscard]] bool is_done() const noexcept { return done_; }

private:
    int fd_;
    bool chunked_;
    bool ok_ = true, done_ = false;
};

/// A worker thread's side of one request: it writes exactly one answer, whole or produced piece by
/// piece, and says afterwards whether the connection can carry another request. An answer whose
/// head is written while the server drains (`draining`) is the connection's last, and says
/// Connection: close, unless the client's next request was already read with this one
/// (`pipelined`): that one is answered too (503), and its answer says it.
class exchange {
public:
    exchange(int fd, const request& req, bool keep_alive, const std::atomic<bool>* draining = nullptr, bool pipelined = false)
        : fd_(fd), req_(req), keep_(keep_alive), draining_(draining), pipelined_(pipelined) {}

    /// A whole answer, with Content-Length.
    bool reply(const response& r) {
        status_ = r.status;
        started_ = true;
        const bool close = closing();
        const bool ok = send_all(fd_, serialize(r, req_.header("x-request-id").value_or(""), close));
        keep_ = !close && ok;
        return ok;
    }

    /// An answer whose body `provider(sink&)` writes in pieces, called again while it returns true
    /// and has not called sink.done(). HTTP/1.1: chunked; HTTP/1.0: no framing, the connection ends
    /// with the body. True when the whole body was written.
    template <class Provider>
    bool stream(int status, std::string_view content_type, const header_list& extra, Provider&& provider) {
        status_ = status;
        started_ = true;
        const bool chunked = req_.minor_version >= 1;
        if (!chunked || closing()) keep_ = false;
        sink out(fd_, chunked);
        if (!send_all(fd_, response_head(status, content_type, req_.header("x-request-id").value_or(""), extra,
                                         chunked ? "Transfer-Encoding: chunked" : "", !keep_))) {
            keep_ = false;
            return false;
        }
        while (out.ok() && !out.is_done() && provider(out)) {
        }
        const bool whole = out.ok() && out.is_done();
        keep_ = keep_ && whole;
        return whole;
    }

    /// Whether the client has closed its side of the connection (or it failed): checked without
    /// reading or writing, so a worker that waits for an answer can notice a client that left
    /// before anything was sent. A client that half-closes (shutdown(SHUT_WR)) and still waits
    /// counts as gone, as in uvicorn (vLLM's server).
    [[nodiscard]] bool peer_gone() const noexcept {
        pollfd p{fd_, POLLRDHUP, 0};
        return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
    }

    /// No answer: the client has gone. The connection ends; `status` (499) is what the access log says.
    void abandon(int status) noexcept {
        status_ = status;
        started_ = true;
        keep_ = false;
    }

    [[nodiscard]] int status() const noexcept { return status_; }
    [[nodiscard]] bool started() const noexcept { return started_; }
    [[nodiscard]] bool keep_alive() const noexcept { return keep_; }
    [[nodiscard]] const request& req() const noexcept { return req_; }

private:
    /// This answer ends the connection: the client asked, or the server drains and no request of
    /// the client's was read after this one.
    [[nodiscard]] bool closing() const noexcept { return !keep_ || (draining_ && draining_->load() && !pipelined_); }

    int fd_;
    const request& req_;
    bool keep_;
    const std::atomic<bool>* draining_;
    bool pipelined_;
    int status_ = 0;
    bool started_ = false;
};

}  // namespace dlm::server::http
