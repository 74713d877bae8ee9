// bench_forward — the CPU transformer's forward (and one whole decode) against the machine's
// measured peaks, on a model folder or on a named shape with random weights.
//
//   dlm-bench-forward [--shape NAME | -m DIR] [--dtype keep|f32|bf16|f16|q8_0|q4_0|q4_k|q6_k|q4_k_m] [--canvas N] [--block N]
//                     [--cache N] [--threads LIST] [--reps N] [--decode] [--gen N] [--prompt N]
//                     [--kv f32|bf16] [--no-peak] [--bandwidth-mib N] [--json FILE] [--roofline [--roofline-rows N]]
//                     [--amx-vector-side[-only]]
//
//   --shape    100M (default), 168M, llada-8b, dream-7b, tiny, ... (bench/shapes.hpp): random weights;
//              diffusiongemma-26b-a4b[-16e]: DiffusionGemma's encode, canvas step and (--decode) generation
//              (bench/bench_gemma.hpp), in Q4_K_M blocks unless --dtype says otherwise
//              generated straight into --dtype (default bf16), no file needed; q8_0, q4_0, q4_k,
//              q6_k and q4_k_m hold them in GGUF blocks typed as llama.cpp's file type of that name
//              (quant/random_source.hpp: Q4_K_M's Q6_K head, attn_v and ffn_down)
//   -m DIR     a model folder (config.json + safetensors) or a .gguf file, held as stored unless --dtype converts;
//              a DiffusionGemma folder or diffusion-gemma file is loaded as dlm-generate loads it (with its tokenizer)
//   --canvas   positions of the "full" case: the whole canvas recomputed, bidirectional, logits of
//              every row (what llama.cpp's diffusion CLI computes per step) (default 256)
//   --block    rows of the "block" case: one block of queries over --cache cached positions,
//              block-causal, logits of the block's rows: a CDLM / prefix-cache step (32, 512)
//   --threads  thread counts to run each case at, e.g. 1,2 (default: OMP_NUM_THREADS)
//   --kv       the KV cache's element type, f32 (default) or bf16 (load_options::kv_dtype): the
//              attention's products read bf16 keys and values, for every case
//   --decode   also one whole cdlm-preset decode: a --prompt-token prompt (64), --gen slots (256),
//              blocks of --block, threshold 0.9, on the largest thread count
//   --verify-random SEED  with -m: check that the folder holds exactly the model
//              transformer::random(config, SEED, its type) (what dlm-make-checkpoint --seed SEED
//              writes): same logits, bit for bit, all finite, or exit 1
//   --verify-type T  with --verify-random: the reference holds llama.cpp's file type T (q8_0, q4_k_m, ...:
//              transformer::random(config, SEED, T), what dlm-make-checkpoint --format gguf --type T writes)
//
//   --amx-vector-side  also time each case on the AMX kernels with every tile instruction a no-op
//              (amx_vector_side.hpp; any CPU with AVX-512 BF16): what an AMX forward takes that no
//              tile unit speeds up (operands built, per-block steps, C's traffic, and the attention,
//              norms and softmax of every path), so a bound from below on it, measurable without tiles
//   --amx-vector-side-only  the same, and no other timing of the cases: a run to profile the
//              vector side alone (perf record -e cpu-clock ... --amx-vector-side-only --reps 200)
//   --no-peak  measure no ceilings (peaks, bandwidth): the % of peak and floor columns are left out
//   --bandwidth-mib N  the read-bandwidth buffer, MiB (default 1024; 0: no bandwidth, no floor)
//   --json FILE  every number of the run (ceilings, model, cases, decode, roofline) for tools
//              (tools/roofline.py draws the roofline from it)
//   --roofline the sweep of bench/roofline.hpp on the largest thread count: ar, cdlm (blocks 4-64)
//              and full (--canvas rows) at batch 1-64 over a --cache position cache, each point's
//              FLOP per weight byte and, up to --roofline-rows rows a forward (1024), its rate
//
// Printed: the kernel path (DLM_ISA forces a lower one); the ceilings at 1 thread and at each
// --threads count (bench/ceilings.hpp: f32 FMA, vdpbf16ps, AMX bf16 and int8 peaks, each thread
// its own chains, summed; read bandwidth, each thread its own slice); load time, weight bytes, the
// weights' product form and the bytes a forward streams (weight_bytes() less an untied embedding,
// by parameter share), resident memory (now and peak); then per case and thread count: ms per
// forward, GFLOP/s (matrix products and attention, multiply-adds × 2), the % of the peak measured
// at that thread count of the instruction the weights run on (AMX bf16 for amx-bf16, AMX int8 for
// amx-int8, vdpbf16ps for its form, f32 FMA for every other form), and "floor x": ms over the
// weight-streaming floor (streamed weight bytes / read bandwidth at that thread count).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <dlm/cache/caches.hpp>
#include <dlm/cpu/transformer.hpp>
#include <dlm/presets.hpp>

#include "amx_vector_side.hpp"
#include "../cli/files.hpp"
#include "../cli/model.hpp"
#include "args.hpp"
#include "ceilings.hpp"
#include "roofline.hpp"
#include "bench_gemma.hpp"
#include "shapes.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

using namespace dlm;
using clock_type = std::chrono::steady_clock;
using json = nlohmann::json;

namespace {

struct options {
    std::string shape = "100M", model_dir, dtype = "", json_path, kv = "f32";
    index_t canvas = 256, block = 32, cache = 512, gen = 256, prompt = 64, roofline_rows = 1024, bandwidth_mib = 1024;
    std::vector<int> threads;
    int reps = 3;
    bool decode = false, peak = true, roofline = false, dtype_given = false, amx_vector_side = false, vector_side_only = false;
    std::optional<std::uint64_t> verify_seed;
    std::optional<cpu::quant::file_type> verify_type;
};

std::string usage_text() {
    return "usage: dlm-bench-forward [--shape NAME | -m DIR] [--dtype keep|f32|bf16|f16|q8_0|q4_0|q4_k|q6_k|q4_k_m] [--canvas N] [--block N] [--cache N]\n"
           "          [--threads 1,2] [--reps N] [--decode] [--gen N] [--prompt N] [--kv f32|bf16] [--no-peak] [--bandwidth-mib N]\n"
           "          [--json FILE] [--roofline [--roofline-rows N]] [--verify-random SEED [--verify-type T]] [--amx-vector-side[-only]]\n"
           "  shapes: " + bench::shape_names() + "\n";
}

constexpr index_t most = 1 << 20;  // the largest count a flag takes

options parse(int argc, char** argv) {
    options o;
    bench::args a(argc, argv);
    while (a.next()) {
        if (a.is("--shape")) o.shape = a.value();
        else if (a.is("--model", "-m")) o.model_dir = a.path();
        else if (a.is("--dtype")) o.dtype = a.value();
        else if (a.is("--kv")) o.kv = a.value();
        else if (a.is("--canvas")) o.canvas = a.integer<index_t>(1, most);
        else if (a.is("--block")) o.block = a.integer<index_t>(1, most);
        else if (a.is("--cache")) o.cache = a.integer<index_t>(0, most);
        else if (a.is("--gen")) o.gen = a.integer<index_t>(1, most);
        else if (a.is("--prompt")) o.prompt = a.integer<index_t>(1, most);
        else if (a.is("--reps")) o.reps = a.integer(1, 1000);
        else if (a.is("--decode")) o.decode = true;
        else if (a.is("--no-peak")) o.peak = false;
        else if (a.is("--amx-vector-side")) o.amx_vector_side = true;
        else if (a.is("--amx-vector-side-only")) o.amx_vector_side = o.vector_side_only = true;
        else if (a.is("--json")) o.json_path = a.path();
        else if (a.is("--roofline")) o.roofline = true;
        else if (a.is("--roofline-rows")) o.roofline_rows = a.integer<index_t>(1, most);
        else if (a.is("--bandwidth-mib")) o.bandwidth_mib = a.integer<index_t>(0, most);
        else if (a.is("--verify-random")) o.verify_seed = a.integer<std::uint64_t>(0, std::numeric_limits<std::uint64_t>::max());
        else if (a.is("--verify-type")) {
            const std::string v = a.value();
            o.verify_type = cpu::quant::parse_file_type(v);
            if (!o.verify_type) throw invalid_parameter(a.flag(), "must be q8_0, q4_0, q4_k, q6_k or q4_k_m, not '" + v + "'");
        } else if (a.is("--threads")) o.threads = a.integers(1, cli::max_threads);
        else a.unknown();
    }
    if (o.model_dir.empty() && !bench::find_shape(o.shape))
        throw invalid_parameter("--shape", "unknown shape '" + o.shape + "' (" + bench::shape_names() + ")");
    o.dtype_given = !o.dtype.empty();
    if (o.dtype.empty()) o.dtype = o.model_dir.empty() ? "bf16" : "keep";
    const bool quantized = cpu::quant::parse_file_type(o.dtype).has_value();
    if (o.dtype != "keep" && o.dtype != "f32" && o.dtype != "bf16" && o.dtype != "f16" && !quantized)
        throw invalid_parameter("--dtype", "must be keep, f32, bf16, f16, q8_0, q4_0, q4_k, q6_k or q4_k_m, not '" + o.dtype + "'");
    if (quantized && !o.model_dir.empty()) throw invalid_parameter("--dtype", o.dtype + " is for random weights (--shape): -m keeps a file's blocks with --dtype keep");
    if (o.dtype == "keep" && o.model_dir.empty()) throw invalid_parameter("--dtype", "keep needs -m DIR (random weights have no stored type)");
    if (const char* refusal = bench::amx_vector_side_refusal(); o.amx_vector_side && *refusal != '\0')
        throw invalid_parameter("--amx-vector-side", refusal);
    if (o.kv != "f32" && o.kv != "bf16") throw invalid_parameter("--kv", "must be f32 or bf16, not '" + o.kv + "'");
    if (o.threads.empty()) o.threads.push_back(bench::max_threads());
    if (o.verify_seed && o.model_dir.empty()) throw invalid_parameter("--verify-random", "needs -m DIR");
    cli::check_writable(o.json_path);  // before the ceilings and the forwards, not after them
    if (o.verify_type && !o.verify_seed) throw invalid_parameter("--verify-type", "needs --verify-random SEED");
    return o;
}

std::optional<io::dtype> dtype_of(const std::string& s) {
    if (s == "f32") return io::dtype::f32;
    if (s == "bf16") return io::dtype::bf16;
    if (s == "f16") return io::dtype::f16;
    return std::nullopt;
}

/// What each case is compared with: the measured ceilings, the product form of the weights, the
/// weight bytes one forward streams; and whether to time the AMX kernels' vector side too.
struct reference {
    const bench::ceilings& ceil;
    std::string product;
    double weight_bytes;
    bool amx_vector_side = false;
    bool plain = true;  ///< false: --amx-vector-side-only, the forwards on this CPU's kernels are not timed
};

/// The best and the total seconds of `reps` forwards of `batch` after one warm-up (experts timed into `moe`).
template <class Mask, class Batch>
std::pair<double, double> time_forwards(cpu::transformer& m, const Batch& batch, const Mask& mask, std::vector<float>& logits, int reps,
                                        cpu::moe_timing& moe) {
    m.forward(batch, mask, logits);  // warm-up
    double best = 1e30, total = 0;
    m.time_experts(&moe);
    for (int r = 0; r < reps; ++r) {
        const auto t0 = clock_type::now();
        m.forward(batch, mask, logits);
        const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
        best = std::min(best, s);
        total += s;
    }
    m.time_experts(nullptr);
    return {best, total};
}

template <class Mask>
json bench_case(cpu::transformer& m, const char* label, const Mask& mask, const canvas_layout& l, const forward_plan& p,
                cpu::transformer::kv_cache* cache, int reps, const std::vector<int>& threads, const reference& ref) {
    std::vector<token_id> canvas(static_cast<std::size_t>(l.size()));
    for (std::size_t i = 0; i < canvas.size(); ++i) canvas[i] = static_cast<token_id>((i * 7919) % static_cast<std::size_t>(m.vocab_size() - 1));
    std::vector<float> logits(static_cast<std::size_t>(p.logits_rows()) * static_cast<std::size_t>(m.vocab_size()));
    const forward_request<cpu::transformer::kv_cache> rq{canvas, l, p, cache};
    const std::span<const forward_request<cpu::transformer::kv_cache>> batch(&rq, 1);
    const double flops = bench::forward_flops(m.config(), l, p, mask);
    json out = json::array();
    for (int t : threads) {
        bench::set_threads(t);
        cpu::moe_timing moe;  // mixture-of-experts models: where the MLP time goes, over all reps
        const auto [best, total] = ref.plain ? time_forwards(m, batch, mask, logits, reps, moe) : std::pair{0.0, 0.0};
        // The peak and bandwidth measured at t threads; where a count was not measured, one core's peak × t.
        const bench::ceiling c = ref.ceil.of(t);
        bench::applied_peak pk = bench::peak_for(c.pk, ref.product);
        if (pk.rate <= 0) pk.rate = bench::peak_for(ref.ceil.of(1).pk, ref.product).rate * t;
        const double percent = pk.rate > 0 && best > 0 ? 100.0 * flops / best / pk.rate : 0.0;
        const double floor_s = c.read_bps > 0 ? ref.weight_bytes / c.read_bps : 0.0;
        std::printf("  %-5s %4d rows x %4d keys, %d thread(s):", label, p.window_size(), p.attend_end, t);
        if (best > 0) {
            std::printf(" %9.2f ms  %7.1f GFLOP/s", best * 1e3, flops / best / 1e9);
            if (pk.rate > 0) std::printf("  %5.1f %% of peak (%s)", percent, pk.name);
            if (floor_s > 0) std::printf("  floor x %.2f (%.2f ms)", best / floor_s, floor_s * 1e3);
        }
        std::printf("\n");
        double vector_side = 0;
#if defined(__x86_64__)
        if (ref.amx_vector_side) {
            const bench::amx_vector_side on;
            m.forward(batch, mask, logits);  // warm-up
            vector_side = bench::best_of(reps, [&] { m.forward(batch, mask, logits); });
            std::printf("        amx vector side alone: %9.2f ms", vector_side * 1e3);
            const char* sep = " (";
            if (best > 0) std::printf("%s%.2f x this forward", std::exchange(sep, ", "), vector_side / best);
            if (floor_s > 0) std::printf("%sfloor x %.2f", std::exchange(sep, ", "), vector_side / floor_s);
            std::printf("%s\n", *sep == ',' ? ")" : "");
        }
#endif
        out.push_back({{"case", label}, {"rows", p.window_size()}, {"keys", p.attend_end}, {"threads", t}, {"ms", best * 1e3}, {"flop", flops},
                       {"flops", best > 0 ? flops / best : 0.0}, {"peak", pk.name}, {"peak_rate", pk.rate}, {"percent_of_peak", percent},
                       {"weight_bytes", ref.weight_bytes}, {"floor_ms", floor_s * 1e3}, {"floor_ratio", floor_s > 0 ? best / floor_s : 0.0},
                       {"amx_vector_side_ms", vector_side * 1e3}});
        if (moe.calls > 0) {
            const double experts = moe.router + moe.gather + moe.experts + moe.combine;
            std::printf("        experts: %.1f %% of the forward; of it router %.1f %%, gather %.1f %%, expert GEMMs %.1f %%, combine + shared %.1f %%\n",
                        100.0 * experts / total, 100.0 * moe.router / experts, 100.0 * moe.gather / experts, 100.0 * moe.experts / experts,
                        100.0 * moe.combine / experts);
        }
    }
    return out;
}

double gib(std::uint64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0 * 1024.0); }

/// --verify-random: whether `m` holds exactly transformer::random(config, seed, its type) (printed).
bool verify_random(cpu::transformer& m, const options& o) {
    const io::model_config& cfg = m.config();
    const auto type = m.weight_type() == "bf16" ? io::dtype::bf16 : m.weight_type() == "f16" ? io::dtype::f16 : io::dtype::f32;
    cpu::transformer ref = o.verify_type ? cpu::transformer::random(cfg, *o.verify_seed, *o.verify_type) : cpu::transformer::random(cfg, *o.verify_seed, type);
    const canvas_layout l{0, std::min<index_t>(o.canvas, 64), std::min<index_t>(o.canvas, 64), false};
    std::vector<token_id> canvas(static_cast<std::size_t>(l.size()));
    for (std::size_t i = 0; i < canvas.size(); ++i) canvas[i] = static_cast<token_id>((i * 31 + 7) % static_cast<std::size_t>(m.vocab_size()));
    const forward_plan p{0, l.size(), 0, l.size(), 0, 0, l.size()};
    auto logits = [&](cpu::transformer& t) {
        std::vector<float> out(static_cast<std::size_t>(l.size()) * static_cast<std::size_t>(t.vocab_size()));
        const forward_request<cpu::transformer::kv_cache> rq{canvas, l, p, nullptr};
        t.forward(std::span<const forward_request<cpu::transformer::kv_cache>>(&rq, 1), bidirectional_mask{}, out);
        return out;
    };
    const std::vector<float> got = logits(m);
    const bool same = got == logits(ref) && std::all_of(got.begin(), got.end(), [](float x) { return std::isfinite(x); });
    std::printf("verify: the folder %s transformer::random(config, %llu, %s) (logits %s)\n", same ? "holds exactly" : "does NOT hold",
                static_cast<unsigned long long>(*o.verify_seed), m.weight_type().c_str(), same ? "equal and finite" : "differ or not finite");
    return same;
}

/// --decode: one whole cdlm-preset decode on the largest thread count.
json run_decode(cpu::transformer& m, const options& o) {
    bench::set_threads(o.threads.back());
    std::vector<token_id> prompt(static_cast<std::size_t>(o.prompt));
    for (index_t i = 0; i < o.prompt; ++i) prompt[static_cast<std::size_t>(i)] = static_cast<token_id>((i * 7919 + 13) % (m.vocab_size() - 2));
    presets::cdlm<cpu::transformer> dec(m, block_causal_mask{o.block});
    generation_options g;
    g.gen_length = o.gen;
    const auto d0 = clock_type::now();
    const sequence_result r = dec.generate(prompt, g);
    const double secs = std::chrono::duration<double>(clock_type::now() - d0).count();
    const double per_forward = r.stats.forwards > 0 ? secs / r.stats.forwards : 0.0;
    std::printf("decode: cdlm, prompt %d, gen %d, blocks of %d, %d thread(s): %.1f s, %d forwards, %.2f tokens/forward, %.2f s/forward; "
                "peak resident %.2f GiB\n",
                o.prompt, o.gen, o.block, o.threads.back(), secs, r.stats.forwards,
                r.stats.forwards > 0 ? static_cast<double>(r.stats.committed) / r.stats.forwards : 0.0, per_forward, gib(cpu::peak_resident_memory()));
    return {{"prompt", o.prompt}, {"gen", o.gen}, {"block", o.block}, {"threads", o.threads.back()}, {"seconds", secs},
            {"forwards", r.stats.forwards}, {"committed", r.stats.committed}, {"seconds_per_forward", per_forward}};
}

cpu::transformer load_model(const options& o, std::string& what) {
    if (!o.model_dir.empty()) {
        what = o.model_dir;
        return cpu::transformer::load(o.model_dir, {.weight_dtype = dtype_of(o.dtype)});
    }
    const auto shape = bench::find_shape(o.shape);  // found: parse() checks the name
    const io::model_config cfg = io::parse_config(shape->config, o.shape);
    what = o.shape + " (random weights)";
    if (const auto ft = cpu::quant::parse_file_type(o.dtype)) return cpu::transformer::random(cfg, 1, *ft, 0.5f);
    return cpu::transformer::random(cfg, 1, *dtype_of(o.dtype), 0.5f);
}

/// -m naming a DiffusionGemma folder or diffusion-gemma GGUF file: loaded as dlm-generate loads it
/// (cli::load_diffusion_gemma: weights, tokenizer, chat format; --dtype f32 / bf16 / f16 converts,
/// keep holds the file's types), then the DiffusionGemma cases (bench/bench_gemma.hpp).
json run_gemma_checkpoint(const options& o, const bench::ceilings& ceil) {
    if (o.verify_seed) throw invalid_parameter("--verify-random", "checks the transformer's random checkpoints, not a DiffusionGemma one");
    bench::set_threads(o.threads.back());  // the load runs on the largest thread count of the run
    const cli::load_choice choice{o.dtype == "keep" ? "" : o.dtype, o.kv == "f32" ? "" : o.kv, "--kv"};
    cli::gemma_model g = cli::load_diffusion_gemma(o.model_dir, choice);
    if (o.prompt + g.model.canvas_length() > g.model.max_context())
        throw invalid_parameter("--prompt", std::to_string(o.prompt) + " and a canvas of " + std::to_string(g.model.canvas_length()) +
                                                " exceed the model's context of " + std::to_string(g.model.max_context()));
    const bench::gemma_bench_options go{"", o.dtype, o.threads, o.reps, o.prompt, o.decode};
    return bench::bench_gemma_model(g.model, o.model_dir, g.load_seconds, go, ceil);
}

/// Throws dlm::invalid_parameter naming the flag whose positions pass the model's context: a forward
/// there reads positions the model was not trained on (and a real decode refuses them).
void check_context(const options& o, index_t context) {
    const auto fits = [&](const char* flag, index_t n, const std::string& what) {
        if (n > context)
            throw invalid_parameter(flag, what + " is " + std::to_string(n) + " positions, more than the model's context of " + std::to_string(context));
    };
    fits("--cache", o.cache + o.block, "--cache + --block");
    fits("--canvas", o.canvas, "--canvas");
    if (o.decode) fits("--gen", o.prompt + o.gen, "--prompt + --gen");
}

/// --json FILE: the run's figures (nothing without a path).
void write_json(const json& out, const std::string& path) {
    if (path.empty()) return;
    cli::write_file(path, out.dump(2) + "\n");
    std::printf("wrote %s\n", path.c_str());
}

/// The model's line, its product form and what a forward streams; the load time and memory.
void print_model(const cpu::transformer& m, const std::string& what, const std::string& product, double streamed, double load_s) {
    const io::model_config& cfg = m.config();
    std::printf("model: %s: %.2fB parameters (hidden %d, %d layers, %d/%d heads, MLP %d, vocabulary %d), weights %s, %.2f GiB\n", what.c_str(),
                static_cast<double>(m.parameter_count()) / 1e9, cfg.hidden_size, cfg.num_layers, cfg.num_heads, cfg.num_kv_heads,
                cfg.intermediate_size, cfg.vocab_size, m.weight_type().c_str(), gib(m.weight_bytes()));
    const cpu::bf16_method bm = cpu::bf16_products();
    if (m.weight_type() == "bf16")
        std::printf("bf16 products: %s%s\n", product == "fma" ? "FMA form (pairs widened in registers)" : product.c_str(),
                    bm.dot_speedup > 0 ? (" (vdpbf16ps measured " + std::to_string(bm.dot_speedup).substr(0, 4) + "x the FMA form here)").c_str() : "");
    std::printf("products: %s; weights streamed per forward: %.3f GiB (%s)\n", product.c_str(), gib(static_cast<std::uint64_t>(streamed)),
                cfg.tie_word_embeddings ? "all of them: the tied embedding is the head" : "less the untied embedding table, by parameter share");
    const auto held = static_cast<double>(m.weight_bytes());
    std::printf("load: %.2f s (%.2f GB/s of weights held); resident %.2f GiB now, peak %.2f GiB (%.3f x the weights)\n", load_s,
                held / load_s / 1e9, gib(cpu::resident_memory()), gib(cpu::peak_resident_memory()), static_cast<double>(cpu::peak_resident_memory()) / held);
}

}  // namespace

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // full-size runs take minutes: show each line as it comes
    return bench::run_main("dlm-bench-forward", usage_text(), [&] {
        const options o = parse(argc, argv);
        const cpu::kernel_table& kt = cpu::kernels();
        std::printf("dlm CPU forward benchmark: kernels %s (%d-lane f32), best of %d\n", kt.name, kt.lanes, o.reps);
        json out{{"backend", "cpu"}, {"kernels", kt.name}, {"amx_unavailable_reason", std::string(cpu::amx_unavailable_reason())}};
        // The ceilings first, before the model takes the memory: peaks and read bandwidth at every thread count.
        const bench::ceilings ceil = o.peak ? bench::measure_ceilings(o.threads, true, static_cast<std::size_t>(o.bandwidth_mib)) : bench::ceilings{};
        if (o.peak) bench::print_ceilings(ceil, static_cast<std::size_t>(o.bandwidth_mib));
        out["ceilings"] = bench::to_json(ceil);

        if (const auto shape = bench::find_shape(o.shape); o.model_dir.empty() && shape && bench::is_diffusion_gemma(shape->config)) {
            // DiffusionGemma (bench/bench_gemma.hpp): Q4_K_M blocks unless --dtype says otherwise.
            const bench::gemma_bench_options g{o.shape, o.dtype_given ? o.dtype : "q4_k_m", o.threads, o.reps, o.prompt, o.decode};
            out["diffusion_gemma"] = bench::run_gemma_bench(shape->config, g, ceil);
            write_json(out, o.json_path);
            return 0;
        }
        if (!o.model_dir.empty() && cli::is_diffusion_gemma(o.model_dir)) {
            out["diffusion_gemma"] = run_gemma_checkpoint(o, ceil);
            write_json(out, o.json_path);
            return 0;
        }
        bench::set_threads(o.threads.back());  // the load runs on the largest thread count of the run
        const auto t0 = clock_type::now();
        std::string what;
        cpu::transformer m = load_model(o, what);
        check_context(o, m.max_context());
        m.set_kv_dtype(o.kv == "bf16" ? io::dtype::bf16 : io::dtype::f32);
        std::printf("KV cache: %s, %.1f KiB per position\n", o.kv.c_str(), static_cast<double>(m.kv_cache_bytes(1024) - m.kv_cache_bytes(0)) / 1024 / 1024);
        const double load_s = std::chrono::duration<double>(clock_type::now() - t0).count();
        const io::model_config& cfg = m.config();
        const reference ref{ceil, bench::weight_product(m.weight_type()), bench::streamed_weight_bytes(m), o.amx_vector_side, !o.vector_side_only};
        print_model(m, what, ref.product, ref.weight_bytes, load_s);
        out["model"] = {{"what", what}, {"parameters", m.parameter_count()}, {"hidden", cfg.hidden_size}, {"layers", cfg.num_layers},
                        {"heads", cfg.num_heads}, {"kv_heads", cfg.num_kv_heads}, {"mlp", cfg.intermediate_size}, {"vocab", cfg.vocab_size},
                        {"weight_type", m.weight_type()}, {"weight_bytes", m.weight_bytes()}, {"streamed_weight_bytes", ref.weight_bytes},
                        {"product", ref.product}, {"load_seconds", load_s}, {"kv_element", o.kv}};
        if (o.verify_seed && !verify_random(m, o)) return 1;

        // block: a prefix-cache step of one block after "fill" stored the cached positions' K/V.
        const canvas_layout lb{o.cache, o.block, o.block, false};
        const block_causal_mask bc{o.block};
        auto cache = m.make_kv_cache(lb.size());
        json cases = bench_case(m, "fill", bc, lb, prefix_cache{}.plan(bc, lb, {0, 0}), &cache, 1, {o.threads.back()}, ref);
        for (json& j : bench_case(m, "block", bc, lb, prefix_cache{}.plan(bc, lb, {0, 1}), &cache, o.reps, o.threads, ref)) cases.push_back(j);
        // full: the whole canvas, bidirectional, logits of every row.
        const canvas_layout lf{0, o.canvas, o.canvas, false};
        for (json& j : bench_case(m, "full", bidirectional_mask{}, lf, forward_plan{0, o.canvas, 0, o.canvas, 0, 0, o.canvas}, nullptr, o.reps, o.threads, ref))
            cases.push_back(j);
        out["cases"] = cases;
        std::printf("resident after the forwards: %.2f GiB, peak %.2f GiB\n", gib(cpu::resident_memory()), gib(cpu::peak_resident_memory()));

        if (o.decode) out["decode"] = run_decode(m, o);
        if (o.roofline) {
            const int t = o.threads.back();
            const bench::ceiling c = ceil.of(t);
            std::printf("roofline: %d thread(s), context %d, canvas %d, at most %d rows a forward (larger points: intensity only)\n", t, o.cache,
                        o.canvas, o.roofline_rows);
            out["roofline"] = bench::run_roofline(m, {o.cache, o.canvas, o.roofline_rows, o.reps, t}, c, bench::peak_for(c.pk, ref.product));
        }
        write_json(out, o.json_path);
        return 0;
    });
}
