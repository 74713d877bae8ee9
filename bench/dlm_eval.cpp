// dlm-eval — one preset on one model over a JSONL problem set (docs/cli.md).
//
//   dlm-eval -m models/cdlm --preset cdlm --batch 8 --json cdlm.json
//   dlm-eval -m models/teacher --preset llada --steps 48 --limit 100
//
// Each problem's question becomes the prompt (--prompt-format, default the question alone, as the
// training scripts prompt; --chat wraps it in the model's chat template), the problems are decoded
// in batches, and the number after the last "####" of each answer is compared with the problem's
// "final". Prints accuracy, mean forwards per problem, tokens committed per forward, latency per
// problem (mean, p50, p95) and tokens/s; --json writes the same figures. A problem's latency is the
// wall time of the batched decode that produced it (with --batch 1, its own decode).
// Exit status: 0 success, 1 a dlm error, 2 a bad flag or value.
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/engines.hpp"
#include "cli/model.hpp"
#include "cli/options.hpp"
#include "cli/presets.hpp"
#include "cli/score.hpp"
#include "cli/stats.hpp"
#include "cli/terminal.hpp"

#ifndef DLM_DEFAULT_EVAL_DATA
#define DLM_DEFAULT_EVAL_DATA "tools/data/test.jsonl"
#endif

namespace {

using namespace dlm;

struct outcome {
    std::string answer;
    std::string failure;  ///< why the sequence failed (NaN logits, ...); empty when it finished
    bool correct = false;
    index_t forwards = 0, committed = 0, answer_tokens = 0;
    double latency = 0;
};

struct totals {
    std::size_t correct = 0, failed = 0;
    std::int64_t forwards = 0, committed = 0, answer_tokens = 0, batched_forwards = 0;
    double seconds = 0;
};

void write_text(const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
    if (!f) throw file_error(path, "cannot be written");
}

/// Scores `problems` (read from `data`) on the loaded folder `m`: the transformer's or DiffusionGemma's.
template <class Model>
int evaluate(const cli::options& o, const std::filesystem::path& data, const std::vector<cli::problem>& problems,
             cli::basic_loaded_model<Model>& m) {
    std::cerr << cli::cpu_line(m) << std::endl;
    cli::settings s;
    try {
        const cli::preset_choice chosen = cli::choose_preset(o, cli::model_preset(m));
        std::cerr << "preset: " << cli::name_of(chosen.preset) << ", " << chosen.reason << std::endl;
        cli::check_fits<Model>(chosen.preset);  // uniform-state presets for DiffusionGemma, the others for the transformer
        s = cli::resolve(o, chosen.preset, m.hints);
    } catch (const invalid_parameter& e) {
        std::cerr << "dlm-eval: " << e.what() << '\n';
        return 2;
    }
    if (o.chat && m.chat == io::chat_format::none)
        std::cerr << "dlm-eval: note: " << m.dir.string() << " has no chat template; --prompt-format alone makes the prompt\n";
    std::vector<std::vector<token_id>> prompts;
    prompts.reserve(problems.size());
    for (const auto& p : problems) prompts.push_back(cli::encode_prompt(m, cli::format_prompt(o.prompt_format, p.question), o.chat,
                                                                     o.think ? io::chat_thinking::on : io::chat_thinking::off));

    const std::string model_name = std::filesystem::absolute(m.dir).lexically_normal().filename().string();
    std::cerr << "dlm-eval: " << cli::describe(s) << " · model " << model_name << " · " << problems.size() << " problems from "
              << data.string() << " · batch " << o.batch << '\n';

    std::vector<outcome> results(problems.size());
    totals t;
    cli::progress_bar bar("dlm-eval " + std::string(cli::name_of(s.preset)), problems.size(), o.progress);
    const auto batch = static_cast<std::size_t>(o.batch);
    for (std::size_t b = 0; b < prompts.size(); b += batch) {
        const std::size_t e = std::min(prompts.size(), b + batch);
        const auto t0 = std::chrono::steady_clock::now();
        const std::unique_ptr<registry::any_engine> eng = registry::make_engine(m.model, s);  // compiled once (cli/engines.hpp)
        const decode_result r = run_to_end(*eng, std::span(prompts).subspan(b, e - b), {.gen_length = s.gen_length, .seed = s.seed});
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        t.seconds += seconds;
        t.batched_forwards += r.stats.forwards;
        for (std::size_t i = b; i < e; ++i) {
            const sequence_result& q = r.sequences[i - b];
            outcome& x = results[i];
            x.answer = cli::answer_text(m, q);
            if (q.failed()) {  // only this sequence ended: it counts as wrong, and is reported
                x.failure = q.message;
                ++t.failed;
                std::cerr << "dlm-eval: problem " << i << " failed: " << q.message << '\n';
            }
            const auto got = cli::extract_final(x.answer);
            x.correct = got && *got == problems[i].final;
            x.forwards = q.stats.forwards;
            x.committed = q.stats.committed;
            x.answer_tokens = q.answer_length;
            x.latency = seconds;
            t.correct += x.correct;
            t.forwards += x.forwards;
            t.committed += x.committed;
            t.answer_tokens += x.answer_tokens;
        }
        bar.update(e, "acc " + cli::fixed(100.0 * static_cast<double>(t.correct) / static_cast<double>(e), 1) + "%  " +
                          cli::format_seconds(t.seconds));
    }
    bar.finish();

    const auto n = static_cast<double>(problems.size());
    std::vector<double> latencies;
    for (const auto& x : results) latencies.push_back(x.latency);
    const cli::summary lat = cli::summarize(latencies);
    const double accuracy = static_cast<double>(t.correct) / n;
    const double mean_forwards = static_cast<double>(t.forwards) / n;
    const double tpf = t.forwards ? static_cast<double>(t.committed) / static_cast<double>(t.forwards) : 0.0;
    const double tps = t.seconds > 0 ? static_cast<double>(t.answer_tokens) / t.seconds : 0.0;

    std::cout << "accuracy            " << cli::fixed(100.0 * accuracy, 1) << " % (" << t.correct << "/" << problems.size() << ")\n"
              << "forwards/problem    " << cli::fixed(mean_forwards, 2) << " (mean)\n"
              << "tokens/forward      " << cli::fixed(tpf, 2) << '\n'
              << "latency/problem     mean " << cli::format_seconds(lat.mean) << ", p50 " << cli::format_seconds(lat.p50) << ", p95 "
              << cli::format_seconds(lat.p95) << '\n'
              << "tokens/s            " << cli::fixed(tps, 1) << " (answer tokens per second of decoding)\n"
              << "total               " << cli::format_seconds(t.seconds) << " for " << problems.size() << " problems, "
              << t.batched_forwards << " batched forwards\n";
    if (t.failed > 0) std::cout << "failed              " << t.failed << " problem(s) (counted wrong; reasons on stderr and in --predictions)\n";

    if (!o.json.empty()) {
        const nlohmann::json j = {
            {"model", model_name},
            {"model_dir", m.dir.string()},
            {"data", data.string()},
            {"preset", std::string(cli::name_of(s.preset))},
            {"settings", cli::describe(s)},
            {"gen_length", s.gen_length},
            {"block_length", cli::effective_block_length(s)},
            {"batch", o.batch},
            {"problems", problems.size()},
            {"correct", t.correct},
            {"accuracy", accuracy},
            {"mean_forwards", mean_forwards},
            {"tokens_per_forward", tpf},
            {"latency_mean_s", lat.mean},
            {"latency_p50_s", lat.p50},
            {"latency_p95_s", lat.p95},
            {"tokens_per_second", tps},
            {"answer_tokens", t.answer_tokens},
            {"total_seconds", t.seconds},
            {"batched_forwards", t.batched_forwards},
            {"failed", t.failed},
        };
        write_text(o.json, j.dump(2) + "\n");
    }
    if (!o.predictions.empty()) {
        std::string lines;
        for (const auto& x : results) {
            nlohmann::json line{{"answer", x.answer}};
            if (!x.failure.empty()) line["failure"] = x.failure;
            lines += line.dump() + "\n";
        }
        write_text(o.predictions, lines);
    }
    return 0;
}

int run(const cli::options& o) {
    cli::set_threads(o.threads);
    const std::filesystem::path data = o.data.empty() ? std::filesystem::path(DLM_DEFAULT_EVAL_DATA) : std::filesystem::path(o.data);
    std::vector<cli::problem> problems = cli::read_problems(data);
    if (o.limit > 0 && problems.size() > static_cast<std::size_t>(o.limit)) problems.resize(static_cast<std::size_t>(o.limit));
    if (problems.empty()) throw file_error(data.string(), "holds no problem");
    return cli::with_loaded_model(cli::resolve_model_dir(o), cli::load_choice_of(o), [&](auto& m) { return evaluate(o, data, problems, m); }, cli::load_bar_if(o.progress));
}

}  // namespace

int main(int argc, char** argv) {
    return dlm::cli::run_main(dlm::cli::program::eval, "dlm-eval", argc, argv, run);
}
