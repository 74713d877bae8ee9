// dlm/cpu/diffusion_gemma_weights.hpp — DiffusionGemma's text weights as the CPU backend holds them,
// read from the checkpoint transformers' save_pretrained writes (DiffusionGemmaForBlockDiffusion).
//
// The encoder and the decoder share every weight but their layer_scalar buffers (stored apart), so the
// blocks are read once, under the decoder's names (model.decoder.*; a checkpoint that keeps the
// encoder's, model.encoder.language_model.*, is read under those), the encoder's scalars from
// model.encoder.language_model.layers.N.layer_scalar. The head is the embedding (tied). The vision
// tower (model.encoder.vision_tower.*, model.encoder.embed_vision.*) is not loaded: its tensors are
// passed over by name, and a prompt holding the image placeholder is refused (cpu/diffusion_gemma.hpp).
// Matrices stay in their stored type (f32, f16, bf16) unless load_options converts them; norms,
// scales and the router in f32.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../io/diffusion_gemma_config.hpp"
#include "../io/safetensors.hpp"
#include "gemm.hpp"
#include "memory.hpp"
#include "moe.hpp"
#include "weight_sources.hpp"

namespace dlm::cpu {

/// One Gemma 4 block (the same weights in both modes).
struct gemma_block {
    std::vector<float> input_norm, post_attn_norm, pre_ffn_norm, post_ffn_norm, post_ffn_norm_1, post_ffn_norm_2, pre_ffn_norm_2;
    std::vector<float> q_norm, k_norm;  ///< [head_dim]
    std::vector<float> router_scale;    ///< [hidden], times hidden^-1/2, applied to the router's normed input
    float encoder_scalar = 1.f, decoder_scalar = 1.f;
    packed_matrix qkv;                  ///< q | k | v rows (k_eq_v layers: q | k)
    packed_matrix o, gate_up, down;     ///< attention output; the dense MLP (gate | up rows)
    moe_mlp experts;
};

struct gemma_weights {
    packed_matrix embedding;    ///< [vocab × hidden]; also the head
    packed_matrix embedding_t;  ///< [hidden × vocab]: the embedding transposed, so self-conditioning's softmax-weighted sum is one product
    std::vector<float> final_norm, sc_pre_norm;
    packed_matrix sc_gate_up, sc_down;  ///< the self-conditioning MLP
    std::vector<gemma_block> blocks;
    std::size_t bytes = 0;              ///< as held
    std::string held = "f32";           ///< "f32", "bf16", "f16" (the embedding's type), or the file type of GGUF blocks ("q4_k_m")
};

/// "f32", "f16", "bf16".
[[nodiscard]] inline std::string held_name(io::dtype t) { return t == io::dtype::bf16 ? "bf16" : t == io::dtype::f16 ? "f16" : "f32"; }

/// The type the transposed embedding is held in: the embedding's element type, bf16 for GGUF blocks
/// (re-encoding blocks along the other axis would change the values).
[[nodiscard]] inline io::dtype transposed_embedding_type(const packed_matrix& e) noexcept { return e.quantized() ? io::dtype::bf16 : e.type(); }

/// Bytes the transposed copy of a [vocab × hidden] embedding takes.
[[nodiscard]] inline std::uint64_t transposed_embedding_bytes(index_t vocab, index_t hidden, io::dtype type) {
    return packed_matrix::bytes_for(hidden, vocab, type);
}

/// e [vocab × hidden] as [hidden × vocab], a slice of hidden rows at a time (one pass over e per slice).
[[nodiscard]] inline packed_matrix transposed_embedding(const packed_matrix& e) {
    const index_t v = e.rows(), h = e.cols(), slice = std::min<index_t>(h, 256);
    packed_matrix t(h, v, transposed_embedding_type(e));
    std::vector<float> rows(static_cast<std::size_t>(slice) * static_cast<std::size_t>(v));
    for (index_t i0 = 0; i0 < h; i0 += slice) {
        const index_t n = std::min(slice, h - i0);
#if defined(_OPENMP)
#pragma omp parallel
#endif
        {
            std::vector<float> row(static_cast<std::size_t>(h));
#if defined(_OPENMP)
#pragma omp for schedule(static)
#endif
            for (index_t j = 0; j < v; ++j) {
                e.row(j, row.data());
                for (index_t i = 0; i < n; ++i) rows[static_cast<std::size_t>(i) * static_cast<std::size_t>(v) + static_cast<std::size_t>(j)] = row[static_cast<std::size_t>(i0 + i)];
            }
        }
        t.set_rows(i0, rows.data(), n);
    }
    return t;
}

namespace detail {

/// How DiffusionGemma routes: softmax top-k renormalised, GELU-tanh experts, per-expert scales.
[[nodiscard]] inline io::moe_config gemma_moe_config(const io::diffusion_gemma_config& c) {
    io::moe_config m;
    m.num_experts = c.num_experts;
    m.experts_per_token = c.experts_per_token;
    m.expert_intermediate_size = c.moe_intermediate_size;
    m.normalize = io::moe_config::normalization::always;
    m.act = io::moe_config::activation::gelu_tanh;
    m.per_expert_scale = true;
    return m;
}

/// Where the blocks' tensors are: the decoder's names, or the encoder's when only those are stored.
[[nodiscard]] inline std::string gemma_block_prefix(const io::checkpoint& ck) {
    if (ck.contains("model.decoder.layers.0.input_layernorm.weight")) return "model.decoder.";
    if (ck.contains("model.encoder.language_model.layers.0.input_layernorm.weight")) return "model.encoder.language_model.";
    throw tensor_error(ck.source(), "model.decoder.layers.0.input_layernorm.weight",
                       "not in the checkpoint (nor under model.encoder.language_model.): not a DiffusionGemmaForBlockDiffusion checkpoint");
}

[[nodiscard]] inline bool is_gemma_vision_tensor(const std::string& name) {
    return name.starts_with("model.encoder.vision_tower.") || name.starts_with("model.encoder.embed_vision.");
}

/// Bytes the text weights take as held (matrices in `type` or their stored type, the rest f32).
[[nodiscard]] inline std::uint64_t gemma_held_bytes(const io::checkpoint& ck, std::optional<io::dtype> type) {
    std::uint64_t b = 0;
    for (const std::string& n : ck.names()) {
        if (is_gemma_vision_tensor(n)) continue;
        const io::tensor_info& t = ck.info(n);
        std::uint64_t elems = 1;
        for (std::int64_t d : t.shape) elems *= static_cast<std::uint64_t>(d);
        b += elems * (t.shape.size() >= 2 ? io::dtype_size(type.value_or(t.type)) : 4);
    }
    return b;
}

class gemma_reader {
public:
    gemma_reader(const io::checkpoint& ck, const io::diffusion_gemma_config& c, std::optional<io::dtype> type)
        : ck_(ck), c_(c), type_(type), prefix_(gemma_block_prefix(ck)) {}

    [[nodiscard]] std::vector<float> vec(const std::string& name, index_t n) const { return ck_.read_f32(name, {n}); }

    /// Tensors `names` ([rows_i × cols] each) stacked into one matrix, held in `type` or the first's type.
    [[nodiscard]] packed_matrix stacked(const std::vector<std::string>& names, const std::vector<index_t>& rows, index_t cols) {
        // Every part's shape before the matrix is allocated from the config's sizes: a config.json
        // vocabulary of 8,000,000 allocated 2 GB before the tensor's [512, 64] refused it.
        index_t total = 0;
        for (std::size_t i = 0; i < names.size(); ++i) {
            const std::int64_t shape[] = {rows[i], cols};
            (void)ck_.info(names[i], shape);
            total += rows[i];
        }
        packed_matrix m(total, cols, type_.value_or(ck_.info(names.front()).type));
        index_t at = 0;
        for (std::size_t i = 0; i < names.size(); ++i) {
            read_checkpoint_rows(ck_, names[i], {rows[i], cols}, m, at);
            at += rows[i];
        }
        return m;
    }

    [[nodiscard]] gemma_block block(index_t l) {
        const io::gemma_layer& g = c_.layers[static_cast<std::size_t>(l)];
        const index_t h = c_.hidden_size, d = g.head_dim, q = c_.num_heads * d, kv = g.kv_heads * d;
        const std::string p = prefix_ + "layers." + std::to_string(l) + ".", a = p + "self_attn.";
        gemma_block b;
        for (auto [dst, name] : {std::pair{&b.input_norm, "input_layernorm"}, {&b.post_attn_norm, "post_attention_layernorm"},
                                 {&b.pre_ffn_norm, "pre_feedforward_layernorm"}, {&b.post_ffn_norm, "post_feedforward_layernorm"},
                                 {&b.post_ffn_norm_1, "post_feedforward_layernorm_1"}, {&b.post_ffn_norm_2, "post_feedforward_layernorm_2"},
                                 {&b.pre_ffn_norm_2, "pre_feedforward_layernorm_2"}})
            *dst = vec(p + name + ".weight", h);
        b.q_norm = vec(a + "q_norm.weight", d);
        b.k_norm = vec(a + "k_norm.weight", d);
        if (g.k_eq_v) {
            if (ck_.contains(a + "v_proj.weight"))
                throw tensor_error(ck_.source(), a + "v_proj.weight", "a full-attention layer has no v_proj in DiffusionGemma (its values are its keys)");
            b.qkv = stacked({a + "q_proj.weight", a + "k_proj.weight"}, {q, kv}, h);
        } else {
            b.qkv = stacked({a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight"}, {q, kv, kv}, h);
        }
        b.o = stacked({a + "o_proj.weight"}, {h}, q);
        b.gate_up = stacked({p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"}, {c_.intermediate_size, c_.intermediate_size}, h);
        b.down = stacked({p + "mlp.down_proj.weight"}, {h}, c_.intermediate_size);
        b.router_scale = vec(p + "router.scale", h);
        b.decoder_scalar = vec(p + "layer_scalar", 1)[0];
        const std::string enc = "model.encoder.language_model.layers." + std::to_string(l) + ".layer_scalar";
        b.encoder_scalar = ck_.contains(enc) ? vec(enc, 1)[0] : b.decoder_scalar;
        b.experts = moe_mlp::load_stacked(ck_, p, gemma_moe_config(c_), h, type_);
        return b;
    }

    /// Every text weight, reported to opt.progress of `total` after the embedding and each block.
    [[nodiscard]] gemma_weights all(const load_options& opt, std::uint64_t total) {
        gemma_weights w;
        const index_t h = c_.hidden_size, f = c_.intermediate_size;
        std::uint64_t done = 0;
        w.embedding = stacked({prefix_ + "embed_tokens.weight"}, {c_.vocab_size}, h);
        report_loaded(opt, done, w.embedding.bytes(), total);
        w.final_norm = vec(prefix_ + "norm.weight", h);
        const std::string sc = "model.decoder.self_conditioning.";
        w.sc_pre_norm = vec(sc + "pre_norm.weight", h);
        w.sc_gate_up = stacked({sc + "gate_proj.weight", sc + "up_proj.weight"}, {f, f}, h);
        w.sc_down = stacked({sc + "down_proj.weight"}, {h}, f);
        for (index_t l = 0; l < c_.num_layers; ++l) {
            const gemma_block& b = w.blocks.emplace_back(block(l));
            report_loaded(opt, done, b.qkv.bytes() + b.o.bytes() + b.gate_up.bytes() + b.down.bytes() + b.experts.bytes(), total);
        }
        for (const std::string& n : ck_.names())
            if (is_gemma_vision_tensor(n)) ck_.mark_read(n);  // the vision tower is not loaded
        ck_.check_all_read();
        return w;
    }

private:
    const io::checkpoint& ck_;
    const io::diffusion_gemma_config& c_;
    std::optional<io::dtype> type_;
    std::string prefix_;
};

}  // namespace detail

/// DiffusionGemma's text weights from an opened checkpoint (and the embedding's transposed copy). Throws memory_error before allocating when
/// they do not fit, tensor_error naming a missing, misshapen or unexpected tensor.
[[nodiscard]] inline gemma_weights load_gemma_weights(const io::checkpoint& ck, const io::diffusion_gemma_config& c, const load_options& opt) {
    // The embedding's shape first: its transposed copy is counted from the config's vocabulary.
    const std::int64_t embedding_shape[] = {c.vocab_size, c.hidden_size};
    const io::dtype embedding_type = opt.weight_dtype.value_or(ck.info(detail::gemma_block_prefix(ck) + "embed_tokens.weight", embedding_shape).type);
    const std::uint64_t need = detail::gemma_held_bytes(ck, opt.weight_dtype) + transposed_embedding_bytes(c.vocab_size, c.hidden_size, embedding_type);
    if (opt.check_memory) check_fits("DiffusionGemma's weights from " + ck.source(), need);
    gemma_weights w = detail::gemma_reader(ck, c, opt.weight_dtype).all(opt, need);
    w.embedding_t = transposed_embedding(w.embedding);
    if (opt.progress) opt.progress(need, need);
    w.bytes = need;
    w.held = held_name(w.embedding.type());
    return w;
}

}  // namespace dlm::cpu
