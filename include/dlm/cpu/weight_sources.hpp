// dlm/cpu/weight_sources.hpp — where the CPU transformer's weights come from, a slice at a time:
// a checkpoint (memory-mapped safetensors), weights in memory, or a random stream (benchmarks at
// full size without a file). The transformer packs each slice into its resident element type as it
// arrives, so no whole tensor is ever held in f32 next to its packed copy.
//
// A source answers two questions per tensor (role and layer, weights.hpp):
//   dtype(role, layer)                         the element type it is stored in
//   read(role, layer, row0, rows, float* dst)  rows [row0, row0 + rows) as f32 (a vector's
//                                              elements are its rows), in ascending order
// and may answer, to be packed without an f32 copy (a checkpoint):
//   use_stored(role, layer, row0, rows, use)   use(bytes, type): the rows as stored, in `type`
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../io/dtype.hpp"
#include "../io/model_config.hpp"
#include "../io/safetensors.hpp"
#include "weights.hpp"

namespace dlm::cpu {

/// load_options::progress: (bytes held so far, the total the model will hold).
using load_progress = std::function<void(std::uint64_t done, std::uint64_t total)>;

/// How a transformer holds its weights.
struct load_options {
    /// The element type weights are held in and multiplied from: unset keeps each tensor's stored
    /// type (bf16 stays bf16, f16 stays f16, f32 stays f32); f32, f16 or bf16 converts at load.
    std::optional<io::dtype> weight_dtype;
    /// Refuse (dlm::memory_error) weights that do not fit in the available memory, before
    /// allocating them.
    bool check_memory = true;
    /// Called as the weights load, on the loading thread: the bytes held so far and the total the
    /// model will hold (weight_bytes()), after the embedding, after each layer and once at the end
    /// with done == total (dlm-generate draws its progress bar from it). Unset: never called.
    load_progress progress = {};
    /// The element type of the K/V the model computes and caches: f32, or bf16 (half the bytes;
    /// keys, values, queries and softmax weights rounded to bf16 for the attention's products,
    /// docs/determinism.md). Anything else is refused (invalid_parameter 'kv_dtype').
    io::dtype kv_dtype = io::dtype::f32;
};

/// Reports `add` more bytes loaded of `total` to opt.progress (clamped to total; none when unset).
inline void report_loaded(const load_options& opt, std::uint64_t& done, std::uint64_t add, std::uint64_t total) {
    done = std::min(total, done + add);
    if (opt.progress) opt.progress(done, total);
}

/// Tensors of a safetensors checkpoint. Each slice's mapped pages are dropped from the resident
/// set once read (checkpoint::release_rows).
class checkpoint_source {
public:
    checkpoint_source(const io::checkpoint& ck, const io::model_config& c) : ck_(ck), c_(c) {}
    /// The role's stored type, its shape checked first: build() asks every matrix's type before it
    /// allocates, so a config the tensors do not match is refused before any memory is taken.
    [[nodiscard]] io::dtype dtype(tensor_role r, index_t l) const {
        const stored_slice s = stored_slice_of(c_, r, l);
        return ck_.info(s.name, s.shape).type;
    }
    void read(tensor_role r, index_t l, index_t row0, index_t rows, float* dst) const {
        const stored_slice s = stored_slice_of(c_, r, l);  // a role's rows may sit inside a fused tensor (LLaDA2)
        const std::int64_t cols = s.shape.size() == 2 ? s.shape[1] : 1;
        ck_.read_rows_f32(s.name, s.shape, s.row_offset + row0, rows, std::span<float>(dst, static_cast<std::size_t>(rows * cols)));
        ck_.release_rows(s.name, s.row_offset + row0, rows);
    }
    /// Rows [row0, row0 + rows) as stored, handed to `use(bytes, type)` (little-endian elements of
    /// `type`) and then released: a loader packs them without an f32 copy.
    template <class Use>
    void use_stored(tensor_role r, index_t l, index_t row0, index_t rows, Use&& use) const {
        const stored_slice s = stored_slice_of(c_, r, l);
        use(ck_.row_bytes(s.name, s.shape, s.row_offset + row0, rows), ck_.info(s.name).type);
        ck_.release_rows(s.name, s.row_offset + row0, rows);
    }
    /// The checkpoint (the mixture-of-experts layers read their experts from it by name).
    [[nodiscard]] const io::checkpoint& checkpoint() const noexcept { return ck_; }

private:
    const io::checkpoint& ck_;
    const io::model_config& c_;
};

/// f32 weights in memory (tests, conversions). Shapes are checked at a tensor's first slice:
/// invalid_parameter names the weight ("weights.layers[1].k_proj") that does not fit.
class memory_source {
public:
    memory_source(const transformer_weights& w, const io::model_config& c) : w_(w), c_(c) {}
    [[nodiscard]] io::dtype dtype(tensor_role, index_t) const noexcept { return io::dtype::f32; }
    void read(tensor_role r, index_t l, index_t row0, index_t rows, float* dst) const {
        const auto [name, data, n, cols] = find(r, l);
        const auto expected = tensor_shape(c_, r);
        const bool ok = expected.size() == 2 ? n == expected[0] && cols == expected[1] : n * cols == expected[0] && (n == 1 || cols == 1);
        if (!ok) {
            const std::string want = "[" + std::to_string(expected[0]) + (expected.size() == 2 ? ", " + std::to_string(expected[1]) : "") + "]";
            throw invalid_parameter(name, "expected shape " + want + ", got [" + std::to_string(n) + ", " + std::to_string(cols) + "]");
        }
        const std::int64_t width = expected.size() == 2 ? expected[1] : 1;
        std::copy_n(data + row0 * width, static_cast<std::size_t>(rows * width), dst);
    }

private:
    struct found {
        std::string name;
        const float* data;
        std::int64_t rows, cols;
    };
    [[nodiscard]] found find(tensor_role r, index_t l) const {
        auto mat = [](std::string name, const matrix& m) { return found{std::move(name), m.data(), m.rows(), m.cols()}; };
        auto vec = [](std::string name, const vector& v) { return found{std::move(name), v.data(), v.size(), 1}; };
        if (r == tensor_role::embedding) return mat("weights.embedding", w_.embedding);
        if (r == tensor_role::final_norm) return vec("weights.final_norm", w_.final_norm);
        if (r == tensor_role::lm_head) return mat("weights.lm_head", w_.lm_head);
        if (static_cast<std::size_t>(l) >= w_.layers.size())
            throw invalid_parameter("weights.layers", "holds " + std::to_string(w_.layers.size()) + " layers, the config has " +
                                                          std::to_string(c_.num_layers));
        const layer_weights& L = w_.layers[static_cast<std::size_t>(l)];
        const std::string at = "weights.layers[" + std::to_string(l) + "].";
        switch (r) {
            case tensor_role::attn_norm: return vec(at + "attn_norm", L.attn_norm);
            case tensor_role::q_proj: return mat(at + "q_proj", L.q_proj);
            case tensor_role::k_proj: return mat(at + "k_proj", L.k_proj);
            case tensor_role::v_proj: return mat(at + "v_proj", L.v_proj);
            case tensor_role::q_bias: return vec(at + "q_bias", L.q_bias);
            case tensor_role::k_bias: return vec(at + "k_bias", L.k_bias);
            case tensor_role::v_bias: return vec(at + "v_bias", L.v_bias);
            case tensor_role::q_norm: return vec(at + "q_norm", L.q_norm);
            case tensor_role::k_norm: return vec(at + "k_norm", L.k_norm);
            case tensor_role::o_proj: return mat(at + "o_proj", L.o_proj);
            case tensor_role::mlp_norm: return vec(at + "mlp_norm", L.mlp_norm);
            case tensor_role::gate_proj: return mat(at + "gate_proj", L.gate_proj);
            case tensor_role::up_proj: return mat(at + "up_proj", L.up_proj);
            case tensor_role::down_proj: return mat(at + "down_proj", L.down_proj);
            default: break;
        }
        throw contract_error("cpu::memory_source: unknown tensor role");
    }

    const transformer_weights& w_;
    const io::model_config& c_;
};

/// The values random_weights(c, seed, scale) would hold, stored in `type` (every tensor rounded to
/// it, as a checkpoint of that type holds them), generated in the order the transformer reads them:
/// a full-size model (an 8B shape) is built without an f32 copy, and is bit for bit the model that
/// loads from a checkpoint of random_weights(c, seed, scale) saved in `type` (dlm-make-checkpoint
/// writes exactly that).
class random_source {
public:
    random_source(const io::model_config& c, std::uint64_t seed, io::dtype type, float scale = 1.0f)
        : c_(c), g_{seed}, type_(type), scale_(scale) {}
    [[nodiscard]] io::dtype dtype(tensor_role, index_t) const noexcept { return type_; }
    void read(tensor_role r, index_t, index_t, index_t rows, float* dst) {
        const auto shape = tensor_shape(c_, r);
        const std::int64_t width = shape.size() == 2 ? shape[1] : 1;
        const random_spread d = random_spread_of(c_, r, scale_);
        for (std::int64_t i = 0; i < rows * width; ++i) dst[i] = stored(d.center + d.spread * g_.uniform());
    }

private:
    /// `x` as a tensor of type_ stores it.
    [[nodiscard]] float stored(float x) const noexcept {
        switch (type_) {
            case io::dtype::bf16: return io::bf16_to_f32(io::f32_to_bf16(x));
            case io::dtype::f16: return io::f16_to_f32(io::f32_to_f16(x));
            case io::dtype::f32: break;
        }
        return x;
    }

    const io::model_config& c_;
    detail::splitmix g_;
    io::dtype type_;
    float scale_;
};

/// Copies `role` of `layer` from `src` into rows [row_offset, ...) of `m` (a packed matrix), a slice of
/// about 4 MiB (rows a multiple of Align) at a time: GGUF blocks as stored where `m` holds them, the
/// stored bytes where the source gives them, else f32 rows through `buf`.
template <index_t Align, class Matrix, class Source>
void fill_rows(Matrix& m, Source& src, tensor_role role, index_t layer, index_t row_offset, index_t rows, std::vector<float>& buf) {
    const index_t k = m.cols();
    const index_t chunk = std::max<index_t>(Align, (1 << 22) / std::max<index_t>(1, k) / Align * Align);
    if constexpr (requires { src.use_blocks(role, layer, index_t{0}, index_t{0}, [](const std::byte*) {}); }) {
        if (m.quantized()) {  // GGUF blocks as stored (held_type chose this only for such a source)
            for (index_t r0 = 0; r0 < rows; r0 += chunk) {
                const index_t n = std::min(chunk, rows - r0);
                src.use_blocks(role, layer, r0, n, [&](const std::byte* b) { m.set_blocks(row_offset + r0, b, n); });
            }
            return;
        }
    }
    if constexpr (requires { src.use_stored(role, layer, index_t{0}, index_t{0}, [](std::span<const std::byte>, io::dtype) {}); }) {
        bool plain = true;  // stored as F32/F16/BF16 (a GGUF file's blocks held as floats decode through read)
        if constexpr (requires { src.quant_type(role, layer); }) plain = !src.quant_type(role, layer);
        for (index_t r0 = 0; plain && r0 < rows; r0 += chunk) {  // packed from the stored bytes: no f32 copy
            const index_t n = std::min(chunk, rows - r0);
            src.use_stored(role, layer, r0, n, [&](std::span<const std::byte> b, io::dtype t) { m.set_stored(row_offset + r0, b.data(), t, n); });
        }
        if (plain) return;
    }
    for (index_t r0 = 0; r0 < rows; r0 += chunk) {
        const index_t n = std::min(chunk, rows - r0);
        buf.resize(static_cast<std::size_t>(n) * static_cast<std::size_t>(k));
        src.read(role, layer, r0, n, buf.data());
        m.set_rows(row_offset + r0, buf.data(), n);
    }
}

/// A vector tensor (`size` elements) of `src`.
template <class Source>
std::vector<float> read_vector(Source& src, tensor_role role, index_t layer, index_t size) {
    std::vector<float> v(static_cast<std::size_t>(size));
    src.read(role, layer, 0, size, v.data());
    return v;
}

}  // namespace dlm::cpu
