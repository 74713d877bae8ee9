// dlm/cuda/transformer.cuh — the CUDA transformer: LLaDA, Dream and Qwen2 by configuration, the same
// model as dlm::cpu::transformer (same config, same checkpoints, same forward contract) on the GPU.
//
//   auto model = dlm::cuda::transformer::load("path/to/model");        // bf16 weights on the device
//   dlm::presets::cdlm<dlm::cuda::transformer> dec(model);              // the host decoder, unchanged
//   dlm::cuda::device_decoder_t<dlm::presets::cdlm<dlm::cuda::transformer>> fast(model);  // device-side steps
//
// Storage type T (bf16 by default, f16 or f32): weights and the inputs of every matrix product (rounded
// as the CPU model rounds them for weights of that type: to_product_input); accumulation, the residual
// stream, norms, queries and softmax in f32, as on the CPU; keys and values (window and KV cache) in KV:
// f32 by default, as on the CPU, or bf16 (basic_transformer<T, bf16>: half the cache's bytes, each key
// and value rounded once to nearest even, docs/determinism.md). One forward, for the stacked
// window rows of every request of the batch:
//   embed → per layer [RMSNorm → q|k|v GEMM → bias + RoPE + K/V to window and cache → attention(mask)
//   → o GEMM (+ residual) → RMSNorm → gate|up GEMM → SiLU·up → down GEMM (+ residual)] → RMSNorm of the
//   logits rows → head GEMM.
// GEMMs by the path set_gemm_path / DLM_CUDA_GEMM chooses (gemm.cuh); the attention kernel, templated on the mask, by the path
// set_attention_path / DLM_CUDA_ATTENTION chooses (attention_run.cuh).
//
// Work is enqueued on the model's own stream. A transformer is not safe to call from two threads at
// once (forward reuses its work buffers). cuBLAS picks kernels by shape, so logits agree with the CPU
// model and across batch compositions to rounding, not bit for bit.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "../core/memory.hpp"
#include "../io/model_config.hpp"
#include "../io/safetensors.hpp"
#include "../model/concept.hpp"
#include "../model/request_check.hpp"
#include "attention_run.cuh"
#include "gemm.cuh"
#include "kernels.cuh"
#include "kv_cache.cuh"
#include "profiler.cuh"
#include "runtime.cuh"
#include "weights.cuh"

namespace dlm::cuda {

template <storage_element T = bf16, storage_element KV = float>
class basic_transformer {
    static_assert(std::same_as<KV, float> || std::same_as<KV, bf16>,
                  "the CUDA transformer keeps keys and values in f32 (as the CPU model) or bf16; f16's range could overflow on large keys");

public:
    using element_type = T;
    /// Keys and values: f32 by default whatever T, as the CPU model keeps them (its bf16 path rounds only
    /// the inputs of products with weights: docs/determinism.md); bf16 halves the KV cache.
    using kv_element = KV;
    using kv_cache = cuda::kv_cache<kv_element>;
    /// Its K/V stores are device memory: the engine does not weigh them against the host's (model/concept.hpp).
    static constexpr bool kv_on_device = true;

    /// From in-memory f32 weights (tests): converted to T on the device. Throws invalid_parameter naming
    /// the config field or the weight that does not fit.
    basic_transformer(io::model_config config, const transformer_weights& w) : basic_transformer(std::move(config)) {
        weights_ = weights_from<T>(config_, w, ctx_.stream());
    }

    /// Loads a Hugging Face model folder (or its config.json, a .safetensors file or an index inside it:
    /// io::resolve_model_paths): config.json, generation_config.json and
    /// model.safetensors or a sharded checkpoint in f32, f16 or bf16, each tensor copied to the device
    /// as stored and converted there. A tensor the model does not use is refused (tensor_error).
    [[nodiscard]] static basic_transformer load(const std::filesystem::path& model_dir) {
        const io::model_paths where = io::resolve_model_paths(model_dir);
        basic_transformer t(io::load_config(where.folder));
        const io::checkpoint ck = io::checkpoint::open(where.checkpoint);
        t.weights_ = weights_from<T>(t.config_, ck, t.ctx_.stream());
        dlm::accept_unused_buffers(ck, t.config_);
        ck.check_all_read();
        return t;
    }

    /// Random weights made on the device (benchmarks): the distribution of dlm::random_weights.
    [[nodiscard]] static basic_transformer random(io::model_config config, std::uint64_t seed, float scale = 1.0f) {
        basic_transformer t(std::move(config));
        t.weights_ = random_weights<T>(t.config_, seed, scale, t.ctx_.stream());
        return t;
    }

    [[nodiscard]] const io::model_config& config() const noexcept { return config_; }
    [[nodiscard]] index_t vocab_size() const noexcept { return config_.vocab_size; }
    [[nodiscard]] token_id mask_id() const noexcept { return config_.mask_id; }
    [[nodiscard]] std::span<const token_id> eos_ids() const noexcept { return config_.eos_ids; }
    [[nodiscard]] bool logits_shift() const noexcept { return config_.logits_shift; }
    [[nodiscard]] index_t max_context() const noexcept { return config_.max_context; }
    /// Device bytes of the weights (what every forward streams from memory at least once).
    [[nodiscard]] std::size_t weight_bytes() const noexcept { return weights_.bytes(); }
    [[nodiscard]] cudaStream_t stream() const noexcept { return ctx_.stream(); }
    [[nodiscard]] cublasHandle_t blas() const noexcept { return ctx_.blas(); }
    void synchronize() const { ctx_.synchronize("cuda::transformer"); }
    /// Which implementation runs the linear layers (gemm_path.cuh): DLM_CUDA_GEMM when the model was
    /// made, else auto.
    [[nodiscard]] cuda::gemm_path gemm_path() const noexcept { return ctx_.gemm_path(); }
    void set_gemm_path(cuda::gemm_path p) noexcept { ctx_.set_gemm_path(p); }
    /// Which kernel runs the attention (attention_path.cuh): DLM_CUDA_ATTENTION when the model was made,
    /// else auto (tensor cores for bf16 and f16 models with heads of 32, 64 or 128).
    [[nodiscard]] cuda::attention_path attention_path() const noexcept { return ctx_.attention_path(); }
    void set_attention_path(cuda::attention_path p) noexcept { ctx_.set_attention_path(p); }
    /// The most blocks one attention tile's keys are split over when a forward has too few rows to fill
    /// the GPU (1 to kernels::max_attention_splits, the default; 1: never split). A row's last bits
    /// depend on its forward's number of splits (docs/determinism.md). Throws invalid_parameter outside
    /// that range.
    void set_attention_split_limit(index_t limit) {
        if (limit < 1 || limit > kernels::max_attention_splits)
            throw invalid_parameter("attention split limit", "must be 1 to " + std::to_string(kernels::max_attention_splits) + ", got " +
                                                                 std::to_string(limit));
        split_limit_ = limit;
    }
    [[nodiscard]] index_t attention_split_limit() const noexcept { return split_limit_; }
    /// Times every phase of the forwards enqueued while set (profiler.cuh); null (the default) for none.
    /// Not while a CUDA graph is being captured.
    void set_profiler(forward_profiler* p) noexcept { profiler_ = p; }

    /// A device K/V store for `capacity` canvas positions. One above dlm::weighed_above that the
    /// device's free memory cannot hold is dlm::memory_error (memory_kind::device: so a server's
    /// request waits or is refused as on the host), not a failed cudaMalloc. The engine weighs a
    /// joining batch's stores summed before it makes any (device_bytes_free).
    [[nodiscard]] kv_cache make_kv_cache(index_t capacity) const {
        if (capacity < 0) throw invalid_parameter("capacity", "must be >= 0, got " + std::to_string(capacity));
        if (const std::uint64_t bytes = kv_cache_bytes(capacity); bytes > weighed_above) {
            const std::uint64_t free = device_bytes_free();
            if (bytes > free)
                throw memory_error("a device KV cache of " + std::to_string(capacity) + " positions", bytes, free, "fewer or shorter sequences at once",
                                   memory_kind::device);
        }
        return kv_cache(capacity, config_.num_layers, config_.num_kv_heads, config_.head_dim, ctx_.stream());
    }
    /// The device's free memory now (cudaMemGetInfo): the engine weighs a joining batch's K/V stores
    /// against it, summed, before it makes any (model/concept.hpp, model_reports_device_memory).
    [[nodiscard]] std::uint64_t device_bytes_free() const {
        std::size_t free = 0, total = 0;
        check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
        return free;
    }
    /// The bytes of the device logits buffer now: every forward (forward and forward_device alike) makes
    /// its logits rows there, rows × vocab_size() × 4 B, growing it (the old one freed first) when it has
    /// more rows. The engine weighs a joining batch's rows on the device beside its K/V stores, this
    /// buffer's spare part offsetting them (model/concept.hpp, model_reports_device_logits).
    [[nodiscard]] std::uint64_t device_logits_bytes() const noexcept { return logits_.size() * sizeof(float); }
    /// The device bytes the forward's work buffers need for a forward whose windows hold `rows` rows (the
    /// sizes stage() reserves over them, its metadata as if each row were a request and a tile of its
    /// own, and the attention splits' partial results at their bound: splits are taken only while a
    /// forward has fewer than 2 blocks a multiprocessor, so rows × heads × splits stay under
    /// 4 · multiprocessors · attention_rows · heads a block), and what they hold now: the engine weighs
    /// them (model/concept.hpp, model_reports_work_bytes). The logits buffer is weighed apart.
    [[nodiscard]] std::uint64_t work_bytes(index_t rows) const noexcept {
        const io::model_config& c = config_;
        const kernels::qkv_shape sh{c.num_heads, c.num_kv_heads, c.head_dim};
        const auto r = static_cast<std::uint64_t>(std::max<index_t>(rows, 0));
        const auto hidden = static_cast<std::uint64_t>(c.hidden_size), ffn = static_cast<std::uint64_t>(c.intermediate_size);
        const std::uint64_t per_row = hidden * (sizeof(float) + sizeof(T)) + static_cast<std::uint64_t>(sh.ld()) * sizeof(float) +
                                      2 * static_cast<std::uint64_t>(sh.kv_dim()) * sizeof(kv_element) + static_cast<std::uint64_t>(sh.q_dim()) * sizeof(T) +
                                      ffn * (2 * sizeof(float) + sizeof(T)) + 2 * static_cast<std::uint64_t>(c.head_dim / 2) * sizeof(float);
        const std::uint64_t partial = 4 * static_cast<std::uint64_t>(std::max(sm_count_, 1)) * kernels::attention_rows *
                                      static_cast<std::uint64_t>(kernels::heads_in_block(c.num_heads / std::max(c.num_kv_heads, 1))) *
                                      kernels::partial_floats(c.head_dim) * sizeof(float);
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(r, std::numeric_limits<index_t>::max()));
        return r * per_row + partial + metadata_layout(n, static_cast<index_t>(n), static_cast<index_t>(n), static_cast<index_t>(n)).total;
    }
    [[nodiscard]] std::uint64_t work_bytes_held() const noexcept {
        std::uint64_t floats = 0;
        for (const device_buffer<float>* b : {&x_, &qkv_, &gu_, &cos_, &sin_, &att_part_}) floats += b->size();
        std::uint64_t bytes = floats * sizeof(float) + (k_win_.size() + v_win_.size()) * sizeof(kv_element) + meta_device_.size();
        for (const device_buffer<T>* b : {&xn_, &att_, &act_}) bytes += b->size() * sizeof(T);
        return bytes;
    }
    /// The device bytes of make_kv_cache(capacity) (the prompt cache's bound counts them).
    [[nodiscard]] std::uint64_t kv_cache_bytes(index_t capacity) const noexcept {
        return kv_cache::bytes_for(capacity, config_.num_layers, config_.num_kv_heads, config_.head_dim);
    }
    /// Copies stored K/V between two of this model's stores, on its stream, in order with its forwards
    /// (cuda::copy_kv; the prompt cache's hook).
    void copy_kv(const kv_cache& src, index_t src_begin, kv_cache& dst, index_t dst_begin, index_t count) const {
        cuda::copy_kv(src, src_begin, dst, dst_begin, count, ctx_.stream());
    }

    /// One batched forward (the dlm::language_model contract, as the CPU model): logits of each
    /// request's rows [logits_begin, logits_end), requests in order, copied into the host `logits`.
    template <attention_mask Mask>
    void forward(std::span<const forward_request<kv_cache>> requests, const Mask& mask, std::span<float> logits) {
        std::size_t rows = 0;
        for (const auto& rq : requests) rows += static_cast<std::size_t>(std::max<index_t>(rq.plan.logits_rows(), 0));
        const std::size_t vocab = static_cast<std::size_t>(config_.vocab_size);
        if (logits.size() != rows * vocab)
            throw contract_error("cuda::transformer::forward: logits holds " + std::to_string(logits.size()) + " floats, the plans ask for " +
                                 std::to_string(rows) + " rows of " + std::to_string(vocab));
        const float* device_logits = forward_device(requests, mask);
        download(logits.data(), device_logits, logits.size(), ctx_.stream(), "logits");
        synchronize();
    }

    /// As forward, but the logits stay on the device: returns a device pointer to the stacked logits rows
    /// (f32, rows of vocab_size()), valid until the next forward. The work is enqueued on stream() and
    /// may still be running when this returns; the KV caches' `stored` flags are already updated.
    template <attention_mask Mask>
    const float* forward_device(std::span<const forward_request<kv_cache>> requests, const Mask& mask) {
        enqueue(stage(requests, mask), mask);
        return logits_.data();
    }

    /// A forward prepared on the host and not yet enqueued (forward_device = stage, then enqueue).
    struct staged_forward {
        index_t requests = 0, m = 0, z = 0, tiles = 0;  ///< requests, window rows, logits rows, attention tiles
        index_t attention_splits = 1;                    ///< blocks per attention tile along the keys (kernels::attention_splits)
        std::size_t metadata_bytes = 0;
    };

    /// The host half of a forward: checks the requests (the errors of forward), packs their metadata into
    /// pinned memory, sizes the work buffers and marks the stores in the caches' `stored` flags. Nothing
    /// is enqueued; the previous forward's metadata upload must be complete (enqueue with
    /// track_upload, or a synchronised stream, sees to it).
    template <attention_mask Mask>
    staged_forward stage(std::span<const forward_request<kv_cache>> requests, const Mask& mask) {
        const std::size_t n = requests.size();
        index_t m = 0, z = 0;
        for (std::size_t i = 0; i < n; ++i) {
            validate(requests[i], i);
            check_available(requests[i], mask, i);
            m += requests[i].plan.window_size();
            z += requests[i].plan.logits_rows();
        }
        const io::model_config& c = config_;
        const kernels::qkv_shape s{c.num_heads, c.num_kv_heads, c.head_dim};
        const std::size_t hidden = static_cast<std::size_t>(c.hidden_size), ffn = static_cast<std::size_t>(c.intermediate_size),
                          vocab = static_cast<std::size_t>(c.vocab_size), rows = static_cast<std::size_t>(m);
        logits_.reserve(std::max<std::size_t>(static_cast<std::size_t>(z) * vocab, 1), "logits");
        staged_forward f{static_cast<index_t>(n), m, z, 0, 0};
        if (m == 0) return f;
        stage_metadata(requests, m, z, f);
        x_.reserve(rows * hidden, "activations");
        xn_.reserve(std::max<std::size_t>(rows, static_cast<std::size_t>(z)) * hidden, "normed activations");
        qkv_.reserve(rows * static_cast<std::size_t>(s.ld()), "q/k/v");
        k_win_.reserve(rows * static_cast<std::size_t>(s.kv_dim()), "window keys");
        v_win_.reserve(rows * static_cast<std::size_t>(s.kv_dim()), "window values");
        att_.reserve(rows * static_cast<std::size_t>(s.q_dim()), "attention output");
        gu_.reserve(rows * 2 * ffn, "gate/up");
        act_.reserve(rows * ffn, "MLP activations");
        const std::size_t half = static_cast<std::size_t>(c.head_dim / 2);
        cos_.reserve(rows * half, "rotary tables");
        sin_.reserve(rows * half, "rotary tables");
        index_t max_keys = 0;
        for (const auto& rq : requests) max_keys = std::max(max_keys, rq.plan.attend_end);
        f.attention_splits = kernels::attention_splits(kernels::attention_blocks(f.tiles, s), max_keys, sm_count_, split_limit_);
        if (f.attention_splits > 1)
            att_part_.reserve(rows * static_cast<std::size_t>(c.num_heads) * static_cast<std::size_t>(f.attention_splits) *
                                  kernels::partial_floats(c.head_dim),
                              "attention partial results");
        for (const auto& rq : requests)
            if (rq.plan.stores()) std::fill(rq.cache->stored.begin() + rq.plan.store_begin, rq.cache->stored.begin() + rq.plan.store_end, 1);
        return f;
    }

    /// What a captured enqueue(f) depends on besides the metadata's contents: the shape and every buffer
    /// address it bakes in. Equal keys: a CUDA graph captured for one may be replayed for the other.
    [[nodiscard]] std::vector<std::uintptr_t> graph_key(const staged_forward& f) const {
        std::vector<std::uintptr_t> k{static_cast<std::uintptr_t>(f.requests), static_cast<std::uintptr_t>(f.m), static_cast<std::uintptr_t>(f.z),
                                      static_cast<std::uintptr_t>(f.tiles), static_cast<std::uintptr_t>(f.attention_splits), f.metadata_bytes,
                                      static_cast<std::uintptr_t>(ctx_.gemm_path()),  // a graph bakes in the GEMM and attention kernels too
                                      static_cast<std::uintptr_t>(ctx_.attention_path())};
        for (const void* p : {static_cast<const void*>(x_.data()), static_cast<const void*>(qkv_.data()), static_cast<const void*>(gu_.data()),
                              static_cast<const void*>(cos_.data()), static_cast<const void*>(sin_.data()), static_cast<const void*>(logits_.data()),
                              static_cast<const void*>(k_win_.data()), static_cast<const void*>(v_win_.data()), static_cast<const void*>(xn_.data()),
                              static_cast<const void*>(att_.data()), static_cast<const void*>(act_.data()), static_cast<const void*>(att_part_.data()),
                              static_cast<const void*>(meta_host_.data()), static_cast<const void*>(meta_device_.data())})
            k.push_back(reinterpret_cast<std::uintptr_t>(p));
        return k;
    }

    /// The device half of a forward: uploads the staged metadata and enqueues every kernel and product on
    /// stream(); the logits land in logits(). `track_upload`: record when the upload is done, so the next
    /// stage may rewrite the pinned metadata (off inside a CUDA graph capture, whose replays the caller
    /// synchronises).
    template <attention_mask Mask>
    void enqueue(const staged_forward& f, const Mask& mask, bool track_upload = true) {
        if (f.m == 0) return;
        const index_t m = f.m, z = f.z;
        const io::model_config& c = config_;
        const kernels::qkv_shape s{c.num_heads, c.num_kv_heads, c.head_dim};
        const std::size_t rows = static_cast<std::size_t>(m), half = static_cast<std::size_t>(c.head_dim / 2);
        const float att_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
        forward_profiler* const prof = profiler_;
        if (prof) prof->begin(ctx_.stream());
        upload(meta_device_.data(), meta_host_.data(), f.metadata_bytes, ctx_.stream(), "forward metadata");
        if (track_upload) {
            check(cudaEventRecord(upload_done_.get(), ctx_.stream()), "cudaEventRecord");
            upload_pending_ = true;
        }
        const metadata meta = device_metadata(f);
        const cudaStream_t st = ctx_.stream();
        auto done = [&](forward_phase p) {
            if (prof) prof->mark(p, st);
        };
        done(forward_phase::upload);
        auto product = [&](index_t r, index_t n, index_t k, const T* x, const T* w, float* y, float beta, const char* what, forward_phase p) {
            gemm_.linear<T>(ctx_, r, n, k, x, w, y, beta, what);
            done(p);
        };
        const float eps = static_cast<float>(c.rms_norm_eps);
        const index_t H = c.hidden_size, F = c.intermediate_size;
        kernels::rope_tables<><<<kernels::stride_grid(rows * half), 256, 0, st>>>(meta.positions, m, static_cast<index_t>(half),
                                                                                 weights_.inv_freq_device.data(), cos_.data(), sin_.data());
        check_launch("dlm::cuda rope_tables", st);
        done(forward_phase::rope);
        kernels::embed<T><<<static_cast<unsigned>(m), 256, 0, st>>>(weights_.embedding.data(), meta.tokens, H, x_.data());
        check_launch("dlm::cuda embed", st);
        done(forward_phase::embed);
        for (index_t l = 0; l < c.num_layers; ++l) {
            const device_layer<T>& L = weights_.layers[static_cast<std::size_t>(l)];
            kernels::launch_rms_norm<T>(m, x_.data(), nullptr, H, L.attn_norm.data(), eps, xn_.data(), st);
            done(forward_phase::rms_norm);
            product(m, s.ld(), H, xn_.data(), L.qkv.data(), qkv_.data(), 0.0f, "q/k/v projection", forward_phase::qkv_gemm);
            kernels::launch_qkv_epilogue<kv_element>(m, qkv_.data(), s, L.qkv_bias.empty() ? nullptr : L.qkv_bias.data(), cos_.data(),
                                                     sin_.data(), meta.row_request, meta.seqs, l, k_win_.data(), v_win_.data(), st);
            done(forward_phase::qkv_epilogue);
            const kernels::attention_args<kv_element, T> att{meta.seqs, meta.tiles, qkv_.data(), s, k_win_.data(), v_win_.data(), l,
                                                             att_scale, att_.data(), att_part_.data(), f.attention_splits};
            kernels::run_attention(mask, att, meta.n_tiles, m, ctx_.attention_path(), st);
            done(forward_phase::attention);
            product(m, H, s.q_dim(), att_.data(), L.o.data(), x_.data(), 1.0f, "output projection", forward_phase::o_gemm);
            kernels::launch_rms_norm<T>(m, x_.data(), nullptr, H, L.mlp_norm.data(), eps, xn_.data(), st);
            done(forward_phase::rms_norm);
            product(m, 2 * F, H, xn_.data(), L.gate_up.data(), gu_.data(), 0.0f, "gate/up projection", forward_phase::gate_up_gemm);
            kernels::launch_silu_gate<T>(gu_.data(), m, F, act_.data(), st);
            done(forward_phase::silu);
            product(m, H, F, act_.data(), L.down.data(), x_.data(), 1.0f, "down projection", forward_phase::down_gemm);
        }
        if (z == 0) return;
        kernels::launch_rms_norm<T>(z, x_.data(), meta.logit_source, H, weights_.final_norm.data(), eps, xn_.data(), st);
        done(forward_phase::final_norm);
        product(z, c.vocab_size, H, xn_.data(), weights_.head_matrix(), logits_.data(), 0.0f, "output head", forward_phase::head_gemm);
    }

    /// The logits of the last enqueued forward (device, f32 rows of vocab_size()).
    [[nodiscard]] const float* logits() const noexcept { return logits_.data(); }

private:
    explicit basic_transformer(io::model_config c) : config_(std::move(c)) {
        check_config();
        sm_count_ = multiprocessor_count();
    }

    void check_config() const {
        io::check_model_config(config_);
        if (config_.head_dim > kernels::max_head_dim)
            throw invalid_parameter("config.head_dim", "the CUDA attention takes a head_dim of at most " + std::to_string(kernels::max_head_dim) +
                                                           ", got " + std::to_string(config_.head_dim));
    }

    void validate(const forward_request<kv_cache>& rq, std::size_t i) const {
        dlm::detail::check_request(rq, i, {config_.num_layers, config_.num_kv_heads, config_.head_dim, config_.vocab_size}, "cuda::transformer::forward");
    }

    /// Refuses a request whose rows need a key that is neither in the window nor stored in its cache.
    template <attention_mask Mask>
    static void check_available(const forward_request<kv_cache>& rq, const Mask& mask, std::size_t i) {
        const forward_plan& p = rq.plan;
        auto available = [&](index_t k) {
            return (k >= p.window_begin && k < p.window_end) || (rq.cache && rq.cache->stored[static_cast<std::size_t>(k)]);
        };
        bool all = true;
        for (index_t k = 0; k < p.attend_end && all; ++k) all = available(k);
        if (all) return;
        for (index_t q = p.window_begin; q < p.window_end; ++q) {
            const index_t kend = std::min(p.attend_end, mask.key_end(rq.layout, q));
            for (index_t k = 0; k < kend; ++k)
                if (!available(k) && mask.allowed(rq.layout, q, k))
                    throw contract_error("cuda::transformer: request " + std::to_string(i) + ", row " + std::to_string(q) + " needs key " +
                                         std::to_string(k) + ", which is neither in the window [" + std::to_string(p.window_begin) + ", " +
                                         std::to_string(p.window_end) + ") nor stored in the KV cache");
        }
    }

    /// Device pointers into the uploaded per-forward metadata.
    struct metadata {
        const sequence_view<kv_element>* seqs;
        const token_id* tokens;
        const index_t* positions;
        const index_t* row_request;
        const kernels::attention_tile* tiles;
        index_t n_tiles;
        const index_t* logit_source;  // stacked row of each logits row
    };

    /// Byte offsets of the parts of the packed metadata.
    struct metadata_layout {
        std::size_t seqs = 0, tokens, pos, rowreq, tiles, logit, total;
        metadata_layout(std::size_t n, index_t m, index_t n_tiles, index_t z) {
            auto align = [](std::size_t b) { return (b + 15) / 16 * 16; };
            tokens = align(seqs + n * sizeof(sequence_view<kv_element>));
            pos = align(tokens + static_cast<std::size_t>(m) * sizeof(token_id));
            rowreq = align(pos + static_cast<std::size_t>(m) * sizeof(index_t));
            tiles = align(rowreq + static_cast<std::size_t>(m) * sizeof(index_t));
            logit = align(tiles + static_cast<std::size_t>(n_tiles) * sizeof(kernels::attention_tile));
            total = align(logit + static_cast<std::size_t>(z) * sizeof(index_t));
        }
    };

    /// Device pointers into the uploaded metadata of a staged forward.
    metadata device_metadata(const staged_forward& f) const {
        const metadata_layout o(static_cast<std::size_t>(f.requests), f.m, f.tiles, f.z);
        const std::byte* d = meta_device_.data();
        return {reinterpret_cast<const sequence_view<kv_element>*>(d + o.seqs), reinterpret_cast<const token_id*>(d + o.tokens),
                reinterpret_cast<const index_t*>(d + o.pos),          reinterpret_cast<const index_t*>(d + o.rowreq),
                reinterpret_cast<const kernels::attention_tile*>(d + o.tiles), f.tiles,
                reinterpret_cast<const index_t*>(d + o.logit)};
    }

    /// Packs the request descriptors, window tokens and positions, the row → request map, the attention
    /// tiles and the logits rows into pinned memory (enqueue uploads them in one copy).
    void stage_metadata(std::span<const forward_request<kv_cache>> requests, index_t m, index_t z, staged_forward& f) {
        const std::size_t n = requests.size();
        index_t n_tiles = 0;
        for (const auto& rq : requests) n_tiles += (rq.plan.window_size() + kernels::attention_rows - 1) / kernels::attention_rows;
        const metadata_layout o(n, m, n_tiles, z);
        const std::size_t o_seqs = o.seqs, o_tokens = o.tokens, o_pos = o.pos, o_rowreq = o.rowreq, o_tiles = o.tiles, o_logit = o.logit,
                          total = o.total;
        // The previous forward's upload must be done before its staging memory is rewritten.
        if (upload_pending_) check(cudaEventSynchronize(upload_done_.get()), "cudaEventSynchronize (metadata upload)");
        meta_host_.reserve(total);
        meta_device_.reserve(total, "forward metadata");
        std::byte* h = meta_host_.data();
        auto* seqs = reinterpret_cast<sequence_view<kv_element>*>(h + o_seqs);
        auto* tokens = reinterpret_cast<token_id*>(h + o_tokens);
        auto* pos = reinterpret_cast<index_t*>(h + o_pos);
        auto* rowreq = reinterpret_cast<index_t*>(h + o_rowreq);
        auto* tiles = reinterpret_cast<kernels::attention_tile*>(h + o_tiles);
        auto* logit = reinterpret_cast<index_t*>(h + o_logit);
        index_t row = 0, lrow = 0, t = 0;
        for (std::size_t i = 0; i < n; ++i) {
            const forward_request<kv_cache>& rq = requests[i];
            const forward_plan& p = rq.plan;
            sequence_view<kv_element> sv;
            sv.layout = rq.layout;
            sv.plan = p;
            sv.row0 = row;
            sv.logits_row0 = lrow;
            if (rq.cache && rq.cache->capacity > 0) {
                sv.keys = rq.cache->keys();
                sv.values = rq.cache->values();
                sv.capacity = rq.cache->capacity;
            }
            seqs[i] = sv;
            for (index_t k = p.window_begin; k < p.window_end; ++k, ++row) {
                tokens[row] = rq.canvas[static_cast<std::size_t>(k)];
                pos[row] = k;
                rowreq[row] = static_cast<index_t>(i);
            }
            for (index_t r = 0; r < p.window_size(); r += kernels::attention_rows) tiles[t++] = {static_cast<index_t>(i), r};
            for (index_t k = p.logits_begin; k < p.logits_end; ++k) logit[lrow++] = sv.row0 + (k - p.window_begin);
        }
        f.tiles = n_tiles;
        f.metadata_bytes = total;
    }

    /// An owned CUDA event (move-only).
    class event {
    public:
        event() { check(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming), "cudaEventCreateWithFlags"); }
        event(const event&) = delete;
        event& operator=(const event&) = delete;
        event(event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
        event& operator=(event&& o) noexcept {
            if (this != &o) {
                if (e_) (void)cudaEventDestroy(e_);
                e_ = std::exchange(o.e_, nullptr);
            }
            return *this;
        }
        ~event() {
            if (e_) (void)cudaEventDestroy(e_);
        }
        [[nodiscard]] cudaEvent_t get() const noexcept { return e_; }

    private:
        cudaEvent_t e_ = nullptr;
    };

    io::model_config config_;
    int sm_count_ = 0;  // multiprocessors of the device, for kernels::attention_splits
    index_t split_limit_ = kernels::max_attention_splits;  // set_attention_split_limit
    stream_context ctx_;
    gemm_engine gemm_;
    forward_profiler* profiler_ = nullptr;
    device_weights<T> weights_;
    // Work buffers, reused across forwards (grown when a forward needs more).
    device_buffer<float> x_, qkv_, gu_, cos_, sin_, logits_;
    device_buffer<float> att_part_;  // the attention splits' partial results (kernels::attention_combine)
    device_buffer<kv_element> k_win_, v_win_;
    device_buffer<T> xn_, att_, act_;
    pinned_buffer<std::byte> meta_host_;
    device_buffer<std::byte> meta_device_;
    event upload_done_;
    bool upload_pending_ = false;
};

/// The default: bf16 weights and product inputs; f32 keys, values and accumulation.
using transformer = basic_transformer<bf16>;
/// bf16 weights and a bf16 KV cache (half the cache's bytes; logits within bf16 rounding of transformer's).
using transformer_bf16_kv = basic_transformer<bf16, bf16>;

static_assert(language_model<transformer>);
static_assert(language_model<basic_transformer<float>>);
static_assert(language_model<transformer_bf16_kv>);
static_assert(model_reports_device_logits<transformer>, "the engine weighs the CUDA transformer's device logits rows before a batch joins");

}  // namespace dlm::cuda
