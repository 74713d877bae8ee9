// bench_forward — the CPU transformer's forward against the machine's measured f32 peak.
//
//   dlm-bench-forward [--reps N]        (threads: OMP_NUM_THREADS)
//
// 1. Peak: a register-blocked FMA loop on dlm's vector type (the widest the build targets), on one
//    core and on every thread at once.
// 2. Forwards, random weights (no file needed), for a ~110M-parameter config (hidden 768, 12 layers,
//    12 heads, MLP 2048, vocabulary 32000, tied head) and for the tiny test config:
//      block  32 query rows (one block) over a 512-position KV cache, block-causal mask, logits for
//             the 32 rows — a CDLM / prefix-cache step;
//      full   a 512-position canvas (480 prompt + one block of 32) recomputed in full, bidirectional
//             mask, logits for the 32 rows of the active block — a LLaDA / no-cache step.
//    (and, once, "fill": the block-causal forward that stores the 512-position prompt's K/V).
//    Printed: time per forward, rows/s, GFLOP/s (matrix products and attention, counted as
//    multiply-adds × 2) and the fraction of the all-thread peak.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <dlm/cache/caches.hpp>
#include <dlm/cpu/transformer.hpp>

#if defined(_OPENMP)
#include <omp.h>
#endif

using namespace dlm;
using clock_type = std::chrono::steady_clock;

namespace {

int threads() {
#if defined(_OPENMP)
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/// FLOP/s of one thread running independent FMA chains.
double fma_loop(long iterations) {
    constexpr int chains = 16;  // enough independent accumulators to cover FMA latency x throughput
    cpu::vfloat acc[chains];
    for (int i = 0; i < chains; ++i) acc[i] = cpu::vbroadcast(0.001f * static_cast<float>(i));
    const cpu::vfloat a = cpu::vbroadcast(0.999999f), b = cpu::vbroadcast(1e-7f);
    const auto t0 = clock_type::now();
    for (long it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
        for (int i = 0; i < chains; ++i) acc[i] = cpu::vfma(acc[i], a, b);
    }
    const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
    float sink = 0;
    for (int i = 0; i < chains; ++i) sink += acc[i][0];
    if (sink == 12345.f) std::puts("");  // keep the result alive
    return 2.0 * chains * cpu::simd_width * static_cast<double>(iterations) / s;
}

struct peak {
    double one, all;
};

peak measure_peak() {
    const long iters = 50'000'000;
    peak p{0, 0};
    for (int r = 0; r < 3; ++r) p.one = std::max(p.one, fma_loop(iters));
    for (int r = 0; r < 3; ++r) {
        double total = 0;
#if defined(_OPENMP)
#pragma omp parallel reduction(+ : total)
#endif
        total += fma_loop(iters);
        p.all = std::max(p.all, total);
    }
    return p;
}

io::model_config make_config(const char* name) {
    io::model_config c;
    c.arch = io::architecture::llada;
    if (std::strcmp(name, "100M") == 0) {
        c.vocab_size = 32000;
        c.hidden_size = 768;
        c.intermediate_size = 2048;
        c.num_layers = 12;
        c.num_heads = 12;
        c.num_kv_heads = 12;
        c.head_dim = 64;
    } else {  // the tiny test fixture's shape
        c.vocab_size = 300;
        c.hidden_size = 48;
        c.intermediate_size = 80;
        c.num_layers = 2;
        c.num_heads = 6;
        c.num_kv_heads = 2;
        c.head_dim = 8;
    }
    c.max_context = 4096;
    c.tie_word_embeddings = true;
    c.mask_id = c.vocab_size - 1;
    c.eos_ids = {1};
    return c;
}

/// Multiply-adds × 2 of one forward: the projections and MLP for every window row, the attention
/// (q·k and p·v) over the keys each row attends to, the head for the logits rows.
template <class Mask>
double forward_flops(const io::model_config& c, const canvas_layout& l, const forward_plan& p, const Mask& mask) {
    const double h = c.hidden_size, q = double(c.num_heads) * c.head_dim, kv = double(c.num_kv_heads) * c.head_dim, f = c.intermediate_size;
    const double per_row = h * (q + 2 * kv) + q * h + 3 * h * f;
    double keys = 0;
    for (index_t r = p.window_begin; r < p.window_end; ++r) keys += std::min(p.attend_end, mask.key_end(l, r));
    return 2.0 * (c.num_layers * (p.window_size() * per_row + 2.0 * keys * q) + double(p.logits_rows()) * c.vocab_size * h);
}

template <class Mask>
void bench_case(cpu::transformer& m, const char* label, const Mask& mask, const canvas_layout& l, const forward_plan& p,
                cpu::transformer::kv_cache* cache, int reps, double peak_all) {
    std::vector<token_id> canvas(static_cast<std::size_t>(l.size()));
    for (std::size_t i = 0; i < canvas.size(); ++i) canvas[i] = static_cast<token_id>((i * 7919) % static_cast<std::size_t>(m.vocab_size() - 1));
    std::vector<float> logits(static_cast<std::size_t>(p.logits_rows()) * static_cast<std::size_t>(m.vocab_size()));
    const forward_request<cpu::transformer::kv_cache> rq{canvas, l, p, cache};
    const std::span<const forward_request<cpu::transformer::kv_cache>> batch(&rq, 1);
    m.forward(batch, mask, logits);  // warm-up
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = clock_type::now();
        m.forward(batch, mask, logits);
        best = std::min(best, std::chrono::duration<double>(clock_type::now() - t0).count());
    }
    const double flops = forward_flops(m.config(), l, p, mask);
    std::printf("  %-5s %4d rows x %4d keys: %9.3f ms  %10.0f rows/s  %7.1f GFLOP/s  %5.1f %% of peak\n", label, p.window_size(),
                p.attend_end, best * 1e3, p.window_size() / best, flops / best / 1e9, 100.0 * flops / best / peak_all);
}

}  // namespace

int main(int argc, char** argv) {
    int reps = 5;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
        else {
            std::fprintf(stderr, "usage: %s [--reps N]   (threads: OMP_NUM_THREADS)\n", argv[0]);
            return 2;
        }
    }
    std::printf("dlm CPU forward benchmark: %d-lane f32 vectors, %d thread(s), best of %d\n", cpu::simd_width, threads(), reps);
    const peak pk = measure_peak();
    std::printf("peak f32 FMA: %.1f GFLOP/s on one core, %.1f GFLOP/s on %d thread(s)\n", pk.one / 1e9, pk.all / 1e9, threads());

    for (const char* name : {"100M", "tiny"}) {
        const io::model_config cfg = make_config(name);
        const auto t0 = clock_type::now();
        cpu::transformer m(cfg, cpu::random_weights(cfg, 1, 0.5f));
        std::printf("%s config: %.1fM parameters (hidden %d, %d layers, %d heads, MLP %d, vocabulary %d), built in %.1f s\n", name,
                    static_cast<double>(m.parameter_count()) / 1e6, cfg.hidden_size, cfg.num_layers, cfg.num_heads, cfg.intermediate_size,
                    cfg.vocab_size, std::chrono::duration<double>(clock_type::now() - t0).count());
        const canvas_layout l{512, 32, 32, false};
        // block: a prefix-cache step of the generation block, after "fill" stored the prompt's K/V.
        const block_causal_mask bc{32};
        auto cache = m.make_kv_cache(l.size());
        bench_case(m, "fill", bc, l, prefix_cache{}.plan(bc, l, {0, 0}), &cache, 1, pk.all);
        bench_case(m, "block", bc, l, prefix_cache{}.plan(bc, l, {0, 1}), &cache, reps * 4, pk.all);
        // full: the whole canvas, bidirectional, logits of the active block.
        const bidirectional_mask bi{};
        const canvas_layout lf{480, 32, 32, false};
        bench_case(m, "full", bi, lf, no_cache{}.plan(bi, lf, {0, 0}), nullptr, reps, pk.all);
    }
    return 0;
}
