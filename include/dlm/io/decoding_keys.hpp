// dlm/io/decoding_keys.hpp — what a model folder says about how to decode it, read into
// dlm::decoding_hints (core/defaults.hpp):
//   config.json             dlm_gen_length, dlm_block_length (written by dlm's trainers: the lengths
//                           the model was trained to decode with); where mask_token_id and
//                           eos_token_id came from
//   generation_config.json  further eos_token_id entries (model_config.hpp adds them)
//   either, or the folder   LLaDA 2.1's decoder keys editing_threshold / max_post_steps, or a folder
//                           named for LLaDA2.1: the checkpoint edits tokens (token_editing_hint)
//   tokenizer.json          end-of-turn tokens that are not EOS: <|eot_id|> (LLaDA, Llama 3),
//                           <|im_end|> (ChatML: Qwen2, Dream)
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "../core/defaults.hpp"
#include "config_reader.hpp"

namespace dlm::io {

/// The added tokens that end a chat turn, by content.
inline constexpr std::string_view end_of_turn_tokens[] = {"<|eot_id|>", "<|im_end|>"};

namespace detail {

/// dlm_gen_length and dlm_block_length of a config, when present: integers in [1, max_slots].
inline void read_length_hints(const config_reader& r, decoding_hints& h) {
    const auto read = [&](const char* key, model_hint<index_t>& out) {
        if (!r.has(key)) return;
        const index_t v = r.integer(key);
        if (v < 1) r.fail(key, std::to_string(v) + " must be a positive number of slots");
        if (v > max_slots) r.fail(key, std::to_string(v) + " slots is more than the " + std::to_string(max_slots) + " any program takes");
        out = {v, r.source() + " key '" + key + "'"};
    };
    read("dlm_gen_length", h.gen_length);
    read("dlm_block_length", h.block_length);
}

/// LLaDA 2.1 checkpoints have LLaDA 2.0's architecture and config keys (LLaDA2MoeModelLM, model_type
/// llada2_moe): what tells them apart is how they are decoded. A config.json or generation_config.json
/// that sets the 2.1 decoder's editing_threshold or max_post_steps marks a token-editing checkpoint.
inline void read_token_editing_keys(const config_reader& r, decoding_hints& h) {
    for (const char* key : {"editing_threshold", "max_post_steps"})
        if (!h.token_editing.value && r.has(key)) h.token_editing = {true, r.source() + " key '" + key + "'"};
}

/// ... and so does a folder named for LLaDA 2.1: the folder itself (LLaDA2.1-mini), or the model of a
/// Hugging Face cache snapshot (models--inclusionAI--LLaDA2.1-flash/snapshots/<hash>), whose name holds
/// "llada2.1", "llada2_1", "llada2-1" or "llada21" in any case.
inline void read_token_editing_folder(const std::filesystem::path& folder, decoding_hints& h) {
    if (h.token_editing.value) return;
    std::error_code ec;
    std::filesystem::path dir = std::filesystem::absolute(folder, ec).lexically_normal();
    if (ec) dir = folder.lexically_normal();
    if (!dir.has_filename()) dir = dir.parent_path();  // a trailing separator
    std::filesystem::path named = dir.filename();
    if (dir.parent_path().filename() == "snapshots") named = dir.parent_path().parent_path().filename();
    std::string name = named.string();
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    for (std::string_view mark : {"llada2.1", "llada2_1", "llada2-1", "llada21"})
        if (name.find(mark) != std::string::npos) {
            h.token_editing = {true, "the folder name '" + named.string() + "'"};
            return;
        }
}

/// The ids of tokenizer.json's added tokens named in end_of_turn_tokens, except those in `eos`.
/// A missing file or one without such tokens gives none; the file is parsed only when it names one.
/// An entry that is not a readable regular file is a file_error (optional_file).
inline void read_end_of_turn_ids(const std::filesystem::path& tokenizer_json, std::span<const token_id> eos, index_t vocab,
                                 decoding_hints& h) {
    if (!optional_file(tokenizer_json)) return;
    const std::string text = read_text_file(tokenizer_json);
    if (std::none_of(std::begin(end_of_turn_tokens), std::end(end_of_turn_tokens),
                     [&](std::string_view t) { return text.find(t) != std::string::npos; }))
        return;
    const std::string source = tokenizer_json.string();
    const nlohmann::json j = parse_json_strict(text, source, "tokenizer");
    const auto added = j.is_object() ? j.find("added_tokens") : j.end();
    if (!j.is_object() || added == j.end() || !added->is_array()) return;
    std::vector<token_id> ids;
    std::string names;
    for (const auto& t : *added) {
        if (!t.is_object() || !t.contains("content") || !t.contains("id") || !t.at("content").is_string()) continue;
        const std::string content = t.at("content").get<std::string>();
        if (std::find(std::begin(end_of_turn_tokens), std::end(end_of_turn_tokens), content) == std::end(end_of_turn_tokens)) continue;
        const auto id = json_int64(t.at("id"));
        if (!id || *id < 0 || *id >= vocab)
            throw file_error(source, "added token " + content + ": id " + json_quote(t.at("id")) + " is outside the vocabulary [0, " +
                                         std::to_string(vocab) + ")");
        const auto tid = static_cast<token_id>(*id);
        if (std::find(eos.begin(), eos.end(), tid) != eos.end()) continue;  // already an EOS
        ids.push_back(tid);
        names += (names.empty() ? "" : ", ") + content + " " + std::to_string(tid);
    }
    if (!ids.empty()) h.end_of_turn_ids = {std::move(ids), source + " added tokens " + names};
}

}  // namespace detail

}  // namespace dlm::io
