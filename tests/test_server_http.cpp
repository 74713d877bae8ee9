// dlm-server's HTTP layer without a server: the accepted sockets' options (server/http_server.hpp).
// The server itself is tested with real clients on 127.0.0.1 by tests/server/client_test.py.
#include <doctest/doctest.h>

#include <utility>

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

}  // namespace test_server_http
