// dlm/cpu/transformer.hpp — the CPU transformer: LLaDA, Dream and Qwen2 by configuration.
//
//   auto model = dlm::cpu::transformer::load("path/to/model");   // config.json + *.safetensors
//   dlm::decoder<dlm::cpu::transformer, dlm::block_causal_mask, dlm::prefix_cache, ...> dec(model, ...);
//
// One pre-norm decoder for every supported family (see weights.hpp for the block). The attention
// mask is not a property of the model: it comes with every forward as the decoder's mask policy, so
// the same weights run bidirectionally (LLaDA, Dream), block-causally (CDLM) or causally (AR).
//
// Weights stay in their checkpoint's element type (f32, f16 or bf16; load_options converts on
// request), packed once for dlm's GEMM (gemm.hpp), whose kernels are picked for the CPU at run time
// (dispatch.hpp). Activations, norms and attention are f32; the KV cache is f32 or, on request,
// bf16 (load_options::kv_dtype, kv_cache.hpp). Every row's result is
// independent of the batch around it; with the row-wise norms and the fixed-order attention
// (attention.hpp) a sequence's logits are bit-identical alone or in a batch, for any thread count,
// and with or without an exact KV cache. Threads: OpenMP over column panels, rows and heads.
// A transformer is not safe to call from two threads at once (forward reuses its work buffers).
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <set>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "../core/separate.hpp"
#include "../io/model_config.hpp"
#include "../io/safetensors.hpp"
#include "../model/concept.hpp"
#include "../model/request_check.hpp"
#include "attention.hpp"
#include "gemm.hpp"
#include "gguf_source.hpp"
#include "memory.hpp"
#include "moe.hpp"
#include "ops.hpp"
#include "quant/random_source.hpp"
#include "weight_sources.hpp"
#include "weights.hpp"

namespace dlm::cpu {

class transformer {
public:
    using kv_cache = cpu::kv_cache;

    /// A transformer from in-memory f32 weights (tests, benchmarks), held as f32 unless `options`
    /// says otherwise. Throws invalid_parameter naming the config field or the weight
    /// ("weights.layers[1].k_proj") that does not fit.
    transformer(io::model_config config, const transformer_weights& w, const load_options& options = {});

    /// The model random_weights(config, seed, scale) describes, generated straight into `type`
    /// without an f32 copy: full-size shapes (LLaDA-8B, Dream-7B) for benchmarks.
    [[nodiscard]] static transformer random(io::model_config config, std::uint64_t seed, io::dtype type, float scale = 1.0f,
                                            bool check_memory = true);
    /// The same model in the GGUF block types llama.cpp gives a file of type `f` (quant/random_source.hpp),
    /// held in its blocks.
    [[nodiscard]] static transformer random(io::model_config config, std::uint64_t seed, quant::file_type f, float scale = 1.0f,
                                            bool check_memory = true);

    /// Loads a Hugging Face model folder (or its config.json; or a .safetensors file or an index,
    /// read with the config.json beside it: io::resolve_model_paths): config.json (and
    /// generation_config.json), then every tensor of model.safetensors or of a sharded
    /// checkpoint (f32, f16 or bf16), kept in its type unless options.weight_dtype converts it,
    /// packed a slice at a time from the memory-mapped file. Throws file_error / tensor_error naming
    /// the file and the tensor (a checkpoint holding a tensor the model does not use is refused), and
    /// memory_error, before allocating, if the weights do not fit in the available memory.
    /// A path ending in ".gguf" is loaded by load_gguf.
    [[nodiscard]] static transformer load(const std::filesystem::path& model_dir, const load_options& options = {});

    /// Loads a GGUF file as llama.cpp writes LLaDA and Dream (io/gguf_model.hpp): config from its
    /// metadata, every tensor through gguf_source (LLaDA's q/k rows un-permuted). Throws file_error
    /// naming the key, tensor_error naming the tensor (missing, misshapen, unused, or of a type dlm
    /// does not multiply), memory_error as load does.
    [[nodiscard]] static transformer load_gguf(const std::filesystem::path& file, const load_options& options = {});

    [[nodiscard]] const io::model_config& config() const noexcept { return config_; }
    [[nodiscard]] index_t vocab_size() const noexcept { return config_.vocab_size; }
    [[nodiscard]] token_id mask_id() const noexcept { return config_.mask_id; }
    [[nodiscard]] std::span<const token_id> eos_ids() const noexcept { return config_.eos_ids; }
    [[nodiscard]] bool logits_shift() const noexcept { return config_.logits_shift; }
    [[nodiscard]] index_t max_context() const noexcept { return config_.max_context; }

    /// Accumulate the time of the mixture-of-experts MLPs' phases into `t` (nullptr: stop).
    void time_experts(moe_timing* t) noexcept { moe_timing_ = t; }

    /// Bytes of the weights as held (packed matrices, norms, biases).
    [[nodiscard]] std::size_t weight_bytes() const noexcept { return weight_bytes_; }
    /// The element type of the matrices ("bf16"), or "mixed".
    [[nodiscard]] const std::string& weight_type() const noexcept { return weight_type_; }

    /// Parameters held (the head counted once when tied).
    [[nodiscard]] std::int64_t parameter_count() const noexcept {
        const std::int64_t h = config_.hidden_size, q = std::int64_t{config_.num_heads} * config_.head_dim,
                           kv = std::int64_t{config_.num_kv_heads} * config_.head_dim, f = config_.intermediate_size;
        const std::int64_t per_layer = h * (q + 2 * kv) + (config_.qkv_bias ? q + 2 * kv : 0) + (config_.qk_norm ? 2 * config_.head_dim : 0) +
                                       q * h + 3 * h * f + 2 * h;
        std::int64_t experts = 0;  // mixture-of-experts layers: router, bias, experts and shared MLP instead of the dense MLP
        if (const auto& m = config_.moe)
            for (index_t l = 0; l < config_.num_layers; ++l)
                if (m->is_moe_layer(l))
                    experts += std::int64_t{m->num_experts} * (h + 1 + 3 * h * m->expert_intermediate_size) + 3 * h * m->shared_intermediate_size -
                               3 * h * f;
        return std::int64_t{config_.vocab_size} * h * (config_.tie_word_embeddings ? 1 : 2) + config_.num_layers * per_layer + experts + h;
    }

    /// The element type of the K/V it computes and stores: f32 (the default), or bf16
    /// (load_options::kv_dtype; kv_cache.hpp: half the bytes, its own determinism class). Caches
    /// made before a change are refused by forward.
    [[nodiscard]] io::dtype kv_dtype() const noexcept { return kv_dtype_; }
    void set_kv_dtype(io::dtype e) {
        check_kv_element(e, "kv_dtype");
        kv_dtype_ = e;
    }

    /// A K/V store for `capacity` canvas positions, in kv_dtype().
    [[nodiscard]] kv_cache make_kv_cache(index_t capacity) const {
        constexpr index_t most = std::numeric_limits<index_t>::max() - 2 * panel_width;  // the cache pads each key row by a panel, bf16 positions to 32
        if (capacity < 0 || capacity > most)
            throw invalid_parameter("capacity", "must be in [0, " + std::to_string(most) + "], got " + std::to_string(capacity));
        const std::uint64_t bytes = kv_cache_bytes(capacity);
        if (bytes > weighed_above) check_fits("a KV cache of " + std::to_string(capacity) + " positions", bytes);
        return kv_cache(capacity, config_.num_layers, config_.num_kv_heads, config_.head_dim, kv_dtype_);
    }

    /// Bytes make_kv_cache(capacity) holds (the prompt cache's bound, dlm/cache/prompt_cache.hpp).
    [[nodiscard]] std::uint64_t kv_cache_bytes(index_t capacity) const noexcept {
        return kv_cache::bytes_for(capacity, config_.num_layers, config_.num_kv_heads, config_.head_dim, kv_dtype_);
    }
    /// The host bytes its forward work buffers need for a forward whose windows hold `rows` rows (the
    /// activations, the rotary tables, the window K/V as one window: each request's is rounded to whole
    /// 32-position runs apart; the MoE layers' one moe_work), and what they hold now: the engine weighs
    /// them (model_reports_work_bytes). Thread buffers (the products' packed activations, the experts'
    /// MLP activations) are not counted.
    [[nodiscard]] std::uint64_t work_bytes(index_t rows) const noexcept {
        const index_t n = std::max<index_t>(rows, 0);
        const auto r = static_cast<std::uint64_t>(n);
        std::uint64_t moe = 0;  // one moe_work for every MoE layer: the largest need of any
        for (const layer& L : layers_)
            if (L.moe) moe = std::max(moe, L.moe->work_bytes(n));
        return (activation_floats(r) + r * static_cast<std::uint64_t>(config_.head_dim)) * sizeof(float) +
               window_kv::of(kv_dtype_, 0, n, config_.head_dim).bytes(config_.num_kv_heads) + moe;
    }
    [[nodiscard]] std::uint64_t work_bytes_held() const noexcept {
        std::uint64_t floats = cos_.capacity() + sin_.capacity();
        for (const buffer* b : {&x_, &xn_, &tmp_, &qkv_, &att_, &gu_, &act_}) floats += b->capacity();
        return floats * sizeof(float) + window_store_.capacity() + moe_work_.bytes_held();
    }
    /// Copies stored K/V between two of this model's stores (cpu::copy_kv; the prompt cache's hook).
    void copy_kv(const kv_cache& src, index_t src_begin, kv_cache& dst, index_t dst_begin, index_t count) const {
        cpu::copy_kv(src, src_begin, dst, dst_begin, count);
    }

    /// One batched forward (see dlm::forward_request and dlm::forward_plan): hidden states of each
    /// request's window rows, attention over [0, min(attend_end, mask.key_end(q))) with
    /// mask.allowed evaluated inline (window keys fresh, the others from the cache), fresh K/V of
    /// [store_begin, store_end) written to the cache, and the logits of rows
    /// [logits_begin, logits_end), requests in order, into `logits`.
    ///
    /// A large batch runs as consecutive groups of whole requests of about group_rows() rows: every
    /// row's result is the same (each row is computed alone), and a group's activations stay in the
    /// core's cache through all layers instead of streaming from memory at every operation.
    template <attention_mask Mask>
    void forward(std::span<const forward_request<kv_cache>> requests, const Mask& mask, std::span<float> logits) {
        const std::size_t n = requests.size();
        std::size_t logit_rows = 0;
        for (std::size_t i = 0; i < n; ++i) {
            validate(requests[i], i);
            check_cached_keys(requests[i], mask, i);
            logit_rows += static_cast<std::size_t>(requests[i].plan.logits_rows());
        }
        const std::size_t vocab = static_cast<std::size_t>(config_.vocab_size);
        if (logits.size() != logit_rows * vocab)
            throw contract_error("cpu::transformer::forward: logits holds " + std::to_string(logits.size()) + " floats, the plans ask for " +
                                 std::to_string(logit_rows) + " rows of " + std::to_string(vocab));
        const index_t most = group_rows();
        std::size_t begin = 0, logits_at = 0;
        while (begin < n) {
            std::size_t end = begin + 1, group_logits = static_cast<std::size_t>(requests[begin].plan.logits_rows());
            for (index_t rows = requests[begin].plan.window_size(); end < n && rows + requests[end].plan.window_size() <= most; ++end) {
                rows += requests[end].plan.window_size();
                group_logits += static_cast<std::size_t>(requests[end].plan.logits_rows());
            }
            forward_group(requests.subspan(begin, end - begin), mask, logits.subspan(logits_at * vocab, group_logits * vocab));
            begin = end;
            logits_at += group_logits;
        }
    }

    /// Rows of one group of a batched forward: as many as keep a row's activations (about
    /// 7 hidden + 3 ffn floats) within 2 MiB, a core's L2 on current x86 servers, and never fewer
    /// than 256, so that a large model's weights are still read once for many rows.
    [[nodiscard]] index_t group_rows() const noexcept {
        const std::size_t row_bytes = sizeof(float) * (7 * static_cast<std::size_t>(config_.hidden_size) +
                                                       3 * static_cast<std::size_t>(config_.intermediate_size));
        return static_cast<index_t>(std::max<std::size_t>(256, (std::size_t{1} << 21) / std::max<std::size_t>(1, row_bytes)));
    }

private:
    /// forward() for one group of requests, already validated.
    template <attention_mask Mask>
    void forward_group(std::span<const forward_request<kv_cache>> requests, const Mask& mask, std::span<float> logits) {
        const std::size_t n = requests.size();
        std::vector<index_t> row0(n + 1, 0);
        std::size_t logit_rows = 0;
        for (std::size_t i = 0; i < n; ++i) {
            row0[i + 1] = row0[i] + requests[i].plan.window_size();
            logit_rows += static_cast<std::size_t>(requests[i].plan.logits_rows());
        }
        const std::size_t vocab = static_cast<std::size_t>(config_.vocab_size);
        const index_t m = row0[n];
        if (m == 0) return;

        const index_t hidden = config_.hidden_size, ffn = config_.intermediate_size;
        const head_geometry hg = geometry();
        const std::ptrdiff_t qkv_ld = hg.qkv_ld;
        resize_work(m, requests);

        // Embedding and rotary tables of every window row.
        std::vector<index_t> positions(static_cast<std::size_t>(m));
        for (std::size_t i = 0; i < n; ++i)
            for (index_t j = 0; j < requests[i].plan.window_size(); ++j) {
                const index_t pos = requests[i].plan.window_begin + j;
                positions[static_cast<std::size_t>(row0[i] + j)] = pos;
                const token_id tok = requests[i].canvas[static_cast<std::size_t>(pos)];
                embedding().row(tok, x_.data() + (row0[i] + j) * std::ptrdiff_t{hidden});
            }
        rope_.tables(positions, cos_, sin_);

        std::vector<attention_task> tasks;
        constexpr index_t rows_per_task = 32;
        for (std::size_t i = 0; i < n; ++i)
            for (index_t h = 0; h < config_.num_heads; ++h)
                for (index_t r = 0; r < requests[i].plan.window_size(); r += rows_per_task)
                    tasks.push_back({static_cast<index_t>(i), h, r, std::min(requests[i].plan.window_size(), r + rows_per_task)});

        const float eps = static_cast<float>(config_.rms_norm_eps);
        for (index_t l = 0; l < config_.num_layers; ++l) {
            const layer& L = layers_[static_cast<std::size_t>(l)];
            rms_norm(m, hidden, x_.data(), hidden, L.attn_norm.data(), eps, xn_.data(), hidden);
            linear(m, xn_.data(), hidden, L.qkv, qkv_.data(), qkv_ld);
            if (!L.qkv_bias.empty()) add_bias(m, qkv_.data(), qkv_ld, L.qkv_bias);
            if (!L.q_norm.empty()) head_norms(m, L, eps);
            rope_.apply(m, qkv_.data(), qkv_ld, config_.num_heads + config_.num_kv_heads, cos_.data(), sin_.data());
            run_attention(requests, mask, row0, l, tasks);
            linear(m, att_.data(), hg.out_ld, L.o, tmp_.data(), hidden);
            add_rows(m, hidden, x_.data(), hidden, tmp_.data(), hidden);
            rms_norm(m, hidden, x_.data(), hidden, L.mlp_norm.data(), eps, xn_.data(), hidden);
            if (L.moe) {
                L.moe->forward(m, xn_.data(), hidden, tmp_.data(), moe_timing_, moe_work_);
            } else {
                linear(m, xn_.data(), hidden, L.gate_up, gu_.data(), 2 * std::ptrdiff_t{ffn});
                silu_gate(m, ffn, gu_.data(), 2 * std::ptrdiff_t{ffn}, act_.data(), ffn);
                linear(m, act_.data(), ffn, L.down, tmp_.data(), hidden);
            }
            add_rows(m, hidden, x_.data(), hidden, tmp_.data(), hidden);
        }
        for (const auto& rq : requests)
            if (rq.plan.stores()) std::fill(rq.cache->stored.begin() + rq.plan.store_begin, rq.cache->stored.begin() + rq.plan.store_end, 1);

        // Final norm and head, only for the rows whose logits are asked for.
        if (logit_rows == 0) return;
        std::size_t z = 0;
        for (std::size_t i = 0; i < n; ++i) {
            const forward_plan& p = requests[i].plan;
            for (index_t r = p.logits_begin; r < p.logits_end; ++r, ++z)
                rms_norm(1, hidden, x_.data() + (row0[i] + r - p.window_begin) * std::ptrdiff_t{hidden}, hidden, final_norm_.data(), eps,
                         xn_.data() + static_cast<std::ptrdiff_t>(z) * hidden, hidden);
        }
        linear(static_cast<index_t>(logit_rows), xn_.data(), hidden, head(), logits.data(), static_cast<std::ptrdiff_t>(vocab));
    }

    struct layer {
        std::vector<float> attn_norm, mlp_norm, qkv_bias, q_norm, k_norm;  // q/k norms: [head_dim] or empty
        packed_matrix qkv, o, gate_up, down;  // q|k|v stacked; gate|up stacked
        mutable std::optional<moe_mlp> moe;  // a mixture-of-experts layer's MLP (then gate_up and down are empty)
    };
    using buffer = std::vector<float, aligned_allocator<float>>;

    explicit transformer(io::model_config c) : config_(std::move(c)) { check_config(); }

    void check_config() const { io::check_model_config(config_); }

    /// How a (stacked) matrix of `parts` (role, rows) is held: in GGUF blocks when the source has
    /// them in block types dlm multiplies and no type was requested; else in the requested type,
    /// else the parts' stored type, else (parts stored in different types) f32.
    template <class Source>
    weight_layout held_type(Source& src, const load_options& opt, std::initializer_list<std::pair<tensor_role, std::int64_t>> parts,
                            index_t l) const {
        // Every part's stored type first, requested type or not: the sources check each shape there,
        // so a config the file does not hold is refused before build() allocates anything for it.
        const io::dtype first = src.dtype(parts.begin()->first, l);
        bool same = true;
        for (auto [r, rows] : parts) same = src.dtype(r, l) == first && same;
        if (opt.weight_dtype) return {*opt.weight_dtype, {}};
        if constexpr (requires { src.quant_type(tensor_role::q_proj, l); }) {
            std::vector<quant::part_spec> blocks;
            for (auto [r, rows] : parts)
                if (const auto t = src.quant_type(r, l); t && quant::has_kernel(*t) && rows <= std::numeric_limits<index_t>::max())
                    blocks.push_back({static_cast<index_t>(rows), *t});
            if (blocks.size() == parts.size()) return {io::dtype::f32, blocks};
        }
        return {same ? first : io::dtype::f32, {}};
    }

    /// Fills the layers from `src` (weight_sources.hpp) in the order random_source generates them.
    /// Checks first that the weights fit in the available memory (options.check_memory).
    template <class Source>
    void build(Source& src, const load_options& opt) {
        set_kv_dtype(opt.kv_dtype);
        const io::model_config& c = config_;
        // Shapes in 64 bits: a product of config sizes may pass 2^31, and must be counted, not wrapped.
        const std::int64_t h = c.hidden_size, q = std::int64_t{c.num_heads} * c.head_dim, kv = std::int64_t{c.num_kv_heads} * c.head_dim,
                           f = c.intermediate_size;
        using R = tensor_role;
        using detail::saturating_add, detail::saturating_mul;
        // Types and bytes first: nothing is allocated for a model that cannot fit.
        const weight_layout t_emb = held_type(src, opt, {{R::embedding, c.vocab_size}}, 0);
        const weight_layout t_head = c.tie_word_embeddings ? t_emb : held_type(src, opt, {{R::lm_head, c.vocab_size}}, 0);
        std::vector<weight_layout> t_qkv, t_o, t_gu, t_down;
        std::uint64_t bytes = saturating_add(packed_matrix::bytes_for(c.vocab_size, h, t_emb),
                                             c.tie_word_embeddings ? 0 : packed_matrix::bytes_for(c.vocab_size, h, t_head));
        std::set<std::string> types{t_emb.name(), t_head.name()};
        for (index_t l = 0; l < c.num_layers; ++l) {
            t_qkv.push_back(held_type(src, opt, {{R::q_proj, q}, {R::k_proj, kv}, {R::v_proj, kv}}, l));
            t_o.push_back(held_type(src, opt, {{R::o_proj, h}}, l));
            const bool experts = c.moe && c.moe->is_moe_layer(l);  // no dense MLP: cpu/moe.hpp's experts
            t_gu.push_back(experts ? t_o.back() : held_type(src, opt, {{R::gate_proj, f}, {R::up_proj, f}}, l));
            t_down.push_back(experts ? t_o.back() : held_type(src, opt, {{R::down_proj, h}}, l));
            const std::uint64_t mlp = experts ? moe_bytes(src, c, l, opt)
                                              : saturating_add(packed_matrix::bytes_for(2 * f, h, t_gu.back()), packed_matrix::bytes_for(h, f, t_down.back()));
            const auto vectors = static_cast<std::uint64_t>(2 * h + (c.qkv_bias ? q + 2 * kv : 0) + (c.qk_norm ? 2 * std::int64_t{c.head_dim} : 0));
            for (const std::uint64_t b : {packed_matrix::bytes_for(q + 2 * kv, h, t_qkv.back()), packed_matrix::bytes_for(h, q, t_o.back()), mlp,
                                          saturating_mul(sizeof(float), vectors)})
                bytes = saturating_add(bytes, b);
            types.insert({t_qkv.back().name(), t_o.back().name(), t_gu.back().name(), t_down.back().name()});
        }
        bytes = saturating_add(bytes, sizeof(float) * static_cast<std::uint64_t>(h));
        weight_bytes_ = bytes;
        weight_type_ = types.size() == 1 ? *types.begin() : "mixed";
        // Only f32 weights have a narrower type to suggest; bf16, f16 and GGUF blocks do not.
        if (opt.check_memory)
            check_fits("the model's weights (" + weight_type_ + ", " + std::to_string(c.num_layers) + " layers)", bytes,
                       types.contains("f32") ? "hold them in a narrower type (load_options::weight_dtype, dlm-generate --dtype bf16) or free memory"
                                             : "free memory, or load a quantized GGUF file of the model (docs/models.md, \"GGUF files\")");
        check_rows_fit(q + 2 * kv, 2 * f);
        // The rotary table (head_dim / 2 floats) once the tensors have vouched for the head size: a
        // config's d_model of 2^31 - 2 over 1 head took 4 GB here before its embedding was refused.
        rope_ = rotary(config_.head_dim, config_.rope_theta, config_.rotary_dim);
        build_layers(src, opt, t_emb, t_head, t_qkv, t_o, t_gu, t_down);
    }

    /// The stacked matrices' rows are indexed in 32 bits: a config whose q/k/v or gate/up rows pass
    /// 2^31 - 1 is refused by name (when the memory check is off, or the machine has the memory).
    void check_rows_fit(std::int64_t qkv_rows, std::int64_t gate_up_rows) const {
        constexpr std::int64_t most = std::numeric_limits<index_t>::max();
        if (qkv_rows > most)
            throw invalid_parameter("config.num_heads", "(num_heads + 2 num_kv_heads) x head_dim = " + std::to_string(qkv_rows) + " rows pass " +
                                                            std::to_string(most) + ", the most a matrix dlm holds can index");
        if (gate_up_rows > most)
            throw invalid_parameter("config.intermediate_size", "2 x intermediate_size = " + std::to_string(gate_up_rows) + " rows pass " +
                                                                    std::to_string(most) + ", the most a matrix dlm holds can index");
    }

    /// Allocates and fills the layers in the types build() chose and checked.
    template <class Source>
    void build_layers(Source& src, const load_options& opt, const weight_layout& t_emb, const weight_layout& t_head, const std::vector<weight_layout>& t_qkv,
                      const std::vector<weight_layout>& t_o, const std::vector<weight_layout>& t_gu, const std::vector<weight_layout>& t_down) {
        const io::model_config& c = config_;
        const index_t h = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim, f = c.intermediate_size;
        using R = tensor_role;

        std::vector<float> buf;
        std::uint64_t done = 0;
        embedding_ = packed_matrix(c.vocab_size, h, t_emb);
        fill_rows<panel_width>(embedding_, src, R::embedding, 0, 0, c.vocab_size, buf);
        report_loaded(opt, done, embedding_.bytes(), weight_bytes_);
        layers_.resize(static_cast<std::size_t>(c.num_layers));
        for (index_t l = 0; l < c.num_layers; ++l) {
            const auto li = static_cast<std::size_t>(l);
            layer& L = layers_[li];
            L.attn_norm = read_vector(src, R::attn_norm, l, h);
            L.qkv = packed_matrix(q + 2 * kv, h, t_qkv[li]);
            fill_rows<panel_width>(L.qkv, src, R::q_proj, l, 0, q, buf);
            fill_rows<panel_width>(L.qkv, src, R::k_proj, l, q, kv, buf);
            fill_rows<panel_width>(L.qkv, src, R::v_proj, l, q + kv, kv, buf);
            if (c.qkv_bias) {
                L.qkv_bias = read_vector(src, R::q_bias, l, q);
                for (R r : {R::k_bias, R::v_bias}) {
                    const std::vector<float> b = read_vector(src, r, l, kv);
                    L.qkv_bias.insert(L.qkv_bias.end(), b.begin(), b.end());
                }
            }
            if (c.qk_norm) {
                L.q_norm = read_vector(src, R::q_norm, l, c.head_dim);
                L.k_norm = read_vector(src, R::k_norm, l, c.head_dim);
            }
            L.o = packed_matrix(h, q, t_o[li]);
            fill_rows<panel_width>(L.o, src, R::o_proj, l, 0, h, buf);
            L.mlp_norm = read_vector(src, R::mlp_norm, l, h);
            if (c.moe && c.moe->is_moe_layer(l)) {  // experts instead of a dense MLP (cpu/moe.hpp)
                L.moe.emplace(load_moe(src, c, l, opt));
            } else {
                L.gate_up = packed_matrix(2 * f, h, t_gu[li]);
                fill_rows<panel_width>(L.gate_up, src, R::gate_proj, l, 0, f, buf);
                fill_rows<panel_width>(L.gate_up, src, R::up_proj, l, f, f, buf);
                L.down = packed_matrix(h, f, t_down[li]);
                fill_rows<panel_width>(L.down, src, R::down_proj, l, 0, h, buf);
            }
            report_loaded(opt, done, L.qkv.bytes() + L.o.bytes() + (L.moe ? L.moe->bytes() : L.gate_up.bytes() + L.down.bytes()), weight_bytes_);
        }
        final_norm_ = read_vector(src, R::final_norm, 0, h);
        if (!c.tie_word_embeddings) {
            head_ = packed_matrix(c.vocab_size, h, t_head);
            fill_rows<panel_width>(head_, src, R::lm_head, 0, 0, c.vocab_size, buf);
        }
        report_loaded(opt, done, weight_bytes_, weight_bytes_);  // the head and the vectors: done == total
    }

    /// The embedding table (the head's matrix when tied).
    [[nodiscard]] const packed_matrix& embedding() const noexcept { return embedding_; }
    /// The output head (the embedding when tied).
    [[nodiscard]] const packed_matrix& head() const noexcept { return config_.tie_word_embeddings ? embedding_ : head_; }

    [[nodiscard]] head_geometry geometry() const noexcept {
        head_geometry hg;
        hg.heads = config_.num_heads;
        hg.kv_heads = config_.num_kv_heads;
        hg.head_dim = config_.head_dim;
        hg.qkv_ld = static_cast<std::ptrdiff_t>(config_.num_heads + 2 * config_.num_kv_heads) * config_.head_dim;
        hg.out_ld = static_cast<std::ptrdiff_t>(config_.num_heads) * config_.head_dim;
        return hg;
    }

    void validate(const forward_request<kv_cache>& rq, std::size_t i) const {
        dlm::detail::check_request(rq, i, {config_.num_layers, config_.num_kv_heads, config_.head_dim, config_.vocab_size}, "cpu::transformer::forward");
        if (rq.cache && rq.cache->element() != kv_dtype_)
            throw contract_error("cpu::transformer::forward: request " + std::to_string(i) + ": its KV cache holds " + kv_element_name(rq.cache->element()) +
                                 ", the model computes " + kv_element_name(kv_dtype_) + " K/V (make caches after set_kv_dtype)");
    }

    /// Floats of the activation buffers (x_ ... act_) over `rows` rows.
    [[nodiscard]] std::uint64_t activation_floats(std::uint64_t rows) const noexcept {
        const head_geometry hg = geometry();
        const auto h = static_cast<std::uint64_t>(config_.hidden_size), f = static_cast<std::uint64_t>(config_.intermediate_size);
        return rows * (3 * h + static_cast<std::uint64_t>(hg.qkv_ld + hg.out_ld) + 3 * f);
    }

    void resize_work(index_t m, std::span<const forward_request<kv_cache>> requests) {
        const head_geometry hg = geometry();
        const auto rows = static_cast<std::size_t>(m);
        const auto h = static_cast<std::size_t>(config_.hidden_size), f = static_cast<std::size_t>(config_.intermediate_size);
        const std::size_t floats = static_cast<std::size_t>(activation_floats(rows));
        if (floats > x_.capacity() + xn_.capacity() + tmp_.capacity() + qkv_.capacity() + att_.capacity() + gu_.capacity() + act_.capacity()) {
            for (buffer* b : {&x_, &xn_, &tmp_, &qkv_, &att_, &gu_, &act_}) buffer().swap(*b);  // scratch: freed before the larger ones
            if (floats * sizeof(float) > weighed_above)
                check_fits("the activations of a forward of " + std::to_string(m) + " rows", floats * sizeof(float), "fewer or shorter sequences at once");
        }
        x_.resize(rows * h);
        xn_.resize(rows * h);
        tmp_.resize(rows * h);
        qkv_.resize(rows * static_cast<std::size_t>(hg.qkv_ld));
        att_.resize(rows * static_cast<std::size_t>(hg.out_ld));
        gu_.resize(rows * 2 * f);
        act_.resize(rows * f);
        lay_out_windows(requests, hg.kv_heads, hg.head_dim, kv_dtype_, window_store_, windows_);
    }

    /// Qwen3's q/k norms: RMSNorm over each head of q and of k (in place, before RoPE).
    void head_norms(index_t m, const layer& L, float eps) {
        const head_geometry hg = geometry();
        for (index_t hd = 0; hd < hg.heads + hg.kv_heads; ++hd) {
            float* at = qkv_.data() + static_cast<std::ptrdiff_t>(hd) * hg.head_dim;
            rms_norm(m, hg.head_dim, at, hg.qkv_ld, (hd < hg.heads ? L.q_norm : L.k_norm).data(), eps, at, hg.qkv_ld);
        }
    }

    void add_bias(index_t m, float* y, std::ptrdiff_t ld, const std::vector<float>& bias) const {
        for_rows(m, static_cast<double>(bias.size()), [&](index_t r) {
            float* row = y + r * ld;
            for (std::size_t j = 0; j < bias.size(); ++j) row[j] += bias[j];
        });
    }

    template <attention_mask Mask>
    void run_attention(std::span<const forward_request<kv_cache>> requests, const Mask& mask, const std::vector<index_t>& row0, index_t l,
                       const std::vector<attention_task>& tasks) {
        const head_geometry hg = geometry();
        const long n = static_cast<long>(requests.size());
        const long kv_jobs = n * hg.kv_heads;
        [[maybe_unused]] const bool parallel_copy = kv_jobs > 1 && static_cast<double>(row0.back()) * hg.kv_dim() > 1e5;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (parallel_copy)
#endif
        for (long j = 0; j < kv_jobs; ++j) {
            const auto i = static_cast<std::size_t>(j / hg.kv_heads);
            const auto& rq = requests[i];
            gather_window_kv(hg, qkv_.data() + row0[i] * hg.qkv_ld, rq.plan, windows_[i], rq.cache, l, static_cast<index_t>(j % hg.kv_heads));
        }
        const long count = static_cast<long>(tasks.size());
        double work = 0;  // multiply-adds of the scores and the weighted values
        for (std::size_t i = 0; i < requests.size(); ++i) work += 2.0 * (row0[i + 1] - row0[i]) * requests[i].plan.attend_end * hg.q_dim();
        [[maybe_unused]] const bool parallel = count > 1 && work > 1e6;
#if defined(_OPENMP)
#pragma omp parallel if (parallel)
#endif
        {
            buffer scratch;
#if defined(_OPENMP)
#pragma omp for schedule(dynamic)
#endif
            for (long t = 0; t < count; ++t) {
                const attention_task& task = tasks[static_cast<std::size_t>(t)];
                const auto i = static_cast<std::size_t>(task.request);
                const auto& rq = requests[i];
                attend(mask, rq.layout, rq.plan, hg, qkv_.data() + row0[i] * hg.qkv_ld, windows_[i], rq.cache, l, task,
                       att_.data() + row0[i] * hg.out_ld, scratch);
            }
        }
    }

    io::model_config config_;
    packed_matrix embedding_;  // also the head when tied
    std::vector<layer> layers_;
    std::vector<float> final_norm_;
    packed_matrix head_;  // empty when tied
    std::size_t weight_bytes_ = 0;
    io::dtype kv_dtype_ = io::dtype::f32;
    std::string weight_type_;
    rotary rope_;
    // Work buffers, reused across forwards.
    buffer x_, xn_, tmp_, qkv_, att_, gu_, act_;
    std::vector<std::byte, aligned_allocator<std::byte>> window_store_;
    std::vector<float> cos_, sin_;
    std::vector<window_kv> windows_;
    moe_work moe_work_;  // every MoE layer's, in turn
    moe_timing* moe_timing_ = nullptr;
};

#if DLM_SEPARATE_BODIES
DLM_SEPARATE_INLINE transformer::transformer(io::model_config config, const transformer_weights& w, const load_options& options)
    : transformer(std::move(config)) {
    memory_source src(w, config_);
    build(src, options);
}

DLM_SEPARATE_INLINE transformer transformer::random(io::model_config config, std::uint64_t seed, io::dtype type, float scale, bool check_memory) {
    transformer t(std::move(config));
    random_source src(t.config_, seed, type, scale);
    t.build(src, {.weight_dtype = type, .check_memory = check_memory});
    return t;
}

DLM_SEPARATE_INLINE transformer transformer::random(io::model_config config, std::uint64_t seed, quant::file_type f, float scale, bool check_memory) {
    transformer t(std::move(config));
    quant::random_quant_source src(t.config_, seed, f, scale);
    t.build(src, {.weight_dtype = std::nullopt, .check_memory = check_memory});
    return t;
}

DLM_SEPARATE_INLINE transformer transformer::load(const std::filesystem::path& model_dir, const load_options& options) {
    if (io::is_gguf_path(model_dir)) return load_gguf(model_dir, options);
    const io::model_paths where = io::resolve_model_paths(model_dir);
    transformer t(io::load_config(where.folder));
    const io::checkpoint ck = io::checkpoint::open(where.checkpoint);
    checkpoint_source src(ck, t.config_);
    t.build(src, options);
    dlm::accept_unused_buffers(ck, t.config_);
    ck.check_all_read();
    return t;
}

DLM_SEPARATE_INLINE transformer transformer::load_gguf(const std::filesystem::path& file, const load_options& options) {
    const io::gguf_file f = io::gguf_file::open(file);
    transformer t(io::gguf_model_config(f.header()));
    gguf_source src(f, t.config_);
    src.check_all_used();
    t.build(src, options);
    return t;
}
#endif  // DLM_SEPARATE_BODIES

static_assert(language_model<transformer>);

}  // namespace dlm::cpu
