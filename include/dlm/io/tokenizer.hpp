// dlm/io/tokenizer.hpp — a Hugging Face tokenizer.json (byte-level BPE, as Qwen2, Dream and LLaDA
// use it; SentencePiece-style BPE with byte fallback, as Gemma 4 and DiffusionGemma use it),
// encoding and decoding exactly as the HF tokenizers library does.
//
//   auto tok = dlm::io::tokenizer::load("/models/LLaDA-8B-Instruct");   // folder or tokenizer.json
//   std::vector<dlm::token_id> ids = tok.encode("Hello <|mdm_mask|>");
//   std::string text = tok.decode(ids, /*skip_special=*/true);
//
// Encoding follows the reference pipeline: the input's invalid UTF-8 becomes U+FFFD (as Python's
// bytes.decode(errors="replace") would make it); added tokens are cut out of the raw text (leftmost,
// then longest, honouring lstrip / rstrip; `normalized` ones are matched after normalization); the
// rest is normalized, pre-tokenized and merged by the BPE model; add_special applies the
// post-processor (e.g. a BOS from TemplateProcessing). Decoding skips unknown ids, as the reference
// does, and turns invalid UTF-8 into U+FFFD. truncation and padding, batch settings of the file, are
// ignored: dlm never truncates or pads. A folder without tokenizer.json but with vocab.json and
// merges.txt (Dream's slow Qwen2 tokenizer) is rebuilt as the Qwen2 pipeline it stands for.
//
// Thread safety: const members may be called concurrently (the word cache is locked).
#pragma once

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../core/separate.hpp"
#include "bpe.hpp"
#include "file_paths.hpp"
#include "json_util.hpp"
#include "pre_tokenizer.hpp"
#include "tokenizer_pipeline.hpp"
#include "unicode.hpp"

namespace dlm::io {

class tokenizer {
public:
    /// Reads `path`/tokenizer.json when `path` is a folder (or, lacking it, the folder's vocab.json,
    /// merges.txt and tokenizer_config.json of a Qwen2-family slow tokenizer), the folder's when `path`
    /// is a model path cpu::transformer::load takes (its config.json, a .safetensors file or index),
    /// else the file `path`. Throws dlm::file_error naming the file that is missing, malformed or not
    /// supported, and a .gguf file (io::gguf_tokenizer reads its tokenizer).
    [[nodiscard]] static tokenizer load(const std::filesystem::path& path);

    /// Builds the tokenizer from a parsed tokenizer.json; `source` names it in errors.
    [[nodiscard]] static tokenizer parse(const nlohmann::json& j, const std::string& source);

    /// The ids of `text`. add_special: wrap them as the file's post-processor says (BOS, ...).
    [[nodiscard]] std::vector<token_id> encode(std::string_view text, bool add_special = false) const;

    /// The ids encode(text, add_special) gives, or nothing when they are more than `max_tokens` (the
    /// post-processor's counted): encoding stops at the first word (pre-token) or added token that
    /// takes the count past the bound, so a text far longer than the caller takes costs the ids before
    /// the bound and one word, not the whole text. What comes before the words (UTF-8 repair, the
    /// added-token split, the normalizers) still reads the whole text, in linear time; the BPE merges
    /// a word whole (a Gemma 4 text, which no pre-tokenizer splits, is one word).
    [[nodiscard]] std::optional<std::vector<token_id>> encode_at_most(std::string_view text, std::size_t max_tokens,
                                                                      bool add_special = false) const;

    /// The text of `ids`; ids the tokenizer does not know are skipped. skip_special: leave out the
    /// special added tokens (<|endoftext|>, <|mdm_mask|>, ...).
    [[nodiscard]] std::string decode(std::span<const token_id> ids, bool skip_special = false) const;

    /// The id of a token string (added tokens first, then the model's vocabulary).
    [[nodiscard]] std::optional<token_id> token_to_id(std::string_view token) const {
        const std::string key(token);
        if (const auto it = added_by_content_.find(key); it != added_by_content_.end()) return it->second;
        if (const auto it = model_.vocab().find(key); it != model_.vocab().end()) return it->second;
        return std::nullopt;
    }

    /// The token string of an id (in the model's byte-level alphabet: " a" reads "Ġa").
    /// Throws dlm::invalid_parameter for an id the tokenizer does not have.
    [[nodiscard]] std::string id_to_token(token_id id) const {
        if (!known(id))
            throw invalid_parameter("id", std::to_string(id) + " is not a token of " + source_ + " (ids run from 0 to " +
                                              std::to_string(vocab_size() - 1) + ")");
        return id_to_token_[static_cast<std::size_t>(id)];
    }

    /// One past the largest id of the vocabulary and the added tokens.
    [[nodiscard]] index_t vocab_size() const noexcept { return static_cast<index_t>(id_to_token_.size()); }

    /// Whether `id` is a special added token (what decode(..., true) leaves out).
    [[nodiscard]] bool is_special(token_id id) const noexcept { return known(id) && special_[static_cast<std::size_t>(id)]; }

    /// The file this tokenizer was read from.
    [[nodiscard]] const std::string& source() const noexcept { return source_; }

private:
    [[nodiscard]] bool known(token_id id) const noexcept {
        return id >= 0 && static_cast<std::size_t>(id) < present_.size() && present_[static_cast<std::size_t>(id)];
    }

    // file_ids: take added-token ids from the file (as slow tokenizers do) rather than as the
    // tokenizers library assigns them.
    static tokenizer parse_with(const nlohmann::json& j, const std::string& source, bool file_ids) {
        using detail::json_where;
        tokenizer t;
        t.source_ = source;
        const json_where root{source, "tokenizer.json"};
        if (!j.is_object()) root.fail("expected a JSON object");
        t.parse_model(root.member(j, "model"), root["model"]);
        if (j.contains("added_tokens")) t.parse_added_tokens(j.at("added_tokens"), root["added_tokens"], file_ids);
        if (j.contains("normalizer")) detail::parse_normalizer(j.at("normalizer"), root["normalizer"], t.normalizers_);
        if (j.contains("pre_tokenizer")) detail::parse_pre_tokenizer(j.at("pre_tokenizer"), root["pre_tokenizer"], t.pre_tokenizers_);
        if (j.contains("post_processor")) detail::parse_post_processor(j.at("post_processor"), root["post_processor"], t.post_);
        if (j.contains("decoder")) detail::parse_decoder(j.at("decoder"), root["decoder"], t.decoders_);
        t.index_added_tokens();
        return t;
    }

    static tokenizer load_file(const std::filesystem::path& file) {
        const std::string text = detail::read_text_file(file);
        return parse(detail::parse_json_strict(text, file.string(), "tokenizer.json"), file.string());
    }

    void parse_model(const nlohmann::json& m, const detail::json_where& at) {
        if (!m.is_object()) at.fail("expected an object");
        const std::string type = m.contains("type") ? at.type(m) : (m.contains("merges") ? "BPE" : "?");
        if (type != "BPE") at.unsupported("model type '" + type + "' (only BPE is implemented)");
        const auto& vocab = at.member(m, "vocab");
        if (!vocab.is_object()) at["vocab"].fail("expected an object of token: id");
        std::unordered_map<std::string, token_id> v;
        v.reserve(vocab.size());
        for (const auto& [token, id] : vocab.items()) {
            const auto i = detail::json_int64(id);
            if (!i || *i < 0 || *i >= (std::int64_t{1} << 31) - 1) at["vocab"][token].fail("expected an id >= 0, got " + detail::json_quote(id));
            v.emplace(token, static_cast<token_id>(*i));
        }
        const auto& merges = at.member(m, "merges");
        if (!merges.is_array()) at["merges"].fail("expected an array");
        std::vector<std::pair<std::string, std::string>> pairs;
        pairs.reserve(merges.size());
        for (std::size_t i = 0; i < merges.size(); ++i) {
            const auto& x = merges[i];
            if (x.is_string()) {
                const std::string s = x.get<std::string>();
                const auto sp = s.find(' ');
                if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
                    at["merges"][i].fail("expected \"left right\", got " + detail::json_quote(x));
                pairs.emplace_back(s.substr(0, sp), s.substr(sp + 1));
            } else if (x.is_array() && x.size() == 2 && x[0].is_string() && x[1].is_string()) {
                pairs.emplace_back(x[0].get<std::string>(), x[1].get<std::string>());
            } else {
                at["merges"][i].fail("expected \"left right\" or [left, right], got " + detail::json_quote(x));
            }
        }
        if (m.contains("dropout") && !m.at("dropout").is_null() &&
            !(m.at("dropout").is_number() && m.at("dropout").get<double>() == 0.0))
            at["dropout"].unsupported("BPE dropout");
        detail::bpe_options o;
        const auto optional_string = [&](std::string_view key) -> std::optional<std::string> {
            if (!m.contains(key) || m.at(key).is_null()) return std::nullopt;
            return at.string(m, key);
        };
        o.unk_token = optional_string("unk_token");
        o.continuing_subword_prefix = optional_string("continuing_subword_prefix").value_or("");
        o.end_of_word_suffix = optional_string("end_of_word_suffix").value_or("");
        o.fuse_unk = at.flag(m, "fuse_unk", false);
        o.byte_fallback = at.flag(m, "byte_fallback", false);
        o.ignore_merges = at.flag(m, "ignore_merges", false);
        if (const std::string err = model_.build(std::move(v), pairs, std::move(o)); !err.empty()) at.fail(err);
    }

    // Ids are given as the reference gives them, whatever the file's "id" says (it only warns): the
    // model's id for a token of its vocabulary, else the next free id after the vocabulary's size or
    // after the largest added id. Files written by the library agree with this.
    void parse_added_tokens(const nlohmann::json& list, const detail::json_where& at, bool file_ids) {
        if (!list.is_array()) at.fail("expected an array");
        const auto vocab_count = static_cast<token_id>(model_.vocab().size());
        std::unordered_map<std::string, std::size_t> by_content;  // content -> index in added_
        std::optional<token_id> max_id;
        for (std::size_t i = 0; i < list.size(); ++i) {
            const auto& x = list[i];
            const detail::json_where here = at[i];
            detail::added_token t;
            const auto file_id = detail::json_int64(here.member(x, "id"));
            if (!file_id || *file_id < 0 || *file_id >= (std::int64_t{1} << 31) - 1) here["id"].fail("expected an id >= 0");
            t.content = here.string(x, "content");
            t.special = here.flag(x, "special", false);
            t.lstrip = here.flag(x, "lstrip", false);
            t.rstrip = here.flag(x, "rstrip", false);
            t.normalized = here.flag(x, "normalized", !t.special);
            if (here.flag(x, "single_word", false)) here["single_word"].unsupported("an added token with single_word true");
            if (t.content.empty()) continue;  // the reference ignores it
            if (const auto it = by_content.find(t.content); it != by_content.end()) {
                t.id = added_[it->second].id;
                added_[it->second] = std::move(t);
                continue;
            }
            if (file_ids) t.id = static_cast<token_id>(*file_id);
            else if (const auto v = model_.vocab().find(t.content); v != model_.vocab().end()) t.id = v->second;
            else t.id = max_id && (*max_id >= vocab_count || vocab_count == 0) ? *max_id + 1 : vocab_count;
            max_id = std::max(max_id.value_or(t.id), t.id);
            by_content.emplace(t.content, added_.size());
            added_.push_back(std::move(t));
        }
    }

    /// Ids may leave holes, but the tables are sized by the largest id: an id further than
    /// max_id_gap past the number of tokens listed is refused before anything is sized by it.
    static constexpr std::size_t max_id_gap = 65536;

    void index_added_tokens() {
        const std::size_t listed = model_.vocab().size() + added_.size();
        const auto check = [&](const std::string& token, token_id id) {
            if (static_cast<std::size_t>(id) >= listed + max_id_gap)
                throw file_error(source_, "token " + detail::json_quote(nlohmann::json(token)) + " has id " + std::to_string(id) + ", but the file lists " +
                                              std::to_string(listed) + " tokens; dlm takes ids below " + std::to_string(listed + max_id_gap) +
                                              " (the number of tokens + " + std::to_string(max_id_gap) + "), as its id tables are sized by the largest id");
        };
        std::size_t size = 0;
        for (const auto& [token, id] : model_.vocab()) {
            check(token, id);
            size = std::max(size, static_cast<std::size_t>(id) + 1);
        }
        for (const auto& t : added_) {
            check(t.content, t.id);
            size = std::max(size, static_cast<std::size_t>(t.id) + 1);
        }
        id_to_token_.assign(size, {});
        present_.assign(size, false);
        special_.assign(size, false);
        for (const auto& [token, id] : model_.vocab()) {
            id_to_token_[static_cast<std::size_t>(id)] = token;
            present_[static_cast<std::size_t>(id)] = true;
        }
        for (std::size_t i = 0; i < added_.size(); ++i) {
            const auto& t = added_[i];
            const auto id = static_cast<std::size_t>(t.id);
            id_to_token_[id] = t.content;
            present_[id] = true;
            special_[id] = t.special;
            added_by_content_.insert_or_assign(t.content, t.id);
            if (t.normalized && !normalize_first_)
                normalized_tokens_.add(detail::apply_normalizers(normalizers_, t.content), i);
            else
                raw_tokens_.add(t.content, i);
        }
    }

    // A folder with vocab.json + merges.txt: the slow Qwen2 tokenizer (Dream's DreamTokenizer), which
    // normalizes the whole text with NFC, splits with Qwen2's regex and maps bytes like ByteLevel.
    static tokenizer from_vocab_and_merges(const std::filesystem::path& dir) {
        const auto config_path = dir / "tokenizer_config.json";
        const std::string config_source = config_path.string();
        const nlohmann::json config =
            detail::parse_json_strict(detail::read_text_file(config_path), config_source, "tokenizer_config.json");
        const std::string cls = config.is_object() && config.contains("tokenizer_class") && config["tokenizer_class"].is_string()
                                    ? config["tokenizer_class"].get<std::string>() : std::string("(none)");
        if (cls != "Qwen2Tokenizer" && cls != "Qwen2TokenizerFast" && cls != "DreamTokenizer")
            throw file_error(config_source, "there is no tokenizer.json, and tokenizer_class '" + cls +
                                                "' is not one whose vocab.json / merges.txt dlm can rebuild "
                                                "(Qwen2Tokenizer, DreamTokenizer)");
        const auto vocab_path = dir / "vocab.json";
        nlohmann::json j;
        j["model"] = {{"type", "BPE"},
                      {"vocab", detail::parse_json_strict(detail::read_text_file(vocab_path), vocab_path.string(), "vocab.json")},
                      {"merges", nlohmann::json::array()}};
        const auto merges_path = dir / "merges.txt";
        std::istringstream lines(detail::read_text_file(merges_path));
        std::size_t n = 0;
        for (std::string line; std::getline(lines, line); ++n) {
            while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
            if (line.empty() || (n == 0 && line.rfind("#version", 0) == 0)) continue;
            const auto sp = line.find(' ');
            if (sp == std::string::npos) throw file_error(merges_path.string(), "line " + std::to_string(n + 1) + ": expected \"left right\"");
            j["model"]["merges"].push_back(nlohmann::json::array({line.substr(0, sp), line.substr(sp + 1)}));
        }
        j["added_tokens"] = nlohmann::json::array();
        if (config.contains("added_tokens_decoder") && config["added_tokens_decoder"].is_object())
            for (const auto& [id, t] : config["added_tokens_decoder"].items()) {
                nlohmann::json a = t;
                try {
                    a["id"] = std::stoll(id);
                } catch (const std::exception&) {
                    throw file_error(config_source, "added_tokens_decoder: key '" + id + "' is not an id");
                }
                j["added_tokens"].push_back(std::move(a));
            }
        j["normalizer"] = {{"type", "NFC"}};
        j["pre_tokenizer"] = {{"type", "Sequence"},
                              {"pretokenizers",
                               {{{"type", "Split"}, {"pattern", {{"Regex", std::string(qwen2_pattern)}}}, {"behavior", "Isolated"}, {"invert", false}},
                                {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
        j["decoder"] = {{"type", "ByteLevel"}};
        tokenizer t = parse_with(j, vocab_path.string(), true);
        t.normalize_first_ = true;  // the slow tokenizer normalizes before it looks for added tokens
        t.raw_tokens_ = {}, t.normalized_tokens_ = {}, t.added_by_content_.clear();
        t.index_added_tokens();
        return t;
    }

public:
    /// Qwen2's pre-tokenizer pattern (also Dream's).
    static constexpr std::string_view qwen2_pattern =
        R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

private:
    std::string source_;
    detail::bpe_model model_;
    std::vector<detail::added_token> added_;
    detail::added_token_matcher raw_tokens_, normalized_tokens_;
    std::unordered_map<std::string, token_id> added_by_content_;
    std::vector<detail::normalizer_step> normalizers_;
    std::vector<detail::pre_tokenizer_step> pre_tokenizers_;
    detail::post_processor post_;
    std::vector<detail::decoder_step> decoders_;
    std::vector<std::string> id_to_token_;
    std::vector<bool> present_, special_;
    bool normalize_first_ = false;
};

#if DLM_SEPARATE_BODIES
DLM_SEPARATE_INLINE tokenizer tokenizer::load(const std::filesystem::path& path) {
    std::error_code ec;
    const std::string name = path.filename().string();
    if (name.ends_with(".gguf"))
        throw file_error(path.string(), "is a GGUF file: its tokenizer is in its metadata, which io::gguf_tokenizer(io::gguf_file::open(path).header()) "
                                        "(dlm/io/gguf_tokenizer.hpp) reads");
    if (name == "config.json" || name.ends_with(".safetensors") || name.ends_with(".safetensors.index.json"))
        return load(io::resolve_model_paths(path).folder);  // a model path transformer::load takes: the tokenizer of its folder
    if (std::filesystem::is_directory(path, ec)) {
        const auto json = path / "tokenizer.json";
        if (detail::optional_file(json)) return load_file(json);
        if (detail::optional_file(path / "vocab.json") && detail::optional_file(path / "merges.txt"))
            return from_vocab_and_merges(path);
        throw file_error(json.string(), "no such file (nor vocab.json and merges.txt beside it)");
    }
    return load_file(path);
}

DLM_SEPARATE_INLINE tokenizer tokenizer::parse(const nlohmann::json& j, const std::string& source) {
    return parse_with(j, source, false);
}

DLM_SEPARATE_INLINE std::vector<token_id> tokenizer::encode(std::string_view text, bool add_special) const {
    return *encode_at_most(text, static_cast<std::size_t>(-1), add_special);
}

DLM_SEPARATE_INLINE std::optional<std::vector<token_id>> tokenizer::encode_at_most(std::string_view text, std::size_t max_tokens,
                                                                                   bool add_special) const {
    std::string s = detail::to_valid_utf8(text);
    if (normalize_first_) s = detail::apply_normalizers(normalizers_, std::move(s));
    std::vector<token_id> ids;
    if (add_special) ids = post_.before;
    const std::size_t after = add_special ? post_.after.size() : 0;
    const auto over = [&] { return ids.size() > max_tokens || max_tokens - ids.size() < after; };
    if (over()) return std::nullopt;
    std::vector<detail::piece> raw, pieces;
    raw_tokens_.split(s, added_, raw);
    for (auto& p : raw) {
        if (p.id != no_token) {
            pieces.push_back(std::move(p));
            continue;
        }
        std::string n = normalize_first_ ? std::move(p.text) : detail::apply_normalizers(normalizers_, std::move(p.text));
        normalized_tokens_.split(n, added_, pieces);
    }
    struct past_bound {};  // thrown out of the pre-tokenizers' callbacks at the word that passes max_tokens
    try {
        for (auto& p : pieces) {
            if (p.id != no_token) {
                ids.push_back(p.id);
                if (over()) return std::nullopt;
                continue;
            }
            auto tokenize = [&](std::string_view word) {
                model_.tokenize(word, ids);
                if (over()) throw past_bound{};
            };
            detail::for_each_word(pre_tokenizers_, 0, p.text, tokenize);
        }
    } catch (const past_bound&) {
        return std::nullopt;
    }
    if (add_special) ids.insert(ids.end(), post_.after.begin(), post_.after.end());
    return ids;
}

DLM_SEPARATE_INLINE std::string tokenizer::decode(std::span<const token_id> ids, bool skip_special) const {
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (const token_id id : ids) {
        if (!known(id) || (skip_special && special_[static_cast<std::size_t>(id)])) continue;
        tokens.push_back(id_to_token_[static_cast<std::size_t>(id)]);
    }
    return detail::apply_decoders(decoders_, std::move(tokens));
}
#endif  // DLM_SEPARATE_BODIES

}  // namespace dlm::io
