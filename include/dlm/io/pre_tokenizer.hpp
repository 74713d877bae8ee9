// dlm/io/pre_tokenizer.hpp — a tokenizer.json's pre-tokenizers (Split with every behavior and invert,
// ByteLevel with add_prefix_space and use_regex, Digits, Sequence), read from its JSON and applied as
// the HF tokenizers library applies them, streaming: each piece goes through the next steps as it is
// cut (for_each_word), so a long text never holds the list of its words.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bpe.hpp"
#include "pretokenizer_regex.hpp"
#include "tokenizer_pipeline.hpp"
#include "unicode.hpp"

namespace dlm::io::detail {

// ---- pre-tokenizers -------------------------------------------------------------------------------

enum class split_behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

struct pre_tokenizer_step {
    enum class kind { split, byte_level, digits } k = kind::split;
    std::shared_ptr<pattern_regex> regex;  // split with a regex
    std::string literal;                  // split with a string
    split_behavior behavior = split_behavior::isolated;
    bool invert = false;
    bool add_prefix_space = false, use_regex = false;  // byte_level
    bool individual_digits = false;                    // digits
};

/// GPT-2's pattern, which ByteLevel uses when use_regex is true.
inline constexpr std::string_view gpt2_pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

inline void parse_pre_tokenizer(const nlohmann::json& j, const json_where& at, std::vector<pre_tokenizer_step>& out) {
    if (j.is_null()) return;
    const std::string type = at.type(j);
    if (type == "Sequence") {
        const auto& list = at.member(j, "pretokenizers");
        if (!list.is_array()) at["pretokenizers"].fail("expected an array");
        for (std::size_t i = 0; i < list.size(); ++i) parse_pre_tokenizer(list[i], at["pretokenizers"][i], out);
    } else if (type == "Split") {
        pre_tokenizer_step s;
        s.k = pre_tokenizer_step::kind::split;
        const auto& p = at.member(j, "pattern");
        try {
            if (p.is_object() && p.contains("Regex")) s.regex = std::make_shared<pattern_regex>(at["pattern"].string(p, "Regex"));
            else if (p.is_object() && p.contains("String")) s.literal = at["pattern"].string(p, "String");
            else at["pattern"].fail("expected {\"String\": ...} or {\"Regex\": ...}");
        } catch (const pattern_error& e) { at["pattern"].fail(e.what()); }
        const std::string b = at.string(j, "behavior");
        if (b == "Removed") s.behavior = split_behavior::removed;
        else if (b == "Isolated") s.behavior = split_behavior::isolated;
        else if (b == "MergedWithPrevious") s.behavior = split_behavior::merged_with_previous;
        else if (b == "MergedWithNext") s.behavior = split_behavior::merged_with_next;
        else if (b == "Contiguous") s.behavior = split_behavior::contiguous;
        else at["behavior"].fail("unknown split behavior '" + b + "'");
        s.invert = at.flag(j, "invert", false);
        out.push_back(std::move(s));
    } else if (type == "ByteLevel") {
        pre_tokenizer_step s;
        s.k = pre_tokenizer_step::kind::byte_level;
        s.add_prefix_space = at.flag(j, "add_prefix_space", true);
        s.use_regex = at.flag(j, "use_regex", true);
        if (s.use_regex) s.regex = std::make_shared<pattern_regex>(gpt2_pattern);
        out.push_back(std::move(s));
    } else if (type == "Digits") {
        pre_tokenizer_step s;
        s.k = pre_tokenizer_step::kind::digits;
        s.individual_digits = at.flag(j, "individual_digits", false);
        out.push_back(std::move(s));
    } else {
        at.unsupported("pre_tokenizer type '" + type + "' (implemented: Split, ByteLevel, Digits, Sequence)");
    }
}

/// Cuts `s` at the spans it is given, in order, as a Split with `behavior` does, and calls `emit` with
/// each piece (empty pieces are dropped). At most one piece waits for the next span (a match that
/// merges with what follows it), so nothing is held for the pieces already cut.
template <class Emit>
class span_splitter {
public:
    span_splitter(std::string_view s, split_behavior behavior, bool invert, Emit& emit) : s_(s), behavior_(behavior), invert_(invert), emit_(emit) {}

    void operator()(span_match m) {
        if (invert_) m.is_match = !m.is_match;
        switch (behavior_) {
            case split_behavior::isolated: cut(m.begin, m.end); break;
            case split_behavior::removed:
                if (!m.is_match) cut(m.begin, m.end);
                break;
            case split_behavior::contiguous:  // runs of spans alike join
                if (pending_ && m.is_match == previous_match_) pending_->second = m.end;
                else hold(m);
                break;
            case split_behavior::merged_with_previous:  // a match joins the piece before it
                if (pending_ && m.is_match && !previous_match_) pending_->second = m.end;
                else hold(m);
                break;
            case split_behavior::merged_with_next:  // a match joins the gap after it
                if (pending_ && pending_match_ && !m.is_match) {
                    cut(pending_->first, m.end);
                    pending_.reset();
                } else {
                    flush();
                    if (m.is_match) pending_.emplace(m.begin, m.end), pending_match_ = true;
                    else cut(m.begin, m.end);
                }
                break;
        }
        previous_match_ = m.is_match;
    }
    /// Emits the piece still waiting; call once after the last span.
    void finish() { flush(); }

private:
    void cut(std::size_t b, std::size_t e) {
        if (e > b) emit_(s_.substr(b, e - b));
    }
    void hold(const span_match& m) {
        flush();
        pending_.emplace(m.begin, m.end);
    }
    void flush() {
        if (pending_) cut(pending_->first, pending_->second);
        pending_.reset();
    }

    std::string_view s_;
    split_behavior behavior_;
    bool invert_;
    Emit& emit_;
    std::optional<std::pair<std::size_t, std::size_t>> pending_;
    bool pending_match_ = false, previous_match_ = false;
};

/// Calls `f` with the byte ranges of the occurrences of `lit` in `s` and of the gaps (Split with a
/// String pattern).
template <class F>
void for_each_literal_span(std::string_view lit, std::string_view s, F&& f) {
    std::size_t prev = 0;
    if (!lit.empty())
        for (std::size_t k = s.find(lit); k != std::string_view::npos; k = s.find(lit, prev)) {
            if (k != prev) f(span_match{prev, k, false});
            f(span_match{k, k + lit.size(), true});
            prev = k + lit.size();
        }
    if (prev != s.size() || s.empty()) f(span_match{prev, s.size(), false});
}

/// Calls `f` with one span per number character and the rest in between (the reference's
/// char-predicate pattern).
template <class F>
void for_each_digit_span(std::string_view s, F&& f) {
    std::size_t last = 0;
    for (std::size_t i = 0; i < s.size();) {
        const std::size_t b = i;
        if (is_number(next_code_point(s, i))) {
            if (last < b) f(span_match{last, b, false});
            f(span_match{b, i, true});
            last = i;
        }
    }
    if (last < s.size() || s.empty()) f(span_match{last, s.size(), false});
}

/// Calls `f(std::string_view word)` with the words of one normalized piece after pre-tokenizer steps
/// [k, end), in order: depth first, each step's pieces going through the next steps as they are cut,
/// so a long text never holds the list of its words (the steps' output is the same as step by step).
template <class F>
void for_each_word(const std::vector<pre_tokenizer_step>& steps, std::size_t k, std::string_view w, F& f) {
    if (k == steps.size()) {
        f(w);
        return;
    }
    const pre_tokenizer_step& st = steps[k];
    auto next = [&](std::string_view piece) { for_each_word(steps, k + 1, piece, f); };
    const auto split = [&](split_behavior behavior, bool invert, auto&& spans) {
        span_splitter<decltype(next)> cut(w, behavior, invert, next);
        spans(cut);
        cut.finish();
    };
    switch (st.k) {
        case pre_tokenizer_step::kind::split:
            split(st.behavior, st.invert, [&](auto& cut) {
                if (st.regex) for_each_regex_span(*st.regex, w, cut);
                else for_each_literal_span(st.literal, w, cut);
            });
            break;
        case pre_tokenizer_step::kind::digits:
            split(st.individual_digits ? split_behavior::isolated : split_behavior::contiguous, false,
                  [&](auto& cut) { for_each_digit_span(w, cut); });
            break;
        case pre_tokenizer_step::kind::byte_level: {
            std::string spaced;
            if (st.add_prefix_space && (w.empty() || w[0] != ' ')) w = spaced = " " + std::string(w);
            auto mapped = [&](std::string_view part) { next(byte_level_map::get().encode_all(part)); };
            if (!st.use_regex) {
                if (!w.empty()) mapped(w);
                break;
            }
            span_splitter<decltype(mapped)> cut(w, split_behavior::isolated, false, mapped);
            for_each_regex_span(*st.regex, w, cut);
            cut.finish();
            break;
        }
    }
}

}  // namespace dlm::io::detail
