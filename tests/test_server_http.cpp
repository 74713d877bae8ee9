// dlm-server's HTTP layer: the accepted sockets' options, when an answer says Connection: close
// (server/http_server.hpp, server/http_exchange.hpp), and handlers set while the I/O thread already
// answers. The whole server is tested with real clients on 127.0.0.1 by tests/server/client_test.py.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include <arpa/inet.h>
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

/// The status of the answer to `text` sent to 127.0.0.1:`port` (0 when none came).
int status_of(int port, std::string_view text) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    char buf[64] = {};
    ssize_t n = 0;  // no REQUIRE here: it is called from a second thread too
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 && ::send(fd, text.data(), text.size(), MSG_NOSIGNAL) > 0)
        n = ::recv(fd, buf, sizeof buf - 1, MSG_WAITALL);
    ::close(fd);
    return n >= 12 ? std::atoi(buf + 9) : 0;  // "HTTP/1.1 400 ..."
}

}  // namespace

TEST_CASE("server http: the refusal counter is set while the I/O thread refuses requests, and counts every refusal after") {
    server_limits limits;
    limits.workers = 1;
    server srv(limits, "127.0.0.1", 0);
    srv.log = [](const std::string&) {};
    srv.start();
    constexpr std::string_view bad = "NOT A REQUEST LINE\r\n\r\n";
    CHECK(status_of(srv.port(), bad) == 400);  // refused before the model has loaded: no counter yet
    std::atomic<bool> stop{false};
    std::thread client([&] {  // refusals on the I/O thread while the counter is being set
        while (!stop) CHECK(status_of(srv.port(), bad) == 400);
    });
    std::atomic<int> counted{0};
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    srv.set_handlers([](const request&) { return std::optional<response>(); },
                     [](const request&, exchange& ex) { ex.reply({200, "text/plain", "", {}}); }, [&](int status) { counted += status == 400; });
    stop = true;
    client.join();
    const int before = counted;
    for (int i = 0; i < 3; ++i) CHECK(status_of(srv.port(), bad) == 400);
    CHECK(counted == before + 3);
    srv.stop();
}

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
