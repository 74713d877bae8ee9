// dlm/cpu/diffusion_gemma.hpp — DiffusionGemma (Google, 2026; transformers'
// DiffusionGemmaForBlockDiffusion) on the CPU: one Gemma 4 mixture-of-experts backbone run in two
// modes.
//
//   auto m = dlm::cpu::diffusion_gemma::load("path/to/folder");
//   auto ctx = m.new_context(1024);
//   m.encode(ctx, prompt);                                  // causal; writes every layer's K/V
//   m.decode(ctx, canvas, nullptr, logits);                 // the canvas, bidirectionally, reading ctx
//   m.decode(ctx, canvas2, sc_logits.data(), logits);       // with self-conditioning
//   m.encode(ctx, final_canvas);                            // the next block's context
//
// encode: the committed tokens, causally (a sliding layer's query sees the `sliding_window`
//   positions up to itself), storing each layer's keys and values; as DiffusionGemmaEncoderModel.
// decode: the canvas (canvas_length random or partly accepted tokens) attends to itself fully and to
//   the context: every stored position on a full layer, the last sliding_window − 1 on a sliding one
//   (what transformers' DynamicCache keeps for it); nothing is stored. Its input embeddings pass the
//   self-conditioning block (the previous step's processed logits, softmax-weighted into embeddings,
//   through a gated MLP, added, then normed); the output is the tied head's logits, soft-capped
//   (tanh(l / c) · c). As DiffusionGemmaDecoderModel + the head of DiffusionGemmaForBlockDiffusion.
// A block (both modes): input norm → attention (q/k RMSNorm with weights, v RMSNorm without, scaling
//   1, rotary per layer type: default on sliding layers, proportional on full ones, whose values are
//   their raw keys) → post-attention norm, residual; then a dense GELU MLP and the experts side by side
//   (the router on the residual stream, the experts on its own norm), each post-normed, summed,
//   post-normed, residual; times the mode's layer_scalar.
// Activations, norms, attention and the context are f32; matrices in their stored type through dlm's
// GEMM. Row results do not depend on other rows or the thread count. Not safe from two threads at once.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/error.hpp"
#include "../core/separate.hpp"
#include "../io/diffusion_gemma_config.hpp"
#include "../mask/masks.hpp"
#include "../model/concept.hpp"
#include "diffusion_gemma_gguf.hpp"
#include "diffusion_gemma_random.hpp"
#include "diffusion_gemma_weights.hpp"
#include "attention.hpp"
#include "ops.hpp"

namespace dlm::cpu {

/// A sequence's encoded context: what each layer's encoder stored for positions [0, length). A full
/// layer keeps every position; a sliding layer only the last sliding_window − 1, all any later query
/// reads, in a ring: position p in slot p mod slots[layer].
struct gemma_context {
    index_t length = 0, capacity = 0;
    std::vector<index_t> slots;                    ///< per layer: positions held (capacity, or the window's)
    std::vector<std::vector<float>> keys, values;  ///< per layer: [kv_heads][slots][head_dim]
    /// Bytes of the stored keys and values.
    [[nodiscard]] std::uint64_t bytes() const noexcept {
        std::uint64_t b = 0;
        for (std::size_t l = 0; l < keys.size(); ++l) b += (keys[l].size() + values[l].size()) * sizeof(float);
        return b;
    }
};

/// Seconds spent in each phase of DiffusionGemma's forwards while timed (diffusion_gemma::time_phases).
struct gemma_timing {
    double encoder = 0;            ///< the encoder over stored rows (prompt, final canvases), all of it
    double projections = 0;        ///< decoder: q/k/v and output projections, norms and rotary
    double attention = 0;          ///< decoder: scores and weighted values over context and canvas
    double dense_mlp = 0;          ///< decoder: the dense GELU MLP beside the experts
    double experts = 0;            ///< decoder: router and experts
    double self_conditioning = 0;  ///< decoder: softmax-weighted embeddings and the gated MLP
    double head = 0;               ///< decoder: final norm, the tied head over the vocabulary, soft-capping
    std::int64_t decodes = 0;
    [[nodiscard]] double total() const noexcept { return encoder + projections + attention + dense_mlp + experts + self_conditioning + head; }
};

class diffusion_gemma {
public:
    using config_type = io::diffusion_gemma_config;

    /// Loads a DiffusionGemma folder (config.json + model.safetensors or shards; or a path inside it
    /// that io::resolve_model_paths accepts), or a .gguf file of llama.cpp's diffusion-gemma
    /// architecture (cpu/diffusion_gemma_gguf.hpp). Throws file_error
    /// naming a config key, tensor_error naming a tensor, memory_error before allocating.
    [[nodiscard]] static diffusion_gemma load(const std::filesystem::path& folder, const load_options& opt = {});

    /// The model of config `c` with random weights held as `spec` says (cpu/diffusion_gemma_random.hpp):
    /// full-size shapes for benchmarks. Throws memory_error before allocating.
    [[nodiscard]] static diffusion_gemma random(config_type c, std::uint64_t seed, weight_spec spec, float scale = 1.0f);

    /// Where decoding time goes (benchmarks): seconds per phase while `t` is set; null stops timing.
    void time_phases(gemma_timing* t) noexcept { timing_ = t; }

    [[nodiscard]] const config_type& config() const noexcept { return c_; }
    [[nodiscard]] index_t vocab_size() const noexcept { return c_.vocab_size; }
    [[nodiscard]] index_t canvas_length() const noexcept { return c_.canvas_length; }
    [[nodiscard]] std::span<const token_id> eos_ids() const noexcept { return c_.eos_ids; }
    [[nodiscard]] std::size_t weight_bytes() const noexcept { return w_.bytes; }

    // dlm::language_model: the engine decodes it with block_causal_mask{canvas_length}, prefix_cache
    // (the encoder stores the prompt, then each final canvas, in the forward of the next block's first
    // step) and a uniform-state schedule (entropy_bound_schedule); presets::diffusion_gemma.
    using kv_cache = gemma_context;
    static constexpr bool self_conditioning = true;
    static constexpr bool uniform_state = true;  ///< trained to denoise uniform noise: uniform-state presets only (registry)
    /// "f32", "bf16" or "f16": the embedding's type (the other matrices follow the same load option);
    /// random weights in GGUF blocks: their file type ("q4_k_m").
    [[nodiscard]] const std::string& weight_type() const noexcept { return w_.held; }
    /// No mask token: the pad id marks slots of blocks not yet active (the active block holds noise).
    [[nodiscard]] token_id mask_id() const noexcept { return c_.pad_id >= 0 && c_.pad_id < c_.vocab_size ? c_.pad_id : 0; }
    [[nodiscard]] bool logits_shift() const noexcept { return false; }
    [[nodiscard]] index_t max_context() const noexcept { return c_.max_context; }
    [[nodiscard]] kv_cache make_kv_cache(index_t capacity) const { return new_context(capacity); }
    /// Blocks of canvas_length (config.json), one canvas generated by default (the reference's max_new_tokens 256).
    [[nodiscard]] dlm::decoding_hints decoding_hints() const {
        dlm::decoding_hints h;
        h.block_length = {c_.canvas_length, "config.json canvas_length"};
        h.gen_length = {c_.canvas_length, "config.json canvas_length (one canvas)"};
        h.mask_id_origin = "DiffusionGemma has no mask token: text_config.pad_token_id marks slots of blocks not yet active";
        h.eos_ids_origin = "text_config.eos_token_id";
        return h;
    }

    /// The engine's forward: for each request, the rows the plan stores (the prompt, or the canvas
    /// just made final; positions continuing the context) through the encoder, then the active
    /// block's rows (the whole canvas) through the decoder with the request's self-conditioning
    /// logits. Throws dlm::contract_error for a plan of another shape (another mask or cache).
    template <attention_mask Mask>
    void forward(std::span<const forward_request<kv_cache>> requests, const Mask&, std::span<float> logits) {
        static_assert(std::is_same_v<Mask, block_causal_mask>,
                      "dlm::cpu::diffusion_gemma: its attention is its own (a causal encoder, a bidirectional canvas over the "
                      "context); decode it with block_causal_mask{canvas_length} and prefix_cache (presets::diffusion_gemma).");
        const auto v = static_cast<std::size_t>(c_.vocab_size);
        std::size_t at = 0;
        for (const forward_request<kv_cache>& rq : requests) {
            const forward_plan& p = rq.plan;
            const bool shaped = rq.cache && p.window_begin == (p.stores() ? p.store_begin : p.logits_begin) && p.window_end == p.logits_end &&
                                (!p.stores() || (p.store_end == p.logits_begin && p.store_begin == rq.cache->length));
            if (!shaped)
                throw contract_error("cpu::diffusion_gemma::forward: a plan must store the positions after its context (if any), then "
                                     "read one whole block (block_causal_mask and prefix_cache give such plans)");
            if (p.stores()) {
                const auto prompt_end = std::min(p.store_end, rq.layout.prompt_length);
                if (p.store_begin < prompt_end) check_tokens(rq.canvas.subspan(static_cast<std::size_t>(p.store_begin), static_cast<std::size_t>(prompt_end - p.store_begin)), "prompt", true);
                check_room(*rq.cache, p.store_end - p.store_begin, "the canvas");
                run_encoder(*rq.cache, rq.canvas.subspan(static_cast<std::size_t>(p.store_begin), static_cast<std::size_t>(p.store_end - p.store_begin)));
            }
            const auto rows = static_cast<std::size_t>(p.logits_rows());
            if (!rq.self_conditioning.empty() && rq.self_conditioning.size() != rows * v)
                throw contract_error("cpu::diffusion_gemma::forward: the self-conditioning logits do not have the block's rows");
            decode(*rq.cache, rq.canvas.subspan(static_cast<std::size_t>(p.logits_begin), rows),
                   rq.self_conditioning.empty() ? nullptr : rq.self_conditioning.data(), logits.subspan(at, rows * v));
            at += rows * v;
        }
    }

    /// The bytes new_context(capacity) holds: K and V of every layer, a sliding layer's window only.
    [[nodiscard]] std::uint64_t kv_cache_bytes(index_t capacity) const noexcept {
        std::uint64_t floats = 0;
        for (const io::gemma_layer& g : c_.layers)
            floats += 2ull * static_cast<std::uint64_t>(g.kv_heads) * static_cast<std::uint64_t>(g.head_dim) * static_cast<std::uint64_t>(context_slots(g, capacity));
        return floats * sizeof(float);
    }

    /// An empty context for up to `capacity` positions (prompt and every block). Throws
    /// invalid_parameter past max_position_embeddings, memory_error when it does not fit.
    [[nodiscard]] gemma_context new_context(index_t capacity) const {
        if (capacity <= 0 || capacity > c_.max_context)
            throw invalid_parameter("capacity", std::to_string(capacity) + " is outside [1, max_position_embeddings " + std::to_string(c_.max_context) + "]");
        if (const std::uint64_t bytes = kv_cache_bytes(capacity); bytes > weighed_above)
            check_fits("a DiffusionGemma context of " + std::to_string(capacity) + " positions", bytes);
        gemma_context ctx;
        ctx.capacity = capacity;
        for (const io::gemma_layer& g : c_.layers) {
            ctx.slots.push_back(context_slots(g, capacity));
            const auto n = static_cast<std::size_t>(g.kv_heads) * static_cast<std::size_t>(g.head_dim) * static_cast<std::size_t>(ctx.slots.back());
            ctx.keys.emplace_back(n, 0.f);
            ctx.values.emplace_back(n, 0.f);
        }
        return ctx;
    }

    /// Appends `tokens` (prompt text: the image placeholder is refused) to the context: the encoder
    /// over them (causal, sliding windows), storing K/V.
    void encode(gemma_context& ctx, std::span<const token_id> tokens) {
        check_tokens(tokens, "tokens", true);
        check_room(ctx, static_cast<index_t>(tokens.size()), "tokens");
        run_encoder(ctx, tokens);
    }

    /// logits[canvas.size() × vocab] of the canvas read against `ctx`; `self_conditioning` is null
    /// (the first step) or the previous step's processed logits [canvas.size() × vocab].
    void decode(const gemma_context& ctx, std::span<const token_id> canvas, const float* self_conditioning, std::span<float> logits) {
        check_tokens(canvas, "canvas", false);
        const auto m = static_cast<index_t>(canvas.size()), h = c_.hidden_size;
        const auto v = static_cast<std::size_t>(c_.vocab_size);
        if (ctx.length + m > c_.max_context)
            throw invalid_parameter("canvas", "positions up to " + std::to_string(ctx.length + m) + " exceed max_position_embeddings " + std::to_string(c_.max_context));
        if (logits.size() != static_cast<std::size_t>(m) * v)
            throw invalid_parameter("logits", "holds " + std::to_string(logits.size()) + " floats, the canvas needs " + std::to_string(static_cast<std::size_t>(m) * v));
        if (m == 0) return;
        if (timing_) ++timing_->decodes;
        embed(canvas);
        {
            const phase_timer t(timing_ ? &timing_->self_conditioning : nullptr);
            self_condition(m, self_conditioning);
        }
        for (index_t l = 0; l < c_.num_layers; ++l) block(l, m, ctx, nullptr, false);
        const phase_timer t(timing_ ? &timing_->head : nullptr);
        rms_norm(m, h, x_.data(), h, w_.final_norm.data(), eps(), xn_.data(), h);
        linear(m, xn_.data(), h, w_.embedding, logits.data(), static_cast<std::ptrdiff_t>(v));
        if (const float cap = c_.final_logit_softcapping; cap > 0.f)
            for_rows(m, 20.0 * static_cast<double>(v), [&](index_t r) {
                float* row = logits.data() + static_cast<std::size_t>(r) * v;
                for (std::size_t i = 0; i < v; ++i) row[i] = std::tanh(row[i] / cap) * cap;
            });
    }

private:
    explicit diffusion_gemma(config_type c) : c_(std::move(c)) {
        const auto sl = std::find_if(c_.layers.begin(), c_.layers.end(), [](const io::gemma_layer& l) { return l.sliding; });
        const auto fl = std::find_if(c_.layers.begin(), c_.layers.end(), [](const io::gemma_layer& l) { return !l.sliding; });
        if (sl != c_.layers.end()) sliding_rope_ = rotary::gemma(sl->head_dim, c_.sliding_rope.theta, c_.sliding_rope.rotated_pairs, c_.sliding_rope.factor);
        full_rope_ = rotary::gemma(fl->head_dim, c_.full_rope.theta, c_.full_rope.rotated_pairs, c_.full_rope.factor);
        ones_.assign(static_cast<std::size_t>(std::max(c_.hidden_size, c_.max_head_dim())), 1.f);
    }

    [[nodiscard]] float eps() const noexcept { return static_cast<float>(c_.rms_norm_eps); }

    /// Positions a layer's K/V keep in a context of `capacity`: a sliding layer its window (less the
    /// query's own position), a full layer every one.
    [[nodiscard]] index_t context_slots(const io::gemma_layer& g, index_t capacity) const noexcept {
        return g.sliding ? std::min(std::max<index_t>(c_.sliding_window - 1, 1), capacity) : capacity;
    }

    /// Adds the elapsed time to *sink, if not null, when it goes out of scope.
    struct phase_timer {
        double* sink;
        std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
        explicit phase_timer(double* s) : sink(s) {}
        phase_timer(const phase_timer&) = delete;
        phase_timer& operator=(const phase_timer&) = delete;
        ~phase_timer() {
            if (sink) *sink += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
    };
    [[nodiscard]] double* decoder_sink(double gemma_timing::*phase, bool encoder) const noexcept {
        return timing_ && !encoder ? &(timing_->*phase) : nullptr;
    }

    void run_encoder(gemma_context& ctx, std::span<const token_id> tokens) {
        const auto m = static_cast<index_t>(tokens.size());
        if (m == 0) return;
        const phase_timer t(timing_ ? &timing_->encoder : nullptr);
        embed(tokens);
        for (index_t l = 0; l < c_.num_layers; ++l) block(l, m, ctx, &ctx, l + 1 == c_.num_layers);
        ctx.length += m;
    }

    /// Tokens in the vocabulary; a prompt's (`text`) never the image placeholder. A canvas may hold
    /// any token (uniform noise).
    void check_tokens(std::span<const token_id> t, const char* what, bool text) const {
        for (std::size_t i = 0; i < t.size(); ++i) {
            if (t[i] < 0 || t[i] >= c_.vocab_size)
                throw invalid_parameter(what, "token " + std::to_string(t[i]) + " at " + std::to_string(i) + " is outside the vocabulary [0, " + std::to_string(c_.vocab_size) + ")");
            if (text && t[i] == c_.image_token_id)
                throw invalid_parameter(what, "token " + std::to_string(t[i]) + " at " + std::to_string(i) +
                                                  " is the image placeholder: dlm runs DiffusionGemma's text model only (the vision tower is not loaded)");
        }
    }
    static void check_room(const gemma_context& ctx, index_t n, const char* what) {
        if (ctx.capacity <= 0 || ctx.keys.empty()) throw invalid_parameter("context", "was not made by new_context");
        if (ctx.length + n > ctx.capacity)
            throw invalid_parameter(what, std::to_string(n) + " more positions do not fit the context's " + std::to_string(ctx.capacity) + " (" +
                                              std::to_string(ctx.length) + " used)");
    }

    /// x = embedding rows · sqrt(hidden), rounded as the reference rounds in the embedding's type.
    void embed(std::span<const token_id> tokens) {
        const auto m = static_cast<index_t>(tokens.size()), h = c_.hidden_size;
        resize(m);
        const float scale = round_to_held(static_cast<float>(std::sqrt(static_cast<double>(h))));
        for (index_t r = 0; r < m; ++r) {
            float* x = x_.data() + static_cast<std::ptrdiff_t>(r) * h;
            w_.embedding.row(tokens[static_cast<std::size_t>(r)], x);
            for (index_t i = 0; i < h; ++i) x[i] = round_to_held(x[i] * scale);
        }
        positions_.resize(static_cast<std::size_t>(m));
    }

    /// f rounded to the embedding's stored type (transformers computes the embedding in it).
    [[nodiscard]] float round_to_held(float f) const noexcept {
        switch (w_.embedding.type()) {
            case io::dtype::bf16: return io::bf16_to_f32(io::f32_to_bf16(f));
            case io::dtype::f16: return io::f16_to_f32(io::f32_to_f16(f));
            default: return f;
        }
    }

    /// x = post_norm(x + SC-MLP(pre_norm(softmax(sc) · E · sqrt(hidden)))); without logits the MLP's
    /// input is zero, so its output is zero and x = post_norm(x).
    void self_condition(index_t m, const float* sc) {
        const index_t h = c_.hidden_size, f = c_.intermediate_size;
        if (sc) {
            soft_embeddings(m, sc);
            rms_norm(m, h, tmp_.data(), h, w_.sc_pre_norm.data(), eps(), xn_.data(), h);
            gated_mlp(m, xn_.data(), w_.sc_gate_up, w_.sc_down, f, tmp_.data());
            add_rows(m, h, x_.data(), h, tmp_.data(), h);
        }
        rms_norm(m, h, x_.data(), h, ones_.data(), eps(), x_.data(), h);
    }

    /// tmp = softmax(sc rows, f32, rounded to the embedding's type) · E, times sqrt(hidden): one product
    /// against the transposed embedding.
    void soft_embeddings(index_t m, const float* sc) {
        const index_t h = c_.hidden_size, v = c_.vocab_size;
        probs_.resize(static_cast<std::size_t>(m) * static_cast<std::size_t>(v));
        const kernel_table& kt = kernels();
        for_rows(m, 10.0 * v, [&](index_t r) {
            const float* s = sc + static_cast<std::ptrdiff_t>(r) * v;
            float* pr = probs_.data() + static_cast<std::ptrdiff_t>(r) * v;
            const float top = *std::max_element(s, s + v);
            std::copy(s, s + v, pr);
            kt.exp_shifted(pr, v, top);  // the vector exp of every CPU softmax, summed here in double
            double sum = 0;
            for (index_t i = 0; i < v; ++i) sum += pr[i];
            const float inv = static_cast<float>(1.0 / sum);
            for (index_t i = 0; i < v; ++i) pr[i] = round_to_held(pr[i] * inv);
        });
        linear(m, probs_.data(), v, w_.embedding_t, tmp_.data(), h);
        const float scale = round_to_held(static_cast<float>(std::sqrt(static_cast<double>(h))));
        for (std::size_t i = 0; i < static_cast<std::size_t>(m) * static_cast<std::size_t>(h); ++i) tmp_[i] = round_to_held(round_to_held(tmp_[i]) * scale);
    }

    /// out[m × hidden] = down(gelu_tanh(gate(x)) · up(x)).
    void gated_mlp(index_t m, const float* x, const packed_matrix& gate_up, const packed_matrix& down, index_t width, float* out) {
        const index_t h = c_.hidden_size;
        gu_.resize(static_cast<std::size_t>(m) * 2 * static_cast<std::size_t>(width));
        act_.resize(static_cast<std::size_t>(m) * static_cast<std::size_t>(width));
        linear(m, x, h, gate_up, gu_.data(), 2 * std::ptrdiff_t{width});
        gelu_tanh_gate(m, width, gu_.data(), 2 * std::ptrdiff_t{width}, act_.data(), width);
        linear(m, act_.data(), width, down, out, h);
    }

    void resize(index_t m) {
        const auto n = static_cast<std::size_t>(m) * static_cast<std::size_t>(c_.hidden_size);
        for (auto* b : {&x_, &xn_, &tmp_, &h1_, &h2_, &rin_}) b->resize(n);
    }

    /// One block over the m rows of x_ at positions ctx.length + [0, m). The encoder (`store`: the
    /// context it writes, ctx itself) stores K/V (and, on the last layer, stops there: nothing reads
    /// its output); the decoder (`store` null) only reads ctx.
    void block(index_t l, index_t m, const gemma_context& ctx, gemma_context* store, bool kv_only) {
        gemma_block& b = w_.blocks[static_cast<std::size_t>(l)];
        const io::gemma_layer& g = c_.layers[static_cast<std::size_t>(l)];
        const index_t h = c_.hidden_size;
        const bool encoder = store != nullptr;
        {
            const phase_timer t(decoder_sink(&gemma_timing::projections, encoder));
            rms_norm(m, h, x_.data(), h, b.input_norm.data(), eps(), xn_.data(), h);
            project_qkv(b, g, m, ctx.length);
        }
        if (!kv_only) {  // before the store: a sliding layer's ring may reuse the slots it reads
            const phase_timer t(decoder_sink(&gemma_timing::attention, encoder));
            attention(g, m, ctx, l, encoder);
        }
        if (encoder) store_kv(g, m, *store, l);
        if (kv_only) return;
        {
            const phase_timer t(decoder_sink(&gemma_timing::projections, encoder));
            linear(m, att_.data(), c_.num_heads * g.head_dim, b.o, tmp_.data(), h);
            rms_norm(m, h, tmp_.data(), h, b.post_attn_norm.data(), eps(), tmp_.data(), h);
            add_rows(m, h, x_.data(), h, tmp_.data(), h);
        }
        // The dense MLP and the experts, side by side on the residual stream x.
        {
            const phase_timer t(decoder_sink(&gemma_timing::dense_mlp, encoder));
            rms_norm(m, h, x_.data(), h, b.pre_ffn_norm.data(), eps(), xn_.data(), h);
            gated_mlp(m, xn_.data(), b.gate_up, b.down, c_.intermediate_size, tmp_.data());
            rms_norm(m, h, tmp_.data(), h, b.post_ffn_norm_1.data(), eps(), h1_.data(), h);
        }
        const phase_timer t(decoder_sink(&gemma_timing::experts, encoder));
        rms_norm(m, h, x_.data(), h, b.router_scale.data(), eps(), rin_.data(), h);
        const float root = static_cast<float>(1.0 / std::sqrt(static_cast<double>(h)));
        for (float& v : rin_) v *= root;
        rms_norm(m, h, x_.data(), h, b.pre_ffn_norm_2.data(), eps(), xn_.data(), h);
        b.experts.forward_routed(m, rin_.data(), h, xn_.data(), h, tmp_.data(), nullptr, moe_work_);
        rms_norm(m, h, tmp_.data(), h, b.post_ffn_norm_2.data(), eps(), h2_.data(), h);
        add_rows(m, h, h1_.data(), h, h2_.data(), h);
        rms_norm(m, h, h1_.data(), h, b.post_ffn_norm.data(), eps(), tmp_.data(), h);
        add_rows(m, h, x_.data(), h, tmp_.data(), h);
        const float s = encoder ? b.encoder_scalar : b.decoder_scalar;
        for (std::size_t i = 0; i < static_cast<std::size_t>(m) * static_cast<std::size_t>(h); ++i) x_[i] *= s;
    }

    /// q_ [m × heads·d], k_ and v_ [m × kv·d]: projected, q/k normed with weights, v without, q/k rotated.
    void project_qkv(const gemma_block& b, const io::gemma_layer& g, index_t m, index_t pos0) {
        const index_t h = c_.hidden_size, d = g.head_dim, qd = c_.num_heads * d, kvd = g.kv_heads * d;
        const std::ptrdiff_t ld = qd + (g.k_eq_v ? 1 : 2) * std::ptrdiff_t{kvd};
        qkv_.resize(static_cast<std::size_t>(m) * static_cast<std::size_t>(ld));
        v_.resize(static_cast<std::size_t>(m) * static_cast<std::size_t>(kvd));
        linear(m, xn_.data(), h, b.qkv, qkv_.data(), ld);
        const std::ptrdiff_t v_at = g.k_eq_v ? qd : qd + kvd;  // k_eq_v: the values are the raw keys
        for (index_t r = 0; r < m; ++r) std::copy_n(qkv_.data() + r * ld + v_at, kvd, v_.data() + static_cast<std::ptrdiff_t>(r) * kvd);
        for (index_t x = 0; x < c_.num_heads; ++x) rms_norm(m, d, qkv_.data() + x * d, ld, b.q_norm.data(), eps(), qkv_.data() + x * d, ld);
        for (index_t x = 0; x < g.kv_heads; ++x) {
            rms_norm(m, d, qkv_.data() + qd + x * d, ld, b.k_norm.data(), eps(), qkv_.data() + qd + x * d, ld);
            rms_norm(m, d, v_.data() + x * d, kvd, ones_.data(), eps(), v_.data() + x * d, kvd);
        }
        for (index_t r = 0; r < m; ++r) positions_[static_cast<std::size_t>(r)] = pos0 + r;
        const rotary& rope = g.sliding ? sliding_rope_ : full_rope_;
        rope.tables(positions_, cos_, sin_);
        rope.apply(m, qkv_.data(), ld, c_.num_heads, cos_.data(), sin_.data());
        rope.apply(m, qkv_.data() + qd, ld, g.kv_heads, cos_.data(), sin_.data());
        qkv_ld_ = ld;
    }

    /// Stores the K/V of the m rows at positions ctx.length + [0, m) (a sliding layer: the last of
    /// them its ring holds).
    void store_kv(const io::gemma_layer& g, index_t m, gemma_context& ctx, index_t l) const {
        const index_t d = g.head_dim, qd = c_.num_heads * d, kvd = g.kv_heads * d, slots = ctx.slots[static_cast<std::size_t>(l)];
        float* keys = ctx.keys[static_cast<std::size_t>(l)].data();
        float* values = ctx.values[static_cast<std::size_t>(l)].data();
        for (index_t x = 0; x < g.kv_heads; ++x)
            for (index_t r = std::max<index_t>(0, m - slots); r < m; ++r) {
                const std::ptrdiff_t at = (static_cast<std::ptrdiff_t>(x) * slots + (ctx.length + r) % slots) * d;
                std::copy_n(qkv_.data() + r * qkv_ld_ + qd + x * d, d, keys + at);
                std::copy_n(v_.data() + static_cast<std::ptrdiff_t>(r) * kvd + x * d, d, values + at);
            }
    }

    /// att_[m × heads·d]. Encoder: row r (position P = ctx.length + r) attends stored positions
    /// [P − window + 1, P] on a sliding layer, [0, P] on a full one. Decoder: every canvas row
    /// attends the stored positions [length − (window − 1), length) (sliding) or [0, length) (full),
    /// then the whole canvas. The keys from the first one any row reads are laid out once per kv head
    /// as kv_cache lays them out, in position order (the stored ones, then the m rows'), and each
    /// task (a head and 32 rows) runs cpu::attend_run's two GEMMs over them: a row's result does not
    /// depend on the rows beside it or the thread count.
    void attention(const io::gemma_layer& g, index_t m, const gemma_context& ctx, index_t l, bool encoder) {
        const index_t d = g.head_dim, qd = c_.num_heads * d, kvd = g.kv_heads * d, group = c_.num_heads / g.kv_heads;
        const index_t w = c_.sliding_window;
        att_.resize(static_cast<std::size_t>(m) * static_cast<std::size_t>(qd));
        // Keys of positions [k0, k0 + n): the stored ones, then the m rows' own.
        const index_t k0 = g.sliding ? std::max<index_t>(0, ctx.length - (w - 1)) : 0;
        const index_t n_ctx = ctx.length - k0, n = n_ctx + m, slots = ctx.slots[static_cast<std::size_t>(l)];
        const std::ptrdiff_t kst = n + panel_width, vst = (d + panel_width - 1) / panel_width * panel_width;
        run_k_.resize(static_cast<std::size_t>(g.kv_heads) * static_cast<std::size_t>(d * kst));
        run_v_.resize(static_cast<std::size_t>(g.kv_heads) * static_cast<std::size_t>(n * vst));
        const float* ck = ctx.keys[static_cast<std::size_t>(l)].data();
        const float* cv = ctx.values[static_cast<std::size_t>(l)].data();
        for_rows(g.kv_heads, 2.0 * static_cast<double>(n) * d, [&](index_t x) {
            float* kt = run_k_.data() + x * d * kst;
            float* vv = run_v_.data() + x * n * vst;
            const auto key = [&](index_t j, const float* k, const float* v) {
                for (index_t i = 0; i < d; ++i) kt[i * kst + j] = k[i];
                std::copy_n(v, d, vv + j * vst);
            };
            for (index_t j = 0; j < n_ctx; ++j) {
                const std::ptrdiff_t at = (static_cast<std::ptrdiff_t>(x) * slots + (k0 + j) % slots) * d;
                key(j, ck + at, cv + at);
            }
            for (index_t r = 0; r < m; ++r) key(n_ctx + r, qkv_.data() + r * qkv_ld_ + qd + x * d, v_.data() + r * kvd + x * d);
        });
        constexpr index_t rows_per_task = 32;
        const index_t blocks = (m + rows_per_task - 1) / rows_per_task;
        for_rows(blocks * c_.num_heads, 4.0 * d * n * rows_per_task, [&](index_t task) {
            const index_t head = task % c_.num_heads, r0 = task / c_.num_heads * rows_per_task, x = head / group;
            const auto range = [&](index_t r) -> key_range {
                if (!encoder) return {0, n};
                const index_t p = ctx.length + r0 + r;
                return {(g.sliding ? std::max<index_t>(0, p - w + 1) : 0) - k0, p + 1 - k0};
            };
            attend_run(std::min(rows_per_task, m - r0), d, qkv_.data() + r0 * qkv_ld_ + head * d, qkv_ld_, run_k_.data() + x * d * kst, kst,
                       run_v_.data() + x * n * vst, vst, 1.0f, range, att_.data() + r0 * qd + head * d, qd);
        });
    }

    config_type c_;
    gemma_weights w_;
    rotary sliding_rope_, full_rope_;
    std::vector<float> ones_;
    // Work buffers, reused across forwards.
    std::vector<float> x_, xn_, tmp_, h1_, h2_, rin_, qkv_, v_, att_, gu_, act_, cos_, sin_, probs_;
    std::vector<float, aligned_allocator<float>> run_k_, run_v_;  // one layer's keys and values, per kv head, as cpu::attend_run reads them
    std::vector<index_t> positions_;
    moe_work moe_work_;  // every block's experts, in turn
    std::ptrdiff_t qkv_ld_ = 0;
    gemma_timing* timing_ = nullptr;
};

#if DLM_SEPARATE_BODIES
DLM_SEPARATE_INLINE diffusion_gemma diffusion_gemma::load(const std::filesystem::path& folder, const load_options& opt) {
    if (io::is_gguf_path(folder)) {
        const io::gguf_file f = io::gguf_file::open(folder);
        diffusion_gemma m(io::gguf_diffusion_gemma_config(f.header()));
        m.w_ = load_gemma_gguf_weights(f, m.c_, opt);
        return m;
    }
    const io::model_paths where = io::resolve_model_paths(folder);
    diffusion_gemma m(io::load_diffusion_gemma_config(where.folder));
    const io::checkpoint ck = io::checkpoint::open(where.checkpoint);
    m.w_ = load_gemma_weights(ck, m.c_, opt);
    return m;
}

DLM_SEPARATE_INLINE diffusion_gemma diffusion_gemma::random(config_type c, std::uint64_t seed, weight_spec spec, float scale) {
    diffusion_gemma m(std::move(c));
    m.w_ = random_gemma_weights(m.c_, seed, spec, scale);
    return m;
}
#endif  // DLM_SEPARATE_BODIES

static_assert(language_model<diffusion_gemma>);
static_assert(model_self_conditions<diffusion_gemma>);

}  // namespace dlm::cpu
