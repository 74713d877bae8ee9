// dlm/io/gguf_diffusion_gemma.hpp — DiffusionGemma's config from a GGUF file of llama.cpp's
// `diffusion-gemma` architecture (src/models/diffusion-gemma.cpp, conversion/diffusion_gemma.py on
// Gemma4Model; read at ggml-org/llama.cpp 15ad8f42), into the io::diffusion_gemma_config the
// safetensors folder gives, so cpu::diffusion_gemma runs either.
//
//   diffusion-gemma.block_count, .embedding_length, .feed_forward_length (the dense and the
//     self-conditioning MLPs), .context_length, .attention.head_count
//   .attention.head_count_kv             per layer (an array; a scalar for every layer; absent: head_count)
//   .attention.key_length / value_length full layers' head size (absent: embedding_length / head_count);
//                                        ..._swa the sliding layers' (required, as llama.cpp)
//   .attention.sliding_window, .attention.sliding_window_pattern (true: sliding; an array per layer)
//   .rope.freq_base / .rope.freq_base_swa  full / sliding theta (absent: 10000 / freq_base, llama.cpp's)
//   .rope.dimension_count(_swa)          must be the layer type's whole head (ggml's NEOX rotation over
//                                        part of a head pairs other elements than Gemma's)
//   .attention.layer_norm_rms_epsilon, .final_logit_softcapping (absent: none)
//   .expert_count, .expert_used_count, .expert_feed_forward_length
//   diffusion.canvas_length              (no architecture prefix, as llama.cpp reads it)
//   tokenizer.ggml.bos / eos / eot / padding_token_id
//   rope_freqs.weight                    the full layers' proportional rope: ggml divides pair i's angle
//                                        by value i; the converter writes 1 for the rotated pairs and
//                                        1e30 for the rest. Read as a run of one value f (the rotated
//                                        pairs, angles / f) and then values of at least 1e30 (unrotated:
//                                        an angle below 1e-20 leaves cos = 1 and sin x below f32's
//                                        resolution of x); any other table is refused.
// Refused by key, as llama.cpp's diffusion-gemma graph would compute them otherwise or dlm does not:
// rope scaling, attention logit soft-capping, a logit scale, shared KV layers, per-layer input
// embeddings, a causal flag, a gating function other than softmax, shared experts, differing head
// counts or MLP widths per layer, and value heads unlike the keys'.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "../core/error.hpp"
#include "diffusion_gemma_config.hpp"
#include "gguf.hpp"
#include "gguf_model.hpp"

namespace dlm::io {

/// The architecture name llama.cpp gives DiffusionGemma (LLM_ARCH_DIFFUSION_GEMMA).
inline constexpr std::string_view diffusion_gemma_gguf_arch = "diffusion-gemma";

/// Whether a GGUF header is of llama.cpp's diffusion-gemma architecture.
[[nodiscard]] inline bool is_diffusion_gemma_gguf(const gguf_header& h) {
    const gguf_kv* kv = h.find("general.architecture");
    return kv && kv->type == gguf_value_type::string && h.string("general.architecture") == diffusion_gemma_gguf_arch;
}

namespace detail {

/// A key llama.cpp reads with get_key_or_arr: one value for every layer, or an array of `n`.
[[nodiscard]] inline std::vector<std::int64_t> gguf_per_layer(const gguf_header& h, const std::string& key, index_t n) {
    const gguf_kv& kv = h.required(key);
    if (kv.type != gguf_value_type::array) return std::vector<std::int64_t>(static_cast<std::size_t>(n), h.integer(key, 1));
    std::vector<std::int64_t> v = h.integer_array(key);
    if (v.size() != static_cast<std::size_t>(n)) h.fail_key(key, "holds " + std::to_string(v.size()) + " values for " + std::to_string(n) + " layers");
    for (std::int64_t x : v)
        if (x < 1 || x > std::numeric_limits<std::int32_t>::max()) h.fail_key(key, "a layer's value " + std::to_string(x) + " is not positive");
    return v;
}

/// One value for every layer: a per-layer key whose values must agree (dlm holds one).
[[nodiscard]] inline index_t gguf_uniform(const gguf_header& h, const std::string& key, index_t n) {
    const std::vector<std::int64_t> v = gguf_per_layer(h, key, n);
    if (std::adjacent_find(v.begin(), v.end(), std::not_equal_to<>()) != v.end())
        h.fail_key(key, "differs between layers; DiffusionGemma (and dlm) hold one value for every layer");
    return static_cast<index_t>(v.front());
}

/// Keys whose values llama.cpp's diffusion-gemma graph ignores or computes unlike Gemma 4, and dlm refuses.
inline void refuse_gemma_gguf_keys(const gguf_header& h, const gguf_keys& k) {
    const auto nonzero = [&](const char* key) { return h.has(k.key(key)) && h.number(k.key(key)) != 0.0; };
    if (h.has(k.key("rope.scaling.type")) && h.string(k.key("rope.scaling.type")) != "none")
        h.fail_key(k.key("rope.scaling.type"), "rope scaling is not part of DiffusionGemma's rotary embedding, which dlm computes");
    for (const char* f : {"rope.scaling.factor", "rope.scale_linear"})
        if (h.has(k.key(f)) && h.number(k.key(f)) != 0.0 && h.number(k.key(f)) != 1.0)
            h.fail_key(k.key(f), "llama.cpp divides every position by it; dlm runs DiffusionGemma's rotary embedding unscaled");
    if (nonzero("attn_logit_softcapping")) h.fail_key(k.key("attn_logit_softcapping"), "DiffusionGemma's attention has no soft-capping, which dlm does not compute");
    if (h.has(k.key("logit_scale")) && h.number(k.key("logit_scale")) != 1.0)
        h.fail_key(k.key("logit_scale"), "a scaled head is not DiffusionGemma's; dlm does not compute it");
    for (const char* key : {"attention.shared_kv_layers", "embedding_length_per_layer_input", "expert_shared_count"})
        if (h.has(k.key(key)) && h.integer(k.key(key), 0) != 0)
            h.fail_key(k.key(key), "must be 0: a Gemma 3n / Gemma 4 feature DiffusionGemma does not have (the converter writes 0) and dlm does not compute");
    if (h.has(k.key("attention.causal")) && h.boolean(k.key("attention.causal")))
        h.fail_key(k.key("attention.causal"), "true; DiffusionGemma's decoder is bidirectional over the canvas (the converter writes false)");
    if (h.has(k.key("expert_gating_func")) && h.integer(k.key("expert_gating_func"), 0) != 1)
        h.fail_key(k.key("expert_gating_func"), "not softmax (1): DiffusionGemma's router is a softmax, the top-k renormalised");
}

/// Per-layer geometry: sliding flags, head sizes (full: key_length; sliding: key_length_swa), kv
/// heads; full layers without attn_v take their values from the keys (llama.cpp's rule: wv optional).
inline void read_gemma_gguf_layers(const gguf_header& h, const gguf_keys& k, diffusion_gemma_config& c) {
    const index_t n = c.num_layers;
    const std::string pat = k.key("attention.sliding_window_pattern");
    std::vector<bool> sliding;  // required, as llama.cpp reads it (get_key_or_arr)
    if (h.required(pat).type == gguf_value_type::array) sliding = h.boolean_array(pat);
    else sliding.assign(static_cast<std::size_t>(n), h.boolean(pat));
    if (sliding.size() != static_cast<std::size_t>(n)) h.fail_key(pat, "holds " + std::to_string(sliding.size()) + " flags for " + std::to_string(n) + " layers");
    // llama.cpp: key_length defaults to embedding_length / head_count; the _swa lengths are required.
    const index_t full_dim = k.size_or("attention.key_length", c.hidden_size / c.num_heads), swa_dim = k.size("attention.key_length_swa");
    (void)k.size("attention.value_length_swa");
    for (const auto& [v, d] : {std::pair{"attention.value_length", full_dim}, std::pair{"attention.value_length_swa", swa_dim}})
        if (h.has(k.key(v)) && k.size(v) != d)
            h.fail_key(k.key(v), std::to_string(k.size(v)) + " differs from the key length " + std::to_string(d) + " (llama.cpp requires them equal)");
    const std::string kv_key = k.key("attention.head_count_kv");  // absent: as many as the heads (llama.cpp's default)
    const std::vector<std::int64_t> kv = h.has(kv_key) ? gguf_per_layer(h, kv_key, n) : std::vector<std::int64_t>(static_cast<std::size_t>(n), c.num_heads);
    c.layers.assign(static_cast<std::size_t>(n), {});
    for (index_t l = 0; l < n; ++l) {
        gemma_layer& g = c.layers[static_cast<std::size_t>(l)];
        g.sliding = sliding[static_cast<std::size_t>(l)];
        g.head_dim = g.sliding ? swa_dim : full_dim;
        g.kv_heads = static_cast<index_t>(kv[static_cast<std::size_t>(l)]);
        g.k_eq_v = h.find_tensor(gguf_tensor_name("attn_v.weight", l, true)) == nullptr;
        if (g.head_dim <= 0 || g.head_dim % 2 || c.num_heads % g.kv_heads)
            h.fail_key(k.key(g.sliding ? "attention.key_length_swa" : "attention.key_length"),
                       "layer " + std::to_string(l) + ": head size " + std::to_string(g.head_dim) + " must be positive and even, and its " +
                           std::to_string(g.kv_heads) + " kv heads must divide the " + std::to_string(c.num_heads) + " heads");
    }
    if (std::all_of(sliding.begin(), sliding.end(), [](bool s) { return s; }))
        h.fail_key(pat, "every layer slides; DiffusionGemma's last layer attends fully (DiffusionGemmaTextConfig forces it), and dlm's model needs one");
    for (const auto& [key, d] : {std::pair{"rope.dimension_count", full_dim}, std::pair{"rope.dimension_count_swa", swa_dim}})
        if (h.has(k.key(key)) && k.size(key) != d)
            h.fail_key(k.key(key), std::to_string(k.size(key)) + " rotates part of a head of " + std::to_string(d) +
                                       " with ggml's NEOX pairing, which is not Gemma's proportional rope; dlm rotates whole heads (the converter writes the head size)");
}

/// The full layers' rotary embedding from rope_freqs.weight (see the top).
[[nodiscard]] inline gemma_rope gemma_gguf_full_rope(const gguf_header& h, double theta, index_t head_dim) {
    gemma_rope r;
    r.theta = theta;
    const gguf_tensor* t = h.find_tensor("rope_freqs.weight");
    if (!t) throw tensor_error(h.path(), "rope_freqs.weight", "missing; llama.cpp requires it for the full-attention layers' proportional rope");
    const std::int64_t half = head_dim / 2;
    if (t->type != gguf_type::f32 || t->shape != std::vector<std::int64_t>{half})
        throw tensor_error(h.path(), t->name, "must be F32 of shape {" + std::to_string(half) + "} (half the full layers' head), found " +
                                                  std::string(gguf_type_name(t->type)) + " " + shape_string(t->shape));
    std::vector<float> f(static_cast<std::size_t>(half));
    std::memcpy(f.data(), t->bytes.data(), f.size() * sizeof(float));
    std::size_t rotated = 0;
    while (rotated < f.size() && f[rotated] == f.front() && f.front() < 1e30f) ++rotated;
    const bool ok = std::isfinite(f.front()) && f.front() > 0 && std::all_of(f.begin() + static_cast<std::ptrdiff_t>(rotated), f.end(), [](float x) { return x >= 1e30f; });
    if (!ok)
        throw tensor_error(h.path(), t->name, "not a proportional rope's table (one positive factor for the rotated pairs, then values of at least 1e30); "
                                              "dlm computes no other frequency factors");
    r.factor = rotated ? f.front() : 1.0;
    r.rotated_pairs = static_cast<index_t>(rotated);
    return r;
}

inline void read_gemma_gguf_sizes(const gguf_header& h, const gguf_keys& k, diffusion_gemma_config& c) {
    c.num_layers = k.size("block_count");
    c.hidden_size = k.size("embedding_length");
    c.num_heads = gguf_uniform(h, k.key("attention.head_count"), c.num_layers);
    c.intermediate_size = gguf_uniform(h, k.key("feed_forward_length"), c.num_layers);
    c.max_context = k.size_or("context_length", 131072);
    c.sliding_window = k.size("attention.sliding_window");
    c.rms_norm_eps = h.number(k.key("attention.layer_norm_rms_epsilon"));
    if (!(c.rms_norm_eps > 0 && c.rms_norm_eps <= max_rms_norm_eps))
        h.fail_key(k.key("attention.layer_norm_rms_epsilon"), "must be in (0, 1], got " + std::to_string(c.rms_norm_eps));
    c.final_logit_softcapping = h.has(k.key("final_logit_softcapping")) ? static_cast<float>(h.number(k.key("final_logit_softcapping"))) : 0.f;
    if (c.final_logit_softcapping < 0) h.fail_key(k.key("final_logit_softcapping"), "is negative");
    c.num_experts = k.size("expert_count");
    c.experts_per_token = k.size("expert_used_count");
    c.moe_intermediate_size = k.size("expert_feed_forward_length");
    if (c.experts_per_token > c.num_experts)
        h.fail_key(k.key("expert_used_count"), std::to_string(c.experts_per_token) + " exceeds " + k.key("expert_count") + " " + std::to_string(c.num_experts));
    c.canvas_length = static_cast<index_t>(h.integer("diffusion.canvas_length", 1));
    if (c.canvas_length > c.max_context)
        h.fail_key("diffusion.canvas_length", std::to_string(c.canvas_length) + " exceeds " + k.key("context_length") + " " + std::to_string(c.max_context));
}

/// Tokens llama.cpp (src/llama-vocab.cpp, 00ad355e) adds to a vocabulary's end-of-generation ids by
/// their text, beside its eos and eot ids, for Gemma 4's vocabulary: its end of text, the end of a
/// turn, and the start of a tool's answer (the model stops for the tool to run).
inline constexpr std::string_view gemma4_end_tokens[] = {"<eos>", "<turn|>", "<|tool_response>"};

/// Vocabulary (token_embd.weight's rows) and the special ids: the EOS ids are the file's eos and eot
/// ids and, by their text, gemma4_end_tokens.
inline void read_gemma_gguf_tokens(const gguf_header& h, const gguf_keys& k, diffusion_gemma_config& c) {
    const gguf_tensor& emb = h.tensor("token_embd.weight");
    if (emb.shape.size() != 2 || emb.shape[0] != c.hidden_size || emb.shape[1] > std::numeric_limits<std::int32_t>::max())
        throw tensor_error(h.path(), emb.name, "shape " + shape_string(emb.shape) + " is not {" + k.key("embedding_length") + " " +
                                                   std::to_string(c.hidden_size) + ", vocabulary}");
    c.vocab_size = static_cast<index_t>(emb.shape[1]);
    c.eos_ids.clear();
    for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"})
        if (h.has(key)) {
            const token_id id = gguf_token(h, key, c.vocab_size);
            if (std::find(c.eos_ids.begin(), c.eos_ids.end(), id) == c.eos_ids.end()) c.eos_ids.push_back(id);
        }
    std::string found;  // as llama.cpp's end-of-generation set has them
    for (const token_id id : gguf_tokens_named(h, c.vocab_size, gemma4_end_tokens, c.eos_ids, found)) c.eos_ids.push_back(id);
    c.bos_id = h.has("tokenizer.ggml.bos_token_id") ? gguf_token(h, "tokenizer.ggml.bos_token_id", c.vocab_size) : no_token;
    c.pad_id = h.has("tokenizer.ggml.padding_token_id") ? gguf_token(h, "tokenizer.ggml.padding_token_id", c.vocab_size) : 0;
    c.image_token_id = no_token;  // the converter drops the vision tower: the image placeholder is a token like any other
}

}  // namespace detail

/// DiffusionGemma's config from a diffusion-gemma GGUF file's metadata (and its rope_freqs table).
/// Throws file_error naming a key (missing, mistyped, or a feature dlm does not compute) or
/// tensor_error naming token_embd.weight or rope_freqs.weight.
[[nodiscard]] inline diffusion_gemma_config gguf_diffusion_gemma_config(const gguf_header& h) {
    if (!is_diffusion_gemma_gguf(h))
        h.fail_key("general.architecture", "not '" + std::string(diffusion_gemma_gguf_arch) + "' (llama.cpp's DiffusionGemma architecture)");
    const detail::gguf_keys k{h, std::string(diffusion_gemma_gguf_arch)};
    detail::refuse_gemma_gguf_keys(h, k);
    diffusion_gemma_config c;
    detail::read_gemma_gguf_sizes(h, k, c);
    detail::read_gemma_gguf_layers(h, k, c);
    detail::read_gemma_gguf_tokens(h, k, c);
    const double theta = h.has(k.key("rope.freq_base")) ? h.number(k.key("rope.freq_base")) : 10000.0;
    const double theta_swa = h.has(k.key("rope.freq_base_swa")) ? h.number(k.key("rope.freq_base_swa")) : theta;
    for (const auto& [key, t] : {std::pair{"rope.freq_base", theta}, std::pair{"rope.freq_base_swa", theta_swa}})
        if (const std::string why = rope_theta_problem(t); !why.empty()) h.fail_key(k.key(key), why);
    const auto sl = std::find_if(c.layers.begin(), c.layers.end(), [](const gemma_layer& l) { return l.sliding; });
    const auto fl = std::find_if(c.layers.begin(), c.layers.end(), [](const gemma_layer& l) { return !l.sliding; });
    if (sl != c.layers.end()) c.sliding_rope = {theta_swa, 1.0, sl->head_dim / 2};
    c.full_rope = detail::gemma_gguf_full_rope(h, theta, fl->head_dim);
    return c;
}

}  // namespace dlm::io
