// dlm/server/text_stream.hpp — what of a diffusion decoder's answer may be sent to a client now.
//
// A diffusion decoder commits slots in any order; a streaming client can only be sent text that
// will never change. The engine hands out the committed prefix (the slots committed contiguously
// from the answer's first slot); its decoded text only grows. text_stream turns those growing texts
// into the pieces to send:
//   - whole characters only: an incomplete UTF-8 sequence at the end (a byte-level BPE token may hold
//     part of a character) or a replacement character U+FFFD standing for one waits for its rest;
//   - stop strings: the text ends before the first one, and a tail that could still become one waits;
//   - never retracted: what was sent stays sent; text is only appended.
//
//   dlm::server::text_stream s({"\n\n"});
//   send(s.advance(decoded_prefix_text, /*final=*/false));   // after each forward
//   send(s.advance(final_answer_text, /*final=*/true));      // when the sequence ends
//   if (s.stopped()) ...                                     // a stop string ended the answer
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace dlm::server {

/// The length of the longest prefix of `s` that ends on a whole UTF-8 character and not in a
/// replacement character (U+FFFD, EF BF BD) that may stand for a character split across tokens.
[[nodiscard]] inline std::size_t whole_characters(std::string_view s) noexcept {
    std::size_t end = s.size();
    // An incomplete multi-byte sequence at the end: cut before its lead byte.
    std::size_t lead = end;
    for (std::size_t back = 0; back < 4 && lead > 0; ++back) {
        const auto c = static_cast<unsigned char>(s[lead - 1]);
        if ((c & 0xC0) != 0x80) {  // an ASCII or lead byte
            --lead;
            const std::size_t need = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
            if (end - lead < need) end = lead;
            break;
        }
        --lead;
    }
    while (end >= 3 && s.substr(end - 3, 3) == "\xEF\xBF\xBD") end -= 3;
    return end;
}

class text_stream {
public:
    explicit text_stream(std::vector<std::string> stop = {}) : stop_(std::move(stop)) {}

    /// The text to send now, given `text`, the decoded committed prefix so far (each call's text
    /// extends the last one's), or with `final` the whole answer. Empty once stopped().
    [[nodiscard]] std::string advance(std::string_view text, bool final) {
        if (stopped_ || text.size() < sent_.size()) return {};
        std::size_t end = final ? text.size() : whole_characters(text);
        if (end <= sent_.size()) return {};
        // A stop string ends the text; look where one may start that was not visible before.
        std::size_t longest = 0;
        for (const std::string& s : stop_) longest = std::max(longest, s.size());
        const std::size_t from = sent_.size() >= longest ? sent_.size() - longest + 1 : 0;
        std::size_t cut = std::string_view::npos;
        for (const std::string& s : stop_) cut = std::min(cut, text.substr(0, end).find(s, from));
        if (cut != std::string_view::npos) {
            stopped_ = true;
            end = std::max(cut, sent_.size());
        } else if (!final) {
            end -= held_back(text.substr(0, end));
        }
        if (end <= sent_.size()) return {};
        std::string piece(text.substr(sent_.size(), end - sent_.size()));
        sent_ += piece;
        return piece;
    }

    /// Whether a stop string ended the answer.
    [[nodiscard]] bool stopped() const noexcept { return stopped_; }
    /// Everything sent so far.
    [[nodiscard]] const std::string& sent() const noexcept { return sent_; }

private:
    /// The longest tail of `t` that is a proper prefix of a stop string (it may still become one).
    [[nodiscard]] std::size_t held_back(std::string_view t) const noexcept {
        std::size_t hold = 0;
        for (const std::string& s : stop_)
            for (std::size_t n = std::min(s.size() - 1, t.size()); n > hold; --n)
                if (t.substr(t.size() - n) == std::string_view(s).substr(0, n)) {
                    hold = n;
                    break;
                }
        return hold;
    }

    std::vector<std::string> stop_;
    std::string sent_;
    bool stopped_ = false;
};

/// The answer of a finished sequence with the stop strings applied: the text before the first one.
/// Returns whether one was found.
inline bool cut_at_stop(std::string& text, const std::vector<std::string>& stop) {
    std::size_t cut = std::string::npos;
    for (const std::string& s : stop) cut = std::min(cut, text.find(s));
    if (cut == std::string::npos) return false;
    text.resize(cut);
    return true;
}

/// How many of an answer's `n` tokens its client is billed for when stop strings cut it: the fewest
/// whose text (`text_of(k)`: the decoded first k tokens) holds a stop string, the token that completes
/// it included (vLLM's count), or `n` when none does. The same tokens give the same count however the
/// answer arrived (whole, or streamed and cancelled at the stop). A prefix's text is a prefix of the
/// longer text, so "holds a stop string" only turns true as k grows: a binary search, O(log n) decodes.
template <class TextOf>
[[nodiscard]] std::size_t tokens_through_stop(std::size_t n, const std::vector<std::string>& stop, TextOf&& text_of) {
    const auto holds = [&](std::size_t k) {
        const std::string t = text_of(k);
        return std::any_of(stop.begin(), stop.end(), [&](const std::string& s) { return t.find(s) != std::string::npos; });
    };
    if (stop.empty() || !holds(n)) return n;
    std::size_t lo = 0, hi = n;  // holds(hi), and !holds(lo) (no stop string is empty)
    while (hi - lo > 1) {
        const std::size_t mid = lo + (hi - lo) / 2;
        (holds(mid) ? hi : lo) = mid;
    }
    return hi;
}

}  // namespace dlm::server
