// bench/roofline.hpp — what one CPU forward costs (multiply-adds × 2, weight bytes streamed) and the
// roofline sweep of dlm-bench-forward --roofline: the step kinds of the seeds' arithmetic-intensity
// picture, each at batch 1-64 through the batched forward, timed on this machine.
//
//   ar    one row per sequence over a `context`-position KV cache (causal), logits of the row
//   cdlm  a block of 4, 8, 16, 32 or 64 rows over the same cache (block-causal), logits of the block
//   full  the whole `canvas` recomputed (bidirectional, no cache), logits of every row
//
// Every point has its analytic intensity: FLOP per weight byte a forward streams, where the
// weights are read once per group of requests (transformer::group_rows) and "weight bytes" are
// weight_bytes() less an untied embedding table (of which a forward reads only its tokens' rows),
// by parameter share (exact where all matrices share one type). Points of more than `max_rows`
// rows keep their analytic intensity and are not run (the JSON marks them "measured": false).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <dlm/cpu/transformer.hpp>

#include "ceilings.hpp"

namespace dlm::bench {

/// Multiply-adds × 2 of one forward: the projections and MLP for every window row, the attention
/// (q·k and p·v) over the keys each row attends to, the head for the logits rows.
template <class Mask>
double forward_flops(const io::model_config& c, const canvas_layout& l, const forward_plan& p, const Mask& mask) {
    const double h = c.hidden_size, q = double(c.num_heads) * c.head_dim, kv = double(c.num_kv_heads) * c.head_dim, f = c.intermediate_size;
    const double per_row = h * (q + 2 * kv) + q * h + 3 * h * f;
    double mlp_rows = 0;  // mixture of experts: the router, k experts and the shared MLP per row instead of the dense MLP
    if (c.moe)
        for (index_t l = 0; l < c.num_layers; ++l)
            if (c.moe->is_moe_layer(l))
                mlp_rows += h * c.moe->num_experts + 3 * h * (double(c.moe->experts_per_token) * c.moe->expert_intermediate_size +
                                                              c.moe->shared_intermediate_size) - 3 * h * f;
    double keys = 0;
    for (index_t r = p.window_begin; r < p.window_end; ++r) keys += std::min(p.attend_end, mask.key_end(l, r));
    return 2.0 * (c.num_layers * (p.window_size() * per_row + 2.0 * keys * q) + p.window_size() * mlp_rows +
                  double(p.logits_rows()) * c.vocab_size * h);
}

/// Bytes of the weights one group of a forward streams: weight_bytes() less an untied embedding
/// table's share of the parameters (a tied one is the head, read in full). Mixtures of experts
/// count every expert.
inline double streamed_weight_bytes(const cpu::transformer& m) {
    const io::model_config& c = m.config();
    const double params = static_cast<double>(m.parameter_count());
    const double embedding = c.tie_word_embeddings ? 0.0 : double(c.vocab_size) * c.hidden_size;
    return static_cast<double>(m.weight_bytes()) * (params - embedding) / params;
}

/// Groups transformer::forward splits `batch` requests of `rows` window rows each into (whole
/// requests of at most group_rows() rows; a larger request alone): the weights are read per group.
inline index_t forward_groups(const cpu::transformer& m, index_t batch, index_t rows) {
    const index_t per_group = std::max<index_t>(1, m.group_rows() / std::max<index_t>(1, rows));
    return (batch + per_group - 1) / per_group;
}

/// Seconds of the best of `reps` forwards of `requests` (after one warm-up).
template <class Mask>
double time_forward(cpu::transformer& m, std::span<const forward_request<cpu::transformer::kv_cache>> requests, const Mask& mask,
                    std::span<float> logits, int reps) {
    m.forward(requests, mask, logits);
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        m.forward(requests, mask, logits);
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
}

struct roofline_options {
    index_t context = 512;   ///< cached positions of the ar and cdlm steps
    index_t canvas = 256;    ///< rows of a full step
    index_t max_rows = 1024; ///< rows of the largest forward run (batch × rows per sequence)
    int reps = 1;
    int threads = 1;
};

namespace detail {
/// One step kind at one batch: its analytic cost, and the timing where it is run.
template <class Mask>
nlohmann::json roofline_point(cpu::transformer& m, const roofline_options& o, const ceiling& c, const applied_peak& pk, const char* kind,
                              index_t block, index_t batch, const forward_request<cpu::transformer::kv_cache>& one, const Mask& mask) {
    const index_t rows = one.plan.window_size();
    const double flop = static_cast<double>(batch) * forward_flops(m.config(), one.layout, one.plan, mask);
    const double bytes = streamed_weight_bytes(m) * static_cast<double>(forward_groups(m, batch, rows));
    const double kv_bytes = one.cache ? static_cast<double>(batch) * static_cast<double>(m.kv_cache_bytes(o.context)) : 0.0;
    nlohmann::json j{{"batch", batch}, {"rows", batch * rows}, {"flop", flop}, {"weight_bytes", bytes}, {"kv_bytes", kv_bytes},
                     {"intensity", flop / bytes}, {"measured", false}};
    if (static_cast<std::int64_t>(batch) * rows > o.max_rows) return j;
    const std::vector<forward_request<cpu::transformer::kv_cache>> requests(static_cast<std::size_t>(batch), one);
    std::vector<float> logits(static_cast<std::size_t>(batch) * static_cast<std::size_t>(one.plan.logits_rows()) *
                              static_cast<std::size_t>(m.vocab_size()));
    const double s = time_forward(m, requests, mask, logits, o.reps);
    const double floor_s = c.read_bps > 0 ? bytes / c.read_bps : 0.0;
    j["measured"] = true;
    j["ms"] = s * 1e3;
    j["flops"] = flop / s;
    j["percent_of_peak"] = pk.rate > 0 ? 100.0 * flop / s / pk.rate : 0.0;
    j["floor_ms"] = floor_s * 1e3;
    j["floor_ratio"] = floor_s > 0 ? s / floor_s : 0.0;
    std::printf("  %-4s B=%-3d batch %3d: %5d rows %9.2f ms %8.1f GFLOP/s  %6.1f FLOP/B", kind, block, batch, batch * rows, s * 1e3, flop / s / 1e9,
                flop / bytes);
    if (pk.rate > 0) std::printf("  %5.1f %% of %s", 100.0 * flop / s / pk.rate, pk.name);
    if (floor_s > 0) std::printf("  floor x %.2f", s / floor_s);
    std::printf("\n");
    return j;
}
}  // namespace detail

/// The roofline sweep on the loaded model at o.threads threads: series ar (block 1), cdlm (blocks 4-64)
/// and full (o.canvas rows), batches 1, 2, 4, ..., 64.
inline nlohmann::json run_roofline(cpu::transformer& m, const roofline_options& o, const ceiling& c, const applied_peak& pk) {
    constexpr index_t largest_block = 64;
    set_threads(o.threads);
    const index_t vocab = m.vocab_size();
    std::vector<token_id> canvas(static_cast<std::size_t>(std::max(o.context + largest_block, o.canvas)));
    for (std::size_t i = 0; i < canvas.size(); ++i) canvas[i] = static_cast<token_id>((i * 7919 + 13) % static_cast<std::size_t>(vocab - 1));
    // One cache, filled once and only read by the steps (their plans store nothing), so every
    // request of a batch can share it.
    auto cache = m.make_kv_cache(o.context + largest_block);
    const canvas_layout lfill{o.context, largest_block, largest_block, false};
    const forward_request<cpu::transformer::kv_cache> fill{std::span<const token_id>(canvas.data(), static_cast<std::size_t>(lfill.size())), lfill,
                                                           forward_plan{0, o.context, 0, 0, 0, o.context, o.context}, &cache};
    m.forward(std::span(&fill, 1), block_causal_mask{}, std::span<float>());

    nlohmann::json series = nlohmann::json::array();
    auto sweep = [&](const char* kind, index_t block, const auto& mask, const forward_request<cpu::transformer::kv_cache>& one) {
        nlohmann::json points = nlohmann::json::array();
        for (index_t b = 1; b <= 64; b *= 2) points.push_back(detail::roofline_point(m, o, c, pk, kind, block, b, one, mask));
        series.push_back({{"kind", kind}, {"block", block}, {"points", points}});
    };
    for (const index_t block : {index_t{1}, index_t{4}, index_t{8}, index_t{16}, index_t{32}, index_t{64}}) {
        const canvas_layout l{o.context, block, block, false};
        const forward_request<cpu::transformer::kv_cache> one{std::span<const token_id>(canvas.data(), static_cast<std::size_t>(l.size())), l,
                                                              forward_plan{o.context, o.context + block, o.context, o.context + block, 0, 0,
                                                                           o.context + block},
                                                              &cache};
        sweep(block == 1 ? "ar" : "cdlm", block, block_causal_mask{}, one);
    }
    const canvas_layout lf{0, o.canvas, o.canvas, false};
    const forward_request<cpu::transformer::kv_cache> full{std::span<const token_id>(canvas.data(), static_cast<std::size_t>(o.canvas)), lf,
                                                           forward_plan{0, o.canvas, 0, o.canvas, 0, 0, o.canvas}, nullptr};
    sweep("full", o.canvas, bidirectional_mask{}, full);
    return {{"threads", o.threads}, {"context", o.context}, {"canvas", o.canvas}, {"max_rows", o.max_rows}, {"peak", pk.name},
            {"peak_rate", pk.rate}, {"read_bytes_per_s", c.read_bps}, {"series", series}};
}

}  // namespace dlm::bench
