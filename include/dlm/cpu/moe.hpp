// dlm/cpu/moe.hpp — the mixture-of-experts MLP of the CPU transformer (LLaDA2.x, LLaDA-MoE, SDAR-MoE), as the reference
// computes it (io/moe_config.hpp says how a config routes):
//
//   logits = x · Wrᵀ (f32)           scores = sigmoid(logits) | softmax(logits)
//   pick     the k best experts by score (+ expert_bias when the config has one), among the
//            `top_groups` groups whose two best experts score highest
//   weights  the picked (unbiased) scores, divided by their sum + 1e-20 when k > 1 (LLaDA2), by their
//            plain sum (SDAR-MoE's norm_topk_prob), by the sum clamped below at 6.1e-5 (llama.cpp's
//            llada2 graph) or not at all (LLaDA-MoE), × routed_scaling
//   y        Σ_j weight_j · expert_j(x)  (+ the shared experts' MLP of x)
//
// Each expert is a SiLU-gated MLP held as packed_matrix in its checkpoint's element type (gate|up
// stacked, down), so every weight type the GEMM multiplies works for experts too. A forward gathers
// the rows routed to each expert, runs that expert's two products on them, and adds each row's
// weighted outputs in the order of its picks; a row's result depends on its own row only, so a
// sequence's logits stay the same alone or in a batch. moe_timing splits the time by phase.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "../core/error.hpp"
#include "../io/model_config.hpp"
#include "../io/safetensors.hpp"
#include "gemm.hpp"
#include "gguf_source.hpp"
#include "memory.hpp"
#include "moe_work.hpp"
#include "ops.hpp"
#include "weight_sources.hpp"
#include "weights.hpp"

namespace dlm::cpu {

/// Seconds spent in each phase of the MoE MLPs since the last reset (benchmarks).
struct moe_timing {
    double router = 0;   ///< router product, scores, group-limited top-k, weights
    double gather = 0;   ///< rows copied per expert
    double experts = 0;  ///< the experts' gate/up and down products (and SiLU)
    double combine = 0;  ///< weighted sums back into the rows, and the shared experts
    std::int64_t calls = 0;
};

namespace detail {

/// Rows [row0, row0 + rows) of a GGUF tensor: one part of an expert's matrix.
struct gguf_part {
    const io::gguf_tensor* t;
    std::int64_t row0, rows;
};
/// Expert x's gate and up rows (f each) in a llada-moe file: the fused tensor's, or gate's then up's.
[[nodiscard]] inline std::vector<gguf_part> gate_up_parts(const gguf_expert_tensors& t, index_t x, index_t f) {
    if (t.gate_up) return {{t.gate_up, 2 * std::int64_t{x} * f, 2 * std::int64_t{f}}};
    return {{t.gate, std::int64_t{x} * f, f}, {t.up, std::int64_t{x} * f, f}};
}
/// Expert x's down rows (h) in a llada-moe file.
[[nodiscard]] inline std::vector<gguf_part> down_parts(const gguf_expert_tensors& t, index_t x, index_t h) {
    return {{t.down, std::int64_t{x} * h, h}};
}
/// A llada2 file's shared expert (width s): its gate then up rows, and its down rows.
[[nodiscard]] inline std::vector<gguf_part> shared_gate_up_parts(const gguf_expert_tensors& t, index_t s) { return {{t.shared_gate, 0, s}, {t.shared_up, 0, s}}; }
[[nodiscard]] inline std::vector<gguf_part> shared_down_parts(const gguf_expert_tensors& t, index_t h) { return {{t.shared_down, 0, h}}; }
/// How an expert's matrix stacked from `parts` is held: in GGUF blocks when every part is blocks and
/// no type was requested; else the requested type, else the parts' common plain type, else f32.
[[nodiscard]] inline weight_layout gguf_held_layout(const std::vector<gguf_part>& parts, std::optional<io::dtype> type) {
    if (type) return {*type, {}};
    weight_layout blocks{io::dtype::f32, {}};
    const std::optional<io::dtype> first = io::gguf_plain_dtype(parts.front().t->type);
    bool same = true;
    for (const gguf_part& p : parts) {
        const std::optional<io::dtype> plain = io::gguf_plain_dtype(p.t->type);
        if (!plain) blocks.parts.push_back({static_cast<index_t>(p.rows), p.t->type});
        same = same && plain && first && *plain == *first;
    }
    if (blocks.parts.size() == parts.size()) return blocks;
    return {same ? *first : io::dtype::f32, {}};
}

}  // namespace detail

/// Tensor `name` of `ck` ([shape]: rows × m.cols()) into rows [at, ...) of `m`, a slice at a time
/// from its stored bytes (packed_matrix::set_stored), each slice's mapped pages released once copied.
inline void read_checkpoint_rows(const io::checkpoint& ck, const std::string& name, std::vector<std::int64_t> shape, packed_matrix& m, index_t at) {
    const index_t rows = static_cast<index_t>(shape[0]), k = m.cols();
    const index_t chunk = std::max<index_t>(panel_width, (1 << 22) / std::max<index_t>(1, k) / panel_width * panel_width);
    for (index_t r0 = 0; r0 < rows; r0 += chunk) {
        const index_t n = std::min(chunk, rows - r0);
        m.set_stored(at + r0, ck.row_bytes(name, shape, r0, n).data(), ck.info(name).type, n);
        ck.release_rows(name, r0, n);
    }
}

/// One matrix of `k` columns from `parts` of a GGUF file (tensor, first row, rows), stacked in that
/// order and held as `layout` says (detail::gguf_held_layout): blocks as stored, F32/F16/BF16 packed
/// from the stored bytes, else dequantized through `buf`; each part's pages released once packed.
[[nodiscard]] inline packed_matrix gguf_stacked_matrix(const gguf_source& src, const std::vector<detail::gguf_part>& parts, index_t k,
                                                       const weight_layout& layout, std::vector<float>& buf) {
    index_t total = 0;
    for (const detail::gguf_part& p : parts) total += static_cast<index_t>(p.rows);
    packed_matrix m(total, k, layout);
    index_t at = 0;
    for (const detail::gguf_part& p : parts) {
        if (layout.quantized()) {
            m.set_blocks(at, src.stored_rows(*p.t, p.row0, p.rows).data(), static_cast<index_t>(p.rows));
        } else if (const auto d = io::gguf_plain_dtype(p.t->type)) {
            m.set_stored(at, src.stored_rows(*p.t, p.row0, p.rows).data(), *d, static_cast<index_t>(p.rows));
        } else {
            buf.resize(static_cast<std::size_t>(p.rows) * static_cast<std::size_t>(k));
            src.read_rows(*p.t, p.row0, p.rows, buf.data());
            m.set_rows(at, buf.data(), static_cast<index_t>(p.rows));
        }
        src.release_rows(*p.t, p.row0, p.rows);
        at += static_cast<index_t>(p.rows);
    }
    return m;
}

class moe_mlp {
public:
    moe_mlp() = default;

    /// Layer `layer`'s experts from a checkpoint in LLaDA2's names (model.layers.N.mlp.{gate.weight,
    /// gate.expert_bias, experts.E.{gate,up,down}_proj.weight, shared_experts.*}) or LLaDA-MoE's
    /// (model.layers.N.mlp.{gate.weight, expert_bias, experts.E.*}, model.layers.N.shared_expert.*;
    /// SDAR-MoE's are these without bias and shared expert), each matrix held in
    /// its stored type unless `type` is given (the router in f32, as the reference computes it). A
    /// missing expert_bias is zero, as transformers initialises the buffer. Throws tensor_error
    /// naming a missing or misshapen tensor.
    static moe_mlp load(const io::checkpoint& ck, const io::model_config& c, index_t layer, std::optional<io::dtype> type) {
        check_shapes(ck, c, layer);
        moe_mlp e(c);
        const stored_names at = names(c, layer);
        const index_t h = c.hidden_size, f = e.m_.expert_intermediate_size, s = e.m_.shared_intermediate_size;
        auto held = [&](std::initializer_list<std::string> names) {
            if (type) return *type;
            const io::dtype first = ck.info(*names.begin()).type;
            for (const auto& n : names)
                if (ck.info(n).type != first) return io::dtype::f32;
            return first;
        };
        e.router_ = packed_matrix(e.m_.num_experts, h, io::dtype::f32);
        read_checkpoint_rows(ck, at.router, {e.m_.num_experts, h}, e.router_, 0);
        e.bias_.assign(static_cast<std::size_t>(e.m_.num_experts), 0.f);
        if (e.m_.selection_bias && ck.contains(at.bias)) {
            const std::int64_t shape[] = {e.m_.num_experts};
            ck.read_rows_f32(at.bias, shape, 0, e.m_.num_experts, e.bias_);
        }
        auto expert = [&](const std::string& q, index_t width, packed_matrix& gu, packed_matrix& down) {
            gu = packed_matrix(2 * width, h, held({q + "gate_proj.weight", q + "up_proj.weight"}));
            read_checkpoint_rows(ck, q + "gate_proj.weight", {width, h}, gu, 0);
            read_checkpoint_rows(ck, q + "up_proj.weight", {width, h}, gu, width);
            down = packed_matrix(h, width, held({q + "down_proj.weight"}));
            read_checkpoint_rows(ck, q + "down_proj.weight", {h, width}, down, 0);
        };
        e.gate_up_.resize(static_cast<std::size_t>(e.m_.num_experts));
        e.down_.resize(static_cast<std::size_t>(e.m_.num_experts));
        for (index_t x = 0; x < e.m_.num_experts; ++x)
            expert(at.expert(x), f, e.gate_up_[static_cast<std::size_t>(x)], e.down_[static_cast<std::size_t>(x)]);
        if (s > 0) expert(at.shared, s, e.shared_gate_up_, e.shared_down_);
        return e;
    }

    /// Checks the shapes of layer `layer`'s router and experts in a checkpoint against the config:
    /// tensor_error names the first missing or misshapen one, before anything is allocated from the
    /// config's sizes (an expert_intermediate_size of 2^20 took 512 MB before its [32, 64] tensor
    /// refused it). The memory check (moe_bytes) and load() call it.
    static void check_shapes(const io::checkpoint& ck, const io::model_config& c, index_t layer) {
        const io::moe_config& m = *c.moe;
        const stored_names at = names(c, layer);
        const std::int64_t h = c.hidden_size, router[] = {m.num_experts, h};
        (void)ck.info(at.router, router);
        const auto expert = [&](const std::string& q, std::int64_t width) {
            const std::int64_t rows[] = {width, h}, down[] = {h, width};
            (void)ck.info(q + "gate_proj.weight", rows);
            (void)ck.info(q + "up_proj.weight", rows);
            (void)ck.info(q + "down_proj.weight", down);
        };
        for (index_t x = 0; x < m.num_experts; ++x) expert(at.expert(x), m.expert_intermediate_size);
        if (m.shared_intermediate_size > 0) expert(at.shared, m.shared_intermediate_size);
    }

    /// Layer `layer`'s experts from a llada-moe or llada2 GGUF file (io/gguf_model.hpp): each expert's
    /// matrices (llada2's shared expert too) held as the file stores them (GGUF blocks of a type dlm
    /// multiplies, or F32/F16/BF16) unless `type` converts them; the router and llada2's selection
    /// bias in f32. Expert x of a stacked tensor is its rows [x · rows, (x + 1) · rows).
    static moe_mlp load_gguf(const gguf_source& src, const io::model_config& c, index_t layer, std::optional<io::dtype> type) {
        moe_mlp e(c);
        const gguf_expert_tensors t = src.expert_tensors(layer);
        if (t.scale) {  // Gemma 4's per-expert output scales (diffusion-gemma files)
            e.expert_scale_.resize(static_cast<std::size_t>(e.m_.num_experts));
            src.read_rows(*t.scale, 0, 1, e.expert_scale_.data());
        }
        const index_t h = c.hidden_size, f = e.m_.expert_intermediate_size, n = e.m_.num_experts;
        std::vector<float> buf;
        e.router_ = packed_matrix(n, h, io::dtype::f32);
        buf.resize(static_cast<std::size_t>(n) * static_cast<std::size_t>(h));
        src.read_rows(*t.router, 0, n, buf.data());
        e.router_.set_rows(0, buf.data(), n);
        e.bias_.assign(static_cast<std::size_t>(n), 0.f);
        if (t.bias) src.read_rows(*t.bias, 0, 1, e.bias_.data());  // exp_probs_b: one row of n
        // Every expert is held alike: the layouts of expert 0's parts.
        const weight_layout gu_layout = detail::gguf_held_layout(detail::gate_up_parts(t, 0, f), type),
                            down_layout = detail::gguf_held_layout(detail::down_parts(t, 0, h), type);
        e.gate_up_.resize(static_cast<std::size_t>(n));
        e.down_.resize(static_cast<std::size_t>(n));
        for (index_t x = 0; x < n; ++x) {
            const auto ux = static_cast<std::size_t>(x);
            e.gate_up_[ux] = gguf_stacked_matrix(src, detail::gate_up_parts(t, x, f), h, gu_layout, buf);
            e.down_[ux] = gguf_stacked_matrix(src, detail::down_parts(t, x, h), f, down_layout, buf);
        }
        if (const index_t s = e.m_.shared_intermediate_size; t.shared_gate) {
            const auto gu = detail::shared_gate_up_parts(t, s), down = detail::shared_down_parts(t, h);
            e.shared_gate_up_ = gguf_stacked_matrix(src, gu, h, detail::gguf_held_layout(gu, type), buf);
            e.shared_down_ = gguf_stacked_matrix(src, down, s, detail::gguf_held_layout(down, type), buf);
        }
        return e;
    }

    /// Experts stored stacked, as Gemma 4 / DiffusionGemma write them under `prefix` (e.g.
    /// "model.decoder.layers.3."): router.proj.weight [E, hidden], router.per_expert_scale [E],
    /// experts.gate_up_proj [E, 2·I, hidden] (gate rows, then up rows), experts.down_proj [E, hidden, I].
    /// Matrices held in their stored type unless `type` is given; the router in f32. The router's
    /// input transform (a norm and a scale) is the caller's: forward_routed takes its output.
    static moe_mlp load_stacked(const io::checkpoint& ck, const std::string& prefix, const io::moe_config& m, index_t hidden,
                                std::optional<io::dtype> type) {
        moe_mlp e(m, hidden);
        const index_t n = m.num_experts, h = hidden, f = m.expert_intermediate_size;
        const std::string gu = prefix + "experts.gate_up_proj", dn = prefix + "experts.down_proj";
        // The shapes before anything is allocated from the config's sizes.
        for (const auto& [name, shape] : {std::pair{prefix + "router.proj.weight", std::vector<std::int64_t>{n, h}},
                                          std::pair{gu, std::vector<std::int64_t>{n, 2 * std::int64_t{f}, h}},
                                          std::pair{dn, std::vector<std::int64_t>{n, h, f}}})
            (void)ck.info(name, shape);
        e.router_ = packed_matrix(n, h, io::dtype::f32);
        read_checkpoint_rows(ck, prefix + "router.proj.weight", {n, h}, e.router_, 0);
        e.bias_.assign(static_cast<std::size_t>(n), 0.f);
        if (m.per_expert_scale) {
            e.expert_scale_ = ck.read_f32(prefix + "router.per_expert_scale", {n});
        }
        const io::dtype gu_type = type.value_or(ck.info(gu).type), dn_type = type.value_or(ck.info(dn).type);
        e.gate_up_.resize(static_cast<std::size_t>(n));
        e.down_.resize(static_cast<std::size_t>(n));
        for (index_t x = 0; x < n; ++x) {  // expert x: rows [x · rows, (x + 1) · rows) of the stacked tensor seen as 2-D
            const auto ux = static_cast<std::size_t>(x);
            e.gate_up_[ux] = packed_matrix(2 * f, h, gu_type);
            read_stacked(ck, gu, {n, 2 * f, h}, x, e.gate_up_[ux]);
            e.down_[ux] = packed_matrix(h, f, dn_type);
            read_stacked(ck, dn, {n, h, f}, x, e.down_[ux]);
        }
        return e;
    }

    /// Experts assembled from matrices made elsewhere (random full-size models, cpu/diffusion_gemma_random.hpp):
    /// the router [E × hidden] (f32), Gemma's per-expert scales (empty: none), each expert's gate|up [2·I × hidden]
    /// and down [hidden × I]. Throws contract_error when the counts or shapes disagree with `m`.
    static moe_mlp from_parts(const io::moe_config& m, index_t hidden, packed_matrix router, std::vector<float> expert_scale,
                              std::vector<packed_matrix> gate_up, std::vector<packed_matrix> down) {
        const auto n = static_cast<std::size_t>(m.num_experts);
        const index_t f = m.expert_intermediate_size;
        bool fits = router.rows() == m.num_experts && router.cols() == hidden && gate_up.size() == n && down.size() == n &&
                    (expert_scale.empty() || expert_scale.size() == n);
        for (std::size_t x = 0; fits && x < n; ++x)
            fits = gate_up[x].rows() == 2 * f && gate_up[x].cols() == hidden && down[x].rows() == hidden && down[x].cols() == f;
        if (!fits) throw contract_error("moe_mlp::from_parts: the matrices' counts or shapes do not match the expert config");
        moe_mlp e(m, hidden);
        e.router_ = std::move(router);
        e.bias_.assign(n, 0.f);
        e.expert_scale_ = std::move(expert_scale);
        e.gate_up_ = std::move(gate_up);
        e.down_ = std::move(down);
        return e;
    }

    /// Random experts for benchmarks (full-size shapes without a file): matrices ±scale·sqrt(3/fan_in),
    /// the router ±sqrt(3/hidden), expert_bias ±0.1, drawn from `seed` and stored in `type`.
    static moe_mlp random(const io::model_config& c, std::uint64_t seed, io::dtype type, float scale = 1.0f) {
        moe_mlp e(c);
        detail::splitmix g{seed};
        const index_t h = c.hidden_size;
        std::vector<float> buf;
        auto fill = [&](packed_matrix& m, float spread) {
            const index_t k = m.cols(), chunk = std::max<index_t>(1, (1 << 20) / std::max<index_t>(1, k));
            for (index_t r0 = 0; r0 < m.rows(); r0 += chunk) {
                const index_t n = std::min(chunk, m.rows() - r0);
                buf.resize(static_cast<std::size_t>(n) * static_cast<std::size_t>(k));
                for (float& v : buf) v = spread * g.uniform();
                m.set_rows(r0, buf.data(), n);
            }
        };
        auto spread = [&](index_t fan_in) { return scale * static_cast<float>(std::sqrt(3.0 / static_cast<double>(fan_in))); };
        e.router_ = packed_matrix(e.m_.num_experts, h, io::dtype::f32);
        fill(e.router_, spread(h) / scale);
        e.bias_.resize(static_cast<std::size_t>(e.m_.num_experts));
        for (float& b : e.bias_) b = 0.1f * g.uniform();
        auto expert = [&](index_t width, packed_matrix& gu, packed_matrix& down) {
            gu = packed_matrix(2 * width, h, type);
            fill(gu, spread(h));
            down = packed_matrix(h, width, type);
            fill(down, spread(width));
        };
        e.gate_up_.resize(static_cast<std::size_t>(e.m_.num_experts));
        e.down_.resize(static_cast<std::size_t>(e.m_.num_experts));
        for (std::size_t x = 0; x < e.gate_up_.size(); ++x) expert(e.m_.expert_intermediate_size, e.gate_up_[x], e.down_[x]);
        if (e.m_.shared_intermediate_size > 0) expert(e.m_.shared_intermediate_size, e.shared_gate_up_, e.shared_down_);
        return e;
    }

    /// Bytes one layer's experts take, before allocating them (every matrix in `type`).
    [[nodiscard]] static std::size_t bytes_for(const io::model_config& c, io::dtype type) {
        const io::moe_config& m = *c.moe;
        const index_t h = c.hidden_size, f = m.expert_intermediate_size, s = m.shared_intermediate_size;
        std::size_t b = packed_matrix::bytes_for(m.num_experts, h, io::dtype::f32) + sizeof(float) * static_cast<std::size_t>(m.num_experts);
        b += static_cast<std::size_t>(m.num_experts) * (packed_matrix::bytes_for(2 * f, h, type) + packed_matrix::bytes_for(h, f, type));
        if (s > 0) b += packed_matrix::bytes_for(2 * s, h, type) + packed_matrix::bytes_for(h, s, type);
        return b;
    }

    /// Bytes held.
    [[nodiscard]] std::size_t bytes() const noexcept {
        std::size_t b = router_.bytes() + bias_.size() * sizeof(float) + shared_gate_up_.bytes() + shared_down_.bytes();
        for (std::size_t x = 0; x < gate_up_.size(); ++x) b += gate_up_[x].bytes() + down_[x].bytes();
        return b;
    }
    /// The element type of the experts' matrices.
    [[nodiscard]] io::dtype type() const noexcept { return gate_up_.empty() ? io::dtype::f32 : gate_up_.front().type(); }

    /// y[m × hidden] = MoE(x[m × hidden]) (rows `ld` floats apart), y overwritten.
    void forward(index_t m, const float* x, std::ptrdiff_t ld, float* y, moe_timing* timing, moe_work& work) {
        forward_routed(m, x, ld, x, ld, y, timing, work);
    }

    /// The same, routed on `route_x` (rows `route_ld` apart) while the experts run on x: Gemma 4
    /// routes on the residual stream and feeds the experts its own norm of it.
    void forward_routed(index_t m, const float* route_x, std::ptrdiff_t route_ld, const float* x, std::ptrdiff_t ld, float* y, moe_timing* timing,
                        moe_work& work) {
        using clock = std::chrono::steady_clock;
        const auto t0 = clock::now();
        const index_t h = hidden_, k = m_.experts_per_token, n_exp = m_.num_experts;
        route(m, route_x, route_ld, work);
        const auto t1 = clock::now();

        // Rows per expert, in row order; work.slot[r·k + j] = where pick j of row r lands in work.out.
        work.offsets.assign(static_cast<std::size_t>(n_exp) + 1, 0);
        for (index_t i = 0; i < m * k; ++i) ++work.offsets[static_cast<std::size_t>(work.picks[static_cast<std::size_t>(i)]) + 1];
        for (index_t e = 0; e < n_exp; ++e) work.offsets[static_cast<std::size_t>(e) + 1] += work.offsets[static_cast<std::size_t>(e)];
        std::vector<index_t> fill(work.offsets.begin(), work.offsets.end() - 1);
        work.slot.resize(static_cast<std::size_t>(m * k));
        work.gathered.resize(static_cast<std::size_t>(m * k) * static_cast<std::size_t>(h));
        for (index_t r = 0; r < m; ++r)
            for (index_t j = 0; j < k; ++j) {
                const auto i = static_cast<std::size_t>(r * k + j);
                const index_t at = fill[static_cast<std::size_t>(work.picks[i])]++;
                work.slot[i] = at;
                std::copy_n(x + r * ld, h, work.gathered.data() + static_cast<std::ptrdiff_t>(at) * h);
            }
        const auto t2 = clock::now();

        work.out.resize(work.gathered.size());
        run_experts(m * k, work);
        const auto t3 = clock::now();

        for_rows(m, static_cast<double>(k) * h, [&](index_t r) {
            float* yr = y + r * static_cast<std::ptrdiff_t>(h);
            std::fill_n(yr, h, 0.f);
            for (index_t j = 0; j < k; ++j) {
                const auto i = static_cast<std::size_t>(r * k + j);
                const float w = work.weights[i];
                const float* o = work.out.data() + static_cast<std::ptrdiff_t>(work.slot[i]) * h;
                for (index_t d = 0; d < h; ++d) yr[d] += w * o[d];
            }
        });
        if (m_.shared_intermediate_size > 0) {
            work.shared.resize(static_cast<std::size_t>(m) * static_cast<std::size_t>(h));
            if (ld == h) {
                mlp(m, x, shared_gate_up_, shared_down_, work.shared.data());
            } else {
                work.gathered.resize(static_cast<std::size_t>(m) * static_cast<std::size_t>(h));
                for (index_t r = 0; r < m; ++r) std::copy_n(x + r * ld, h, work.gathered.data() + static_cast<std::ptrdiff_t>(r) * h);
                mlp(m, work.gathered.data(), shared_gate_up_, shared_down_, work.shared.data());
            }
            add_rows(m, h, y, h, work.shared.data(), h);
        }
        const auto t4 = clock::now();
        if (timing) {
            auto sec = [](clock::duration d) { return std::chrono::duration<double>(d).count(); };
            timing->router += sec(t1 - t0);
            timing->gather += sec(t2 - t1);
            timing->experts += sec(t3 - t2);
            timing->combine += sec(t4 - t3);
            ++timing->calls;
        }
    }

    /// Whether the last forward ran whole experts side by side on the threads (run_experts), not in turn.
    [[nodiscard]] bool last_ran_side_by_side() const noexcept { return side_by_side_; }
    /// The bytes a forward of `rows` rows needs in a moe_work (the experts' MLPs' activations are
    /// their threads' own buffers, not counted).
    [[nodiscard]] std::uint64_t work_bytes(index_t rows) const noexcept {
        const auto r = static_cast<std::uint64_t>(std::max<index_t>(rows, 0)), k = static_cast<std::uint64_t>(m_.experts_per_token);
        const auto h = static_cast<std::uint64_t>(hidden_), e = static_cast<std::uint64_t>(m_.num_experts);
        const std::uint64_t floats = r * (e + 2 * k * h + k + (m_.shared_intermediate_size > 0 ? h : 0));
        return floats * sizeof(float) + (2 * r * k + 2 * (e + 1)) * sizeof(index_t);
    }

private:
    explicit moe_mlp(const io::model_config& c) : m_(*c.moe), hidden_(c.hidden_size) {}
    moe_mlp(const io::moe_config& m, index_t hidden) : m_(m), hidden_(hidden) {}

    /// Expert `x` of stacked tensor `name` ([experts, rows, cols]) into `m` ([rows × cols]).
    static void read_stacked(const io::checkpoint& ck, const std::string& name, const std::vector<std::int64_t>& shape, index_t x,
                             packed_matrix& m) {
        const io::tensor_info& t = ck.info(name);
        if (t.shape != shape)
            throw tensor_error(t.file, name, "expected shape " + io::shape_string(shape) + ", found " + io::shape_string(t.shape));
        const auto rows = static_cast<std::size_t>(shape[1]), per = rows * static_cast<std::size_t>(shape[2]);
        m.set_stored(0, t.bytes.subspan(static_cast<std::size_t>(x) * per * io::dtype_size(t.type)).data(), t.type, static_cast<index_t>(rows));
        ck.mark_read(name);
        ck.release_rows(name, static_cast<std::int64_t>(x) * shape[1], shape[1]);
    }

    /// The router: scores, the group-limited pick, the combine weights (work.picks, work.weights).
    void route(index_t m, const float* x, std::ptrdiff_t ld, moe_work& work) {
        const index_t n_exp = m_.num_experts, k = m_.experts_per_token, per_group = n_exp / m_.groups;
        work.logits.resize(static_cast<std::size_t>(m) * static_cast<std::size_t>(n_exp));
        linear(m, x, ld, router_, work.logits.data(), n_exp);
        work.picks.resize(static_cast<std::size_t>(m * k));
        work.weights.resize(static_cast<std::size_t>(m * k));
        for_rows(m, 8.0 * n_exp, [&](index_t r) {
            float* s = work.logits.data() + static_cast<std::ptrdiff_t>(r) * n_exp;  // becomes the scores
            if (m_.score == io::moe_config::scoring::sigmoid) {
                for (index_t e = 0; e < n_exp; ++e) s[e] = 1.f / (1.f + std::exp(-s[e]));
            } else {
                const float top = *std::max_element(s, s + n_exp);
                float sum = 0.f;
                for (index_t e = 0; e < n_exp; ++e) sum += (s[e] = std::exp(s[e] - top));
                for (index_t e = 0; e < n_exp; ++e) s[e] /= sum;
            }
            thread_local std::vector<float> choice;
            thread_local std::vector<index_t> order;
            choice.resize(static_cast<std::size_t>(n_exp));
            for (index_t e = 0; e < n_exp; ++e) choice[static_cast<std::size_t>(e)] = s[e] + bias_[static_cast<std::size_t>(e)];
            if (m_.top_groups < m_.groups) {  // keep the top_groups groups by the sum of their two best choices
                thread_local std::vector<std::pair<float, index_t>> group;
                group.clear();
                for (index_t g = 0; g < m_.groups; ++g) {
                    const float* c = choice.data() + g * per_group;
                    float a = -INFINITY, b = -INFINITY;
                    for (index_t e = 0; e < per_group; ++e) {
                        if (c[e] > a) b = a, a = c[e];
                        else if (c[e] > b) b = c[e];
                    }
                    group.emplace_back(a + b, g);
                }
                std::stable_sort(group.begin(), group.end(), [](const auto& p, const auto& q) { return p.first > q.first; });
                for (std::size_t i = static_cast<std::size_t>(m_.top_groups); i < group.size(); ++i)
                    std::fill_n(choice.data() + group[i].second * per_group, per_group, -INFINITY);
            }
            order.resize(static_cast<std::size_t>(n_exp));
            for (index_t e = 0; e < n_exp; ++e) order[static_cast<std::size_t>(e)] = e;
            std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](index_t a, index_t b) {
                const float ca = choice[static_cast<std::size_t>(a)], cb = choice[static_cast<std::size_t>(b)];
                return ca > cb || (ca == cb && a < b);
            });
            float sum = 0.f;
            for (index_t j = 0; j < k; ++j) sum += s[order[static_cast<std::size_t>(j)]];  // used only when normalising (LLaDA2: no bias in the weights)
            using norm_rule = io::moe_config::normalization;
            const float norm = m_.normalize == norm_rule::always               ? sum
                               : m_.normalize == norm_rule::several && k > 1 ? sum + 1e-20f
                               : m_.normalize == norm_rule::clamped          ? std::max(sum, 6.103515625e-5f)
                                                                             : 1.f;
            for (index_t j = 0; j < k; ++j) {
                const index_t e = order[static_cast<std::size_t>(j)];
                work.picks[static_cast<std::size_t>(r * k + j)] = e;
                const float w = m_.bias_in_weights ? choice[static_cast<std::size_t>(e)] : s[e];
                work.weights[static_cast<std::size_t>(r * k + j)] = w / norm * static_cast<float>(m_.routed_scaling);
                if (!expert_scale_.empty()) work.weights[static_cast<std::size_t>(r * k + j)] *= expert_scale_[static_cast<std::size_t>(e)];
            }
        });
    }

    /// Each expert's MLP on its gathered rows (`rows` in all), work.out from work.gathered. With many experts
    /// holding few rows each (Gemma 4's 128 experts at a 256-row canvas: about 16 rows each), whole
    /// experts go to the threads and each expert's products run on one thread; else the experts run
    /// in turn, each product split over the threads. The same bits either way: no product's result
    /// depends on the number of threads that computes it (tasks.hpp).
    void run_experts(index_t rows, moe_work& work) {
        const index_t h = hidden_;
        side_by_side_ = false;
        work.active.clear();
        work.active.reserve(static_cast<std::size_t>(m_.num_experts));  // no more: work_bytes counts that many
        index_t largest = 0;
        for (index_t e = 0; e < m_.num_experts; ++e) {
            const index_t n = work.offsets[static_cast<std::size_t>(e) + 1] - work.offsets[static_cast<std::size_t>(e)];
            if (n > 0) work.active.push_back(e);
            largest = std::max(largest, n);
        }
        const auto one = [&](index_t e) {
            const index_t b = work.offsets[static_cast<std::size_t>(e)], n = work.offsets[static_cast<std::size_t>(e) + 1] - b;
            mlp(n, work.gathered.data() + static_cast<std::ptrdiff_t>(b) * h, gate_up_[static_cast<std::size_t>(e)],
                down_[static_cast<std::size_t>(e)], work.out.data() + static_cast<std::ptrdiff_t>(b) * h);
        };
#if defined(_OPENMP)
        const auto threads = static_cast<index_t>(omp_get_max_threads());
        const auto count = static_cast<long>(work.active.size());
        // Enough experts to balance (4 a thread), none holding more than a thread's share of the rows.
        if (threads > 1 && count >= 4 * threads && largest * threads <= rows) {
            side_by_side_ = true;
#pragma omp parallel for schedule(dynamic)
            for (long i = 0; i < count; ++i) one(work.active[static_cast<std::size_t>(i)]);
            return;
        }
#endif
        (void)rows;
        for (const index_t e : work.active) one(e);
    }

    /// out[n × hidden] = down(act(gate(x)) · up(x)) for rows x[n × hidden], act SiLU or GELU (tanh).
    /// Its buffers are the calling thread's (run_experts runs experts on several threads at once).
    void mlp(index_t n, const float* x, const packed_matrix& gate_up, const packed_matrix& down, float* out) {
        const index_t w = down.cols();
        thread_local std::vector<float, aligned_allocator<float>> gu, act;
        gu.resize(static_cast<std::size_t>(n) * 2 * static_cast<std::size_t>(w));
        act.resize(static_cast<std::size_t>(n) * static_cast<std::size_t>(w));
        linear(n, x, hidden_, gate_up, gu.data(), 2 * std::ptrdiff_t{w});
        if (m_.act == io::moe_config::activation::gelu_tanh) gelu_tanh_gate(n, w, gu.data(), 2 * std::ptrdiff_t{w}, act.data(), w);
        else silu_gate(n, w, gu.data(), 2 * std::ptrdiff_t{w}, act.data(), w);
        linear(n, act.data(), w, down, out, hidden_);
    }

    io::moe_config m_;
    index_t hidden_ = 0;
    /// Where layer `layer`'s MoE tensors are: LLaDA2's names, or LLaDA-MoE's (and SDAR-MoE's).
    struct stored_names {
        std::string prefix, router, bias, shared;
        [[nodiscard]] std::string expert(index_t x) const { return prefix + "experts." + std::to_string(x) + "."; }
    };
    [[nodiscard]] static stored_names names(const io::model_config& c, index_t layer) {
        const bool llada2 = c.arch == io::architecture::llada2_moe;
        const std::string p = "model.layers." + std::to_string(layer) + ".mlp.";
        return {p, p + "gate.weight", p + (llada2 ? "gate.expert_bias" : "expert_bias"),
                llada2 ? p + "shared_experts." : "model.layers." + std::to_string(layer) + ".shared_expert."};
    }

    packed_matrix router_;
    std::vector<float> bias_;
    std::vector<float> expert_scale_;  // Gemma 4's per_expert_scale; empty: none
    std::vector<packed_matrix> gate_up_, down_;
    packed_matrix shared_gate_up_, shared_down_;
    bool side_by_side_ = false;  // run_experts' last choice
};

/// Layer `l`'s experts from the transformer's weight source: a safetensors checkpoint, a llada-moe or
/// llada2 GGUF file, or random weights (benchmarks). Weights in memory have no experts: invalid_parameter.
template <class Source>
[[nodiscard]] moe_mlp load_moe(Source& src, const io::model_config& c, index_t l, const load_options& opt) {
    if constexpr (requires { src.checkpoint(); }) {
        return moe_mlp::load(src.checkpoint(), c, l, opt.weight_dtype);
    } else if constexpr (std::is_same_v<Source, gguf_source>) {
        return moe_mlp::load_gguf(src, c, l, opt.weight_dtype);
    } else if constexpr (std::is_same_v<Source, random_source>) {
        return moe_mlp::random(c, 0x5eed0000u + static_cast<std::uint64_t>(l), opt.weight_dtype.value_or(src.dtype(tensor_role::o_proj, l)));
    } else {
        throw invalid_parameter("weights", "layer " + std::to_string(l) + " is a mixture-of-experts layer: its experts load from a "
                                           "safetensors checkpoint or a GGUF file (transformer::load) or are random (transformer::random)");
    }
}

/// Bytes layer `l`'s experts will take (the memory check before loading).
template <class Source>
[[nodiscard]] std::size_t moe_bytes(Source& src, const io::model_config& c, index_t l, const load_options& opt) {
    io::dtype type = opt.weight_dtype.value_or(io::dtype::f32);
    if constexpr (requires { src.checkpoint(); }) {
        moe_mlp::check_shapes(src.checkpoint(), c, l);
        if (!opt.weight_dtype)
            type = src.checkpoint().info("model.layers." + std::to_string(l) + ".mlp.experts.0.gate_proj.weight").type;
    } else if constexpr (std::is_same_v<Source, random_source>) {
        if (!opt.weight_dtype) type = src.dtype(tensor_role::o_proj, l);
    } else if constexpr (std::is_same_v<Source, gguf_source>) {
        // As load_gguf holds them: every expert in the layouts of expert 0's parts, the router in f32.
        const gguf_expert_tensors t = src.expert_tensors(l);
        const io::moe_config& m = *c.moe;
        const index_t h = c.hidden_size, f = m.expert_intermediate_size;
        std::size_t b = packed_matrix::bytes_for(m.num_experts, h, io::dtype::f32) + sizeof(float) * static_cast<std::size_t>(m.num_experts);
        b += static_cast<std::size_t>(m.num_experts) *
             (packed_matrix::bytes_for(2 * f, h, detail::gguf_held_layout(detail::gate_up_parts(t, 0, f), opt.weight_dtype)) +
              packed_matrix::bytes_for(h, f, detail::gguf_held_layout(detail::down_parts(t, 0, h), opt.weight_dtype)));
        if (const index_t s = m.shared_intermediate_size; t.shared_gate)
            b += packed_matrix::bytes_for(2 * s, h, detail::gguf_held_layout(detail::shared_gate_up_parts(t, s), opt.weight_dtype)) +
                 packed_matrix::bytes_for(h, s, detail::gguf_held_layout(detail::shared_down_parts(t, h), opt.weight_dtype));
        return b;
    }
    return moe_mlp::bytes_for(c, type);
}

}  // namespace dlm::cpu
