// dlm/io/model_config.hpp — a Hugging Face config.json, read into the sizes and traits dlm needs.
//
// These families are understood:
//   llada  model_type "llada", architectures ["LLaDAModelLM"]: LLaDA-8B and models in its layout
//          (d_model, n_heads, n_kv_heads, n_layers, mlp_hidden_size, vocab_size / embedding_size,
//          max_sequence_length, weight_tying, include_bias / include_qkv_bias, mask_token_id).
//   dream  model_type "Dream", architectures ["DreamModel"]: Dream-7B (Qwen2 layout, bidirectional).
//   qwen2  model_type "qwen2", architectures ["Qwen2ForCausalLM"]: an autoregressive Qwen2 model.
//   sdar   model_type "sdar", architectures ["SDARForCausalLM"]: SDAR (JetAstra/SDAR), the Qwen3 block
//          (q/k RMSNorm over each head, no q/k/v biases), trained block-causally; block_size is
//          the block length it decodes with.
//   fast_dllm_v2  model_type "Fast_dLLM_Qwen", architectures ["Fast_dLLM_QwenForCausalLM"]: Fast-dLLM v2
//          (NVlabs), the Qwen2.5 block trained block-causally; bd_size is its block length, the mask
//          id defaults to 151665 (|<MASK>|).
//   llada2_moe  model_type "llada2_moe", architectures ["LLaDA2MoeModelLM"]: LLaDA2.0 / 2.1 (inclusionAI; 2.1 is
//               told apart by its decoder's keys or its folder name, decoding_keys.hpp),
//          the Bailing-MoE v2 block: fused query_key_value, q/k RMSNorm, partial RoPE
//          (partial_rotary_factor), a mixture-of-experts MLP after first_k_dense_replace dense layers
//          (moe_config.hpp); mask id 156895 unless mask_token_id says otherwise.
//   lladamoe  model_type "lladamoe", architectures ["LLaDAMoEModelLM"]: LLaDA-MoE-7B-A1B (inclusionAI),
//          bidirectional like LLaDA; the OLMoE-style block (q/k RMSNorm per head, softmax-routed experts
//          on the layers moe_layer_freq marks, dense_intermediate_size elsewhere); mask id 156895.
//   sdar_moe  model_type "sdar_moe", architectures ["SDARMoeForCausalLM"]: SDAR-30B-A3B and kin, the
//          SDAR block with Qwen3-MoE's experts (moe_config.hpp) on the layers decoder_sparse_step and
//          mlp_only_layers mark.
// Keys that are absent take the default of the family's own configuration class (LLaDAConfig,
// DreamConfig, Qwen2Config). Anything else is refused by name: an unknown architecture, a missing or
// ill-typed key, inconsistent sizes, or a feature dlm's transformer does not implement.
#pragma once

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "config_reader.hpp"
#include "decoding_keys.hpp"
#include "json_util.hpp"
#include "moe_config.hpp"
#include "rope_config.hpp"

namespace dlm::io {

enum class architecture { llada, dream, qwen2, sdar, fast_dllm_v2, llada2_moe, lladamoe, sdar_moe };  // qwen2 = Qwen2ForCausalLM (autoregressive)

[[nodiscard]] constexpr std::string_view architecture_name(architecture a) noexcept {
    switch (a) {
        case architecture::llada: return "llada";
        case architecture::dream: return "dream";
        case architecture::qwen2: return "qwen2";
        case architecture::sdar: return "sdar";
        case architecture::fast_dllm_v2: return "fast_dllm_v2";
        case architecture::llada2_moe: return "llada2_moe";
        case architecture::lladamoe: return "lladamoe";
        case architecture::sdar_moe: return "sdar_moe";
    }
    return "?";
}

/// LLaDA's mask token (<|mdm_mask|>), used when a LLaDA config has no mask_token_id.
inline constexpr token_id llada_default_mask_id = 126336;
/// Dream's mask token (DreamConfig's default), used when a Dream config has no mask_token_id.
inline constexpr token_id dream_default_mask_id = 151666;
/// Fast-dLLM v2's mask token |<MASK>| (added_tokens.json; generate()'s and batch_sample's mask_id
/// default), used when its config has no mask_token_id (the published one has none).
inline constexpr token_id fast_dllm_v2_default_mask_id = 151665;
/// LLaDA2's mask token <|mask|> (generate()'s mask_id default in modeling_llada2_moe.py).
inline constexpr token_id llada2_default_mask_id = 156895;

struct model_config {
    architecture arch = architecture::llada;
    index_t vocab_size = 0;         ///< rows of the embedding and of the output head (LLaDA: embedding_size when present)
    index_t hidden_size = 0;
    index_t intermediate_size = 0;  ///< MLP inner width (gate/up output, down input)
    index_t num_layers = 0;
    index_t num_heads = 0;
    index_t num_kv_heads = 0;       ///< divides num_heads (grouped-query attention when smaller)
    index_t head_dim = 0;           ///< hidden_size / num_heads unless the config says otherwise; even
    index_t max_context = 0;        ///< max_sequence_length (LLaDA) or max_position_embeddings
    double rope_theta = 10000.0;
    std::string rope_theta_source;  ///< the key it was read from, or which default applies and why (rope_config.hpp)
    double rms_norm_eps = 1e-5;
    bool tie_word_embeddings = false;  ///< the output head shares the embedding
    bool qkv_bias = false;             ///< q/k/v projections have biases (Qwen2/Dream true, LLaDA false)
    bool qk_norm = false;              ///< RMSNorm (weight [head_dim]) over each q and k head before RoPE (Qwen3 block: SDAR)
    index_t rotary_dim = 0;            ///< leading dims of each head RoPE rotates (0: all; LLaDA2 partial_rotary_factor · head_dim)
    std::optional<moe_config> moe;     ///< a mixture-of-experts MLP (LLaDA2); none: every layer dense
    /// The token the decoder fills generation slots with. LLaDA: mask_token_id, else 126336. Dream:
    /// mask_token_id, else 151666. qwen2 (AR, no mask token): mask_token_id if the config has one,
    /// else vocab_size - 1, the last embedding row: Qwen2 checkpoints pad the vocabulary past the
    /// tokenizer (151936 rows for 151665 tokens), so no tokenizer emits it and no prompt contains it.
    token_id mask_id = no_token;
    /// config eos_token_id (an int or a list), then any further ids from generation_config.json.
    std::vector<token_id> eos_ids;
    bool logits_shift = false;  ///< slot p is predicted by output row p-1 (Dream and AR: true; LLaDA: false)
    bool causal = false;        ///< the architecture's native attention is causal (qwen2 only)
    /// What the folder says about decoding it (dlm_gen_length, dlm_block_length, end-of-turn ids, where
    /// mask_id and eos_ids came from); the decoder's defaults for what the user leaves unset.
    decoding_hints decoding;
};

namespace detail {
/// rms_norm_eps from a config: positive, finite and at most max_rms_norm_eps, else refused by the key.
[[nodiscard]] inline double rms_norm_eps_of(const config_reader& r, double fallback) {
    const double eps = r.number_or("rms_norm_eps", fallback);
    if (eps > max_rms_norm_eps) r.fail("rms_norm_eps", json_quote(r.object().at("rms_norm_eps")) + " must be at most 1 (an epsilon guards a division; 1e-5 and 1e-6 are usual)");
    return eps;
}
}  // namespace detail

/// Refuses a config no transformer can be built from, whoever made it (a loader, a test, a named
/// shape): sizes not positive, heads not grouped evenly, an odd head_dim (rotary embeddings rotate
/// pairs), a rope_theta outside (1, 1e12], an epsilon outside [0, 1], a mask id outside the vocabulary. Throws
/// invalid_parameter naming the config field.
inline void check_model_config(const model_config& c) {
    auto positive = [](const char* name, index_t v) {
        if (v <= 0) throw invalid_parameter(std::string("config.") + name, "must be positive, got " + std::to_string(v));
    };
    positive("vocab_size", c.vocab_size);
    positive("hidden_size", c.hidden_size);
    positive("intermediate_size", c.intermediate_size);
    positive("num_layers", c.num_layers);
    positive("num_heads", c.num_heads);
    positive("num_kv_heads", c.num_kv_heads);
    positive("head_dim", c.head_dim);
    if (c.num_heads % c.num_kv_heads != 0)
        throw invalid_parameter("config.num_kv_heads", std::to_string(c.num_kv_heads) + " does not divide num_heads " + std::to_string(c.num_heads));
    if (c.head_dim % 2 != 0) throw invalid_parameter("config.head_dim", "rotary embeddings need an even head_dim, got " + std::to_string(c.head_dim));
    if (const std::string why = rope_theta_problem(c.rope_theta); !why.empty()) throw invalid_parameter("config.rope_theta", why);
    if (!(c.rms_norm_eps >= 0 && c.rms_norm_eps <= max_rms_norm_eps))
        throw invalid_parameter("config.rms_norm_eps", "must be in [0, 1], got " + std::to_string(c.rms_norm_eps));
    if (c.mask_id < 0 || c.mask_id >= c.vocab_size)
        throw invalid_parameter("config.mask_id", std::to_string(c.mask_id) + " is outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
}

namespace detail {

struct family {
    architecture arch;
    const char* model_type;  // compared case-insensitively (Dream's is "Dream")
    const char* class_name;  // the architectures entry
};
inline constexpr family families[] = {
    {architecture::llada, "llada", "LLaDAModelLM"},
    {architecture::dream, "dream", "DreamModel"},
    {architecture::qwen2, "qwen2", "Qwen2ForCausalLM"},
    {architecture::sdar, "sdar", "SDARForCausalLM"},
    {architecture::fast_dllm_v2, "Fast_dLLM_Qwen", "Fast_dLLM_QwenForCausalLM"},
    {architecture::llada2_moe, "llada2_moe", "LLaDA2MoeModelLM"},
    {architecture::lladamoe, "lladamoe", "LLaDAMoEModelLM"},
    {architecture::sdar_moe, "sdar_moe", "SDARMoeForCausalLM"},
};

}  // namespace detail

/// The Hugging Face class name of an architecture (its config.json `architectures` entry).
[[nodiscard]] constexpr std::string_view architecture_class(architecture a) noexcept {
    for (const detail::family& f : detail::families)
        if (f.arch == a) return f.class_name;
    return architecture_name(a);
}

namespace detail {

[[nodiscard]] inline bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
}

[[nodiscard]] inline architecture detect_architecture(const config_reader& r, const nlohmann::json& j, const std::string& source) {
    const std::optional<std::string> model_type = r.string_opt("model_type");
    std::vector<std::string> classes;
    if (r.has("architectures")) {
        const auto& a = j.at("architectures");
        if (!a.is_array()) r.fail("architectures", "expected a list of class names, found " + json_kind(a));
        for (const auto& e : a) {
            if (!e.is_string()) r.fail("architectures", "expected a list of class names, found " + json_quote(a));
            classes.push_back(e.get<std::string>());
        }
    }
    std::string described = "model_type " + (model_type ? "'" + *model_type + "'" : std::string("(none)")) + ", architectures [";
    for (std::size_t i = 0; i < classes.size(); ++i) described += (i ? ", '" : "'") + classes[i] + "'";
    described += "]";
    const std::string known =
        "dlm loads model_type 'llada' (LLaDAModelLM), 'Dream' (DreamModel), 'qwen2' (Qwen2ForCausalLM), 'sdar' (SDARForCausalLM), "
        "'Fast_dLLM_Qwen' (Fast_dLLM_QwenForCausalLM), 'llada2_moe' (LLaDA2MoeModelLM), 'lladamoe' (LLaDAMoEModelLM) and "
        "'sdar_moe' (SDARMoeForCausalLM)";
    if (!model_type && classes.empty()) throw file_error(source, "config has neither 'model_type' nor 'architectures'; " + known);
    for (const family& f : families) {
        const bool type_matches = model_type && iequals(*model_type, f.model_type);
        const bool class_listed = std::find(classes.begin(), classes.end(), f.class_name) != classes.end();
        if (type_matches || (!model_type && class_listed)) {
            if (!classes.empty() && !class_listed)
                throw file_error(source, "architecture not supported: " + described + "; for model_type '" + *model_type +
                                             "' dlm loads '" + f.class_name + "'");
            return f.arch;
        }
    }
    if (model_type && iequals(*model_type, "diffusion_gemma"))  // uniform-state diffusion: its own model class, not the transformer
        throw file_error(source, "DiffusionGemma (" + described + ") is not a masked-diffusion transformer: dlm::cpu::diffusion_gemma "
                                 "(dlm/cpu/diffusion_gemma.hpp) loads it and presets::diffusion_gemma decodes it (dlm-generate does; "
                                 "dlm-eval and dlm-server serve transformers only, for now)");
    throw file_error(source, "architecture not supported: " + described + "; " + known);
}

/// The key names a family uses, so consistency errors name the keys the user sees.
struct key_names {
    const char* hidden;
    const char* heads;
    const char* kv_heads;
    const char* layers;
    const char* intermediate;
    const char* vocab;
    const char* context;
};

inline void parse_llada(const config_reader& r, model_config& c) {
    c.hidden_size = r.integer("d_model");
    c.num_heads = r.integer("n_heads");
    c.num_kv_heads = r.has("n_kv_heads") ? r.integer("n_kv_heads") : r.boolean_or("multi_query_attention", false) ? 1 : c.num_heads;
    c.num_layers = r.integer("n_layers");
    if (r.has("mlp_hidden_size")) {
        c.intermediate_size = r.integer("mlp_hidden_size");
    } else {  // LLaDAConfig: mlp_ratio * d_model
        const std::int64_t inner = std::int64_t{r.integer_or("mlp_ratio", 4)} * c.hidden_size;
        if (inner <= 0 || inner > std::numeric_limits<index_t>::max())
            r.fail("mlp_ratio", "mlp_ratio * d_model = " + std::to_string(inner) + " is not a valid MLP width");
        c.intermediate_size = static_cast<index_t>(inner);
    }
    const index_t vocab = r.integer("vocab_size");
    if (vocab <= 0) r.fail("vocab_size", std::to_string(vocab) + " must be positive");
    c.vocab_size = vocab;
    if (r.has("embedding_size")) {  // the embedding and output rows; vocab_size may be smaller
        c.vocab_size = r.integer("embedding_size");
        if (c.vocab_size < vocab)
            r.fail("embedding_size", std::to_string(c.vocab_size) + " is smaller than vocab_size " + std::to_string(vocab));
    }
    const rope_settings rope =
        parse_rope(r, 10000.0, "LLaDA's configuration class (configuration_llada.py) defaults rope_theta to 10000");
    c.rope_theta = rope.theta;
    c.rope_theta_source = rope.source;
    c.rms_norm_eps = rms_norm_eps_of(r, 1e-5);
    c.max_context = r.integer_or("max_sequence_length", 1024);
    c.tie_word_embeddings = r.boolean_or("weight_tying", true);
    if (r.boolean_or("include_bias", false))
        r.fail("include_bias", "true is not supported (biases on every linear layer; dlm's LLaDA block has q/k/v biases at most)");
    c.qkv_bias = r.boolean_or("include_qkv_bias", false);
    c.mask_id = r.has("mask_token_id") ? r.single_token("mask_token_id") : llada_default_mask_id;
    c.eos_ids = r.token_list("eos_token_id");
    c.logits_shift = false;
    c.causal = false;
    const char* block = "dlm runs LLaDA's llama block: RoPE, RMSNorm with weight, SiLU-gated MLP";
    r.require("block_type", "llama", block);
    r.require("rope", true, block);
    r.require("alibi", false, block);
    r.require("layer_norm_type", "rms", block);
    r.require("layer_norm_with_affine", true, block);
    r.require("bias_for_layer_norm", false, block);
    r.require("activation_type", "silu", block);
    r.require("attention_layer_norm", false, block);
    r.require("input_emb_norm", false, block);
    r.require("scale_logits", false, block);
}

/// The sizes every Qwen-layout config (Qwen2, Dream, SDAR, Fast-dLLM v2, and LLaDA-MoE with its
/// `dense_intermediate_size`) names alike.
inline void read_qwen_sizes(const config_reader& r, model_config& c, const char* ffn_key = "intermediate_size") {
    c.hidden_size = r.integer("hidden_size");
    c.num_heads = r.integer("num_attention_heads");
    c.num_kv_heads = r.integer_or("num_key_value_heads", c.num_heads);
    c.num_layers = r.integer("num_hidden_layers");
    c.intermediate_size = r.integer(ffn_key);
}

/// A block-diffusion family's own block-size key (SDAR block_size, Fast-dLLM v2 bd_size), when
/// present: the model's block length.
inline void read_block_size_key(const config_reader& r, const char* key, model_config& c) {
    if (!r.has(key)) return;
    const index_t b = r.integer(key);
    if (b < 1) r.fail(key, std::to_string(b) + " must be a positive number of slots");
    c.decoding.block_length = {b, r.source() + " key '" + key + "'"};
}

inline void parse_qwen2_layout(const config_reader& r, model_config& c) {
    read_qwen_sizes(r, c);
    c.vocab_size = r.integer("vocab_size");
    if (r.has("head_dim")) c.head_dim = r.integer("head_dim");
    const rope_settings rope = parse_rope(
        r, 10000.0,
        c.arch == architecture::dream
            ? "DreamConfig defaults rope_theta to 10000"
            : "transformers' Qwen2Config defaults it to 10000 (4.x: rope_theta=10000.0; 5.x: RotaryEmbeddingConfigMixin.default_theta)");
    c.rope_theta = rope.theta;
    c.rope_theta_source = rope.source;
    c.rms_norm_eps = rms_norm_eps_of(r, 1e-6);
    c.max_context = r.integer_or("max_position_embeddings", 32768);
    c.tie_word_embeddings = r.boolean_or("tie_word_embeddings", false);
    c.qkv_bias = true;  // Qwen2 and Dream attention always carry q/k/v biases
    if (r.has("mask_token_id")) {
        c.mask_id = r.single_token("mask_token_id");
    } else {
        c.mask_id = c.arch == architecture::dream           ? dream_default_mask_id
                    : c.arch == architecture::fast_dllm_v2 ? fast_dllm_v2_default_mask_id
                                                           : c.vocab_size - 1;
    }
    if (c.arch == architecture::fast_dllm_v2) read_block_size_key(r, "bd_size", c);
    c.eos_ids = r.token_list("eos_token_id");
    c.logits_shift = true;
    c.causal = c.arch == architecture::qwen2;
    const char* block = "dlm runs the Qwen2 block: plain RoPE, RMSNorm, SiLU-gated MLP, full attention";
    r.require("hidden_act", "silu", block);
    r.require("use_sliding_window", false, block);
    r.require("use_mrope", false, block);
}

/// SDAR (configuration_sdar.py, SDARConfig): the Qwen2 key names, head_dim defaulting to 128,
/// attention_bias (false) instead of Qwen2's fixed q/k/v biases, q/k RMSNorm always, block_size the
/// block length it was trained and decodes with (SDAR generate.py's block_length). SDAR-MoE
/// (SDARMoeForCausalLM) is the same block with Qwen3-MoE's experts (moe_config.hpp).
inline void parse_sdar(const config_reader& r, model_config& c) {
    read_qwen_sizes(r, c);
    c.vocab_size = r.integer_or("vocab_size", 151936);
    c.head_dim = r.integer_or("head_dim", 128);
    const rope_settings rope = parse_rope(r, 10000.0, "SDARConfig (configuration_sdar.py) defaults rope_theta to 10000");
    c.rope_theta = rope.theta;
    c.rope_theta_source = rope.source;
    c.rms_norm_eps = rms_norm_eps_of(r, 1e-6);
    c.max_context = r.integer_or("max_position_embeddings", 32768);
    c.tie_word_embeddings = r.boolean_or("tie_word_embeddings", false);
    if (r.boolean_or("attention_bias", false))
        r.fail("attention_bias", "true is not supported (SDAR then gives o_proj a bias too; dlm's block has q/k/v biases at most)");
    c.qkv_bias = false;
    c.qk_norm = true;
    if (!r.has("mask_token_id"))
        r.fail("mask_token_id", "missing: SDAR's generate.py takes the mask id from the tokenizer's <MASK> (151669 in the published "
                                "checkpoints); add mask_token_id to config.json");
    c.mask_id = r.single_token("mask_token_id");
    c.eos_ids = r.token_list("eos_token_id");
    c.logits_shift = false;  // block diffusion: row p predicts slot p (generate.py samples the block's own rows)
    c.causal = false;
    read_block_size_key(r, "block_size", c);
    if (c.arch == architecture::sdar_moe) c.moe = parse_sdar_moe(r, c.num_layers);
    const char* block = "dlm runs the SDAR (Qwen3) block: plain RoPE, q/k RMSNorm, SiLU-gated MLP, no sliding window";
    r.require("hidden_act", "silu", block);
    r.require("use_sliding_window", false, block);
}

/// LLaDA2 (LLaDA2MoeConfig of configuration_llada2_moe.py; defaults in the calls are its own).
inline void parse_llada2(const config_reader& r, model_config& c) {
    read_qwen_sizes(r, c);
    c.vocab_size = r.integer("vocab_size");
    if (r.has("head_dim")) c.head_dim = r.integer("head_dim");
    const rope_settings rope = parse_rope(r, 10000.0, "LLaDA2MoeConfig defaults rope_theta to 10000");
    c.rope_theta = rope.theta;
    c.rope_theta_source = rope.source;
    c.rms_norm_eps = rms_norm_eps_of(r, 1e-5);
    c.max_context = r.integer_or("max_position_embeddings", 16384);
    c.tie_word_embeddings = r.boolean_or("tie_word_embeddings", false);
    c.qkv_bias = r.boolean_or("use_qkv_bias", false);
    c.qk_norm = r.boolean_or("use_qk_norm", true);  // LLaDA2MoeConfig's default
    c.mask_id = r.has("mask_token_id") ? r.single_token("mask_token_id") : llada2_default_mask_id;
    c.eos_ids = r.token_list("eos_token_id");
    c.logits_shift = false;  // generate() samples the block's own rows
    c.causal = false;
    c.moe = parse_llada2_moe(r, c.num_layers);
    if (r.boolean_or("use_bias", true))
        r.fail("use_bias", "true is not supported (a bias on the attention output; LLaDA2's published configs set false)");
    const char* block = "dlm runs the LLaDA2 (Bailing-MoE v2) block: plain partial RoPE, RMSNorm, SiLU-gated experts";
    r.require("norm_head", false, block);
    r.require("hidden_act", "silu", block);
    r.require("use_sliding_window", false, block);
}

/// LLaDA-MoE (LLaDAMoEConfig of configuration_lladamoe.py; it has no usable defaults for the sizes,
/// -1 in the class, so they are required).
inline void parse_lladamoe(const config_reader& r, model_config& c) {
    read_qwen_sizes(r, c, "dense_intermediate_size");
    c.vocab_size = r.integer("vocab_size");
    const rope_settings rope = parse_rope(r, 10000.0, "LLaDAMoEConfig has no usable default (rope_theta=-1); transformers' 10000");
    c.rope_theta = rope.theta;
    c.rope_theta_source = rope.source;
    c.rms_norm_eps = rms_norm_eps_of(r, 1e-5);
    c.max_context = r.integer_or("max_position_embeddings", 4096);
    c.tie_word_embeddings = r.boolean_or("tie_word_embeddings", false);
    c.qkv_bias = false;
    c.qk_norm = r.boolean_or("qk_layernorm", false);
    c.mask_id = r.has("mask_token_id") ? r.single_token("mask_token_id") : llada2_default_mask_id;  // 156895 too
    c.eos_ids = r.token_list("eos_token_id");
    c.logits_shift = false;
    c.causal = false;
    c.moe = parse_lladamoe_moe(r, c.num_layers);
    if (r.boolean_or("attention_bias", false))
        r.fail("attention_bias", "true is not supported (LLaDA-MoE then gives o_proj a bias too; dlm's block has q/k/v biases at most)");
    if (r.has("clip_qkv")) r.fail("clip_qkv", "is not supported (dlm does not clamp q, k and v)");
    const char* block = "dlm runs the LLaDA-MoE block: plain RoPE, RMSNorm, SiLU-gated experts";
    r.require("hidden_act", "silu", block);
}

/// LLaDA2's partial_rotary_factor (0.5 by default): RoPE over the leading factor · head_dim dims.
inline void read_partial_rotary(const config_reader& r, model_config& c, double fallback) {
    double factor = fallback;
    if (r.has("partial_rotary_factor")) {
        const auto& v = r.object().at("partial_rotary_factor");
        if (!v.is_number()) r.fail("partial_rotary_factor", "expected a number, found " + json_kind(v) + " " + json_quote(v));
        factor = v.get<double>();
    }
    const auto dims = static_cast<index_t>(static_cast<double>(c.head_dim) * factor);  // int(head_dim * factor), as the reference
    if (!(factor > 0.0 && factor <= 1.0) || dims < 2 || dims % 2 != 0)
        r.fail("partial_rotary_factor", std::to_string(factor) + " gives " + std::to_string(dims) + " rotated dims of head_dim " +
                                            std::to_string(c.head_dim) + "; dlm needs an even number >= 2");
    c.rotary_dim = dims;
}

/// The other families rotate the whole head. transformers' default rope reads a top-level
/// partial_rotary_factor for every model, so one other than 1 is refused, not ignored.
inline void refuse_partial_rotary(const config_reader& r, const model_config& c) {
    if (!r.has("partial_rotary_factor")) return;
    const auto& v = r.object().at("partial_rotary_factor");
    if (!v.is_number() || v.get<double>() != 1.0)
        r.fail("partial_rotary_factor", json_quote(v) + " is not supported: dlm's " + std::string(architecture_name(c.arch)) +
                                            " transformer rotates the whole head (1.0)");
}

inline void check_sizes(const config_reader& r, model_config& c, const key_names& k, bool head_dim_given) {
    const std::pair<const char*, index_t> sizes[] = {
        {k.vocab, c.vocab_size},  {k.hidden, c.hidden_size}, {k.intermediate, c.intermediate_size},
        {k.layers, c.num_layers}, {k.heads, c.num_heads},    {k.kv_heads, c.num_kv_heads},
        {k.context, c.max_context}};
    for (const auto& [key, value] : sizes)
        if (value <= 0) r.fail(key, std::to_string(value) + " must be positive");
    if (c.num_heads % c.num_kv_heads != 0)
        r.fail(k.kv_heads, std::to_string(c.num_kv_heads) + " does not divide " + k.heads + " " + std::to_string(c.num_heads));
    if (head_dim_given) {
        if (c.head_dim <= 0) r.fail("head_dim", std::to_string(c.head_dim) + " must be positive");
    } else {
        if (c.hidden_size % c.num_heads != 0)
            r.fail(k.heads, std::to_string(c.num_heads) + " does not divide " + k.hidden + " " + std::to_string(c.hidden_size));
        c.head_dim = c.hidden_size / c.num_heads;
    }
    if (c.head_dim % 2 != 0)
        r.fail(head_dim_given ? "head_dim" : k.heads,
               "head dimension " + std::to_string(c.head_dim) + " is odd; rotary embeddings need an even one");
}

inline void check_token(const std::string& source, const char* key, token_id id, index_t vocab, const char* note = "") {
    if (id < 0 || id >= vocab)
        throw file_error(source, "key '" + std::string(key) + "': token id " + std::to_string(id) +
                                     " is outside the vocabulary [0, " + std::to_string(vocab) + ")" + note);
}

}  // namespace detail

/// Reads a parsed config.json. `source_name` names the file in errors. Throws dlm::file_error.
[[nodiscard]] inline model_config parse_config(const nlohmann::json& j, const std::string& source_name) {
    if (!j.is_object()) throw file_error(source_name, "config is a JSON " + detail::json_kind(j) + ", not an object");
    const detail::config_reader r(j, source_name);
    model_config c;
    c.arch = detail::detect_architecture(r, j, source_name);
    detail::key_names keys{};
    if (c.arch == architecture::llada) {
        detail::parse_llada(r, c);
        keys = {"d_model", "n_heads", "n_kv_heads", "n_layers", "mlp_hidden_size",
                r.has("embedding_size") ? "embedding_size" : "vocab_size", "max_sequence_length"};
    } else if (c.arch == architecture::sdar || c.arch == architecture::sdar_moe || c.arch == architecture::llada2_moe ||
               c.arch == architecture::lladamoe) {
        if (c.arch == architecture::sdar || c.arch == architecture::sdar_moe) detail::parse_sdar(r, c);
        else if (c.arch == architecture::llada2_moe) detail::parse_llada2(r, c);
        else detail::parse_lladamoe(r, c);
        keys = {"hidden_size", "num_attention_heads", "num_key_value_heads", "num_hidden_layers",
                c.arch == architecture::lladamoe ? "dense_intermediate_size" : "intermediate_size", "vocab_size", "max_position_embeddings"};
    } else {
        detail::parse_qwen2_layout(r, c);
        keys = {"hidden_size", "num_attention_heads", "num_key_value_heads", "num_hidden_layers", "intermediate_size",
                "vocab_size", "max_position_embeddings"};
    }
    // LLaDA-MoE's attention takes hidden_size / heads whatever head_dim says.
    detail::check_sizes(r, c, keys,
                        c.arch == architecture::sdar || c.arch == architecture::sdar_moe || (c.arch != architecture::llada && c.arch != architecture::lladamoe && r.has("head_dim")));
    if (c.arch == architecture::llada2_moe) detail::read_partial_rotary(r, c, 0.5);
    else if (c.arch == architecture::lladamoe) detail::read_partial_rotary(r, c, 1.0);
    else detail::refuse_partial_rotary(r, c);
    detail::read_length_hints(r, c.decoding);
    if (c.arch == architecture::llada2_moe) detail::read_token_editing_keys(r, c.decoding);
    const bool mask_given = r.has("mask_token_id");
    c.decoding.mask_id_origin = mask_given ? source_name + " key 'mask_token_id'"
                                           : c.arch == architecture::qwen2
                                               ? "the last embedding row (the config has no mask_token_id; Qwen2 pads its vocabulary)"
                                               : std::string(architecture_name(c.arch)) + "'s default mask id (the config has no mask_token_id)";
    c.decoding.eos_ids_origin = r.has("eos_token_id") ? source_name + " key 'eos_token_id'" : "none in " + source_name;
    detail::check_token(source_name, "mask_token_id", c.mask_id, c.vocab_size,
                        mask_given ? "" : " (the family's default mask id; the config has no mask_token_id)");
    for (const token_id id : c.eos_ids) detail::check_token(source_name, "eos_token_id", id, c.vocab_size);
    return c;
}

/// Adds the EOS ids of a parsed generation_config.json (eos_token_id: an int or a list) that `c` does
/// not hold yet. Other keys are ignored.
inline void add_generation_config(model_config& c, const nlohmann::json& generation_config, const std::string& source_name) {
    if (!generation_config.is_object())
        throw file_error(source_name, "generation config is a JSON " + detail::json_kind(generation_config) + ", not an object");
    const detail::config_reader r(generation_config, source_name);
    if (c.arch == architecture::llada2_moe) detail::read_token_editing_keys(r, c.decoding);
    bool added = false;
    for (const token_id id : r.token_list("eos_token_id")) {
        detail::check_token(source_name, "eos_token_id", id, c.vocab_size);
        if (std::find(c.eos_ids.begin(), c.eos_ids.end(), id) == c.eos_ids.end()) {
            c.eos_ids.push_back(id);
            added = true;
        }
    }
    const std::string here = source_name + " key 'eos_token_id'";
    if (added) c.decoding.eos_ids_origin = c.decoding.eos_ids_origin.starts_with("none") ? here : c.decoding.eos_ids_origin + ", then " + here;
}

/// Reads `model_dir_or_config_json` (a model folder, or its config.json) and, if the same folder
/// holds them, generation_config.json and the end-of-turn tokens of tokenizer.json. Throws
/// dlm::file_error naming the file at fault, also for one of those two that is there but is not a
/// readable regular file (detail::optional_file).
[[nodiscard]] inline model_config load_config(const std::filesystem::path& model_dir_or_config_json) {
    namespace fs = std::filesystem;
    const fs::path config_path = detail::config_json_path(model_dir_or_config_json);
    const std::string source = config_path.string();
    model_config c = parse_config(detail::parse_json_strict(detail::read_text_file(config_path), source, "config"), source);
    const fs::path folder = config_path.has_parent_path() ? config_path.parent_path() : fs::path(".");
    const fs::path generation = folder / "generation_config.json";
    if (detail::optional_file(generation)) {
        const std::string gsource = generation.string();
        add_generation_config(c, detail::parse_json_strict(detail::read_text_file(generation), gsource, "generation config"), gsource);
    }
    detail::read_end_of_turn_ids(folder / "tokenizer.json", c.eos_ids, c.vocab_size, c.decoding);
    if (c.arch == architecture::llada2_moe) detail::read_token_editing_folder(folder, c.decoding);
    return c;
}

}  // namespace dlm::io
