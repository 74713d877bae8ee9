// dlm-generate — decode one prompt with any of dlm's presets (docs/cli.md).
//
//   dlm-generate -p "Tom has 3 apples. He buys 4 more. How many apples does he have now?" --stats
//   dlm-generate -m MODEL_DIR -p "..." --preset llada --steps 48 --visual
//   dlm-generate -p "..." --compare --trace compare.svg
//
// Prints the answer on stdout and the statistics on stderr. Exit status: 0 success, 1 a dlm error
// (file, model, decoding), 2 a bad flag or value.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include "cli/engines.hpp"
#include "cli/files.hpp"
#include "cli/model.hpp"
#include "cli/options.hpp"
#include "cli/presets.hpp"
#include "cli/stats.hpp"
#include "cli/terminal.hpp"
#include "cli/trace.hpp"
#include "cli/visual.hpp"

namespace {

using namespace dlm;

struct decoded {
    sequence_result result;
    double seconds = 0;  // the decode, without the time --visual spent drawing
};

template <class Model>
decoded decode(cli::basic_loaded_model<Model>& m, const cli::settings& s, const std::vector<token_id>& prompt, cli::canvas_view* view) {
    step_callback on_step;
    if (view) {
        view->begin(cli::describe(s));
        on_step = [view](const step_event& e) { return (*view)(e); };
    }
    const double drawn_before = view ? view->seconds() : 0.0;
    const auto t0 = std::chrono::steady_clock::now();
    const std::unique_ptr<registry::any_engine> eng = registry::make_engine(m.model, s);  // compiled once (cli/engines.hpp)
    sequence_result r = run_to_end(*eng, prompt, {.gen_length = s.gen_length, .seed = s.seed}, on_step, t0);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (view) {
        seconds -= view->seconds() - drawn_before;
        view->end();
    }
    return {std::move(r), seconds};
}

// Ctrl-C during a live canvas: give the terminal its cursor back.
extern "C" void restore_cursor(int) {
    constexpr std::string_view s = "\x1b[0m\x1b[?25h\n";
    [[maybe_unused]] const auto n = ::write(1, s.data(), s.size());
    ::_exit(130);
}

std::string shorten(std::string s, std::size_t n) {
    for (char& c : s)
        if (c == '\n' || c == '\t') c = ' ';
    if (cli::display_width(s) <= static_cast<int>(n)) return s;
    std::size_t cut = 0;
    for (std::size_t seen = 0; cut < s.size() && seen < n - 1; ++cut) seen += (static_cast<unsigned char>(s[cut]) & 0xC0) != 0x80;
    while (cut < s.size() && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) ++cut;
    return s.substr(0, cut) + "…";
}

template <class Model>
int run_with(const cli::options& o, cli::basic_loaded_model<Model>& m) {
    if (o.stats) std::cerr << cli::cpu_line(m) << std::endl;
    std::vector<cli::settings> runs;
    try {
        const cli::preset_choice chosen = cli::choose_preset(o, cli::model_preset(m));
        if (o.stats && !o.compare) std::cerr << "preset: " << cli::name_of(chosen.preset) << ", " << chosen.reason << std::endl;
        // The flag that chose the presets: --preset, --compare-presets, or --compare's default list.
        const std::string chooser = o.spelling(!o.compare ? "--preset" : o.was_given("--compare-presets") ? "--compare-presets" : "--compare");
        for (const cli::preset_id p : o.compare ? o.compare_presets : std::vector<cli::preset_id>{chosen.preset}) {
            cli::check_fits<Model>(p, chooser);
            runs.push_back(cli::resolve(o, p, m.hints));
            cli::check_fits_shift(runs.back(), m.model, chooser);
        }
        cli::check_chat(m, o.chat, o.spelling("--chat"));
    } catch (const invalid_parameter& e) {
        std::cerr << "dlm-generate: " << e.what() << '\n';
        return 2;
    }
    if (o.chat && m.chat == io::chat_format::none)
        std::cerr << "dlm-generate: note: " << m.dir.string() << " has no chat template; the prompt is used as it is\n";
    // Tokenized only as far as the run with the shortest canvas could take it (a longer prompt is
    // refused by every run), refused as that run's decode would refuse it (as_flags: -p, -n).
    const cli::settings& roomiest = *std::min_element(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return a.gen_length < b.gen_length; });
    const std::vector<token_id> prompt = cli::as_flags(o, roomiest, [&] {
        return cli::encode_prompt_within_context(m, o.prompt, o.chat, o.thinking(), o.system, roomiest.gen_length, "prompts[0]");
    });

    const bool tty = cli::is_terminal(1);
    std::optional<cli::canvas_view> view;
    if (o.visual) {
        view.emplace(m.tokenizer, m.model.mask_id(), m.model.eos_ids(), tty, o.visual_delay_ms.value_or(tty ? 40 : 0));
        if (tty) std::signal(SIGINT, restore_cursor);
    }

    std::vector<cli::trace_run> traces;
    for (const cli::settings& s : runs) {
        const decoded d = cli::as_flags(o, s, [&] { return decode(m, s, prompt, view ? &*view : nullptr); });
        if (o.compare) std::cout << "== " << cli::name_of(s.preset) << " ==\n";
        std::cout << cli::answer_text(m, d.result) << std::endl;
        if (o.stats || o.compare) std::cerr << cli::stats_line(s, d.result, d.seconds) << std::endl;
        if (!o.trace.empty()) {
            cli::trace_run t{std::string(cli::name_of(s.preset)), cli::effective_block_length(s), d.result, {}};
            for (const token_id id : d.result.tokens) t.text.push_back(m.tokenizer.decode(std::span<const token_id>(&id, 1), false));
            traces.push_back(std::move(t));
        }
    }

    if (!o.trace.empty()) {
        const std::string model_name = cli::model_name(m.dir);
        std::string title, subtitle = "model " + model_name + " · prompt \"" + shorten(o.prompt, 70) + "\"";
        if (traces.size() == 1) {
            const auto& r = traces.front().result;
            title = "dlm-generate trace · " + cli::describe(runs.front()) + " · " + std::to_string(r.stats.forwards) + " forwards, " +
                    cli::fixed(r.stats.tokens_per_forward(), 2) + " tokens/forward";
        } else {
            title = "dlm-generate --compare · forwards:";
            for (const auto& t : traces) title += " " + t.label + " " + std::to_string(t.result.stats.forwards) + (&t == &traces.back() ? "" : ",");
        }
        cli::write_trace(o.trace, cli::trace_scene(traces, title, subtitle));
        std::cerr << "dlm-generate: wrote " << o.trace << '\n';
    }
    return 0;
}

int run(const cli::options& o) {
    cli::set_threads(o.threads);
    const std::filesystem::path model = cli::resolve_model_dir(o);
    cli::check_outside_model("--trace", o.trace, model);
    cli::check_writable(o.trace);  // before the load and the decode, not after them
    return cli::with_loaded_model(model, cli::load_choice_of(o), [&](auto& m) { return run_with(o, m); }, cli::load_bar_if(o.progress));
}

}  // namespace

int main(int argc, char** argv) {
    return dlm::cli::run_main(dlm::cli::program::generate, "dlm-generate", argc, argv, run);
}
