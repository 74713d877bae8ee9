// dlm/cpu/gguf_source.hpp — the CPU transformer's weights from a GGUF file (io/gguf_model.hpp),
// beside the safetensors checkpoint_source of weight_sources.hpp and with the same questions
// (dtype, read, use_stored for F32/F16/BF16 tensors), plus two for block-quantized tensors:
//   quant_type(role, layer)                     the ggml type of a quantized tensor, else nullopt
//   use_blocks(role, layer, row0, rows, use)    use(const byte*): rows [row0, row0 + rows) as the
//                                               file stores them, gguf_row_bytes(type, cols) each
// Rows come in Hugging Face order: a LLaDA file's attn_q/attn_k rows (and biases) are un-permuted
// (io::llada_gguf_row_of), whole rows at a time, so raw blocks survive it; a llada2 file's q, k and v
// are row ranges of its fused attn_qkv (stored_slice_of, as the folder's query_key_value). Every
// tensor's shape is checked against the config at its first read; tensor_error names it.
#pragma once

#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../io/gguf.hpp"
#include "../io/gguf_model.hpp"
#include "../io/safetensors.hpp"
#include "weights.hpp"

#if __has_include("quant/blocks.hpp")
#include "quant/blocks.hpp"
#define DLM_CPU_GGUF_HAVE_QUANT 1
#else
#define DLM_CPU_GGUF_HAVE_QUANT 0
#endif

namespace dlm::cpu {

/// The GGUF name of a tensor role ("blk.3.attn_q.weight"); a llada2 file's q, k and v are rows of
/// one fused tensor, attn_qkv.
[[nodiscard]] inline std::string gguf_tensor_name(tensor_role role, index_t layer = 0, io::architecture arch = io::architecture::llada) {
    const auto blk = [&](const char* stem) { return io::gguf_tensor_name(stem, layer, true); };
    const bool fused = arch == io::architecture::llada2_moe;
    if (fused && (role == tensor_role::q_proj || role == tensor_role::k_proj || role == tensor_role::v_proj)) return blk("attn_qkv.weight");
    if (fused && (role == tensor_role::q_bias || role == tensor_role::k_bias || role == tensor_role::v_bias)) return blk("attn_qkv.bias");
    switch (role) {
        case tensor_role::embedding: return "token_embd.weight";
        case tensor_role::attn_norm: return blk("attn_norm.weight");
        case tensor_role::q_proj: return blk("attn_q.weight");
        case tensor_role::k_proj: return blk("attn_k.weight");
        case tensor_role::v_proj: return blk("attn_v.weight");
        case tensor_role::q_bias: return blk("attn_q.bias");
        case tensor_role::k_bias: return blk("attn_k.bias");
        case tensor_role::v_bias: return blk("attn_v.bias");
        case tensor_role::o_proj: return blk("attn_output.weight");
        case tensor_role::mlp_norm: return blk("ffn_norm.weight");
        case tensor_role::gate_proj: return blk("ffn_gate.weight");
        case tensor_role::up_proj: return blk("ffn_up.weight");
        case tensor_role::down_proj: return blk("ffn_down.weight");
        case tensor_role::q_norm: return blk("attn_q_norm.weight");
        case tensor_role::k_norm: return blk("attn_k_norm.weight");
        case tensor_role::final_norm: return "output_norm.weight";
        case tensor_role::lm_head: return "output.weight";
    }
    return "?";
}

/// Throws tensor_error unless vector `t` of file `f` is stored F32, F16 or BF16: dlm reads no vector
/// in GGUF blocks.
inline void check_plain_vector(const io::gguf_file& f, const io::gguf_tensor& t) {
    if (!io::gguf_plain_dtype(t.type))
        throw tensor_error(f.path(), t.name, "a vector stored as " + std::string(io::gguf_type_name(t.type)) + "; dlm reads vectors as F32, F16 or BF16");
}

/// The GGUF tensors of a mixture-of-experts layer (llada-moe, llada2: io/gguf_model.hpp): the router,
/// the experts' stacked matrices (gate and up either apart or fused), llada2's selection bias and
/// shared expert.
struct gguf_expert_tensors {
    const io::gguf_tensor* router = nullptr;   ///< ffn_gate_inp: experts rows of hidden
    const io::gguf_tensor* bias = nullptr;     ///< exp_probs_b.bias: one per expert (nullptr: none)
    const io::gguf_tensor* shared_gate = nullptr, *shared_up = nullptr;  ///< ffn_{gate,up}_shexp: shared width rows of hidden
    const io::gguf_tensor* shared_down = nullptr;                        ///< ffn_down_shexp: hidden rows of the shared width
    const io::gguf_tensor* gate = nullptr;     ///< ffn_gate_exps: experts × width rows of hidden (nullptr when fused)
    const io::gguf_tensor* up = nullptr;       ///< ffn_up_exps, as gate
    const io::gguf_tensor* gate_up = nullptr;  ///< ffn_gate_up_exps: experts × 2·width rows (gate rows, then up rows, per expert)
    const io::gguf_tensor* down = nullptr;     ///< ffn_down_exps: experts × hidden rows of width
    const io::gguf_tensor* scale = nullptr;    ///< ffn_down_exps.scale: one factor per expert's output (Gemma 4's per_expert_scale; moe_config::per_expert_scale)
};

class gguf_source {
public:
    gguf_source(const io::gguf_file& f, const io::model_config& c) : f_(f), c_(c) {}

    [[nodiscard]] std::optional<io::gguf_type> quant_type(tensor_role r, index_t l) const {
        const io::gguf_tensor& t = tensor(r, l);
        if (io::gguf_plain_dtype(t.type)) return std::nullopt;
        return t.type;
    }
    /// The type read() converts from: f32/f16/bf16 as stored; a quantized tensor reads as f32
    /// (dequantized a slice at a time) and is refused if dlm has no kernel for its type.
    [[nodiscard]] io::dtype dtype(tensor_role r, index_t l) const {
        const io::gguf_tensor& t = tensor(r, l);
        if (const auto d = io::gguf_plain_dtype(t.type)) return *d;
        check_quantized(t);
        return io::dtype::f32;
    }
    void read(tensor_role r, index_t l, index_t row0, index_t rows, float* dst) const {
        const io::gguf_tensor& t = tensor(r, l);
        const std::int64_t cols = width(t);
        const std::size_t row_bytes = io::gguf_row_bytes(t.type, cols);
        check_rows(r, t, row0, rows);
        for_rows(r, t, static_cast<index_t>(first_row(r, l) + row0), rows, [&](std::int64_t i, std::int64_t from) {
            row_to_f32(t, t.bytes.subspan(static_cast<std::size_t>(from) * row_bytes, row_bytes), dst + i * cols, cols);
        });
    }
    /// Rows [row0, row0 + rows) of an F32/F16/BF16 tensor as stored, handed to `use(bytes, type)`
    /// and then released: a loader packs them without an f32 copy (checkpoint_source's call).
    template <class Use>
    void use_stored(tensor_role r, index_t l, index_t row0, index_t rows, Use&& use) const {
        const io::gguf_tensor& t = tensor(r, l);
        const auto d = io::gguf_plain_dtype(t.type);
        if (!d) throw contract_error("cpu::gguf_source::use_stored: " + t.name + " is stored in blocks (use_blocks hands them out)");
        with_stored(r, t, l, row0, rows, [&](std::span<const std::byte> b) { use(b, *d); });
    }
    /// Rows [row0, row0 + rows) as the file stores them (a quantized tensor's blocks), handed to
    /// `use(const std::byte*)` and then released.
    template <class Use>
    void use_blocks(tensor_role r, index_t l, index_t row0, index_t rows, Use&& use) const {
        with_stored(r, tensor(r, l), l, row0, rows, [&](std::span<const std::byte> b) { use(b.data()); });
    }

    /// Layer `l`'s expert tensors, their ggml shapes checked against the config (tensor_error names
    /// a missing or misshapen one).
    [[nodiscard]] gguf_expert_tensors expert_tensors(index_t l) const {
        const io::moe_config& m = *c_.moe;
        const std::int64_t h = c_.hidden_size, f = m.expert_intermediate_size, e = m.num_experts;
        const auto get = [&](const char* stem, std::vector<std::int64_t> want) -> const io::gguf_tensor& {
            const std::string name = io::gguf_tensor_name(stem, l, true);
            const io::gguf_tensor& t = f_.header().tensor(name);
            if (t.shape != want)
                throw tensor_error(f_.path(), name, "shape " + io::shape_string(t.shape) + " (ggml order, row length first) does not fit the metadata, which needs " +
                                                        io::shape_string(want));
            return t;
        };
        gguf_expert_tensors x;
        x.router = &get("ffn_gate_inp.weight", {h, e});
        if (f_.header().find_tensor(io::gguf_tensor_name("ffn_gate_up_exps.weight", l, true))) {
            x.gate_up = &get("ffn_gate_up_exps.weight", {h, 2 * f, e});
        } else {
            x.gate = &get("ffn_gate_exps.weight", {h, f, e});
            x.up = &get("ffn_up_exps.weight", {h, f, e});
        }
        x.down = &get("ffn_down_exps.weight", {f, h, e});
        if (m.selection_bias && f_.header().find_tensor(io::gguf_tensor_name("exp_probs_b.bias", l, true))) {
            x.bias = &get("exp_probs_b.bias", {e});
            check_plain_vector(f_, *x.bias);
        }
        if (const std::int64_t s = m.shared_intermediate_size; s > 0) {
            x.shared_gate = &get("ffn_gate_shexp.weight", {h, s});
            x.shared_up = &get("ffn_up_shexp.weight", {h, s});
            x.shared_down = &get("ffn_down_shexp.weight", {s, h});
        }
        if (m.per_expert_scale) {
            x.scale = &get("ffn_down_exps.scale", {e});
            check_plain_vector(f_, *x.scale);
        }
        for (const io::gguf_tensor* t : {x.router, x.gate, x.up, x.gate_up, x.down, x.shared_gate, x.shared_up, x.shared_down})
            if (t && !io::gguf_plain_dtype(t->type)) check_quantized(*t);
        return x;
    }
    /// Rows [row0, row0 + rows) of `t` (a 3-D tensor's rows run expert after expert) as f32.
    void read_rows(const io::gguf_tensor& t, std::int64_t row0, std::int64_t rows, float* dst) const {
        const std::int64_t cols = t.cols();
        const std::span<const std::byte> src = stored_rows(t, row0, rows);
        const std::size_t row_bytes = io::gguf_row_bytes(t.type, cols);
        for (std::int64_t i = 0; i < rows; ++i)
            row_to_f32(t, src.subspan(static_cast<std::size_t>(i) * row_bytes, row_bytes), dst + i * cols, cols);
    }
    /// The stored bytes of rows [row0, row0 + rows) of `t` (a quantized tensor's blocks).
    [[nodiscard]] std::span<const std::byte> stored_rows(const io::gguf_tensor& t, std::int64_t row0, std::int64_t rows) const {
        const std::size_t row_bytes = io::gguf_row_bytes(t.type, t.cols());
        return t.bytes.subspan(static_cast<std::size_t>(row0) * row_bytes, static_cast<std::size_t>(rows) * row_bytes);
    }
    /// Drops rows already packed from the resident set (as read() does for the dense tensors).
    void release_rows(const io::gguf_tensor& t, std::int64_t row0, std::int64_t rows) const { f_.release(stored_rows(t, row0, rows)); }

    /// The tensors the model does not use: refused (a file this config does not describe), except
    /// rope_freqs.weight (a table llama.cpp's converters may add; dlm computes its own).
    void check_all_used() const {
        // Each layer's first tensor, before anything is counted per layer: a block_count the file's
        // tensors cannot hold (2^31 - 1 in a 4 MB file) is refused naming the first layer it lacks.
        for (index_t l = 0; l < c_.num_layers; ++l) {
            const std::string first = gguf_tensor_name(tensor_role::attn_norm, l);
            if (!f_.header().find_tensor(first))
                throw tensor_error(f_.path(), first, "missing from the file, whose metadata's block_count gives " + std::to_string(c_.num_layers) + " layers");
        }
        std::set<std::string> used{"rope_freqs.weight"};
        for (const auto& [role, layer] : weight_order(c_)) used.insert(gguf_tensor_name(role, layer, c_.arch));
        for (index_t l = 0; l < c_.num_layers; ++l)
            if (c_.moe && c_.moe->is_moe_layer(l))
                for (const char* stem : {"ffn_gate_inp.weight", "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_gate_up_exps.weight", "ffn_down_exps.weight",
                                         "exp_probs_b.bias", "ffn_gate_shexp.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight"})
                    if (uses_expert_tensor(stem)) used.insert(io::gguf_tensor_name(stem, l, true));
        for (const io::gguf_tensor& t : f_.header().tensors())
            if (!used.contains(t.name))
                throw tensor_error(f_.path(), t.name, "not a tensor of the " + std::string(io::architecture_name(c_.arch)) + " model the metadata describes (" +
                                                          std::to_string(c_.num_layers) + " layers" + (c_.qkv_bias ? ", q/k/v biases" : ", no q/k/v biases") + ")");
    }

private:
    /// Whether this config's expert layers read `stem`: the selection bias and the shared expert only
    /// where it has them (llada2).
    [[nodiscard]] bool uses_expert_tensor(std::string_view stem) const noexcept {
        if (stem.starts_with("exp_probs_b")) return c_.moe->selection_bias;
        if (stem.find("_shexp") != std::string_view::npos) return c_.moe->shared_intermediate_size > 0;
        return true;
    }
    /// The first row of `role`'s rows in its tensor: q, k and v sit one after the other in a llada2
    /// file's attn_qkv (as in the folder's query_key_value), every other role starts at row 0.
    [[nodiscard]] std::int64_t first_row(tensor_role r, index_t l) const { return stored_slice_of(c_, r, l).row_offset; }
    /// Elements per row: a vector's elements are its rows (as weight_sources.hpp reads them).
    [[nodiscard]] static std::int64_t width(const io::gguf_tensor& t) noexcept { return t.shape.size() == 1 ? 1 : t.cols(); }
    /// Whether `role`'s rows are stored permuted (LLaDA q and k, see io/gguf_model.hpp).
    [[nodiscard]] bool permuted(tensor_role r) const noexcept {
        return c_.arch == io::architecture::llada &&
               (r == tensor_role::q_proj || r == tensor_role::k_proj || r == tensor_role::q_bias || r == tensor_role::k_bias);
    }
    /// Calls fn(i, stored row) for the Hugging Face rows row0 + i, then drops the slice's pages.
    template <class Fn>
    void for_rows(tensor_role r, const io::gguf_tensor& t, index_t row0, index_t rows, Fn fn) const {
        const bool perm = permuted(r);
        for (std::int64_t i = 0; i < rows; ++i) fn(i, perm ? io::llada_gguf_row_of(row0 + i, c_.head_dim) : row0 + i);
        const std::size_t row_bytes = io::gguf_row_bytes(t.type, width(t));
        if (!perm || (row0 % c_.head_dim == 0 && rows % c_.head_dim == 0))  // whole heads: the same rows, reordered
            f_.release(t.bytes.subspan(static_cast<std::size_t>(row0) * row_bytes, static_cast<std::size_t>(rows) * row_bytes));
    }

    /// Refuses rows [row0, row0 + rows) outside role `r`'s rows of `t` (all of them, or its part of a fused tensor).
    void check_rows(tensor_role r, const io::gguf_tensor& t, index_t row0, index_t rows) const {
        const std::int64_t count = tensor_shape(c_, r)[0];
        if (row0 < 0 || rows < 0 || row0 + rows > count)
            throw tensor_error(f_.path(), t.name, "rows [" + std::to_string(row0) + ", " + std::to_string(row0 + rows) + ") outside the tensor's " +
                                                      std::to_string(count) + " rows" + (stored_slice_of(c_, r, 0).shape[0] != count ? " for its role" : ""));
    }

    /// Calls use(bytes) with the stored rows [row0, row0 + rows) of layer `l`'s role `r` (in `t`) in
    /// Hugging Face order: the mapped bytes themselves, or (permuted rows) a reordered copy; then
    /// drops their pages.
    template <class Use>
    void with_stored(tensor_role r, const io::gguf_tensor& t, index_t l, index_t row0, index_t rows, Use&& use) const {
        check_rows(r, t, row0, rows);
        const std::size_t row_bytes = io::gguf_row_bytes(t.type, width(t));
        if (!permuted(r)) {
            const std::size_t at = static_cast<std::size_t>(first_row(r, l) + row0) * row_bytes;
            const std::span<const std::byte> b = t.bytes.subspan(at, static_cast<std::size_t>(rows) * row_bytes);
            use(b);
            f_.release(b);
            return;
        }
        reordered_.resize(static_cast<std::size_t>(rows) * row_bytes);
        for_rows(r, t, row0, rows, [&](std::int64_t i, std::int64_t from) {
            std::memcpy(reordered_.data() + static_cast<std::size_t>(i) * row_bytes, t.bytes.data() + static_cast<std::size_t>(from) * row_bytes, row_bytes);
        });
        use(std::span<const std::byte>(reordered_));
    }

    /// One stored row of `t` (`cols` elements) as f32: converted, or dequantized (a type without a
    /// kernel refused by name).
    void row_to_f32(const io::gguf_tensor& t, std::span<const std::byte> row, float* out, std::int64_t cols) const {
        if (const auto d = io::gguf_plain_dtype(t.type)) return io::convert_to_f32(*d, row, std::span<float>(out, static_cast<std::size_t>(cols)));
        check_quantized(t);
#if DLM_CPU_GGUF_HAVE_QUANT
        quant::dequantize_row(t.type, row.data(), out, cols);
#endif
    }

    void check_quantized(const io::gguf_tensor& t) const {
#if DLM_CPU_GGUF_HAVE_QUANT
        if (quant::has_kernel(t.type)) return;
#endif
        throw tensor_error(f_.path(), t.name, "type " + std::string(io::gguf_type_name(t.type)) +
                                                  " is not one dlm multiplies (it reads F32, F16, BF16" +
                                                  (DLM_CPU_GGUF_HAVE_QUANT ? ", Q8_0, Q4_0, Q4_K, Q5_K and Q6_K)" : ")"));
    }

    /// The tensor of `role` (a llada2 file's fused attn_qkv for q, k and v), its shape checked against the config.
    [[nodiscard]] const io::gguf_tensor& tensor(tensor_role r, index_t l) const {
        const std::string name = gguf_tensor_name(r, l, c_.arch);
        const io::gguf_tensor& t = f_.header().tensor(name);
        const std::vector<std::int64_t> want = stored_slice_of(c_, r, l).shape;
        const bool ok = want.size() == 2 ? t.shape.size() == 2 && t.shape[0] == want[1] && t.shape[1] == want[0]
                                         : t.shape.size() == 1 && t.shape[0] == want[0];
        if (!ok)
            throw tensor_error(f_.path(), name, "shape " + io::shape_string(t.shape) + " (ggml order, row length first) does not fit the metadata, which needs " +
                                                    (want.size() == 2 ? io::shape_string(std::vector<std::int64_t>{want[1], want[0]}) : io::shape_string(want)));
        if (want.size() == 1) check_plain_vector(f_, t);
        if (permuted(r) && want[0] % c_.head_dim != 0)
            throw tensor_error(f_.path(), name, "rows are not whole heads of " + std::to_string(c_.head_dim));
        return t;
    }

    const io::gguf_file& f_;
    const io::model_config& c_;
    /// Permuted rows reordered for use_stored / use_blocks, reused slice after slice (a load runs
    /// on one thread; a fresh buffer per slice would fault in fresh pages each time).
    mutable std::vector<std::byte> reordered_;
};

}  // namespace dlm::cpu
