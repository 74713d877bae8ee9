// cli/options.hpp — the options of dlm-generate and dlm-eval, and their parser.
//
//   dlm::cli::options o = dlm::cli::parse_args(args);                        // dlm-generate's flags
//   dlm::cli::options e = dlm::cli::parse_args(args, dlm::cli::program::eval);  // dlm-eval's
//
// parse_args never prints and never exits: a bad flag or value throws dlm::invalid_parameter whose
// parameter() is the flag as the user spelled it ("--diffusion-steps", "-n") and whose message says
// what is wrong, so the programs print one line and exit 2, and a fuzzer can call it directly.
// Flag names follow llama.cpp's llama-diffusion-cli where the two overlap (-m, -p, --diffusion-*,
// --temp, --top-k, --top-p, --seed); every flag is listed, with its help, in one table (flags()).
#pragma once

#include <algorithm>
#include <array>
#include <iostream>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <dlm/core/config.hpp>
#include <dlm/core/error.hpp>
#include <dlm/io/chat_template.hpp>
#include <dlm/registry/validate.hpp>

#include "bounds.hpp"
#include "values.hpp"

namespace dlm::cli {

/// The presets are the library's table (dlm/registry/table.hpp), by their command-line names;
/// the algorithms of --diffusion-algorithm are the registry's too.
using registry::algorithm;
using registry::algorithm_from_name;
using registry::name_of;
using registry::preset_id;

[[nodiscard]] inline std::string_view name_of(preset_id p) { return registry::builtin.name_of(p); }
/// A preset of the table by a name known at compile time (an unknown one does not compile).
[[nodiscard]] consteval preset_id preset_named(std::string_view name) { return registry::builtin.id(name); }

enum class program : unsigned { generate = 1, eval = 2, server = 4 };

/// The name a program reports itself by ("dlm-generate").
[[nodiscard]] inline std::string_view program_name(program p) noexcept {
    return p == program::generate ? "dlm-generate" : p == program::eval ? "dlm-eval" : "dlm-server";
}

/// Everything the command line sets. Unset optionals take the preset's default, or the model
/// folder's (see presets.hpp, resolve()).
struct options {
    program prog = program::generate;
    bool help = false;

    // Model and prompt.
    std::string model;   ///< -m: a model folder; empty: $DLM_MODEL, else the shipped default model
    std::string prompt;  ///< -p (dlm-generate)
    bool chat = false;   ///< wrap the prompt in the model folder's chat template
    bool think = false;     ///< with chat: the template's thinking mode on (enable_thinking=true)
    bool no_think = false;  ///< with chat: the template's thinking mode off (enable_thinking=false)
    std::string system;     ///< with chat: a system message before the prompt
    int threads = 0;     ///< -t: OpenMP threads; 0: OpenMP's default
    std::string dtype;   ///< --dtype: hold the weights as f32, bf16 or f16; empty ("keep"): as stored
    std::string kv;      ///< --kv: the KV cache's element type, f32 or bf16; empty: f32

    // Decoding.
    preset_id preset = preset_named("cdlm");  ///< --preset; when not given, the model's (cli::choose_preset)
    std::optional<index_t> gen_length, block_length, steps;
    std::optional<double> threshold, eps, alg_temp, editing_threshold;
    std::optional<algorithm> alg;
    std::optional<float> temperature, top_p;
    std::optional<index_t> top_k;
    std::uint64_t seed = 0;

    // dlm-generate's output.
    bool visual = false;
    std::optional<int> visual_delay_ms;  ///< pause after each redraw; default 40 on a terminal, else 0
    bool stats = false;
    std::string trace;  ///< .svg, or .png when built with libpng
    bool compare = false;
    std::vector<preset_id> compare_presets;  ///< with --compare; default llada, fast-dllm, cdlm, cd4lm

    // dlm-eval.
    std::string data;                        ///< JSONL; empty: the shipped test set
    std::string prompt_format = "{question}";  ///< {question} is replaced by the question
    index_t batch = 1;
    index_t limit = 0;  ///< 0: every problem
    std::string json, predictions;
    bool progress = true;

    // dlm-server (docs/server.md).
    std::string host = "127.0.0.1";
    int port = 8080;                       ///< 0: any free port (the one taken is printed)
    std::string alias;                     ///< the model id of /v1/models; empty: the model folder's name
    index_t parallel = 8;                  ///< sequences in the running batch at most
    index_t queue = 32;                    ///< requests waiting to join at most (more get 429)
    std::size_t max_body = 1 << 20;        ///< request body bytes at most (more get 413)
    double timeout = 300;                  ///< seconds a request may take in all (queue and decode)
    std::size_t max_connections = 128;     ///< open HTTP connections at most (more: 503)
    double header_timeout = 10;            ///< seconds a request's line and headers may take to arrive (then 408)
    double body_timeout = 60;              ///< seconds its body may take after them (then 408)
    double drain_timeout = 30;             ///< seconds in-flight requests get after SIGTERM before they are cancelled
    std::size_t prompt_cache_mib = 0;      ///< MiB of exact prompt K/V kept across requests (0: none; docs/server.md)
    std::string device = "cpu";            ///< where the model runs: cpu, or cuda (a dlm-server built with CUDA; docs/server.md)

    /// The spelling the user gave each flag, by the flag's canonical name ("--steps" may have been
    /// given as "--diffusion-steps"), so later errors name the flag as it was typed.
    std::map<std::string, std::string, std::less<>> given;

    [[nodiscard]] bool was_given(std::string_view canonical) const { return given.find(canonical) != given.end(); }
    /// The chat template's enable_thinking: --think, --no-think, or neither (the template's default).
    [[nodiscard]] io::chat_thinking thinking() const noexcept {
        return think ? io::chat_thinking::on : no_think ? io::chat_thinking::off : io::chat_thinking::template_default;
    }
    [[nodiscard]] std::string spelling(std::string_view canonical) const {
        const auto it = given.find(canonical);
        return it != given.end() ? it->second : std::string(canonical);
    }
};

namespace detail {

/// A value of registry option `o` within its bounds (bounds.hpp), as the Python package bounds it.
template <class T>
T option_value(std::string_view flag, std::string_view v, registry::option o) {
    const option_bounds b = bounds_of(o);
    if constexpr (std::is_integral_v<T>) {
        return to_integer<T>(flag, v, static_cast<T>(b.lo), static_cast<T>(b.hi));
    } else {
        const double x = in_range(flag, v, b.lo, b.hi, b.open_lo, b.open_hi);
        if (std::is_same_v<T, float> && !float_keeps_range(x, b.lo, b.hi, b.open_lo, b.open_hi))  // --top-p 1e-50 is 0 as a float
            bad(flag, "is " + std::string(v) + ", which the sampler's float holds as " + std::to_string(static_cast<float>(x)) +
                          ", outside the range of " + std::string(flag) + " (use a value a float can tell from its bound)");
        return static_cast<T>(x);
    }
}

inline preset_id to_preset(std::string_view flag, std::string_view v) {
    if (auto p = registry::builtin.find(v)) return *p;
    bad(flag, "unknown preset " + quoted(v) + " (one of " + registry::builtin.list() + ")");
}

inline std::string as_path(std::string_view flag, std::string_view v) { return non_empty(flag, v, "a file name"); }

inline constexpr index_t max_index = std::numeric_limits<index_t>::max();

}  // namespace detail

/// One flag: its names (the first is canonical), the value it takes ("" for a switch), its help,
/// the programs that accept it, and what it sets.
struct flag {
    std::string_view section;
    std::string_view names;  ///< ", "-separated
    std::string_view metavar;
    std::string_view help;
    unsigned programs;
    void (*apply)(options&, std::string_view flag, std::string_view value);
};

/// Every flag of both programs, in the order --help lists them.
[[nodiscard]] inline std::span<const flag> flags() {
    using namespace detail;
    using O = registry::option;
    constexpr unsigned G = static_cast<unsigned>(program::generate), E = static_cast<unsigned>(program::eval),
                       S = static_cast<unsigned>(program::server), B = G | E | S;
    static const flag table[] = {
        {"General", "-h, --help", "", "print this help and exit", B, [](options& o, auto, auto) { o.help = true; }},
        {"General", "--no-progress", "", "no progress bars (the weights' load; dlm-eval's problems): drawn only when stderr is a terminal", B,
         [](options& o, auto, auto) { o.progress = false; }},
        {"Model and prompt", "-m, --model", "PATH",
         "model folder (config.json, *.safetensors, tokenizer.json) or .gguf file; default: $DLM_MODEL, else the shipped CDLM student", B,
         [](options& o, auto f, auto v) { o.model = as_path(f, v); }},
        {"Model and prompt", "-p, --prompt", "TEXT", "the prompt", G, [](options& o, auto, auto v) { o.prompt = std::string(v); }},
        {"Model and prompt", "--chat", "", "wrap the prompt in the model folder's chat template (LLaDA, ChatML, Qwen3 or Gemma 4)", G | E,
         [](options& o, auto, auto) { o.chat = true; }},
        {"Model and prompt", "--think", "", "with --chat, the template's thinking mode on (enable_thinking=true: Gemma 4, Qwen3; other templates have none)",
         G | E, [](options& o, auto, auto) { o.think = true; }},
        {"Model and prompt", "--system", "TEXT", "with --chat, a system message before the prompt (the template's system turn)", G | E,
         [](options& o, auto f, auto v) { o.system = non_empty(f, v, "a system message"); }},
        {"Model and prompt", "--no-think", "", "with --chat, the template's thinking mode off (enable_thinking=false: Qwen3's empty thought; Gemma 4's default)",
         G | E, [](options& o, auto, auto) { o.no_think = true; }},
        {"Model and prompt", "-t, --threads", "N", "CPU threads (default: OpenMP's, usually every core)", B,
         [](options& o, auto f, auto v) { o.threads = to_integer<int>(f, v, 1, max_threads); }},
        {"Model and prompt", "--dtype", "TYPE",
         "hold and multiply the weights as f32, bf16 or f16 (default keep: as the checkpoint stores them)", B,
         [](options& o, auto f, auto v) {
             if (v != "keep" && v != "f32" && v != "bf16" && v != "f16")
                 throw invalid_parameter(std::string(f), "must be keep, f32, bf16 or f16, not '" + std::string(v) + "'");
             o.dtype = v == "keep" ? std::string() : std::string(v);
         }},
        {"Model and prompt", "--kv", "TYPE",
         "the KV cache's element type: f32 (default) or bf16 (half the bytes; the attention's products in bf16, "
         "logits within 2e-2 of f32's: docs/determinism.md)", B,
         [](options& o, auto f, auto v) {
             if (v != "f32" && v != "bf16") throw invalid_parameter(std::string(f), "must be f32 or bf16, not '" + std::string(v) + "'");
             o.kv = std::string(v);
         }},
        {"Decoding", "--preset", "NAME",
         "a preset of the registry: {presets} (default: the model's: "
         "sdar, fast-dllm-v2 and llada2 for their families, llada21 for LLaDA 2.1 checkpoints, autoregressive for Qwen2, else cdlm)", B,
         [](options& o, auto f, auto v) { o.preset = to_preset(f, v); }},
        {"Decoding", "-n, --gen-length", "N", "generation slots (default: the model's dlm_gen_length, else 128)", B,
         [](options& o, auto f, auto v) { o.gen_length = option_value<index_t>(f, v, O::gen_length); }},
        {"Decoding", "--block-length, --diffusion-block-length", "N",
         "slots per block (default: the model's dlm_block_length, else 32); not for dream or autoregressive", B,
         [](options& o, auto f, auto v) { o.block_length = option_value<index_t>(f, v, O::block_length); }},
        {"Decoding", "--steps, --diffusion-steps", "N",
         "{takes:steps}; llada, dream: forwards in total (default: gen-length); sdar, llada2: planned steps per block (default: "
         "block-length); diffusion-gemma: forwards per canvas at most (default 48)", B,
         [](options& o, auto f, auto v) { o.steps = option_value<index_t>(f, v, O::steps); }},
        {"Decoding", "--threshold", "P",
         "confidence threshold in (0, 1] ({takes:threshold}); default 0.9, cd4lm and llada2 0.95, sdar 0.85, llada21 0.7 "
         "(the fill threshold), llada21-s 0.5, diffusion-gemma 0.1 (the entropy bound)", B,
         [](options& o, auto f, auto v) { o.threshold = option_value<double>(f, v, O::threshold); }},
        {"Decoding", "--editing-threshold", "P",
         "token editing ({takes:editing_threshold}): replace a filled token of the active block when the model now prefers "
         "another with confidence above P, in [0, 1] (default 0.5 llada21, 0 llada21-s, 0.9 cdlm-edit and fast-dllm-edit)", B,
         [](options& o, auto f, auto v) { o.editing_threshold = option_value<double>(f, v, O::editing_threshold); }},
        {"Decoding", "--diffusion-algorithm, --alg", "ALG",
         "dream: origin (default), maskgit_plus, topk_margin, entropy; llada: maskgit_plus (low-confidence remasking, "
         "default) or random. llama.cpp's numbers are accepted: 0 origin, 1 entropy, 2 margin = topk_margin, 3 random, "
         "4 confidence = maskgit_plus",
         B, [](options& o, auto f, auto v) {
             const auto a = algorithm_from_name(v);
             if (!a) bad(f, "unknown algorithm " + quoted(v) + " (origin, maskgit_plus, topk_margin, entropy, random, or 0-4)");
             o.alg = *a;
         }},
        {"Decoding", "--diffusion-eps, --eps", "E", "dream: the last timestep, in (0, 1) (default 0.001)", B,
         [](options& o, auto f, auto v) { o.eps = option_value<double>(f, v, O::eps); }},
        {"Decoding", "--diffusion-alg-temp, --alg-temp", "T",
         "dream: > 0 draws the ranked slots from softmax(confidence / T) instead of taking the top (default 0)", B,
         [](options& o, auto f, auto v) { o.alg_temp = option_value<double>(f, v, O::alg_temp); }},
        {"Sampling", "--temp", "T", "temperature in [0, 1e6], 0 = greedy (default 0; sdar and diffusion-gemma 1): {takes:temperature}", B,
         [](options& o, auto f, auto v) { o.temperature = option_value<float>(f, v, O::temperature); }},
        {"Sampling", "--top-k", "K", "keep the K most probable tokens, 0 = off (default 0): as --temp", B,
         [](options& o, auto f, auto v) { o.top_k = option_value<index_t>(f, v, O::top_k); }},
        {"Sampling", "--top-p", "P", "nucleus in (0, 1], 1 = off (default 1): as --temp", B,
         [](options& o, auto f, auto v) { o.top_p = option_value<float>(f, v, O::top_p); }},
        {"Sampling", "-s, --seed", "N", "seed of every random draw (default 0)", B,
         [](options& o, auto f, auto v) { o.seed = to_integer<std::uint64_t>(f, v, 0, std::numeric_limits<std::uint64_t>::max()); }},
        {"Output", "--visual, --diffusion-visual", "",
         "show the canvas while it is decoded: redrawn in place on a terminal, one line per forward otherwise", G,
         [](options& o, auto, auto) { o.visual = true; }},
        {"Output", "--visual-delay", "MS", "pause after each redraw of --visual (default 40 on a terminal, else 0)", G,
         [](options& o, auto f, auto v) { o.visual_delay_ms = to_integer<int>(f, v, 0, 10000); }},
        {"Output", "--stats", "", "print the statistics line (forwards, steps per block, tokens per forward, latency, tokens/s)", G,
         [](options& o, auto, auto) { o.stats = true; }},
        {"Output", "--trace", "FILE",
         "draw the decoding trajectory: slots across, forwards down, colour = confidence at commit (.svg, or .png)", G,
         [](options& o, auto f, auto v) { o.trace = as_path(f, v); }},
        {"Output", "--compare", "",
         "decode the prompt under several presets; one statistics line each, one picture with --trace", G,
         [](options& o, auto, auto) { o.compare = true; }},
        {"Output", "--compare-presets", "LIST", "the presets of --compare, comma-separated (default llada,fast-dllm,cdlm,cd4lm)", G,
         [](options& o, auto f, auto v) {
             o.compare = true;
             o.compare_presets.clear();
             for (const std::string_view p : split_commas(v)) o.compare_presets.push_back(to_preset(f, p));
         }},
        {"Evaluation", "--data", "FILE", "JSONL problems with \"question\" and \"final\" (default: the shipped test set)", E,
         [](options& o, auto f, auto v) { o.data = as_path(f, v); }},
        {"Evaluation", "--prompt-format", "TEXT",
         "the prompt made of a problem; {question} stands for its question (default \"{question}\", as the training "
         "scripts prompt)", E,
         [](options& o, auto f, auto v) {
             if (v.find("{question}") == std::string_view::npos) bad(f, "must contain {question}, got " + quoted(v));
             o.prompt_format = std::string(v);
         }},
        {"Evaluation", "--batch", "N", "problems decoded together (default 1)", E,
         [](options& o, auto f, auto v) { o.batch = to_integer<index_t>(f, v, 1, 1 << 16); }},
        {"Evaluation", "--limit", "N", "evaluate the first N problems only (default: all)", E,
         [](options& o, auto f, auto v) { o.limit = to_integer<index_t>(f, v, 1, max_index); }},
        {"Evaluation", "--json", "FILE", "also write the figures as a JSON object", E,
         [](options& o, auto f, auto v) { o.json = as_path(f, v); }},
        {"Evaluation", "--predictions", "FILE", "write each completion as a JSONL line {\"prompt\": ..., \"answer\": ...}, with \"failure\" for a problem that failed (for tools/score.py)", E,
         [](options& o, auto f, auto v) { o.predictions = as_path(f, v); }},
        {"Server", "--host", "ADDR", "address to listen on (default 127.0.0.1; 0.0.0.0: every interface)", S,
         [](options& o, auto f, auto v) { o.host = non_empty(f, v, "an address"); }},
        {"Server", "--port", "N", "port to listen on (default 8080; 0: any free port, printed at start)", S,
         [](options& o, auto f, auto v) { o.port = to_integer<int>(f, v, 0, 65535); }},
        {"Server", "-a, --alias", "NAME", "the model id /v1/models lists and requests name (default: the model folder's name)", S,
         [](options& o, auto f, auto v) { o.alias = non_empty(f, v, "a model name"); }},
        {"Server", "-np, --parallel", "N", "sequences decoded together in the running batch at most (default 8)", S,
         [](options& o, auto f, auto v) { o.parallel = to_integer<index_t>(f, v, 1, 4096); }},
        {"Server", "--queue", "N", "requests waiting for a place in the batch at most; more get 429 (default 32; 0: none waits)", S,
         [](options& o, auto f, auto v) { o.queue = to_integer<index_t>(f, v, 0, 1 << 20); }},
        {"Server", "--max-body", "BYTES", "request body bytes at most, as decoded (chunked bodies too); more get 413 (default 1048576)", S,
         [](options& o, auto f, auto v) { o.max_body = to_integer<std::size_t>(f, v, 64, std::size_t{1} << 30); }},
        {"Server", "--timeout", "SECONDS", "time a request may take in all, queue included; then it ends (default 300)", S,
         [](options& o, auto f, auto v) { o.timeout = in_range(f, v, 0, 86400, true); }},
        {"Server", "--max-connections", "N", "open connections at most; past it a connection still sending its head is dropped, else 503 (default 128)", S,
         [](options& o, auto f, auto v) { o.max_connections = to_integer<std::size_t>(f, v, 1, 65536); }},
        {"Server", "--header-timeout", "SECONDS", "a request's line and headers must arrive within this, however slowly sent; else 408 (default 10)", S,
         [](options& o, auto f, auto v) { o.header_timeout = in_range(f, v, 0, 3600, true); }},
        {"Server", "--body-timeout", "SECONDS", "its body must arrive within this after them; else 408 (default 60)", S,
         [](options& o, auto f, auto v) { o.body_timeout = in_range(f, v, 0, 3600, true); }},
        {"Server", "--drain-timeout", "SECONDS", "after SIGTERM, time in-flight requests get to finish before they are cancelled (default 30)", S,
         [](options& o, auto f, auto v) { o.drain_timeout = in_range(f, v, 0, 86400, false); }},
        {"Server", "--prompt-cache", "MIB",
         "keep the exact K/V of shared prompt blocks across requests, at most MIB MiB (default 0: none), on the CPU or the GPU; "
         "presets with an exact KV cache only (autoregressive, cdlm, cdlm-edit, sdar, llada2, llada21, llada21-s, fast-dllm-v2)", S,
         [](options& o, auto f, auto v) { o.prompt_cache_mib = to_integer<std::size_t>(f, v, 0, std::size_t{1} << 20); }},
        {"Server", "--device", "cpu|cuda",
         "where the model runs (default cpu); cuda: on the GPU, the presets with a device step (autoregressive, llada, dream, "
         "fast-dllm, fast-dllm-dual, cdlm, cd4lm) sampling and selecting there too (a dlm-server built with a CUDA compiler)", S,
         [](options& o, auto f, auto v) {
             if (v != "cpu" && v != "cuda") throw invalid_parameter(std::string(f), "must be cpu or cuda, got '" + std::string(v) + "'");
             o.device = std::string(v);
         }},
    };
    return table;
}

/// The names of a flag ("--steps, --diffusion-steps" → {"--steps", "--diffusion-steps"}).
[[nodiscard]] inline std::vector<std::string_view> names_of(const flag& f) {
    std::vector<std::string_view> out;
    std::string_view n = f.names;
    while (!n.empty()) {
        const std::size_t c = n.find(", ");
        out.push_back(n.substr(0, c));
        n = c == std::string_view::npos ? std::string_view{} : n.substr(c + 2);
    }
    return out;
}

/// The canonical name of a flag: its first long name.
[[nodiscard]] inline std::string_view canonical_name(const flag& f) {
    for (auto n : names_of(f))
        if (n.starts_with("--")) return n;
    return names_of(f).front();
}

[[nodiscard]] inline const flag* find_flag(std::string_view name, program p) {
    for (const flag& f : flags())
        if (f.programs & static_cast<unsigned>(p))
            for (auto n : names_of(f))
                if (n == name) return &f;
    return nullptr;
}

namespace detail {

/// The flag that sets a registry option, by its canonical name.
[[nodiscard]] inline std::string_view flag_of(registry::option o) noexcept {
    using O = registry::option;
    switch (o) {
        case O::gen_length: return "--gen-length";
        case O::block_length: return "--block-length";
        case O::steps: return "--steps";
        case O::threshold: return "--threshold";
        case O::eps: return "--diffusion-eps";
        case O::alg_temp: return "--diffusion-alg-temp";
        case O::algorithm: return "--diffusion-algorithm";
        case O::temperature: return "--temp";
        case O::top_k: return "--top-k";
        case O::top_p: return "--top-p";
        case O::seed: return "--seed";
        case O::editing_threshold: return "--editing-threshold";
    }
    return "?";
}

/// What the flags given choose, as the registry reads it.
[[nodiscard]] inline registry::choices choices_of(const options& o) {
    return {.gen_length = o.gen_length, .block_length = o.block_length, .steps = o.steps, .threshold = o.threshold, .eps = o.eps,
            .alg_temp = o.alg_temp, .alg = o.alg, .temperature = o.temperature, .top_k = o.top_k, .top_p = o.top_p,
            .seed = o.was_given("--seed") ? std::optional<std::uint64_t>(o.seed) : std::nullopt, .editing_threshold = o.editing_threshold};
}

/// Names an option in refusals by its flag as the user typed it ("--diffusion-steps", "-n").
[[nodiscard]] inline registry::option_namer flag_namer(const options& o) {
    return [&o](registry::option x) { return o.spelling(flag_of(x)); };
}

/// A flag given for a preset whose policies have no such option is refused (by the registry, which
/// reads what the policies accept from their types), so that nobody reads a result believing an
/// option was applied. Neutral values (--temp 0, --top-k 0, --top-p 1) pass.
inline void check_preset_flags(const options& o) { registry::check_accepted(registry::builtin, o.preset, choices_of(o), flag_namer(o)); }

/// With --compare: a flag none of the compared presets takes would change nothing in the comparison,
/// so it is refused by name, as one the single preset does not take is.
inline void check_compared_flags(const options& o) {
    const registry::option_set given = choices_of(o).given();
    for (std::size_t i = 0; i < registry::option_count; ++i) {
        const auto x = static_cast<registry::option>(i);
        if (!given.contains(x) || x == registry::option::gen_length || x == registry::option::seed) continue;
        std::string names;
        bool taken = false;
        for (const preset_id p : o.compare_presets) {
            taken = taken || registry::builtin.accepts(p).takes(x);
            names += (names.empty() ? "" : ", ") + std::string(registry::builtin.name_of(p));
        }
        if (!taken) throw invalid_parameter(o.spelling(flag_of(x)), "none of the compared presets (" + names + ") takes it; it would change nothing");
    }
}

}  // namespace detail

/// Parses the arguments after the program name. Throws dlm::invalid_parameter naming the flag (as
/// given) for an unknown flag, a missing, malformed or out-of-range value, a flag that does not
/// apply to the --preset given (without one, choose_preset checks them against the model's), or a missing -p. With -h / --help anywhere, returns at once with
/// `help` set (flags after it are not read).
[[nodiscard]] inline options parse_args(std::span<const std::string_view> args, program prog = program::generate) {
    options o;
    o.prog = prog;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string_view a = args[i];
        if (a.size() < 2 || a[0] != '-')
            detail::bad(a.empty() ? std::string_view("\"\"") : a,
                        "unexpected argument; every value follows its flag (the prompt goes after -p; see --help)");
        std::string_view name = a;
        std::optional<std::string_view> inline_value;
        if (a.starts_with("--"))
            if (const auto eq = a.find('='); eq != std::string_view::npos) {
                name = a.substr(0, eq);
                inline_value = a.substr(eq + 1);
            }
        const flag* f = find_flag(name, prog);
        if (!f) {
            for (const program other : {program::generate, program::eval, program::server})
                if (other != prog && find_flag(name, other))
                    detail::bad(name, "is a flag of " + std::string(program_name(other)) + ", not of this program (see --help)");
            detail::bad(name, "unknown flag (see --help)");
        }
        std::string_view value;
        if (!f->metavar.empty()) {
            if (inline_value) value = *inline_value;
            else if (i + 1 < args.size()) value = args[++i];
            else detail::bad(name, "needs a value (" + std::string(f->metavar) + ")");
        } else if (inline_value) {
            detail::bad(name, "takes no value, got " + detail::quoted(*inline_value));
        }
        f->apply(o, name, value);
        o.given.insert_or_assign(std::string(canonical_name(*f)), std::string(name));
        if (o.help) return o;
    }
    if (prog == program::generate && !o.was_given("--prompt"))
        detail::bad("-p", "a prompt is required, e.g. -p \"What is 3 + 4?\"");
    if (prog == program::generate && o.prompt.empty()) detail::bad(o.spelling("--prompt"), "the prompt is empty");
    if (o.compare && o.compare_presets.empty())
        o.compare_presets = {preset_named("llada"), preset_named("fast-dllm"), preset_named("cdlm"), preset_named("cd4lm")};
    if (o.compare && o.was_given("--preset"))
        detail::bad(o.spelling("--preset"), "cannot be combined with --compare; list the presets with --compare-presets");
    if (o.think && !o.chat) detail::bad(o.spelling("--think"), "needs --chat (it is the chat template's thinking mode)");
    if (o.no_think && !o.chat) detail::bad(o.spelling("--no-think"), "needs --chat (it is the chat template's thinking mode)");
    if (o.think && o.no_think) detail::bad(o.spelling("--no-think"), "contradicts --think: give one of them");
    if (!o.system.empty() && !o.chat) detail::bad(o.spelling("--system"), "needs --chat (it is the chat template's system turn)");
    if (o.kv == "bf16" && o.device == "cuda")
        detail::bad(o.spelling("--kv"), "bf16 is the CPU transformer's here: dlm-server --device cuda holds f32 K/V (the library's "
                                        "dlm::cuda::transformer_bf16_kv, and dlm-bench-cuda --kv bf16, hold bf16)");
    if (!o.compare && o.was_given("--preset")) detail::check_preset_flags(o);  // else once the model's preset is known (choose_preset)
    if (!o.trace.empty()) {
        const auto ends = [&](std::string_view ext) {
            return o.trace.size() > ext.size() && std::equal(ext.rbegin(), ext.rend(), o.trace.rbegin(), [](char x, char y) {
                       return x == (y >= 'A' && y <= 'Z' ? static_cast<char>(y - 'A' + 'a') : y);
                   });
        };
        if (ends(".png")) {
#ifndef DLM_CLI_HAVE_PNG
            detail::bad(o.spelling("--trace"), "this program was built without libpng, so it writes .svg only (install libpng-dev "
                                               "and configure again for .png)");
#endif
        } else if (!ends(".svg")) {
            detail::bad(o.spelling("--trace"), "the file name must end in .svg or .png, got " + detail::quoted(o.trace));
        }
    }
    return o;
}

/// A flag's help with the registry's preset lists in place of "{presets}" (every preset) and
/// "{takes:OPTION}" (the presets whose policies take OPTION, presets_taking), so that no list drifts.
[[nodiscard]] inline std::string with_preset_lists(std::string_view text) {
    std::string help(text);
    if (const auto at = help.find("{presets}"); at != std::string::npos) help.replace(at, 9, registry::builtin.list());
    for (std::size_t at; (at = help.find("{takes:")) != std::string::npos;) {
        const std::size_t end = help.find('}', at);
        const auto o = registry::option_of_parameter(std::string_view(help).substr(at + 7, end - at - 7));
        help.replace(at, end + 1 - at, o ? presets_taking(*o) : std::string("?"));
    }
    return help;
}

/// The --help text of a program, listing every flag it accepts.
[[nodiscard]] inline std::string help_text(program prog) {
    std::string out;
    if (prog == program::generate)
        out += "usage: dlm-generate [-m MODEL] -p PROMPT [options]\n\n"
               "Decodes one prompt with one of dlm's decoders and prints the answer.\n";
    else if (prog == program::server)
        out += "usage: dlm-server [-m MODEL] [--preset NAME] [--host ADDR] [--port N] [options]\n\n"
               "Serves one model with one preset over HTTP: OpenAI's /v1/completions and /v1/chat/completions (streamed\n"
               "with \"stream\": true), /v1/models, /health (liveness), /ready (readiness) and /metrics (docs/server.md).\n"
               "The decoding flags set the defaults a request may override where the preset allows it. SIGTERM drains:\n"
               "new requests get 503, those in flight get --drain-timeout seconds, then the server exits 0.\n";
    else
        out += "usage: dlm-eval [-m MODEL] [--data FILE.jsonl] [options]\n\n"
               "Decodes every problem of a JSONL set with one preset and prints accuracy (the number after \"####\"),\n"
               "forwards per problem, tokens per forward, latency per problem (mean, p50, p95) and tokens/s.\n";
    std::string_view section;
    for (const flag& f : flags()) {
        if (!(f.programs & static_cast<unsigned>(prog))) continue;
        if (f.section != section) {
            section = f.section;
            out += '\n';
            out.append(section);
            out += ":\n";
        }
        std::string line = "  " + std::string(f.names) + (f.metavar.empty() ? "" : " " + std::string(f.metavar));
        if (line.size() >= 34) {  // a long head gets a line of its own
            out += line + "\n";
            line.clear();
        }
        line.resize(34, ' ');
        // Wrap the help at 100 columns.
        const std::string help = with_preset_lists(f.help);
        std::string_view words = help;
        while (!words.empty()) {
            const std::size_t sp = words.find(' ');
            const std::string_view w = words.substr(0, sp);
            if (line.size() + w.size() + 1 > 100 && line.size() > 34) {
                out += line + "\n";
                line = std::string(34, ' ');
            }
            if (line.size() > 34) line += ' ';
            line.append(w);
            words = sp == std::string_view::npos ? std::string_view{} : words.substr(sp + 1);
        }
        out += line + "\n";
    }
    out += "\nDefaults per preset are its policies' own (the preset registry, docs/policies.md); a model folder\n"
           "whose config.json holds dlm_gen_length / dlm_block_length (dlm's shipped models) sets the generation\n"
           "and block lengths.\n"
           "Exit status: 0 success, 1 a dlm error (file, model, decoding), 2 a bad flag or value.\n";
    return out;
}

/// The shared `main` of dlm-generate and dlm-eval: parse the arguments (a bad flag: one line, exit 2),
/// print the help, or call `run(options)` (a dlm error: its message, exit 1; a dlm::invalid_parameter
/// naming a flag, "-n" or "--kv", found only once the model is loaded, exit 2 as at parse time).
/// Standard output, flushed: false (with a message) when what the program wrote there did not all
/// reach it (a closed descriptor, a full disk): the answer is lost, which is no success.
inline bool stdout_written(std::string_view name) {
    std::cout.flush();
    if (std::cout) return true;
    std::cerr << name << ": error: standard output could not be written (closed, or its disk full): the output is lost\n";
    return false;
}

/// A refused value's exit status: 2 for a flag as the user typed it (its name starts with '-'), 1 for
/// a value the model's files gave (a dlm error like any other).
[[nodiscard]] inline int refused_status(const invalid_parameter& e) { return e.parameter().starts_with('-') ? 2 : 1; }

template <class Run>
int run_main(program prog, std::string_view name, int argc, char** argv, Run run) {
    const std::vector<std::string_view> args(argv + 1, argv + argc);
    options o;
    try {
        o = parse_args(args, prog);
    } catch (const invalid_parameter& e) {
        std::cerr << name << ": " << e.what() << '\n';
        return 2;
    }
    if (o.help) {
        std::cout << help_text(prog);
        return stdout_written(name) ? 0 : 1;
    }
    try {
        const int status = run(o);
        return stdout_written(name) || status != 0 ? status : 1;
    } catch (const invalid_parameter& e) {  // found once the model is known, still a bad value of the flag it names
        std::cerr << name << ": " << e.what() << '\n';
        return refused_status(e);
    } catch (const error& e) {
        std::cerr << name << ": " << e.what() << '\n';
    } catch (const std::exception& e) {
        std::cerr << name << ": error: " << e.what() << '\n';
    }
    return 1;
}

}  // namespace dlm::cli
