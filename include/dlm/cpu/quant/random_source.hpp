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

/// The block type llama.cpp's quantizer (llama-quant.cpp, llama_tensor_get_type) gives tensor
/// `role` of layer `l` in a file of type `f`, for a dense LLaMA-like model: nullopt for vectors
/// (norms, biases stay F32).
///   Q8_0    every matrix Q8_0
///   Q4_0    every matrix Q4_0 but the output head (Q6_K)
///   Q4_K_M  Q4_K, but the output head Q6_K, and attn_v and ffn_down Q6_K in the layers
///           use_more_bits picks: the first and last eighth, and every third layer between
///   Q4_K, Q6_K  every matrix of that type ("pure", llama-quantize --pure)
/// The output head is the embedding when the two are tied.
[[nodiscard]] inline std::optional<io::gguf_type> file_type_of(file_type f, const io::model_config& c, tensor_role role, index_t l) {
    using T = io::gguf_type;
    using R = tensor_role;
    const bool matrix = role == R::embedding || role == R::lm_head || role == R::q_proj || role == R::k_proj || role == R::v_proj ||
                        role == R::o_proj || role == R::gate_proj || role == R::up_proj || role == R::down_proj;
    if (!matrix) return std::nullopt;
    const bool head = role == R::lm_head || (role == R::embedding && c.tie_word_embeddings);
    const index_t n = c.num_layers;
    const bool more_bits = l < n / 8 || l >= 7 * n / 8 || (l - n / 8) % 3 == 2;
    switch (f) {
        case file_type::q8_0: return T::q8_0;
        case file_type::q4_0: return head ? T::q6_k : T::q4_0;
        case file_type::q4_k: return T::q4_k;
        case file_type::q6_k: return T::q6_k;
        case file_type::q4_k_m:
            if (head) return T::q6_k;
            if ((role == R::v_proj || role == R::down_proj) && more_bits) return T::q6_k;
            return T::q4_k;
    }
    return std::nullopt;
}

/// random_source's values (f32) in the block types of a file type: matrices as GGUF blocks
/// (read_blocks), vectors as f32. read() gives a matrix's values as its blocks decode.
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
        std::vector<std::byte> row(row_bytes(*t, k));
        for (index_t i = 0; i < rows; ++i) {
            quantize_row(*t, dst + i * k, row.data(), k);
            dequantize_row(*t, row.data(), dst + i * k, k);
        }
    }
    void read_blocks(tensor_role r, index_t l, index_t row0, index_t rows, std::byte* dst) {
        const auto t = quant_type(r, l);
        if (!t) throw contract_error("random_quant_source::read_blocks: " + tensor_name(c_.arch, r, l) + " is not a matrix");
        const index_t k = tensor_shape(c_, r)[1];
        std::vector<float> x(static_cast<std::size_t>(rows * k));
        values_.read(r, l, row0, rows, x.data());
        const std::size_t rb = row_bytes(*t, k);
        for (index_t i = 0; i < rows; ++i) quantize_row(*t, x.data() + i * k, dst + static_cast<std::size_t>(i) * rb, k);
    }

private:
    const io::model_config& c_;
    random_source values_;
    file_type f_;
};

}  // namespace dlm::cpu::quant
