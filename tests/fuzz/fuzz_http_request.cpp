// Fuzz target: raw bytes from a client -> dlm-server's HTTP request reader (server/http_parser.hpp),
// as a stream of pipelined requests, read twice: all at once, and in pieces of 1 to 16 bytes (byte 0
// picks the size), as a slow client would send them.
//
// Both readings must agree (the same requests, the same refusal); a refusal must be one of the
// statuses the server sends (400, 413, 415, 431, 501, 505) with a message; an accepted request must
// be within the bounds: a token method, a target starting with '/', at most max_headers fields with
// lower-case names, a body of at most max_body bytes (decoded: chunked bodies included); and the
// reader may never use more bytes than it was given.
#include <string>
#include <vector>

#include "../../server/http_parser.hpp"
#include "fuzz_common.hpp"

namespace {

using dlm_fuzz::fuzz_check;
using namespace dlm::server::http;

constexpr parser_limits limits{.max_header_bytes = 512, .max_headers = 16, .max_body = 256};

struct outcome {
    std::vector<std::string> requests;  ///< each accepted request, flattened
    int refusal = 0;
    bool operator==(const outcome&) const = default;
};

std::string flatten(const request& r) {
    std::string s = r.method + ' ' + r.target + ' ' + std::to_string(r.minor_version) + '\n';
    for (const auto& [n, v] : r.headers) s += n + ": " + v + '\n';
    return s + '\n' + r.body;
}

void check_request(const request& r) {
    fuzz_check(!r.method.empty() && r.method.find(' ') == std::string::npos, "accepted: the method is not a token");
    fuzz_check(!r.target.empty() && r.target[0] == '/' && r.path.size() <= r.target.size(), "accepted: the target is not a path");
    fuzz_check(r.minor_version >= 0 && r.minor_version <= 9, "accepted: the version is not HTTP/1.x");
    fuzz_check(r.headers.size() <= limits.max_headers, "accepted: more header fields than max_headers");
    for (const auto& [n, v] : r.headers)
        for (const char c : n) fuzz_check(!(c >= 'A' && c <= 'Z'), "accepted: a header name is not lower case");
    fuzz_check(r.body.size() <= limits.max_body, "accepted: a body over max_body");
}

/// Reads every request in `bytes`, handing the reader pieces of `piece` bytes (0: all at once).
outcome read_all(std::string_view bytes, std::size_t piece) {
    outcome out;
    request_parser p(limits);
    std::size_t at = 0;
    // Every round uses a byte or finishes a request (else the checks below fail), so this bound is
    // never what stops a well-behaved reader (a fixed 1000 cut a long input fed byte by byte short).
    std::size_t guard = 0;
    while (at < bytes.size() && ++guard <= 2 * bytes.size() + 2) {
        const std::size_t n = piece == 0 ? bytes.size() - at : std::min(piece, bytes.size() - at);
        const std::size_t used = p.feed(bytes.substr(at, n));
        fuzz_check(used <= n, "the reader used more bytes than it was given");
        if (!p.done() && !p.failed()) fuzz_check(used == n, "the reader left bytes unread while waiting for more");
        at += used;
        if (p.failed()) {
            const int s = p.error_status();
            fuzz_check(s == 400 || s == 413 || s == 415 || s == 431 || s == 501 || s == 505, "a refusal with an unexpected status");
            fuzz_check(!p.error_message().empty(), "a refusal without a message");
            out.refusal = s;
            return out;
        }
        if (p.done()) {
            check_request(p.get());
            out.requests.push_back(flatten(p.get()));
            p = request_parser(limits);
        }
    }
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    const std::size_t piece = 1 + data[0] % 16;
    const std::string_view bytes = dlm_fuzz::as_text(data + 1, size - 1);
    fuzz_check(read_all(bytes, 0) == read_all(bytes, piece), "reading in pieces and at once disagree");
    return 0;
}
