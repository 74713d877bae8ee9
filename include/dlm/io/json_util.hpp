// dlm/io/json_util.hpp — the small JSON helpers the loaders share: strict parsing, exact integers,
// reading a whole text file (of a bounded size). Every error names the file.
#pragma once

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "../core/error.hpp"
#include "file_paths.hpp"

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

/// A JSON value as an error message quotes it: compact, and cut after 60 characters. Strings that
/// are not UTF-8 (a GGUF vocabulary's bytes go into JSON unchecked) are quoted with U+FFFD in place
/// of their bad bytes rather than failing inside the error path.
[[nodiscard]] inline std::string json_quote(const nlohmann::json& v) {
    std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (s.size() > 60) s = s.substr(0, 57) + "...";
    return s;
}

/// The first key that appears twice within one object of `text` (already known to be valid JSON),
/// or "" if none does. Slow path: used only to name the key once a duplicate is known to exist.
[[nodiscard]] inline std::string first_duplicate_key(std::string_view text) {
    std::vector<std::unordered_set<std::string>> open_objects;  // keys seen in each object being parsed
    std::string duplicate;
    const nlohmann::json::parser_callback_t on_event = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        using ev = nlohmann::json::parse_event_t;
        if (event == ev::object_start) {
            open_objects.emplace_back();
        } else if (event == ev::object_end) {
            open_objects.pop_back();
        } else if (event == ev::key && !open_objects.back().insert(parsed.get<std::string>()).second && duplicate.empty()) {
            duplicate = parsed.get<std::string>();
        }
        return true;
    };
    const nlohmann::json parsed = nlohmann::json::parse(text.begin(), text.end(), on_event);
    return duplicate;
}

/// The deepest nesting of arrays and objects parse_json_strict accepts. The files dlm reads nest a
/// few levels (a tokenizer.json about six); a document nested tens of thousands deep would overflow
/// the stack of every recursive walk over it (quoting a value in an error message, a Sequence of
/// pre-tokenizers) and is refused as it is parsed.
inline constexpr int max_json_depth = 128;

/// Parses JSON text, refusing a key repeated within one object, at any depth (the default parser
/// silently keeps the last one), and nesting deeper than max_json_depth. `what` names the document
/// in errors ("header", "config"). Throws file_error naming `source`.
[[nodiscard]] inline nlohmann::json parse_json_strict(std::string_view text, const std::string& source, const char* what) {
    // Count the keys each object was written with; an object that ends up smaller held a key twice.
    std::vector<std::size_t> key_counts;
    bool has_duplicate = false;
    const nlohmann::json::parser_callback_t on_event = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        using ev = nlohmann::json::parse_event_t;
        if ((event == ev::object_start || event == ev::array_start) && depth >= max_json_depth)
            throw file_error(source, std::string(what) + " nests arrays and objects more than " + std::to_string(max_json_depth) +
                                         " deep, which no file dlm reads does");
        if (event == ev::object_start) {
            key_counts.push_back(0);
        } else if (event == ev::key) {
            ++key_counts.back();
        } else if (event == ev::object_end) {
            has_duplicate = has_duplicate || key_counts.back() != parsed.size();
            key_counts.pop_back();
        }
        return true;
    };
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text.begin(), text.end(), on_event);
    } catch (const nlohmann::json::exception& e) {
        throw file_error(source, std::string(what) + " is not valid JSON: " + e.what());
    }
    if (has_duplicate)
        throw file_error(source, std::string(what) + " names key '" + first_duplicate_key(text) + "' twice in one object");
    return j;
}

/// The largest text file read_text_file reads unless told otherwise: 256 MiB. The largest files dlm
/// reads as text are tokenizer.json files (a vocabulary of a few hundred thousand tokens and their
/// merges), far below it; a config.json of hundreds of megabytes is a mistake, and was read whole
/// (530 MB for a sparse 512 MiB file) before its JSON was refused.
inline constexpr std::uintmax_t max_text_file_bytes = std::uintmax_t{256} << 20;

/// "268435456 bytes" as an error message writes a size: in MiB when it is a whole number of them.
[[nodiscard]] inline std::string byte_count(std::uintmax_t bytes) {
    constexpr std::uintmax_t mib = std::uintmax_t{1} << 20;
    return bytes != 0 && bytes % mib == 0 ? std::to_string(bytes / mib) + " MiB" : std::to_string(bytes) + " bytes";
}

/// file_error naming `path`: it holds `bytes` (or more), past `max_bytes`.
[[noreturn]] inline void throw_too_large(const std::filesystem::path& path, std::uintmax_t bytes, std::uintmax_t max_bytes, bool at_least) {
    throw file_error(path.string(), "is " + std::string(at_least ? "at least " : "") + std::to_string(bytes) +
                                        " bytes; text files dlm reads are at most " + byte_count(max_bytes));
}

/// The whole content of a text file of at most `max_bytes`. file_error naming the file if it is not
/// a readable regular file (why_not_a_regular_file says why: checked before it is opened, so a FIFO
/// is never waited on), is larger (checked before anything is allocated), or cannot be opened or read.
[[nodiscard]] inline std::string read_text_file(const std::filesystem::path& path, std::uintmax_t max_bytes = max_text_file_bytes) {
    require_regular_file(path);
    std::error_code ec;
    const std::uintmax_t size = std::filesystem::file_size(path, ec);
    if (ec) throw file_error(path.string(), "cannot read its size: " + ec.message());
    if (size > max_bytes) throw_too_large(path, size, max_bytes, false);
    errno = 0;
    std::ifstream in(path, std::ios::binary);
    if (!in) throw file_error(path.string(), std::string("cannot open: ") + (errno != 0 ? std::strerror(errno) : "the stream did not say why"));
    std::string text;
    text.reserve(static_cast<std::size_t>(size));
    std::array<char, std::size_t{1} << 16> chunk{};
    while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0) {
        text.append(chunk.data(), static_cast<std::size_t>(in.gcount()));
        if (text.size() > max_bytes) throw_too_large(path, text.size(), max_bytes, true);  // it grew since file_size
    }
    if (in.bad()) throw file_error(path.string(), std::string("cannot read: ") + (errno != 0 ? std::strerror(errno) : "the stream did not say why"));
    return text;
}

}  // namespace dlm::io::detail
