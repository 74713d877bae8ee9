// cli/bounds.hpp — the values each decoding option may take where a user types it: the flags of
// dlm-generate, dlm-eval and dlm-server (options.hpp) and the keyword arguments of the Python package
// (python/src/module.cpp exports this table as dlm._dlm.option_bounds()), so that both refuse the
// same values with the same range. The policies' own rules (a block length that divides the
// generation length, steps a multiple of the blocks) are the registry's (dlm/registry/validate.hpp).
#pragma once

#include <limits>
#include <string>

#include <dlm/core/config.hpp>
#include <dlm/registry/settings.hpp>
#include <dlm/registry/table.hpp>
#include <dlm/registry/validate.hpp>

namespace dlm::cli {

/// lo < x (open_lo) or lo <= x, and x < hi (open_hi) or x <= hi; `integer`: whole numbers only.
struct option_bounds {
    double lo = 0, hi = 0;
    bool open_lo = false, open_hi = false, integer = false;
};

/// The bounds of a numeric option. gen_length and block_length: at most 2^20 slots; steps: at least 1
/// (a schedule's own 0, "as many as the slots", is the library's default, not a value to type);
/// temperature: at most 1e6, beyond which sampling is uniform to float precision. seed (64-bit
/// unsigned) and algorithm (a name) are checked where they are read.
[[nodiscard]] constexpr option_bounds bounds_of(registry::option o) noexcept {
    using O = registry::option;
    constexpr double inf = std::numeric_limits<double>::infinity();
    switch (o) {
        case O::gen_length:
        case O::block_length: return {1, static_cast<double>(max_slots), false, false, true};
        case O::steps: return {1, 1 << 24, false, false, true};
        case O::top_k: return {0, std::numeric_limits<index_t>::max(), false, false, true};
        case O::threshold:
        case O::top_p: return {0, 1, true, false};
        case O::editing_threshold: return {0, 1, false, false};
        case O::eps: return {0, 1, true, true};
        case O::alg_temp: return {0, inf, false, false};
        case O::temperature: return {0, 1e6, false, false};
        case O::seed: return {0, 18446744073709551615.0, false, false, true};
        case O::algorithm: break;
    }
    return {};
}

/// The presets of the registry whose policies take option `o` ("fast-dllm, cdlm, ..."), for --help.
[[nodiscard]] inline std::string presets_taking(registry::option o) { return registry::presets_taking(registry::builtin, o); }

}  // namespace dlm::cli
