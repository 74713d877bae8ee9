// dlm/io/moe_config.hpp — the mixture-of-experts keys of a config.json, read into one description
// of how a sparse MLP routes (moe_config); what dlm's MoE MLP (cpu/moe.hpp) does not compute is
// refused by name.
//
// LLaDA2.x (model_type "llada2_moe", LLaDA2MoeConfig / LLaDA2MoeGate of modeling_llada2_moe.py):
//   num_experts, num_experts_per_tok, moe_intermediate_size, num_shared_experts (one shared MLP of
//   num_shared_experts · moe_intermediate_size; absent or 0: none), n_group / topk_group (group-limited
//   top-k: a group scores the sum of its two best experts), routed_scaling_factor, first_k_dense_replace
//   (that many leading layers keep a dense MLP of intermediate_size). Scores: sigmoid of the router
//   logits (f32); the experts are picked on score + expert_bias (a per-expert buffer), weighted by the
//   unbiased scores, normalised to sum 1 when more than one is picked, times routed_scaling_factor.
//
// LLaDA-MoE (model_type "lladamoe", LLaDAMoEConfig / LLaDAMoESparseMoeBlock of modeling_lladamoe.py):
//   num_experts, num_experts_per_tok, expert_intermediate_size, shared_expert_intermediate_size (a
//   shared MLP beside every expert layer; absent or null: none), moe_layer_freq (one entry per layer,
//   0 = dense MLP of dense_intermediate_size). Scores: softmax of the router logits (f32), plus
//   expert_bias when moe_router_enable_expert_bias; the k best are picked and weighted by those same
//   (biased) values, not normalised (the block fixes norm_topk_prob to false) and not scaled.
//
// SDAR-MoE (model_type "sdar_moe", SDARMoeForCausalLM: Qwen3-MoE's sparse block, as transformers'
// Qwen3MoeSparseMoeBlock and the SDAR team's own JetEngine port compute it): num_experts,
//   num_experts_per_tok, moe_intermediate_size, norm_topk_prob, decoder_sparse_step (1: every layer)
//   and mlp_only_layers (dense layers of intermediate_size). Scores: softmax of the router logits
//   (f32); the k best are weighted by their scores, divided by their sum when norm_topk_prob (for any
//   k, with no epsilon); no shared expert, no bias, no scaling.
#pragma once

#include <string>
#include <vector>

#include "../core/config.hpp"
#include "config_reader.hpp"

namespace dlm::io {

/// How a sparse MLP routes a token and combines its experts.
struct moe_config {
    enum class scoring { softmax, sigmoid };
    index_t num_experts = 0;
    index_t experts_per_token = 0;        ///< k
    index_t expert_intermediate_size = 0;  ///< each expert's gate/up width
    index_t shared_intermediate_size = 0;  ///< the shared experts' MLP width (0: none)
    index_t groups = 1;                    ///< experts in `groups` equal groups ...
    index_t top_groups = 1;                ///< ... of which the best `top_groups` may be picked from
    index_t first_dense_layers = 0;        ///< leading layers with a dense MLP instead
    scoring score = scoring::softmax;
    bool selection_bias = false;   ///< a per-expert bias added to the scores for picking only (expert_bias)
    bool bias_in_weights = false;  ///< the picked experts are weighted by score + bias (LLaDA-MoE), not the score alone
    /// How the picked weights are divided by their sum: never; by sum + 1e-20 when k > 1 (LLaDA2);
    /// by the plain sum for any k (Qwen3-MoE's norm_topk_prob: SDAR-MoE); by the sum clamped below
    /// at 6.103515625e-5 (the smallest normal f16) for any k (llama.cpp's build_moe_ffn with
    /// expert_weights_norm: a llada2 GGUF file).
    enum class normalization { none, several, always, clamped };
    normalization normalize = normalization::several;
    double routed_scaling = 1.0;   ///< the routed experts' sum times this
    /// The experts' gate activation: SiLU (every family above) or GELU's tanh form (Gemma 4).
    enum class activation { silu, gelu_tanh };
    activation act = activation::silu;
    /// Each picked weight, after normalising, times its expert's scale (Gemma 4's router.per_expert_scale).
    bool per_expert_scale = false;
    std::vector<char> layers;      ///< per layer, whether it has experts (LLaDA-MoE's moe_layer_freq); empty: first_dense_layers decides

    [[nodiscard]] bool is_moe_layer(index_t layer) const noexcept {
        if (num_experts <= 0) return false;
        if (!layers.empty()) return layer >= 0 && static_cast<std::size_t>(layer) < layers.size() && layers[static_cast<std::size_t>(layer)];
        return layer >= first_dense_layers;
    }
};

namespace detail {

/// LLaDA2MoeConfig's MoE keys (defaults in parentheses are the configuration class's).
inline moe_config parse_llada2_moe(const config_reader& r, index_t layers) {
    moe_config m;
    m.num_experts = r.integer_or("num_experts", 16);
    m.experts_per_token = r.integer_or("num_experts_per_tok", 2);
    m.expert_intermediate_size = r.integer("moe_intermediate_size");
    const index_t shared = r.integer_or("num_shared_experts", 0);
    m.groups = r.integer_or("n_group", 8);
    m.top_groups = r.integer_or("topk_group", 4);
    m.first_dense_layers = r.integer_or("first_k_dense_replace", 0);
    m.routed_scaling = r.number_or("routed_scaling_factor", 2.5);
    m.score = moe_config::scoring::sigmoid;
    m.selection_bias = true;  // LLaDA2MoeGate always holds expert_bias
    m.normalize = moe_config::normalization::several;
    const char* gate = "dlm computes LLaDA2MoeGate: sigmoid scores, expert_bias for the pick, weights normalised";
    r.require("score_function", "sigmoid", gate);
    r.require("norm_topk_prob", true, gate);
    r.require("moe_router_enable_expert_bias", true, gate);
    const auto positive = [&](const char* key, index_t v) {
        if (v < 1) r.fail(key, std::to_string(v) + " must be positive");
    };
    positive("num_experts", m.num_experts);
    positive("num_experts_per_tok", m.experts_per_token);
    positive("moe_intermediate_size", m.expert_intermediate_size);
    positive("n_group", m.groups);
    positive("topk_group", m.top_groups);
    if (shared < 0) r.fail("num_shared_experts", std::to_string(shared) + " must be >= 0");
    m.shared_intermediate_size = shared * m.expert_intermediate_size;
    if (m.num_experts % m.groups != 0)
        r.fail("n_group", std::to_string(m.groups) + " does not divide num_experts " + std::to_string(m.num_experts));
    if (m.top_groups > m.groups)
        r.fail("topk_group", std::to_string(m.top_groups) + " is more than n_group " + std::to_string(m.groups));
    if (m.num_experts / m.groups < 2)
        r.fail("n_group", "groups of " + std::to_string(m.num_experts / m.groups) + " expert(s): a group scores its two best experts");
    if (m.experts_per_token > m.top_groups * (m.num_experts / m.groups))
        r.fail("num_experts_per_tok", std::to_string(m.experts_per_token) + " is more than the experts of topk_group groups");
    if (m.first_dense_layers < 0 || m.first_dense_layers > layers)
        r.fail("first_k_dense_replace", std::to_string(m.first_dense_layers) + " is outside [0, num_hidden_layers]");
    return m;
}

/// LLaDAMoEConfig's MoE keys (modeling_lladamoe.py's block computes softmax routing whatever
/// moe_router_score_function says, so that key is not read).
inline moe_config parse_lladamoe_moe(const config_reader& r, index_t num_layers) {
    moe_config m;
    m.num_experts = r.integer("num_experts");
    m.experts_per_token = r.integer("num_experts_per_tok");
    m.expert_intermediate_size = r.integer("expert_intermediate_size");
    m.shared_intermediate_size = r.integer_or("shared_expert_intermediate_size", 0);
    m.score = moe_config::scoring::softmax;
    m.selection_bias = m.bias_in_weights = r.boolean_or("moe_router_enable_expert_bias", false);
    m.normalize = moe_config::normalization::none;
    m.routed_scaling = 1.0;
    for (const char* key : {"num_experts", "num_experts_per_tok", "expert_intermediate_size"})
        if (r.integer(key) < 1) r.fail(key, std::to_string(r.integer(key)) + " must be positive");
    if (m.experts_per_token > m.num_experts)
        r.fail("num_experts_per_tok", std::to_string(m.experts_per_token) + " is more than num_experts " + std::to_string(m.num_experts));
    if (m.shared_intermediate_size < 0) r.fail("shared_expert_intermediate_size", "must be >= 0 (or null: none)");
    const auto& freq = r.required("moe_layer_freq");
    if (!freq.is_array() || freq.size() != static_cast<std::size_t>(num_layers))
        r.fail("moe_layer_freq", "expected a list of " + std::to_string(num_layers) + " entries (one per layer, 0 = dense), found " +
                                     json_quote(freq));
    for (const auto& e : freq) {
        const auto v = json_int64(e);
        if (!v) r.fail("moe_layer_freq", "entries must be integers, found " + json_quote(e));
        m.layers.push_back(*v != 0 ? 1 : 0);
    }
    return m;
}

/// SDARMoeConfig's MoE keys (Qwen3MoeConfig's names). The sizes and norm_topk_prob are required:
/// Qwen3-MoE configs hold them, and SDAR-MoE's ports disagree on what an absent norm_topk_prob
/// means (transformers' Qwen3MoeConfig: false; JetEngine always normalises).
inline moe_config parse_sdar_moe(const config_reader& r, index_t num_layers) {
    moe_config m;
    m.num_experts = r.integer("num_experts");
    m.experts_per_token = r.integer("num_experts_per_tok");
    m.expert_intermediate_size = r.integer("moe_intermediate_size");
    for (const char* key : {"num_experts", "num_experts_per_tok", "moe_intermediate_size"})
        if (r.integer(key) < 1) r.fail(key, std::to_string(r.integer(key)) + " must be positive");
    if (m.experts_per_token > m.num_experts)
        r.fail("num_experts_per_tok", std::to_string(m.experts_per_token) + " is more than num_experts " + std::to_string(m.num_experts));
    if (!r.has("norm_topk_prob"))
        r.fail("norm_topk_prob", "missing: SDAR-MoE's references disagree on its default (transformers' Qwen3-MoE: false, "
                                 "JetEngine: always normalised); Qwen3-30B-A3B, SDAR-30B-A3B's base, says true");
    m.normalize = r.boolean_or("norm_topk_prob", true) ? moe_config::normalization::always : moe_config::normalization::none;
    m.score = moe_config::scoring::softmax;
    const index_t step = r.integer_or("decoder_sparse_step", 1);
    if (step < 1) r.fail("decoder_sparse_step", std::to_string(step) + " must be positive");
    m.layers.assign(static_cast<std::size_t>(num_layers), 0);
    for (index_t l = 0; l < num_layers; ++l) m.layers[static_cast<std::size_t>(l)] = (l + 1) % step == 0 ? 1 : 0;
    if (r.has("mlp_only_layers")) {
        const auto& only = r.object().at("mlp_only_layers");
        if (!only.is_array()) r.fail("mlp_only_layers", "expected a list of layer indices, found " + json_quote(only));
        for (const auto& e : only) {
            const auto v = json_int64(e);
            if (!v || *v < 0 || *v >= num_layers)
                r.fail("mlp_only_layers", "entries must be layer indices in [0, " + std::to_string(num_layers) + "), found " + json_quote(e));
            m.layers[static_cast<std::size_t>(*v)] = 0;
        }
    }
    return m;
}

}  // namespace detail

}  // namespace dlm::io
