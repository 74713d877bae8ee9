// dlm/io/file_paths.hpp — what a path given to dlm names, asked before anything is opened: why it is
// not a readable regular file, whether an optional file is there, and which folder and weights a
// model path names.
//
// Every question goes through std::filesystem's error_code overloads: a symbolic link loop or a
// folder that cannot be searched is a dlm::file_error naming the path, never an untyped
// std::filesystem::filesystem_error. Nothing here opens a file, so a FIFO is described, not waited on.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

#include "../core/error.hpp"

namespace dlm::io {

namespace detail {

/// What an error of std::filesystem's status calls says about a path, after the path.
[[nodiscard]] inline std::string status_error_reason(const std::error_code& ec) {
    if (ec == std::errc::too_many_symbolic_link_levels) return "is a symbolic link loop (too many levels of symbolic links)";
    return "cannot be examined: " + ec.message();
}

/// Why `path` is not a regular file dlm can read (following symbolic links), or "" when it is one.
/// The reason reads after the path ("x: is a directory"); `missing` is the reason for a path with
/// no directory entry at all. A dangling symbolic link (a Hugging Face cache missing its blob) names
/// its target.
[[nodiscard]] inline std::string why_not_a_regular_file(const std::filesystem::path& path, const std::string& missing = "no such file") {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::symlink_status(path, ec).type() == fs::file_type::not_found) return missing;
    if (ec) return status_error_reason(ec);
    const fs::file_status target = fs::status(path, ec);
    if (target.type() == fs::file_type::not_found) {
        const fs::path to = fs::read_symlink(path, ec);
        return "is a symbolic link to a missing file" + (ec ? std::string() : " ('" + to.string() + "')");
    }
    if (ec) return status_error_reason(ec);
    switch (target.type()) {
        case fs::file_type::regular: return "";
        case fs::file_type::directory: return "is a directory";
        case fs::file_type::fifo: return "is a FIFO, not a regular file";
        case fs::file_type::character: return "is a character device, not a regular file";
        case fs::file_type::block: return "is a block device, not a regular file";
        case fs::file_type::socket: return "is a socket, not a regular file";
        default: return "is not a regular file";
    }
}

/// Throws file_error naming `path`, with why_not_a_regular_file's reason, unless it is a regular file.
inline void require_regular_file(const std::filesystem::path& path, const std::string& missing = "no such file") {
    if (std::string why = why_not_a_regular_file(path, missing); !why.empty()) throw file_error(path.string(), why);
}

/// Whether an optional file (generation_config.json, tokenizer_config.json, ...) is there to read:
/// false when the folder has no entry of that name (the file is skipped), true for a regular file. An
/// entry that is not a readable regular file — a dangling symbolic link, a directory, a FIFO — is a
/// file_error naming it: skipping it would silently drop what the file says (its EOS ids, its chat
/// template).
[[nodiscard]] inline bool optional_file(const std::filesystem::path& path) {
    std::error_code ec;
    if (std::filesystem::symlink_status(path, ec).type() == std::filesystem::file_type::not_found) return false;
    require_regular_file(path);
    return true;
}

/// The config.json of a model folder, or `model_dir_or_config_json` itself when it is not a folder.
[[nodiscard]] inline std::filesystem::path config_json_path(const std::filesystem::path& model_dir_or_config_json) {
    std::error_code ec;
    return std::filesystem::is_directory(model_dir_or_config_json, ec) ? model_dir_or_config_json / "config.json" : model_dir_or_config_json;
}

}  // namespace detail

/// Where the loaders (cpu::transformer::load, cpu::diffusion_gemma::load, the CUDA transformer's
/// load) read a model named by a path.
struct model_paths {
    std::filesystem::path folder;      ///< config.json, generation_config.json, tokenizer.json
    std::filesystem::path checkpoint;  ///< what checkpoint::open opens: the folder, a .safetensors file or an index
};

/// The model a path names: a folder is itself for both; its config.json names the folder; a
/// .safetensors file or a .safetensors.index.json is the checkpoint, read with the config.json of
/// its folder. Any other path is a file_error naming it, before any file of its folder is looked at
/// (a fine-tune's finetuned.safetensors must not load the model.safetensors beside it).
[[nodiscard]] inline model_paths resolve_model_paths(const std::filesystem::path& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) return {path, path};
    detail::require_regular_file(path, "no such model folder or file");
    const std::filesystem::path folder = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
    const std::string name = path.filename().string();
    if (name == "config.json") return {folder, folder};
    if (name.ends_with(".safetensors") || name.ends_with(".safetensors.index.json")) return {folder, path};
    throw file_error(path.string(), "is a file, not a model folder, its config.json, a .safetensors file or a .safetensors.index.json");
}

}  // namespace dlm::io
