// dlm/io/diffusion_gemma_config.hpp — DiffusionGemma's config.json (transformers'
// DiffusionGemmaConfig / DiffusionGemmaTextConfig, model_type "diffusion_gemma"), read into the sizes
// and per-layer geometry of cpu::diffusion_gemma.
//
//   const auto c = dlm::io::load_diffusion_gemma_config("path/to/folder");
//   c.layers[5].sliding, c.layers[5].head_dim, c.canvas_length
//
// The text model is Gemma 4's MoE block run in two modes (cpu/diffusion_gemma.hpp). What it reads:
//   text_config: vocab_size, hidden_size, intermediate_size (the dense MLP and the self-conditioning
//     MLP), num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim, layer_types
//     ("sliding_attention" | "full_attention"; absent: five sliding then one full, the last forced
//     full, as DiffusionGemmaTextConfig does), sliding_window, per_layer_config (per layer head_dim and
//     num_key_value_heads; absent: full layers take global_head_dim, default 512, and
//     num_global_key_value_heads), rope_parameters per layer type (rope_type "default" or
//     "proportional" with partial_rotary_factor and factor), rms_norm_eps, final_logit_softcapping,
//     num_experts, top_k_experts, moe_intermediate_size, hidden_activation (gelu_pytorch_tanh),
//     eos/bos/pad ids, max_position_embeddings, use_bidirectional_attention (null or "vision": the
//     encoder is causal over text).
//   top level: canvas_length, image/boi/eoi token ids (a prompt holding the image placeholder is
//     refused: the vision tower is not loaded), tie_word_embeddings (must be true: the head is the
//     embedding).
// Keys that only describe training or the Python object (initializer_range, attention_dropout, dtype,
// ...) are ignored by name; any other key is refused by name, so a new feature never runs silently.
#pragma once

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "config_reader.hpp"
#include "json_util.hpp"

namespace dlm::io {

/// One layer type's rotary embedding: pairs (i, i + head_dim/2) rotated by position · inv_freq[i],
/// inv_freq[i] = 1 / theta^(2i / head_dim) / factor for i < rotated_pairs, 0 beyond (identity).
/// "default": every pair; "proportional": partial_rotary_factor · head_dim / 2 of them.
struct gemma_rope {
    double theta = 10000.0;
    double factor = 1.0;
    index_t rotated_pairs = 0;
};

/// One layer's attention geometry.
struct gemma_layer {
    bool sliding = true;      ///< sliding_attention (window) or full_attention
    index_t head_dim = 0;
    index_t kv_heads = 0;
    bool k_eq_v = false;      ///< full layers: no v_proj, the values are the raw key projection
};

struct diffusion_gemma_config {
    index_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_layers = 0, num_heads = 0;
    std::vector<gemma_layer> layers;
    gemma_rope sliding_rope, full_rope;
    index_t sliding_window = 0;   ///< a sliding layer's query sees this many positions up to itself (encoder)
    double rms_norm_eps = 1e-6;
    float final_logit_softcapping = 0.f;  ///< 0: none
    index_t num_experts = 0, experts_per_token = 0, moe_intermediate_size = 0;
    index_t canvas_length = 256;
    index_t max_context = 0;
    token_id bos_id = no_token, pad_id = no_token, image_token_id = no_token;
    std::vector<token_id> eos_ids;

    [[nodiscard]] const gemma_rope& rope(const gemma_layer& l) const noexcept { return l.sliding ? sliding_rope : full_rope; }
    [[nodiscard]] index_t max_head_dim() const noexcept {
        index_t d = 0;
        for (const gemma_layer& l : layers) d = std::max(d, l.head_dim);
        return d;
    }
};

namespace detail {

/// Keys of text_config that describe training, tensor parallelism or the Python object.
inline constexpr std::string_view gemma_ignored_text_keys[] = {
    "initializer_range", "attention_dropout", "dtype", "torch_dtype", "model_type", "transformers_version", "architectures",
    "use_cache", "tie_word_embeddings", "output_hidden_states", "output_attentions", "return_dict", "keys_to_ignore_at_inference",
    "_name_or_path", "chunk_size_feed_forward", "is_encoder_decoder", "id2label", "label2id", "problem_type"};
/// Keys of text_config that dlm reads.
inline constexpr std::string_view gemma_read_text_keys[] = {
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
    "hidden_activation", "max_position_embeddings", "rms_norm_eps", "pad_token_id", "eos_token_id", "bos_token_id", "rope_parameters",
    "attention_bias", "sliding_window", "layer_types", "final_logit_softcapping", "use_bidirectional_attention", "num_experts",
    "top_k_experts", "moe_intermediate_size", "per_layer_config", "global_head_dim", "num_global_key_value_heads", "attention_k_eq_v"};

inline void check_gemma_keys(const nlohmann::json& t, const config_reader& r) {
    for (const auto& item : t.items()) {
        const std::string& key = item.key();
        auto in = [&](const auto& list) { return std::find(std::begin(list), std::end(list), key) != std::end(list); };
        if (!in(gemma_ignored_text_keys) && !in(gemma_read_text_keys))
            r.fail(key, "is not a DiffusionGemmaTextConfig key dlm knows; refusing rather than ignoring what it may change");
    }
}

inline gemma_rope parse_gemma_rope(const config_reader& r, const nlohmann::json& params, const char* type, index_t head_dim) {
    const std::string key = std::string("rope_parameters.") + type;
    if (!params.contains(type) || !params.at(type).is_object()) r.fail(key, "missing (a rope_type and rope_theta per layer type)");
    const std::string src = r.source() + " (" + key + ")";
    const config_reader p(params.at(type), src);
    for (const auto& [k, v] : params.at(type).items())
        if (k != "rope_type" && k != "rope_theta" && k != "partial_rotary_factor" && k != "factor")
            p.fail(k, "is not read by dlm's Gemma rotary embedding (rope_type, rope_theta, partial_rotary_factor, factor)");
    gemma_rope g;
    g.theta = p.number_or("rope_theta", 10000.0);
    const std::string kind = p.string_opt("rope_type").value_or("default");
    const double partial = p.number_or("partial_rotary_factor", 1.0);
    if (kind == "default") {
        if (partial != 1.0) p.fail("partial_rotary_factor", "a 'default' rope over part of the head is not Gemma's (use 'proportional')");
        if (p.has("factor")) p.fail("factor", "applies to 'proportional' rope only");
        g.rotated_pairs = head_dim / 2;
    } else if (kind == "proportional") {
        if (partial > 1.0) p.fail("partial_rotary_factor", "must be at most 1");
        g.factor = p.number_or("factor", 1.0);
        g.rotated_pairs = static_cast<index_t>(partial * static_cast<double>(head_dim) / 2.0);  // int(factor · head_dim // 2)
    } else {
        p.fail("rope_type", "'" + kind + "' is not implemented (dlm runs Gemma's 'default' and 'proportional')");
    }
    return g;
}

/// layer_types, or DiffusionGemmaTextConfig's default pattern; the last layer is full either way.
inline std::vector<gemma_layer> parse_gemma_layer_types(const config_reader& r, const nlohmann::json& t, index_t n) {
    std::vector<gemma_layer> layers(static_cast<std::size_t>(n));
    if (r.has("layer_types")) {
        const auto& a = t.at("layer_types");
        if (!a.is_array() || a.size() != static_cast<std::size_t>(n))
            r.fail("layer_types", "expected a list of " + std::to_string(n) + " layer types (num_hidden_layers), found " + json_quote(a));
        for (std::size_t i = 0; i < a.size(); ++i) {
            const std::string s = a[i].is_string() ? a[i].get<std::string>() : std::string();
            if (s != "sliding_attention" && s != "full_attention")
                r.fail("layer_types", "entry " + std::to_string(i) + " is " + json_quote(a[i]) + ", not 'sliding_attention' or 'full_attention'");
            layers[i].sliding = s == "sliding_attention";
        }
    } else {
        for (index_t i = 0; i < n; ++i) layers[static_cast<std::size_t>(i)].sliding = (i + 1) % 6 != 0;
    }
    layers.back().sliding = false;  // DiffusionGemmaTextConfig forces the last layer to full attention
    return layers;
}

/// Per-layer head_dim and kv heads: per_layer_config when present, else global_head_dim and
/// num_global_key_value_heads on the full layers (DiffusionGemmaTextConfig.__post_init__).
inline void parse_gemma_geometry(diffusion_gemma_config& c, const config_reader& r, const nlohmann::json& t) {
    const index_t head_dim = r.integer_or("head_dim", 256), kv = r.integer_or("num_key_value_heads", 4);
    for (gemma_layer& l : c.layers) {
        l.head_dim = head_dim;
        l.kv_heads = kv;
        l.k_eq_v = !l.sliding;
    }
    if (r.has("per_layer_config")) {
        const auto& p = t.at("per_layer_config");
        if (!p.is_object()) r.fail("per_layer_config", "expected an object of layer index -> overrides, found " + json_kind(p));
        for (const auto& [idx, o] : p.items()) {
            index_t i = -1;
            try {
                i = static_cast<index_t>(std::stoi(idx));
            } catch (...) {
            }
            if (i < 0 || i >= c.num_layers || std::to_string(i) != idx)
                r.fail("per_layer_config", "'" + idx + "' is not a layer index below num_hidden_layers " + std::to_string(c.num_layers));
            const std::string src = r.source() + " (per_layer_config." + idx + ")";
            const config_reader lr(o, src);
            for (const auto& [k, v] : o.items())
                if (k != "head_dim" && k != "num_key_value_heads") lr.fail(k, "dlm overrides only head_dim and num_key_value_heads per layer");
            gemma_layer& l = c.layers[static_cast<std::size_t>(i)];
            l.head_dim = lr.integer_or("head_dim", l.head_dim);
            l.kv_heads = lr.integer_or("num_key_value_heads", l.kv_heads);
        }
    } else {
        const index_t global_dim = r.integer_or("global_head_dim", 512), global_kv = r.integer_or("num_global_key_value_heads", kv);
        for (gemma_layer& l : c.layers)
            if (!l.sliding) l.head_dim = global_dim, l.kv_heads = global_kv;
    }
    // One rotary table per layer type: every layer of a type has that type's head size.
    for (const gemma_layer& l : c.layers) {
        const gemma_layer& first = *std::find_if(c.layers.begin(), c.layers.end(), [&](const gemma_layer& x) { return x.sliding == l.sliding; });
        if (l.head_dim != first.head_dim)
            r.fail("per_layer_config", "layers of one type have different head_dim (" + std::to_string(first.head_dim) + " and " +
                                           std::to_string(l.head_dim) + "); Gemma's rotary tables are per layer type");
        if (l.head_dim <= 0 || l.head_dim % 2 || l.kv_heads <= 0 || c.num_heads % l.kv_heads)
            r.fail("per_layer_config", "a layer's head_dim " + std::to_string(l.head_dim) + " must be positive and even and its " +
                                           std::to_string(l.kv_heads) + " kv heads must divide num_attention_heads " + std::to_string(c.num_heads));
    }
}

inline void parse_gemma_text(diffusion_gemma_config& c, const nlohmann::json& t, const std::string& source) {
    const std::string src = source + " (text_config)";
    const config_reader r(t, src);
    check_gemma_keys(t, r);
    c.vocab_size = r.integer_or("vocab_size", 262144);
    c.hidden_size = r.integer_or("hidden_size", 2304);
    c.intermediate_size = r.integer_or("intermediate_size", 9216);
    c.num_layers = r.integer_or("num_hidden_layers", 30);
    c.num_heads = r.integer_or("num_attention_heads", 8);
    c.max_context = r.integer_or("max_position_embeddings", 131072);
    c.rms_norm_eps = r.number_or("rms_norm_eps", 1e-6);
    c.final_logit_softcapping = static_cast<float>(r.has("final_logit_softcapping") ? r.number_or("final_logit_softcapping", 30.0) : 30.0);
    c.sliding_window = r.integer_or("sliding_window", 512);
    c.num_experts = r.integer_or("num_experts", 0);
    c.experts_per_token = r.integer_or("top_k_experts", 0);
    c.moe_intermediate_size = r.integer_or("moe_intermediate_size", 0);
    c.eos_ids = r.has("eos_token_id") ? r.token_list("eos_token_id") : std::vector<token_id>{1};
    c.bos_id = r.integer_or("bos_token_id", 2);
    c.pad_id = r.integer_or("pad_token_id", 0);
    r.require("hidden_activation", "gelu_pytorch_tanh", "Gemma's gated MLPs use the tanh approximation of GELU");
    r.require("attention_bias", false, "Gemma's projections have no biases");
    if (const auto b = r.string_opt("use_bidirectional_attention"); b && *b != "vision")
        r.fail("use_bidirectional_attention", "'" + *b + "' is not supported: dlm runs the encoder causally over text (null or 'vision')");
    for (const auto& [name, v] : {std::pair{"vocab_size", c.vocab_size}, {"hidden_size", c.hidden_size}, {"intermediate_size", c.intermediate_size},
                                   {"num_hidden_layers", c.num_layers}, {"num_attention_heads", c.num_heads}, {"sliding_window", c.sliding_window}})
        if (v <= 0) r.fail(name, "must be positive, got " + std::to_string(v));
    for (const auto& [name, v] : {std::pair{"num_experts", c.num_experts}, {"top_k_experts", c.experts_per_token}, {"moe_intermediate_size", c.moe_intermediate_size}})
        if (v <= 0) r.fail(name, "must be positive, got " + std::to_string(v) + " (every DiffusionGemma layer has experts)");
    if (c.experts_per_token > c.num_experts) r.fail("top_k_experts", "exceeds num_experts " + std::to_string(c.num_experts));
    c.layers = parse_gemma_layer_types(r, t, c.num_layers);
    parse_gemma_geometry(c, r, t);
    if (!r.has("rope_parameters") || !t.at("rope_parameters").is_object()) r.fail("rope_parameters", "missing: one entry per layer type");
    const auto& rp = t.at("rope_parameters");
    const auto sliding = std::find_if(c.layers.begin(), c.layers.end(), [](const gemma_layer& l) { return l.sliding; });
    const auto full = std::find_if(c.layers.begin(), c.layers.end(), [](const gemma_layer& l) { return !l.sliding; });
    if (sliding != c.layers.end()) c.sliding_rope = parse_gemma_rope(r, rp, "sliding_attention", sliding->head_dim);
    c.full_rope = parse_gemma_rope(r, rp, "full_attention", full->head_dim);
    for (token_id e : c.eos_ids)
        if (e < 0 || e >= c.vocab_size) r.fail("eos_token_id", std::to_string(e) + " is outside the vocabulary");
}

}  // namespace detail

/// DiffusionGemma's config from a parsed config.json (`source` names the file in errors).
[[nodiscard]] inline diffusion_gemma_config parse_diffusion_gemma_config(const nlohmann::json& j, const std::string& source) {
    if (!j.is_object()) throw file_error(source, "config is a JSON " + detail::json_kind(j) + ", not an object");
    const detail::config_reader r(j, source);
    if (r.string_opt("model_type").value_or("") != "diffusion_gemma")
        r.fail("model_type", "expected 'diffusion_gemma' (DiffusionGemmaForBlockDiffusion)");
    if (!j.contains("text_config") || !j.at("text_config").is_object()) r.fail("text_config", "missing: DiffusionGemma's text model is described there");
    r.require("tie_word_embeddings", true, "the output head is the token embedding");
    diffusion_gemma_config c;
    detail::parse_gemma_text(c, j.at("text_config"), source);
    c.canvas_length = r.integer_or("canvas_length", 256);
    if (c.canvas_length <= 0 || c.canvas_length > c.max_context)
        r.fail("canvas_length", std::to_string(c.canvas_length) + " must be positive and at most max_position_embeddings");
    c.image_token_id = r.integer_or("image_token_id", 258880);
    return c;
}

/// DiffusionGemma's config.json from a model folder (or the file itself).
[[nodiscard]] inline diffusion_gemma_config load_diffusion_gemma_config(const std::filesystem::path& folder_or_file) {
    const std::filesystem::path file = detail::config_json_path(folder_or_file);
    const std::string source = file.string();
    return parse_diffusion_gemma_config(detail::parse_json_strict(detail::read_text_file(file), source, "config"), source);
}

}  // namespace dlm::io
