// dlm-bench-sampling — the host stepper's draws of one step: every slot of a block sampled from its
// logits row by a shipped sampler, in turn on one thread and side by side on several
// (engine/parallel.hpp, the stepper's own helper). Prints ms a step, ns a logit, and the speed-up
// over one thread with its ratio to the ideal (the thread count): the ceiling of work that splits
// into independent rows. The same tokens come out on every thread count; the program checks it.
//
//   dlm-bench-sampling [--vocab 126464,262144] [--slots 32,256] [--threads 1,2] [--reps 3]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <dlm/engine/parallel.hpp>
#include <dlm/sampler/samplers.hpp>

#include "args.hpp"
#include "peak.hpp"

namespace {

using namespace dlm;

const char* const usage_text =
    "usage: dlm-bench-sampling [--vocab N,...] [--slots N,...] [--threads N,...] [--reps N]\n"
    "  --vocab    vocabulary sizes (default 126464,262144: LLaDA's and Gemma's)\n"
    "  --slots    slots a step draws (default 32,256: a block of 32, a 256-slot canvas)\n"
    "  --threads  thread counts (default 1,2; 1 is always run first, as the baseline)\n"
    "  --reps     steps timed, the best kept (default 3)\n";

struct options {
    std::vector<index_t> vocab{126464, 262144};
    std::vector<index_t> slots{32, 256};
    std::vector<int> threads{1, 2};
    int reps = 3;
};

options parse(int argc, char** argv) {
    options o;
    bench::args a(argc, argv);
    while (a.next()) {
        if (a.is("--vocab")) o.vocab = a.integers<index_t>(2, 1 << 22);
        else if (a.is("--slots")) o.slots = a.integers<index_t>(1, 4096);
        else if (a.is("--threads", "-t")) o.threads = a.integers<int>(1, 1024);
        else if (a.is("--reps")) o.reps = a.integer<int>(1, 1000);
        else a.unknown();
    }
    return o;
}

struct sampler_case {
    const char* name;
    categorical_sampler sampler;
};

/// The best of `reps` steps of `slots` draws on `threads` threads, in seconds; `tokens` gets the draws.
double time_step(const categorical_sampler& s, const std::vector<float>& logits, index_t vocab, index_t slots, int threads, int reps,
                 std::vector<token_id>& tokens) {
    bench::set_threads(threads);
    const auto v = static_cast<std::size_t>(vocab);
    tokens.assign(static_cast<std::size_t>(slots), no_token);
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        detail::for_each_slot(tokens.size(), v, sampler_is_concurrent<categorical_sampler>, [&](std::size_t i) {
            const std::span<const float> row(logits.data() + i * v, v);
            tokens[i] = s.sample(row, random_key{7, rng_stream::sampling, 0, static_cast<index_t>(i)}, {}).token;
        });
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
}

void run_shape(const options& o, index_t vocab, index_t slots) {
    std::vector<float> logits(static_cast<std::size_t>(vocab) * static_cast<std::size_t>(slots));
    std::mt19937 rng(static_cast<unsigned>(vocab + slots));
    std::normal_distribution<float> spread(0.f, 3.f);  // a spread of logits like a trained head's
    for (float& x : logits) x = spread(rng);
    const sampler_case cases[] = {
        {"greedy (T 0)", categorical_sampler{}},
        {"T 1 (Gumbel-max)", categorical_sampler{1.f}},
        {"T 0.7, top-p 0.95", categorical_sampler{0.7f, 0, 0.95f}},
    };
    std::printf("vocabulary %d, %d slots a step (%.1f M logits)\n", vocab, slots, double(vocab) * slots / 1e6);
    for (const sampler_case& c : cases) {
        std::vector<token_id> base, tokens;
        const double one = time_step(c.sampler, logits, vocab, slots, 1, o.reps, base);
        for (const int t : o.threads) {
            const double s = t == 1 ? one : time_step(c.sampler, logits, vocab, slots, t, o.reps, tokens);
            if (t != 1 && tokens != base) throw std::runtime_error(std::string("dlm-bench-sampling: ") + c.name + " drew other tokens on " + std::to_string(t) + " threads");
            std::printf("  %-18s %2d thread(s): %9.2f ms a step, %6.2f ns a logit; x %.2f over 1 thread, %3.0f %% of the ideal x %d\n", c.name, t, s * 1e3,
                        s * 1e9 / (double(vocab) * slots), one / s, 100 * one / s / t, t);
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    return bench::run_main("dlm-bench-sampling", usage_text, [&] {
        const options o = parse(argc, argv);
        std::printf("dlm sampling benchmark: a step's draws (engine/parallel.hpp), best of %d\n", o.reps);
        for (const index_t v : o.vocab)
            for (const index_t s : o.slots) run_shape(o, v, s);
        return 0;
    });
}
