// bench/gguf_checkpoint.hpp — a random-weight model of a named shape as ONE GGUF v3 file, laid out
// as llama.cpp's convert_hf_to_gguf.py (LLaDAModel, DreamModel) and llama-quantize write it, so that
// full-size GGUF runs (issue 14: an 8B Q8_0 / Q4_K_M file decoded within its size in memory) need
// no download and no Python. dlm-make-checkpoint --format gguf calls write_gguf_checkpoint.
//
//   keys     general.architecture llada|dream, general.name, general.file_type (llama_ftype: ALL_F32 0,
//            MOSTLY_F16 1, MOSTLY_Q8_0 7, MOSTLY_Q4_K_M 15, MOSTLY_BF16 32), general.quantization_version 2 (quantized
//            files), {arch}.block_count, .context_length, .embedding_length, .feed_forward_length,
//            .attention.head_count(_kv), .rope.freq_base, .attention.layer_norm_rms_epsilon,
//            .rope.dimension_count, .attention.causal false; llada: .vocab_size, diffusion.shift_logits false
//   tokenizer  a byte-level BPE vocabulary ("gpt2", pre "gpt-2") of the 256 byte tokens at ids 0-255 and
//            no merges (one token per byte; a special id below 256 takes that byte's place), the config's EOS as <|endoftext|> and mask as <|mdm_mask|>
//            (control tokens), and, where the vocabulary has room, LLaDA-8B-Instruct's other control
//            tokens at their ids (<|startoftext|> 126080 as BOS, <|start_header_id|> 126346,
//            <|end_header_id|> 126347, <|eot_id|> 126348 as EOT); every other id an unused "[PADi]"
//   tensors  those of io/gguf_model.hpp in cpu::weight_order, 1-D tensors F32 (as llama.cpp keeps them),
//            matrices F32 / F16 / BF16, or Q8_0 / Q4_K_M typed by quant::file_type_of (llama-quantize's rule:
//            Q4_K, Q6_K for the head and for attn_v / ffn_down of the layers use_more_bits picks);
//            LLaDA's attn_q / attn_k rows permuted per head as the converter stores them
//
// The values are random_source(config, seed, type, scale)'s (quant::random_quant_source's blocks for
// the quantized types), drawn in weight_order, so the file loads as exactly the model
// transformer::random(config, seed, type or file type, scale) builds (dlm-bench-forward
// --verify-random checks it). Memory: one slice of one tensor (about 4M values); the rest streams.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <dlm/cpu/gguf_source.hpp>
#include <dlm/cpu/quant/random_source.hpp>
#include <dlm/cpu/weight_sources.hpp>
#include <dlm/io/bpe.hpp>
#include <dlm/io/gguf_model.hpp>
#include <dlm/io/gguf_tokenizer.hpp>
#include <dlm/io/gguf_writer.hpp>

namespace dlm::bench {

/// What a GGUF checkpoint's matrices are stored as: plain F32 / F16 / BF16, or a llama.cpp file type.
struct gguf_checkpoint_type {
    std::string name;                              ///< "f32", "f16", "bf16", "q8_0", "q4_k_m"
    std::optional<io::dtype> plain;                ///< f32, f16 or bf16
    std::optional<cpu::quant::file_type> quant;    ///< q8_0 or q4_k_m
    std::uint32_t llama_ftype = 0;                 ///< general.file_type
};

/// The type `name` names, or nullopt.
[[nodiscard]] inline std::optional<gguf_checkpoint_type> parse_gguf_checkpoint_type(const std::string& name) {
    if (name == "f32") return gguf_checkpoint_type{name, io::dtype::f32, std::nullopt, 0};
    if (name == "bf16") return gguf_checkpoint_type{name, io::dtype::bf16, std::nullopt, 32};
    if (name == "f16") return gguf_checkpoint_type{name, io::dtype::f16, std::nullopt, 1};
    if (name == "q8_0") return gguf_checkpoint_type{name, std::nullopt, cpu::quant::file_type::q8_0, 7};
    if (name == "q4_k_m") return gguf_checkpoint_type{name, std::nullopt, cpu::quant::file_type::q4_k_m, 15};
    return std::nullopt;
}

namespace detail {

/// The GGUF type of matrices stored in a plain dtype.
[[nodiscard]] inline io::gguf_type gguf_type_of(io::dtype t) noexcept {
    switch (t) {
        case io::dtype::bf16: return io::gguf_type::bf16;
        case io::dtype::f16: return io::gguf_type::f16;
        case io::dtype::f32: break;
    }
    return io::gguf_type::f32;
}

/// The tokenizer.ggml.* keys of the header comment.
inline void add_byte_tokenizer(io::gguf_writer& w, const io::model_config& c) {
    const auto n = static_cast<std::size_t>(c.vocab_size);
    std::vector<std::string> tokens(n);
    std::vector<std::int32_t> types(n, static_cast<std::int32_t>(io::gguf_token_type::unused));
    for (std::size_t id = 0; id < n; ++id) tokens[id] = "[PAD" + std::to_string(id) + "]";
    for (unsigned b = 0; b < 256 && b < n; ++b) {
        tokens[b] = io::detail::byte_level_map::get().encode(static_cast<unsigned char>(b));
        types[b] = static_cast<std::int32_t>(io::gguf_token_type::normal);
    }
    const auto control = [&](token_id id, const char* text) {
        if (id < 0 || static_cast<std::size_t>(id) >= n) return false;  // (an id below 256 replaces that byte's token)
        tokens[static_cast<std::size_t>(id)] = text;
        types[static_cast<std::size_t>(id)] = static_cast<std::int32_t>(io::gguf_token_type::control);
        return true;
    };
    const bool llada_ids = c.arch == io::architecture::llada && control(126080, "<|startoftext|>") && control(126346, "<|start_header_id|>") &&
                           control(126347, "<|end_header_id|>") && control(126348, "<|eot_id|>");
    if (!c.eos_ids.empty() && !control(c.eos_ids.front(), "<|endoftext|>"))
        throw invalid_parameter("--shape", "EOS id " + std::to_string(c.eos_ids.front()) + " is outside the vocabulary");
    if (!control(c.mask_id, "<|mdm_mask|>")) throw invalid_parameter("--shape", "mask id " + std::to_string(c.mask_id) + " is outside the vocabulary");
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_string("tokenizer.ggml.pre", "gpt-2");
    w.add_strings("tokenizer.ggml.tokens", tokens);
    w.add_i32s("tokenizer.ggml.token_type", types);
    w.add_strings("tokenizer.ggml.merges", std::vector<std::string>{});
    if (llada_ids) w.add_u32("tokenizer.ggml.bos_token_id", 126080);
    if (!c.eos_ids.empty()) w.add_u32("tokenizer.ggml.eos_token_id", static_cast<std::uint32_t>(c.eos_ids.front()));
    if (llada_ids) w.add_u32("tokenizer.ggml.eot_token_id", 126348);
    w.add_u32("tokenizer.ggml.mask_token_id", static_cast<std::uint32_t>(c.mask_id));
}

/// The file's keys: general.*, the architecture's hyperparameters, and the byte tokenizer.
inline void add_metadata(io::gguf_writer& w, const io::model_config& c, const std::string& name, const gguf_checkpoint_type& type) {
    const std::string arch = c.arch == io::architecture::llada ? "llada" : "dream";
    w.add_string("general.architecture", arch);
    w.add_string("general.name", "dlm random " + name);
    w.add_u32("general.file_type", type.llama_ftype);
    if (type.quant) w.add_u32("general.quantization_version", 2);
    const auto key = [&](const char* k) { return arch + "." + k; };
    w.add_u32(key("block_count"), static_cast<std::uint32_t>(c.num_layers));
    w.add_u32(key("context_length"), static_cast<std::uint32_t>(c.max_context));
    w.add_u32(key("embedding_length"), static_cast<std::uint32_t>(c.hidden_size));
    w.add_u32(key("feed_forward_length"), static_cast<std::uint32_t>(c.intermediate_size));
    w.add_u32(key("attention.head_count"), static_cast<std::uint32_t>(c.num_heads));
    w.add_u32(key("attention.head_count_kv"), static_cast<std::uint32_t>(c.num_kv_heads));
    w.add_f32(key("rope.freq_base"), static_cast<float>(c.rope_theta));
    w.add_f32(key("attention.layer_norm_rms_epsilon"), static_cast<float>(c.rms_norm_eps));
    w.add_u32(key("rope.dimension_count"), static_cast<std::uint32_t>(c.head_dim));
    w.add_bool(key("attention.causal"), false);
    if (c.arch == io::architecture::llada) {
        w.add_u32(key("vocab_size"), static_cast<std::uint32_t>(c.vocab_size));
        w.add_bool("diffusion.shift_logits", false);
    }
    add_byte_tokenizer(w, c);
}

/// One tensor of the file: its role, GGUF type and byte size.
struct gguf_entry {
    cpu::tensor_role role;
    index_t layer;
    io::gguf_type type;
    std::int64_t rows, cols;  ///< Hugging Face order; a vector has cols 1
    std::uint64_t bytes;
};

}  // namespace detail

/// Writes the GGUF file of the header comment to `out` and returns its data bytes; progress(done,
/// total) after each tensor. Throws invalid_parameter naming --shape for a shape GGUF cannot hold (an
/// architecture other than llada / dream) and --type for rows that are not whole blocks of the type,
/// before the file is opened; file_error if writing fails.
inline std::uint64_t write_gguf_checkpoint(const io::model_config& c, const std::string& name, const gguf_checkpoint_type& type,
                                           const std::filesystem::path& out, std::uint64_t seed, float scale,
                                           const std::function<void(std::uint64_t, std::uint64_t)>& progress = {}) {
    using R = cpu::tensor_role;
    if (c.arch != io::architecture::llada && c.arch != io::architecture::dream)
        throw invalid_parameter("--shape", name + " is a " + std::string(io::architecture_name(c.arch)) +
                                             " model; llama.cpp's GGUF layouts dlm reads are llada and dream");
    io::gguf_writer w;
    detail::add_metadata(w, c, name, type);

    std::vector<detail::gguf_entry> entries;
    std::uint64_t total = 0;
    for (const auto& [role, layer] : cpu::weight_order(c)) {
        const std::vector<std::int64_t> shape = cpu::tensor_shape(c, role);
        detail::gguf_entry e{role, layer, io::gguf_type::f32, shape[0], shape.size() == 2 ? shape[1] : 1, 0};
        if (shape.size() == 2)
            e.type = type.quant ? *cpu::quant::file_type_of(*type.quant, c, role, layer) : detail::gguf_type_of(*type.plain);
        const std::string tensor = cpu::gguf_tensor_name(role, layer);
        if (e.cols % io::gguf_block_size(e.type) != 0)
            throw invalid_parameter("--type", name + "'s " + tensor + ": rows of " + std::to_string(e.cols) + " are not whole " +
                                                  std::string(io::gguf_type_name(e.type)) + " blocks of " + std::to_string(io::gguf_block_size(e.type)) +
                                                  " (f32, f16 or bf16 hold any row)");
        e.bytes = static_cast<std::uint64_t>(e.rows) * io::gguf_row_bytes(e.type, e.cols);
        const std::vector<std::int64_t> ggml_shape = shape.size() == 2 ? std::vector<std::int64_t>{e.cols, e.rows} : shape;
        w.declare_tensor(tensor, e.type, ggml_shape, e.bytes);
        total += e.bytes;
        entries.push_back(e);
    }

    std::ofstream file(out, std::ios::binary | std::ios::trunc);
    if (!file) throw file_error(out.string(), "cannot open for writing");
    w.write_header(file);
    std::optional<cpu::quant::random_quant_source> qsrc;
    std::optional<cpu::random_source> psrc;
    if (type.quant) qsrc.emplace(c, seed, *type.quant, scale);
    else psrc.emplace(c, seed, *type.plain, scale);
    std::vector<float> values;
    std::vector<std::byte> raw, perm;
    std::uint64_t done = 0;
    for (const detail::gguf_entry& e : entries) {
        const bool permuted = c.arch == io::architecture::llada && (e.role == R::q_proj || e.role == R::k_proj || e.role == R::q_bias || e.role == R::k_bias);
        const bool blocks = qsrc && !io::gguf_plain_dtype(e.type);
        const std::size_t row_bytes = io::gguf_row_bytes(e.type, e.cols);
        std::int64_t chunk = std::max<std::int64_t>(1, (std::int64_t{1} << 22) / e.cols);
        if (permuted) chunk = std::max<std::int64_t>(1, chunk / c.head_dim) * c.head_dim;  // whole heads: the permutation stays inside a chunk
        for (std::int64_t r0 = 0; r0 < e.rows; r0 += chunk) {
            const std::int64_t n = std::min(chunk, e.rows - r0);
            raw.resize(static_cast<std::size_t>(n) * row_bytes);
            if (blocks) {
                qsrc->use_blocks(e.role, e.layer, static_cast<index_t>(r0), static_cast<index_t>(n),
                                 [&](const std::byte* b) { std::memcpy(raw.data(), b, raw.size()); });
            } else {
                values.resize(static_cast<std::size_t>(n * e.cols));
                if (qsrc) qsrc->read(e.role, e.layer, static_cast<index_t>(r0), static_cast<index_t>(n), values.data());
                else psrc->read(e.role, e.layer, static_cast<index_t>(r0), static_cast<index_t>(n), values.data());
                if (e.type == io::gguf_type::bf16 || e.type == io::gguf_type::f16)
                    for (std::size_t i = 0; i < values.size(); ++i) {
                        const std::uint16_t h = e.type == io::gguf_type::bf16 ? io::f32_to_bf16(values[i]) : io::f32_to_f16(values[i]);
                        std::memcpy(raw.data() + 2 * i, &h, 2);
                    }
                else std::memcpy(raw.data(), values.data(), raw.size());
            }
            const std::byte* src = raw.data();
            if (permuted) {  // GGUF row g holds Hugging Face row llada_hf_row_of(g)
                perm.resize(raw.size());
                for (std::int64_t g = 0; g < n; ++g)
                    std::memcpy(perm.data() + static_cast<std::size_t>(g) * row_bytes,
                                raw.data() + static_cast<std::size_t>(io::llada_hf_row_of(r0 + g, c.head_dim) - r0) * row_bytes, row_bytes);
                src = perm.data();
            }
            file.write(reinterpret_cast<const char*>(src), static_cast<std::streamsize>(raw.size()));
        }
        w.write_padding(file, e.bytes);
        done += e.bytes;
        if (!file) throw file_error(out.string(), "write failed (disk full?)");
        if (progress) progress(done, total);
    }
    file.close();
    if (!file) throw file_error(out.string(), "write failed (disk full?)");
    return total;
}

}  // namespace dlm::bench
