// dlm/cuda/weights.cuh — the CUDA transformer's weights in device memory, and the three ways to fill
// them: in-memory f32 weights (dlm::transformer_weights), a Hugging Face checkpoint (each tensor's bytes
// copied as stored and converted on the device when its dtype is not the storage type), or random
// values made on the device (benchmarks of 7B shapes need no file and no host copy).
//
// Tensor names and shapes are model/transformer_weights.hpp's, the CPU model's too: both backends load
// the same folders.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "../io/model_config.hpp"
#include "../io/safetensors.hpp"
#include "../model/transformer_weights.hpp"
#include "element.cuh"
#include "kernels.cuh"
#include "runtime.cuh"

namespace dlm::cuda {

/// One decoder block on the device. Matrices in T, row-major [out, in]; q|k|v and gate|up stacked by
/// rows; norms and biases in f32 (qkv_bias empty unless the config has biases).
template <storage_element T>
struct device_layer {
    device_buffer<float> attn_norm, mlp_norm, qkv_bias;
    device_buffer<T> qkv, o, gate_up, down;
};

template <storage_element T>
struct device_weights {
    device_buffer<T> embedding;  ///< [vocab, hidden]
    std::vector<device_layer<T>> layers;
    device_buffer<float> final_norm;
    device_buffer<T> head;  ///< [vocab, hidden]; empty when tied to the embedding
    std::vector<float> inv_freq;  ///< rotary inverse frequencies (host copy)
    device_buffer<float> inv_freq_device;

    [[nodiscard]] const T* head_matrix() const noexcept { return head.empty() ? embedding.data() : head.data(); }

    /// Device bytes of every weight.
    [[nodiscard]] std::size_t bytes() const noexcept {
        std::size_t b = embedding.size() * sizeof(T) + head.size() * sizeof(T) + final_norm.size() * sizeof(float);
        for (const auto& L : layers)
            b += (L.qkv.size() + L.o.size() + L.gate_up.size() + L.down.size()) * sizeof(T) +
                 (L.attn_norm.size() + L.mlp_norm.size() + L.qkv_bias.size()) * sizeof(float);
        return b;
    }
};

namespace detail {

[[nodiscard]] inline std::size_t element_count(const io::model_config& c, tensor_role role) {
    std::size_t n = 1;
    for (const auto d : dlm::tensor_shape(c, role)) n *= static_cast<std::size_t>(d);
    return n;
}

/// Copies `n` elements stored as `type` at `src` (host) into `dst` (device, element D), converting on
/// the device through `staging` when the types differ.
template <class D>
void upload_as(D* dst, const void* src, io::dtype type, std::size_t n, device_buffer<std::byte>& staging, cudaStream_t stream) {
    if (n == 0) return;
    if (type == element<D>::dtype) {
        check(cudaMemcpyAsync(dst, src, n * sizeof(D), cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync (weights)");
        synchronize(stream, "loading weights");
        return;
    }
    const std::size_t bytes = n * io::dtype_size(type);
    staging.reserve(bytes, "converting weights");
    check(cudaMemcpyAsync(staging.data(), src, bytes, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync (weights)");
    const unsigned grid = kernels::stride_grid(n);
    switch (type) {
        case io::dtype::f32: kernels::convert<float, D><<<grid, 256, 0, stream>>>(reinterpret_cast<const float*>(staging.data()), dst, n); break;
        case io::dtype::f16: kernels::convert<f16, D><<<grid, 256, 0, stream>>>(reinterpret_cast<const f16*>(staging.data()), dst, n); break;
        case io::dtype::bf16: kernels::convert<bf16, D><<<grid, 256, 0, stream>>>(reinterpret_cast<const bf16*>(staging.data()), dst, n); break;
    }
    check_launch("dlm::cuda convert (weights)", stream);
    synchronize(stream, "loading weights");
}

}  // namespace detail

/// Allocates every weight for `c` and fills each by calling `fill(role, layer, dst, count)` (work on
/// `stream`, the model's), where dst
/// is a device pointer (T* for matrices, float* for norms and biases) to `count` elements in the
/// tensor's row-major order and shape dlm::tensor_shape(c, role).
template <storage_element T, class Fill>
device_weights<T> make_weights(const io::model_config& c, cudaStream_t stream, Fill&& fill) {
    const std::size_t h = static_cast<std::size_t>(c.hidden_size), q = static_cast<std::size_t>(c.num_heads) * c.head_dim,
                      kv = static_cast<std::size_t>(c.num_kv_heads) * c.head_dim, f = static_cast<std::size_t>(c.intermediate_size),
                      v = static_cast<std::size_t>(c.vocab_size);
    if (c.qk_norm || c.moe || c.rotary_dim > 0)  // docs/cuda.md: the natively block-causal families run on the CPU transformer
        throw invalid_parameter(c.moe ? "config.moe" : c.qk_norm ? "config.qk_norm" : "config.rotary_dim",
                                std::string("the ") + std::string(io::architecture_name(c.arch)) +
                                    " block (q/k RMSNorm, partial RoPE, mixture-of-experts MLP) is not implemented by "
                                    "dlm::cuda::transformer; use dlm::cpu::transformer");
    device_weights<T> w;
    w.embedding.reserve(v * h, "the embedding");
    fill(tensor_role::embedding, 0, w.embedding.data(), v * h);
    w.layers.resize(static_cast<std::size_t>(c.num_layers));
    for (index_t l = 0; l < c.num_layers; ++l) {
        device_layer<T>& L = w.layers[static_cast<std::size_t>(l)];
        L.attn_norm.reserve(h, "a norm");
        fill(tensor_role::attn_norm, l, L.attn_norm.data(), h);
        L.qkv.reserve((q + 2 * kv) * h, "q/k/v projections");
        fill(tensor_role::q_proj, l, L.qkv.data(), q * h);
        fill(tensor_role::k_proj, l, L.qkv.data() + q * h, kv * h);
        fill(tensor_role::v_proj, l, L.qkv.data() + (q + kv) * h, kv * h);
        if (c.qkv_bias) {
            L.qkv_bias.reserve(q + 2 * kv, "q/k/v biases");
            fill(tensor_role::q_bias, l, L.qkv_bias.data(), q);
            fill(tensor_role::k_bias, l, L.qkv_bias.data() + q, kv);
            fill(tensor_role::v_bias, l, L.qkv_bias.data() + q + kv, kv);
        }
        L.o.reserve(h * q, "the output projection");
        fill(tensor_role::o_proj, l, L.o.data(), h * q);
        L.mlp_norm.reserve(h, "a norm");
        fill(tensor_role::mlp_norm, l, L.mlp_norm.data(), h);
        L.gate_up.reserve(2 * f * h, "gate/up projections");
        fill(tensor_role::gate_proj, l, L.gate_up.data(), f * h);
        fill(tensor_role::up_proj, l, L.gate_up.data() + f * h, f * h);
        L.down.reserve(h * f, "the down projection");
        fill(tensor_role::down_proj, l, L.down.data(), h * f);
    }
    w.final_norm.reserve(h, "the final norm");
    fill(tensor_role::final_norm, 0, w.final_norm.data(), h);
    if (!c.tie_word_embeddings) {
        w.head.reserve(v * h, "the output head");
        fill(tensor_role::lm_head, 0, w.head.data(), v * h);
    }
    // Rotary inverse frequencies, as the CPU model (cpu/ops.hpp) computes them.
    const index_t half = c.head_dim / 2;
    w.inv_freq.resize(static_cast<std::size_t>(half));
    for (index_t i = 0; i < half; ++i) {
        const float exponent = static_cast<float>(2 * i) / static_cast<float>(c.head_dim);
        w.inv_freq[static_cast<std::size_t>(i)] = 1.0f / static_cast<float>(std::pow(c.rope_theta, static_cast<double>(exponent)));
    }
    // On the model's (non-blocking) stream, then waited for: a plain cudaMemcpy runs on the legacy
    // stream, unordered with the forwards that read the table.
    w.inv_freq_device.reserve(static_cast<std::size_t>(half), "rotary frequencies");
    upload(w.inv_freq_device.data(), w.inv_freq.data(), w.inv_freq.size(), stream, "rotary frequencies");
    synchronize(stream, "rotary frequencies");
    return w;
}

/// Fill from in-memory f32 weights; shapes checked, errors name the weight ("weights.layers[1].k_proj").
template <storage_element T>
device_weights<T> weights_from(const io::model_config& c, const dlm::transformer_weights& src, cudaStream_t stream) {
    device_buffer<std::byte> staging;
    auto fill = [&]<class D>(tensor_role role, index_t l, D* dst, std::size_t n) {
        const std::string where = "weights.layers[" + std::to_string(l) + "].";
        const float* data = nullptr;
        std::size_t have = 0;
        std::string name;
        auto take = [&](const std::string& nm, const float* p, std::size_t count) {
            name = nm;
            data = p;
            have = count;
        };
        const auto mat = [&](const std::string& nm, const f32_matrix& m) { take(nm, m.data(), static_cast<std::size_t>(m.size())); };
        const auto vec = [&](const std::string& nm, const f32_vector& v) { take(nm, v.data(), static_cast<std::size_t>(v.size())); };
        if (role == tensor_role::embedding) mat("weights.embedding", src.embedding);
        else if (role == tensor_role::final_norm) vec("weights.final_norm", src.final_norm);
        else if (role == tensor_role::lm_head) mat("weights.lm_head", src.lm_head);
        else {
            if (static_cast<std::size_t>(l) >= src.layers.size())
                throw invalid_parameter("weights.layers", "holds " + std::to_string(src.layers.size()) + " layers, the config has " +
                                                              std::to_string(c.num_layers));
            const dlm::layer_weights& L = src.layers[static_cast<std::size_t>(l)];
            switch (role) {
                case tensor_role::attn_norm: vec(where + "attn_norm", L.attn_norm); break;
                case tensor_role::q_proj: mat(where + "q_proj", L.q_proj); break;
                case tensor_role::k_proj: mat(where + "k_proj", L.k_proj); break;
                case tensor_role::v_proj: mat(where + "v_proj", L.v_proj); break;
                case tensor_role::q_bias: vec(where + "q_bias", L.q_bias); break;
                case tensor_role::k_bias: vec(where + "k_bias", L.k_bias); break;
                case tensor_role::v_bias: vec(where + "v_bias", L.v_bias); break;
                case tensor_role::o_proj: mat(where + "o_proj", L.o_proj); break;
                case tensor_role::mlp_norm: vec(where + "mlp_norm", L.mlp_norm); break;
                case tensor_role::gate_proj: mat(where + "gate_proj", L.gate_proj); break;
                case tensor_role::up_proj: mat(where + "up_proj", L.up_proj); break;
                case tensor_role::down_proj: mat(where + "down_proj", L.down_proj); break;
                default: break;
            }
        }
        if (have != n || n != detail::element_count(c, role))
            throw invalid_parameter(name, "holds " + std::to_string(have) + " values, the config needs " + std::to_string(n) + " (shape " +
                                              io::shape_string(dlm::tensor_shape(c, role)) + ")");
        detail::upload_as(dst, data, io::dtype::f32, n, staging, stream);
    };
    return make_weights<T>(c, stream, fill);
}

/// Fill from an opened checkpoint. Tensors are copied as stored (f32, f16 or bf16) and converted on the
/// device. Errors name the file and the tensor.
template <storage_element T>
device_weights<T> weights_from(const io::model_config& c, const io::checkpoint& ck, cudaStream_t stream) {
    device_buffer<std::byte> staging;
    auto fill = [&]<class D>(tensor_role role, index_t l, D* dst, std::size_t n) {
        const std::string name = dlm::tensor_name(c.arch, role, l);
        const io::tensor_info& t = ck.info(name);
        const auto expected = dlm::tensor_shape(c, role);
        if (!std::equal(t.shape.begin(), t.shape.end(), expected.begin(), expected.end()))
            throw tensor_error(t.file, t.name, "expected shape " + io::shape_string(expected) + ", found " + io::shape_string(t.shape));
        ck.mark_read(name);
        detail::upload_as(dst, t.bytes.data(), t.type, n, staging, stream);
    };
    return make_weights<T>(c, stream, fill);
}

/// Random weights made on the device: matrices uniform in ±scale·sqrt(3/fan_in), the embedding in ±1,
/// norms 1 ± 0.1, biases ±0.1 (the distribution of dlm::random_weights; other values).
template <storage_element T>
device_weights<T> random_weights(const io::model_config& c, std::uint64_t seed, float scale, cudaStream_t stream) {
    std::uint32_t tensor = 0;
    auto fill = [&]<class D>(tensor_role role, index_t, D* dst, std::size_t n) {
        float center = 0.0f, spread = 0.1f;
        switch (role) {
            case tensor_role::attn_norm:
            case tensor_role::mlp_norm:
            case tensor_role::final_norm: center = 1.0f; break;
            case tensor_role::q_bias:
            case tensor_role::k_bias:
            case tensor_role::v_bias: break;
            case tensor_role::embedding: spread = 1.0f; break;
            default: spread = scale * static_cast<float>(std::sqrt(3.0 / static_cast<double>(dlm::tensor_shape(c, role)[1])));
        }
        kernels::fill_uniform<D><<<kernels::stride_grid(n), 256, 0, stream>>>(dst, n, seed, tensor++, center, spread);
        check_launch("dlm::cuda fill_uniform (random weights)", stream);
    };
    device_weights<T> w = make_weights<T>(c, stream, fill);
    synchronize(stream, "random weights");
    return w;
}

}  // namespace dlm::cuda
