// cli/score.hpp — dlm-eval's problem sets and scoring: JSONL problems, the prompt made of
// a question, and the final number after "####", extracted exactly as tools/score.py does.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include <dlm/core/error.hpp>
#include <dlm/io/json_util.hpp>
#include <dlm/io/unicode.hpp>

#include "python_unicode.hpp"

namespace dlm::cli {

/// One problem of a set: the question, the reference final number (a string as written in the file; a
/// JSON number in its canonical form, normalize_number), and the line of the file it was read from.
struct problem {
    std::string question;
    std::string final;
    std::size_t line = 0;
};

namespace detail {

/// Python's repr of a float that is not integral: the shortest digits that read back as `v`, written
/// in fixed notation when its decimal exponent is in [-4, 16), else as d.ddde-XX (two exponent digits
/// at least): repr(0.0001) is "0.0001", repr(1e-05) "1e-05".
[[nodiscard]] inline std::string python_float_repr(double v) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);  // shortest: "-1.25e-05"
    const std::string_view sci(buf, static_cast<std::size_t>(r.ptr - buf));
    const std::size_t e = sci.find('e');
    const bool negative = sci.front() == '-';
    std::string digits;
    for (const char c : sci.substr(negative, e - negative))
        if (c != '.') digits += c;
    const int exponent = std::stoi(std::string(sci.substr(e + 1)));
    std::string out = negative ? "-" : "";
    if (exponent >= -4 && exponent < 16) {
        if (exponent < 0) return out + "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
        if (digits.size() <= static_cast<std::size_t>(exponent) + 1) digits.resize(static_cast<std::size_t>(exponent) + 2, '0');
        return out + digits.substr(0, static_cast<std::size_t>(exponent) + 1) + "." + digits.substr(static_cast<std::size_t>(exponent) + 1);
    }
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    const int magnitude = exponent < 0 ? -exponent : exponent;
    return out + (exponent < 0 ? "e-" : "e+") + (magnitude < 10 ? "0" : "") + std::to_string(magnitude);
}

}  // namespace detail

/// A number as tools/score.py normalizes it (commas dropped; an integral value without ".0", else the
/// shortest form that reads back as the same double, as Python's str(float)), or nothing when it is
/// not a finite number. Both an answer's number after "####" and a JSON number "final" go through it.
[[nodiscard]] inline std::optional<std::string> normalize_number(std::string_view number) {
    std::string s;
    for (char c : number)
        if (c != ',') s += c;
    double v = 0;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || p != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
    char buf[400];
    if (v == std::floor(v)) {  // str(int(value)): every digit of the integral double, never an exponent
        if (v == 0) return "0";
        const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, 0);
        return std::string(buf, r.ptr);
    }
    return detail::python_float_repr(v);
}

/// Reads a JSONL set (one object per line with "question" and "final"; other keys such as "answer"
/// are ignored; blank lines are skipped). A "final" that is a JSON number is held in its canonical
/// form (normalize_number: 40 and 40.0 are "40"), as tools/score.py compares it. Throws
/// dlm::file_error naming the file, line and key.
[[nodiscard]] inline std::vector<problem> read_problems(const std::filesystem::path& path) {
    std::istringstream lines(io::detail::read_text_file(path));
    std::vector<problem> out;
    std::size_t n = 0;
    for (std::string line; std::getline(lines, line);) {
        ++n;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const std::string where = "line " + std::to_string(n);
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(line);
        } catch (const nlohmann::json::exception& e) {  // the parser's reason: where and what it could not read
            const std::string_view why = e.what();
            throw file_error(path.string(), where + ": expected a JSON object, but it is not JSON: " +
                                                std::string(why.substr(why.find(']') == std::string_view::npos ? 0 : why.find(']') + 2)));
        }
        if (!j.is_object()) throw file_error(path.string(), where + ": expected a JSON object, got " + io::detail::json_kind(j));
        if (!j.contains("question") || !j["question"].is_string())
            throw file_error(path.string(), where + ": key 'question': expected a string");
        if (!j.contains("final") || !(j["final"].is_string() || j["final"].is_number()))
            throw file_error(path.string(), where + ": key 'final': expected a string or a number");
        const std::string final = j["final"].is_string() ? j["final"].get<std::string>()
                                                          : normalize_number(j["final"].dump()).value_or(j["final"].dump());
        out.push_back({j["question"].get<std::string>(), final, n});
    }
    return out;
}

/// The prompt of a question: `format` with every "{question}" replaced by it.
[[nodiscard]] inline std::string format_prompt(std::string_view format, std::string_view question) {
    std::string out;
    constexpr std::string_view key = "{question}";
    for (std::size_t i = 0; i < format.size();) {
        if (format.substr(i, key.size()) == key) {
            out += question;
            i += key.size();
        } else {
            out += format[i++];
        }
    }
    return out;
}

namespace detail {

/// The value of a Python decimal digit (str.isdecimal: Unicode's Nd, ٣ and ３ as 3), or -1.
[[nodiscard]] inline int python_digit(char32_t c) {
    const auto* zeros = python_unicode::decimal_zeros;
    const auto* end = zeros + std::size(python_unicode::decimal_zeros);
    const auto* z = std::upper_bound(zeros, end, static_cast<std::uint32_t>(c));
    return z != zeros && c - *(z - 1) < 10 ? static_cast<int>(c - *(z - 1)) : -1;
}

/// Whether Python's str.isspace is true for `c` (what the re module's \s matches).
[[nodiscard]] inline bool python_space(char32_t c) {
    return std::binary_search(std::begin(python_unicode::spaces), std::end(python_unicode::spaces), static_cast<std::uint32_t>(c));
}

}  // namespace detail

/// The number after the last "####" in `text`, normalized as tools/score.py normalizes it (the
/// regex ####\s*(-?[\d,]*\.?\d+) over code points, \d and \s as Python reads them: any Unicode
/// decimal digit and whitespace; float() then reads the digits: ٣ is 3; commas removed; an integral
/// value without ".0"), or nothing. Bytes that are not UTF-8 read as U+FFFD, as score.py reads
/// --predictions.
[[nodiscard]] inline std::optional<std::string> extract_final(std::string_view text) {
    const std::u32string cps = io::detail::decode_utf8(text);
    const auto digit = [&](std::size_t i) { return i < cps.size() && detail::python_digit(cps[i]) >= 0; };
    std::optional<std::string> found;
    for (std::size_t at = 0; at + 4 <= cps.size(); ++at) {
        if (cps.compare(at, 4, U"####") != 0) continue;
        std::size_t i = at + 4;
        while (i < cps.size() && detail::python_space(cps[i])) ++i;
        std::string m;  // the match, its digits as ASCII (float()'s reading)
        if (i < cps.size() && cps[i] == U'-') m += '-', ++i;
        const std::size_t body = m.size();
        for (; i < cps.size() && (digit(i) || cps[i] == U','); ++i) m += cps[i] == U',' ? ',' : static_cast<char>('0' + detail::python_digit(cps[i]));
        if (i < cps.size() && cps[i] == U'.' && digit(i + 1))
            for (m += '.', ++i; digit(i); ++i) m += static_cast<char>('0' + detail::python_digit(cps[i]));
        while (m.size() > body && (m.back() < '0' || m.back() > '9')) m.pop_back();  // the match ends in a digit
        if (m.size() > body) found = m;
        // A match holds no '#', so the next "####" starts after it or inside this one's hashes (#####5).
    }
    if (!found) return std::nullopt;
    return normalize_number(*found);
}

}  // namespace dlm::cli
