// dlm/cpu/ops.hpp — the row-wise operations of the CPU transformer: RMSNorm, rotary embeddings,
// the SiLU- and GELU-gated products. Each row is computed on its own, in a fixed order, so a row's result never
// depends on the other rows of the batch.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "../core/config.hpp"
#include "dispatch.hpp"
#include "simd.hpp"

namespace dlm::cpu {

/// Row-wise parallel loop over [0, n) when the work is worth the threads.
template <class F>
void for_rows(index_t n, double work_per_row, F&& f) {
    [[maybe_unused]] const bool parallel = n > 1 && static_cast<double>(n) * work_per_row > 2e5;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (parallel)
#endif
    for (index_t i = 0; i < n; ++i) f(i);
}

/// out[i] = weight ⊙ x[i] / sqrt(mean(x[i]²) + eps), for rows of `width` floats (HF's RMSNorm; the
/// kernel table's rms_norm: the squares summed in double in one order on every path).
inline void rms_norm(index_t rows, index_t width, const float* x, std::ptrdiff_t ldx, const float* weight, float eps, float* out,
                     std::ptrdiff_t ldo) {
    const kernel_table& kt = kernels();
    for_rows(rows, width, [&](index_t r) { kt.rms_norm(x + r * ldx, width, weight, eps, out + r * ldo); });
}

/// Rotary embedding in the rotate-half convention of HF Llama/Qwen2/LLaDA: dimension i and
/// i + d/2 of a head rotate together by angle pos · θ^(-2i/d). Partial RoPE (LLaDA2): only the
/// leading d = `rotated` dims of each head of `head_dim` rotate, the rest pass through.
class rotary {
public:
    rotary() = default;
    rotary(index_t head_dim, double theta, index_t rotated = 0)
        : half_((rotated > 0 ? rotated : head_dim) / 2), stride_(head_dim), inv_freq_(static_cast<std::size_t>(half_)) {
        const index_t d = 2 * half_;
        for (index_t i = 0; i < half_; ++i) {
            const float exponent = static_cast<float>(2 * i) / static_cast<float>(d);
            inv_freq_[static_cast<std::size_t>(i)] = 1.0f / static_cast<float>(std::pow(theta, static_cast<double>(exponent)));
        }
    }

    /// Gemma's rotary (transformers' "default" and "proportional" rope): pairs (i, i + head_dim/2)
    /// for every i < head_dim/2, inv_freq[i] = 1 / theta^(2i / head_dim) / factor for i < pairs and 0
    /// beyond (those pairs stay as they are: cos 1, sin 0).
    [[nodiscard]] static rotary gemma(index_t head_dim, double theta, index_t pairs, double factor) {
        rotary r;
        r.half_ = head_dim / 2;
        r.stride_ = head_dim;
        r.inv_freq_.assign(static_cast<std::size_t>(r.half_), 0.f);
        for (index_t i = 0; i < std::min(pairs, r.half_); ++i) {
            const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
            const float inv = 1.0f / static_cast<float>(std::pow(theta, static_cast<double>(exponent)));
            r.inv_freq_[static_cast<std::size_t>(i)] = inv / static_cast<float>(factor);
        }
        return r;
    }

    /// cos and sin tables for `positions` (rows of d/2 floats each).
    void tables(const std::vector<index_t>& positions, std::vector<float>& cos_out, std::vector<float>& sin_out) const {
        const std::size_t h = static_cast<std::size_t>(half_);
        cos_out.resize(positions.size() * h);
        sin_out.resize(positions.size() * h);
        for (std::size_t r = 0; r < positions.size(); ++r)
            for (std::size_t i = 0; i < h; ++i) {
                // The angle is an f32 product, as in the reference implementations.
                const float angle = static_cast<float>(positions[r]) * inv_freq_[i];
                cos_out[r * h + i] = static_cast<float>(std::cos(static_cast<double>(angle)));
                sin_out[r * h + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
            }
    }

    /// Rotates `heads` consecutive heads of each row in place.
    void apply(index_t rows, float* x, std::ptrdiff_t ldx, index_t heads, const float* cos_t, const float* sin_t) const {
        const index_t h = half_, d = stride_;
        const kernel_table& kt = kernels();
        for_rows(rows, static_cast<double>(heads) * d, [&](index_t r) {
            for (index_t head = 0; head < heads; ++head) kt.rotate_half(x + r * ldx + head * d, cos_t + r * h, sin_t + r * h, h);
        });
    }

private:
    index_t half_ = 0, stride_ = 0;
    std::vector<float> inv_freq_;
};

/// out[r][i] = silu(gate[r][i]) · up[r][i] with gate = in[r][0, width), up = in[r][width, 2·width).
inline void silu_gate(index_t rows, index_t width, const float* in, std::ptrdiff_t ldi, float* out, std::ptrdiff_t ldo) {
    const kernel_table& kt = kernels();
    for_rows(rows, 20.0 * width, [&](index_t r) { kt.silu_gate(in + r * ldi, in + r * ldi + width, out + r * ldo, width); });
}

/// out[r][i] = gelu_tanh(gate[r][i]) · up[r][i] with gate = in[r][0, width), up = in[r][width, 2·width):
/// GELU's tanh form as PyTorch's gelu(approximate="tanh") computes it in f32,
/// 0.5 · x · (1 + tanh(sqrt(2/π) · (x + 0.044715 · x³))) (Gemma's gelu_pytorch_tanh).
inline void gelu_tanh_gate(index_t rows, index_t width, const float* in, std::ptrdiff_t ldi, float* out, std::ptrdiff_t ldo) {
    for_rows(rows, 30.0 * width, [&](index_t r) {
        const float* g = in + r * ldi;
        const float* u = g + width;
        float* o = out + r * ldo;
        constexpr float k_beta = 0.7978845608028654f, k_kappa = 0.044715f;  // sqrt(2/π)
        for (index_t i = 0; i < width; ++i) {
            const float x = g[i], inner = k_beta * (x + k_kappa * x * x * x);
            o[i] = 0.5f * x * (1.f + std::tanh(inner)) * u[i];
        }
    });
}

/// y[r] += d[r] for rows of `width` floats.
inline void add_rows(index_t rows, index_t width, float* y, std::ptrdiff_t ldy, const float* d, std::ptrdiff_t ldd) {
    for_rows(rows, width, [&](index_t r) {
        float* yr = y + r * ldy;
        const float* dr = d + r * ldd;
        for (index_t i = 0; i < width; ++i) yr[i] += dr[i];
    });
}

}  // namespace dlm::cpu
