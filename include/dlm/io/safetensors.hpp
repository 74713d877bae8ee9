// dlm/io/safetensors.hpp — a model's weights: one or many .safetensors files, memory-mapped.
//
//   auto ckpt = dlm::io::checkpoint::open("models/LLaDA-8B-Instruct");
//   std::vector<float> wte = ckpt.read_f32("model.transformer.wte.weight", {vocab, hidden});
//   ...                      // read every tensor the model needs
//   ckpt.check_all_read();   // a tensor nobody read means the checkpoint is not the model we think
//
// A folder holds model.safetensors (one file) or model.safetensors.index.json (shards named by the
// index's weight_map). Files stay mapped, read-only, for the checkpoint's lifetime; a tensor is
// converted to f32 only when read.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "../core/error.hpp"
#include "dtype.hpp"
#include "file_paths.hpp"
#include "json_util.hpp"
#include "mapped_file.hpp"
#include "safetensors_header.hpp"
#include "safetensors_writer.hpp"

namespace dlm::io {

/// Converts `src` (little-endian elements of type `type`) to f32 into `dst` (same element count).
inline void convert_to_f32(dtype type, std::span<const std::byte> src, std::span<float> dst) {
    const auto n = static_cast<std::ptrdiff_t>(dst.size());
    const auto* p = reinterpret_cast<const unsigned char*>(src.data());
    const auto load16 = [p](std::ptrdiff_t i) {
        return static_cast<std::uint16_t>(p[2 * i] | (static_cast<unsigned>(p[2 * i + 1]) << 8));
    };
    switch (type) {
        case dtype::f32:
            if constexpr (std::endian::native == std::endian::little) {
                if (n > 0) std::memcpy(dst.data(), p, dst.size() * sizeof(float));
            } else {
                for (std::ptrdiff_t i = 0; i < n; ++i)
                    dst[i] = std::bit_cast<float>(static_cast<std::uint32_t>(p[4 * i]) | (std::uint32_t{p[4 * i + 1]} << 8) |
                                                  (std::uint32_t{p[4 * i + 2]} << 16) | (std::uint32_t{p[4 * i + 3]} << 24));
            }
            return;
        case dtype::f16:
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (n > (1 << 20))
#endif
            for (std::ptrdiff_t i = 0; i < n; ++i) dst[i] = f16_to_f32(load16(i));
            return;
        case dtype::bf16:
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) if (n > (1 << 20))
#endif
            for (std::ptrdiff_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(load16(i));
            return;
    }
}

class checkpoint {
public:
    /// Opens `model_dir_or_file`: a folder holding model.safetensors or model.safetensors.index.json
    /// (the single file wins if both exist, as in transformers), a .safetensors file, or an index
    /// .json file. Validates every header (and, when sharded, the index against the shards). A
    /// model.safetensors that is there but is not a readable regular file (a dangling symbolic link)
    /// is named, not passed over for the index (detail::optional_file).
    [[nodiscard]] static checkpoint open(const std::filesystem::path& model_dir_or_file) {
        namespace fs = std::filesystem;
        std::error_code ec;
        checkpoint c;
        c.source_ = model_dir_or_file.string();
        if (fs::is_directory(model_dir_or_file, ec)) {
            const fs::path single = model_dir_or_file / "model.safetensors";
            const fs::path index = model_dir_or_file / "model.safetensors.index.json";
            if (detail::optional_file(single)) {
                c.add_file(single);
            } else if (detail::optional_file(index)) {
                c.open_sharded(index);
            } else {
                throw file_error(c.source_, "folder holds neither model.safetensors nor model.safetensors.index.json");
            }
        } else {
            detail::require_regular_file(model_dir_or_file, "no such file or folder");
            if (model_dir_or_file.extension() == ".json")
                c.open_sharded(model_dir_or_file);
            else
                c.add_file(model_dir_or_file);
        }
        c.read_ = std::make_unique<std::atomic<bool>[]>(c.tensors_.size());
        return c;
    }

    /// The path given to open().
    [[nodiscard]] const std::string& source() const noexcept { return source_; }
    /// Number of tensors.
    [[nodiscard]] std::size_t size() const noexcept { return tensors_.size(); }

    [[nodiscard]] bool contains(std::string_view name) const { return index_.find(name) != index_.end(); }

    /// The tensor's dtype, shape, bytes and file; tensor_error if the checkpoint has no such tensor.
    [[nodiscard]] const tensor_info& info(std::string_view name) const { return tensors_[position(name)]; }
    /// ... and tensor_error if its shape is not `expected` (without marking it read): a loader checks
    /// every shape this way before it allocates anything for a config the file does not hold.
    [[nodiscard]] const tensor_info& info(std::string_view name, std::span<const std::int64_t> expected) const {
        return checked(name, expected, false);
    }

    /// Every tensor name, sorted.
    [[nodiscard]] std::vector<std::string> names() const {
        std::vector<std::string> out;
        out.reserve(index_.size());
        for (const auto& [name, i] : index_) out.push_back(name);
        return out;
    }

    /// An f32 copy of a tensor (converted from f16/bf16). Throws tensor_error naming the file, the
    /// tensor and both shapes if the stored shape is not `expected_shape`. Marks the tensor read.
    [[nodiscard]] std::vector<float> read_f32(std::string_view name, std::span<const std::int64_t> expected_shape) const {
        const tensor_info& t = checked(name, expected_shape);
        std::vector<float> out(t.bytes.size() / dtype_size(t.type));
        convert_to_f32(t.type, t.bytes, out);
        return out;
    }
    [[nodiscard]] std::vector<float> read_f32(std::string_view name, std::initializer_list<std::int64_t> expected_shape) const {
        return read_f32(name, std::span<const std::int64_t>(expected_shape.begin(), expected_shape.size()));
    }

    /// As read_f32, into caller-owned memory of exactly the tensor's element count.
    void read_f32_into(std::string_view name, std::span<const std::int64_t> expected_shape, std::span<float> out) const {
        const tensor_info& t = checked(name, expected_shape);
        const std::size_t count = t.bytes.size() / dtype_size(t.type);
        if (out.size() != count)
            throw tensor_error(t.file, t.name, "destination holds " + std::to_string(out.size()) +
                                                   " floats, the tensor has " + std::to_string(count));
        convert_to_f32(t.type, t.bytes, out);
    }
    void read_f32_into(std::string_view name, std::initializer_list<std::int64_t> expected_shape, std::span<float> out) const {
        read_f32_into(name, std::span<const std::int64_t>(expected_shape.begin(), expected_shape.size()), out);
    }

    /// The stored bytes of rows [row0, row0 + rows) of a 2-D tensor (or elements of a 1-D one):
    /// little-endian elements of info(name).type, as mapped (no alignment promised). The first call
    /// checks the shape and marks the tensor read; tensor_error if the rows are outside it.
    [[nodiscard]] std::span<const std::byte> row_bytes(std::string_view name, std::span<const std::int64_t> expected_shape, std::int64_t row0,
                                                       std::int64_t rows) const {
        const tensor_info& t = checked(name, expected_shape);
        const std::int64_t cols = t.shape.size() >= 2 ? t.shape.back() : 1;
        const std::int64_t total = t.shape.empty() ? 1 : t.shape.front();
        if (row0 < 0 || rows < 0 || row0 + rows > total)
            throw tensor_error(t.file, t.name, "rows [" + std::to_string(row0) + ", " + std::to_string(row0 + rows) + ") outside the tensor's " +
                                                   std::to_string(total) + " rows of " + std::to_string(cols));
        const std::size_t es = dtype_size(t.type);
        return t.bytes.subspan(static_cast<std::size_t>(row0 * cols) * es, static_cast<std::size_t>(rows * cols) * es);
    }

    /// Converts rows [row0, row0 + rows) of a 2-D tensor (or elements of a 1-D one) to f32 into
    /// `out` (rows × columns floats): a loader that packs a large tensor a slice at a time. The first
    /// call checks the shape and marks the tensor read.
    void read_rows_f32(std::string_view name, std::span<const std::int64_t> expected_shape, std::int64_t row0, std::int64_t rows,
                       std::span<float> out) const {
        const std::span<const std::byte> bytes = row_bytes(name, expected_shape, row0, rows);
        const tensor_info& t = tensors_[position(name)];
        if (out.size() * dtype_size(t.type) != bytes.size())
            throw tensor_error(t.file, t.name, "rows [" + std::to_string(row0) + ", " + std::to_string(row0 + rows) + ") do not fit into " +
                                                   std::to_string(out.size()) + " floats");
        convert_to_f32(t.type, bytes, out);
    }

    /// Drops rows [row0, row0 + rows) of a tensor's mapped bytes from the resident set (see
    /// mapped_file::release): called after they were copied, so that a loaded model's resident
    /// memory is its own copy of the weights, not that plus the file.
    void release_rows(std::string_view name, std::int64_t row0, std::int64_t rows) const {
        const tensor_info& t = tensors_[position(name)];
        const std::int64_t cols = t.shape.size() >= 2 ? t.shape.back() : 1;
        const std::size_t es = dtype_size(t.type);
        const std::size_t b0 = static_cast<std::size_t>(row0 * cols) * es, b1 = static_cast<std::size_t>((row0 + rows) * cols) * es;
        if (b1 > t.bytes.size() || b0 > b1) return;
        for (const mapped_file& f : files_)
            if (f.path() == t.file) f.release(t.bytes.subspan(b0, b1 - b0));
    }

    /// Marks a tensor read without converting it (for a model that uses `info(name).bytes` directly).
    void mark_read(std::string_view name) const { read_[position(name)].store(true, std::memory_order_relaxed); }

    /// Throws tensor_error naming a tensor that was never read (and how many were not), so a
    /// checkpoint with unexpected tensors is refused instead of silently half-used.
    void check_all_read() const {
        std::vector<const tensor_info*> unread;
        for (const auto& [name, i] : index_)
            if (!read_[i].load(std::memory_order_relaxed)) unread.push_back(&tensors_[i]);
        if (unread.empty()) return;
        std::string why = "unexpected tensor: the model never read it";
        if (unread.size() > 1) {
            why += " (" + std::to_string(unread.size()) + " unread in all:";
            for (std::size_t k = 0; k < unread.size() && k < 8; ++k) why += " '" + unread[k]->name + "'";
            why += unread.size() > 8 ? " ...)" : ")";
        }
        throw tensor_error(unread.front()->file, unread.front()->name, why);
    }

private:
    checkpoint() = default;

    [[nodiscard]] std::size_t position(std::string_view name) const {
        const auto it = index_.find(name);
        if (it == index_.end()) throw tensor_error(source_, std::string(name), "not in the checkpoint");
        return it->second;
    }

    [[nodiscard]] const tensor_info& checked(std::string_view name, std::span<const std::int64_t> expected, bool mark = true) const {
        const std::size_t i = position(name);
        const tensor_info& t = tensors_[i];
        if (!std::equal(t.shape.begin(), t.shape.end(), expected.begin(), expected.end()))
            throw tensor_error(t.file, t.name, "expected shape " + shape_string(expected) + ", found " + shape_string(t.shape));
        if (mark) read_[i].store(true, std::memory_order_relaxed);
        return t;
    }

    /// Maps one file, validates its header and adds its tensors. Returns the names it added.
    std::vector<std::string> add_file(const std::filesystem::path& path) {
        files_.emplace_back(path);
        const mapped_file& f = files_.back();
        std::vector<std::string> added;
        for (tensor_info& t : parse_safetensors(f.bytes(), f.path())) {
            if (const auto it = index_.find(t.name); it != index_.end())
                throw tensor_error(f.path(), t.name, "is also stored in shard '" + tensors_[it->second].file + "'");
            added.push_back(t.name);
            index_.emplace(t.name, tensors_.size());
            tensors_.push_back(std::move(t));
        }
        return added;
    }

    void open_sharded(const std::filesystem::path& index_path) {
        namespace fs = std::filesystem;
        const std::string ipath = index_path.string();
        const nlohmann::json index = detail::parse_json_strict(detail::read_text_file(index_path), ipath, "index");
        if (!index.is_object()) throw file_error(ipath, "index is a JSON " + detail::json_kind(index) + ", not an object");
        if (!index.contains("weight_map")) throw file_error(ipath, "index has no 'weight_map'");
        const auto& weight_map = index.at("weight_map");
        if (!weight_map.is_object()) throw file_error(ipath, "'weight_map' is a " + std::string(weight_map.type_name()) + ", not an object");
        if (weight_map.empty()) throw file_error(ipath, "'weight_map' is empty");

        // shard file name -> the tensors the index places in it
        std::map<std::string, std::vector<std::string>> shards;
        const fs::path dir = index_path.parent_path();
        for (const auto& [name, file] : weight_map.items()) {
            if (!file.is_string()) throw tensor_error(ipath, name, "weight_map value is a " + std::string(file.type_name()) + ", not a file name");
            const auto shard = file.get<std::string>();
            const fs::path rel(shard);
            bool escapes = shard.empty() || rel.is_absolute() || rel.has_root_name();
            for (const auto& part : rel) escapes = escapes || part == "..";
            if (escapes) throw tensor_error(ipath, name, "weight_map names shard '" + shard + "', which is not a file name inside the folder");
            if (const std::string why = detail::why_not_a_regular_file(dir / rel, "does not exist"); !why.empty())
                throw tensor_error(ipath, name, "weight_map names shard '" + shard + "' in '" + dir.string() + "', which " + why);
            shards[shard].push_back(name);
        }
        for (const auto& [shard, listed] : shards) {
            const fs::path path = dir / shard;
            const std::vector<std::string> added = add_file(path);
            const std::string spath = files_.back().path();
            for (const std::string& name : listed) {
                const auto it = index_.find(name);
                if (it == index_.end() || tensors_[it->second].file != spath)
                    throw tensor_error(spath, name, "the index places it in this shard, but the shard does not hold it");
            }
            if (added.size() != listed.size()) {  // the shard holds a tensor the index does not list for it
                for (const std::string& name : added)
                    if (!weight_map.contains(name) || weight_map.at(name) != shard)
                        throw tensor_error(spath, name, "is in this shard, but the index's weight_map does not place it here");
            }
        }
    }

    std::string source_;
    std::vector<mapped_file> files_;
    std::vector<tensor_info> tensors_;
    std::map<std::string, std::size_t, std::less<>> index_;
    std::unique_ptr<std::atomic<bool>[]> read_;
};

}  // namespace dlm::io
