// dlm/cpu/diffusion_gemma_gguf.hpp — DiffusionGemma's text weights from a GGUF file of llama.cpp's
// `diffusion-gemma` architecture (io/gguf_diffusion_gemma.hpp reads its config), held as
// cpu/diffusion_gemma_weights.hpp holds a folder's, so cpu::diffusion_gemma runs either.
//
// llama.cpp's converter (conversion/diffusion_gemma.py on Gemma4Model) writes the decoder's names
// with Gemma 4's tensor map, no +1 on the norms (Gemma 4's RMSNorm multiplies by the weight as it is),
// no row permutation (ggml's NEOX rotation pairs as Gemma's does):
//   token_embd (also the head: no output.weight), output_norm, rope_freqs (read by the config),
//   self_cond_{pre_norm, gate, up, down}                  the self-conditioning MLP
//   blk.N.attn_norm, attn_q, attn_k, attn_v (absent: the values are the keys), attn_output,
//     attn_q_norm, attn_k_norm, post_attention_norm, ffn_norm, ffn_gate, ffn_up, ffn_down,
//     post_ffw_norm, pre_ffw_norm_2, post_ffw_norm_1, post_ffw_norm_2,
//     ffn_gate_inp (router, held f32), ffn_gate_inp.scale (router.scale), ffn_down_exps.scale
//     (per_expert_scale), ffn_gate_up_exps (or ffn_gate_exps + ffn_up_exps), ffn_down_exps,
//     layer_output_scale (the decoder's layer_scalar), enc_layer_output_scale (the encoder's)
// Matrices stay in the file's type — F32, F16, BF16 or GGUF blocks dlm multiplies (Q8_0, Q4_0, Q4_K,
// Q5_K, Q6_K) — unless load_options::weight_dtype converts them; vectors are read as f32. Any other
// tensor is refused by name (output.weight too: DiffusionGemma's head is its embedding).
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../io/gguf.hpp"
#include "../io/gguf_diffusion_gemma.hpp"
#include "diffusion_gemma_weights.hpp"
#include "gguf_source.hpp"
#include "moe.hpp"

namespace dlm::cpu {

namespace detail {

/// The transformer config gguf_source and moe_mlp::load_gguf read experts with: the hidden size and
/// Gemma's routing.
[[nodiscard]] inline io::model_config gemma_expert_view(const io::diffusion_gemma_config& c) {
    io::model_config m;
    m.hidden_size = c.hidden_size;
    m.num_layers = c.num_layers;
    m.moe = gemma_moe_config(c);
    return m;
}

/// Bytes the weights of a diffusion-gemma file take as held: matrices in `type` or as stored (blocks
/// as their bytes), the router and every vector in f32.
[[nodiscard]] inline std::uint64_t gemma_gguf_held_bytes(const io::gguf_header& h, std::optional<io::dtype> type) {
    std::uint64_t b = 0;
    for (const io::gguf_tensor& t : h.tensors()) {
        const auto elems = static_cast<std::uint64_t>(t.rows()) * static_cast<std::uint64_t>(t.cols());
        const bool matrix = t.shape.size() >= 2 && !t.name.ends_with("ffn_gate_inp.weight");
        const std::optional<io::dtype> plain = io::gguf_plain_dtype(t.type);
        b += !matrix ? elems * 4 : type ? elems * io::dtype_size(*type) : plain ? elems * io::dtype_size(*plain) : t.bytes.size();
    }
    return b;
}

class gemma_gguf_reader {
public:
    gemma_gguf_reader(const io::gguf_file& f, const io::diffusion_gemma_config& c, std::optional<io::dtype> type)
        : f_(f), c_(c), type_(type), view_(gemma_expert_view(c)), src_(f, view_) {}

    /// A vector of `n` values (F32, F16 or BF16) as f32.
    [[nodiscard]] std::vector<float> vec(const std::string& name, index_t n) {
        const io::gguf_tensor& t = get(name, {n});
        check_plain_vector(f_, t);
        std::vector<float> v(static_cast<std::size_t>(n));
        src_.read_rows(t, 0, 1, v.data());
        return v;
    }

    /// Tensors `names` ({cols, rows_i} in ggml's order) stacked into one matrix, every shape checked
    /// before it is allocated.
    [[nodiscard]] packed_matrix matrix(const std::vector<std::string>& names, const std::vector<index_t>& rows, index_t cols) {
        std::vector<gguf_part> parts;
        for (std::size_t i = 0; i < names.size(); ++i) parts.push_back({&get(names[i], {cols, rows[i]}), 0, rows[i]});
        return gguf_stacked_matrix(src_, parts, cols, gguf_held_layout(parts, type_), buf_);
    }

    [[nodiscard]] gemma_block block(index_t l) {
        const io::gemma_layer& g = c_.layers[static_cast<std::size_t>(l)];
        const index_t h = c_.hidden_size, d = g.head_dim, q = c_.num_heads * d, kv = g.kv_heads * d, f = c_.intermediate_size;
        const auto n = [&](const char* stem) { return io::gguf_tensor_name(stem, l, true); };
        gemma_block b;
        for (auto [dst, stem] : {std::pair{&b.input_norm, "attn_norm.weight"}, {&b.post_attn_norm, "post_attention_norm.weight"},
                                 {&b.pre_ffn_norm, "ffn_norm.weight"}, {&b.post_ffn_norm, "post_ffw_norm.weight"},
                                 {&b.post_ffn_norm_1, "post_ffw_norm_1.weight"}, {&b.post_ffn_norm_2, "post_ffw_norm_2.weight"},
                                 {&b.pre_ffn_norm_2, "pre_ffw_norm_2.weight"}, {&b.router_scale, "ffn_gate_inp.scale"}})
            *dst = vec(n(stem), h);
        b.q_norm = vec(n("attn_q_norm.weight"), d);
        b.k_norm = vec(n("attn_k_norm.weight"), d);
        b.qkv = g.k_eq_v ? matrix({n("attn_q.weight"), n("attn_k.weight")}, {q, kv}, h)
                         : matrix({n("attn_q.weight"), n("attn_k.weight"), n("attn_v.weight")}, {q, kv, kv}, h);
        b.o = matrix({n("attn_output.weight")}, {h}, q);
        b.gate_up = matrix({n("ffn_gate.weight"), n("ffn_up.weight")}, {f, f}, h);
        b.down = matrix({n("ffn_down.weight")}, {h}, f);
        b.decoder_scalar = vec(n("layer_output_scale.weight"), 1)[0];
        b.encoder_scalar = vec(n("enc_layer_output_scale.weight"), 1)[0];
        b.experts = moe_mlp::load_gguf(src_, view_, l, type_);
        for (const char* stem : {"ffn_gate_inp.weight", "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_gate_up_exps.weight", "ffn_down_exps.weight",
                                 "ffn_down_exps.scale"})
            used_.insert(n(stem));
        return b;
    }

    /// Every text weight, reported to opt.progress of `total` after the embedding and each block.
    [[nodiscard]] gemma_weights all(const load_options& opt, std::uint64_t total) {
        gemma_weights w;
        const index_t h = c_.hidden_size, f = c_.intermediate_size;
        std::uint64_t done = 0;
        w.embedding = matrix({"token_embd.weight"}, {c_.vocab_size}, h);
        report_loaded(opt, done, w.embedding.bytes(), total);
        w.final_norm = vec("output_norm.weight", h);
        w.sc_pre_norm = vec("self_cond_pre_norm.weight", h);
        w.sc_gate_up = matrix({"self_cond_gate.weight", "self_cond_up.weight"}, {f, f}, h);
        w.sc_down = matrix({"self_cond_down.weight"}, {h}, f);
        for (index_t l = 0; l < c_.num_layers; ++l) {
            const gemma_block& b = w.blocks.emplace_back(block(l));
            report_loaded(opt, done, b.qkv.bytes() + b.o.bytes() + b.gate_up.bytes() + b.down.bytes() + b.experts.bytes(), total);
        }
        check_all_used();
        return w;
    }

private:
    [[nodiscard]] const io::gguf_tensor& get(const std::string& name, std::vector<std::int64_t> shape) {
        const io::gguf_tensor& t = f_.header().tensor(name);
        if (t.shape != shape)
            throw tensor_error(f_.path(), name, "shape " + io::shape_string(t.shape) + " (ggml order, row length first) does not fit the metadata, which needs " +
                                                    io::shape_string(shape));
        used_.insert(name);
        return t;
    }

    void check_all_used() const {
        for (const io::gguf_tensor& t : f_.header().tensors()) {
            if (used_.contains(t.name) || t.name == "rope_freqs.weight") continue;
            throw tensor_error(f_.path(), t.name, t.name == "output.weight"
                                                      ? "an output head apart from token_embd.weight; DiffusionGemma's head is its embedding, and dlm ties it"
                                                      : "not a tensor of the diffusion-gemma model the metadata describes (" + std::to_string(c_.num_layers) + " layers)");
        }
    }

    const io::gguf_file& f_;
    const io::diffusion_gemma_config& c_;
    std::optional<io::dtype> type_;
    io::model_config view_;
    gguf_source src_;
    std::set<std::string> used_;
    std::vector<float> buf_;
};

}  // namespace detail

/// DiffusionGemma's text weights from an opened diffusion-gemma GGUF file (and the embedding's
/// transposed copy). Throws memory_error before allocating when they do not fit, tensor_error naming
/// a missing, misshapen or unexpected tensor.
[[nodiscard]] inline gemma_weights load_gemma_gguf_weights(const io::gguf_file& f, const io::diffusion_gemma_config& c, const load_options& opt) {
    const io::gguf_tensor& emb = f.header().tensor("token_embd.weight");
    const io::dtype t_type = opt.weight_dtype.value_or(io::gguf_plain_dtype(emb.type).value_or(io::dtype::bf16));
    const std::uint64_t need = detail::gemma_gguf_held_bytes(f.header(), opt.weight_dtype) + transposed_embedding_bytes(c.vocab_size, c.hidden_size, t_type);
    if (opt.check_memory) check_fits("DiffusionGemma's weights from " + f.path(), need);
    gemma_weights w = detail::gemma_gguf_reader(f, c, opt.weight_dtype).all(opt, need);
    w.embedding_t = transposed_embedding(w.embedding);
    if (opt.progress) opt.progress(need, need);
    w.bytes = need;
    w.held = held_name(w.embedding.type());
    if (w.embedding.quantized()) {  // the embedding's block type, as the transformer names it ("q8_0")
        w.held = std::string(io::gguf_type_name(emb.type));
        std::transform(w.held.begin(), w.held.end(), w.held.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    }
    return w;
}

}  // namespace dlm::cpu
