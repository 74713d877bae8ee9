// dlm/registry/describe.hpp — one line saying what a preset (or a composition) decodes with: the options its policies
// have, and their values ("cdlm: gen 48, block 8, threshold 0.9").
#pragma once

#include <cstdio>
#include <string>

#include "../cache/concept.hpp"
#include "../schedule/concept.hpp"
#include "compose.hpp"
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

/// ", sub-blocks of 8 with the sub-block cache" for a schedule with sub-blocks; "" otherwise.
template <class Schedule, class Cache>
[[nodiscard]] std::string sub_blocks_said() {
    std::string out;
    if constexpr (schedule_has_sub_block<Schedule>) {
        out += ", sub-blocks of " + std::to_string(Schedule{}.sub_block);
        if constexpr (requires(Cache c) { c.sub_block; }) out += " with the sub-block cache";
    }
    return out;
}

/// `head` (a name), then the options `a` says the policies have and their values in `s`, the
/// sampling ones only where they are not neutral; `sub_blocks` (sub_blocks_said) after the steps.
[[nodiscard]] inline std::string describe_options(std::string head, const accepted& a, const settings& s, const std::string& sub_blocks) {
    using O = option;
    std::string out = std::move(head) + ": gen " + std::to_string(s.gen_length);
    if (a.takes(O::block_length)) out += ", block " + std::to_string(s.block_length);
    if (a.takes(O::steps) && a.steps_in_all) out += ", steps " + std::to_string(s.steps);
    if (a.takes(O::algorithm)) out += ", " + std::string(name_of(s.alg));
    if (a.takes(O::eps)) out += ", eps " + detail::number(s.eps);
    if (a.takes(O::alg_temp) && s.alg_temp > 0) out += ", alg-temp " + detail::number(s.alg_temp);
    if (a.takes(O::steps) && !a.steps_in_all) out += ", steps " + std::to_string(s.steps) + " per block";
    out += sub_blocks;
    if (a.takes(O::threshold)) out += ", threshold " + detail::number(s.threshold);
    if (a.takes(O::editing_threshold)) out += ", editing threshold " + detail::number(s.editing_threshold);
    if (a.takes(O::temperature) && s.temperature > 0) out += ", temp " + detail::number(s.temperature);
    if (a.takes(O::top_k) && s.top_k > 0) out += ", top-k " + std::to_string(s.top_k);
    if (a.takes(O::top_p) && s.top_p < 1) out += ", top-p " + detail::number(s.top_p);
    return out;
}

/// The settings that matter for preset s.preset of `t` (or composition s.composed), in one line: only
/// the options its policies have, and the sampling ones only where they are not neutral.
template <class Table>
[[nodiscard]] std::string describe(const Table& t, const settings& s) {
    std::string sub_blocks;
    if (s.composed) {
        with_policy<axis::schedule>(s.composed->schedule, [&]<class S>(std::type_identity<S>) {
            with_policy<axis::cache>(s.composed->cache, [&]<class C>(std::type_identity<C>) { sub_blocks = sub_blocks_said<S, C>(); });
        });
        return describe_options(name_of(*s.composed), accepted_by(*s.composed), s, sub_blocks);
    }
    visit<any_model>(t, s.preset, [&]<class D>(std::type_identity<D>) {
        sub_blocks = sub_blocks_said<typename policies_of<D>::schedule, typename policies_of<D>::cache>();
    });
    return describe_options(std::string(t.name_of(s.preset)), t.accepts(s.preset), s, sub_blocks);
}

}  // namespace dlm::registry
