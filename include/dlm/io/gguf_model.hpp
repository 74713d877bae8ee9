// dlm/io/gguf_model.hpp — the model a GGUF file holds, as llama.cpp's converter writes it
// (convert_hf_to_gguf.py: LLaDAModel, DreamModel, LLaDAMoEModel, LLaDA2MoeModel; gguf-py
// constants.py: keys and tensor names).
//
//   general.architecture            "llada", "dream", "llada-moe" or "llada2" (anything else is refused by name)
//   {arch}.block_count              layers                  {arch}.embedding_length     hidden size
//   {arch}.feed_forward_length      MLP width               {arch}.context_length       max context
//   {arch}.attention.head_count     heads                   {arch}.attention.head_count_kv   KV heads
//   {arch}.rope.freq_base           theta (default 10000)   {arch}.attention.layer_norm_rms_epsilon
//   {arch}.rope.dimension_count / attention.key_length / attention.value_length: the head size
//   diffusion.shift_logits          whether row p-1 predicts slot p (LLaDA writes false; Dream true)
//   tokenizer.ggml.mask_token_id / eos_token_id / eot_token_id, token_embd rows = the vocabulary
//   dlm.gen_length, dlm.block_length  dlm's own decoding hints (tools/write_gguf.py writes them)
//
// Tensors: token_embd, blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate,
// ffn_up, ffn_down}.weight, blk.N.attn_{q,k,v}.bias, output_norm, output (absent: tied to the
// embedding). LLaDAModel.modify_tensors permutes the rows of attn_q/attn_k (weights and biases) per
// head, for ggml's adjacent-pair RoPE: GGUF row h·d + 2j + s holds Hugging Face row h·d + s·d/2 + j
// (d the head size, j < d/2, s ∈ {0, 1}); llada_unpermuted_row undoes it. Dream is not permuted.
//
// llada-moe (LLaDA-MoE-7B-A1B; llama.cpp's LLM_ARCH_LLADA_MOE): every layer a mixture of experts,
// as llama.cpp's graph computes it: softmax over the router logits, the k best experts weighted by
// their (unnormalised) probabilities, no shared expert and no expert bias (the converter writes
// neither). Keys {arch}.expert_count, .expert_used_count, .expert_feed_forward_length (absent:
// feed_forward_length / expert_used_count, as llama.cpp); feed_forward_length is optional.
// Tensors blk.N.{attn_q_norm, attn_k_norm} (per-head RMSNorm, [head size]), ffn_gate_inp (the
// router, ggml {hidden, experts}), ffn_gate_exps and ffn_up_exps ({hidden, expert width, experts};
// or ffn_gate_up_exps, {hidden, 2 · width, experts}, gate rows first) and ffn_down_exps ({width,
// hidden, experts}) in place of ffn_gate/ffn_up/ffn_down; not permuted (ggml's NEOX RoPE).
//
// llada2 (LLaDA2.0 / 2.1, LLaDA2MoeModelLM; llama.cpp's LLM_ARCH_LLADA2 as pull request #17454 adds it,
// its LLaDA2MoeModel converter a BailingMoeV2Model): dlm's llada2_moe model (the folder's), read as
// llama.cpp's graph computes it. Keys: expert_count, expert_used_count, expert_feed_forward_length,
// leading_dense_block_count (dense layers first, of feed_forward_length), expert_shared_count and
// expert_shared_feed_forward_length (the shared MLP's width: (that, else the experts' width) ·
// expert_shared_count, as llama.cpp sizes it), expert_group_count / expert_group_used_count (a group
// scores its two best biased experts; absent or 1: no groups), expert_gating_func (2, sigmoid;
// required), expert_weights_norm (divide by the sum clamped at 6.1e-5; absent: false),
// expert_weights_scale (0 or 1: none), rope.dimension_count (the leading dims of each head NEOX RoPE
// rotates; absent: all). Tensors blk.N.attn_qkv (q, k and v rows stacked, not permuted), attn_q_norm,
// attn_k_norm, attn_output; dense layers ffn_gate/ffn_up/ffn_down; expert layers ffn_gate_inp,
// exp_probs_b.bias (the selection bias; absent: none), ffn_{gate,up,down}_exps and
// ffn_{gate,up,down}_shexp. Refused by key: a gating function other than sigmoid, no shared expert,
// nextn_predict_layers (llama.cpp's llada2 graph runs every layer), groups llama.cpp asserts against,
// and heads · head size other than embedding_length (llama.cpp splits the fused qkv there).
#pragma once

#include <algorithm>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "gguf.hpp"
#include "decoding_keys.hpp"
#include "model_config.hpp"
#include "safetensors_header.hpp"

namespace dlm::io {

/// The GGUF tensor name of `role` ("blk.3.attn_q.weight"); roles and layers as in cpu/weights.hpp.
/// Kept as strings here so io/ does not depend on cpu/: `stem` is the role's GGUF stem.
[[nodiscard]] inline std::string gguf_tensor_name(std::string_view stem, index_t layer, bool per_layer) {
    return per_layer ? "blk." + std::to_string(layer) + "." + std::string(stem) : std::string(stem);
}

/// The Hugging Face row stored at GGUF row `gguf_row` of a LLaDA attn_q/attn_k tensor (see the top).
[[nodiscard]] constexpr std::int64_t llada_hf_row_of(std::int64_t gguf_row, std::int64_t head_dim) noexcept {
    const std::int64_t h = gguf_row / head_dim, i = gguf_row % head_dim;
    return h * head_dim + (i % 2) * (head_dim / 2) + i / 2;
}
/// The GGUF row that holds Hugging Face row `hf_row` (the inverse of llada_hf_row_of).
[[nodiscard]] constexpr std::int64_t llada_gguf_row_of(std::int64_t hf_row, std::int64_t head_dim) noexcept {
    const std::int64_t h = hf_row / head_dim, i = hf_row % head_dim, half = head_dim / 2;
    return h * head_dim + 2 * (i % half) + i / half;
}
static_assert(llada_gguf_row_of(llada_hf_row_of(13, 8), 8) == 13 && llada_hf_row_of(1, 8) == 4,
              "GGUF row 1 of a head of 8 holds the first element of the second half (Hugging Face row 4)");

namespace detail {

/// Reads the keys of one architecture, naming "{arch}.key" in errors.
struct gguf_keys {
    const gguf_header& h;
    std::string arch;
    [[nodiscard]] std::string key(std::string_view k) const { return arch + "." + std::string(k); }
    [[nodiscard]] index_t size(std::string_view k) const { return static_cast<index_t>(h.integer(key(k), 1)); }
    [[nodiscard]] index_t size_or(std::string_view k, index_t fallback) const { return h.has(key(k)) ? size(k) : fallback; }
};

[[nodiscard]] inline token_id gguf_token(const gguf_header& h, std::string_view key, index_t vocab) {
    const std::int64_t id = h.integer(key, 0, std::numeric_limits<std::int32_t>::max());
    if (id >= vocab)
        h.fail_key(key, "token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(vocab) + ") of token_embd.weight");
    return static_cast<token_id>(id);
}

/// The ids in [0, vocab) of tokenizer.ggml.tokens whose text is one of `names`, except those in
/// `skip`, in id order, each with its text ("<turn|> 106") in `found`: end-of-turn tokens a file
/// names only by their text. None without tokenizer.ggml.tokens.
[[nodiscard]] inline std::vector<token_id> gguf_tokens_named(const gguf_header& h, index_t vocab, std::span<const std::string_view> names,
                                                             std::span<const token_id> skip, std::string& found) {
    std::vector<token_id> ids;
    if (!h.has("tokenizer.ggml.tokens")) return ids;
    const std::vector<std::string_view> tokens = h.string_array("tokenizer.ggml.tokens");
    for (std::size_t id = 0; id < tokens.size() && id < static_cast<std::size_t>(vocab); ++id) {
        const auto t = static_cast<token_id>(id);
        if (std::find(names.begin(), names.end(), tokens[id]) == names.end() || std::find(skip.begin(), skip.end(), t) != skip.end()) continue;
        ids.push_back(t);
        found += (found.empty() ? "" : ", ") + std::string(tokens[id]) + " " + std::to_string(id);
    }
    return ids;
}

/// The experts and the number each token picks (expert_count, expert_used_count), the second no more
/// than the first: what every MoE architecture's keys begin with.
[[nodiscard]] inline moe_config read_gguf_expert_counts(const gguf_header& h, const gguf_keys& k) {
    moe_config m;
    m.num_experts = k.size("expert_count");
    m.experts_per_token = k.size("expert_used_count");
    if (m.experts_per_token > m.num_experts)
        h.fail_key(k.key("expert_used_count"), std::to_string(m.experts_per_token) + " is more than " + k.key("expert_count") + " " +
                                                   std::to_string(m.num_experts));
    return m;
}

/// A llada-moe file's experts (see the top): c.moe, and c.intermediate_size (feed_forward_length,
/// else the experts' width; no layer is dense). Refuses a gating function other than softmax and
/// normalised or scaled expert weights, which llama.cpp's llada-moe graph does not compute.
inline void read_gguf_experts(const gguf_header& h, const gguf_keys& k, model_config& c) {
    moe_config m = read_gguf_expert_counts(h, k);
    if (h.has(k.key("expert_feed_forward_length"))) {
        m.expert_intermediate_size = k.size("expert_feed_forward_length");
    } else {
        const index_t ff = k.size("feed_forward_length");
        if (ff % m.experts_per_token != 0)
            h.fail_key(k.key("feed_forward_length"), "the file has no " + k.key("expert_feed_forward_length") + ", and " + std::to_string(ff) +
                                                         " is not a multiple of " + k.key("expert_used_count") + " " +
                                                         std::to_string(m.experts_per_token) + " (llama.cpp's fallback width)");
        m.expert_intermediate_size = ff / m.experts_per_token;
    }
    c.intermediate_size = h.has(k.key("feed_forward_length")) ? k.size("feed_forward_length") : m.expert_intermediate_size;
    m.score = moe_config::scoring::softmax;
    m.normalize = moe_config::normalization::none;
    m.routed_scaling = 1.0;
    const std::string graph = "; llama.cpp's llada-moe graph, which dlm computes, takes softmax weights as they are";
    if (h.has(k.key("expert_gating_func")) && h.integer(k.key("expert_gating_func"), 0) != 1)
        h.fail_key(k.key("expert_gating_func"), std::to_string(h.integer(k.key("expert_gating_func"), 0)) + " is not softmax (1)" + graph);
    if (h.has(k.key("expert_weights_norm")) && h.boolean(k.key("expert_weights_norm")))
        h.fail_key(k.key("expert_weights_norm"), "true: normalised expert weights" + graph);
    if (h.has(k.key("expert_weights_scale")) && h.number(k.key("expert_weights_scale")) != 0.0 && h.number(k.key("expert_weights_scale")) != 1.0)
        h.fail_key(k.key("expert_weights_scale"), "scaled expert weights" + graph);
    if (h.has(k.key("expert_shared_count")) && h.integer(k.key("expert_shared_count"), 0) != 0)
        h.fail_key(k.key("expert_shared_count"), "shared experts; llama.cpp's llada-moe graph, which dlm computes, has none");
    c.moe = m;
}

/// expert_group_count and expert_group_used_count into m (see the top), with llama.cpp's asserts
/// (fewer groups than experts, dividing them, 0 < used < groups) and dlm's (a group of at least the two
/// experts it scores, k no more than the kept groups hold).
inline void read_gguf_expert_groups(const gguf_header& h, const gguf_keys& k, moe_config& m) {
    m.groups = m.top_groups = 1;
    const index_t groups = h.has(k.key("expert_group_count")) ? static_cast<index_t>(h.integer(k.key("expert_group_count"), 0)) : 0;
    if (groups <= 1) return;  // llama.cpp groups only when there are more than one
    const std::string key = k.key("expert_group_count"), count = " " + k.key("expert_count") + " " + std::to_string(m.num_experts);
    if (groups >= m.num_experts || m.num_experts % groups != 0)
        h.fail_key(key, std::to_string(groups) + " is not fewer than and a divisor of" + count + " (llama.cpp asserts both)");
    if (m.num_experts / groups < 2) h.fail_key(key, std::to_string(groups) + " groups of one expert: a group scores its two best experts");
    m.groups = groups;
    m.top_groups = k.size("expert_group_used_count");
    if (m.top_groups >= groups)
        h.fail_key(k.key("expert_group_used_count"), std::to_string(m.top_groups) + " is not fewer than " + key + " " + std::to_string(groups) +
                                                         " (llama.cpp asserts it)");
    if (m.experts_per_token > m.top_groups * (m.num_experts / groups))
        h.fail_key(k.key("expert_used_count"), std::to_string(m.experts_per_token) + " is more than the experts of the " +
                                                   std::to_string(m.top_groups) + " groups kept");
}

/// A llada2 file's experts (see the top), as llama.cpp's llada2 graph routes them: c.moe, and
/// c.intermediate_size (the leading dense layers' width).
inline void read_gguf_llada2_experts(const gguf_header& h, const gguf_keys& k, model_config& c) {
    moe_config m = read_gguf_expert_counts(h, k);
    m.expert_intermediate_size = k.size("expert_feed_forward_length");
    m.first_dense_layers = static_cast<index_t>(h.integer(k.key("leading_dense_block_count"), 0, c.num_layers));
    read_gguf_expert_groups(h, k, m);
    const std::string graph = "; llama.cpp's llada2 graph, which dlm computes, ";
    const std::int64_t shared = h.integer(k.key("expert_shared_count"), 0), shared_ff = h.integer(k.key("expert_shared_feed_forward_length"), 0);
    if (shared == 0) h.fail_key(k.key("expert_shared_count"), "0" + graph + "always adds a shared expert");
    const std::int64_t width = (shared_ff != 0 ? shared_ff : m.expert_intermediate_size) * shared;
    if (width > std::numeric_limits<index_t>::max())
        h.fail_key(k.key("expert_shared_count"), std::to_string(shared) + " shared experts of " + std::to_string(width / shared) + " make a width dlm cannot index");
    m.shared_intermediate_size = static_cast<index_t>(width);
    if (const std::int64_t gating = h.integer(k.key("expert_gating_func"), 0); gating != 2)
        h.fail_key(k.key("expert_gating_func"), std::to_string(gating) + " is not sigmoid (2), which LLaDA2.x's converter writes and dlm reads");
    m.score = moe_config::scoring::sigmoid;
    m.selection_bias = true;  // blk.N.exp_probs_b.bias; absent: zero, as llama.cpp adds none
    m.normalize = h.has(k.key("expert_weights_norm")) && h.boolean(k.key("expert_weights_norm")) ? moe_config::normalization::clamped
                                                                                                : moe_config::normalization::none;
    const double scale = h.number(k.key("expert_weights_scale"));
    m.routed_scaling = scale == 0.0 ? 1.0 : scale;  // llama.cpp scales by neither 0 nor 1
    if (h.has(k.key("nextn_predict_layers")) && h.integer(k.key("nextn_predict_layers"), 0) != 0)
        h.fail_key(k.key("nextn_predict_layers"), "multi-token-prediction layers" + graph + "runs every layer as a transformer block");
    c.intermediate_size = m.first_dense_layers > 0 || h.has(k.key("feed_forward_length")) ? k.size("feed_forward_length") : m.expert_intermediate_size;
    c.moe = m;
}

/// llada2's attention (see the top): q of embedding_length rows first in the fused attn_qkv, and
/// RoPE over the leading rope.dimension_count dims of each head (c.rotary_dim).
inline void read_gguf_llada2_attention(const gguf_header& h, const gguf_keys& k, model_config& c) {
    if (std::int64_t{c.num_heads} * c.head_dim != c.hidden_size)
        h.fail_key(k.key("attention.head_count"), std::to_string(c.num_heads) + " heads of " + std::to_string(c.head_dim) + " are not " +
                                                       k.key("embedding_length") + " " + std::to_string(c.hidden_size) +
                                                       ": llama.cpp's llada2 graph splits the fused attn_qkv at embedding_length");
    const index_t dims = k.size_or("rope.dimension_count", c.head_dim);
    if (dims > c.head_dim || dims % 2 != 0)
        h.fail_key(k.key("rope.dimension_count"), std::to_string(dims) + " rotated dims of a head of " + std::to_string(c.head_dim) +
                                                      "; dlm needs an even number no larger than the head");
    c.rotary_dim = dims;
}

/// The architecture and the block's geometry, RoPE and norm of a GGUF file's metadata.
inline void read_gguf_geometry(const gguf_header& h, model_config& c) {
    const std::string arch = std::string(h.string("general.architecture"));
    if (arch == "llada") c.arch = architecture::llada;
    else if (arch == "dream") c.arch = architecture::dream;
    else if (arch == "llada-moe") c.arch = architecture::lladamoe;
    else if (arch == "llada2") c.arch = architecture::llada2_moe;
    else if (arch == "diffusion-gemma")
        h.fail_key("general.architecture", "'diffusion-gemma' is DiffusionGemma, a uniform-state model the transformer does not run: "
                                           "dlm::cpu::diffusion_gemma::load reads the file");
    else
        h.fail_key("general.architecture", "architecture '" + arch + "' is not supported; dlm reads GGUF files of 'llada', 'dream', "
                                           "'llada-moe' and 'llada2' (llama.cpp's LLaDAModel, DreamModel, LLaDAMoEModel and "
                                           "LLaDA2MoeModel converters)");
    const gguf_keys k{h, arch};
    const std::string origin = "GGUF key '";
    c.num_layers = k.size("block_count");
    c.hidden_size = k.size("embedding_length");
    if (c.arch == architecture::lladamoe) {
        read_gguf_experts(h, k, c);
    } else if (c.arch == architecture::llada2_moe) {
        read_gguf_llada2_experts(h, k, c);
    } else {
        c.intermediate_size = k.size("feed_forward_length");
    }
    c.num_heads = k.size("attention.head_count");
    c.num_kv_heads = k.size_or("attention.head_count_kv", c.num_heads);
    c.max_context = k.size_or("context_length", c.arch == architecture::llada ? 4096 : 32768);
    if (c.num_heads % c.num_kv_heads != 0)
        h.fail_key(k.key("attention.head_count_kv"), std::to_string(c.num_kv_heads) + " does not divide " + k.key("attention.head_count") + " " +
                                                          std::to_string(c.num_heads));
    c.head_dim = k.size_or("attention.key_length", c.hidden_size / c.num_heads);
    if (!h.has(k.key("attention.key_length")) && c.hidden_size % c.num_heads != 0)
        h.fail_key(k.key("attention.head_count"), std::to_string(c.num_heads) + " does not divide " + k.key("embedding_length") + " " +
                                                       std::to_string(c.hidden_size));
    if (c.arch == architecture::llada2_moe) read_gguf_llada2_attention(h, k, c);
    for (const std::string_view same : {"attention.value_length", "rope.dimension_count"})
        if (h.has(k.key(same)) && k.size(same) != c.head_dim && !(c.arch == architecture::llada2_moe && same == "rope.dimension_count"))
            h.fail_key(k.key(same), std::to_string(k.size(same)) + " differs from the head size " + std::to_string(c.head_dim) +
                                        " (dlm rotates and attends over whole heads)");
    if (c.head_dim % 2 != 0) h.fail_key(k.key("attention.head_count"), "the head size " + std::to_string(c.head_dim) + " is odd; RoPE needs an even one");
    if (h.has(k.key("rope.scaling.type")) && h.string(k.key("rope.scaling.type")) != "none")
        h.fail_key(k.key("rope.scaling.type"), "'" + std::string(h.string(k.key("rope.scaling.type"))) + "' is not supported (dlm runs plain RoPE)");
    // llama.cpp scales every position by 1 / factor whatever the type says ("none" included), reading
    // the older rope.scale_linear only where rope.scaling.factor is absent; 0 and 1 scale nothing.
    const char* factor = h.has(k.key("rope.scaling.factor")) ? "rope.scaling.factor" : "rope.scale_linear";
    if (h.has(k.key(factor)) && h.number(k.key(factor)) != 0.0 && h.number(k.key(factor)) != 1.0)
        h.fail_key(k.key(factor), std::to_string(h.number(k.key(factor))) +
                                      " is not supported: llama.cpp divides every position by it, and dlm runs plain RoPE (0 or 1 scale nothing)");
    if (h.has(k.key("rope.freq_base"))) {
        c.rope_theta = h.number(k.key("rope.freq_base"));
        if (const std::string why = rope_theta_problem(c.rope_theta); !why.empty()) h.fail_key(k.key("rope.freq_base"), why);
        c.rope_theta_source = origin + k.key("rope.freq_base") + "'";
    } else {
        c.rope_theta_source = "10000 (the file has no " + k.key("rope.freq_base") + "; llama.cpp's default)";
    }
    const std::string eps_key = k.key("attention.layer_norm_rms_epsilon");
    c.rms_norm_eps = h.has(eps_key) ? h.number(eps_key) : c.arch == architecture::llada ? 1e-5 : 1e-6;
    if (!(c.rms_norm_eps > 0 && c.rms_norm_eps <= max_rms_norm_eps)) h.fail_key(eps_key, "must be in (0, 1], got " + std::to_string(c.rms_norm_eps));
}

/// The vocabulary (token_embd.weight's rows), the tied head, biases and norms the tensors show, the
/// logit shift and the refusal of causal files.
inline void read_gguf_tensors_and_flags(const gguf_header& h, const std::string& arch, model_config& c) {
    const gguf_keys k{h, arch};
    const gguf_tensor& emb = h.tensor("token_embd.weight");
    if (emb.shape.size() != 2 || emb.shape[0] != c.hidden_size)
        throw tensor_error(h.path(), emb.name, "shape " + shape_string(emb.shape) + " is not {" + k.key("embedding_length") + " " +
                                                   std::to_string(c.hidden_size) + ", vocabulary}");
    if (emb.shape[1] > std::numeric_limits<std::int32_t>::max()) throw tensor_error(h.path(), emb.name, "more rows than dlm's token ids hold");
    c.vocab_size = static_cast<index_t>(emb.shape[1]);
    if (h.has(k.key("vocab_size")) && h.integer(k.key("vocab_size"), 1) > c.vocab_size)
        h.fail_key(k.key("vocab_size"), std::to_string(h.integer(k.key("vocab_size"), 1)) + " exceeds the " + std::to_string(c.vocab_size) +
                                            " rows of token_embd.weight");
    c.tie_word_embeddings = h.find_tensor("output.weight") == nullptr;
    c.qkv_bias = h.find_tensor("blk.0.attn_q.bias") != nullptr;
    c.qk_norm = h.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
    const bool own_rows = c.arch == architecture::llada || c.arch == architecture::llada2_moe;  // LLaDA's and LLaDA2's generate()
    c.logits_shift = h.has("diffusion.shift_logits") ? h.boolean("diffusion.shift_logits") : !own_rows;
    c.causal = false;
    if (h.has(k.key("attention.causal")) && h.boolean(k.key("attention.causal")))
        h.fail_key(k.key("attention.causal"), "true: a causal model; dlm reads the diffusion models 'llada', 'dream', 'llada-moe' and 'llada2'");
}

/// The mask, EOS and end-of-turn ids and dlm's own decoding hints.
inline void read_gguf_decoding(const gguf_header& h, const std::string& arch, model_config& c) {
    const std::string origin = "GGUF key '";
    const bool mask_given = h.has("tokenizer.ggml.mask_token_id");
    c.mask_id = mask_given ? gguf_token(h, "tokenizer.ggml.mask_token_id", c.vocab_size)
                : c.arch == architecture::llada    ? llada_default_mask_id
                : c.arch == architecture::lladamoe || c.arch == architecture::llada2_moe ? llada2_default_mask_id  // 156895, as the converters write
                                                   : dream_default_mask_id;
    if (c.mask_id >= c.vocab_size)
        h.fail_key("tokenizer.ggml.mask_token_id", "missing, and the family's default mask id " + std::to_string(c.mask_id) +
                                                       " is outside the vocabulary of " + std::to_string(c.vocab_size));
    c.decoding.mask_id_origin = mask_given ? origin + "tokenizer.ggml.mask_token_id'" : arch + "'s default mask id (the file has no tokenizer.ggml.mask_token_id)";
    std::string eos_from;
    for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"}) {
        if (!h.has(key)) continue;
        const token_id id = gguf_token(h, key, c.vocab_size);
        if (std::find(c.eos_ids.begin(), c.eos_ids.end(), id) == c.eos_ids.end()) c.eos_ids.push_back(id);
        eos_from += (eos_from.empty() ? origin : ", '") + key + "'";
    }
    c.decoding.eos_ids_origin = eos_from.empty() ? "none in " + h.path() : eos_from;
    std::string names;  // end-of-turn tokens, as decoding_keys.hpp finds them in a tokenizer.json
    std::vector<token_id> ids = gguf_tokens_named(h, c.vocab_size, end_of_turn_tokens, c.eos_ids, names);
    if (!ids.empty()) c.decoding.end_of_turn_ids = {std::move(ids), origin + "tokenizer.ggml.tokens' " + names};
    for (const auto& [key, hint] : {std::pair{"dlm.gen_length", &c.decoding.gen_length}, std::pair{"dlm.block_length", &c.decoding.block_length}})
        if (h.has(key)) *hint = {static_cast<index_t>(h.integer(key, 1, max_slots)), origin + key + "'"};
}

}  // namespace detail

/// The model_config of a GGUF file's metadata. Throws file_error naming the key (missing, mistyped,
/// inconsistent, or a feature dlm does not run) or tensor_error for a missing token_embd.weight.
[[nodiscard]] inline model_config gguf_model_config(const gguf_header& h) {
    model_config c;
    detail::read_gguf_geometry(h, c);
    const std::string arch = std::string(h.string("general.architecture"));
    detail::read_gguf_tensors_and_flags(h, arch, c);
    detail::read_gguf_decoding(h, arch, c);
    return c;
}

}  // namespace dlm::io
