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
// wall time of the batched decode that produced it (with --batch 1, its own decode). SIGINT or SIGTERM
// stops the run after the current forward: the figures and files cover the problems finished by then
// (a second signal, SIGINT or SIGTERM, ends the program at once). A flag refused once some problems
// are finished (-n too long for the context, a --batch that does not fit in memory) stops the run
// the same way, the refusal said and in --json.
// Exit status: 0 success, 1 a dlm error (a file that could not be written too, interrupted or not),
// 2 a bad flag or value (one refused mid-run too, the files written), 130 interrupted with the files written.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/engines.hpp"
#include "cli/files.hpp"
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

/// Set by SIGINT / SIGTERM: the decode stops after the forward under way (on_interrupt).
volatile std::sig_atomic_t interrupted = 0;

extern "C" void on_interrupt(int) {
    interrupted = 1;
    std::signal(SIGINT, SIG_DFL);  // a second signal, of either kind, ends the program at once
    std::signal(SIGTERM, SIG_DFL);
}

struct outcome {
    std::string prompt;  ///< the prompt text decoded (the chat template's, with --chat)
    std::string answer;
    std::string failure;  ///< why the sequence failed (NaN logits, ...) or was refused; empty when it finished
    bool decoded = false;  ///< the engine took its prompt: it has forwards and a latency
    bool correct = false;
    index_t forwards = 0, committed = 0, answer_tokens = 0;
    double latency = 0;
};

struct totals {
    std::size_t correct = 0, failed = 0, refused = 0, decoded = 0;
    std::int64_t forwards = 0, committed = 0, answer_tokens = 0, batched_forwards = 0;
    double seconds = 0;
};

/// Records problem i's failure: counted wrong, its reason on stderr (with the line of the data file)
/// and in --predictions.
void fail(outcome& x, totals& t, std::size_t i, const cli::problem& p, const std::string& why) {
    x.failure = why;
    ++t.failed;
    std::cerr << "dlm-eval: problem " << i << " (line " << p.line << ") failed: " << why << '\n';
}

/// Refuses (dlm::invalid_parameter naming --batch) a batch whose taken prompts' K/V stores, states
/// and logits rows do not fit in memory together, before the first of them is added: added one at a
/// time, such a batch would be refused only once its first stores had filled the memory.
void check_batch_fits(const cli::options& o, registry::any_engine& eng, const std::vector<std::vector<token_id>>& prompts,
                      const std::vector<std::size_t>& taken, std::size_t b, const generation_options& g) {
    if (taken.size() < 2) return;  // one prompt was weighed alone
    std::vector<std::vector<token_id>> together;
    together.reserve(taken.size());
    for (const std::size_t i : taken) together.push_back(prompts[i - b]);
    try {
        eng.check_batch(together, g, together.size());
    } catch (const memory_error& x) {
        throw invalid_parameter(o.spelling("--batch"), "is " + std::to_string(o.batch) + ", more sequences than fit in memory at once: " +
                                                           std::string(x.what()));
    }
}

/// Decodes problems [b, e) as one batch; false when a signal stopped it (nothing of it is counted).
/// Each prompt is tokenized here, so that only one batch's tokens are held, checked on its own and
/// added on its own, seeded as add_batch seeds a batch (its index in the batch), so that a problem the
/// engine refuses (an empty prompt, a prompt too long for the model's context) fails alone and the
/// others decode as they would without it. A gen_length too long for any prompt is -n's fault, not a
/// problem's, and a batch whose sequences do not fit in memory together is --batch's: either ends the
/// run (exit 2) before any of the batch's K/V is made.
template <class Model>
bool decode_batch(const cli::options& o, const cli::settings& s, cli::basic_loaded_model<Model>& m, const std::vector<std::string>& texts,
                  const std::vector<cli::problem>& problems, std::size_t b, std::size_t e, std::vector<outcome>& results, totals& t) {
    // Tokenized before the clock starts, each only as far as a prompt beside -n can go (a longer one is
    // refused here, as the engine would refuse it, without tokenizing the rest).
    std::vector<std::vector<token_id>> prompts;
    std::vector<std::optional<invalid_parameter>> unfit;  // per problem: its refusal by the bounded tokenizer
    for (std::size_t i = b; i < e; ++i) {
        try {
            prompts.push_back(cli::encode_within_context(m, texts[i], cli::adds_special_tokens(m, o.chat), s.gen_length, "prompts[0]"));
            unfit.emplace_back();
        } catch (const invalid_parameter& x) {
            prompts.emplace_back();
            unfit.emplace_back(x);
        }
    }
    const auto t0 = std::chrono::steady_clock::now();
    const std::unique_ptr<registry::any_engine> eng = registry::make_engine(m.model, s);  // compiled once (cli/engines.hpp)
    const auto options = [&](std::size_t i) { return generation_options{.gen_length = s.gen_length, .seed = sequence_seed(s.seed, i - b)}; };
    std::vector<std::size_t> taken;                            // problems whose prompts the engine takes
    std::vector<std::pair<std::size_t, std::string>> refused;  // problem, why: counted once the batch is done
    for (std::size_t i = b; i < e; ++i) {
        try {
            if (unfit[i - b]) throw *unfit[i - b];
            eng->check_batch(std::span<const std::vector<token_id>>(&prompts[i - b], 1), options(i));
            taken.push_back(i);
        } catch (const invalid_parameter& x) {
            if (x.parameter() == "gen_length") cli::refuse_gen_length(o, s, x);  // -n's or the model's: the run stops
            refused.emplace_back(i, x.rule());
        }
    }
    check_batch_fits(o, *eng, prompts, taken, b, options(b));
    std::vector<std::pair<std::uint64_t, std::size_t>> added;  // engine id, problem
    for (const std::size_t i : taken) added.emplace_back(eng->add(prompts[i - b], options(i)), i);
    while (!eng->idle() && !interrupted) eng->step();
    if (interrupted) return false;
    for (const auto& [i, why] : refused) {
        fail(results[i], t, i, problems[i], why);
        ++t.refused;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    t.seconds += seconds;
    t.batched_forwards += eng->stats().forwards;
    for (auto& [id, q] : eng->take_finished()) {
        const std::size_t i = std::find_if(added.begin(), added.end(), [id = id](const auto& a) { return a.first == id; })->second;
        outcome& x = results[i];
        x.decoded = true;
        ++t.decoded;
        x.answer = cli::answer_text(m, q);
        if (q.failed()) fail(x, t, i, problems[i], q.message);  // only this sequence ended
        const auto got = cli::extract_final(x.answer);
        x.correct = got && *got == problems[i].final;
        x.forwards = q.stats.forwards;
        x.committed = q.stats.committed;
        x.answer_tokens = q.answer_length;
        t.correct += x.correct;
        t.forwards += x.forwards;
        t.committed += x.committed;
        t.answer_tokens += x.answer_tokens;
    }
    for (std::size_t i = b; i < e; ++i) results[i].latency = seconds;
    return true;
}

/// The figures, printed and (--json) written, and the answers (--predictions) of the problems finished
/// (all of them, or those before a signal or a refused flag stopped the run: `planned` says how many
/// there were, `stopped` the refusal, "" for a signal); false when a file could not be written (said on
/// stderr; the other is written all the same). Forwards and latency are the decoded problems' (a
/// refused prompt has neither); accuracy counts every problem.
bool report(const cli::options& o, nlohmann::json run, const std::vector<outcome>& results, std::size_t planned, const std::string& stopped,
            const totals& t) {
    const auto n = static_cast<double>(results.size());
    std::vector<double> latencies;
    for (const auto& x : results)
        if (x.decoded) latencies.push_back(x.latency);
    const cli::summary lat = cli::summarize(latencies);
    const double accuracy = n > 0 ? static_cast<double>(t.correct) / n : 0.0;
    const double mean_forwards = t.decoded ? static_cast<double>(t.forwards) / static_cast<double>(t.decoded) : 0.0;
    const double tpf = t.forwards ? static_cast<double>(t.committed) / static_cast<double>(t.forwards) : 0.0;
    const double tps = t.seconds > 0 ? static_cast<double>(t.answer_tokens) / t.seconds : 0.0;

    if (results.size() < planned)
        std::cout << (stopped.empty() ? "interrupted         after " : "stopped             after ") << results.size() << " of " << planned
                  << " problems" << (stopped.empty() ? "" : " (a flag refused: see stderr)") << '\n';
    std::cout << "accuracy            " << cli::fixed(100.0 * accuracy, 1) << " % (" << t.correct << "/" << results.size() << ")\n"
              << "forwards/problem    " << cli::fixed(mean_forwards, 2) << " (mean)\n"
              << "tokens/forward      " << cli::fixed(tpf, 2) << '\n'
              << "latency/problem     mean " << cli::format_seconds(lat.mean) << ", p50 " << cli::format_seconds(lat.p50) << ", p95 "
              << cli::format_seconds(lat.p95) << '\n'
              << "tokens/s            " << cli::fixed(tps, 1) << " (answer tokens per second of decoding)\n"
              << "total               " << cli::format_seconds(t.seconds) << " for " << results.size() << " problems, "
              << t.batched_forwards << " batched forwards\n";
    if (t.failed > 0)
        std::cout << "failed              " << t.failed << " problem(s), " << t.refused
                  << " of them refused before decoding (counted wrong, not in forwards or latency; reasons on stderr and in --predictions)\n";

    // Each file is written even when the other cannot be; a failure is reported and the run exits 1.
    bool written = true;
    const auto write = [&](const std::string& path, const std::string& text) {
        try {
            cli::write_file(path, text);
        } catch (const error& e) {
            std::cerr << "dlm-eval: " << e.what() << '\n';
            written = false;
        }
    };
    if (!o.predictions.empty()) {
        std::string lines;
        for (const auto& x : results) {
            nlohmann::ordered_json line{{"prompt", x.prompt}, {"answer", x.answer}};
            if (!x.failure.empty()) line["failure"] = x.failure;
            lines += line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";  // bytes that are not UTF-8: U+FFFD
        }
        write(o.predictions, lines);
    }
    if (!o.json.empty()) {
        nlohmann::json& j = run;
        if (results.size() < planned) j.update({{"interrupted", true}, {"problems_planned", planned}});
        if (!stopped.empty()) j["stopped"] = stopped;
        j.update({{"refused", t.refused}});
        j.update({{"problems", results.size()},     {"correct", t.correct},          {"accuracy", accuracy},
                  {"mean_forwards", mean_forwards}, {"tokens_per_forward", tpf},     {"latency_mean_s", lat.mean},
                  {"latency_p50_s", lat.p50},       {"latency_p95_s", lat.p95},      {"tokens_per_second", tps},
                  {"answer_tokens", t.answer_tokens}, {"total_seconds", t.seconds}, {"batched_forwards", t.batched_forwards},
                  {"failed", t.failed}});
        write(o.json, j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");  // a path that is not UTF-8: U+FFFD
    }
    return written;
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
        cli::check_fits_shift(s, m.model, o.spelling("--preset"));
        cli::check_chat(m, o.chat, o.spelling("--chat"));
    } catch (const invalid_parameter& e) {
        std::cerr << "dlm-eval: " << e.what() << '\n';
        return 2;
    }
    if (o.chat && m.chat == io::chat_format::none)
        std::cerr << "dlm-eval: note: " << m.dir.string() << " has no chat template; --prompt-format alone makes the prompt\n";
    std::vector<std::string> texts;  // each problem's prompt, tokenized batch by batch (decode_batch)
    for (const auto& p : problems)
        texts.push_back(cli::prompt_text(m, cli::format_prompt(o.prompt_format, p.question), o.chat, o.thinking(), o.system));

    const std::string model_name = cli::model_name(m.dir);
    std::cerr << "dlm-eval: " << cli::describe(s) << " · model " << model_name << " · " << problems.size() << " problems from "
              << data.string() << " · batch " << o.batch << '\n';

    std::vector<outcome> results(problems.size());
    totals t;
    std::size_t done = 0;
    cli::progress_bar bar("dlm-eval " + std::string(cli::name_of(s.preset)), problems.size(), o.progress);
    std::signal(SIGINT, on_interrupt);
    std::signal(SIGTERM, on_interrupt);
    std::string stopped;  // a flag's refusal that ended the run once problems were finished ("" when none did)
    int status = 0;  // the refusal's exit status (cli::refused_status), 0 when none stopped the run
    for (const auto batch = static_cast<std::size_t>(o.batch); done < texts.size();) {
        const std::size_t e = std::min(texts.size(), done + batch);
        try {
            if (!decode_batch(o, s, m, texts, problems, done, e, results, t)) break;
        } catch (const invalid_parameter& x) {  // -n's or --batch's fault (decode_batch): stop as a signal does
            if (done == 0) throw;                // nothing finished to keep: refused as any bad value (cli::run_main)
            bar.finish();
            std::cerr << "dlm-eval: " << x.what() << '\n';
            stopped = x.what();
            status = cli::refused_status(x);     // as cli::run_main answers it
            break;
        }
        done = e;
        bar.update(e, "acc " + cli::fixed(100.0 * static_cast<double>(t.correct) / static_cast<double>(e), 1) + "%  " +
                          cli::format_seconds(t.seconds));
    }
    bar.finish();
    if (done < texts.size())
        std::cerr << "dlm-eval: " << (stopped.empty() ? "interrupted" : "stopped") << ": the figures and files hold the " << done
                  << " problems finished\n";
    results.resize(done);
    for (std::size_t i = 0; i < done; ++i) results[i].prompt = std::move(texts[i]);
    const bool written =
        report(o,
               {{"model", model_name}, {"model_dir", m.dir.string()}, {"data", data.string()}, {"preset", std::string(cli::name_of(s.preset))},
                {"settings", cli::describe(s)}, {"gen_length", s.gen_length}, {"block_length", cli::effective_block_length(s)}, {"batch", o.batch}},
               results, problems.size(), stopped, t);
    return !written ? 1 : status != 0 ? status : done < problems.size() ? 130 : 0;
}

int run(const cli::options& o) {
    cli::set_threads(o.threads);
    const std::filesystem::path data = o.data.empty() ? std::filesystem::path(DLM_DEFAULT_EVAL_DATA) : std::filesystem::path(o.data);
    std::vector<cli::problem> problems = cli::read_problems(data);
    if (o.limit > 0 && problems.size() > static_cast<std::size_t>(o.limit)) problems.resize(static_cast<std::size_t>(o.limit));
    if (problems.empty()) throw file_error(data.string(), "holds no problem");
    cli::check_distinct({{"--json", o.json}, {"--predictions", o.predictions}}, {{"--data", data}});
    const std::filesystem::path model = cli::resolve_model_dir(o);
    cli::check_outside_model("--json", o.json, model);
    cli::check_outside_model("--predictions", o.predictions, model);
    cli::check_writable(o.json);  // before hours of decoding, not after them
    cli::check_writable(o.predictions);
    return cli::with_loaded_model(model, cli::load_choice_of(o), [&](auto& m) { return evaluate(o, data, problems, m); }, cli::load_bar_if(o.progress));
}

}  // namespace

int main(int argc, char** argv) {
    return dlm::cli::run_main(dlm::cli::program::eval, "dlm-eval", argc, argv, run);
}
