// Helpers of the CPU kernel tests (test_kernels, test_attention_kernels, test_quant): random
// operands, bitwise comparison, a scope that runs its body on one instruction set, and a loop over
// every path the CPU has (the AMX kernels on the model of the tile instructions among them).
#pragma once

#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

#include <dlm/cpu/dispatch.hpp>

#include "amx_model.hpp"

namespace dlm_test {

/// n values uniform in [-1, 1), the same for a seed on every machine.
inline std::vector<float> random_values(std::size_t n, unsigned seed) {
    std::mt19937 g(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = u(g);
    return v;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// Runs the kernels of `i` until the scope ends, then those the CPU's detection picks.
struct isa_scope {
    explicit isa_scope(dlm::cpu::isa i) { dlm::cpu::set_isa(i); }
    ~isa_scope() { dlm::cpu::set_isa(dlm::cpu::detect_isa()); }
    isa_scope(const isa_scope&) = delete;
    isa_scope& operator=(const isa_scope&) = delete;
};

/// Runs `check(name)` on every path the CPU has, each made the active kernels in turn, and, where
/// the CPU has no AMX but AVX-512 BF16, once more on the AMX kernels over the model of the tile
/// instructions (amx_model.cpp, "amx (tile model)"); then the CPU's best again.
template <class F>
void for_each_path(F&& check) {
    for (dlm::cpu::isa path : dlm::cpu::runnable_isas()) {
        dlm::cpu::set_isa(path);
        check(dlm::cpu::isa_name(path));
    }
    dlm::cpu::set_isa(dlm::cpu::detect_isa());
#if defined(__x86_64__)
    if (dlm::cpu::detect_isa() != dlm::cpu::isa::amx && amx_model::runnable()) {
        const amx_model::scope on;
        check("amx (tile model)");
    }
#endif
}

}  // namespace dlm_test
