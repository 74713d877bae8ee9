// dlm/io/json_util.hpp — the small JSON helpers the loaders share: strict parsing, exact integers,
// reading a whole text file. Every error names the file.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "../core/error.hpp"

namespace dlm::io::detail {

/// The value of a JSON integer that fits in int64, or nullopt (not an integer, or too large).
/// Floating-point numbers are refused even when integral (4096.0): a size written as a float is a
/// sign of a broken file.
[[nodiscard]] inline std::optional<std::int64_t> json_int64(const nlohmann::json& v) {
    if (v.is_number_unsigned()) {
        const auto u = v.get<std::uint64_t>();
        if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
        return static_cast<std::int64_t>(u);
    }
    if (v.is_number_integer()) return v.get<std::int64_t>();
    return std::nullopt;
}

/// "string", "number", ...: a JSON value's kind, for error messages.
[[nodiscard]] inline std::string json_kind(const nlohmann::json& v) { return v.type_name(); }

/// A JSON value as an error message quotes it: compact, and cut after 60 characters.
[[nodiscard]] inline std::string json_quote(const nlohmann::json& v) {
    std::string s = v.dump();
    if (s.size() > 60) s = s.substr(0, 57) + "...";
    return s;
}

/// Parses JSON text, refusing duplicate keys in the top-level object (the default parser silently
/// keeps the last one). `what` names the document in errors ("header", "config"). Throws file_error
/// naming `source`.
[[nodiscard]] inline nlohmann::json parse_json_strict(std::string_view text, const std::string& source, const char* what) {
    std::vector<std::string> keys;
    const nlohmann::json::parser_callback_t on_event = [&keys](int depth, nlohmann::json::parse_event_t event,
                                                               nlohmann::json& parsed) {
        if (event == nlohmann::json::parse_event_t::key && depth == 1) keys.push_back(parsed.get<std::string>());
        return true;
    };
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text.begin(), text.end(), on_event);
    } catch (const nlohmann::json::exception& e) {
        throw file_error(source, std::string(what) + " is not valid JSON: " + e.what());
    }
    std::sort(keys.begin(), keys.end());
    if (const auto it = std::adjacent_find(keys.begin(), keys.end()); it != keys.end())
        throw file_error(source, std::string(what) + " names key '" + *it + "' twice");
    return j;
}

/// The whole content of a text file; file_error if it cannot be read.
[[nodiscard]] inline std::string read_text_file(const std::filesystem::path& path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) throw file_error(path.string(), "no such file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw file_error(path.string(), "cannot open");
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) throw file_error(path.string(), "cannot read");
    return std::move(ss).str();
}

}  // namespace dlm::io::detail
