// dlm/io/gguf_writer.hpp — writes a GGUF v3 file (the layout io/gguf.hpp reads): metadata keys in
// the order added, tensor infos, padding to the alignment, tensor data each at an aligned offset.
// Used by tests (models converted at test time, malformed files built field by field) and the fuzz
// seed corpus; tools/write_gguf.py, on the `gguf` package, is the user-facing converter.
// Files larger than memory stream: declare_tensor() each tensor, write_header(), then each declared
// tensor's bytes in order, each followed by write_padding() (bench/gguf_checkpoint.hpp writes 8B
// models so).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../core/error.hpp"
#include "gguf.hpp"

namespace dlm::io {

class gguf_writer {
public:
    explicit gguf_writer(std::uint32_t alignment = gguf_default_alignment) : alignment_(alignment) {}

    void add_u32(std::string_view key, std::uint32_t v) { scalar(key, gguf_value_type::u32, v); }
    void add_i32(std::string_view key, std::int32_t v) { scalar(key, gguf_value_type::i32, v); }
    void add_u64(std::string_view key, std::uint64_t v) { scalar(key, gguf_value_type::u64, v); }
    void add_f32(std::string_view key, float v) { scalar(key, gguf_value_type::f32, v); }
    void add_bool(std::string_view key, bool v) { scalar(key, gguf_value_type::boolean, static_cast<std::uint8_t>(v)); }
    void add_string(std::string_view key, std::string_view v) {
        head(key, gguf_value_type::string);
        str(kv_, v);
    }
    void add_strings(std::string_view key, std::span<const std::string> v) {
        array_head(key, gguf_value_type::string, v.size());
        for (const std::string& s : v) str(kv_, s);
    }
    void add_i32s(std::string_view key, std::span<const std::int32_t> v) {
        array_head(key, gguf_value_type::i32, v.size());
        for (const std::int32_t x : v) put(kv_, x);
    }
    void add_bools(std::string_view key, const std::vector<bool>& v) {
        array_head(key, gguf_value_type::boolean, v.size());
        for (const bool x : v) put(kv_, static_cast<std::uint8_t>(x));
    }
    void add_f32s(std::string_view key, std::span<const float> v) {
        array_head(key, gguf_value_type::f32, v.size());
        for (const float x : v) put(kv_, x);
    }

    /// A tensor of `type` with ggml shape `shape` (row length first) and its raw bytes.
    void add_tensor(std::string_view name, gguf_type type, std::span<const std::int64_t> shape, std::span<const std::byte> data) {
        info(name, type, shape, data.size());
        data_.resize((data_.size() + alignment_ - 1) / alignment_ * alignment_);
        data_.insert(data_.end(), data.begin(), data.end());
    }
    /// A tensor whose `size` bytes the caller streams after write_header() (see the top); the file
    /// can then only be written by streaming, not by bytes() or write().
    void declare_tensor(std::string_view name, gguf_type type, std::span<const std::int64_t> shape, std::uint64_t size) {
        info(name, type, shape, size);
        streamed_ = true;
    }
    /// An f32 tensor.
    void add_tensor(std::string_view name, std::span<const std::int64_t> shape, std::span<const float> values) {
        add_tensor(name, gguf_type::f32, shape, std::as_bytes(values));
    }

    /// The whole file.
    [[nodiscard]] std::vector<std::byte> bytes() const {
        if (streamed_) throw contract_error("gguf_writer::bytes: the file has declared tensors; stream it with write_header()");
        std::vector<std::byte> out = header_bytes();
        out.insert(out.end(), data_.begin(), data_.end());
        return out;
    }
    /// Everything before the first tensor's bytes: header, keys, tensor infos, padding.
    void write_header(std::ostream& out) const {
        const std::vector<std::byte> b = header_bytes();
        out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    }
    /// Zeros after a streamed tensor of `size` bytes, up to the next tensor's aligned offset.
    void write_padding(std::ostream& out, std::uint64_t size) const {
        static constexpr char zeros[256] = {};
        for (std::uint64_t n = (alignment_ - size % alignment_) % alignment_; n > 0; n -= std::min<std::uint64_t>(n, sizeof zeros))
            out.write(zeros, static_cast<std::streamsize>(std::min<std::uint64_t>(n, sizeof zeros)));
    }
    void write(const std::filesystem::path& path) const {
        const std::vector<std::byte> b = bytes();
        std::ofstream out(path, std::ios::binary);
        out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
        if (!out) throw file_error(path.string(), "cannot write");
    }

private:
    [[nodiscard]] std::vector<std::byte> header_bytes() const {
        std::vector<std::byte> out;
        for (const char c : {'G', 'G', 'U', 'F'}) out.push_back(static_cast<std::byte>(c));
        put(out, std::uint32_t{3});
        put(out, static_cast<std::uint64_t>(tensors_));
        put(out, static_cast<std::uint64_t>(kvs_));
        out.insert(out.end(), kv_.begin(), kv_.end());
        out.insert(out.end(), infos_.begin(), infos_.end());
        if (tensors_ > 0) out.resize((out.size() + alignment_ - 1) / alignment_ * alignment_);
        return out;
    }
    /// The tensor info of the next tensor, its data at the next aligned offset after the last one's.
    void info(std::string_view name, gguf_type type, std::span<const std::int64_t> shape, std::uint64_t size) {
        str(infos_, name);
        put(infos_, static_cast<std::uint32_t>(shape.size()));
        for (const std::int64_t d : shape) put(infos_, static_cast<std::uint64_t>(d));
        put(infos_, static_cast<std::uint32_t>(type));
        data_end_ = (data_end_ + alignment_ - 1) / alignment_ * alignment_;
        put(infos_, data_end_);
        data_end_ += size;
        ++tensors_;
    }
    template <class T>
    static void put(std::vector<std::byte>& out, T v) {
        unsigned char b[sizeof(T)];
        std::memcpy(b, &v, sizeof(T));  // GGUF is little-endian, as every platform dlm builds on
        for (const unsigned char c : b) out.push_back(static_cast<std::byte>(c));
    }
    static void str(std::vector<std::byte>& out, std::string_view s) {
        put(out, static_cast<std::uint64_t>(s.size()));
        for (const char c : s) out.push_back(static_cast<std::byte>(c));
    }
    void head(std::string_view key, gguf_value_type t) {
        str(kv_, key);
        put(kv_, static_cast<std::uint32_t>(t));
        ++kvs_;
    }
    void array_head(std::string_view key, gguf_value_type element, std::size_t n) {
        head(key, gguf_value_type::array);
        put(kv_, static_cast<std::uint32_t>(element));
        put(kv_, static_cast<std::uint64_t>(n));
    }
    template <class T>
    void scalar(std::string_view key, gguf_value_type t, T v) {
        head(key, t);
        put(kv_, v);
    }

    std::uint32_t alignment_;
    std::vector<std::byte> kv_, infos_, data_;
    std::size_t kvs_ = 0, tensors_ = 0;
    std::uint64_t data_end_ = 0;  ///< the data section's size so far (declared tensors included)
    bool streamed_ = false;
};

}  // namespace dlm::io
