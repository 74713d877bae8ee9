// tests/support/drafts.hpp — a step callback that records a uniform-state decode's drafts, as the
// DiffusionGemma trajectory fixtures hold them (tools/make_diffusion_gemma_fixtures.py).
#pragma once

#include <cstddef>
#include <vector>

#include <dlm/core/result.hpp>

namespace dlm_test {

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
