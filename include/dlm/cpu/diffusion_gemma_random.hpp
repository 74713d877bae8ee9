// dlm/cpu/diffusion_gemma_random.hpp — DiffusionGemma's text weights drawn at random, for benchmarks
// at the published shape without a file (dlm-bench-forward --shape diffusiongemma-26b-a4b):
//
//   gemma_weights w = random_gemma_weights(config, seed, quant::file_type::q4_k_m);
//
// Every matrix is held in an element type (f32, f16, bf16) or in the GGUF block types llama.cpp's
// quantizer gives a file of that type (quant/random_source.hpp: file_type_of as for a LLaMA-like
// model, where attn_v, ffn_down and the experts' ffn_down_exps get more bits in the layers
// use_more_bits picks and the tied embedding is the head; column_fallback for rows K-quant blocks do
// not tile, as the experts' 704-wide down projections).
// Values: matrices ±scale·sqrt(3/fan_in), the embedding ±sqrt(3/hidden) (unit-variance logits, so the
// entropy-bound schedule runs to its step cap), norms 1 ± 0.1, the router ±sqrt(3/hidden), per-expert
// scales 1 ± 0.1, layer scalars 1. Each row is drawn from (seed, matrix, row), so the weights do not
// depend on the thread count; block types are encoded by quant::quantize_row.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <variant>
#include <vector>

#include "../io/diffusion_gemma_config.hpp"
#include "../model/transformer_weights.hpp"
#include "diffusion_gemma_weights.hpp"
#include "memory.hpp"
#include "quant/blocks.hpp"
#include "quant/random_source.hpp"

namespace dlm::cpu {

/// How random weights are held: an element type, or the block types of a llama.cpp file type.
using weight_spec = std::variant<io::dtype, quant::file_type>;

namespace detail {

[[nodiscard]] inline std::string name_of(io::dtype t) { return held_name(t); }
[[nodiscard]] inline std::string name_of(quant::file_type f) { return std::string(quant::file_type_name(f)); }

/// Makes gemma_weights' matrices in a weight_spec. Counting only (`count_only`), it allocates nothing
/// and sums the bytes the matrices will take, so the memory check comes before the first allocation.
class gemma_random_maker {
public:
    struct part {
        index_t rows;
        bool more_bits_role = false;  ///< attn_v, ffn_down, ffn_down_exps
    };

    gemma_random_maker(const io::diffusion_gemma_config& c, std::uint64_t seed, weight_spec spec, float scale, bool count_only)
        : c_(c), seed_(seed), spec_(spec), scale_(scale), count_only_(count_only) {}

    [[nodiscard]] std::uint64_t bytes() const noexcept { return bytes_; }
    [[nodiscard]] bool counting() const noexcept { return count_only_; }
    [[nodiscard]] float spread(index_t fan_in) const { return scale_ * static_cast<float>(std::sqrt(3.0 / static_cast<double>(fan_in))); }

    /// Parts stacked into one matrix of `cols` columns, of layer `layer` (-1: outside the blocks).
    [[nodiscard]] packed_matrix matrix(std::initializer_list<part> parts, index_t cols, index_t layer, bool head, float spread) {
        weight_layout layout;
        index_t rows = 0;
        for (const part& p : parts) {
            rows += p.rows;
            if (const auto* f = std::get_if<quant::file_type>(&spec_)) {
                const io::gguf_type t = quant::file_type_of(*f, c_.num_layers, head, p.more_bits_role, layer < 0 ? 0 : layer);
                layout.parts.push_back({p.rows, quant::column_fallback(t, cols)});
            } else {
                layout.type = std::get<io::dtype>(spec_);
            }
        }
        ++matrices_;
        bytes_ += packed_matrix::bytes_for(rows, cols, layout);
        return make(rows, cols, layout, spread);
    }

    /// A rows × cols matrix in f32 whatever the spec (the router).
    [[nodiscard]] packed_matrix f32_matrix(index_t rows, index_t cols, float spread) {
        ++matrices_;
        bytes_ += packed_matrix::bytes_for(rows, cols, weight_layout{});
        return make(rows, cols, weight_layout{}, spread);
    }

    /// center ± spread, n values (norms, scales: f32).
    [[nodiscard]] std::vector<float> vec(index_t n, float center, float spread) {
        bytes_ += sizeof(float) * static_cast<std::uint64_t>(n);
        std::vector<float> v(count_only_ ? 0 : static_cast<std::size_t>(n));
        splitmix g{mix(seed_ ^ 0xabcdefull, ++matrices_)};
        for (float& x : v) x = center + spread * g.uniform();
        return v;
    }

private:
    [[nodiscard]] packed_matrix make(index_t rows, index_t cols, const weight_layout& layout, float spread) {
        if (count_only_) return {};
        packed_matrix m(rows, cols, layout);
        if (!layout.quantized()) {
            fill(m, 0, rows, cols, std::nullopt, spread);
            return m;
        }
        index_t at = 0;
        for (const quant::part_spec& p : layout.parts) {
            fill(m, at, p.rows, cols, p.type, spread);
            at += p.rows;
        }
        return m;
    }

    static std::uint64_t mix(std::uint64_t a, std::uint64_t b) noexcept { return splitmix{a * 0x9e3779b97f4a7c15ull + b}.next(); }

    /// Rows [row0, row0 + n) of m: drawn, then stored (encoded in `block` when given), a slice at a time.
    void fill(packed_matrix& m, index_t row0, index_t n, index_t cols, std::optional<io::gguf_type> block, float spread) {
        const index_t slice = std::max<index_t>(1, (index_t{1} << 22) / cols);
        const std::size_t rb = block ? quant::row_bytes(*block, cols) : 0;
        std::vector<float> x;
        std::vector<std::byte> q;
        for (index_t s = 0; s < n; s += slice) {
            const index_t rows = std::min(slice, n - s);
            x.resize(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
            q.resize(static_cast<std::size_t>(rows) * rb);
#if defined(_OPENMP)
#pragma omp parallel for schedule(static)
#endif
            for (index_t r = 0; r < rows; ++r) {
                splitmix g{mix(mix(seed_, matrices_), static_cast<std::uint64_t>(row0 + s + r))};
                float* row = x.data() + static_cast<std::size_t>(r) * static_cast<std::size_t>(cols);
                for (index_t i = 0; i < cols; ++i) row[i] = spread * g.uniform();
                if (block) quant::quantize_row(*block, row, q.data() + static_cast<std::size_t>(r) * rb, cols);
            }
            if (block) m.set_blocks(row0 + s, q.data(), rows);
            else m.set_rows(row0 + s, x.data(), rows);
        }
    }

    const io::diffusion_gemma_config& c_;
    std::uint64_t seed_;
    weight_spec spec_;
    float scale_;
    bool count_only_;
    std::uint64_t bytes_ = 0, matrices_ = 0;
};

/// Every text weight of `c`, made by `mk` in the order load_gemma_weights reads them.
[[nodiscard]] inline gemma_weights make_random_gemma(const io::diffusion_gemma_config& c, gemma_random_maker& mk) {
    const index_t h = c.hidden_size, f = c.intermediate_size, e = c.moe_intermediate_size;
    gemma_weights w;
    w.embedding = mk.matrix({{c.vocab_size}}, h, -1, true, mk.spread(h));
    w.final_norm = mk.vec(h, 1.f, 0.1f);
    w.sc_pre_norm = mk.vec(h, 1.f, 0.1f);
    w.sc_gate_up = mk.matrix({{f}, {f}}, h, -1, false, mk.spread(h));
    w.sc_down = mk.matrix({{h, true}}, f, -1, false, mk.spread(f));
    for (index_t l = 0; l < c.num_layers; ++l) {
        const io::gemma_layer& g = c.layers[static_cast<std::size_t>(l)];
        const index_t q = c.num_heads * g.head_dim, kv = g.kv_heads * g.head_dim;
        gemma_block b;
        for (auto* n : {&b.input_norm, &b.post_attn_norm, &b.pre_ffn_norm, &b.post_ffn_norm, &b.post_ffn_norm_1, &b.post_ffn_norm_2, &b.pre_ffn_norm_2})
            *n = mk.vec(h, 1.f, 0.1f);
        b.q_norm = mk.vec(g.head_dim, 1.f, 0.1f);
        b.k_norm = mk.vec(g.head_dim, 1.f, 0.1f);
        b.qkv = g.k_eq_v ? mk.matrix({{q}, {kv}}, h, l, false, mk.spread(h)) : mk.matrix({{q}, {kv}, {kv, true}}, h, l, false, mk.spread(h));
        b.o = mk.matrix({{h}}, q, l, false, mk.spread(q));
        b.gate_up = mk.matrix({{f}, {f}}, h, l, false, mk.spread(h));
        b.down = mk.matrix({{h, true}}, f, l, false, mk.spread(f));
        b.router_scale = mk.vec(h, 1.f, 0.1f);
        packed_matrix router = mk.f32_matrix(c.num_experts, h, static_cast<float>(std::sqrt(3.0 / static_cast<double>(h))));
        std::vector<float> scales = mk.vec(c.num_experts, 1.f, 0.1f);
        std::vector<packed_matrix> gate_up, down;
        for (index_t x = 0; x < c.num_experts; ++x) {
            gate_up.push_back(mk.matrix({{e}, {e}}, h, l, false, mk.spread(h)));
            down.push_back(mk.matrix({{h, true}}, e, l, false, mk.spread(e)));
        }
        if (mk.counting()) {
            w.blocks.push_back(std::move(b));
            continue;
        }
        b.experts = moe_mlp::from_parts(gemma_moe_config(c), h, std::move(router), std::move(scales), std::move(gate_up), std::move(down));
        w.blocks.push_back(std::move(b));
    }
    return w;
}

}  // namespace detail

/// DiffusionGemma's text weights for `c`, drawn from `seed` and held as `spec` says (the router,
/// norms and scales in f32). Throws memory_error before allocating when they do not fit.
[[nodiscard]] inline gemma_weights random_gemma_weights(const io::diffusion_gemma_config& c, std::uint64_t seed, weight_spec spec, float scale = 1.0f) {
    detail::gemma_random_maker count(c, seed, spec, scale, true);
    (void)detail::make_random_gemma(c, count);
    const io::dtype t_type = std::holds_alternative<io::dtype>(spec) ? std::get<io::dtype>(spec) : io::dtype::bf16;
    const std::uint64_t need = count.bytes() + transposed_embedding_bytes(c.vocab_size, c.hidden_size, t_type);
    check_fits("random DiffusionGemma weights", need);
    detail::gemma_random_maker mk(c, seed, spec, scale, false);
    gemma_weights w = detail::make_random_gemma(c, mk);
    w.embedding_t = transposed_embedding(w.embedding);
    w.bytes = need;
    w.held = std::visit([](auto t) { return detail::name_of(t); }, spec);
    return w;
}

}  // namespace dlm::cpu
