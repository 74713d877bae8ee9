// dlm/core/rng.hpp — counter-based random numbers (Philox4x32-10).
//
// Every random draw in dlm is a pure function of (seed, stream, step, position, index). Nothing depends
// on the order in which draws are made, so a sequence decodes identically alone or inside a batch, on
// any number of threads, and the CUDA backend draws the very same numbers as the CPU.
#pragma once

#include <cstdint>

#include "config.hpp"

namespace dlm {

/// What a random draw is for; each purpose gets an independent stream.
enum class rng_stream : std::uint32_t {
    sampling = 0,   ///< token sampling noise (one uniform per vocabulary entry)
    remasking = 1,  ///< random confidences (LLaDA "random" remasking)
    transfer = 2,   ///< per-slot transfer coin flips (Dream "origin")
    selection = 3,  ///< sampling which slots to commit (Dream alg_temp)
    noise = 4,      ///< uniform-state diffusion: the random token a slot holds before a forward
};

namespace detail {

DLM_HOST_DEVICE constexpr void philox_round(std::uint32_t (&c)[4], std::uint32_t k0, std::uint32_t k1) noexcept {
    constexpr std::uint64_t m0 = 0xD2511F53u, m1 = 0xCD9E8D57u;
    const std::uint64_t p0 = m0 * c[0], p1 = m1 * c[2];
    const auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    const auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    const std::uint32_t n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
    c[0] = n0;
    c[1] = lo1;
    c[2] = n2;
    c[3] = lo0;
}

}  // namespace detail

/// Philox4x32-10 (Salmon et al., SC'11): 128-bit counter, 64-bit key.
DLM_HOST_DEVICE constexpr void philox4x32(std::uint32_t (&counter)[4], std::uint64_t key) noexcept {
    auto k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
    for (int r = 0; r < 10; ++r) {
        detail::philox_round(counter, k0, k1);
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
}

/// The coordinates of one family of draws: a seed, a purpose, the sequence's forward index and a
/// canvas position. `uniform(i)` is then the i-th draw of that family.
struct random_key {
    std::uint64_t seed = 0;
    rng_stream stream = rng_stream::sampling;
    index_t step = 0;
    index_t position = 0;

    /// A double uniformly distributed in the open interval (0, 1), with 53 random bits.
    [[nodiscard]] DLM_HOST_DEVICE constexpr double uniform(std::uint32_t i) const noexcept {
        std::uint32_t c[4] = {i, static_cast<std::uint32_t>(position), static_cast<std::uint32_t>(step),
                              static_cast<std::uint32_t>(stream)};
        philox4x32(c, seed);
        return unit_interval((static_cast<std::uint64_t>(c[0]) << 21) ^ (c[1] >> 11));  // 53 bits
    }

    /// (bits + 1/2) / 2^53 for the low 53 bits: in [2^-54, 1 - 2^-53]. The sum rounds to even above
    /// 2^52, so the largest bits would give exactly 1 (Gumbel noise -log(-log u) = +inf); that one draw
    /// is held at 1 - 2^-53, every other is unchanged. The noise is at most 36.74.
    [[nodiscard]] DLM_HOST_DEVICE static constexpr double unit_interval(std::uint64_t bits) noexcept {
        const double u = (static_cast<double>(bits & ((std::uint64_t{1} << 53) - 1)) + 0.5) * 0x1.0p-53;
        return u < 1.0 ? u : 0x1.fffffffffffffp-1;
    }
};

/// Uniform-state diffusion's noise: the token slot `position` holds before forward `forward` (a block's
/// initial canvas, or a slot the last step did not accept), uniform over [0, vocab).
[[nodiscard]] DLM_HOST_DEVICE constexpr token_id uniform_noise(std::uint64_t seed, index_t forward, index_t position, index_t vocab) noexcept {
    const double u = random_key{seed, rng_stream::noise, forward, position}.uniform(0);
    const auto t = static_cast<token_id>(u * static_cast<double>(vocab));
    return t < vocab ? t : vocab - 1;
}

}  // namespace dlm
