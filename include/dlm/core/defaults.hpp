// dlm/core/defaults.hpp — the decoding settings a user may leave unset, what a model suggests for
// them, and the record of where each setting of a decode came from.
//
// A setting the user sets wins; else the model's suggestion (its config.json, generation_config.json
// or tokenizer); else the library default. docs/policies.md ("Defaults and their sources") lists them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config.hpp"

namespace dlm {

/// The library defaults: generation_options' generation length, and the block length of
/// semi_ar_mask and block_causal_mask (LLaDA's example, Fast-dLLM's, CDLM's and CD4LM's evaluations).
inline constexpr index_t default_gen_length = 128;
inline constexpr index_t default_block_length = 32;

/// Where a setting of a decode came from.
enum class setting_source {
    user,     ///< generation_options or a policy's option
    model,    ///< the model (its config, generation config or tokenizer); `origin` says which key
    library,  ///< dlm's default
};

[[nodiscard]] constexpr std::string_view setting_source_name(setting_source s) noexcept {
    switch (s) {
        case setting_source::user: return "user";
        case setting_source::model: return "model";
        case setting_source::library: return "library";
    }
    return "?";
}

/// A value a model suggests, and where it says so (e.g. "models/cdlm/config.json key 'dlm_block_length'").
template <class T>
struct model_hint {
    std::optional<T> value;
    std::string origin;
};

/// What a model says about how to decode it. A model provides it through an optional member
/// `decoding_hints()` (or, for dlm's transformers, `config().decoding`); dlm::decoding_hints_of
/// finds it. Every field may be empty.
struct decoding_hints {
    model_hint<index_t> gen_length;    ///< config.json dlm_gen_length
    model_hint<index_t> block_length;  ///< config.json dlm_block_length (the block size the model was trained with)
    /// Tokens that end a chat turn without being EOS (<|eot_id|>, <|im_end|>); CD4LM defers them as EOS.
    model_hint<std::vector<token_id>> end_of_turn_ids;
    /// The checkpoint is decoded with token editing (LLaDA 2.1; io/decoding_keys.hpp says how it is told
    /// from LLaDA 2.0, whose architecture it shares): its default preset is llada21.
    model_hint<bool> token_editing;
    std::string mask_id_origin;  ///< where the model's mask_id() comes from
    std::string eos_ids_origin;  ///< where the model's eos_ids() come from
};

/// One setting of a decode, and where it came from.
template <class T>
struct resolved_setting {
    T value{};
    setting_source source = setting_source::library;
    std::string origin;  ///< the key or the reason, in words
};

/// Every setting of one sequence's decode that the user may leave to the model or the library.
struct decoding_settings {
    resolved_setting<index_t> gen_length;
    resolved_setting<index_t> block_length;
    resolved_setting<token_id> mask_id;
    resolved_setting<std::vector<token_id>> eos_ids;
    resolved_setting<std::vector<token_id>> end_of_turn_ids;
    resolved_setting<std::uint64_t> seed;
};

/// The seed of sequence `index` of a batch decoded with `seed` and no per-sequence seeds: sequence 0
/// keeps `seed` (a single prompt decodes as it always did), the others get independent seeds
/// (SplitMix64 of seed + index·φ), so identical prompts in one batch draw different samples.
[[nodiscard]] constexpr std::uint64_t sequence_seed(std::uint64_t seed, std::size_t index) noexcept {
    if (index == 0) return seed;
    std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(index);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

}  // namespace dlm
