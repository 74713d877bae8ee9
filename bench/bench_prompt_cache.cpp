// dlm-bench-prompt-cache: time to first token with and without the engine's prompt cache on a
// shared-prefix workload (docs/server.md, "Prompt cache").
//
//   dlm-bench-prompt-cache [--requests 32] [--prefix 200] [--own 8] [--gen 16] [--preset ar|sdar]
//                          [--mib 64] [--mode alone|joined]
//
// `requests` prompts share a `prefix`-token few-shot prefix, each then its own `own` tokens. The model
// is the shape of models/ar (ar) or models/cdlm (sdar: block diffusion, blocks of 8), with random
// weights and a context of 1024 (the shipped tiny models' 128 is too short for the prefix). mode alone:
// each request arrives when the previous one finished (a server at --parallel 1); joined: one request
// arrives per step and joins the running batch. Time to first token is from add() to the step after
// which the request's first answer token is committed; the first request (which fills the cache) is
// left out of the means. Every answer is checked to equal its answer without the prompt cache.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <dlm/cpu/transformer.hpp>
#include <dlm/engine.hpp>
#include <dlm/presets.hpp>

#include "args.hpp"

using namespace dlm;
using clock_type = std::chrono::steady_clock;

namespace {

struct options {
    std::size_t requests = 32, prefix = 200, own = 8;
    index_t gen = 16;
    std::string preset = "ar", mode = "alone";
    std::uint64_t mib = 64;
};

constexpr index_t context = 1024;  // the random model's context (below)

const std::string usage_text =
    "usage: dlm-bench-prompt-cache [--requests 32] [--prefix 200] [--own 8] [--gen 16] [--preset ar|sdar]\n"
    "                              [--mib 64] [--mode alone|joined]\n";

options parse(int argc, char** argv) {
    options o;
    bench::args a(argc, argv);
    while (a.next()) {
        if (a.is("--requests")) o.requests = a.integer<std::size_t>(2, 4096);
        else if (a.is("--prefix")) o.prefix = a.integer<std::size_t>(0, context);
        else if (a.is("--own")) o.own = a.integer<std::size_t>(0, context);
        else if (a.is("--gen")) o.gen = a.integer<index_t>(1, context);
        else if (a.is("--mib")) o.mib = a.integer<std::uint64_t>(1, 65536);
        else if (a.is("--preset")) o.preset = a.value();
        else if (a.is("--mode")) o.mode = a.value();
        else a.unknown();
    }
    if (o.mode != "alone" && o.mode != "joined") throw invalid_parameter("--mode", "must be alone or joined, got '" + o.mode + "'");
    if (o.preset != "ar" && o.preset != "sdar") throw invalid_parameter("--preset", "must be ar or sdar, got '" + o.preset + "'");
    if (o.prefix + o.own == 0) throw invalid_parameter("--prefix", "and --own cannot both be 0: a prompt needs a token");
    if (o.prefix + o.own + static_cast<std::size_t>(o.gen) > static_cast<std::size_t>(context))
        throw invalid_parameter("--gen", "--prefix + --own + --gen must fit the model's context of " + std::to_string(context));
    return o;
}

struct outcome {
    std::vector<double> ttft;  // seconds, per request
    std::vector<std::vector<token_id>> answers;
    double wall = 0;
    std::uint64_t hit_tokens = 0, bytes = 0;
};

std::vector<std::vector<token_id>> prompts_of(const options& o) {
    std::vector<std::vector<token_id>> out(o.requests);
    for (std::size_t i = 0; i < o.requests; ++i) {
        for (std::size_t j = 0; j < o.prefix; ++j) out[i].push_back(static_cast<token_id>((7 * j + 3) % 600));
        for (std::size_t j = 0; j < o.own; ++j) out[i].push_back(static_cast<token_id>((11 * i + 5 * j + 1) % 600));
    }
    return out;
}

template <class Decoder>
outcome run(Decoder& d, const options& o, std::uint64_t bytes) {
    const auto prompts = prompts_of(o);
    engine eng(d, prompt_cache_options{.bytes = bytes});
    outcome r;
    r.ttft.assign(o.requests, -1);
    r.answers.resize(o.requests);
    std::vector<clock_type::time_point> added(o.requests);
    std::vector<std::uint64_t> ids;
    const auto t0 = clock_type::now();
    std::size_t next = 0;
    while (next < o.requests || !eng.idle()) {
        if (next < o.requests && (o.mode == "joined" || eng.idle())) {
            added[next] = clock_type::now();
            ids.push_back(eng.add(prompts[next], {.gen_length = o.gen, .seed = next}));
            ++next;
        }
        const auto& events = eng.step();
        const auto now = clock_type::now();
        for (std::size_t i = 0; i < ids.size(); ++i)
            if (r.ttft[i] < 0 && r.answers[i].empty()) {
                bool first = false;
                for (const auto& ev : events)
                    if (ev.id == ids[i] && !ev.committed.empty()) first = true;
                if (first) r.ttft[i] = std::chrono::duration<double>(now - added[i]).count();
            }
        for (auto& [id, res] : eng.take_finished()) r.answers[static_cast<std::size_t>(id)] = res.tokens;
    }
    r.wall = std::chrono::duration<double>(clock_type::now() - t0).count();
    if (const auto* pc = eng.prompt_cache()) {
        r.hit_tokens = pc->stats().hit_tokens;
        r.bytes = pc->bytes();
    }
    return r;
}

double mean_after_first(const std::vector<double>& v) {
    double s = 0;
    for (std::size_t i = 1; i < v.size(); ++i) s += v[i];
    return v.size() > 1 ? s / static_cast<double>(v.size() - 1) : 0;
}

template <class Decoder>
int compare(Decoder& d, const options& o) {
    run(d, o, 0);  // warm-up
    const outcome off = run(d, o, 0), on = run(d, o, o.mib << 20);
    if (off.answers != on.answers) {
        std::fprintf(stderr, "dlm-bench-prompt-cache: the answers differ with the prompt cache\n");
        return 1;
    }
    const double a = mean_after_first(off.ttft), b = mean_after_first(on.ttft);
    std::printf("preset %s, mode %s: %zu requests, %zu-token shared prefix + %zu own, gen %d\n", o.preset.c_str(), o.mode.c_str(),
                o.requests, o.prefix, o.own, o.gen);
    std::printf("  time to first token (mean of requests 2..%zu): without %.2f ms, with %.2f ms, ratio %.2fx\n", o.requests, 1e3 * a,
                1e3 * b, b > 0 ? a / b : 0.0);
    std::printf("  wall: without %.3f s, with %.3f s; reused %llu prompt tokens, cache holds %llu bytes; answers identical\n", off.wall,
                on.wall, static_cast<unsigned long long>(on.hit_tokens), static_cast<unsigned long long>(on.bytes));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    return bench::run_main("dlm-bench-prompt-cache", usage_text, [&] {
        const options o = parse(argc, argv);
        const auto dir = std::filesystem::path(DLM_BENCH_MODELS_DIR) / (o.preset == "ar" ? "ar" : "cdlm");
        io::model_config cfg = cpu::transformer::load(dir).config();
        cfg.max_context = context;
        auto m = cpu::transformer::random(cfg, 1, io::dtype::bf16, 0.5f);
        if (o.preset == "ar") {
            presets::autoregressive<cpu::transformer> d(m);
            return compare(d, o);
        }
        presets::sdar<cpu::transformer> d(m, aligned_block_diffusion_mask{8});
        return compare(d, o);
    });
}
