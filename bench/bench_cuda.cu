// bench_cuda — the CUDA backend on a Dream-7B-shaped model with random bf16 weights (made on the
// device; no file), against ceilings the same program measures.
//
//   dlm-bench-cuda [--json FILE] [--prompt 128] [--gen 256] [--block 32] [--batches 1,8,64]
//                  [--llada-batches 1,8] [--host-batches 1,8] [--layers N] [--quick] [--gemm PATH] [--attention PATH] [--kv f32|bf16]
//   dlm-bench-cuda --gemm-sweep [--sweep-rows 1,2,8,16,33,64,264] [--sweep-shapes q/k/v,o,gate/up,down,head] [--profile] [--json FILE]
//   dlm-bench-cuda --profile [--profile-only ar|cdlm] [--gemm PATH] [--attention PATH] [--attention-splits N] [--kv f32|bf16]
//                  [--json FILE]
//
// 1. Ceilings: device-to-device copy bandwidth (cudaMemcpyAsync of 2 GiB, bytes read + written per
//    second) and the f16 and bf16 matrix rates (cuBLAS 8192³ products, f32 accumulation).
// 2. Forwards, per batch: an AR step (causal, one row over the cached prefix), a CDLM step (block-causal,
//    the B rows of a mid-generation block over the cached prefix: prefix_cache's steady state) and a
//    full-diffusion step (the whole canvas recomputed, logits for one block: LLaDA / no_cache). For each:
//    ms per forward, FLOP (matrix products + attention + head), bytes (weights + KV read), arithmetic
//    intensity, achieved TFLOP/s, and the bandwidth floor = weight bytes / copy bandwidth.
// 3. Decoding: presets::cdlm on the device decoder at each batch (tokens/s, forwards, tokens per
//    forward), at --host-batches the same without CUDA graphs and on the host decoder (logits copied
//    to the host each step), and presets::llada (full recompute, steps = gen length) at
//    --llada-batches, same prompts.
// 4. --json: everything above plus the analytic roofline series (AR, full diffusion, CDLM for blocks
//    4/16/32 and batches 1-128) for tools/roofline.py.
// 5. --gemm PATH (cublas, lt, skinny, tc, auto; default: DLM_CUDA_GEMM, else auto): the GEMM path of the
//    model for everything above (docs/cuda.md, "GEMM paths").
// 6. --attention PATH (simt, tc, auto; default: DLM_CUDA_ATTENTION, else auto): the attention kernel
//    (docs/cuda.md, "The attention"); printed and in the JSON as "attention_path" (what auto resolves to).
//    --attention-splits N (1-16; default 16): the most blocks a tile's keys are split over
//    (set_attention_split_limit), to measure the split heuristic.
// 7. --kv f32|bf16 (default f32): the KV cache's element type, dlm::cuda::transformer (f32 keys and
//    values) or dlm::cuda::transformer_bf16_kv (bf16: half the cache's bytes); printed and in the JSON as
//    "kv_element". Any other value is refused (dlm::invalid_parameter naming --kv).
// --gemm-sweep (cuda_gemm_sweep.cuh): the ceilings, then every GEMM path on Dream-7B's linear layers for
// the --sweep-rows row counts (whatever --gemm says); no model. --profile (cuda_profile.cuh): the ceilings, then the phases of
// one AR and one CDLM forward at batch 1 with the model's GEMM path. Either replaces 2-4.
// Exit code 77 when there is no CUDA device.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cuda_bench_util.cuh"
#include "cuda_gemm_sweep.cuh"
#include "cuda_profile.cuh"

using namespace dlm;
using namespace dlm_bench_cuda;
using json = nlohmann::json;

namespace {

struct options {
    std::string json_path;
    index_t prompt = 128, gen = 256, block = 32;
    std::vector<index_t> batches{1, 8, 64}, llada_batches{1, 8}, host_batches{1, 8};
    index_t layers = 28;
    bool quick = false;
    bool gemm_sweep = false, profile = false;
    std::string profile_only;  // --profile-only ar|cdlm: that step alone
    std::vector<index_t> sweep_rows{1, 2, 8, 16, 33, 64, 264};
    std::vector<std::string> sweep_shapes;  // --sweep-shapes: these shapes only (default: all)
    std::optional<dlm::cuda::gemm_path> gemm;
    std::optional<dlm::cuda::attention_path> attention;
    std::optional<index_t> attention_splits;  // --attention-splits N: the model's split limit
    bool kv_bf16 = false;  // --kv bf16: dlm::cuda::transformer_bf16_kv
};

/// The comma-separated items of s.
std::vector<std::string> split_names(const std::string& s) {
    std::vector<std::string> v;
    std::size_t at = 0;
    while (at < s.size()) {
        const std::size_t comma = s.find(',', at);
        v.push_back(s.substr(at, comma - at));
        if (comma == std::string::npos) break;
        at = comma + 1;
    }
    return v;
}

std::vector<index_t> parse_list(const std::string& s) {
    std::vector<index_t> v;
    for (const std::string& item : split_names(s)) v.push_back(static_cast<index_t>(std::stoi(item)));
    return v;
}

options parse(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) throw invalid_parameter(a, "needs a value");
            return argv[++i];
        };
        if (a == "--json") o.json_path = next();
        else if (a == "--prompt") o.prompt = std::stoi(next());
        else if (a == "--gen") o.gen = std::stoi(next());
        else if (a == "--block") o.block = std::stoi(next());
        else if (a == "--batches") o.batches = parse_list(next());
        else if (a == "--llada-batches") o.llada_batches = parse_list(next());
        else if (a == "--host-batches") o.host_batches = parse_list(next());
        else if (a == "--layers") o.layers = std::stoi(next());
        else if (a == "--quick") o.quick = true;
        else if (a == "--gemm-sweep") o.gemm_sweep = true;
        else if (a == "--sweep-rows") o.sweep_rows = parse_list(next());
        else if (a == "--sweep-shapes") o.sweep_shapes = split_names(next());
        else if (a == "--profile") o.profile = true;
        else if (a == "--profile-only") {
            o.profile = true;
            o.profile_only = next();
            if (o.profile_only != "ar" && o.profile_only != "cdlm")
                throw invalid_parameter("--profile-only", "the step to profile must be ar or cdlm, got \"" + o.profile_only + "\"");
        }
        else if (a == "--gemm") o.gemm = dlm::cuda::parse_gemm_path(next(), "--gemm");
        else if (a == "--attention") o.attention = dlm::cuda::parse_attention_path(next(), "--attention");
        else if (a == "--attention-splits") o.attention_splits = std::stoi(next());  // the model checks the range
        else if (a == "--kv") {
            const std::string kv = next();
            if (kv != "f32" && kv != "bf16") throw invalid_parameter("--kv", "the KV cache's element type must be f32 or bf16, got \"" + kv + "\"");
            o.kv_bf16 = kv == "bf16";
        }
        else throw invalid_parameter(a, "unknown option (see the header of bench/bench_cuda.cu)");
    }
    return o;
}

/// FLOP and bytes of one forward, counted from its shapes.
struct cost {
    double flop = 0, bytes = 0;
    [[nodiscard]] double intensity() const { return bytes > 0 ? flop / bytes : 0; }
};

struct model_sizes {
    double per_row_flop;   // matrix products of one window row, all layers
    double head_flop;      // output head of one logits row
    double attn_flop;      // attention per (row, attended key), all layers
    double kv_bytes;       // K and V of one position, all layers
    double weight_bytes;
};

model_sizes sizes_of(const io::model_config& c, double weight_bytes, double element_bytes) {
    const double h = c.hidden_size, q = static_cast<double>(c.num_heads) * c.head_dim, kv = static_cast<double>(c.num_kv_heads) * c.head_dim,
                 f = c.intermediate_size, L = c.num_layers;
    return {2.0 * L * (h * (q + 2 * kv) + q * h + 3.0 * h * f), 2.0 * h * c.vocab_size, 4.0 * q * L, 2.0 * kv * L * element_bytes, weight_bytes};
}

/// `rows` window rows attending `keys` keys in all, `cached` positions read from the cache and
/// `logit_rows` through the head, for a whole batch.
cost cost_of(const model_sizes& m, double rows, double keys, double cached, double logit_rows) {
    return {rows * m.per_row_flop + keys * m.attn_flop + logit_rows * m.head_flop, m.weight_bytes + cached * m.kv_bytes};
}

/// Keys attended by the plan's rows under the mask (the attention kernel's work).
template <class Mask>
double attended_keys(const Mask& mask, const canvas_layout& l, const forward_plan& p) {
    double n = 0;
    for (index_t q = p.window_begin; q < p.window_end; ++q) {
        const index_t end = std::min(p.attend_end, mask.key_end(l, q));
        for (index_t k = 0; k < end; ++k) n += mask.allowed(l, q, k) ? 1 : 0;
    }
    return n;
}

/// Times one step kind at one batch: `plan_of(layout)` after `prepare(caches)`.
template <class Model, class Mask, class Plan>
json time_forward(Model& m, const model_sizes& ms, const ceilings& ceil, const char* kind, const Mask& mask, index_t batch,
                  const canvas_layout& l, Plan plan_of, bool needs_cache) {
    const forward_step<Model> step(m, mask, batch, l, plan_of, needs_cache);
    const forward_plan& plan = step.plan;
    const std::span<const forward_request<typename Model::kv_cache>> rq = step.span();
    double s = time_on(m.stream(), 1, 1, [&] { (void)m.forward_device(rq, mask); });
    const int reps = std::clamp(static_cast<int>(1.0 / std::max(s, 1e-6)), 3, 30);
    s = time_on(m.stream(), 1, reps, [&] { (void)m.forward_device(rq, mask); });

    const double rows = static_cast<double>(batch) * plan.window_size();
    const double keys = static_cast<double>(batch) * attended_keys(mask, l, plan);
    const double cached = static_cast<double>(batch) * (needs_cache ? std::max(0, plan.attend_end - plan.window_size()) : 0);
    const cost c = cost_of(ms, rows, keys, cached, static_cast<double>(batch) * plan.logits_rows());
    const double floor_ms = ms.weight_bytes / (ceil.copy_gbs * 1e9) * 1e3;
    json j{{"kind", kind},
           {"batch", batch},
           {"rows", rows},
           {"ms", s * 1e3},
           {"flop", c.flop},
           {"bytes", c.bytes},
           {"intensity", c.intensity()},
           {"tflops", c.flop / s / 1e12},
           {"bandwidth_floor_ms", floor_ms},
           {"floor_fraction", floor_ms / (s * 1e3)}};
    std::printf("  %-5s batch %3d  rows %6.0f  %9.3f ms  %8.1f TFLOP/s  AI %8.1f  floor %.3f ms (%.0f%% of it)\n", kind, batch, rows, s * 1e3,
                c.flop / s / 1e12, c.intensity(), floor_ms, 100.0 * floor_ms / (s * 1e3));
    return j;
}

/// `graphs`: false runs a device decoder without CUDA graphs (the launch-overhead comparison).
template <class Decoder, class Model, class... Options>
json time_decode(Model& m, const char* name, index_t batch, const options& o, bool graphs, Options... policy_options) {
    const auto prompts = prompts_for(batch, o.prompt, ordinary_tokens(m), 11);
    Decoder d(m, policy_options...);
    if constexpr (requires { d.use_graphs(false); }) d.use_graphs(graphs && d.graphs_enabled());
    (void)d.generate(std::span<const std::vector<token_id>>(prompts.data(), 1), {o.block, 1});  // warm-up
    const auto t0 = std::chrono::steady_clock::now();
    const decode_result r = d.generate(std::span<const std::vector<token_id>>(prompts), {o.gen, 1});
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double committed = 0, seq_forwards = 0;
    for (const auto& seq : r.sequences) {
        committed += seq.stats.committed;
        seq_forwards += seq.stats.forwards;
    }
    json j{{"decoder", name},
           {"batch", batch},
           {"seconds", s},
           {"forwards", r.stats.forwards},
           {"tokens", committed},
           {"tokens_per_second", committed / s},
           {"tokens_per_forward", committed / std::max(1.0, seq_forwards)},
           {"ms_per_forward", s * 1e3 / std::max(1, r.stats.forwards)},
           {"model_seconds", r.stats.model_seconds},
           {"overhead_seconds", r.stats.overhead_seconds}};
    std::printf("  %-24s batch %3d  %8.3f s  %5d forwards  %7.0f tokens  %9.1f tokens/s  TPF %.2f  %.2f ms/forward\n", name, batch, s,
                r.stats.forwards, committed, committed / s, committed / std::max(1.0, seq_forwards), s * 1e3 / std::max(1, r.stats.forwards));
    return j;
}

json roofline_series(const model_sizes& ms, const options& o) {
    json series = json::array();
    const double ctx = o.prompt + o.gen / 2.0;  // mid-generation context
    for (const char* kind : {"ar", "full", "cdlm"}) {
        for (const index_t block : {4, 16, 32}) {
            if (std::string(kind) == "ar" && block != 4) continue;  // AR has no block
            json points = json::array();
            for (index_t b = 1; b <= 128; b *= 2) {
                cost c;
                if (std::string(kind) == "ar") c = cost_of(ms, b, b * (ctx + 1), b * ctx, b);
                else if (std::string(kind) == "full") c = cost_of(ms, b * (o.prompt + o.gen), b * double(o.prompt + o.gen) * (o.prompt + o.gen), 0, b * double(block));
                else c = cost_of(ms, b * double(block), b * double(block) * (ctx + block), b * ctx, b * double(block));
                points.push_back({{"batch", b}, {"intensity", c.intensity()}, {"flop", c.flop}, {"bytes", c.bytes}});
            }
            series.push_back({{"kind", kind}, {"block", std::string(kind) == "ar" ? 1 : block}, {"points", points}});
        }
    }
    return series;
}

/// 2-4 (or --profile) on the benchmark's model, with the KV cache --kv chose: Model is
/// dlm::cuda::transformer or dlm::cuda::transformer_bf16_kv.
template <benchmarked_model Model>
int run_model(const options& o, const io::model_config& cfg, const ceilings& ceil, json& out, const std::function<void()>& write_json,
              int sweep_failures) {
    const auto t_init = std::chrono::steady_clock::now();
    Model m = Model::random(cfg, 2024);
    if (o.gemm) m.set_gemm_path(*o.gemm);
    if (o.attention) m.set_attention_path(*o.attention);
    if (o.attention_splits) m.set_attention_split_limit(*o.attention_splits);
    const auto attention = dlm::cuda::resolve_attention_path(m.attention_path(), false, cfg.head_dim);  // bf16 weights
    const double init_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_init).count();
    const model_sizes ms = sizes_of(cfg, static_cast<double>(m.weight_bytes()), sizeof(typename Model::kv_element));
    const std::string kv_name(dlm::cuda::element<typename Model::kv_element>::name);
    std::printf("model: %d layers, hidden %d, %d/%d heads, MLP %d, vocabulary %d; %.2f GB of bf16 weights (made in %.1f s)\n", cfg.num_layers,
                cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.intermediate_size, cfg.vocab_size, ms.weight_bytes / 1e9, init_s);
    std::printf("GEMM path: %s (auto runs skinny or cublas per shape: dlm::cuda::auto_gemm_path)\n", std::string(dlm::cuda::name(m.gemm_path())).c_str());
    std::printf("attention: %s (%s asked; auto runs tc for bf16 models with heads of 32, 64 or 128), keys split over at most %d blocks\n",
                std::string(dlm::cuda::name(attention)).c_str(), std::string(dlm::cuda::name(m.attention_path())).c_str(), m.attention_split_limit());
    std::printf("KV cache: %s keys and values\n", kv_name.c_str());
    out["gemm_path"] = std::string(dlm::cuda::name(m.gemm_path()));
    out["attention_path"] = std::string(dlm::cuda::name(attention));
    out["attention_split_limit"] = m.attention_split_limit();
    out["kv_element"] = kv_name;
    out["model"] = {{"layers", cfg.num_layers}, {"hidden", cfg.hidden_size}, {"heads", cfg.num_heads}, {"kv_heads", cfg.num_kv_heads},
                    {"intermediate", cfg.intermediate_size}, {"vocab", cfg.vocab_size}, {"weight_bytes", ms.weight_bytes}};
    out["shape"] = {{"prompt", o.prompt}, {"gen", o.gen}, {"block", o.block}};
    if (o.profile) {
        std::printf("bandwidth floor of one forward: %.3f ms (weight bytes / copy bandwidth)\n", ms.weight_bytes / (ceil.copy_gbs * 1e9) * 1e3);
        out["profile"] = profile_steps(m, o.prompt, o.gen, o.block, ceil, o.profile_only);
        write_json();
        return sweep_failures ? 1 : 0;
    }

    // 2. Forwards. The canvas: prompt + gen; the step sits at the middle block.
    std::printf("forwards (prompt %d, gen %d, block %d; mid-generation):\n", o.prompt, o.gen, o.block);
    json forwards = json::array();
    const index_t mid_block = o.gen / o.block / 2;
    for (const index_t b : o.batches) {
        const canvas_layout lc{o.prompt, o.gen, o.block, true};
        const block_causal_mask bc{o.block};
        forwards.push_back(time_forward(m, ms, ceil, "cdlm", bc, b, lc, [&](const canvas_layout& l) { return prefix_cache{}.plan(bc, l, {mid_block, 1}); },
                                        true));
        const canvas_layout la{o.prompt, o.gen, 1, true};
        forwards.push_back(time_forward(m, ms, ceil, "ar", causal_mask{}, b, la,
                                        [&](const canvas_layout& l) { return prefix_cache{}.plan(causal_mask{}, l, {o.gen / 2, 0}); }, true));
        const semi_ar_mask sa{o.block};
        forwards.push_back(time_forward(m, ms, ceil, "full", sa, b, lc, [&](const canvas_layout& l) { return no_cache{}.plan(sa, l, {mid_block, 0}); },
                                        false));
    }
    out["forward"] = forwards;

    // 3. Decoding.
    std::printf("decoding (prompt %d, gen %d, block %d):\n", o.prompt, o.gen, o.block);
    json decodes = json::array();
    using cdlm_host = presets::cdlm<Model>;
    using cdlm_device = dlm::cuda::device_decoder_t<cdlm_host>;
    using llada_device = dlm::cuda::device_decoder_t<presets::llada<Model>>;
    for (const index_t b : o.batches) decodes.push_back(time_decode<cdlm_device>(m, "cdlm (device)", b, o, true, block_causal_mask{o.block}));
    for (const index_t b : o.host_batches) {
        decodes.push_back(time_decode<cdlm_device>(m, "cdlm (device, no graphs)", b, o, false, block_causal_mask{o.block}));
        decodes.push_back(time_decode<cdlm_host>(m, "cdlm (host)", b, o, true, block_causal_mask{o.block}));
    }
    for (const index_t b : o.llada_batches)
        decodes.push_back(time_decode<llada_device>(m, "llada (device)", b, o, true, semi_ar_mask{o.block}, no_cache{}, llada_schedule{o.gen}));
    out["decode"] = decodes;
    for (const auto& l : decodes) {
        if (l["decoder"] != "llada (device)") continue;
        for (const auto& c : decodes)
            if (c["decoder"] == "cdlm (device)" && c["batch"] == l["batch"])
                std::printf("speed-up of cdlm over llada at batch %d: %.2fx (wall time, same prompts and length)\n", l["batch"].get<int>(),
                            l["seconds"].get<double>() / c["seconds"].get<double>());
    }
    for (const auto& n : decodes) {
        if (n["decoder"] != "cdlm (device, no graphs)") continue;
        for (const auto& c : decodes)
            if (c["decoder"] == "cdlm (device)" && c["batch"] == n["batch"])
                std::printf("CUDA graphs at batch %d: %.3f ms/forward with, %.3f without (%.2fx)\n", n["batch"].get<int>(),
                            c["ms_per_forward"].get<double>(), n["ms_per_forward"].get<double>(),
                            n["ms_per_forward"].get<double>() / c["ms_per_forward"].get<double>());
    }
    out["roofline"] = roofline_series(ms, o);
    write_json();
    return 0;
}

}  // namespace

int main(int argc, char** argv) try {
    const options o = parse(argc, argv);
    if (dlm::cuda::device_count() == 0) {
        std::printf("dlm-bench-cuda: no CUDA device: skipped\n");
        return 77;
    }
    cudaDeviceProp prop{};
    dlm::cuda::check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    std::printf("dlm-bench-cuda on %s (%d SMs, %.1f GB, L2 %.0f MB), driver %d, runtime %d\n", prop.name, prop.multiProcessorCount,
                static_cast<double>(prop.totalGlobalMem) / 1e9, prop.l2CacheSize / 1e6, driver, runtime);

    const ceilings ceil = measure_ceilings(o.quick);
    std::printf("ceilings: copy %.0f GB/s (read + write), f16 GEMM %.1f TFLOP/s, bf16 GEMM %.1f TFLOP/s\n", ceil.copy_gbs, ceil.f16_tflops,
                ceil.bf16_tflops);

    json out;
    out["device"] = {{"name", prop.name}, {"sms", prop.multiProcessorCount}, {"memory_bytes", prop.totalGlobalMem}, {"l2_bytes", prop.l2CacheSize},
                     {"driver", driver}, {"runtime", runtime}};
    out["ceilings"] = {{"copy_gbs", ceil.copy_gbs}, {"f16_tflops", ceil.f16_tflops}, {"bf16_tflops", ceil.bf16_tflops}};
    auto write_json = [&] {
        if (o.json_path.empty()) return;
        std::ofstream(o.json_path) << out.dump(2) << '\n';
        std::printf("wrote %s\n", o.json_path.c_str());
    };
    int sweep_failures = 0;
    if (o.gemm_sweep) out["gemm_sweep"] = gemm_sweep(ceil, o.sweep_rows, sweep_failures, o.sweep_shapes);

    const io::model_config cfg = o.quick ? small() : dream7b(o.layers);
    if (o.gemm_sweep && !o.profile) {
        write_json();
        return sweep_failures ? 1 : 0;
    }
    return o.kv_bf16 ? run_model<dlm::cuda::transformer_bf16_kv>(o, cfg, ceil, out, write_json, sweep_failures)
                     : run_model<dlm::cuda::transformer>(o, cfg, ceil, out, write_json, sweep_failures);
} catch (const std::exception& e) {
    std::fprintf(stderr, "dlm-bench-cuda: %s\n", e.what());
    return 1;
}
