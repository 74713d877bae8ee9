// tests/gguf_test_util.hpp — GGUF helpers for tests and the fuzz seed corpus: a model folder
// converted to GGUF the way llama.cpp's converter lays it out (names, keys, LLaDA's q/k row
// permutation), and a forward of a whole canvas.
#pragma once

#include <algorithm>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <dlm/cpu/transformer.hpp>
#include <dlm/io/gguf_writer.hpp>

namespace dlm::test {

/// Changes to a converted model, for the error tests: a key or tensor left out, the architecture
/// renamed, a tensor's ggml shape replaced, keys or tensors added at the end.
struct gguf_edit {
    std::string drop_key{}, drop_tensor{}, architecture{};
    std::string reshape_tensor{};
    std::vector<std::int64_t> new_shape{};
    std::function<void(io::gguf_writer&)> more_keys{}, more_tensors{};
};

/// The model folder `dir` as an F32 GGUF file: llama.cpp's keys for its architecture, every tensor
/// as f32 under its GGUF name, LLaDA's q/k rows permuted as llama.cpp's converter stores them.
inline io::gguf_writer f32_gguf_writer(const std::filesystem::path& dir, const gguf_edit& e = {}) {
    const io::model_config c = io::load_config(dir);
    const io::checkpoint ck = io::checkpoint::open(dir);
    io::gguf_writer w;
    const std::string a = e.architecture.empty() ? std::string(io::architecture_name(c.arch)) : e.architecture;
    const auto u32 = [&](const std::string& key, std::int64_t v) {
        if (key != e.drop_key) w.add_u32(key, static_cast<std::uint32_t>(v));
    };
    if (e.drop_key != "general.architecture") w.add_string("general.architecture", a);
    u32(a + ".block_count", c.num_layers);
    u32(a + ".context_length", c.max_context);
    u32(a + ".embedding_length", c.hidden_size);
    u32(a + ".feed_forward_length", c.intermediate_size);
    u32(a + ".attention.head_count", c.num_heads);
    u32(a + ".attention.head_count_kv", c.num_kv_heads);
    w.add_f32(a + ".rope.freq_base", static_cast<float>(c.rope_theta));
    w.add_f32(a + ".attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
    u32("tokenizer.ggml.mask_token_id", c.mask_id);
    if (!c.eos_ids.empty()) u32("tokenizer.ggml.eos_token_id", c.eos_ids.front());
    if (c.decoding.gen_length.value) u32("dlm.gen_length", *c.decoding.gen_length.value);
    if (c.decoding.block_length.value) u32("dlm.block_length", *c.decoding.block_length.value);
    if (e.more_keys) e.more_keys(w);
    for (const auto& [role, layer] : cpu::weight_order(c)) {
        const std::string name = cpu::gguf_tensor_name(role, layer);
        if (name == e.drop_tensor) continue;
        const std::vector<std::int64_t> shape = cpu::tensor_shape(c, role);
        const std::vector<float> hf = ck.read_f32(cpu::tensor_name(c.arch, role, layer), shape);
        const std::int64_t rows = shape[0], cols = shape.size() == 2 ? shape[1] : 1;
        const bool permute = c.arch == io::architecture::llada && (role == cpu::tensor_role::q_proj || role == cpu::tensor_role::k_proj);
        std::vector<float> stored(hf.size());
        for (std::int64_t r = 0; r < rows; ++r) {
            const std::int64_t from = permute ? io::llada_hf_row_of(r, c.head_dim) : r;
            std::copy_n(hf.begin() + from * cols, cols, stored.begin() + r * cols);
        }
        std::vector<std::int64_t> ggml_shape = shape.size() == 2 ? std::vector<std::int64_t>{cols, rows} : shape;
        if (name == e.reshape_tensor) ggml_shape = e.new_shape;
        w.add_tensor(name, ggml_shape, stored);
    }
    if (e.more_tensors) e.more_tensors(w);
    return w;
}

inline void write_f32_gguf(const std::filesystem::path& dir, const std::filesystem::path& out) { f32_gguf_writer(dir).write(out); }

/// Logits of every row of `canvas` under `mask`.
template <class Mask>
std::vector<float> forward_all(cpu::transformer& m, const Mask& mask, const std::vector<token_id>& canvas, const canvas_layout& l) {
    const forward_plan p{0, l.size(), 0, l.size(), 0, 0, l.size()};
    std::vector<float> out(static_cast<std::size_t>(p.logits_rows()) * static_cast<std::size_t>(m.vocab_size()));
    const forward_request<cpu::transformer::kv_cache> rq{canvas, l, p, nullptr};
    m.forward(std::span<const forward_request<cpu::transformer::kv_cache>>(&rq, 1), mask, out);
    return out;
}

}  // namespace dlm::test
