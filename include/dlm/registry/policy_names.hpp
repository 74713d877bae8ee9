// dlm/registry/policy_names.hpp — the policy name table: every shipped mask, cache, schedule and
// sampler by name, with one line each, so a program can compose a decoder at run time
// (registry/compose.hpp) the way it picks a preset by name (registry/table.hpp).
//
//   dlm::registry::schedules.find("threshold");        // its index in the schedule list
//   dlm::registry::schedules.description_of(i);        // "Fast-dLLM's threshold rule: ..."
//   using S = decltype(dlm::registry::schedules)::type<3>;   // the policy type of row 3
//
// A row is a policy type and its name; what it accepts is read from the type (registry/policies.hpp),
// as for a preset. Every policy a builtin preset names is in the table (checked below), so a preset's
// policies can be spelled by name.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "policies.hpp"
#include "table.hpp"

namespace dlm::registry {

/// The four policy axes of a decoder.
enum class axis { mask, cache, schedule, sampler };
inline constexpr std::array<std::string_view, 4> axis_names = {"mask", "cache", "schedule", "sampler"};

[[nodiscard]] constexpr std::string_view name_of(axis a) noexcept { return axis_names[static_cast<std::size_t>(a)]; }

/// One row of a policy list: its name (snake_case; "-" is read as "_") and one line on what it is.
template <class P>
struct named_policy {
    std::string_view name;
    std::string_view description;
};

/// The named policies of one axis, in order; an index into it is a policy at run time.
template <axis A, class... P>
class policy_list {
public:
    static constexpr std::size_t size = sizeof...(P);
    static constexpr registry::axis which = A;
    using types = std::tuple<P...>;
    template <std::size_t I>
    using type = std::tuple_element_t<I, types>;

    constexpr explicit policy_list(named_policy<P>... rows) : names_{rows.name...}, descriptions_{rows.description...} {}

    [[nodiscard]] constexpr std::string_view name_of(std::size_t i) const { return names_[i]; }
    [[nodiscard]] constexpr std::string_view description_of(std::size_t i) const { return descriptions_[i]; }
    /// What the policy of row i accepts (its own options; registry/policies.hpp).
    [[nodiscard]] static constexpr accepted accepts(std::size_t i) {
        constexpr std::array<accepted, size> all{accepted_by_policy<P>()...};
        return all[i];
    }
    /// A row by name ("approx_prefix" or "approx-prefix").
    [[nodiscard]] std::optional<std::size_t> find(std::string_view name) const {
        std::string n(name);
        for (char& c : n)
            if (c == '-') c = '_';
        for (std::size_t i = 0; i < size; ++i)
            if (names_[i] == n) return i;
        return std::nullopt;
    }
    /// The row of policy type T; `size` when T is not in the list.
    template <class T>
    [[nodiscard]] static constexpr std::size_t index_of() noexcept {
        constexpr std::array<bool, size> same{std::is_same_v<T, P>...};
        for (std::size_t i = 0; i < size; ++i)
            if (same[i]) return i;
        return size;
    }
    /// The names, comma-separated.
    [[nodiscard]] std::string list() const {
        std::string s;
        for (auto n : names_) s += (s.empty() ? "" : ", ") + std::string(n);
        return s;
    }

private:
    std::array<std::string_view, size> names_;
    std::array<std::string_view, size> descriptions_;
};

// clang-format off
inline constexpr policy_list<axis::mask, causal_mask, block_causal_mask, semi_ar_mask, bidirectional_mask, aligned_block_diffusion_mask> masks{
    {"causal", "each position attends to itself and earlier ones (autoregressive; blocks of 1)"},
    {"block_causal", "full attention inside a block, causal across blocks (CDLM): committed K/V are final"},
    {"semi_ar", "bidirectional attention over the whole canvas, decoded in semi-autoregressive blocks (LLaDA's block_length)"},
    {"bidirectional", "bidirectional attention, the whole generation one block (Dream)"},
    {"aligned_block_diffusion", "block-causal blocks laid from position 0, the prompt's last block shared with the first slots (SDAR, LLaDA2, Fast-dLLM v2)"},
};
inline constexpr policy_list<axis::cache, no_cache, prefix_cache, approx_prefix_cache, dual_cache, sub_block_cache> caches{
    {"none", "no cache: every forward recomputes the whole canvas"},
    {"prefix", "exact prefix cache: finished blocks' K/V stored once and reused (needs a mask whose committed K/V are final)"},
    {"approx_prefix", "Fast-dLLM's approximate prefix cache, refreshed by a full forward at each block start"},
    {"dual", "Fast-dLLM's dual cache: prefix and suffix cached, refreshed at each block start"},
    {"sub_block", "Fast-dLLM v2's approximate sub-block cache over the exact block cache (sub-blocks of 8)"},
};
inline constexpr policy_list<axis::schedule, next_slot_schedule, llada_schedule, dream_schedule, threshold_schedule, factor_schedule,
                             cdlm_schedule, cd4lm_schedule, dynamic_threshold_schedule, llada2_schedule, sub_block_threshold_schedule,
                             llada21_schedule, llada21_speedy_schedule, cdlm_editing_schedule, fast_dllm_editing_schedule,
                             entropy_bound_schedule> schedules{
    {"next_slot", "commit the next slot each forward (autoregressive); stop at EOS"},
    {"llada", "LLaDA: fixed steps over all blocks, low-confidence or random remasking"},
    {"dream", "Dream's timestep schedule k = n_mask(1 - s/t) with its ranking algorithms"},
    {"threshold", "Fast-dLLM's threshold rule: every slot with p >= threshold, at least the most confident one"},
    {"factor", "Fast-dLLM's factor rule: walk the ranks while (n + 1)(1 - c_n) <= f (f = 1)"},
    {"cdlm", "CDLM: the threshold rule, stopping after a block that holds EOS"},
    {"cd4lm", "CD4LM's confidence-adaptive decoding: threshold, 1 to 32 tokens a step, EOS guard"},
    {"dynamic_threshold", "SDAR's low_confidence_dynamic: planned steps per block with a threshold; stop at EOS"},
    {"llada2", "LLaDA2.0: steps per block with threshold 0.95; stop at EOS"},
    {"sub_block_threshold", "Fast-dLLM v2: sub-blocks of 8 decoded with the threshold rule; stop at EOS"},
    {"llada21", "LLaDA 2.1 Quality: token editing, fills above 0.7, edits above 0.5 (revises filled slots)"},
    {"llada21_speedy", "LLaDA 2.1 Speedy: token editing, fills above 0.5, edits above 0.0 (revises filled slots)"},
    {"cdlm_editing", "the threshold rule with token editing (fill and edit above 0.9), stop at EOS (revises filled slots)"},
    {"fast_dllm_editing", "the threshold rule with token editing (fill and edit above 0.9) (revises filled slots)"},
    {"entropy_bound", "DiffusionGemma's uniform-state denoising: entropy-bound acceptance, temperature ramp, stable-and-confident stop "
                      "(uniform-state models only: the diffusion-gemma preset; not composable by name)"},
};
inline constexpr policy_list<axis::sampler, greedy_sampler, categorical_sampler, llada_sampler, sdar_sampler, llada2_sampler> samplers{
    {"greedy", "the argmax; confidence from the softmax"},
    {"categorical", "temperature, top-p and top-k sampling, Dream's order (greedy over the filtered logits at temperature 0)"},
    {"llada", "LLaDA's Gumbel-max sampling in float64 (greedy at temperature 0)"},
    {"sdar", "SDAR's sampling: temperature 1, top-k then top-p, confidence from the filtered distribution"},
    {"llada2", "LLaDA2's and Fast-dLLM v2's sampling: top-k then top-p; at temperature 0 the argmax of the unfiltered softmax"},
};
// clang-format on

/// The list of axis `A`.
template <axis A>
[[nodiscard]] constexpr const auto& policies_on() noexcept {
    if constexpr (A == axis::mask) return masks;
    else if constexpr (A == axis::cache) return caches;
    else if constexpr (A == axis::schedule) return schedules;
    else return samplers;
}

namespace detail {

template <class D>
inline constexpr bool named_in_table = masks.index_of<typename policies_of<D>::mask>() < masks.size &&
                                       caches.index_of<typename policies_of<D>::cache>() < caches.size &&
                                       schedules.index_of<typename policies_of<D>::schedule>() < schedules.size &&
                                       samplers.index_of<typename policies_of<D>::sampler>() < samplers.size;

template <class Table, std::size_t... I>
constexpr bool all_named(std::index_sequence<I...>) {
    return (named_in_table<typename Table::template row<I>::template decoder_type<any_model>> && ...);
}

}  // namespace detail

static_assert(detail::all_named<std::remove_cvref_t<decltype(builtin)>>(std::make_index_sequence<decltype(builtin)::size>{}),
              "every policy of a builtin preset must have a row in the policy name table (registry/policy_names.hpp)");

/// The composition of preset `id`'s own policies (their rows in the table).
template <class Table>
[[nodiscard]] composition composition_of(const Table& t, preset_id id) {
    return visit<any_model>(t, id, [&]<class D>(std::type_identity<D>) {
        using P = policies_of<D>;
        return composition{masks.index_of<typename P::mask>(), caches.index_of<typename P::cache>(),
                           schedules.index_of<typename P::schedule>(), samplers.index_of<typename P::sampler>()};
    });
}

/// Calls f(std::integral_constant<std::size_t, I>{}) for the I == i below N (nothing when i >= N).
template <std::size_t N, class F>
void with_index(std::size_t i, F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
        (void)((i == I ? (f(std::integral_constant<std::size_t, I>{}), true) : false) || ...);
    }(std::make_index_sequence<N>{});
}

/// Calls f(std::type_identity<P>{}) with P the policy type of row i of axis A's list.
template <axis A, class F>
void with_policy(std::size_t i, F&& f) {
    using list = std::remove_cvref_t<decltype(policies_on<A>())>;
    with_index<list::size>(i, [&](auto I) { f(std::type_identity<typename list::template type<decltype(I)::value>>{}); });
}

}  // namespace dlm::registry
