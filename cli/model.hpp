// cli/model.hpp — which model folder to use, and loading it: the CPU transformer (or, for a
// DiffusionGemma folder, cpu::diffusion_gemma), its tokenizer, its chat format and the decoding hints
// of its config.json (read by the library).
#pragma once

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <memory>
#include <optional>
#include <utility>
#include <span>
#include <string>
#include <vector>

#include <dlm/cpu/diffusion_gemma.hpp>
#include <dlm/cpu/transformer.hpp>
#include <dlm/engine/prepare.hpp>
#include <dlm/io/chat_template.hpp>
#include <dlm/io/gguf_tokenizer.hpp>
#include <dlm/io/tokenizer.hpp>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "options.hpp"
#include "presets.hpp"
#include "terminal.hpp"

#ifndef DLM_DEFAULT_MODEL_DIR
#define DLM_DEFAULT_MODEL_DIR "models/cdlm"
#endif

namespace dlm::cli {

/// The model folder (or .gguf file): -m, else $DLM_MODEL, else the shipped default (DLM_DEFAULT_MODEL_DIR, set by
/// CMake to the source tree's models/cdlm). Throws dlm::file_error, saying how to pass a
/// model, when the default is not there.
[[nodiscard]] inline std::filesystem::path resolve_model_dir(const options& o) {
    if (!o.model.empty()) return o.model;
    if (const char* env = std::getenv("DLM_MODEL"); env && *env) return env;
    const std::filesystem::path fallback = DLM_DEFAULT_MODEL_DIR;
    std::error_code ec;
    if (!std::filesystem::is_directory(fallback, ec))
        throw file_error(fallback.string(), "the default model (dlm's CDLM student) is not there; pass a model folder with -m DIR "
                                            "or set DLM_MODEL=DIR");
    return fallback;
}

/// The generation and block lengths the model suggests (dlm_gen_length and dlm_block_length of its
/// config.json), through the library's dlm::decoding_hints_of, which every preset uses for what the
/// flags leave unset.
template <class Model>
[[nodiscard]] model_hints hints_of(const Model& model) {
    const decoding_hints h = decoding_hints_of(model);
    return {h.gen_length.value.value_or(0), h.block_length.value.value_or(0)};
}

/// A loaded model folder.
template <class Model>
struct basic_loaded_model {
    std::filesystem::path dir;
    Model model;
    io::tokenizer tokenizer;
    io::chat_format chat = io::chat_format::none;
    model_hints hints;
    double load_seconds = 0;  ///< the weights and the tokenizer, wall clock (--stats' cpu line)
};
/// The CPU transformer's (every family but DiffusionGemma).
using loaded_model = basic_loaded_model<cpu::transformer>;
/// DiffusionGemma's (uniform-state diffusion: its own model class and preset).
using gemma_model = basic_loaded_model<cpu::diffusion_gemma>;

/// Whether `dir` is a DiffusionGemma folder (config.json model_type "diffusion_gemma") or a GGUF file
/// of llama.cpp's diffusion-gemma architecture (general.architecture).
[[nodiscard]] inline bool is_diffusion_gemma(const std::filesystem::path& dir) {
    std::error_code ec;
    if (io::is_gguf_path(dir)) return std::filesystem::is_regular_file(dir, ec) && io::is_diffusion_gemma_gguf(io::gguf_file::open(dir).header());
    if (!std::filesystem::is_regular_file(dir / "config.json", ec)) return false;
    const std::string source = (dir / "config.json").string();
    const nlohmann::json j = io::detail::parse_json_strict(io::detail::read_text_file(dir / "config.json"), source, "config");
    // Anything but the string "diffusion_gemma" (another type too) is the transformer's to read, whose
    // config reader names an ill-typed model_type (j.value would throw nlohmann's own error here).
    if (!j.is_object()) return false;
    const auto it = j.find("model_type");
    return it != j.end() && it->is_string() && it->get<std::string>() == "diffusion_gemma";
}

/// A "loading weights" bar (progress_bar: drawn only where stderr is a terminal), fed with
/// load_options::progress's bytes in MB and erased once the load is done.
class load_bar {
public:
    void operator()(std::uint64_t done, std::uint64_t total) {
        if (!bar_) bar_.emplace("loading weights", static_cast<std::size_t>(total / 1000000), true);
        bar_->update(static_cast<std::size_t>(done / 1000000), "MB");
        if (done >= total) bar_->finish();
    }

private:
    std::optional<progress_bar> bar_;  // made at the first report, when the total is known
};

/// A load_bar's progress function when `on` (the tools' progress flag), else none.
[[nodiscard]] inline cpu::load_progress load_bar_if(bool on) {
    if (!on) return {};
    return [bar = std::make_shared<load_bar>()](std::uint64_t done, std::uint64_t total) { (*bar)(done, total); };
}

/// What --dtype and --kv ask of a load: the weights' type ("", "f32", "bf16", "f16"; empty: as
/// stored) and the KV cache's ("", "f32", "bf16"; empty: f32). `kv_name` is how the caller's user
/// spells the KV choice in a refusal: the flag as typed (load_choice_of), or Python's keyword "kv".
struct load_choice {
    std::string dtype, kv;
    std::string kv_name = "--kv";
};

/// The load choice of the flags, a refusal naming --kv as the user typed it.
[[nodiscard]] inline load_choice load_choice_of(const options& o) { return {o.dtype, o.kv, o.spelling("--kv")}; }

/// The load options of `c`, reporting to `progress`.
[[nodiscard]] inline cpu::load_options load_options_of(const load_choice& c, cpu::load_progress progress = {}) {
    cpu::load_options lo;
    if (c.dtype == "f32") lo.weight_dtype = io::dtype::f32;
    else if (c.dtype == "bf16") lo.weight_dtype = io::dtype::bf16;
    else if (c.dtype == "f16") lo.weight_dtype = io::dtype::f16;
    if (c.kv == "bf16") lo.kv_dtype = io::dtype::bf16;
    else if (!c.kv.empty() && c.kv != "f32") throw invalid_parameter(c.kv_name, "must be f32 or bf16, not '" + c.kv + "'");
    lo.progress = std::move(progress);
    return lo;
}

/// `m` with its load_seconds: the wall clock since `start`.
template <class Model>
[[nodiscard]] basic_loaded_model<Model> loaded_since(std::chrono::steady_clock::time_point start, basic_loaded_model<Model> m) {
    m.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return m;
}

/// Loads a DiffusionGemma folder or diffusion-gemma GGUF file (is_diffusion_gemma) with its tokenizer
/// and chat format (a GGUF file's from its metadata).
[[nodiscard]] inline gemma_model load_diffusion_gemma(const std::filesystem::path& dir, const load_choice& choice = {},
                                                      cpu::load_progress progress = {}) {
    if (choice.kv == "bf16")
        throw invalid_parameter(choice.kv_name, "DiffusionGemma's contexts hold f32 K/V; a bf16 KV cache is the transformer's");
    const auto start = std::chrono::steady_clock::now();
    std::optional<io::gguf_file> file;
    if (io::is_gguf_path(dir)) file.emplace(io::gguf_file::open(dir));
    // The tokenizer before the weights: a missing or unread one is refused at once.
    io::tokenizer tok = file ? io::gguf_tokenizer(file->header()) : io::tokenizer::load(dir);
    const io::chat_format chat = file ? io::gguf_chat_format(file->header()) : io::detect_chat_format(dir);
    file.reset();
    cpu::diffusion_gemma model = cpu::diffusion_gemma::load(dir, load_options_of(choice, std::move(progress)));
    const model_hints hints = hints_of(model);
    return loaded_since(start, gemma_model{dir, std::move(model), std::move(tok), chat, hints});
}

/// The name a model goes by in the programs' output (dlm-eval's "model", the trace's subtitle,
/// dlm-server's model id): its folder's or .gguf file's name, "models/cdlm/" and "models/cdlm" alike.
[[nodiscard]] inline std::string model_name(const std::filesystem::path& dir) {
    std::error_code ec;
    std::filesystem::path p = std::filesystem::absolute(dir, ec);
    p = (ec ? dir : p).lexically_normal();
    if (!p.has_filename()) p = p.parent_path();
    return p.filename().string();
}

/// Loads `dir`, a model folder or a .gguf file (its tokenizer and chat template from its metadata);
/// `choice` (--dtype, --kv) converts the weights at load and picks the KV cache's type; `progress`
/// hears how far it is (load_bar_if, or the Python package's callback).
[[nodiscard]] inline loaded_model load_model(const std::filesystem::path& dir, const load_choice& choice = {}, cpu::load_progress progress = {}) {
    const auto start = std::chrono::steady_clock::now();
    const cpu::load_options lo = load_options_of(choice, std::move(progress));
    if (io::is_gguf_path(dir)) {
        const io::gguf_file f = io::gguf_file::open(dir);
        io::tokenizer tok = io::gguf_tokenizer(f.header());
        cpu::transformer model = cpu::transformer::load_gguf(dir, lo);
        const model_hints hints = hints_of(model);
        return loaded_since(start, loaded_model{dir, std::move(model), std::move(tok), io::gguf_chat_format(f.header()), hints});
    }
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
        const bool there = std::filesystem::exists(std::filesystem::symlink_status(dir, ec));
        throw file_error(dir.string(), there ? "is not a model folder (nor a .gguf file)" : "no such model folder (nor a .gguf file)");
    }
    io::tokenizer tok = io::tokenizer::load(dir);  // before the weights: a missing tokenizer is refused at once
    cpu::transformer model = cpu::transformer::load(dir, lo);
    const model_hints hints = hints_of(model);
    return loaded_since(start, loaded_model{dir, std::move(model), std::move(tok), io::detect_chat_format(dir), hints});
}

/// Loads `dir` as what it is (a DiffusionGemma folder as cpu::diffusion_gemma, anything else as the
/// transformer: load_model) and returns f(the loaded folder); f takes either basic_loaded_model.
template <class F>
decltype(auto) with_loaded_model(const std::filesystem::path& dir, const load_choice& choice, F&& f, cpu::load_progress progress = {}) {
    if (is_diffusion_gemma(dir)) {
        gemma_model m = load_diffusion_gemma(dir, choice, std::move(progress));
        return f(m);
    }
    loaded_model m = load_model(dir, choice, std::move(progress));
    return f(m);
}

/// The preset a run decodes with, and why (printed by --stats, dlm-eval and dlm-server).
struct preset_choice {
    preset_id preset = preset_named("cdlm");
    std::string reason;
};

/// The preset of a model when --preset is not given: a natively block-causal family's own decoder
/// (SDARForCausalLM and SDARMoeForCausalLM sdar, Fast_dLLM_QwenForCausalLM fast-dllm-v2, LLaDA2MoeModelLM llada2,
/// or llada21 for a LLaDA 2.1 checkpoint: `token_editing`, io/decoding_keys.hpp),
/// autoregressive for a causal Qwen2ForCausalLM, and cdlm, dlm's default, for the bidirectional
/// LLaDA, Dream and LLaDA-MoE models (whose CDLM students the shipped models are). `source` names
/// where the architecture was read (config.json, or a GGUF file's general.architecture).
[[nodiscard]] inline preset_choice default_preset(io::architecture arch, const std::string& source,
                                                  const model_hint<bool>& token_editing = {}) {
    using A = io::architecture;
    if (arch == A::llada2_moe && token_editing.value.value_or(false))
        return {preset_named("llada21"), "the default for LLaDA 2.1 checkpoints (" + token_editing.origin + "): LLaDA2MoeModelLM decoded "
                                         "with token editing, Quality mode; --preset llada21-s is Speedy, --preset llada2 LLaDA 2.0's decoder"};
    const std::string_view cls = io::architecture_class(arch);
    const preset_id p = arch == A::sdar || arch == A::sdar_moe ? preset_named("sdar")
                        : arch == A::fast_dllm_v2                 ? preset_named("fast-dllm-v2")
                        : arch == A::llada2_moe                   ? preset_named("llada2")
                        : arch == A::qwen2                        ? preset_named("autoregressive")
                                                                  : preset_named("cdlm");
    // LLaDA, LLaDA-MoE and Dream layouts: dlm's CDLM students are LLaDA checkpoints, so cdlm; the
    // family's own reference decoder is one flag away.
    const char* reference = arch == A::dream ? "dream" : "llada";
    return {p, "the default for " + std::string(cls) + " (" + source + ")" +
                   (p != preset_named("cdlm") ? "" : std::string(", dlm's CDLM students' preset; --preset ") + reference + " runs the family's reference decoder")};
}

/// The model's default preset (default_preset of the architecture its config.json or GGUF file names).
[[nodiscard]] inline preset_choice model_preset(const loaded_model& m) {
    return default_preset(m.model.config().arch, io::is_gguf_path(m.dir) ? "general.architecture of the GGUF file" : "config.json architectures",
                          m.model.config().decoding.token_editing);
}
/// DiffusionGemma's: diffusion-gemma, the only preset a uniform-state model runs (registry::preset_fits_model).
[[nodiscard]] inline preset_choice model_preset(const gemma_model& m) {
    const char* from = io::is_gguf_path(m.dir) ? "general.architecture diffusion-gemma of the GGUF file" : "config.json model_type";
    return {preset_named("diffusion-gemma"), std::string("the default for DiffusionGemmaForBlockDiffusion (") + from + "), its reference generate()"};
}

/// The preset of a run: --preset when given, else `model_default` (model_preset). Throws
/// dlm::invalid_parameter naming a flag the chosen preset has no option for (parse_args checks the
/// flags only against a --preset given).
[[nodiscard]] inline preset_choice choose_preset(const options& o, const preset_choice& model_default) {
    const preset_choice c = o.was_given("--preset") ? preset_choice{o.preset, o.spelling("--preset") + " " + std::string(name_of(o.preset))}
                                                    : model_default;
    options checked = o;
    checked.preset = c.preset;
    if (!o.compare) detail::check_preset_flags(checked);
    else detail::check_compared_flags(o);
    return c;
}

/// Refuses `chat` (spelled `flag`) for a model whose chat template dlm does not write.
template <class Model>
void check_chat(const basic_loaded_model<Model>& m, bool chat, const std::string& flag) {
    if (chat && m.chat == io::chat_format::unsupported)
        throw invalid_parameter(flag, m.dir.string() + ": " + std::string(io::unsupported_chat_template_rule));
}

/// The prompt text: `text` itself, or with `chat` a conversation in the model's chat format, `system`
/// (when not empty) then `text` as the user's message, in the thinking mode `thinking` (a folder
/// without a template gets the two joined by a blank line; one whose template dlm does not write is
/// refused, naming chat).
template <class Model>
[[nodiscard]] std::string prompt_text(const basic_loaded_model<Model>& m, const std::string& text, bool chat,
                                      io::chat_thinking thinking = io::chat_thinking::template_default,
                                      const std::string& system = {}) {
    check_chat(m, chat, "chat");
    if (!chat) return text;
    std::vector<io::chat_message> messages;
    if (!system.empty()) messages.push_back({"system", system});
    messages.push_back({"user", text});
    return io::apply_chat_template(m.chat, messages, true, thinking);
}

/// Whether a prompt's text is tokenized with the tokenizer's own special tokens. A plain prompt is
/// tokenized as the model's tokenizer tokenizes a text by default: with what its post-processor adds
/// (Hugging Face's `tokenizer(text)`; a GGUF file's add_bos_token, as llama.cpp adds it): Gemma 4's
/// <bos>, a llama-bpe file's BOS, nothing for the Qwen2 and LLaDA tokenizers. A chat prompt gets
/// none: its template writes its own, as transformers' apply_chat_template(tokenize=True) does; a
/// folder without a template has its chat prompt written as plain text, so it is a plain prompt.
template <class Model>
[[nodiscard]] bool adds_special_tokens(const basic_loaded_model<Model>& m, bool chat) {
    return !chat || m.chat == io::chat_format::none;
}

/// The prompt's ids (adds_special_tokens says which special tokens the tokenizer adds).
template <class Model>
[[nodiscard]] std::vector<token_id> encode_prompt(const basic_loaded_model<Model>& m, const std::string& text, bool chat,
                                                  io::chat_thinking thinking = io::chat_thinking::template_default,
                                                  const std::string& system = {}) {
    return m.tokenizer.encode(prompt_text(m, text, chat, thinking, system), adds_special_tokens(m, chat));
}

/// The ids of `text` (add_special: with the tokenizer's own special tokens), tokenized only as far as
/// a prompt beside `gen_length` can go: the model's context less gen_length
/// (io::tokenizer::encode_at_most stops there), so that a text far longer than the model takes costs
/// no more than the tokens it may hold. Refused as the engine's context check refuses a prompt, which
/// it would be: invalid_parameter naming `which` ("prompts[0]"), "prompt length more than 80 +
/// gen_length 48 exceeds the model's context of 128: ..."; a gen_length that alone fills the context
/// names gen_length, as the engine does, once a token shows the prompt is not empty (an empty one the
/// engine names first: its ids are returned, as are those of a one-token prompt).
template <class Model>
[[nodiscard]] std::vector<token_id> encode_within_context(const basic_loaded_model<Model>& m, const std::string& text, bool add_special,
                                                          index_t gen_length, const std::string& which) {
    if constexpr (!model_has_max_context<Model>) {
        return m.tokenizer.encode(text, add_special);
    } else {
        const index_t context = m.model.max_context();
        const std::size_t most = gen_length < context ? static_cast<std::size_t>(context - gen_length) : 1;
        std::optional<std::vector<token_id>> ids = m.tokenizer.encode_at_most(text, most, add_special);
        if (ids) return std::move(*ids);
        dlm::detail::check_gen_length_room(gen_length, context);
        throw invalid_parameter(which, dlm::detail::prompt_past_context("more than " + std::to_string(most), gen_length, context));
    }
}

/// encode_prompt, bounded as encode_within_context bounds it: for a prompt from outside (dlm-generate's
/// -p, Python's text prompts), named `which`.
template <class Model>
[[nodiscard]] std::vector<token_id> encode_prompt_within_context(const basic_loaded_model<Model>& m, const std::string& text, bool chat,
                                                                 io::chat_thinking thinking, const std::string& system, index_t gen_length,
                                                                 const std::string& which) {
    return encode_within_context(m, prompt_text(m, text, chat, thinking, system), adds_special_tokens(m, chat), gen_length, which);
}

/// The answer's text: the slots before the first EOS, special tokens left out.
template <class Model>
[[nodiscard]] std::string answer_text(const basic_loaded_model<Model>& m, const sequence_result& r) {
    return m.tokenizer.decode(std::span(r.tokens).first(static_cast<std::size_t>(r.answer_length)), true);
}

/// The CPU path for --stats: "cpu: amx kernels, bf16 weights (amx-bf16), 1.9 MiB, 2 threads, loaded in
/// 0.01 s (0.19 GB/s)" (the weights held over the load's wall-clock time; ", bf16 KV cache (its
/// product form)" after the weights with --kv bf16), and
/// where the CPU has no AMX path, why ("; no amx: the CPU has no AMX-BF16/AMX-INT8 tiles").
template <class Model>
[[nodiscard]] std::string cpu_line(const basic_loaded_model<Model>& m) {
    const cpu::kernel_table& kt = cpu::kernels();
    const std::string type = m.model.weight_type();
    std::string s = std::string("cpu: ") + kt.name + " kernels, " + type + " weights";
    if (type == "bf16") s += std::string(" (") + cpu::bf16_product().name + ")";
    else if (type == "f16") s += std::string(" (") + kt.f16.name + ")";
    else if (type != "f32") s += std::string(" (") + kt.quant.name + ")";
    if constexpr (requires { m.model.kv_dtype(); })
        if (m.model.kv_dtype() == io::dtype::bf16) s += std::string(", bf16 KV cache (") + cpu::bf16_product().name + ")";
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    char mib[32];
    std::snprintf(mib, sizeof mib, "%.1f MiB", static_cast<double>(m.model.weight_bytes()) / (1024.0 * 1024.0));
    s += std::string(", ") + mib + ", " + std::to_string(threads) + (threads == 1 ? " thread" : " threads");
    if (m.load_seconds > 0) {
        char load[64];
        std::snprintf(load, sizeof load, ", loaded in %.2f s (%.2f GB/s)", m.load_seconds,
                      static_cast<double>(m.model.weight_bytes()) / 1e9 / m.load_seconds);
        s += load;
    }
    if (!cpu::amx_unavailable_reason().empty()) s += "; no amx: " + std::string(cpu::amx_unavailable_reason());
    return s;
}

/// OpenMP threads for the CPU model (0: leave OpenMP's default).
/// The calling thread's OpenMP thread count (OMP_NUM_THREADS, else every core, until set_threads).
[[nodiscard]] inline int current_threads() {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

inline void set_threads(int n) {
#ifdef _OPENMP
    if (n > 0) omp_set_num_threads(n);
#else
    (void)n;
#endif
}

}  // namespace dlm::cli
