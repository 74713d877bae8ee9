// dlm/io/mapped_file.hpp — a whole file, read-only, memory-mapped for the object's lifetime.
//
// POSIX systems map the file (mmap, PROT_READ, MAP_PRIVATE): opening a 16 GB checkpoint costs no
// I/O until a tensor is read. Elsewhere the file is read into memory once.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "file_paths.hpp"

// DLM_IO_HAVE_MMAP: 1 maps files, 0 reads them into memory. Detected unless defined by the user.
#ifndef DLM_IO_HAVE_MMAP
#if __has_include(<sys/mman.h>) && __has_include(<unistd.h>) && __has_include(<fcntl.h>)
#define DLM_IO_HAVE_MMAP 1
#else
#define DLM_IO_HAVE_MMAP 0
#endif
#endif
#if DLM_IO_HAVE_MMAP
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

namespace dlm::io {

class mapped_file {
public:
    mapped_file() = default;

    /// Maps `path`; throws dlm::file_error naming the path if it cannot be opened or read.
    explicit mapped_file(const std::filesystem::path& path) : path_(path.string()) {
#if DLM_IO_HAVE_MMAP
        // O_NONBLOCK: opening a FIFO (or a device) for reading would wait for a writer before the
        // regular-file check below could refuse it; on a regular file it changes nothing.
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0) throw file_error(path_, std::string("cannot open: ") + std::strerror(errno));
        struct stat st {};
        if (::fstat(fd, &st) != 0) {
            const int err = errno;
            ::close(fd);
            throw file_error(path_, std::string("cannot stat: ") + std::strerror(err));
        }
        if (!S_ISREG(st.st_mode)) {
            ::close(fd);
            throw file_error(path_, "not a regular file");
        }
        size_ = static_cast<std::size_t>(st.st_size);
        if (size_ > 0) {
            void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
            if (p == MAP_FAILED) {
                const int err = errno;
                ::close(fd);
                throw file_error(path_, std::string("cannot mmap: ") + std::strerror(err));
            }
            data_ = static_cast<const std::byte*>(p);
            ::madvise(p, size_, MADV_SEQUENTIAL);  // a loader reads tensors front to back: read ahead
        }
        ::close(fd);  // the mapping stays valid without the descriptor
#else
        detail::require_regular_file(path);
        std::error_code ec;
        const std::uintmax_t size = std::filesystem::file_size(path, ec);
        if (ec) throw file_error(path_, "cannot read its size: " + ec.message());
        std::ifstream in(path, std::ios::binary);
        if (!in) throw file_error(path_, "cannot open");
        buffer_.resize(static_cast<std::size_t>(size));
        in.read(reinterpret_cast<char*>(buffer_.data()), static_cast<std::streamsize>(buffer_.size()));
        if (!in) throw file_error(path_, "cannot read");
        data_ = buffer_.data();
        size_ = buffer_.size();
#endif
    }

    mapped_file(const mapped_file&) = delete;
    mapped_file& operator=(const mapped_file&) = delete;
    mapped_file(mapped_file&& other) noexcept { swap(other); }
    mapped_file& operator=(mapped_file&& other) noexcept {
        if (this != &other) {
            mapped_file tmp(std::move(other));
            swap(tmp);
        }
        return *this;
    }
    ~mapped_file() {
#if DLM_IO_HAVE_MMAP
        if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
#endif
    }

    [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }

    /// Drops the pages wholly inside `range` (a part of bytes()) from this process's resident set:
    /// a loader that copied them calls it, so that the mapped file and the copy are not both
    /// resident. The data stays readable (it is paged in again from the file, or the page cache,
    /// if touched). No effect without mmap.
    void release(std::span<const std::byte> range) const noexcept {
#if DLM_IO_HAVE_MMAP
        if (data_ == nullptr || range.empty() || range.data() < data_ || range.data() + range.size() > data_ + size_) return;
        const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
        const auto begin = (reinterpret_cast<std::uintptr_t>(range.data()) + page - 1) / page * page;
        const auto end = (reinterpret_cast<std::uintptr_t>(range.data()) + range.size()) / page * page;
        if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
#else
        (void)range;
#endif
    }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] const std::string& path() const noexcept { return path_; }

private:
    void swap(mapped_file& other) noexcept {
        std::swap(path_, other.path_);
        std::swap(data_, other.data_);
        std::swap(size_, other.size_);
#if !DLM_IO_HAVE_MMAP
        std::swap(buffer_, other.buffer_);  // the vector's heap block, and so data_, survives the swap
#endif
    }

    std::string path_;
    const std::byte* data_ = nullptr;
    std::size_t size_ = 0;
#if !DLM_IO_HAVE_MMAP
    std::vector<std::byte> buffer_;
#endif
};

}  // namespace dlm::io
