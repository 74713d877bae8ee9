// dlm/model/transformer_weights.hpp — the weights of dlm's transformer (both backends: cpu/ and
// cuda/ read them), their checkpoint names, and random weights for tests and benchmarks.
//
// One layout serves both families: a pre-norm decoder block (RMSNorm, rotary grouped-query
// attention with optional q/k/v biases, RMSNorm, SiLU-gated MLP), a final RMSNorm and an output head
// that is its own matrix or the embedding (tied). Only the tensor names differ between LLaDA and
// Qwen2/Dream; `tensor_name` maps a role to the name in the Hugging Face checkpoint.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "../io/model_config.hpp"
#include "../io/safetensors.hpp"

namespace dlm {

/// A row-major f32 matrix, as Hugging Face stores linear weights: [out_features, in_features]. Only a
/// holder of values (in-memory weights for tests and benchmarks): products run on packed weights
/// (cpu/gemm.hpp, cuda/gemm.cuh).
class f32_matrix {
public:
    f32_matrix() = default;
    f32_matrix(std::int64_t rows, std::int64_t cols) { resize(rows, cols); }
    /// Reshapes to [rows, cols], every value 0.
    void resize(std::int64_t rows, std::int64_t cols) {
        if (rows < 0 || cols < 0) throw invalid_parameter("f32_matrix", "negative shape [" + std::to_string(rows) + ", " + std::to_string(cols) + "]");
        rows_ = rows;
        cols_ = cols;
        values_.assign(static_cast<std::size_t>(rows * cols), 0.f);
    }
    [[nodiscard]] std::int64_t rows() const noexcept { return rows_; }
    [[nodiscard]] std::int64_t cols() const noexcept { return cols_; }
    [[nodiscard]] std::int64_t size() const noexcept { return rows_ * cols_; }
    [[nodiscard]] float* data() noexcept { return values_.data(); }
    [[nodiscard]] const float* data() const noexcept { return values_.data(); }
    [[nodiscard]] float& operator()(std::int64_t r, std::int64_t c) noexcept { return values_[static_cast<std::size_t>(r * cols_ + c)]; }
    [[nodiscard]] float operator()(std::int64_t r, std::int64_t c) const noexcept { return values_[static_cast<std::size_t>(r * cols_ + c)]; }

private:
    std::int64_t rows_ = 0, cols_ = 0;
    std::vector<float> values_;
};

/// An f32 vector (norm weights, biases): [size].
class f32_vector {
public:
    f32_vector() = default;
    explicit f32_vector(std::int64_t n) { resize(n); }
    /// Resizes to `n` values, every one 0.
    void resize(std::int64_t n) {
        if (n < 0) throw invalid_parameter("f32_vector", "negative size " + std::to_string(n));
        values_.assign(static_cast<std::size_t>(n), 0.f);
    }
    [[nodiscard]] std::int64_t size() const noexcept { return static_cast<std::int64_t>(values_.size()); }
    [[nodiscard]] float* data() noexcept { return values_.data(); }
    [[nodiscard]] const float* data() const noexcept { return values_.data(); }
    [[nodiscard]] float& operator()(std::int64_t i) noexcept { return values_[static_cast<std::size_t>(i)]; }
    [[nodiscard]] float operator()(std::int64_t i) const noexcept { return values_[static_cast<std::size_t>(i)]; }

private:
    std::vector<float> values_;
};

/// One decoder block. Biases are empty unless the config has qkv_bias.
struct layer_weights {
    f32_vector attn_norm;                       ///< [hidden]
    f32_matrix q_proj, k_proj, v_proj;          ///< [heads·head_dim, hidden], [kv_heads·head_dim, hidden] (twice)
    f32_vector q_bias, k_bias, v_bias;          ///< [heads·head_dim], [kv_heads·head_dim] (twice)
    f32_vector q_norm, k_norm;                  ///< [head_dim] each; empty unless the config has qk_norm
    f32_matrix o_proj;                          ///< [hidden, heads·head_dim]
    f32_vector mlp_norm;                        ///< [hidden]
    f32_matrix gate_proj, up_proj;              ///< [intermediate, hidden]: silu(gate(x)) · up(x)
    f32_matrix down_proj;                       ///< [hidden, intermediate]
};

struct transformer_weights {
    f32_matrix embedding;                  ///< [vocab, hidden]
    std::vector<layer_weights> layers;
    f32_vector final_norm;                 ///< [hidden]
    f32_matrix lm_head;                    ///< [vocab, hidden]; empty when the config ties it to the embedding
};

/// What a tensor is, independent of the family's naming.
enum class tensor_role {
    embedding, attn_norm, q_proj, k_proj, v_proj, q_bias, k_bias, v_bias, o_proj,
    mlp_norm, gate_proj, up_proj, down_proj, final_norm, lm_head,
    q_norm, k_norm  ///< per-head RMSNorm weights of q and k (Qwen3 block: SDAR)
};

/// The tensor's name in the family's Hugging Face checkpoint (`layer` is ignored for the
/// embedding, the final norm and the head).
[[nodiscard]] inline std::string tensor_name(io::architecture arch, tensor_role role, index_t layer = 0) {
    const std::string n = std::to_string(layer);
    if (arch == io::architecture::llada2_moe) {  // Bailing-MoE v2 names (modeling_llada2_moe.py)
        const std::string b = "model.layers." + n + ".";
        switch (role) {
            case tensor_role::embedding: return "model.word_embeddings.weight";
            case tensor_role::attn_norm: return b + "input_layernorm.weight";
            case tensor_role::q_proj:
            case tensor_role::k_proj:
            case tensor_role::v_proj: return b + "attention.query_key_value.weight";  // fused: stored_slice_of
            case tensor_role::q_bias:
            case tensor_role::k_bias:
            case tensor_role::v_bias: return b + "attention.query_key_value.bias";
            case tensor_role::q_norm: return b + "attention.query_layernorm.weight";
            case tensor_role::k_norm: return b + "attention.key_layernorm.weight";
            case tensor_role::o_proj: return b + "attention.dense.weight";
            case tensor_role::mlp_norm: return b + "post_attention_layernorm.weight";
            case tensor_role::gate_proj: return b + "mlp.gate_proj.weight";
            case tensor_role::up_proj: return b + "mlp.up_proj.weight";
            case tensor_role::down_proj: return b + "mlp.down_proj.weight";
            case tensor_role::final_norm: return "model.norm.weight";
            case tensor_role::lm_head: return "lm_head.weight";
        }
    }
    if (arch == io::architecture::llada) {
        const std::string b = "model.transformer.blocks." + n + ".";
        switch (role) {
            case tensor_role::embedding: return "model.transformer.wte.weight";
            case tensor_role::attn_norm: return b + "attn_norm.weight";
            case tensor_role::q_proj: return b + "q_proj.weight";
            case tensor_role::k_proj: return b + "k_proj.weight";
            case tensor_role::v_proj: return b + "v_proj.weight";
            case tensor_role::q_bias: return b + "q_proj.bias";
            case tensor_role::k_bias: return b + "k_proj.bias";
            case tensor_role::v_bias: return b + "v_proj.bias";
            case tensor_role::o_proj: return b + "attn_out.weight";
            case tensor_role::mlp_norm: return b + "ff_norm.weight";
            case tensor_role::gate_proj: return b + "ff_proj.weight";  // the activated branch
            case tensor_role::up_proj: return b + "up_proj.weight";    // the linear branch
            case tensor_role::down_proj: return b + "ff_out.weight";
            case tensor_role::final_norm: return "model.transformer.ln_f.weight";
            case tensor_role::lm_head: return "model.transformer.ff_out.weight";
            default: break;  // LLaDA has no q/k norms
        }
    } else {
        const std::string b = "model.layers." + n + ".";
        switch (role) {
            case tensor_role::embedding: return "model.embed_tokens.weight";
            case tensor_role::attn_norm: return b + "input_layernorm.weight";
            case tensor_role::q_proj: return b + "self_attn.q_proj.weight";
            case tensor_role::k_proj: return b + "self_attn.k_proj.weight";
            case tensor_role::v_proj: return b + "self_attn.v_proj.weight";
            case tensor_role::q_bias: return b + "self_attn.q_proj.bias";
            case tensor_role::k_bias: return b + "self_attn.k_proj.bias";
            case tensor_role::v_bias: return b + "self_attn.v_proj.bias";
            case tensor_role::o_proj: return b + "self_attn.o_proj.weight";
            case tensor_role::mlp_norm: return b + "post_attention_layernorm.weight";
            case tensor_role::gate_proj: return b + "mlp.gate_proj.weight";
            case tensor_role::up_proj: return b + "mlp.up_proj.weight";
            case tensor_role::down_proj: return b + "mlp.down_proj.weight";
            case tensor_role::final_norm: return "model.norm.weight";
            case tensor_role::lm_head: return "lm_head.weight";
            case tensor_role::q_norm: return b + "self_attn.q_norm.weight";
            case tensor_role::k_norm: return b + "self_attn.k_norm.weight";
        }
    }
    return "?";
}

/// The tensor's shape under `c`: {rows, cols} for matrices, {size} for vectors.
[[nodiscard]] inline std::vector<std::int64_t> tensor_shape(const io::model_config& c, tensor_role role) {
    const std::int64_t h = c.hidden_size, q = std::int64_t{c.num_heads} * c.head_dim, kv = std::int64_t{c.num_kv_heads} * c.head_dim,
                       f = c.intermediate_size, v = c.vocab_size;
    switch (role) {
        case tensor_role::embedding:
        case tensor_role::lm_head: return {v, h};
        case tensor_role::attn_norm:
        case tensor_role::mlp_norm:
        case tensor_role::final_norm: return {h};
        case tensor_role::q_proj: return {q, h};
        case tensor_role::k_proj:
        case tensor_role::v_proj: return {kv, h};
        case tensor_role::q_bias: return {q};
        case tensor_role::k_bias:
        case tensor_role::v_bias: return {kv};
        case tensor_role::o_proj: return {h, q};
        case tensor_role::gate_proj:
        case tensor_role::up_proj: return {f, h};
        case tensor_role::down_proj: return {h, f};
        case tensor_role::q_norm:
        case tensor_role::k_norm: return {c.head_dim};
    }
    return {};
}

/// Where a role's rows are stored: the tensor, its shape, and the first row. One tensor per role, except
/// LLaDA2's fused query_key_value (and its bias), which holds q, k and v one after the other.
struct stored_slice {
    std::string name;
    std::vector<std::int64_t> shape;
    std::int64_t row_offset = 0;
};
[[nodiscard]] inline stored_slice stored_slice_of(const io::model_config& c, tensor_role role, index_t layer) {
    stored_slice s{tensor_name(c.arch, role, layer), tensor_shape(c, role), 0};
    if (c.arch != io::architecture::llada2_moe) return s;
    const std::int64_t q = std::int64_t{c.num_heads} * c.head_dim, kv = std::int64_t{c.num_kv_heads} * c.head_dim;
    switch (role) {
        case tensor_role::q_proj:
        case tensor_role::k_proj:
        case tensor_role::v_proj: s.shape = {q + 2 * kv, c.hidden_size}; break;
        case tensor_role::q_bias:
        case tensor_role::k_bias:
        case tensor_role::v_bias: s.shape = {q + 2 * kv}; break;
        default: return s;
    }
    s.row_offset = role == tensor_role::q_proj || role == tensor_role::q_bias ? 0 : role == tensor_role::k_proj || role == tensor_role::k_bias ? q : q + kv;
    return s;
}

/// Every tensor of a model under `c`, as (role, layer), in the order the transformer reads them at
/// load (and random_source generates them): the embedding; per layer the attention norm, q, k, v,
/// the q/k/v biases (if any), the q/k norms (if any), o, the MLP norm, gate, up, down; the final norm;
/// the head (if untied).
[[nodiscard]] inline std::vector<std::pair<tensor_role, index_t>> weight_order(const io::model_config& c) {
    using R = tensor_role;
    std::vector<std::pair<R, index_t>> out{{R::embedding, 0}};
    for (index_t l = 0; l < c.num_layers; ++l) {
        for (R r : {R::attn_norm, R::q_proj, R::k_proj, R::v_proj}) out.emplace_back(r, l);
        if (c.qkv_bias)
            for (R r : {R::q_bias, R::k_bias, R::v_bias}) out.emplace_back(r, l);
        if (c.qk_norm)
            for (R r : {R::q_norm, R::k_norm}) out.emplace_back(r, l);
        for (R r : {R::o_proj, R::mlp_norm}) out.emplace_back(r, l);
        if (!c.moe || !c.moe->is_moe_layer(l))  // a mixture-of-experts layer's MLP is read by cpu/moe.hpp
            for (R r : {R::gate_proj, R::up_proj, R::down_proj}) out.emplace_back(r, l);
    }
    out.emplace_back(R::final_norm, 0);
    if (!c.tie_word_embeddings) out.emplace_back(R::lm_head, 0);
    return out;
}

/// Some exporters store the output head although the config ties it to the embedding. Such a head
/// is accepted (and marked read) only if it is the embedding byte for byte; a different head means
/// the config does not describe these weights: tensor_error naming it.
inline void accept_stored_tied_head(const io::checkpoint& ck, const io::model_config& c) {
    const std::string head = tensor_name(c.arch, tensor_role::lm_head);
    if (!c.tie_word_embeddings || !ck.contains(head)) return;
    const std::string emb = tensor_name(c.arch, tensor_role::embedding);
    const io::tensor_info &h = ck.info(head), &e = ck.info(emb);
    if (h.type != e.type || h.shape != e.shape || !std::equal(h.bytes.begin(), h.bytes.end(), e.bytes.begin(), e.bytes.end()))
        throw tensor_error(h.file, head, "the config ties the output head to the embedding (weight_tying / tie_word_embeddings), "
                                         "but the checkpoint stores a head that differs from the embedding '" + emb + "'");
    ck.mark_read(head);
}

/// The buffers some exporters keep beside the weights, accepted and marked read: a tied head stored
/// anyway (accept_stored_tied_head), and the rotary frequency tables (`...self_attn.rotary_emb.inv_freq`,
/// recomputed from the config) of every family but LLaDA, whose checkpoints have none.
inline void accept_unused_buffers(const io::checkpoint& ck, const io::model_config& c) {
    accept_stored_tied_head(ck, c);
    if (c.arch == io::architecture::llada) return;
    for (index_t l = 0; l < c.num_layers; ++l) {
        const std::string inv = "model.layers." + std::to_string(l) + ".self_attn.rotary_emb.inv_freq";
        if (ck.contains(inv)) ck.mark_read(inv);
    }
}

namespace detail {
/// splitmix64: a tiny, portable generator, so random weights are the same everywhere.
struct splitmix {
    std::uint64_t state;
    std::uint64_t next() noexcept {
        std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    /// Uniform in [-1, 1).
    float uniform() noexcept { return static_cast<float>(static_cast<double>(next() >> 40) * 0x1p-23 - 1.0); }
};
}  // namespace detail

/// The distribution random weights draw a tensor from: center + spread · U[-1, 1). Matrices:
/// ±scale·sqrt(3/fan_in) (unit-variance outputs for unit-variance inputs, times `scale`); the
/// embedding ±1; norms 1 ± 0.1; biases ±0.1.
struct random_spread {
    float center = 0, spread = 0;
};
[[nodiscard]] inline random_spread random_spread_of(const io::model_config& c, tensor_role r, float scale) {
    switch (r) {
        case tensor_role::embedding: return {0.0f, 1.0f};
        case tensor_role::attn_norm:
        case tensor_role::mlp_norm:
        case tensor_role::final_norm:
        case tensor_role::q_norm:
        case tensor_role::k_norm: return {1.0f, 0.1f};
        case tensor_role::q_bias:
        case tensor_role::k_bias:
        case tensor_role::v_bias: return {0.0f, 0.1f};
        default: return {0.0f, scale * static_cast<float>(std::sqrt(3.0 / static_cast<double>(tensor_shape(c, r)[1])))};
    }
}

/// Random weights for `c` (for tests and benchmarks), drawn by random_spread_of, tensor by tensor
/// in weight_order (as random_source draws them for a model built without an f32 copy).
[[nodiscard]] inline transformer_weights random_weights(const io::model_config& c, std::uint64_t seed, float scale = 1.0f) {
    detail::splitmix g{seed};
    auto draw = [&](tensor_role r, float* p, std::int64_t n) {
        const random_spread d = random_spread_of(c, r, scale);
        for (std::int64_t i = 0; i < n; ++i) p[i] = d.center + d.spread * g.uniform();
    };
    transformer_weights w;
    w.layers.resize(static_cast<std::size_t>(c.num_layers));
    for (const auto& entry : weight_order(c)) {
        const auto role = entry.first;
        const auto layer = entry.second;  // named, not bound: lambdas below capture them (C++20 lets them capture bindings; clang 14 does not)
        const auto shape = tensor_shape(c, role);
        layer_weights* L = role == tensor_role::embedding || role == tensor_role::final_norm || role == tensor_role::lm_head
                               ? nullptr
                               : &w.layers[static_cast<std::size_t>(layer)];
        auto mat = [&](f32_matrix& m) {
            m.resize(shape[0], shape[1]);
            draw(role, m.data(), m.size());
        };
        auto vec = [&](f32_vector& v) {
            v.resize(shape[0]);
            draw(role, v.data(), v.size());
        };
        switch (role) {
            case tensor_role::embedding: mat(w.embedding); break;
            case tensor_role::lm_head: mat(w.lm_head); break;
            case tensor_role::final_norm: vec(w.final_norm); break;
            case tensor_role::attn_norm: vec(L->attn_norm); break;
            case tensor_role::q_proj: mat(L->q_proj); break;
            case tensor_role::k_proj: mat(L->k_proj); break;
            case tensor_role::v_proj: mat(L->v_proj); break;
            case tensor_role::q_bias: vec(L->q_bias); break;
            case tensor_role::k_bias: vec(L->k_bias); break;
            case tensor_role::v_bias: vec(L->v_bias); break;
            case tensor_role::q_norm: vec(L->q_norm); break;
            case tensor_role::k_norm: vec(L->k_norm); break;
            case tensor_role::o_proj: mat(L->o_proj); break;
            case tensor_role::mlp_norm: vec(L->mlp_norm); break;
            case tensor_role::gate_proj: mat(L->gate_proj); break;
            case tensor_role::up_proj: mat(L->up_proj); break;
            case tensor_role::down_proj: mat(L->down_proj); break;
        }
    }
    return w;
}

}  // namespace dlm
