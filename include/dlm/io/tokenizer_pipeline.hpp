// dlm/io/tokenizer_pipeline.hpp — the stages of a tokenizer.json around the BPE model: added tokens,
// normalizers, post-processor and decoders (the pre-tokenizers: pre_tokenizer.hpp), each read from
// its JSON and applied as the HF tokenizers library applies it. The tokenizer class (tokenizer.hpp)
// strings them together.
//
// Implemented: normalizers NFC, Prepend, Replace and Sequence; pre-tokenizers Split (every behavior,
// invert), ByteLevel (add_prefix_space, use_regex), Digits and Sequence; post-processors
// TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel and Sequence; decoders ByteLevel,
// ByteFallback, Fuse, Replace, Strip and Sequence. Anything else is refused by name.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "bpe.hpp"
#include "pretokenizer_regex.hpp"
#include "unicode.hpp"

namespace dlm::io::detail {

/// Where a JSON value sits in the file, for error messages: "pre_tokenizer.pretokenizers[1]".
struct json_where {
    const std::string& source;
    std::string path;
    [[nodiscard]] json_where operator[](std::string_view key) const { return {source, path + "." + std::string(key)}; }
    [[nodiscard]] json_where operator[](std::size_t i) const { return {source, path + "[" + std::to_string(i) + "]"}; }
    [[noreturn]] void fail(const std::string& why) const { throw file_error(source, path + ": " + why); }
    [[noreturn]] void unsupported(const std::string& what) const {
        throw file_error(source, path + ": " + what + " is not supported by dlm's tokenizer");
    }
    const nlohmann::json& member(const nlohmann::json& j, std::string_view key) const {
        if (!j.is_object()) fail("expected an object");
        const auto it = j.find(key);
        if (it == j.end()) fail("missing key '" + std::string(key) + "'");
        return *it;
    }
    [[nodiscard]] std::string string(const nlohmann::json& j, std::string_view key) const {
        const auto& v = member(j, key);
        if (!v.is_string()) (*this)[key].fail("expected a string");
        return v.get<std::string>();
    }
    [[nodiscard]] bool flag(const nlohmann::json& j, std::string_view key, bool fallback) const {
        if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) return fallback;
        if (!j.at(key).is_boolean()) (*this)[key].fail("expected true or false");
        return j.at(key).get<bool>();
    }
    [[nodiscard]] std::string type(const nlohmann::json& j) const { return string(j, "type"); }
};

// ---- text pieces ---------------------------------------------------------------------------------

/// A piece of the input on its way to ids: text, or an added token already resolved to its id.
struct piece {
    std::string text;
    token_id id = no_token;
};

/// One [begin, end) byte range of a string and whether the splitting pattern matched it.
struct span_match {
    std::size_t begin, end;
    bool is_match;
};

/// Calls `f(span_match)` for the byte ranges of the regex matches of `s` and of the gaps between
/// them, in order (one span for an empty `s`). Only the code points of `s` are held, not the spans.
template <class F>
void for_each_regex_span(const pattern_regex& re, std::string_view s, F&& f) {
    const std::u32string cps = decode_utf8(s);
    std::size_t cp = 0, byte = 0;  // a code point index and its byte offset, advanced as the matches come in order
    const auto offset = [&](std::size_t to) {
        for (; cp < to; ++cp) byte += cps[cp] < 0x80 ? 1 : cps[cp] < 0x800 ? 2 : cps[cp] < 0x10000 ? 3 : 4;
        return byte;
    };
    std::size_t prev = 0;
    re.for_each_match(cps, [&](std::size_t b, std::size_t e) {
        const std::size_t begin = offset(b);
        if (begin != prev) f(span_match{prev, begin, false});
        prev = offset(e);
        f(span_match{begin, prev, true});
    });
    if (prev != s.size() || s.empty()) f(span_match{prev, s.size(), false});
}

// ---- added tokens ---------------------------------------------------------------------------------

struct added_token {
    token_id id = no_token;
    std::string content;
    bool lstrip = false, rstrip = false, normalized = false, special = false;
};

/// Finds added tokens in text: leftmost match first, the longest of those starting there, then on
/// after its end; lstrip / rstrip widen a match over the whitespace around it.
class added_token_matcher {
public:
    void add(const std::string& text, std::size_t token_index) {
        if (text.empty()) return;
        int node = 0;
        for (const char c : text) {
            const std::uint64_t k = (std::uint64_t(node) << 8) | static_cast<unsigned char>(c);
            auto it = edges_.find(k);
            if (it == edges_.end()) {
                it = edges_.emplace(k, static_cast<int>(terminal_.size())).first;
                terminal_.push_back(-1);
            }
            node = it->second;
        }
        terminal_[static_cast<std::size_t>(node)] = static_cast<std::ptrdiff_t>(token_index);
        first_byte_[static_cast<unsigned char>(text[0])] = true;
    }
    [[nodiscard]] bool empty() const noexcept { return terminal_.size() == 1; }

    /// Splits `s` into pieces; the matched ones carry their token id.
    void split(std::string_view s, const std::vector<added_token>& tokens, std::vector<piece>& out) const {
        std::size_t done = 0;  // end of the previous match
        for (std::size_t i = 0; i < s.size(); ++i) {
            if (!first_byte_[static_cast<unsigned char>(s[i])]) continue;
            std::ptrdiff_t best = -1;
            std::size_t best_end = 0;
            int node = 0;
            for (std::size_t j = i; j < s.size(); ++j) {
                const auto it = edges_.find((std::uint64_t(node) << 8) | static_cast<unsigned char>(s[j]));
                if (it == edges_.end()) break;
                node = it->second;
                if (terminal_[static_cast<std::size_t>(node)] >= 0) best = terminal_[static_cast<std::size_t>(node)], best_end = j + 1;
            }
            if (best < 0) continue;
            const added_token& t = tokens[static_cast<std::size_t>(best)];
            std::size_t start = i, stop = best_end;
            if (t.lstrip) {
                std::size_t k = start;
                while (k > 0) {
                    std::size_t b = k - 1;
                    while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
                    std::size_t tmp = b;
                    if (!is_white_space(next_code_point(s, tmp))) break;
                    k = b;
                }
                start = std::max(k, done);
            }
            if (t.rstrip) {
                for (std::size_t k = stop; k < s.size();) {
                    const char32_t c = next_code_point(s, k);
                    if (!is_white_space(c)) break;
                    stop = k;
                }
            }
            if (done < start) out.push_back({std::string(s.substr(done, start - done)), no_token});
            out.push_back({std::string(s.substr(start, stop - start)), t.id});
            done = stop;
            i = std::max(best_end, stop) - 1;  // the search goes on after the match
        }
        if (done < s.size()) out.push_back({std::string(s.substr(done)), no_token});
    }

private:
    std::unordered_map<std::uint64_t, int> edges_;
    std::vector<std::ptrdiff_t> terminal_{-1};  // node -> token index, -1 if none; node 0 = root
    bool first_byte_[256] = {};
};

// ---- normalizers ----------------------------------------------------------------------------------

struct normalizer_step {
    enum class kind { nfc, prepend, replace } k;
    std::string text, content;            // prepend: text; replace: literal pattern, content
    std::shared_ptr<pattern_regex> regex;  // replace with a regex pattern
};

inline void parse_normalizer(const nlohmann::json& j, const json_where& at, std::vector<normalizer_step>& out) {
    if (j.is_null()) return;
    const std::string type = at.type(j);
    if (type == "Sequence") {
        const auto& list = at.member(j, "normalizers");
        if (!list.is_array()) at["normalizers"].fail("expected an array");
        for (std::size_t i = 0; i < list.size(); ++i) parse_normalizer(list[i], at["normalizers"][i], out);
    } else if (type == "NFC") {
        out.push_back({normalizer_step::kind::nfc, {}, {}, nullptr});
    } else if (type == "Prepend") {
        out.push_back({normalizer_step::kind::prepend, at.string(j, "prepend"), {}, nullptr});
    } else if (type == "Replace") {
        normalizer_step s{normalizer_step::kind::replace, {}, at.string(j, "content"), nullptr};
        const auto& p = at.member(j, "pattern");
        if (p.contains("String")) s.text = at["pattern"].string(p, "String");
        else if (p.contains("Regex")) {
            try {
                s.regex = std::make_shared<pattern_regex>(at["pattern"].string(p, "Regex"));
            } catch (const pattern_error& e) { at["pattern"].fail(e.what()); }
        } else at["pattern"].fail("expected {\"String\": ...} or {\"Regex\": ...}");
        out.push_back(std::move(s));
    } else {
        at.unsupported("normalizer type '" + type + "' (implemented: NFC, Prepend, Replace, Sequence)");
    }
}

[[nodiscard]] inline std::string apply_normalizers(const std::vector<normalizer_step>& steps, std::string s) {
    for (const auto& n : steps) {
        switch (n.k) {
            case normalizer_step::kind::nfc: s = nfc_utf8(s); break;
            case normalizer_step::kind::prepend:
                if (!s.empty()) s = n.text + s;
                break;
            case normalizer_step::kind::replace: {
                std::string r;
                if (n.regex) {
                    std::size_t prev = 0;
                    for_each_regex_span(*n.regex, s, [&](const span_match& m) {
                        if (m.is_match) r.append(s, prev, m.begin - prev).append(n.content), prev = m.end;
                    });
                    r.append(s, prev);
                } else if (n.text.empty()) {
                    r = s;
                } else {
                    std::size_t prev = 0;
                    for (std::size_t k = s.find(n.text); k != std::string::npos; k = s.find(n.text, prev))
                        r.append(s, prev, k - prev).append(n.content), prev = k + n.text.size();
                    r.append(s, prev);
                }
                s = std::move(r);
                break;
            }
        }
    }
    return s;
}

// ---- post-processor -------------------------------------------------------------------------------

/// What add_special puts around a single sequence: ids before and after it.
struct post_processor {
    std::vector<token_id> before, after;
    bool sequence_seen = false;
};

inline void parse_post_processor(const nlohmann::json& j, const json_where& at, post_processor& pp) {
    if (j.is_null()) return;
    const std::string type = at.type(j);
    const auto id_pair = [&](std::string_view key) {  // ["[CLS]", 101]
        const auto& v = at.member(j, key);
        if (!v.is_array() || v.size() != 2 || !v[1].is_number_integer()) at[key].fail("expected [token, id]");
        return v[1].get<token_id>();
    };
    if (type == "Sequence") {
        const auto& list = at.member(j, "processors");
        if (!list.is_array()) at["processors"].fail("expected an array");
        for (std::size_t i = 0; i < list.size(); ++i) parse_post_processor(list[i], at["processors"][i], pp);
    } else if (type == "ByteLevel") {
        // Offsets only: ids are unchanged.
    } else if (type == "BertProcessing" || type == "RobertaProcessing") {
        if (pp.sequence_seen) at.unsupported("a second special-token post-processor");
        pp.before = {id_pair("cls")}, pp.after = {id_pair("sep")}, pp.sequence_seen = true;
    } else if (type == "TemplateProcessing") {
        if (pp.sequence_seen) at.unsupported("a second special-token post-processor");
        const auto& single = at.member(j, "single");
        const auto& specials = at.member(j, "special_tokens");
        if (!single.is_array()) at["single"].fail("expected an array");
        for (std::size_t i = 0; i < single.size(); ++i) {
            const json_where item = at["single"][i];
            if (single[i].contains("Sequence")) {
                if (pp.sequence_seen) item.fail("the template names the sequence twice");
                pp.sequence_seen = true;
            } else if (single[i].contains("SpecialToken")) {
                const std::string name = item["SpecialToken"].string(single[i].at("SpecialToken"), "id");
                const auto& tok = at["special_tokens"].member(specials, name);
                const auto& ids = at["special_tokens"][name].member(tok, "ids");
                if (!ids.is_array()) at["special_tokens"][name]["ids"].fail("expected an array of ids");
                for (const auto& id : ids) {
                    if (!id.is_number_integer()) at["special_tokens"][name]["ids"].fail("expected integer ids");
                    (pp.sequence_seen ? pp.after : pp.before).push_back(id.get<token_id>());
                }
            } else {
                item.fail("expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
            }
        }
        if (!pp.sequence_seen) at["single"].fail("the template never names the sequence $A");
    } else {
        at.unsupported("post_processor type '" + type + "' (implemented: TemplateProcessing, BertProcessing, "
                       "RobertaProcessing, ByteLevel, Sequence)");
    }
}

// ---- decoders -------------------------------------------------------------------------------------

struct decoder_step {
    enum class kind { byte_level, byte_fallback, fuse, replace, strip } k = kind::byte_level;
    std::string pattern, content;  // replace
    char32_t strip_char = 0;
    std::size_t strip_start = 0, strip_stop = 0;
};

inline void parse_decoder(const nlohmann::json& j, const json_where& at, std::vector<decoder_step>& out) {
    if (j.is_null()) return;
    const std::string type = at.type(j);
    if (type == "Sequence") {
        const auto& list = at.member(j, "decoders");
        if (!list.is_array()) at["decoders"].fail("expected an array");
        for (std::size_t i = 0; i < list.size(); ++i) parse_decoder(list[i], at["decoders"][i], out);
    } else if (type == "ByteLevel") {
        out.emplace_back().k = decoder_step::kind::byte_level;
    } else if (type == "ByteFallback") {
        out.emplace_back().k = decoder_step::kind::byte_fallback;
    } else if (type == "Fuse") {
        out.emplace_back().k = decoder_step::kind::fuse;
    } else if (type == "Replace") {
        const auto& p = at.member(j, "pattern");
        if (!p.is_object() || !p.contains("String")) at["pattern"].unsupported("a Replace decoder without a String pattern");
        decoder_step& s = out.emplace_back();
        s.k = decoder_step::kind::replace;
        s.pattern = at["pattern"].string(p, "String"), s.content = at.string(j, "content");
    } else if (type == "Strip") {
        decoder_step s;
        s.k = decoder_step::kind::strip;
        const std::u32string c = decode_utf8(at.string(j, "content"));
        if (c.size() != 1) at["content"].fail("expected one character");
        const auto count = [&](std::string_view key) {
            const auto& v = at.member(j, key);
            if (!v.is_number_unsigned()) at[key].fail("expected a count");
            return v.get<std::size_t>();
        };
        s.strip_char = c[0], s.strip_start = count("start"), s.strip_stop = count("stop");
        out.push_back(std::move(s));
    } else {
        at.unsupported("decoder type '" + type + "' (implemented: ByteLevel, ByteFallback, Fuse, Replace, Strip, Sequence)");
    }
}

/// Joins tokens into text through the decoder steps (no steps: tokens joined with spaces).
[[nodiscard]] inline std::string apply_decoders(const std::vector<decoder_step>& steps, std::vector<std::string> tokens) {
    if (steps.empty()) {
        std::string out;
        for (std::size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
        return out;
    }
    for (const auto& st : steps) {
        std::vector<std::string> next;
        switch (st.k) {
            case decoder_step::kind::byte_level: {
                std::string bytes;
                for (const auto& t : tokens) {
                    std::string mapped;
                    bool all = true;
                    for (const char32_t c : decode_utf8(t)) {
                        const auto b = byte_level_map::get().decode(c);
                        if (!b) { all = false; break; }
                        mapped.push_back(static_cast<char>(*b));
                    }
                    bytes += all ? mapped : t;  // a token with other characters keeps its own bytes
                }
                next.push_back(to_valid_utf8(bytes));
                break;
            }
            case decoder_step::kind::byte_fallback: {
                std::string pending;
                const auto flush = [&] {
                    if (pending.empty()) return;
                    if (to_valid_utf8(pending) == pending) next.push_back(pending);
                    else next.insert(next.end(), pending.size(), "\xEF\xBF\xBD");  // one U+FFFD per byte
                    pending.clear();
                };
                for (auto& t : tokens) {
                    const auto hex = [&](char c) {
                        return c >= '0' && c <= '9' ? c - '0' : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
                    };
                    if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && hex(t[3]) >= 0 && hex(t[4]) >= 0) {
                        pending.push_back(static_cast<char>(hex(t[3]) * 16 + hex(t[4])));
                    } else {
                        flush();
                        next.push_back(std::move(t));
                    }
                }
                flush();
                break;
            }
            case decoder_step::kind::fuse: {
                std::string all;
                for (const auto& t : tokens) all += t;
                next.push_back(std::move(all));
                break;
            }
            case decoder_step::kind::replace:
                for (auto& t : tokens) {
                    std::string r;
                    std::size_t prev = 0;
                    if (!st.pattern.empty())
                        for (std::size_t k = t.find(st.pattern); k != std::string::npos; k = t.find(st.pattern, prev))
                            r.append(t, prev, k - prev).append(st.content), prev = k + st.pattern.size();
                    r.append(t, prev);
                    next.push_back(std::move(r));
                }
                break;
            case decoder_step::kind::strip:
                for (const auto& t : tokens) {
                    const std::u32string c = decode_utf8(t);
                    std::size_t b = 0, e = c.size();
                    while (b < st.strip_start && b < c.size() && c[b] == st.strip_char) ++b;
                    for (std::size_t k = 0; k < st.strip_stop && e > b && c[e - 1] == st.strip_char; ++k) --e;
                    next.push_back(encode_utf8(std::u32string_view(c).substr(b, e - b)));
                }
                break;
        }
        tokens.swap(next);
    }
    std::string out;
    for (const auto& t : tokens) out += t;
    return out;
}

}  // namespace dlm::io::detail
