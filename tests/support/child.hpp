// tests/support/child.hpp — a test body run in a forked child whose address space is limited
// (RLIMIT_AS): a size no machine can give is refused there, and an allocation the check should
// have prevented fails there, not in the test process. Unix only (fork, setrlimit).
#pragma once

// DLM_TEST_SANITIZER: built with AddressSanitizer or ThreadSanitizer, which reserve terabytes of
// address space (shadow memory, allocator), past any limit a child sets: the cases that limit one
// skip themselves. Defined here, where they include it, not by a file a unity batch may not hold.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DLM_TEST_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define DLM_TEST_SANITIZER 1
#endif
#endif

#if defined(__unix__)
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>

#include <doctest/doctest.h>

#include <dlm/core/memory.hpp>

namespace dlm_test {

/// The exit status of `body()` (an int) run in a child limited to `address_space` bytes; 3 when the
/// body throws.
template <class Body>
int in_limited_child(std::uint64_t address_space, Body&& body) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        const rlimit limit{static_cast<rlim_t>(address_space), static_cast<rlim_t>(address_space)};
        setrlimit(RLIMIT_AS, &limit);
        int code = 3;
        try {
            code = body();
        } catch (...) {
            code = 3;
        }
        _exit(code);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    return WEXITSTATUS(status);
}

/// in_child_with_room's status when the machine has less memory than the room: nothing to measure.
inline constexpr int room_unmeasurable = 7;

/// The exit status of `body(avail)` run in a child limited to `room` bytes more address space than
/// this process maps now, `avail` being what dlm::available_memory() says there: the limit, not the
/// machine, sets the figure (a little more when the child maps less than this process did). room_unmeasurable,
/// without running the body, when the machine has less than half the room to give, or the limit is not
/// what sets the figure.
template <class Body>
int in_child_with_room(std::uint64_t room, Body&& body) {
    return in_limited_child(dlm::detail::proc_kib("/proc/self/status", "VmSize") + room, [&] {
        const std::uint64_t avail = dlm::available_memory();
        if (avail > room + room / 8 || avail < room / 2) return room_unmeasurable;
        return static_cast<int>(body(avail));
    });
}

}  // namespace dlm_test
#endif
