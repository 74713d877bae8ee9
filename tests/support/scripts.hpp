// Scripts for dlm::testing::scripted_model used across the decoder tests.
#pragma once

#include <cstdint>
#include <dlm/testing/scripted_model.hpp>
#include <utility>
#include <vector>

namespace dlm_test {

using dlm::index_t;
using dlm::token_id;
using dlm::testing::script_view;

/// An oracle: slot g of the generation is predicted as answer[g] with probability confidence[g],
/// whatever the context. Rows that predict no slot get a uniform distribution.
inline dlm::testing::script oracle(std::vector<token_id> answer, std::vector<double> confidence) {
    return [answer = std::move(answer), confidence = std::move(confidence)](const script_view& v, std::span<float> out) {
        const index_t slot = v.row + (v.layout.shift ? 1 : 0) - v.layout.prompt_length;
        if (slot < 0 || slot >= static_cast<index_t>(answer.size())) {
            for (auto& x : out) x = 0.f;
            return;
        }
        dlm::testing::peaked_logits(out, answer[static_cast<std::size_t>(slot)], confidence[static_cast<std::size_t>(slot)]);
    };
}

/// Logits that are a pseudo-random function of the row and of everything it attends to, so the mask,
/// the cache and the committed tokens all change the outcome.
inline dlm::testing::script context_hash(float scale = 6.f) {
    return [scale](const script_view& v, std::span<float> out) {
        std::uint64_t h = 1469598103934665603ull ^ static_cast<std::uint64_t>(v.row);
        for (token_id t : v.visible) h = (h ^ static_cast<std::uint64_t>(t + 2)) * 1099511628211ull;
        for (std::size_t i = 0; i < out.size(); ++i) {
            std::uint64_t z = h + 0x9E3779B97F4A7C15ull * (i + 1);
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
            z ^= z >> 31;
            out[i] = scale * static_cast<float>(static_cast<double>(z >> 11) * 0x1.0p-53);
        }
    };
}

}  // namespace dlm_test
