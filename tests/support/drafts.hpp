// tests/support/drafts.hpp — replaying the DiffusionGemma trajectory fixtures
// (tools/make_diffusion_gemma_fixtures.py): the schedule their settings describe, and a step callback
// that records a uniform-state decode's drafts as they hold them.
#pragma once

#include <cstddef>
#include <vector>

#include <nlohmann/json.hpp>

#include <dlm/core/result.hpp>
#include <dlm/schedule/entropy_bound.hpp>

namespace dlm_test {

/// The entropy-bound schedule of a trajectory fixture's "settings" (the reference's defaults where absent).
inline dlm::entropy_bound_schedule trajectory_schedule(const nlohmann::json& s) {
    dlm::entropy_bound_schedule schedule;
    schedule.threshold = s.value("entropy_bound", 0.1);
    schedule.steps = s.value("max_denoising_steps", 48);
    schedule.t_min = s.value("t_min", 0.4);
    schedule.t_max = s.value("t_max", 0.8);
    schedule.confidence_threshold = s.value("confidence_threshold", 0.005);
    return schedule;
}

/// After every step, the first `width` slots of the active block (its draft) appended to `drafts`.
inline dlm::step_callback record_drafts(std::vector<std::vector<dlm::index_t>>& drafts, std::size_t width) {
    return [&drafts, width](const dlm::step_event& ev) {
        const auto first = static_cast<std::ptrdiff_t>(ev.layout.first_slot(ev.cursor.block) - ev.layout.prompt_length);
        const auto& tok = ev.result->tokens;
        drafts.emplace_back(tok.begin() + first, tok.begin() + first + static_cast<std::ptrdiff_t>(width));
        return dlm::step_action::proceed;
    };
}

}  // namespace dlm_test
