// dlm-bench-batch — answers per second of every preset on the shipped models at several batch
// sizes, in one run, with the ratio to batch 1 (docs/benchmarks.md, "Batching").
//
//   dlm-bench-batch [--models DIR] [--limit N] [--batches 1,8,32] [-t THREADS] [--rows cdlm,llada,...]
//                   [--mode continuous|static|both] [--reps N]
//
//   --models   the folder holding cdlm/, cd4lm/, teacher/ and ar/ (default: the source tree's models/)
//   --limit    problems of the shipped test set decoded per batch size (default 64)
//   --mode     continuous: dlm::engine keeps `batch` sequences in flight, a new problem joining as
//              one finishes (what dlm-server does); static: decoder::generate on consecutive chunks of
//              `batch` problems (what dlm-eval --batch does); both (default)
//   --reps     runs per batch size; the best is reported (default 1)
//
// Every problem gets seed sequence_seed(0, problem index) at every batch size, so the answers must
// not depend on the batch: the run checks that they are identical to batch 1's and says so.
// Printed per row and batch size: answers/s, the ratio to batch 1, ms per batched forward, and the
// share of time in the model's forward (the rest is sampling, scheduling and bookkeeping).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <dlm/engine.hpp>

#include "cli/engines.hpp"
#include "cli/model.hpp"
#include "cli/options.hpp"
#include "cli/presets.hpp"
#include "cli/score.hpp"

#include "args.hpp"

#ifndef DLM_BENCH_MODELS_DIR
#define DLM_BENCH_MODELS_DIR "models"
#endif

using namespace dlm;

namespace {

struct row {
    std::string name, model;
    cli::preset_id preset;
};

// The rows of docs/results.md that decode each model with the preset it was trained for, and the
// teacher with every other preset.
const std::vector<row> all_rows{{"cdlm", "cdlm", cli::preset_named("cdlm")},
                                {"cd4lm", "cd4lm", cli::preset_named("cd4lm")},
                                {"llada", "teacher", cli::preset_named("llada")},
                                {"dream", "teacher", cli::preset_named("dream")},
                                {"fast-dllm", "teacher", cli::preset_named("fast-dllm")},
                                {"fast-dllm-dual", "teacher", cli::preset_named("fast-dllm-dual")},
                                {"ar", "ar", cli::preset_named("autoregressive")}};

struct options {
    std::string models = DLM_BENCH_MODELS_DIR;
    std::size_t limit = 64;
    std::vector<std::size_t> batches{1, 8, 32};
    std::vector<std::string> rows;
    int threads = 1, reps = 1;
    bool continuous = true, fixed = true;
};

const std::string usage_text =
    "usage: dlm-bench-batch [--models DIR] [--limit N] [--batches 1,8,32] [-t THREADS] [--rows cdlm,llada,...]\n"
    "                       [--mode continuous|static|both] [--reps N]\n";

options parse(int argc, char** argv) {
    options o;
    bench::args a(argc, argv);
    while (a.next()) {
        if (a.is("--models")) o.models = a.value();
        else if (a.is("--limit")) o.limit = a.integer<std::size_t>(1, 1 << 20);
        else if (a.is("--threads", "-t")) o.threads = a.integer(1, cli::max_threads);
        else if (a.is("--reps")) o.reps = a.integer(1, 1000);
        else if (a.is("--batches")) o.batches = a.integers<std::size_t>(1, 4096);
        else if (a.is("--rows")) {
            o.rows = a.names();
            for (const auto& r : o.rows)
                if (std::none_of(all_rows.begin(), all_rows.end(), [&](const row& x) { return x.name == r; }))
                    throw invalid_parameter(a.flag(), "no row '" + r + "' (cdlm, cd4lm, llada, dream, fast-dllm, fast-dllm-dual, ar)");
        } else if (a.is("--mode")) {
            const std::string m = a.value();
            if (m != "continuous" && m != "static" && m != "both")
                throw invalid_parameter(a.flag(), "must be continuous, static or both, got '" + m + "'");
            o.continuous = m != "static";
            o.fixed = m != "continuous";
        } else a.unknown();
    }
    return o;
}

struct measurement {
    double seconds = 0, model_seconds = 0;
    index_t forwards = 0;
    std::vector<std::vector<token_id>> answers;
};

/// Decodes every prompt with `batch` in flight: continuous (an engine refilled as sequences finish)
/// or static (a fresh engine run to the end on consecutive chunks, as generate() does). `make` builds
/// the preset's engine (registry::make_engine, compiled once: cli/engines.hpp).
measurement decode_all(const std::function<std::unique_ptr<registry::any_engine>()>& make, const std::vector<std::vector<token_id>>& prompts,
                       index_t gen_length, std::size_t batch, bool continuous) {
    measurement m;
    m.answers.resize(prompts.size());
    auto options_of = [&](std::size_t i) { return generation_options{.gen_length = gen_length, .seed = sequence_seed(0, i)}; };
    const auto t0 = std::chrono::steady_clock::now();
    if (continuous) {
        const std::unique_ptr<registry::any_engine> eng = make();
        std::vector<std::size_t> index_of;  // engine id -> problem (ids count from 0)
        std::size_t next = 0;
        while (next < prompts.size() || !eng->idle()) {
            while (next < prompts.size() && eng->active() < batch) {
                index_of.push_back(next);
                (void)eng->add(prompts[next], options_of(next));
                ++next;
            }
            eng->step();
            for (auto& [id, r] : eng->take_finished()) m.answers[index_of[static_cast<std::size_t>(id)]] = std::move(r.tokens);
        }
        m.model_seconds = eng->stats().model_seconds;
        m.forwards = eng->stats().forwards;
    } else {
        for (std::size_t b = 0; b < prompts.size(); b += batch) {
            const std::size_t e = std::min(prompts.size(), b + batch);
            generation_options o{.gen_length = gen_length};
            for (std::size_t i = b; i < e; ++i) o.seeds.push_back(sequence_seed(0, i));
            const std::unique_ptr<registry::any_engine> eng = make();
            decode_result r = run_to_end(*eng, std::span(prompts).subspan(b, e - b), o);
            m.model_seconds += r.stats.model_seconds;
            m.forwards += r.stats.forwards;
            for (std::size_t i = b; i < e; ++i) m.answers[i] = std::move(r.sequences[i - b].tokens);
        }
    }
    m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return m;
}

}  // namespace

int main(int argc, char** argv) {
    return bench::run_main("dlm-bench-batch", usage_text, [&] {
        const options o = parse(argc, argv);
        cli::set_threads(o.threads);
        std::vector<cli::problem> problems = cli::read_problems(DLM_DEFAULT_EVAL_DATA);
        if (problems.size() > o.limit) problems.resize(o.limit);

        std::printf("dlm-bench-batch: %zu problems of %s, %d thread(s), best of %d\n\n", problems.size(), DLM_DEFAULT_EVAL_DATA, o.threads,
                    o.reps);
        std::printf("| row | model | mode | batch | answers/s | vs batch 1 | ms/forward | forwards | model share | same answers |\n");
        std::printf("|---|---|---|---:|---:|---:|---:|---:|---:|---|\n");
        for (const row& r : all_rows) {
            if (!o.rows.empty() && std::find(o.rows.begin(), o.rows.end(), r.name) == o.rows.end()) continue;
            cli::loaded_model m = cli::load_model(std::filesystem::path(o.models) / r.model);
            cli::options flags;
            const cli::settings s = cli::resolve(flags, r.preset, m.hints);
            std::vector<std::vector<token_id>> prompts;
            for (const auto& p : problems) prompts.push_back(cli::encode_prompt(m, p.question, false));
            const auto make = [&] { return registry::make_engine(m.model, s); };
            for (const bool continuous : {true, false}) {
                if (continuous ? !o.continuous : !o.fixed) continue;
                double base = 0;
                std::vector<std::vector<token_id>> reference;
                for (const std::size_t batch : o.batches) {
                    measurement best;
                    for (int rep = 0; rep < o.reps; ++rep) {
                        measurement x = decode_all(make, prompts, s.gen_length, batch, continuous);
                        if (rep == 0 || x.seconds < best.seconds) best = std::move(x);
                    }
                    const double rate = static_cast<double>(prompts.size()) / best.seconds;
                    if (base == 0) {
                        base = rate;
                        reference = best.answers;
                    }
                    std::printf("| %s | %s | %s | %zu | %.1f | %.2fx | %.3f | %d | %.0f %% | %s |\n", r.name.c_str(), r.model.c_str(),
                                continuous ? "continuous" : "static", batch, rate, rate / base,
                                1e3 * best.seconds / std::max<index_t>(1, best.forwards), best.forwards,
                                100.0 * best.model_seconds / best.seconds, best.answers == reference ? "yes" : "NO");
                    std::fflush(stdout);
                }
            }
        }
        return 0;
    });
}
