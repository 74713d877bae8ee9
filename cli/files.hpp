// cli/files.hpp — the files the programs write (dlm-eval's --json and --predictions, dlm-generate's
// --trace, the benchmarks' --json and --out): checked before the work that fills them, written whole
// or refused with a dlm::file_error that names the file and says why, never lost in silence.
//
//   cli::check_writable(o.json);                               // before hours of decoding
//   cli::check_distinct({{"--json", o.json}, {"--data", data}});  // no flag overwrites another's file
//   cli::write_file(o.json, text);                             // flushed and closed before it returns
#pragma once

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iostream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include <sys/stat.h>

#include <dlm/core/error.hpp>

namespace dlm::cli {

namespace detail {

/// "cannot be written" and, where the C library says why, its words (No space left on device).
inline std::string cannot_write(int err) {
    return err != 0 ? std::string("cannot be written: ") + std::strerror(err) : std::string("cannot be written");
}

/// Whether `path` is something other than a directory or a regular file that is there (a FIFO, a
/// device, /dev/stdout): opening one to test it would block, or end its reader's input.
inline bool is_special(const std::filesystem::path& path) {
    std::error_code ec;
    const auto st = std::filesystem::status(path, ec);
    return !ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st) && !std::filesystem::is_directory(st);
}

}  // namespace detail

/// Whether `path` is the file this process's standard output writes (/dev/stdout, or the very file
/// stdout is redirected to): opening it again would truncate what stdout already wrote there.
inline bool is_stdout(const std::filesystem::path& path) {
    struct stat a {}, b {};
    return ::stat(path.c_str(), &a) == 0 && ::fstat(1, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/// Writes `bytes` to `path` (created or truncated), flushed and closed before it returns: a full disk
/// or a failed write is a dlm::file_error naming the file, not a short file and exit 0. A path that is
/// standard output's file (--json /dev/stdout) is written through std::cout, after what it holds.
inline void write_file(const std::filesystem::path& path, std::string_view bytes) {
    if (is_stdout(path)) {
        std::cout.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        if (!std::cout.flush()) throw file_error(path.string(), "cannot be written: standard output failed");
        return;
    }
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) throw file_error(path.string(), "is a directory, not a file to write");
    errno = 0;
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    if (!f) throw file_error(path.string(), detail::cannot_write(errno));
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.close();  // the last buffered bytes go out here, and may fail here
    if (!f) throw file_error(path.string(), detail::cannot_write(errno));
}

/// Throws dlm::file_error when `path` cannot be written, before the work that fills it: a directory,
/// a folder that does not exist, a file that cannot be opened for appending (its content kept; removed
/// again if it was not there). A FIFO or device is taken as given and not opened here. "" passes.
inline void check_writable(const std::filesystem::path& path) {
    if (path.empty() || detail::is_special(path)) return;
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) throw file_error(path.string(), "is a directory, not a file to write");
    const bool existed = std::filesystem::exists(path, ec);
    errno = 0;
    if (!std::ofstream(path, std::ios::app | std::ios::binary)) throw file_error(path.string(), detail::cannot_write(errno));
    if (!existed) std::filesystem::remove(path, ec);
}

/// Refuses two flags that name one file where at least one of them is written (`written` first,
/// then the files only read): --json and --predictions, or --json and --data, would overwrite each
/// other. A dlm::invalid_parameter naming the second flag. Empty paths are skipped.
inline void check_distinct(std::initializer_list<std::pair<std::string_view, std::filesystem::path>> written,
                           std::initializer_list<std::pair<std::string_view, std::filesystem::path>> read = {}) {
    const auto same = [](const std::filesystem::path& a, const std::filesystem::path& b) {
        std::error_code ec;
        if (std::filesystem::equivalent(a, b, ec) && !ec) return true;
        // Files not there yet: compared by their absolute, normal names (x.json and ./x.json are one).
        const auto ca = std::filesystem::weakly_canonical(std::filesystem::absolute(a, ec), ec);
        if (ec) return false;
        const auto cb = std::filesystem::weakly_canonical(std::filesystem::absolute(b, ec), ec);
        return !ec && ca == cb;
    };
    for (auto w = written.begin(); w != written.end(); ++w) {
        if (w->second.empty()) continue;
        for (auto o = written.begin(); o != w; ++o)
            if (!o->second.empty() && same(o->second, w->second))
                throw invalid_parameter(std::string(w->first), "names " + w->second.string() + ", the file " + std::string(o->first) +
                                                                   " writes: each would overwrite the other");
        for (const auto& r : read)
            if (!r.second.empty() && same(r.second, w->second))
                throw invalid_parameter(std::string(w->first), "names " + w->second.string() + ", the file " + std::string(r.first) +
                                                                   " reads: writing it would destroy the input");
    }
}

/// Refuses an output file (`flag`) that is the model's own: the .gguf file, or a file already in the
/// model folder (config.json, the weights, the tokenizer): writing it would destroy the model. A new
/// file in the folder passes. A dlm::invalid_parameter naming the flag; an empty path passes.
inline void check_outside_model(std::string_view flag, const std::filesystem::path& written, const std::filesystem::path& model) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (written.empty() || !fs::exists(written, ec)) return;
    const bool the_file = fs::is_regular_file(model, ec) && fs::equivalent(written, model, ec);
    const bool in_folder = fs::is_directory(model, ec) && fs::equivalent(fs::absolute(written, ec).parent_path(), model, ec);
    if (the_file || in_folder)
        throw invalid_parameter(std::string(flag), "names " + written.string() + (the_file ? ", the model file" : ", a file of the model folder " + model.string()) +
                                                       ": writing it would destroy the model");
}

}  // namespace dlm::cli
