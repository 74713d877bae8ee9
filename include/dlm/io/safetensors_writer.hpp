// dlm/io/safetensors_writer.hpp — write a single-file safetensors checkpoint from f32 data.
//
// Used by tests and tools (small models, fixtures). Values are stored as F32, F16 or BF16 (narrowing
// rounds to nearest even). Tensors are laid out in the order given, without gaps; the header is
// padded with spaces to a multiple of 8 bytes so every tensor starts 8-byte aligned.
#pragma once

#include <bit>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "../core/error.hpp"
#include "dtype.hpp"
#include "safetensors_header.hpp"

namespace dlm::io {

/// A tensor to write: its shape and its values in row-major order.
struct tensor_data {
    std::vector<std::int64_t> shape;
    std::vector<float> values;
};

/// Writes `tensors` (name, data) to `file`, every tensor stored as `stored_as`. Throws
/// invalid_parameter for a bad tensor (empty or duplicate name, negative dimension, value count not
/// matching the shape) and file_error if the file cannot be written.
inline void write_safetensors(const std::filesystem::path& file,
                              const std::vector<std::pair<std::string, tensor_data>>& tensors, dtype stored_as,
                              const std::map<std::string, std::string>& metadata = {}) {
    nlohmann::json header = nlohmann::json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    std::set<std::string> seen;
    std::uint64_t offset = 0;
    const std::size_t elem = dtype_size(stored_as);
    for (const auto& [name, t] : tensors) {
        if (name.empty() || name == "__metadata__")
            throw invalid_parameter("tensors", "tensor name '" + name + "' is reserved or empty");
        if (!seen.insert(name).second) throw invalid_parameter("tensors", "tensor '" + name + "' appears twice");
        const auto count = element_count(t.shape);
        if (!count) throw invalid_parameter("tensors", "tensor '" + name + "': shape " + shape_string(t.shape) + " is invalid");
        if (static_cast<std::uint64_t>(*count) != t.values.size())
            throw invalid_parameter("tensors", "tensor '" + name + "': shape " + shape_string(t.shape) + " needs " +
                                                   std::to_string(*count) + " values, got " + std::to_string(t.values.size()));
        const std::uint64_t nbytes = t.values.size() * elem;
        header[name] = {{"dtype", std::string(dtype_name(stored_as))}, {"shape", t.shape}, {"data_offsets", {offset, offset + nbytes}}};
        offset += nbytes;
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');

    const std::string path = file.string();
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    if (!out) throw file_error(path, "cannot open for writing");
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((static_cast<std::uint64_t>(text.size()) >> (8 * i)) & 0xffu);
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    std::vector<unsigned char> buf;
    for (const auto& [name, t] : tensors) {
        buf.resize(t.values.size() * elem);
        for (std::size_t i = 0; i < t.values.size(); ++i) {
            const std::uint32_t bits = stored_as == dtype::f32 ? std::bit_cast<std::uint32_t>(t.values[i])
                                       : stored_as == dtype::f16 ? f32_to_f16(t.values[i])
                                                                 : f32_to_bf16(t.values[i]);
            for (std::size_t b = 0; b < elem; ++b) buf[i * elem + b] = static_cast<unsigned char>((bits >> (8 * b)) & 0xffu);
        }
        out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
    }
    out.flush();
    if (!out) throw file_error(path, "write failed");
}

}  // namespace dlm::io
