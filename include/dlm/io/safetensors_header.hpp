// dlm/io/safetensors_header.hpp — parse and validate the header of one .safetensors file.
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON, then the data area. The JSON
// object maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative
// to the data area), plus an optional "__metadata__" object of strings. Everything is checked before
// use; every error names the file and, where there is one, the tensor.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../core/error.hpp"
#include "dtype.hpp"
#include "json_util.hpp"

namespace dlm::io {

/// One tensor of a checkpoint. `bytes` views the mapped file and lives as long as the checkpoint.
struct tensor_info {
    std::string name;
    dtype type = dtype::f32;
    std::vector<std::int64_t> shape;
    std::span<const std::byte> bytes;
    std::string file;  ///< the .safetensors file holding it
};

/// Largest header accepted (the limit the reference safetensors implementation uses).
inline constexpr std::uint64_t max_safetensors_header_bytes = 100'000'000;

/// "[2, 3]": a shape as error messages print it.
[[nodiscard]] inline std::string shape_string(std::span<const std::int64_t> shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

/// Number of elements, or nullopt if a dimension is negative or the product overflows int64.
[[nodiscard]] inline std::optional<std::int64_t> element_count(std::span<const std::int64_t> shape) {
    if (std::any_of(shape.begin(), shape.end(), [](std::int64_t d) { return d < 0; })) return std::nullopt;
    if (std::find(shape.begin(), shape.end(), std::int64_t{0}) != shape.end()) return 0;
    std::int64_t n = 1;
    for (const std::int64_t d : shape) {
        if (n > std::numeric_limits<std::int64_t>::max() / d) return std::nullopt;
        n *= d;
    }
    return n;
}


namespace detail {

/// One header entry, checked: its dtype, shape and byte range inside `data` (the area after the header).
[[nodiscard]] inline tensor_info parse_safetensors_entry(const std::string& name, const nlohmann::json& entry, std::span<const std::byte> data,
                                                         const std::string& path) {
    const auto fail = [&](const std::string& why) { return tensor_error(path, name, why); };
    if (!entry.is_object()) throw fail("header entry is a " + detail::json_kind(entry) + ", not an object");
    for (const char* key : {"dtype", "shape", "data_offsets"})
        if (!entry.contains(key)) throw fail(std::string("header entry has no '") + key + "'");

    const auto& dtype_json = entry.at("dtype");
    if (!dtype_json.is_string()) throw fail("'dtype' is a " + detail::json_kind(dtype_json) + ", not a string");
    const auto type = parse_dtype(dtype_json.get<std::string>());
    if (!type) throw fail("dtype '" + dtype_json.get<std::string>() + "' is not supported (dlm reads F32, F16 and BF16)");

    const auto& shape_json = entry.at("shape");
    if (!shape_json.is_array()) throw fail("'shape' is a " + detail::json_kind(shape_json) + ", not an array");
    std::vector<std::int64_t> shape;
    for (const auto& d : shape_json) {
        const auto v = detail::json_int64(d);
        if (!v) throw fail("'shape' " + detail::json_quote(shape_json) + " holds something other than an integer dimension");
        shape.push_back(*v);
    }
    if (std::any_of(shape.begin(), shape.end(), [](std::int64_t d) { return d < 0; }))
        throw fail("shape " + shape_string(shape) + " has a negative dimension");
    const auto count = element_count(shape);
    const auto elem = static_cast<std::int64_t>(dtype_size(*type));
    if (!count || *count > std::numeric_limits<std::int64_t>::max() / elem)
        throw fail("shape " + shape_string(shape) + " overflows: more bytes than a 64-bit size can count");
    const std::int64_t nbytes = *count * elem;

    const auto& offsets_json = entry.at("data_offsets");
    if (!offsets_json.is_array() || offsets_json.size() != 2)
        throw fail("'data_offsets' " + detail::json_quote(offsets_json) + " is not a pair [begin, end]");
    const auto begin = detail::json_int64(offsets_json[0]);
    const auto end = detail::json_int64(offsets_json[1]);
    if (!begin || !end || *begin < 0 || *end < 0)
        throw fail("'data_offsets' " + detail::json_quote(offsets_json) + " are not two non-negative integers");
    const std::string range = "data_offsets [" + std::to_string(*begin) + ", " + std::to_string(*end) + "]";
    if (*begin > *end) throw fail(range + ": begin is after end");
    if (static_cast<std::uint64_t>(*end) > data.size())
        throw fail(range + " run past the data area, which holds " + std::to_string(data.size()) + " bytes");
    if (*end - *begin != nbytes)
        throw fail(range + " hold " + std::to_string(*end - *begin) + " bytes, but shape " + shape_string(shape) +
                   " of " + std::string(dtype_name(*type)) + " needs " + std::to_string(nbytes));
    return {name, *type, std::move(shape), data.subspan(static_cast<std::size_t>(*begin), static_cast<std::size_t>(nbytes)), path};
}

/// Throws tensor_error for two tensors whose bytes overlap: the non-empty extents sorted by start
/// must each begin at or after the previous end (gaps are allowed: the format does not forbid padding).
inline void check_no_overlap(const std::vector<tensor_info>& tensors, std::span<const std::byte> data, const std::string& path) {
    std::vector<const tensor_info*> by_start;
    for (const auto& t : tensors)
        if (!t.bytes.empty()) by_start.push_back(&t);
    std::sort(by_start.begin(), by_start.end(),
              [](const tensor_info* a, const tensor_info* b) { return a->bytes.data() < b->bytes.data(); });
    const auto offset = [&](const std::byte* p) { return std::to_string(p - data.data()); };
    for (std::size_t i = 1; i < by_start.size(); ++i) {
        const tensor_info& prev = *by_start[i - 1];
        const tensor_info& cur = *by_start[i];
        if (prev.bytes.data() + prev.bytes.size() > cur.bytes.data())
            throw tensor_error(path, cur.name,
                               "bytes [" + offset(cur.bytes.data()) + ", " + offset(cur.bytes.data() + cur.bytes.size()) +
                                   ") overlap tensor '" + prev.name + "' at [" + offset(prev.bytes.data()) + ", " +
                                   offset(prev.bytes.data() + prev.bytes.size()) + ")");
    }
}

}  // namespace detail

/// Parses and validates the header of a safetensors file whose whole content is `file`. The returned
/// tensors' `bytes` view `file`; `path` is the name used in errors and stored in `tensor_info::file`.
/// Exposed for tests and fuzzing; `checkpoint::open` is the usual entry point.
[[nodiscard]] inline std::vector<tensor_info> parse_safetensors(std::span<const std::byte> file, const std::string& path) {
    if (file.size() < 8)
        throw file_error(path, "file is " + std::to_string(file.size()) +
                                   " bytes; a safetensors file starts with an 8-byte header length");
    std::uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<std::uint8_t>(file[i]);
    if (header_len > max_safetensors_header_bytes)
        throw file_error(path, "header length " + std::to_string(header_len) + " bytes exceeds the limit of " +
                                   std::to_string(max_safetensors_header_bytes) + " (not a safetensors file?)");
    if (header_len > file.size() - 8)
        throw file_error(path, "header length " + std::to_string(header_len) + " bytes runs past the end of the " +
                                   std::to_string(file.size()) + "-byte file");
    const std::string_view text(reinterpret_cast<const char*>(file.data() + 8), static_cast<std::size_t>(header_len));
    const nlohmann::json header = detail::parse_json_strict(text, path, "header");
    if (!header.is_object()) throw file_error(path, "header is a JSON " + detail::json_kind(header) + ", not an object");

    const std::span<const std::byte> data = file.subspan(8 + static_cast<std::size_t>(header_len));
    std::vector<tensor_info> tensors;
    tensors.reserve(header.size());
    for (const auto& item : header.items()) {
        const std::string& name = item.key();
        const nlohmann::json& entry = item.value();
        if (name == "__metadata__") {
            if (!entry.is_object()) throw file_error(path, "'__metadata__' is a " + detail::json_kind(entry) + ", not an object");
            for (const auto& [key, value] : entry.items())
                if (!value.is_string()) throw file_error(path, "'__metadata__' entry '" + key + "' is not a string");
            continue;
        }
        tensors.push_back(detail::parse_safetensors_entry(name, entry, data, path));
    }
    detail::check_no_overlap(tensors, data, path);
    return tensors;
}

}  // namespace dlm::io
