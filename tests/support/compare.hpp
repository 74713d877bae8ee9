// tests/support/compare.hpp — how the tests compare two rows of logits: bit for bit, or by the
// largest difference relative to the logits' scale. A NaN on either side is an infinite difference
// (a plain std::max drops it, so a path that returned NaN would pass any tolerance).
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace dlm_test {

/// The same bits, element for element (-0 and +0 differ; NaN payloads too).
inline bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// |a - b| as a double: 0 for equal values (equal infinities too), +inf when either is NaN or only
/// one is infinite.
inline double abs_diff(float a, float b) {
    if (a == b) return 0;
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::infinity();
    return std::abs(static_cast<double>(a) - static_cast<double>(b));
}

/// max |a - b|; +inf when either holds a NaN.
inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    double worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, abs_diff(a[i], b[i]));
    return worst;
}

/// max |a - b| / max(1, max finite |b|): the error relative to the logits' scale; +inf when either
/// holds a NaN or an infinity the other does not (an infinite logit of b does not set the scale, so it
/// cannot hide the other differences).
inline double scaled_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double scale = 1;
    for (float v : b)
        if (std::isfinite(v)) scale = std::max(scale, std::abs(static_cast<double>(v)));
    return max_abs_diff(a, b) / scale;
}

/// max |a - b| / max(1, |b|), element by element; +inf when either holds a NaN.
inline double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    double worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, abs_diff(a[i], b[i]) / std::max(1.0, std::abs(static_cast<double>(b[i]))));
    return worst;
}

}  // namespace dlm_test
