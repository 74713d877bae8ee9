// dlm/cpu/kernels/pack.hpp — how the products' A operand (the activations) is packed: the
// layout every kernel family names with its a_format (table.hpp), and the value conversions (bf16
// rounding). Plain templates, no instruction-set code: pack_a is the layout's definition, in scalar
// code; the kernels pack with vectorized packers that write the same elements (pack_body.inl for
// every path, amx_body.inl's pack_bf16 for AMX tiles), held to pack_a by test_kernels.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../../core/config.hpp"
#include "../../core/error.hpp"
#include "../../io/dtype.hpp"

namespace dlm::cpu {

/// bfloat16 bits of `x` as the bf16 products take it: round to nearest even, subnormals to zero
/// (vdpbf16ps treats subnormal inputs as zero; flushing them first makes every path agree).
[[nodiscard]] constexpr std::uint16_t to_bf16_daz(float x) noexcept {
    const std::uint16_t h = io::f32_to_bf16(x);
    return (h & 0x7f80u) == 0 ? static_cast<std::uint16_t>(h & 0x8000u) : h;
}

/// Elements of A[m × k] packed in tiles of `mr` rows and k-groups of `group`.
[[nodiscard]] inline std::size_t packed_a_size(index_t m, index_t k, int mr, int group) noexcept {
    const std::size_t tiles = static_cast<std::size_t>((m + mr - 1) / mr);
    return tiles * static_cast<std::size_t>(mr) * static_cast<std::size_t>((k + group - 1) / group * group);
}

/// Packs A[m × k] (rows `lda` apart) for the kernels: tiles of `mr` rows; within a tile, k-group t
/// of row r at (t · mr + r) · group; rows past m and k past its end are zero. `convert` maps each
/// value to the stored element (identity, bf16 rounding, bf16 bits).
template <class T, class Convert>
void pack_a(index_t m, index_t k, const float* a, std::ptrdiff_t lda, int mr, int group, T* out, Convert convert) {
    const index_t tiles = (m + mr - 1) / mr, kg = (k + group - 1) / group;
    const std::ptrdiff_t tile_elements = static_cast<std::ptrdiff_t>(mr) * kg * group;
    [[maybe_unused]] const bool parallel = tiles > 1 && static_cast<double>(m) * k > 1e6;
    // Written in output order with the group size a constant: no division per element (an index
    // k / group, k % group per element made packing a fifth of a small model's forward).
    auto pack = [&]<int G>(std::integral_constant<int, G>) {
        const index_t full = k / G;  // k-groups without padding
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (parallel)
#endif
        for (index_t tile = 0; tile < tiles; ++tile) {
            T* o = out + tile * tile_elements;
            const index_t rows = std::min<index_t>(mr, m - tile * mr);
            for (index_t t = 0; t < kg; ++t)
                for (int r = 0; r < mr; ++r, o += G) {
                    const float* src = a + (tile * mr + r) * lda + t * G;
                    for (int e = 0; e < G; ++e) o[e] = r < rows && (t < full || t * G + e < k) ? convert(src[e]) : T{};
                }
        }
    };
    if (group == 2) pack(std::integral_constant<int, 2>{});
    else if (group == 1) pack(std::integral_constant<int, 1>{});
    else if (group == 32) pack(std::integral_constant<int, 32>{});
    else throw contract_error("cpu::pack_a: k-groups of " + std::to_string(group) + " elements; the kernels use 1, 2 or 32");
}

namespace detail {
// Function objects, not function pointers: pack_a inlines them (a pointer cost 9 % of a forward).
struct identity {
    float operator()(float x) const noexcept { return x; }
};
struct bf16_value {
    float operator()(float x) const noexcept { return io::bf16_to_f32(to_bf16_daz(x)); }
};
struct bf16_bits {
    std::uint16_t operator()(float x) const noexcept { return to_bf16_daz(x); }
};
}  // namespace detail


}  // namespace dlm::cpu
