// examples/cli/model.hpp — which model folder to use, and loading it: the CPU transformer, its
// tokenizer, its chat format and the decoding hints of its config.json.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <dlm/cpu/transformer.hpp>
#include <dlm/io/chat_template.hpp>
#include <dlm/io/json_util.hpp>
#include <dlm/io/tokenizer.hpp>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "options.hpp"
#include "presets.hpp"

#ifndef DLM_DEFAULT_MODEL_DIR
#define DLM_DEFAULT_MODEL_DIR "models/cdlm"
#endif

namespace dlm::cli {

/// The model folder: -m, else $DLM_MODEL, else the shipped default (DLM_DEFAULT_MODEL_DIR, set by
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

/// dlm_gen_length and dlm_block_length of `dir`/config.json, when present and positive.
[[nodiscard]] inline model_hints read_hints(const std::filesystem::path& dir) {
    const auto path = dir / "config.json";
    const nlohmann::json j = io::detail::parse_json_strict(io::detail::read_text_file(path), path.string(), "config.json");
    model_hints h;
    const auto get = [&](const char* key, index_t& out) {
        if (!j.is_object() || !j.contains(key)) return;
        const auto& v = j.at(key);
        if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > (1 << 20))
            throw file_error(path.string(), std::string("key '") + key + "': expected a positive integer, found " + v.dump());
        out = static_cast<index_t>(v.get<std::int64_t>());
    };
    get("dlm_gen_length", h.gen_length);
    get("dlm_block_length", h.block_length);
    return h;
}

/// A loaded model folder.
struct loaded_model {
    std::filesystem::path dir;
    cpu::transformer model;
    io::tokenizer tokenizer;
    io::chat_format chat = io::chat_format::none;
    model_hints hints;
};

[[nodiscard]] inline loaded_model load_model(const std::filesystem::path& dir) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) throw file_error(dir.string(), "no such model folder");
    return loaded_model{dir, cpu::transformer::load(dir), io::tokenizer::load(dir), io::detect_chat_format(dir), read_hints(dir)};
}

/// The prompt text: `text` itself, or with `chat` a one-message conversation in the model's chat
/// format (a folder without a template gets the text unchanged).
[[nodiscard]] inline std::string prompt_text(const loaded_model& m, const std::string& text, bool chat) {
    if (!chat || m.chat == io::chat_format::none) return text;
    const io::chat_message msg{"user", text};
    return io::apply_chat_template(m.chat, std::span<const io::chat_message>(&msg, 1));
}

/// The prompt's ids: tokenized alone, without added special tokens (the chat template writes its own).
[[nodiscard]] inline std::vector<token_id> encode_prompt(const loaded_model& m, const std::string& text, bool chat) {
    return m.tokenizer.encode(prompt_text(m, text, chat));
}

/// The answer's text: the slots before the first EOS, special tokens left out.
[[nodiscard]] inline std::string answer_text(const loaded_model& m, const sequence_result& r) {
    return m.tokenizer.decode(std::span(r.tokens).first(static_cast<std::size_t>(r.answer_length)), true);
}

/// OpenMP threads for the CPU model (0: leave OpenMP's default).
inline void set_threads(int n) {
#ifdef _OPENMP
    if (n > 0) omp_set_num_threads(n);
#else
    (void)n;
#endif
}

}  // namespace dlm::cli
