// dlm/registry/describe.hpp — one line saying what a preset decodes with: the options its policies
// have, and their values ("cdlm: gen 48, block 8, threshold 0.9").
#pragma once

#include <cstdio>
#include <string>

#include "../cache/concept.hpp"
#include "../schedule/concept.hpp"
#include "policies.hpp"
#include "settings.hpp"
#include "table.hpp"

namespace dlm::registry {

namespace detail {

[[nodiscard]] inline std::string number(double d) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", d);
    return b;
}

}  // namespace detail

/// The settings that matter for preset s.preset of `t`, in one line: only the options its policies
/// have, and the sampling ones only where they are not neutral.
template <class Table>
[[nodiscard]] std::string describe(const Table& t, const settings& s) {
    const accepted a = t.accepts(s.preset);
    using O = option;
    std::string out = std::string(t.name_of(s.preset)) + ": gen " + std::to_string(s.gen_length);
    if (a.takes(O::block_length)) out += ", block " + std::to_string(s.block_length);
    if (a.takes(O::steps) && a.steps_in_all) out += ", steps " + std::to_string(s.steps);
    if (a.takes(O::algorithm)) out += ", " + std::string(name_of(s.alg));
    if (a.takes(O::eps)) out += ", eps " + detail::number(s.eps);
    if (a.takes(O::alg_temp) && s.alg_temp > 0) out += ", alg-temp " + detail::number(s.alg_temp);
    if (a.takes(O::steps) && !a.steps_in_all) out += ", steps " + std::to_string(s.steps) + " per block";
    visit<any_model>(t, s.preset, [&]<class D>(std::type_identity<D>) {
        using P = policies_of<D>;
        if constexpr (schedule_has_sub_block<typename P::schedule>) {
            out += ", sub-blocks of " + std::to_string(typename P::schedule{}.sub_block);
            if constexpr (requires(typename P::cache c) { c.sub_block; }) out += " with the sub-block cache";
        }
    });
    if (a.takes(O::threshold)) out += ", threshold " + detail::number(s.threshold);
    if (a.takes(O::editing_threshold)) out += ", editing threshold " + detail::number(s.editing_threshold);
    if (a.takes(O::temperature) && s.temperature > 0) out += ", temp " + detail::number(s.temperature);
    if (a.takes(O::top_k) && s.top_k > 0) out += ", top-k " + std::to_string(s.top_k);
    if (a.takes(O::top_p) && s.top_p < 1) out += ", top-p " + detail::number(s.top_p);
    return out;
}

}  // namespace dlm::registry
