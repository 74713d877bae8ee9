// dlm/io/gguf_tokenizer.hpp — the tokenizer and chat format a GGUF file carries in its
// tokenizer.ggml.* and tokenizer.chat_template keys, so that one .gguf file is a whole model.
//
// llama.cpp's converter stores a byte-level BPE vocabulary (tokenizer.ggml.model "gpt2") as
//   tokens      every id's token text, ids 0..n-1 (ids the source tokenizer lacked as "[PADi]")
//   token_type  1 normal, 2 unknown, 3 control (a special added token), 4 user-defined (an added,
//               non-special token), 5 unused, 6 byte
//   merges      "left right" strings in rank order
//   pre         the name of the source tokenizer's pre-tokenizer (its regex is not stored)
//   add_bos_token, add_eos_token, bos_token_id, eos_token_id   what llama.cpp's tokenizer adds around
//               a text tokenized with add_special (its default for a plain prompt)
// dlm rebuilds the tokenizer.json those came from and parses it with io::tokenizer: every token in
// the BPE vocabulary at its id, control, unknown and user-defined tokens also as added tokens (the
// first two special), the pre-tokenizer named by `pre` as the Hugging Face pipeline it stands for (a Split on the
// regex, then ByteLevel; Qwen2's also NFC-normalizes; Llama 3's BPE takes a pre-token found whole in
// the vocabulary as it is, ignore_merges, as llama.cpp and Llama 3's tokenizer.json do), the ByteLevel
// decoder, and a TemplateProcessing post-processor with the BOS and EOS llama.cpp adds: add_bos_token
// and add_eos_token where the file has them, else llama.cpp's default for the pre-tokenizer (a BOS
// for llama-bpe, nothing for the others). GGUF keeps no
// lstrip / rstrip / normalized flags of added tokens: dlm matches them as written, unstripped and
// unnormalized (how tokenizers treats special tokens by default). SentencePiece
// vocabularies ("llama") and pre-tokenizer names outside the table below are refused by name.
//
// Gemma 4's vocabulary ("gemma4": Gemma 4 and DiffusionGemma files) is rebuilt as Gemma's own
// tokenizer.json (detail::gemma4_tokenizer_json; tools/make_gemma_tokenizer_fixtures.py rebuilds it
// the same way from llama.cpp's ggml-vocab-gemma-4.gguf and checks it against the ids transformers
// wrote for llama.cpp's tokenizer test texts): tokens, types and merges from the file, pre is not read.
// Where llama.cpp's own gemma4 tokenizer (src/llama-vocab.cpp, read at 00ad355e) decides, dlm does as
// it does: <bos> is added whatever add_bos_token says (its "workaround for Gemma 4"), so the file must
// name bos_token_id; add_space_prefix true is refused (llama.cpp's detokenizer would then drop a space
// at the start of a text). docs/models.md lists what else was compared.
//
// The Ling / Bailing tokenizer (llama.cpp's LLAMA_VOCAB_PRE_TYPE_BAILINGMOE) has three names: the
// converter writes "bailingmoe" for Ling 1.x and "bailingmoe2" for Ling 2.0 (LLaDA2.x files carry it
// too), and llama.cpp also reads "llada-moe" (its converter has no hash of its own for LLaDA-MoE's
// tokenizer: a file carries the name that tokenizer hashes to). dlm reads the three as llama.cpp does
// (src/llama-vocab.cpp): its regex, which is Ling's tokenizer.json regex with the possessive
// quantifiers made greedy (they match the same there) and the case-insensitive contractions spelled
// as character classes (so "'ſ" with a long s is no contraction there, where Hugging Face's case
// folding makes it one: "x'ſx" is "x", "'ſx" for llama.cpp and "x", "'ſ", "x" for Hugging Face), no
// normalizer (llama.cpp normalizes no BPE text), merges applied (no ignore_merges), no BOS unless the
// file asks (add_bos_token), and no detokenizer space cleaning (clean_spaces false, as dlm never does).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat_template.hpp"
#include "gguf.hpp"
#include "tokenizer.hpp"

namespace dlm::io {

/// The regexes of the pre-tokenizers below (GPT-2's is detail::gpt2_pattern). Qwen2's and Llama 3's
/// are their tokenizer.json Split patterns; Ling's is the one llama.cpp's llama-vocab.cpp applies for
/// LLAMA_VOCAB_PRE_TYPE_BAILINGMOE (see the top).
inline constexpr std::string_view qwen2_regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view llama3_regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view bailingmoe_regex =
    R"('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";

/// A pre-tokenizer name of llama.cpp's converter and the Hugging Face pipeline it stands for.
struct gguf_pretokenizer {
    std::string_view name;
    std::string_view regex;  ///< the Split pattern
    bool nfc;                ///< the source normalizes to NFC first
    bool ignore_merges;      ///< a pre-token that is one vocabulary entry is that token (llama.cpp's flag of that name)
    bool add_bos;            ///< llama.cpp adds a BOS when the file does not say (tokenizer.ggml.add_bos_token)
};

/// One row a name; names llama.cpp reads as one pipeline share its regex and flags (llama-bpe and
/// llama3; bailingmoe, bailingmoe2 and llada-moe).
inline constexpr gguf_pretokenizer gguf_pretokenizers[] = {
    {"qwen2", qwen2_regex, true, false, false},
    {"llama-bpe", llama3_regex, false, true, true},
    {"llama3", llama3_regex, false, true, true},
    {"gpt-2", detail::gpt2_pattern, false, false, false},
    {"bailingmoe", bailingmoe_regex, false, false, false},
    {"bailingmoe2", bailingmoe_regex, false, false, false},
    {"llada-moe", bailingmoe_regex, false, false, false},
};

/// The pre-tokenizer row of `name`, or null when the table has none.
[[nodiscard]] inline const gguf_pretokenizer* find_gguf_pretokenizer(std::string_view name) {
    for (const gguf_pretokenizer& x : gguf_pretokenizers)
        if (x.name == name) return &x;
    return nullptr;
}

/// Gives tokenizer.json `j` (a byte-level BPE) the pipeline `p` stands for: the Split on its regex then
/// ByteLevel, its NFC normalizer or none, and its ignore_merges (dlm-bench-tokenizer puts another
/// pre-tokenizer's regex on a vocabulary so).
inline void set_gguf_pretokenizer(nlohmann::json& j, const gguf_pretokenizer& p) {
    const nlohmann::json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
    j["pre_tokenizer"] = {{"type", "Sequence"},
                          {"pretokenizers",
                           {{{"type", "Split"}, {"pattern", {{"Regex", std::string(p.regex)}}}, {"behavior", "Isolated"}, {"invert", false}}, byte_level}}};
    if (p.nfc) j["normalizer"] = {{"type", "NFC"}};
    else j.erase("normalizer");
    j["model"]["ignore_merges"] = p.ignore_merges;
}

/// GGUF token types (llama.cpp's llama_token_type / gguf-py TokenType).
enum class gguf_token_type : std::int64_t { normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };

namespace detail {

/// Whether llama.cpp's tokenizer adds a BOS: as add_bos_token says, else its default for the
/// pre-tokenizer; or always (the gemma4 vocabulary: llama.cpp overrides a false add_bos_token there).
enum class gguf_bos { file_else_no, file_else_yes, always };

/// The TemplateProcessing that wraps a text as llama.cpp's tokenizer does with add_special: a BOS as
/// `bos` says, an EOS when add_eos_token; null when it adds nothing. A token asked for by the file's
/// own key, or always added, must be named (bos_token_id / eos_token_id) and exist.
[[nodiscard]] inline nlohmann::json gguf_post_processor(const gguf_header& h, const std::vector<std::string_view>& tokens, gguf_bos bos_rule) {
    nlohmann::json single = nlohmann::json::array(), specials = nlohmann::json::object();
    const auto add = [&](std::string_view flag, std::string_view id_key, bool by_default, bool always) {
        const bool given = h.has(flag);
        const bool asked = given ? h.boolean(flag) : by_default;
        if (!asked && !always) return false;
        if (!h.has(id_key)) {
            if (always) h.fail_key(id_key, "missing; llama.cpp adds it to every text of this vocabulary, whatever " + std::string(flag) + " says");
            if (given) h.fail_key(flag, "is true, but the file names no " + std::string(id_key));
            return false;  // llama.cpp's default asks for a token the file does not name: nothing to add
        }
        const std::int64_t id = h.integer(id_key);
        if (static_cast<std::size_t>(id) >= tokens.size())
            h.fail_key(id_key, std::to_string(id) + " is outside the vocabulary of " + std::to_string(tokens.size()) + " tokens");
        const std::string text(tokens[static_cast<std::size_t>(id)]);
        single.push_back({{"SpecialToken", {{"id", text}, {"type_id", 0}}}});
        specials[text] = {{"id", text}, {"ids", {id}}, {"tokens", {text}}};
        return true;
    };
    const bool bos = add("tokenizer.ggml.add_bos_token", "tokenizer.ggml.bos_token_id", bos_rule == gguf_bos::file_else_yes, bos_rule == gguf_bos::always);
    single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
    const bool eos = add("tokenizer.ggml.add_eos_token", "tokenizer.ggml.eos_token_id", false, false);
    if (!bos && !eos) return nullptr;
    return {{"type", "TemplateProcessing"}, {"single", std::move(single)}, {"pair", nlohmann::json::array()}, {"special_tokens", std::move(specials)}};
}

}  // namespace detail

namespace detail {

/// The vocabulary (every token at its id) and the added tokens of tokenizer.ggml.tokens / token_type:
/// control and unknown ones special, user-defined ones not (llama.cpp matches the three in a text, and
/// its detokenizer shows control and unknown ones only when asked for special tokens).
struct gguf_vocab {
    std::vector<std::string_view> tokens;
    nlohmann::json vocab = nlohmann::json::object(), added = nlohmann::json::array();
};

[[nodiscard]] inline gguf_vocab read_gguf_vocab(const gguf_header& h) {
    gguf_vocab v;
    v.tokens = h.string_array("tokenizer.ggml.tokens");
    std::vector<std::int64_t> types(v.tokens.size(), static_cast<std::int64_t>(gguf_token_type::normal));
    if (h.has("tokenizer.ggml.token_type")) {
        types = h.integer_array("tokenizer.ggml.token_type");
        if (types.size() != v.tokens.size())
            h.fail_key("tokenizer.ggml.token_type", std::to_string(types.size()) + " types for " + std::to_string(v.tokens.size()) + " tokens");
    }
    for (std::size_t id = 0; id < v.tokens.size(); ++id) {
        const std::string text(v.tokens[id]);
        if (v.vocab.contains(text))
            h.fail_key("tokenizer.ggml.tokens", "token '" + text + "' appears at ids " + std::to_string(v.vocab[text].get<std::int64_t>()) + " and " + std::to_string(id));
        v.vocab[text] = id;
        const auto t = static_cast<gguf_token_type>(types[id]);
        if (t < gguf_token_type::normal || t > gguf_token_type::byte)
            h.fail_key("tokenizer.ggml.token_type", "token " + std::to_string(id) + " has unknown type " + std::to_string(types[id]));
        if (t == gguf_token_type::control || t == gguf_token_type::unknown || t == gguf_token_type::user_defined)
            v.added.push_back({{"id", id}, {"content", text}, {"special", t != gguf_token_type::user_defined}, {"single_word", false},
                               {"lstrip", false}, {"rstrip", false}, {"normalized", false}});
    }
    return v;
}

/// Gemma 4's merges as [left, right] pairs: a merge string "a b" is cut at its first space whose two
/// sides and their concatenation are tokens (a token may hold a space), as the vocabulary's own merges are.
[[nodiscard]] inline nlohmann::json gemma4_merges(const gguf_header& h, const nlohmann::json& vocab) {
    nlohmann::json merges = nlohmann::json::array();
    for (const std::string_view m : h.string_array("tokenizer.ggml.merges")) {
        bool cut = false;
        for (std::size_t k = 1; k + 1 < m.size() && !cut; ++k) {
            if (m[k] != ' ') continue;
            const std::string left(m.substr(0, k)), right(m.substr(k + 1));
            if (!vocab.contains(left) || !vocab.contains(right) || !vocab.contains(left + right)) continue;
            merges.push_back({left, right});
            cut = true;
        }
        if (!cut) h.fail_key("tokenizer.ggml.merges", "merge '" + std::string(m) + "' does not split into two tokens whose join is a token");
    }
    return merges;
}

/// Gemma 4's tokenizer.json (tokenizer.ggml.model "gemma4", what Gemma 4 and DiffusionGemma files
/// carry), as Gemma's tokenizer.json is: spaces normalized to ▁ and no other split, BPE over the
/// characters with byte fallback (<0x00>…<0xFF>), fuse_unk and <unk>; the decoder turns ▁ back into
/// spaces, bytes into text; <bos> added as the file asks (add_bos_token; llama.cpp's default for it: yes).
[[nodiscard]] inline nlohmann::json gemma4_tokenizer_json(const gguf_header& h) {
    gguf_vocab v = read_gguf_vocab(h);
    nlohmann::json merges = gemma4_merges(h, v.vocab);
    const bool has_unk = v.vocab.contains("<unk>");
    nlohmann::json j = {
        {"model",
         {{"type", "BPE"}, {"vocab", std::move(v.vocab)}, {"merges", std::move(merges)}, {"byte_fallback", true}, {"fuse_unk", true},
          {"ignore_merges", false}}},
        {"added_tokens", std::move(v.added)},
        {"normalizer", {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}},
        {"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "MergedWithPrevious"}, {"invert", false}}},
        {"decoder",
         {{"type", "Sequence"},
          {"decoders", {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}}, {{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}}},
    };
    if (has_unk) j["model"]["unk_token"] = "<unk>";
    if (h.has("tokenizer.ggml.add_space_prefix") && h.boolean("tokenizer.ggml.add_space_prefix"))
        h.fail_key("tokenizer.ggml.add_space_prefix", "true is not supported in a gemma4 vocabulary (llama.cpp's detokenizer then drops a space "
                                                      "at the start of a text; Gemma's tokenizer and the converter's false do not)");
    if (auto post = gguf_post_processor(h, v.tokens, gguf_bos::always); !post.is_null()) j["post_processor"] = std::move(post);
    return j;
}

}  // namespace detail

/// The tokenizer.json a GGUF file's tokenizer keys describe (see the top). Throws file_error naming
/// the key that is missing, mistyped, inconsistent or not supported.
[[nodiscard]] inline nlohmann::json gguf_tokenizer_json(const gguf_header& h) {
    const std::string_view model = h.string("tokenizer.ggml.model");
    if (model == "gemma4") return detail::gemma4_tokenizer_json(h);
    if (model != "gpt2")
        h.fail_key("tokenizer.ggml.model", "'" + std::string(model) + "' is not supported; dlm reads byte-level BPE vocabularies ('gpt2')" +
                                               (model == "llama" ? " (this is a SentencePiece vocabulary)" : "") + " and Gemma 4's ('gemma4')");
    const std::string pre = h.has("tokenizer.ggml.pre") ? std::string(h.string("tokenizer.ggml.pre")) : "(none)";
    const gguf_pretokenizer* p = find_gguf_pretokenizer(pre);
    if (!p) {
        std::string known;
        for (const gguf_pretokenizer& x : gguf_pretokenizers) known += (known.empty() ? "'" : ", '") + std::string(x.name) + "'";
        h.fail_key("tokenizer.ggml.pre", "pre-tokenizer '" + pre + "' is not one dlm knows the regex of; it reads " + known);
    }

    detail::gguf_vocab v = detail::read_gguf_vocab(h);
    nlohmann::json merges = nlohmann::json::array();
    for (const std::string_view m : h.string_array("tokenizer.ggml.merges")) merges.push_back(std::string(m));
    nlohmann::json j = {
        {"model", {{"type", "BPE"}, {"vocab", std::move(v.vocab)}, {"merges", std::move(merges)}}},
        {"added_tokens", std::move(v.added)},
        {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}},
    };
    set_gguf_pretokenizer(j, *p);
    const auto bos_rule = p->add_bos ? detail::gguf_bos::file_else_yes : detail::gguf_bos::file_else_no;
    if (auto post = detail::gguf_post_processor(h, v.tokens, bos_rule); !post.is_null()) j["post_processor"] = std::move(post);
    return j;
}

/// The tokenizer of a GGUF file (gguf_tokenizer_json parsed by io::tokenizer; errors name the key,
/// or the rebuilt tokenizer's part, and the file).
[[nodiscard]] inline tokenizer gguf_tokenizer(const gguf_header& h) { return tokenizer::parse(gguf_tokenizer_json(h), h.path()); }

/// The chat format of tokenizer.chat_template (none without one).
[[nodiscard]] inline chat_format gguf_chat_format(const gguf_header& h) {
    return h.has("tokenizer.chat_template") ? chat_format_of_template(h.string("tokenizer.chat_template")) : chat_format::none;
}

}  // namespace dlm::io
