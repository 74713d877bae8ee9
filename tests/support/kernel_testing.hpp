// Helpers of the CPU kernel tests (test_kernels, test_attention_kernels): random operands, bitwise
// comparison, and a scope that runs its body on one instruction set.
#pragma once

#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

#include <dlm/cpu/dispatch.hpp>

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

}  // namespace dlm_test
