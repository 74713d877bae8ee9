// Shared by dlm's libFuzzer targets (tests/fuzz/*.cpp, built by tests/fuzz.cmake with clang++
// -fsanitize=fuzzer,address,undefined).
//
// The rule every target checks: bad input may only be refused with a dlm::error. Any other exception
// escapes LLVMFuzzerTestOneInput, std::terminate aborts, and libFuzzer reports it as a crash with the
// input that caused it; out-of-bounds reads, leaks and undefined behaviour are caught by the
// sanitizers. `fuzz_check` turns a broken invariant on accepted input into a crash as well.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace dlm_fuzz {

/// Aborts (a libFuzzer finding) with `what` when `ok` is false.
inline void fuzz_check(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "dlm fuzz invariant broken: %s\n", what);
        std::abort();
    }
}

/// The fuzzer's bytes as text.
inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

}  // namespace dlm_fuzz
