// cli/stats.hpp — latency statistics and the statistics line.
//
// Definitions used by dlm-generate and dlm-eval (docs/cli.md):
//   forwards            model forwards (NFE) of the sequence
//   tokens per forward  slots committed by the schedule / forwards (the EOS fill after an early stop
//                       is not committed, so it does not count; nor do a revising schedule's edits)
//   edits               tokens a revising schedule replaced (llada21), shown when there are any
//   latency             wall time of the decode (decoder::generate), without model loading,
//                       tokenization, or the time --visual spends drawing
//   tokens/s            answer tokens (the slots before the first EOS) / latency
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <dlm/core/result.hpp>

#include "presets.hpp"

namespace dlm::cli {

/// Mean and percentiles of a sample.
struct summary {
    std::size_t count = 0;
    double mean = 0, p50 = 0, p95 = 0, min = 0, max = 0;
};

/// The q-th percentile (0..100) of sorted values, interpolated linearly between the two nearest
/// ranks (NumPy's default method).
[[nodiscard]] inline double percentile(const std::vector<double>& sorted, double q) {
    if (sorted.empty()) return 0;
    const double rank = q / 100.0 * static_cast<double>(sorted.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(rank));
    const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - static_cast<double>(lo));
}

[[nodiscard]] inline summary summarize(std::vector<double> v) {
    summary s;
    s.count = v.size();
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    double sum = 0;
    for (double x : v) sum += x;
    s.mean = sum / static_cast<double>(v.size());
    s.p50 = percentile(v, 50);
    s.p95 = percentile(v, 95);
    s.min = v.front();
    s.max = v.back();
    return s;
}

/// "%.*f" of a double.
[[nodiscard]] inline std::string fixed(double x, int digits) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", digits, x);
    return b;
}

/// Seconds as "850 us", "12.3 ms" or "1.23 s".
[[nodiscard]] inline std::string format_seconds(double s) {
    if (s < 1e-3) return fixed(s * 1e6, 0) + " us";
    if (s < 1.0) return fixed(s * 1e3, s < 0.1 ? 2 : 1) + " ms";
    return fixed(s, 2) + " s";
}

/// "[2 3 1]"; long lists are cut in the middle.
[[nodiscard]] inline std::string format_steps(const std::vector<index_t>& steps) {
    std::string out = "[";
    for (std::size_t i = 0; i < steps.size(); ++i) {
        if (steps.size() > 24 && i == 12) {
            out += "... ";
            i = steps.size() - 8;
        }
        out += std::to_string(steps[i]) + (i + 1 < steps.size() ? " " : "");
    }
    return out + "]";
}

/// The statistics line of one decoded sequence:
///   cdlm: 9 forwards, steps per block [3 3 2 1], 2.67 tokens/forward, latency 3.21 ms, 7476.6 tokens/s (24 answer tokens)
/// (a revising schedule adds ", N edits" after tokens/forward).
[[nodiscard]] inline std::string stats_line(const settings& s, const sequence_result& r, double seconds) {
    const double tps = seconds > 0 ? static_cast<double>(r.answer_length) / seconds : 0.0;
    const std::string edits = r.stats.edits > 0 ? ", " + std::to_string(r.stats.edits) + " edits" : std::string();
    return std::string(name_of(s.preset)) + ": " + std::to_string(r.stats.forwards) + " forwards, steps per block " +
           format_steps(r.stats.steps_per_block) + ", " + fixed(r.stats.tokens_per_forward(), 2) + " tokens/forward" + edits + ", latency " +
           format_seconds(seconds) + ", " + fixed(tps, 1) + " tokens/s (" + std::to_string(r.answer_length) + " answer tokens)";
}

}  // namespace dlm::cli
