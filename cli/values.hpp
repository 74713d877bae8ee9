// cli/values.hpp — a flag's value read as a number or a list, or a dlm::invalid_parameter naming the
// flag: what dlm-generate, dlm-eval and dlm-server (options.hpp) and the benchmark programs
// (bench/args.hpp) share, so that every program refuses a bad value with the same words.
//
//   const int n = dlm::cli::detail::to_integer<int>("--limit", "12", 1, 4096);   // 12
//   dlm::cli::detail::to_integer<int>("--limit", "0", 1, 4096);   // throws: invalid parameter '--limit': must be >= 1, got 0
#pragma once

#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include <dlm/core/error.hpp>

namespace dlm::cli {

/// The most threads -t (and Python's LLM(threads=)) asks of OpenMP.
inline constexpr int max_threads = 4096;

}  // namespace dlm::cli

namespace dlm::cli::detail {

[[noreturn]] inline void bad(std::string_view flag, const std::string& why) { throw invalid_parameter(std::string(flag), why); }

inline std::string quoted(std::string_view v) {
    std::string q(1, '\'');
    q.append(v);
    q += '\'';
    return q;
}

/// `v` itself, refused when empty: "expected <what>, got an empty string".
inline std::string non_empty(std::string_view flag, std::string_view v, std::string_view what) {
    if (v.empty()) bad(flag, "expected " + std::string(what) + ", got an empty string");
    return std::string(v);
}

/// A whole number in [lo, hi], written in decimal with nothing around it.
template <class Int>
Int to_integer(std::string_view flag, std::string_view v, Int lo, Int hi) {
    Int x{};
    const char* end = v.data() + v.size();
    if constexpr (std::is_unsigned_v<Int>) {  // "-1" is a number below the range, not a malformed one
        long long negative = 0;
        const auto [p, ec] = std::from_chars(v.data(), end, negative);
        if (ec == std::errc{} && p == end && negative < 0) bad(flag, "must be >= " + std::to_string(lo) + ", got " + std::string(v));
    }
    const auto [p, ec] = std::from_chars(v.data(), end, x);
    if (ec == std::errc::result_out_of_range) bad(flag, "value " + quoted(v) + " is out of range");
    if (ec != std::errc{} || p != end || v.empty()) bad(flag, "expected an integer, got " + quoted(v));
    if (x < lo) bad(flag, "must be >= " + std::to_string(lo) + ", got " + std::string(v));
    if (x > hi) bad(flag, "must be <= " + std::to_string(hi) + ", got " + std::string(v));
    return x;
}

inline double to_number(std::string_view flag, std::string_view v) {
    double x = 0;
    const char* end = v.data() + v.size();
    const auto [p, ec] = std::from_chars(v.data(), end, x);
    if (ec != std::errc{} || p != end || v.empty() || !std::isfinite(x)) bad(flag, "expected a finite number, got " + quoted(v));
    return x;
}

/// lo < x <= hi (open_lo) or lo <= x <= hi, written as (lo, hi] / [lo, hi].
inline double in_range(std::string_view flag, std::string_view v, double lo, double hi, bool open_lo, bool open_hi = false) {
    const double x = to_number(flag, v);
    const bool ok = (open_lo ? x > lo : x >= lo) && (open_hi ? x < hi : x <= hi);
    if (!ok) {
        auto num = [](double d) {
            std::string s = std::to_string(d);
            s.erase(s.find_last_not_of('0') + 1);
            if (s.back() == '.') s.pop_back();
            return d == std::numeric_limits<double>::infinity() ? std::string("inf") : s;
        };
        bad(flag, std::string("must be in ") + (open_lo ? "(" : "[") + num(lo) + ", " + num(hi) + (open_hi ? ")" : "]") +
                      ", got " + std::string(v));
    }
    return x;
}

/// The parts of a comma-separated list, empty ones included ("a,,b" is three), so that the caller's
/// check of each part refuses an empty one by name.
inline std::vector<std::string_view> split_commas(std::string_view v) {
    std::vector<std::string_view> parts;
    for (std::size_t b = 0; b <= v.size();) {
        const std::size_t e = std::min(v.find(',', b), v.size());
        parts.push_back(v.substr(b, e - b));
        b = e + 1;
    }
    return parts;
}

}  // namespace dlm::cli::detail
