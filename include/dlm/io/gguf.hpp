// dlm/io/gguf.hpp — a GGUF file (llama.cpp's model format), memory-mapped and validated.
//
// Layout (GGUF v3; v2 is the same layout): "GGUF", u32 version, u64 tensor count, u64 key count;
// the keys (string key, u32 value type, value; arrays: u32 element type, u64 count, elements); the
// tensor infos (string name, u32 n_dims, n_dims × u64 ne (ne[0] is the row length), u32 ggml type,
// u64 offset into the data section); padding to general.alignment (default 32); the data section.
// Strings are u64 length + bytes, all integers little-endian.
//
// Everything is checked before it is used or allocated: the magic and version, counts against the
// bytes left, every string and array length against the file size, the value and tensor types,
// general.alignment (a power of two), every tensor's shape against its type's block size, its data
// offset (aligned, inside the file, not overlapping another tensor). Errors are dlm::file_error
// naming the file and the key (metadata), dlm::tensor_error naming the tensor.
#pragma once

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "../core/error.hpp"
#include "gguf_types.hpp"
#include "mapped_file.hpp"

namespace dlm::io {

/// Metadata value types (gguf_metadata_value_type).
enum class gguf_value_type : std::uint32_t { u8 = 0, i8, u16, i16, u32, i32, f32, boolean, string, array, u64, i64, f64 };

[[nodiscard]] constexpr std::string_view gguf_value_type_name(gguf_value_type t) noexcept {
    constexpr std::string_view names[] = {"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
                                          "bool",  "string", "array", "uint64", "int64", "float64"};
    const auto i = static_cast<std::uint32_t>(t);
    return i < std::size(names) ? names[i] : "unknown";
}

/// Bytes of one value of a fixed-size type; 0 for string and array.
[[nodiscard]] constexpr std::size_t gguf_value_size(gguf_value_type t) noexcept {
    switch (t) {
        case gguf_value_type::u8: case gguf_value_type::i8: case gguf_value_type::boolean: return 1;
        case gguf_value_type::u16: case gguf_value_type::i16: return 2;
        case gguf_value_type::u32: case gguf_value_type::i32: case gguf_value_type::f32: return 4;
        case gguf_value_type::u64: case gguf_value_type::i64: case gguf_value_type::f64: return 8;
        default: return 0;
    }
}

/// One metadata entry; its value is read on demand from the mapped bytes (`offset`: the value, or
/// for an array its first element).
struct gguf_kv {
    std::string key;
    gguf_value_type type = gguf_value_type::u8;
    gguf_value_type element_type = gguf_value_type::u8;  ///< arrays only
    std::uint64_t count = 1;                             ///< arrays: the element count
    std::size_t offset = 0;
};

/// One tensor. `shape` is ggml's order: shape[0] is the row length (a [out, in] Hugging Face
/// matrix is stored as {in, out}). `bytes` views the mapped file.
struct gguf_tensor {
    std::string name;
    gguf_type type = gguf_type::f32;
    std::vector<std::int64_t> shape;
    std::uint64_t offset = 0;  ///< from the start of the data section
    std::span<const std::byte> bytes;
    [[nodiscard]] std::int64_t cols() const noexcept { return shape[0]; }
    [[nodiscard]] std::int64_t rows() const noexcept {
        std::int64_t n = 1;
        for (std::size_t i = 1; i < shape.size(); ++i) n *= shape[i];
        return n;
    }
};

/// Largest GGUF string accepted (keys, names, single string values): the file size bounds every
/// length anyway; this bounds the allocation of one string.
inline constexpr std::uint64_t gguf_max_string_bytes = std::uint64_t{1} << 30;
/// ggml's GGML_MAX_NAME: tensor names are shorter than 64 bytes; GGML_MAX_DIMS is 4.
inline constexpr std::size_t gguf_max_tensor_name = 63;
inline constexpr std::uint32_t gguf_max_dims = 4;
inline constexpr std::uint32_t gguf_default_alignment = 32;

namespace detail {

/// Reads little-endian fields front to back, each checked against the bytes left.
class gguf_cursor {
public:
    gguf_cursor(std::span<const std::byte> b, const std::string& path) : b_(b), path_(path) {}
    [[nodiscard]] std::size_t pos() const noexcept { return pos_; }
    [[nodiscard]] std::size_t left() const noexcept { return b_.size() - pos_; }
    void need(std::uint64_t n, const std::string& what) const {
        if (n > left())
            throw file_error(path_, "truncated: " + what + " at byte " + std::to_string(pos_) + " needs " + std::to_string(n) +
                                        " bytes, the file has " + std::to_string(left()) + " left");
    }
    template <class T>
    T read(const std::string& what) {
        need(sizeof(T), what);
        const T v = load<T>(pos_);
        pos_ += sizeof(T);
        return v;
    }
    template <class T>
    [[nodiscard]] T load(std::size_t at) const noexcept {
        using U = std::conditional_t<sizeof(T) == 1, std::uint8_t, std::conditional_t<sizeof(T) == 2, std::uint16_t,
                                     std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>>;
        U u = 0;
        for (std::size_t i = 0; i < sizeof(T); ++i) u = static_cast<U>(u | static_cast<U>(static_cast<U>(b_[at + i]) << (8 * i)));
        return std::bit_cast<T>(u);
    }
    /// A string's bytes, without copying.
    std::string_view string(const std::string& what) {
        const auto n = read<std::uint64_t>(what + " length");
        if (n > gguf_max_string_bytes) throw file_error(path_, what + ": length " + std::to_string(n) + " exceeds dlm's limit of 1 GiB");
        need(n, what + " (" + std::to_string(n) + " bytes)");
        const std::string_view s(reinterpret_cast<const char*>(b_.data() + pos_), static_cast<std::size_t>(n));
        pos_ += static_cast<std::size_t>(n);
        return s;
    }
    void skip(std::uint64_t n, const std::string& what) {
        need(n, what);
        pos_ += static_cast<std::size_t>(n);
    }

private:
    std::span<const std::byte> b_;
    const std::string& path_;
    std::size_t pos_ = 0;
};

}  // namespace detail

/// A parsed GGUF header over bytes that outlive it (a mapped file, or a fuzzer's buffer).
class gguf_header {
public:
    /// Parses and validates `file`, the whole content of `path` (named in errors).
    [[nodiscard]] static gguf_header parse(std::span<const std::byte> file, std::string path) {
        gguf_header h;
        h.path_ = std::move(path);
        h.bytes_ = file;
        h.parse_all();
        return h;
    }

    [[nodiscard]] const std::string& path() const noexcept { return path_; }
    [[nodiscard]] std::uint32_t version() const noexcept { return version_; }
    [[nodiscard]] std::uint32_t alignment() const noexcept { return alignment_; }
    [[nodiscard]] std::size_t data_offset() const noexcept { return data_offset_; }
    [[nodiscard]] const std::vector<gguf_kv>& metadata() const noexcept { return kvs_; }
    [[nodiscard]] const std::vector<gguf_tensor>& tensors() const noexcept { return tensors_; }

    [[nodiscard]] const gguf_kv* find(std::string_view key) const {
        const auto it = kv_index_.find(std::string(key));
        return it == kv_index_.end() ? nullptr : &kvs_[it->second];
    }
    [[nodiscard]] bool has(std::string_view key) const { return find(key) != nullptr; }
    [[nodiscard]] const gguf_tensor* find_tensor(std::string_view name) const {
        const auto it = tensor_index_.find(std::string(name));
        return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
    }
    /// The tensor named `name`; tensor_error if the file has none.
    [[nodiscard]] const gguf_tensor& tensor(std::string_view name) const {
        if (const gguf_tensor* t = find_tensor(name)) return *t;
        throw tensor_error(path_, std::string(name), "missing from the file");
    }

    /// file_error naming `key`.
    [[noreturn]] void fail_key(std::string_view key, const std::string& why) const {
        throw file_error(path_, "key '" + std::string(key) + "': " + why);
    }
    /// The key's entry; file_error if it is absent.
    [[nodiscard]] const gguf_kv& required(std::string_view key) const {
        if (const gguf_kv* kv = find(key)) return *kv;
        fail_key(key, "missing (a required key)");
    }

    /// An integer key of any integer type, checked to fit `[lo, hi]`.
    [[nodiscard]] std::int64_t integer(std::string_view key, std::int64_t lo = 0, std::int64_t hi = std::numeric_limits<std::int32_t>::max()) const {
        const gguf_kv& kv = required(key);
        if (kv.type == gguf_value_type::array) fail_key(key, "expected an integer, found an array");
        const std::optional<std::int64_t> v = integer_at(kv.type, kv.offset);
        if (!v) fail_key(key, "expected an integer, found " + std::string(gguf_value_type_name(kv.type)));
        if (*v < lo || *v > hi) fail_key(key, std::to_string(*v) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
        return *v;
    }
    /// A float32 or float64 key, checked finite.
    [[nodiscard]] double number(std::string_view key) const {
        const gguf_kv& kv = required(key);
        double v = 0;
        if (kv.type == gguf_value_type::f32) v = cursor().load<float>(kv.offset);
        else if (kv.type == gguf_value_type::f64) v = cursor().load<double>(kv.offset);
        else fail_key(key, "expected a float, found " + std::string(gguf_value_type_name(kv.type)));
        if (!(v == v) || v == std::numeric_limits<double>::infinity() || v == -std::numeric_limits<double>::infinity())
            fail_key(key, "is not finite");
        return v;
    }
    [[nodiscard]] bool boolean(std::string_view key) const {
        const gguf_kv& kv = required(key);
        if (kv.type != gguf_value_type::boolean) fail_key(key, "expected a bool, found " + std::string(gguf_value_type_name(kv.type)));
        return bytes_[kv.offset] != std::byte{0};
    }
    [[nodiscard]] std::string_view string(std::string_view key) const {
        const gguf_kv& kv = required(key);
        if (kv.type != gguf_value_type::string) fail_key(key, "expected a string, found " + std::string(gguf_value_type_name(kv.type)));
        return string_at(kv.offset);
    }
    /// An array of strings (views of the mapped bytes).
    [[nodiscard]] std::vector<std::string_view> string_array(std::string_view key) const {
        const gguf_kv& kv = array_of(key, gguf_value_type::string);
        std::vector<std::string_view> out;
        out.reserve(static_cast<std::size_t>(kv.count));
        std::size_t at = kv.offset;
        for (std::uint64_t i = 0; i < kv.count; ++i) {
            out.push_back(string_at(at));
            at += 8 + out.back().size();
        }
        return out;
    }
    /// An array of integers of any integer element type.
    [[nodiscard]] std::vector<std::int64_t> integer_array(std::string_view key) const {
        const gguf_kv& kv = required(key);
        if (kv.type != gguf_value_type::array || !integer_at(kv.element_type, kv.offset, true))
            fail_key(key, "expected an array of integers");
        std::vector<std::int64_t> out(static_cast<std::size_t>(kv.count));
        const std::size_t w = gguf_value_size(kv.element_type);
        for (std::size_t i = 0; i < out.size(); ++i) out[i] = *integer_at(kv.element_type, kv.offset + i * w);
        return out;
    }
    /// An array of bools (llama.cpp's per-layer flags, e.g. attention.sliding_window_pattern).
    [[nodiscard]] std::vector<bool> boolean_array(std::string_view key) const {
        const gguf_kv& kv = array_of(key, gguf_value_type::boolean);
        std::vector<bool> out(static_cast<std::size_t>(kv.count));
        for (std::size_t i = 0; i < out.size(); ++i) out[i] = bytes_[kv.offset + i] != std::byte{0};
        return out;
    }
    /// A key's value type as a readable description ("array of float32").
    [[nodiscard]] std::string describe(const gguf_kv& kv) const {
        return kv.type == gguf_value_type::array ? "array of " + std::to_string(kv.count) + " " + std::string(gguf_value_type_name(kv.element_type))
                                                 : std::string(gguf_value_type_name(kv.type));
    }

private:
    [[nodiscard]] detail::gguf_cursor cursor() const { return detail::gguf_cursor(bytes_, path_); }
    [[nodiscard]] std::string_view string_at(std::size_t at) const {
        const auto n = cursor().load<std::uint64_t>(at);
        return {reinterpret_cast<const char*>(bytes_.data() + at + 8), static_cast<std::size_t>(n)};
    }
    /// The integer at `at` (validated during parse), or nullopt for a non-integer type.
    [[nodiscard]] std::optional<std::int64_t> integer_at(gguf_value_type t, std::size_t at, bool type_only = false) const {
        const detail::gguf_cursor c = cursor();
        switch (t) {
            case gguf_value_type::u8: return type_only ? 0 : std::int64_t{c.load<std::uint8_t>(at)};
            case gguf_value_type::i8: return type_only ? 0 : std::int64_t{c.load<std::int8_t>(at)};
            case gguf_value_type::u16: return type_only ? 0 : std::int64_t{c.load<std::uint16_t>(at)};
            case gguf_value_type::i16: return type_only ? 0 : std::int64_t{c.load<std::int16_t>(at)};
            case gguf_value_type::u32: return type_only ? 0 : std::int64_t{c.load<std::uint32_t>(at)};
            case gguf_value_type::i32: return type_only ? 0 : std::int64_t{c.load<std::int32_t>(at)};
            case gguf_value_type::i64: return type_only ? 0 : c.load<std::int64_t>(at);
            case gguf_value_type::u64: {
                if (type_only) return 0;
                const auto u = c.load<std::uint64_t>(at);
                return u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ? std::numeric_limits<std::int64_t>::max()
                                                                                                  : static_cast<std::int64_t>(u);
            }
            default: return std::nullopt;
        }
    }
    [[nodiscard]] const gguf_kv& array_of(std::string_view key, gguf_value_type element) const {
        const gguf_kv& kv = required(key);
        if (kv.type != gguf_value_type::array || kv.element_type != element)
            fail_key(key, "expected an array of " + std::string(gguf_value_type_name(element)) + ", found " + describe(kv));
        return kv;
    }

    void parse_all() {
        detail::gguf_cursor c(bytes_, path_);
        c.need(4, "the magic 'GGUF'");
        if (std::string_view(reinterpret_cast<const char*>(bytes_.data()), 4) != "GGUF")
            throw file_error(path_, "not a GGUF file: the first 4 bytes are not the magic 'GGUF'");
        c.skip(4, "the magic");
        version_ = c.read<std::uint32_t>("the version");
        if (version_ == 0x03000000u || version_ == 0x02000000u)
            throw file_error(path_, "a big-endian GGUF file (version " + std::to_string(version_ >> 24) + "); dlm reads little-endian GGUF");
        if (version_ != 3 && version_ != 2)
            throw file_error(path_, "GGUF version " + std::to_string(version_) + " is not supported; dlm reads versions 2 and 3 (the same layout)");
        const auto n_tensors = c.read<std::uint64_t>("the tensor count");
        const auto n_kv = c.read<std::uint64_t>("the metadata key count");
        // The smallest key takes 13 bytes (length, an empty name, a type, a u8); the smallest tensor info
        // 32 (length, name, n_dims, one dimension, type, offset): more than the bytes left could hold is
        // refused before anything is reserved.
        if (n_kv > c.left() / 13 || n_tensors > c.left() / 32 || n_kv * 13 + n_tensors * 32 > c.left())
            throw file_error(path_, "header claims " + std::to_string(n_kv) + " metadata keys and " + std::to_string(n_tensors) +
                                        " tensors; the " + std::to_string(c.left()) + " bytes after the header cannot hold them");
        kvs_.reserve(static_cast<std::size_t>(n_kv));
        for (std::uint64_t i = 0; i < n_kv; ++i) parse_kv(c, i);
        alignment_ = gguf_default_alignment;
        if (has("general.alignment")) {
            const gguf_kv& kv = *find("general.alignment");
            if (kv.type != gguf_value_type::u32) fail_key(kv.key, "expected uint32, found " + describe(kv));
            alignment_ = c.load<std::uint32_t>(kv.offset);
            if (alignment_ == 0 || !std::has_single_bit(alignment_)) fail_key(kv.key, std::to_string(alignment_) + " is not a power of two");
        }
        tensors_.reserve(static_cast<std::size_t>(n_tensors));
        for (std::uint64_t i = 0; i < n_tensors; ++i) parse_tensor_info(c, i);
        data_offset_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
        if (!tensors_.empty() && data_offset_ > bytes_.size())
            throw file_error(path_, "truncated: the data section would start at byte " + std::to_string(data_offset_) + ", past the end of the " +
                                        std::to_string(bytes_.size()) + "-byte file");
        place_tensors();
    }

    void parse_kv(detail::gguf_cursor& c, std::uint64_t i) {
        const std::string where = "metadata key #" + std::to_string(i);
        gguf_kv kv;
        kv.key = std::string(c.string(where + "'s name"));
        if (kv_index_.contains(kv.key)) fail_key(kv.key, "appears twice");
        const auto type = c.read<std::uint32_t>("key '" + kv.key + "''s value type");
        if (type > static_cast<std::uint32_t>(gguf_value_type::f64)) fail_key(kv.key, "unknown value type " + std::to_string(type));
        kv.type = static_cast<gguf_value_type>(type);
        if (kv.type == gguf_value_type::array) {
            const auto et = c.read<std::uint32_t>("key '" + kv.key + "''s element type");
            if (et > static_cast<std::uint32_t>(gguf_value_type::f64)) fail_key(kv.key, "unknown array element type " + std::to_string(et));
            kv.element_type = static_cast<gguf_value_type>(et);
            if (kv.element_type == gguf_value_type::array) fail_key(kv.key, "an array of arrays (dlm reads flat arrays only)");
            kv.count = c.read<std::uint64_t>("key '" + kv.key + "''s element count");
            kv.offset = c.pos();
            const std::size_t w = gguf_value_size(kv.element_type);
            const std::uint64_t least = w == 0 ? 8 : w;  // a string element takes at least its length field
            if (kv.count > c.left() / least)
                fail_key(kv.key, "array of " + std::to_string(kv.count) + " " + std::string(gguf_value_type_name(kv.element_type)) +
                                     " runs past the end of the file (" + std::to_string(c.left()) + " bytes left)");
            if (w != 0) c.skip(kv.count * w, "key '" + kv.key + "''s elements");
            else
                for (std::uint64_t e = 0; e < kv.count; ++e) (void)c.string("key '" + kv.key + "' element " + std::to_string(e));
        } else {
            kv.offset = c.pos();
            if (kv.type == gguf_value_type::string) (void)c.string("key '" + kv.key + "''s value");
            else c.skip(gguf_value_size(kv.type), "key '" + kv.key + "''s value");
            if (kv.type == gguf_value_type::boolean && static_cast<std::uint8_t>(bytes_[kv.offset]) > 1)
                fail_key(kv.key, "a bool stored as " + std::to_string(static_cast<unsigned>(bytes_[kv.offset])) + " (0 or 1 expected)");
        }
        kv_index_.emplace(kv.key, kvs_.size());
        kvs_.push_back(std::move(kv));
    }

    void parse_tensor_info(detail::gguf_cursor& c, std::uint64_t i) {
        gguf_tensor t;
        t.name = std::string(c.string("tensor info #" + std::to_string(i) + "'s name"));
        const auto fail = [&](const std::string& why) -> void { throw tensor_error(path_, t.name, why); };
        if (t.name.size() > gguf_max_tensor_name) fail("name is " + std::to_string(t.name.size()) + " bytes; ggml allows 63");
        if (tensor_index_.contains(t.name)) fail("appears twice");
        const auto dims = c.read<std::uint32_t>("tensor '" + t.name + "''s dimension count");
        if (dims == 0 || dims > gguf_max_dims) fail(std::to_string(dims) + " dimensions; GGUF tensors have 1 to 4");
        std::int64_t elements = 1;
        for (std::uint32_t d = 0; d < dims; ++d) {
            const auto ne = c.read<std::uint64_t>("tensor '" + t.name + "''s shape");
            if (ne == 0 || ne > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max() / elements))
                fail("dimension " + std::to_string(d) + " is " + std::to_string(ne) + (ne == 0 ? " (empty)" : ": the element count overflows"));
            t.shape.push_back(static_cast<std::int64_t>(ne));
            elements *= static_cast<std::int64_t>(ne);
        }
        const auto type = c.read<std::uint32_t>("tensor '" + t.name + "''s type");
        const std::optional<gguf_type_traits> tr = gguf_traits(type);
        if (!tr) fail("unknown ggml type id " + std::to_string(type));
        t.type = static_cast<gguf_type>(type);
        if (t.shape[0] % tr->elements != 0)
            fail("row length " + std::to_string(t.shape[0]) + " is not a multiple of " + std::string(tr->name) + "'s block of " +
                 std::to_string(tr->elements) + " elements");
        t.offset = c.read<std::uint64_t>("tensor '" + t.name + "''s data offset");
        if (t.offset % alignment_ != 0)
            fail("data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " + std::to_string(alignment_));
        const auto blocks = static_cast<std::uint64_t>(elements / tr->elements);
        if (blocks > std::numeric_limits<std::uint64_t>::max() / tr->bytes)
            fail(std::to_string(elements) + " elements of " + std::string(tr->name) + ": the byte count overflows");
        const std::uint64_t size = blocks * tr->bytes;
        t.bytes = std::span<const std::byte>(static_cast<const std::byte*>(nullptr), 0);
        sizes_.push_back(size);
        tensor_index_.emplace(t.name, tensors_.size());
        tensors_.push_back(std::move(t));
    }

    /// Every tensor's bytes inside the data section, no two overlapping.
    void place_tensors() {
        const std::uint64_t room = bytes_.size() - std::min<std::uint64_t>(data_offset_, bytes_.size());
        std::vector<std::size_t> order(tensors_.size());
        for (std::size_t i = 0; i < order.size(); ++i) {
            order[i] = i;
            gguf_tensor& t = tensors_[i];
            if (t.offset > room || sizes_[i] > room - t.offset)
                throw tensor_error(path_, t.name, "data [" + std::to_string(t.offset) + ", " + std::to_string(t.offset) + " + " +
                                                      std::to_string(sizes_[i]) + ") runs past the end of the data section (" +
                                                      std::to_string(room) + " bytes)");
            t.bytes = bytes_.subspan(data_offset_ + static_cast<std::size_t>(t.offset), static_cast<std::size_t>(sizes_[i]));
        }
        std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return tensors_[a].offset < tensors_[b].offset; });
        for (std::size_t k = 1; k < order.size(); ++k) {
            const gguf_tensor &prev = tensors_[order[k - 1]], &t = tensors_[order[k]];
            if (t.offset < prev.offset + sizes_[order[k - 1]])
                throw tensor_error(path_, t.name, "data at offset " + std::to_string(t.offset) + " overlaps tensor '" + prev.name + "' [" +
                                                      std::to_string(prev.offset) + ", " + std::to_string(prev.offset + sizes_[order[k - 1]]) + ")");
        }
        sizes_.clear();
    }

    std::string path_;
    std::span<const std::byte> bytes_;
    std::uint32_t version_ = 0, alignment_ = gguf_default_alignment;
    std::size_t data_offset_ = 0;
    std::vector<gguf_kv> kvs_;
    std::vector<gguf_tensor> tensors_;
    std::vector<std::uint64_t> sizes_;
    std::unordered_map<std::string, std::size_t> kv_index_, tensor_index_;
};

/// A GGUF file, mapped for the object's lifetime, and its validated header.
class gguf_file {
public:
    /// Maps and validates `path`. Throws file_error / tensor_error naming the file, key or tensor.
    [[nodiscard]] static gguf_file open(const std::filesystem::path& path) {
        gguf_file f;
        f.file_ = mapped_file(path);
        f.header_ = gguf_header::parse(f.file_.bytes(), path.string());
        return f;
    }
    [[nodiscard]] const gguf_header& header() const noexcept { return header_; }
    [[nodiscard]] const std::string& path() const noexcept { return header_.path(); }
    /// Drops a part of the mapping from the resident set (mapped_file::release).
    void release(std::span<const std::byte> range) const noexcept { file_.release(range); }

private:
    mapped_file file_;
    gguf_header header_;
};

/// Whether `path` names a GGUF file by its extension (".gguf", any case).
[[nodiscard]] inline bool is_gguf_path(const std::filesystem::path& path) {
    std::string ext = path.extension().string();
    for (char& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return ext == ".gguf";
}

}  // namespace dlm::io
