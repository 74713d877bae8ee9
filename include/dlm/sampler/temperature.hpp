// dlm/sampler/temperature.hpp — logits divided by a sampling temperature, safe where the division
// would overflow float (the categorical samplers and a uniform-state schedule's tempered rows).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>

namespace dlm {

namespace detail {

/// `row` divided by temperature `t` (> 0), as the references divide logits. Where a logit over t
/// would overflow float (t below about 1e-38 for logits of order 1), the row is divided shifted by its
/// largest finite logit instead: softmax is shift-invariant, and the most probable tokens get 0, the
/// others -inf, which is the limit t -> 0 (greedy, ties drawn at random) rather than inf - inf = NaN.
/// At every other t the division is the plain one, bit for bit.
inline void divide_by_temperature(std::span<float> row, float t) noexcept {
    float top = -std::numeric_limits<float>::infinity(), reach = 0.f;
    for (const float v : row)
        if (std::isfinite(v)) top = std::max(top, v), reach = std::max(reach, std::abs(v));
    if (std::isfinite(reach / t)) {
        for (float& v : row) v /= t;
        return;
    }
    for (float& v : row) v = (v - top) / t;
}

}  // namespace detail

}  // namespace dlm
