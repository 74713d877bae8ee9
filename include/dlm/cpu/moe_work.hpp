// dlm/cpu/moe_work.hpp — the work buffers of a mixture-of-experts layer's forward (moe.hpp): one
// set per model, shared by its MoE layers, which run in turn.
#pragma once

#include <cstdint>
#include <vector>

#include "../core/config.hpp"
#include "simd.hpp"

namespace dlm::cpu {

/// A mixture-of-experts layer's work buffers over a forward's rows: one set for all of a model's MoE
/// layers, which run in turn (the model owns it and passes it to each layer's forward).
struct moe_work {
    std::vector<float, aligned_allocator<float>> logits, gathered, out, shared;
    std::vector<index_t> picks, slot, offsets, active;
    std::vector<float> weights;
    /// The bytes these buffers hold now (capacities).
    [[nodiscard]] std::uint64_t bytes_held() const noexcept {
        std::uint64_t floats = weights.capacity();
        for (const auto* b : {&logits, &gathered, &out, &shared}) floats += b->capacity();
        std::uint64_t ids = 0;
        for (const auto* b : {&picks, &slot, &offsets, &active}) ids += b->capacity();
        return floats * sizeof(float) + ids * sizeof(index_t);
    }
};

}  // namespace dlm::cpu
