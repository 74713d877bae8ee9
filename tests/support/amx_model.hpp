// tests/support/amx_model.hpp — the AMX kernels on a software model of the tile instructions
// (amx_model.cpp says what the model does): its kernel table, and a scope that makes it the active
// one. Declarations only: the suites never compile the kernels themselves (amx_model.cpp says why).
#pragma once

#if defined(__x86_64__)

#include <atomic>

#include <dlm/cpu/dispatch.hpp>
#include <dlm/cpu/kernels/table.hpp>

namespace dlm_test::amx_model {

/// The AMX kernels' table over the model (amx_model.cpp).
[[nodiscard]] const dlm::cpu::kernel_table& table() noexcept;

/// Whether the kernels around the model can run here (their epilogues are avx512-bf16's).
inline bool runnable() noexcept { return static_cast<int>(dlm::cpu::detect_isa()) >= static_cast<int>(dlm::cpu::isa::avx512_bf16); }

/// Makes the modelled AMX kernels the active ones for its lifetime (the dispatcher's table), and
/// the CPU's best again after.
struct scope {
    scope() {
        dlm::cpu::set_isa(dlm::cpu::isa::avx512_bf16);
        dlm::cpu::detail::state().table.store(&table(), std::memory_order_release);
    }
    ~scope() { dlm::cpu::set_isa(dlm::cpu::detect_isa()); }
    scope(const scope&) = delete;
    scope& operator=(const scope&) = delete;
};

}  // namespace dlm_test::amx_model

#endif
