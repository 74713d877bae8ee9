// bench/bench_gemma.hpp — dlm-bench-forward on a DiffusionGemma shape (--shape diffusiongemma-26b-a4b:
// random weights, Q4_K_M blocks unless --dtype says otherwise) or checkpoint (-m, a folder or a
// diffusion-gemma GGUF file, loaded as dlm-generate loads it), then at each thread count
//   encode  the prompt through the encoder (causal, storing K/V)
//   step    one decoder step: the 256-token canvas, bidirectional, reading the encoded prompt, with
//           the previous step's logits as self-conditioning (the form of every step but a canvas' first)
// and with --decode one whole generation by presets::diffusion_gemma (steps capped at 48 a canvas, as
// the reference's max_denoising_steps). Each line gives where the decoder's time goes (projections,
// attention, dense MLP, experts, self-conditioning, head), the rate against the measured peak and the
// time against the weight-streaming floor: a step reads every matrix (256 rows pick 8 of the 128
// experts each, so all experts are read) and the transposed embedding, weight_bytes() in all.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <dlm/cpu/diffusion_gemma.hpp>
#include <dlm/engine.hpp>
#include <dlm/presets.hpp>

#include "ceilings.hpp"
#include "peak.hpp"

namespace dlm::bench {

struct gemma_bench_options {
    std::string shape, dtype;  ///< dtype: f32, f16, bf16 or a file type (q4_k_m, ...)
    std::vector<int> threads;
    int reps = 3;
    index_t prompt = 64;
    bool decode = false;
};

/// The weight spec `dtype` names; throws invalid_parameter naming --dtype.
[[nodiscard]] inline cpu::weight_spec gemma_weight_spec(const std::string& dtype) {
    if (const auto f = cpu::quant::parse_file_type(dtype)) return *f;
    if (dtype == "f32") return io::dtype::f32;
    if (dtype == "bf16") return io::dtype::bf16;
    if (dtype == "f16") return io::dtype::f16;
    throw invalid_parameter("--dtype", "'" + dtype + "' is not f32, f16, bf16, q8_0, q4_0, q4_k, q6_k or q4_k_m");
}

/// Multiply-adds × 2 of one decoder step over `rows` canvas rows reading `context` encoded positions.
[[nodiscard]] inline double gemma_step_flops(const io::diffusion_gemma_config& c, index_t rows, index_t context, bool self_conditioning) {
    const double h = c.hidden_size, f = c.intermediate_size, v = c.vocab_size;
    double per_row = 0, attention = 0;
    for (const io::gemma_layer& l : c.layers) {
        const double q = double(c.num_heads) * l.head_dim, kv = double(l.kv_heads) * l.head_dim;
        per_row += h * (q + kv * (l.k_eq_v ? 1 : 2)) + q * h + 3 * h * f + h * c.num_experts +
                   3 * h * double(c.moe_intermediate_size) * c.experts_per_token;
        const double keys = (l.sliding ? std::min<double>(context, c.sliding_window - 1) : context) + rows;
        attention += 2 * q * keys * rows;
    }
    per_row += h * v + (self_conditioning ? v * h + 3 * h * f : 0);
    return 2 * (rows * per_row + attention);
}

/// "projections 9.1 %, attention 3.0 %, ..." of the decoder's timed phases.
inline void print_gemma_split(const cpu::gemma_timing& t) {
    const double d = t.total() - t.encoder;
    if (d <= 0) return;
    std::printf("        decoder time: projections %.1f %%, attention %.1f %%, dense MLP %.1f %%, experts %.1f %%, self-conditioning %.1f %%, head %.1f %%\n",
                100 * t.projections / d, 100 * t.attention / d, 100 * t.dense_mlp / d, 100 * t.experts / d, 100 * t.self_conditioning / d,
                100 * t.head / d);
}

[[nodiscard]] inline nlohmann::json gemma_split_json(const cpu::gemma_timing& t) {
    return {{"encoder", t.encoder}, {"projections", t.projections}, {"attention", t.attention}, {"dense_mlp", t.dense_mlp},
            {"experts", t.experts}, {"self_conditioning", t.self_conditioning}, {"head", t.head}, {"decodes", t.decodes}};
}

/// The benchmark's token for `k`: past the first three ids (pad, eos, bos), below 250,003 and inside
/// the model's vocabulary (a small checkpoint's too).
[[nodiscard]] inline token_id gemma_bench_token(const cpu::diffusion_gemma& m, std::size_t k) {
    const auto span = std::min<std::size_t>(250000, static_cast<std::size_t>(m.vocab_size()) - 3);
    return static_cast<token_id>(3 + k % span);
}

/// One canvas step (and the prompt's encoding) at `threads`, best of `reps`.
[[nodiscard]] inline nlohmann::json gemma_step_case(cpu::diffusion_gemma& m, const gemma_bench_options& o, int threads, const ceiling& c,
                                                    const applied_peak& pk) {
    using clock = std::chrono::steady_clock;
    set_threads(threads);
    const index_t n = m.canvas_length(), v = m.vocab_size();
    std::vector<token_id> prompt(static_cast<std::size_t>(o.prompt)), canvas(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = gemma_bench_token(m, i * 7919);
    for (std::size_t i = 0; i < canvas.size(); ++i) canvas[i] = gemma_bench_token(m, i * 104729);
    auto ctx = m.new_context(o.prompt + n);
    const auto e0 = clock::now();
    m.encode(ctx, prompt);
    const double encode_s = std::chrono::duration<double>(clock::now() - e0).count();
    std::vector<float> sc(static_cast<std::size_t>(n) * static_cast<std::size_t>(v)), logits(sc.size());
    m.decode(ctx, canvas, nullptr, sc);  // the first step, and the warm-up
    cpu::gemma_timing t;
    m.time_phases(&t);
    double best = 1e30;
    for (int r = 0; r < o.reps; ++r) {
        const auto t0 = clock::now();
        m.decode(ctx, canvas, sc.data(), logits);
        best = std::min(best, std::chrono::duration<double>(clock::now() - t0).count());
    }
    m.time_phases(nullptr);
    const double flops = gemma_step_flops(m.config(), n, o.prompt, true), bytes = static_cast<double>(m.weight_bytes());
    const double floor_s = c.read_bps > 0 ? bytes / c.read_bps : 0.0, rate = pk.rate > 0 ? pk.rate : 0.0;
    std::printf("  encode %4d tokens, %d thread(s): %9.1f ms\n", o.prompt, threads, encode_s * 1e3);
    std::printf("  step   %4d rows x %4d keys, %d thread(s): %9.1f ms  %7.1f GFLOP/s", n, o.prompt + n, threads, best * 1e3, flops / best / 1e9);
    if (rate > 0) std::printf("  %5.1f %% of peak (%s)", 100 * flops / best / rate, pk.name);
    if (floor_s > 0) std::printf("  floor x %.2f (%.0f ms)", best / floor_s, floor_s * 1e3);
    std::printf("\n");
    print_gemma_split(t);
    return {{"case", "step"}, {"threads", threads}, {"rows", n}, {"context", o.prompt}, {"encode_ms", encode_s * 1e3}, {"ms", best * 1e3},
            {"flop", flops}, {"peak", pk.name}, {"peak_rate", rate}, {"weight_bytes", bytes}, {"floor_ms", floor_s * 1e3},
            {"floor_ratio", floor_s > 0 ? best / floor_s : 0.0}, {"split_seconds", gemma_split_json(t)}};
}

/// One whole generation of one canvas by presets::diffusion_gemma at `threads`.
[[nodiscard]] inline nlohmann::json gemma_decode_case(cpu::diffusion_gemma& m, const gemma_bench_options& o, int threads) {
    set_threads(threads);
    std::vector<token_id> prompt(static_cast<std::size_t>(o.prompt));
    for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = gemma_bench_token(m, i * 7919);
    presets::diffusion_gemma<cpu::diffusion_gemma> dec(m, block_causal_mask{}, prefix_cache{}, entropy_bound_schedule{}, sdar_sampler(1.f));
    cpu::gemma_timing t;
    m.time_phases(&t);
    const auto t0 = std::chrono::steady_clock::now();
    const sequence_result r = dec.generate(prompt, {.gen_length = m.canvas_length(), .seed = 1});
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    m.time_phases(nullptr);
    std::printf("  decode %4d tokens, %d thread(s): %9.1f s, %d forwards (%.2f s each), %.2f tokens/forward; encoder %.1f %% of it\n",
                m.canvas_length(), threads, secs, r.stats.forwards, r.stats.forwards > 0 ? secs / r.stats.forwards : 0.0,
                r.stats.forwards > 0 ? double(r.stats.committed) / r.stats.forwards : 0.0, 100 * t.encoder / secs);
    print_gemma_split(t);
    return {{"case", "decode"}, {"threads", threads}, {"gen", m.canvas_length()}, {"seconds", secs}, {"forwards", r.stats.forwards},
            {"committed", r.stats.committed}, {"split_seconds", gemma_split_json(t)}};
}

/// The DiffusionGemma benchmark of a model in hand (`what` names it, `load_s` its load): steps, decodes.
[[nodiscard]] inline nlohmann::json bench_gemma_model(cpu::diffusion_gemma& m, const std::string& what, double load_s, const gemma_bench_options& o,
                                                      const ceilings& ceil) {
    const io::diffusion_gemma_config& cfg = m.config();
    const double gib = 1024.0 * 1024.0 * 1024.0;
    std::printf("model: %s: hidden %d, %d layers, %d experts of %d (%d a token), vocabulary %d, canvas %d; weights %s, %.2f GiB\n",
                what.c_str(), cfg.hidden_size, cfg.num_layers, cfg.num_experts, cfg.moe_intermediate_size, cfg.experts_per_token, cfg.vocab_size,
                cfg.canvas_length, m.weight_type().c_str(), static_cast<double>(m.weight_bytes()) / gib);
    std::printf("load: %.1f s; resident %.2f GiB now, peak %.2f GiB\n", load_s, static_cast<double>(cpu::resident_memory()) / gib,
                static_cast<double>(cpu::peak_resident_memory()) / gib);
    const std::string product = weight_product(m.weight_type());  // a file type's blocks: the quantized form
    nlohmann::json out{{"model", {{"what", what}, {"shape", o.shape}, {"weight_type", m.weight_type()}, {"weight_bytes", m.weight_bytes()},
                                  {"load_seconds", load_s}, {"peak_resident_bytes", cpu::peak_resident_memory()}, {"product", product}}}};
    nlohmann::json cases = nlohmann::json::array();
    for (const int t : o.threads) {
        const ceiling c = ceil.of(t);
        applied_peak pk = peak_for(c.pk, product);
        if (pk.rate <= 0) pk.rate = peak_for(ceil.of(1).pk, product).rate * t;
        cases.push_back(gemma_step_case(m, o, t, c, pk));
        if (o.decode) cases.push_back(gemma_decode_case(m, o, t));
    }
    out["cases"] = cases;
    std::printf("resident after the forwards: %.2f GiB, peak %.2f GiB\n", static_cast<double>(cpu::resident_memory()) / gib,
                static_cast<double>(cpu::peak_resident_memory()) / gib);
    return out;
}

/// The DiffusionGemma benchmark of `config` (a shape's config.json): random weights of o.dtype, then bench_gemma_model.
[[nodiscard]] inline nlohmann::json run_gemma_bench(const nlohmann::json& config, const gemma_bench_options& o, const ceilings& ceil) {
    const io::diffusion_gemma_config cfg = io::parse_diffusion_gemma_config(config, o.shape);
    const auto t0 = std::chrono::steady_clock::now();
    cpu::diffusion_gemma m = cpu::diffusion_gemma::random(cfg, 1, gemma_weight_spec(o.dtype));
    const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return bench_gemma_model(m, o.shape + " (random weights)", load_s, o, ceil);
}

}  // namespace dlm::bench
