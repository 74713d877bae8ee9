// dlm/cpu/quant/random_source.hpp — random weights in GGUF block types, as llama.cpp's quantizer
// would type them, so that full-size quantized models are measured without files.
//
//   auto m = transformer::random(config, seed, quant::file_type::q4_k_m);
//
// The values are random_weights(config, seed)'s, encoded by quant::quantize_row (dlm's simple
// encoder, not llama.cpp's scale search: the blocks are valid, the values differ from what
// llama-quantize would write for the same weights; timing and memory are what matter here).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../../core/error.hpp"
#include "../../io/model_config.hpp"
#include "../ops.hpp"
#include "../weight_sources.hpp"
#include "blocks.hpp"

namespace dlm::cpu::quant {

/// llama.cpp's file types (llama-quantize's names) dlm can build at random.
enum class file_type { q8_0, q4_0, q4_k, q6_k, q4_k_m };

/// The file type `name` ("q8_0", "q4_0", "q4_k", "q6_k", "q4_k_m"), or nullopt.
[[nodiscard]] inline std::optional<file_type> parse_file_type(std::string_view name) noexcept {
    if (name == "q8_0") return file_type::q8_0;
    if (name == "q4_0") return file_type::q4_0;
    if (name == "q4_k") return file_type::q4_k;
    if (name == "q6_k") return file_type::q6_k;
    if (name == "q4_k_m") return file_type::q4_k_m;
    return std::nullopt;
}

/// llama-quantize's name of `f` ("q4_k_m").
[[nodiscard]] constexpr std::string_view file_type_name(file_type f) noexcept {
    switch (f) {
        case file_type::q8_0: return "q8_0";
        case file_type::q4_0: return "q4_0";
        case file_type::q4_k: return "q4_k";
        case file_type::q6_k: return "q6_k";
        case file_type::q4_k_m: return "q4_k_m";
    }
    return "?";
}

/// The block type llama.cpp's quantizer (llama-quant.cpp, llama_tensor_get_type) gives a matrix of
/// layer `l` of `num_layers` in a file of type `f`, for a LLaMA-like model; `head`: the output head
/// (the embedding when the two are tied); `more_bits_role`: a role llama.cpp gives more bits in some
/// layers (attn_v, ffn_down, also the experts' ffn_down_exps).
///   Q8_0    every matrix Q8_0
///   Q4_0    every matrix Q4_0 but the output head (Q6_K)
///   Q4_K_M  Q4_K, but the output head Q6_K, and attn_v and ffn_down Q6_K in the layers
///           use_more_bits picks: the first and last eighth, and every third layer between
///   Q4_K, Q6_K  every matrix of that type ("pure", llama-quantize --pure)
[[nodiscard]] constexpr io::gguf_type file_type_of(file_type f, index_t num_layers, bool head, bool more_bits_role, index_t l) noexcept {
    using T = io::gguf_type;
    const index_t n = num_layers;
    const bool more_bits = l < n / 8 || l >= 7 * n / 8 || (l - n / 8) % 3 == 2;
    switch (f) {
        case file_type::q8_0: return T::q8_0;
        case file_type::q4_0: return head ? T::q6_k : T::q4_0;
        case file_type::q4_k: return T::q4_k;
        case file_type::q6_k: return T::q6_k;
        case file_type::q4_k_m: return head || (more_bits_role && more_bits) ? T::q6_k : T::q4_k;
    }
    return T::q8_0;
}

/// The type llama.cpp writes instead of `t` for a matrix of `cols` columns that K-quant blocks
/// (256 values) do not tile (llama-quant.cpp's fallback): Q6_K becomes Q8_0 and Q4_K becomes Q5_0,
/// which dlm does not multiply, so Q4_0 stands for it (0.5 bit a weight less: a file measured this
/// way is that much smaller than llama-quantize's). Other types are returned as they are.
[[nodiscard]] constexpr io::gguf_type column_fallback(io::gguf_type t, index_t cols) noexcept {
    if (cols % 256 == 0) return t;
    if (t == io::gguf_type::q6_k) return io::gguf_type::q8_0;
    if (t == io::gguf_type::q4_k || t == io::gguf_type::q5_k) return io::gguf_type::q4_0;
    return t;
}

/// file_type_of for tensor `role` of layer `l` of a dense model of config `c` (nullopt for vectors:
/// norms and biases stay F32), after column_fallback.
[[nodiscard]] inline std::optional<io::gguf_type> file_type_of(file_type f, const io::model_config& c, tensor_role role, index_t l) {
    using R = tensor_role;
    const bool matrix = role == R::embedding || role == R::lm_head || role == R::q_proj || role == R::k_proj || role == R::v_proj ||
                        role == R::o_proj || role == R::gate_proj || role == R::up_proj || role == R::down_proj;
    if (!matrix) return std::nullopt;
    const bool head = role == R::lm_head || (role == R::embedding && c.tie_word_embeddings);
    return column_fallback(file_type_of(f, c.num_layers, head, role == R::v_proj || role == R::down_proj, l),
                           static_cast<index_t>(tensor_shape(c, role)[1]));
}

/// random_source's values (f32) in the block types of a file type: matrices as GGUF blocks
/// (use_blocks), vectors as f32. read() gives a matrix's values as its blocks decode.
class random_quant_source {
public:
    random_quant_source(const io::model_config& c, std::uint64_t seed, file_type f, float scale = 1.0f)
        : c_(c), values_(c, seed, io::dtype::f32, scale), f_(f) {}
    [[nodiscard]] io::dtype dtype(tensor_role, index_t) const noexcept { return io::dtype::f32; }
    [[nodiscard]] std::optional<io::gguf_type> quant_type(tensor_role r, index_t l) const { return file_type_of(f_, c_, r, l); }
    void read(tensor_role r, index_t l, index_t row0, index_t rows, float* dst) {
        values_.read(r, l, row0, rows, dst);
        const auto t = quant_type(r, l);
        if (!t) return;
        const index_t k = tensor_shape(c_, r)[1];
        const std::size_t rb = row_bytes(*t, k);
        for_rows(rows, static_cast<double>(k), [&](index_t i) {  // rows are independent: the same blocks on any thread
            std::vector<std::byte> row(rb);
            quantize_row(*t, dst + i * k, row.data(), k);
            dequantize_row(*t, row.data(), dst + i * k, k);
        });
    }
    /// The next `rows` rows' blocks, handed to use(const std::byte*) (gguf_source's call).
    template <class Use>
    void use_blocks(tensor_role r, index_t l, index_t row0, index_t rows, Use&& use) {
        const auto t = quant_type(r, l);
        if (!t) throw contract_error("random_quant_source::use_blocks: " + tensor_name(c_.arch, r, l) + " is not a matrix");
        const index_t k = tensor_shape(c_, r)[1];
        std::vector<float> x(static_cast<std::size_t>(rows * k));
        values_.read(r, l, row0, rows, x.data());
        const std::size_t rb = row_bytes(*t, k);
        blocks_.resize(static_cast<std::size_t>(rows) * rb);
        for_rows(rows, static_cast<double>(k), [&](index_t i) { quantize_row(*t, x.data() + i * k, blocks_.data() + static_cast<std::size_t>(i) * rb, k); });
        use(static_cast<const std::byte*>(blocks_.data()));
    }

private:
    const io::model_config& c_;
    random_source values_;
    file_type f_;
    std::vector<std::byte> blocks_;  // the last slice's blocks, reused
};

}  // namespace dlm::cpu::quant
