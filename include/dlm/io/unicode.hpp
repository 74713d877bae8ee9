// dlm/io/unicode.hpp — the Unicode the tokenizer needs: UTF-8 in and out (invalid bytes become
// U+FFFD the way Python's and Rust's lossy decoders do it), the \p{L} / \p{N} / \s classes of the
// pre-tokenizer regexes, and NFC normalization. Tables: unicode_data.hpp (generated).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "unicode_data.hpp"

namespace dlm::io::detail {

inline constexpr char32_t replacement_char = 0xFFFD;

/// Appends the UTF-8 encoding of `cp` (a Unicode scalar value) to `out`.
inline void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

/// Decodes one code point at `s[i]`, advancing `i`. An ill-formed sequence yields U+FFFD and advances
/// past its maximal subpart (the longest prefix of a well-formed sequence, at least one byte): the
/// "substitution of maximal subparts" of the Unicode standard, which Python's errors="replace" and
/// Rust's String::from_utf8_lossy both follow.
[[nodiscard]] inline char32_t next_code_point(std::string_view s, std::size_t& i) {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned b0 = byte(i);
    if (b0 < 0x80) {
        ++i;
        return b0;
    }
    std::size_t need = 0;
    unsigned lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    char32_t cp = 0;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 1, cp = b0 & 0x1F;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 2, cp = b0 & 0x0F;
        if (b0 == 0xE0) lo = 0xA0;
        if (b0 == 0xED) hi = 0x9F;  // no surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 3, cp = b0 & 0x07;
        if (b0 == 0xF0) lo = 0x90;
        if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
    } else {
        ++i;
        return replacement_char;
    }
    std::size_t k = i + 1;
    for (std::size_t n = 0; n < need; ++n, ++k) {
        if (k >= s.size()) {
            i = k;
            return replacement_char;
        }
        const unsigned b = byte(k);
        const unsigned l = n == 0 ? lo : 0x80, h = n == 0 ? hi : 0xBF;
        if (b < l || b > h) {
            i = k;  // the offending byte starts the next sequence
            return replacement_char;
        }
        cp = (cp << 6) | (b & 0x3F);
    }
    i = k;
    return cp;
}

/// All code points of `s`, invalid UTF-8 replaced as next_code_point() does.
[[nodiscard]] inline std::u32string decode_utf8(std::string_view s) {
    std::u32string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) out.push_back(next_code_point(s, i));
    return out;
}

[[nodiscard]] inline std::string encode_utf8(std::u32string_view s) {
    std::string out;
    out.reserve(s.size());
    for (const char32_t cp : s) append_utf8(out, cp);
    return out;
}

/// `s` if it is valid UTF-8, else `s` with every ill-formed sequence replaced by U+FFFD.
[[nodiscard]] inline std::string to_valid_utf8(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
        const std::size_t start = i;
        const char32_t cp = next_code_point(s, i);
        if (cp == replacement_char && !(i - start == 3 && s.substr(start, 3) == "\xEF\xBF\xBD"))
            append_utf8(out, cp);
        else
            out.append(s.substr(start, i - start));
    }
    return out;
}

template <std::size_t N>
[[nodiscard]] inline bool in_ranges(const std::uint32_t (&table)[N][2], char32_t cp) {
    const auto it = std::upper_bound(std::begin(table), std::end(table), cp,
                                     [](char32_t c, const std::uint32_t(&r)[2]) { return c < r[0]; });
    return it != std::begin(table) && cp <= (*(it - 1))[1];
}

/// General category L* (\p{L}).
[[nodiscard]] inline bool is_letter(char32_t cp) {
    if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
    return in_ranges(ucd::letter_ranges, cp);
}

/// General category N* (\p{N}; also Rust's char::is_numeric).
[[nodiscard]] inline bool is_number(char32_t cp) {
    if (cp < 0x80) return cp >= '0' && cp <= '9';
    return in_ranges(ucd::number_ranges, cp);
}

/// The White_Space property: \s of the reference's regexes and Rust's char::is_whitespace.
[[nodiscard]] constexpr bool is_white_space(char32_t cp) noexcept {
    if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// ---- NFC -----------------------------------------------------------------------------------------

namespace hangul {
inline constexpr char32_t s_base = 0xAC00, l_base = 0x1100, v_base = 0x1161, t_base = 0x11A7;
inline constexpr char32_t l_count = 19, v_count = 21, t_count = 28, n_count = v_count * t_count,
                          s_count = l_count * n_count;
}  // namespace hangul

[[nodiscard]] inline unsigned combining_class(char32_t cp) {
    if (cp < 0x300) return 0;
    const auto& t = ucd::combining_class_ranges;
    const auto it = std::upper_bound(std::begin(t), std::end(t), cp,
                                     [](char32_t c, const std::uint32_t(&r)[3]) { return c < r[0]; });
    return it != std::begin(t) && cp <= (*(it - 1))[1] ? (*(it - 1))[2] : 0;
}

/// Appends the full canonical decomposition of `cp` to `out`.
inline void decompose(char32_t cp, std::u32string& out) {
    using namespace hangul;
    if (cp >= s_base && cp < s_base + s_count) {
        const char32_t s = cp - s_base;
        out.push_back(l_base + s / n_count);
        out.push_back(v_base + (s % n_count) / t_count);
        if (s % t_count != 0) out.push_back(t_base + s % t_count);
        return;
    }
    if (cp >= 0xC0) {
        const auto& t = ucd::canonical_decompositions;
        const auto it = std::lower_bound(std::begin(t), std::end(t), cp,
                                         [](const std::uint32_t(&r)[4], char32_t c) { return r[0] < c; });
        if (it != std::end(t) && (*it)[0] == cp) {
            decompose((*it)[1], out);
            if ((*it)[2] != 0) decompose((*it)[2], out);
            return;
        }
    }
    out.push_back(cp);
}

/// The primary composite of `a` and `b`, or 0.
[[nodiscard]] inline char32_t compose_pair(char32_t a, char32_t b) {
    using namespace hangul;
    if (a >= l_base && a < l_base + l_count && b >= v_base && b < v_base + v_count)
        return s_base + ((a - l_base) * v_count + (b - v_base)) * t_count;
    if (a >= s_base && a < s_base + s_count && (a - s_base) % t_count == 0 && b > t_base && b < t_base + t_count)
        return a + (b - t_base);
    static const std::vector<std::pair<std::uint64_t, char32_t>> pairs = [] {
        std::vector<std::pair<std::uint64_t, char32_t>> v;
        for (const auto& r : ucd::canonical_decompositions)
            if (r[3] != 0) v.emplace_back((std::uint64_t{r[1]} << 32) | r[2], r[0]);
        std::sort(v.begin(), v.end());
        return v;
    }();
    const std::uint64_t key = (std::uint64_t{a} << 32) | b;
    const auto it = std::lower_bound(pairs.begin(), pairs.end(), key,
                                      [](const auto& p, std::uint64_t k) { return p.first < k; });
    return it != pairs.end() && it->first == key ? it->second : 0;
}

/// Normalization Form C of a code point sequence.
[[nodiscard]] inline std::u32string nfc(std::u32string_view in) {
    std::u32string d;
    d.reserve(in.size() + 8);
    for (const char32_t cp : in) decompose(cp, d);
    // Canonical ordering: a stable sort of every run of non-starters by combining class.
    for (std::size_t i = 0; i < d.size();) {
        if (combining_class(d[i]) == 0) {
            ++i;
            continue;
        }
        std::size_t j = i;
        while (j < d.size() && combining_class(d[j]) != 0) ++j;
        std::stable_sort(d.begin() + static_cast<std::ptrdiff_t>(i), d.begin() + static_cast<std::ptrdiff_t>(j),
                         [](char32_t x, char32_t y) { return combining_class(x) < combining_class(y); });
        i = j;
    }
    // Canonical composition.
    std::u32string out;
    out.reserve(d.size());
    std::size_t starter = std::u32string::npos;
    unsigned last_class = 0;  // class of the last character kept after the starter
    for (const char32_t c : d) {
        const unsigned cc = combining_class(c);
        if (starter != std::u32string::npos) {
            const bool adjacent = out.size() == starter + 1;
            if (adjacent || (last_class != 0 && last_class < cc)) {
                if (const char32_t p = compose_pair(out[starter], c); p != 0) {
                    out[starter] = p;
                    continue;
                }
            }
        }
        if (cc == 0) starter = out.size();
        last_class = cc;
        out.push_back(c);
    }
    return out;
}

/// NFC of UTF-8 text (which must be valid UTF-8).
[[nodiscard]] inline std::string nfc_utf8(std::string_view s) {
    // Below U+0300 every character is its own NFC and composes with nothing before it.
    if (std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0xCC; }))
        return std::string(s);
    return encode_utf8(nfc(decode_utf8(s)));
}

}  // namespace dlm::io::detail
