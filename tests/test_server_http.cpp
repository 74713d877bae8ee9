// dlm-server's HTTP layer without a server: the accepted sockets' options, and when an answer says
// Connection: close (server/http_server.hpp, server/http_exchange.hpp). The server itself is tested
// with real clients on 127.0.0.1 by tests/server/client_test.py.
#include <doctest/doctest.h>

#include <atomic>
#include <string>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/http_server.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_server_http {

using namespace dlm::server::http;

namespace {

/// A connected pair of TCP sockets on 127.0.0.1: {client, accepted}.
std::pair<int, int> tcp_pair() {
    const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(listener, 1) == 0);
    socklen_t len = sizeof addr;
    ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
    const int client = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(::connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    const int accepted = ::accept(listener, nullptr, nullptr);
    ::close(listener);
    REQUIRE(accepted >= 0);
    return {client, accepted};
}

/// What `write` sends on a fresh pair, as the client reads it.
template <class Write>
std::string sent_by(Write&& write) {
    const auto [client, accepted] = tcp_pair();
    write(accepted);
    ::shutdown(accepted, SHUT_WR);
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::recv(client, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<std::size_t>(n));
    ::close(client);
    ::close(accepted);
    return out;
}

}  // namespace

TEST_CASE("server http: an accepted socket sends each piece as written (TCP_NODELAY), not after the client's delayed ACK") {
    const auto [client, accepted] = tcp_pair();
    int on = 0;
    socklen_t len = sizeof on;
    REQUIRE(::getsockopt(accepted, IPPROTO_TCP, TCP_NODELAY, &on, &len) == 0);
    CHECK(on == 0);  // Linux's default: Nagle's algorithm
    detail::tune_accepted(accepted);
    REQUIRE(::getsockopt(accepted, IPPROTO_TCP, TCP_NODELAY, &on, &len) == 0);
    CHECK(on != 0);
    ::close(client);
    ::close(accepted);
}

TEST_CASE("server http: during a drain an answer says Connection: close unless a request read after it still waits for its 503") {
    request req;
    req.method = "POST";
    req.minor_version = 1;
    const response ok{200, "application/json", "{}", {}};
    std::atomic<bool> draining{false};
    const auto answer = [&](bool pipelined, bool stream) {
        bool keep = false;
        const std::string text = sent_by([&](int fd) {
            exchange ex(fd, req, true, &draining, pipelined);
            if (stream) {
                ex.stream(200, "text/event-stream", {}, [](sink& s) {
                    s.write("data: x\n\n", 9);
                    s.done();
                    return true;
                });
            } else {
                ex.reply(ok);
            }
            keep = ex.keep_alive();
        });
        CHECK(text.starts_with("HTTP/1.1 200"));
        return std::pair(text.find("Connection: close") != std::string::npos, keep);
    };
    for (const bool stream : {false, true}) {
        CAPTURE(stream);
        draining = false;
        CHECK(answer(false, stream) == std::pair(false, true));  // not draining: the connection stays
        draining = true;
        CHECK(answer(false, stream) == std::pair(true, false));  // draining, nothing read after it: the last answer
        CHECK(answer(true, stream) == std::pair(false, true));   // a pipelined request follows: its 503 will say it
    }
}

}  // namespace test_server_http
