// server/http_parser.hpp — dlm-server's HTTP/1.x request reader: bytes in, one request out, every
// size bounded before it is stored (docs/server.md, "Limits").
//
//   dlm::server::http::request_parser p({.max_body = 1 << 20});
//   std::size_t used = p.feed(bytes);        // as they arrive; the rest of `bytes` is the next request's
//   if (p.failed()) reply(p.error_status(), p.error_message());   // 400, 413, 415, 431, 501, 505
//   else if (p.done()) handle(p.get());
//
// Bounded: the request line and headers together at most `max_header_bytes` (431), at most
// `max_headers` fields (431), the body at most `max_body` bytes AS DECODED: a Content-Length over it
// is refused before a byte of the body is read, a chunked body as soon as its chunks' sizes pass it
// (413). Content codings are not decoded, so a body with a Content-Encoding other than identity is
// refused (415) rather than inflated; a Transfer-Encoding other than chunked is refused (501), and a
// request with both Transfer-Encoding and Content-Length (a smuggling vector) is refused (400).
// No allocation follows a size the client claims (buffers grow with the bytes that arrive); the parser never throws on any input (fuzzed:
// tests/fuzz/fuzz_http_request.cpp) and needs only the standard library.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlm::server::http {

struct parser_limits {
    std::size_t max_header_bytes = 16 * 1024;  ///< request line + header fields + trailers
    std::size_t max_headers = 100;
    std::size_t max_body = 1 << 20;  ///< decoded body bytes
};

/// One request as read: method, target, version, header fields (names lower-cased), body.
struct request {
    std::string method, target, path;  ///< path: the target before '?'
    int minor_version = 1;             ///< HTTP/1.<minor>
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;

    /// The first field named `name` (lower case), or nullopt.
    [[nodiscard]] std::optional<std::string_view> header(std::string_view name) const {
        for (const auto& [n, v] : headers)
            if (n == name) return std::string_view(v);
        return std::nullopt;
    }
    /// Whether the connection may carry another request after this one's answer.
    [[nodiscard]] bool keep_alive() const {
        const auto c = header("connection");
        const bool close = c && contains_token(*c, "close");
        return minor_version >= 1 && !close;
    }
    /// Whether the client waits for "100 Continue" before sending its body.
    [[nodiscard]] bool expects_continue() const {
        const auto e = header("expect");
        return minor_version >= 1 && e && contains_token(*e, "100-continue");
    }

    /// Whether the comma-separated list `list` holds `token` (ASCII case-insensitive).
    [[nodiscard]] static bool contains_token(std::string_view list, std::string_view token) {
        while (!list.empty()) {
            const std::size_t c = std::min(list.find(','), list.size());
            if (iequal(trim(list.substr(0, c)), token)) return true;
            list.remove_prefix(std::min(c + 1, list.size()));
        }
        return false;
    }
    [[nodiscard]] static std::string_view trim(std::string_view s) {
        while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
        while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
        return s;
    }
    [[nodiscard]] static bool iequal(std::string_view a, std::string_view b) {
        return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lower(x) == lower(y); });
    }
    [[nodiscard]] static char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
};

class request_parser {
public:
    explicit request_parser(parser_limits limits = {}) : limits_(limits) {}

    /// Reads from `data` what belongs to the current request; returns the bytes used (the rest is
    /// the next request's, or none after a failure).
    std::size_t feed(std::string_view data) {
        std::size_t used = 0;
        while (used < data.size() && phase_ != phase::done && phase_ != phase::failed) {
            const std::string_view rest = data.substr(used);
            switch (phase_) {
                case phase::head: used += feed_head(rest); break;
                case phase::body: used += feed_body(rest); break;
                case phase::chunk_size: used += feed_line(rest, &request_parser::on_chunk_size); break;
                case phase::chunk_data: used += feed_chunk(rest); break;
                case phase::chunk_end: used += feed_line(rest, &request_parser::on_chunk_end); break;
                case phase::trailers: used += feed_line(rest, &request_parser::on_trailer); break;
                default: break;
            }
        }
        return used;
    }

    [[nodiscard]] bool done() const noexcept { return phase_ == phase::done; }
    [[nodiscard]] bool failed() const noexcept { return phase_ == phase::failed; }
    /// The request line and headers are in (the body, if any, is being read).
    [[nodiscard]] bool headers_done() const noexcept { return headers_done_; }
    /// Whether any byte of this request has arrived.
    [[nodiscard]] bool started() const noexcept { return started_; }
    [[nodiscard]] int error_status() const noexcept { return status_; }
    [[nodiscard]] const std::string& error_message() const noexcept { return message_; }
    /// The request so far (whole once done()).
    [[nodiscard]] request& get() noexcept { return req_; }
    [[nodiscard]] const request& get() const noexcept { return req_; }
    /// Bytes held for this request (head and body): what its connection costs in memory.
    [[nodiscard]] std::size_t held() const noexcept { return line_.capacity() + req_.body.capacity() + head_bytes_; }

private:
    enum class phase { head, body, chunk_size, chunk_data, chunk_end, trailers, done, failed };

    std::size_t fail(int status, std::string message) {
        phase_ = phase::failed;
        status_ = status;
        message_ = std::move(message);
        return 0;
    }

    /// Reads one line (CRLF, or a bare LF) into line_ and hands it to `on_line`; the head's bytes
    /// count against max_header_bytes, a chunk-size line against its own small bound.
    std::size_t feed_line(std::string_view data, std::size_t (request_parser::*on_line)(std::string_view)) {
        started_ = true;
        const std::size_t nl = data.find('\n');
        const std::size_t take = nl == std::string_view::npos ? data.size() : nl + 1;
        const bool in_head = phase_ == phase::head || phase_ == phase::trailers;
        const std::size_t bound = in_head ? limits_.max_header_bytes : max_chunk_line;
        if (in_head) head_bytes_ += take;
        if ((in_head ? head_bytes_ : line_.size() + take) > bound)
            return in_head ? fail(431, "the request's header fields are larger than " + std::to_string(bound) + " bytes")
                           : fail(400, "a chunk-size line is longer than " + std::to_string(bound) + " bytes");
        line_.append(data.substr(0, take));
        if (nl == std::string_view::npos) return take;
        std::string_view line(line_);
        line.remove_suffix(1);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        const std::string copy(line);
        line_.clear();
        (this->*on_line)(copy);
        return take;
    }

    std::size_t feed_head(std::string_view data) { return feed_line(data, &request_parser::on_head_line); }

    std::size_t on_head_line(std::string_view line) {
        if (!have_request_line_) {
            if (line.empty() && req_.method.empty()) return 0;  // a stray CRLF before the request (RFC 9112 2.2)
            have_request_line_ = true;
            return on_request_line(line);
        }
        if (line.empty()) return on_headers_end();
        return on_field(line, req_.headers);
    }

    /// A target in the absolute form (http://host:port/path?query), which RFC 9112 (3.2.2) says a
    /// server must accept, as its path; any other target as it is. The Host header stays the client's.
    [[nodiscard]] static std::string_view origin_form(std::string_view target) noexcept {
        for (const std::string_view scheme : {std::string_view("http://"), std::string_view("https://")}) {
            if (target.size() <= scheme.size()) continue;
            bool same = true;
            for (std::size_t i = 0; i < scheme.size(); ++i) {
                const char c = target[i] >= 'A' && target[i] <= 'Z' ? static_cast<char>(target[i] + ('a' - 'A')) : target[i];
                same = same && c == scheme[i];
            }
            if (!same) continue;
            const std::size_t slash = target.find('/', scheme.size());
            return slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
        }
        return target;
    }

    std::size_t on_request_line(std::string_view line) {
        const std::size_t a = line.find(' ');
        const std::size_t b = a == std::string_view::npos ? a : line.find(' ', a + 1);
        if (b == std::string_view::npos || line.find(' ', b + 1) != std::string_view::npos)
            return fail(400, "the request line is not METHOD TARGET HTTP/1.x");
        const std::string_view method = line.substr(0, a), version = line.substr(b + 1);
        std::string_view target = line.substr(a + 1, b - a - 1);
        if (method.empty() || !std::all_of(method.begin(), method.end(), is_tchar)) return fail(400, "the request method is not a token");
        target = origin_form(target);
        if (target.empty() || target.front() != '/' || !std::all_of(target.begin(), target.end(), [](char c) { return c > ' ' && c < 127; }))
            return fail(400, "the request target is not an absolute path");
        if (version.size() != 8 || !version.starts_with("HTTP/1.") || version[7] < '0' || version[7] > '9')
            return version.starts_with("HTTP/") ? fail(505, "only HTTP/1.0 and HTTP/1.1 are served") : fail(400, "no HTTP version in the request line");
        req_.method = method;
        req_.target = target;
        req_.path = target.substr(0, target.find('?'));
        req_.minor_version = version[7] - '0';
        return 0;
    }

    std::size_t on_field(std::string_view line, std::vector<std::pair<std::string, std::string>>& into) {
        if (line.front() == ' ' || line.front() == '\t') return fail(400, "obsolete line folding in a header field");
        const std::size_t colon = line.find(':');
        if (colon == std::string_view::npos || colon == 0) return fail(400, "a header field without a name");
        const std::string_view name = line.substr(0, colon), value = request::trim(line.substr(colon + 1));
        if (!std::all_of(name.begin(), name.end(), is_tchar)) return fail(400, "a header field name is not a token");
        if (std::any_of(value.begin(), value.end(), [](char c) { return (c < ' ' && c != '\t') || c == 127; }))
            return fail(400, "a control character in a header field value");
        if (req_.headers.size() + trailers_ >= limits_.max_headers)
            return fail(431, "more than " + std::to_string(limits_.max_headers) + " header fields");
        std::string n(name);
        std::transform(n.begin(), n.end(), n.begin(), request::lower);
        if (&into != &req_.headers) {  // a trailer field: counted, not kept
            ++trailers_;
            return 0;
        }
        into.emplace_back(std::move(n), std::string(value));
        return 0;
    }

    /// Decides how the body is framed, refusing what the server does not read.
    std::size_t on_headers_end() {
        headers_done_ = true;
        std::optional<std::string_view> te, cl;
        for (const auto& [n, v] : req_.headers) {
            if (n == "transfer-encoding") {
                if (te) return fail(400, "Transfer-Encoding given twice");
                te = v;
            } else if (n == "content-length") {
                if (cl && *cl != v) return fail(400, "two different Content-Length values");
                cl = v;
            } else if (n == "content-encoding" && !request::iequal(v, "identity")) {
                return fail(415, "Content-Encoding '" + v.substr(0, 40) + "' is not accepted: send the body unencoded");
            }
        }
        if (te && cl) return fail(400, "both Transfer-Encoding and Content-Length");
        if (te) {
            if (!request::iequal(*te, "chunked")) return fail(501, "Transfer-Encoding '" + std::string(te->substr(0, 40)) + "' is not supported (only chunked)");
            if (req_.minor_version == 0) return fail(400, "Transfer-Encoding in an HTTP/1.0 request");
            phase_ = phase::chunk_size;
            return 0;
        }
        std::uint64_t length = 0;
        if (cl) {
            if (cl->empty() || cl->size() > 19 || !std::all_of(cl->begin(), cl->end(), [](char c) { return c >= '0' && c <= '9'; }))
                return fail(400, "Content-Length is not a number");
            for (const char c : *cl) length = length * 10 + static_cast<std::uint64_t>(c - '0');
        }
        if (length > limits_.max_body) return too_large();
        remaining_ = length;  // the body's buffer grows with the bytes that arrive, not with this claim
        phase_ = length == 0 ? phase::done : phase::body;
        return 0;
    }

    std::size_t too_large() {
        return fail(413, "the request body is larger than the server's --max-body (" + std::to_string(limits_.max_body) + " bytes)");
    }

    std::size_t feed_body(std::string_view data) {
        const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, data.size()));
        req_.body.append(data.substr(0, take));
        remaining_ -= take;
        if (remaining_ == 0) phase_ = phase::done;
        return take;
    }

    std::size_t on_chunk_size(std::string_view line) {
        const std::string_view size = request::trim(line.substr(0, line.find(';')));
        if (size.empty() || size.size() > 16) return fail(400, "a chunk size is not a hexadecimal number");
        std::uint64_t n = 0;
        for (const char c : size) {
            const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
            if (d < 0) return fail(400, "a chunk size is not a hexadecimal number");
            n = n * 16 + static_cast<std::uint64_t>(d);
        }
        if (n > limits_.max_body - req_.body.size()) return too_large();  // the decoded size, before it is stored
        remaining_ = n;
        phase_ = n == 0 ? phase::trailers : phase::chunk_data;
        return 0;
    }

    std::size_t feed_chunk(std::string_view data) {
        const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, data.size()));
        req_.body.append(data.substr(0, take));
        remaining_ -= take;
        if (remaining_ == 0) phase_ = phase::chunk_end;
        return take;
    }

    std::size_t on_chunk_end(std::string_view line) {
        if (!line.empty()) return fail(400, "a chunk's data is not followed by CRLF");
        phase_ = phase::chunk_size;
        return 0;
    }

    std::size_t on_trailer(std::string_view line) {
        if (line.empty()) {
            phase_ = phase::done;
            return 0;
        }
        std::vector<std::pair<std::string, std::string>> ignored;
        return on_field(line, ignored);
    }

    static bool is_tchar(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    }

    static constexpr std::size_t max_chunk_line = 1024;
    parser_limits limits_;
    phase phase_ = phase::head;
    request req_;
    std::string line_;
    std::size_t head_bytes_ = 0, trailers_ = 0;
    std::uint64_t remaining_ = 0;
    bool have_request_line_ = false, started_ = false, headers_done_ = false;
    int status_ = 0;
    std::string message_;
};

}  // namespace dlm::server::http
