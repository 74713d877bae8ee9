// Helpers shared by the dlm::io tests: a scratch folder, an error-message checker, raw f32 fixture files.
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <random>
#include <string_view>
#include <vector>

#include "dlm/core/error.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace dlm_test {

/// The little-endian f32 values of a raw fixture file (logits written by tools/make_*_fixtures.py).
inline std::vector<float> read_f32_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    REQUIRE_MESSAGE(in, "cannot read " << p);
    std::vector<float> v(std::filesystem::file_size(p) / sizeof(float));
    in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
    return v;
}

/// A fresh folder under the system temp dir, removed with its content at scope exit.
class temp_dir {
public:
    temp_dir() {
        static std::atomic<int> counter{0};
        path_ = std::filesystem::temp_directory_path() /
                ("dlm_io_test_" + std::to_string(std::random_device{}()) + "_" + std::to_string(counter++));
        std::filesystem::remove_all(path_);
        std::filesystem::create_directories(path_);
    }
    temp_dir(const temp_dir&) = delete;
    temp_dir& operator=(const temp_dir&) = delete;
    ~temp_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    [[nodiscard]] const std::filesystem::path& path() const { return path_; }
    [[nodiscard]] std::filesystem::path operator/(std::string_view name) const { return path_ / name; }

private:
    std::filesystem::path path_;
};

inline void write_text(const std::filesystem::path& p, std::string_view text) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    REQUIRE(out.good());
}

/// Runs `f`, which must throw exactly `E` (or a subclass) whose message holds every one of `parts`.
/// Returns the message.
template <class E, class F>
std::string expect_error(F&& f, std::initializer_list<std::string_view> parts) {
    std::string message = "<nothing thrown>";
    bool caught = false;
    try {
        f();
    } catch (const E& e) {
        caught = true;
        message = e.what();
    } catch (const std::exception& e) {
        message = std::string("<other exception> ") + e.what();
    }
    INFO("message: " << message);
    CHECK(caught);
    for (const std::string_view part : parts) {
        INFO("expected in the message: " << part);
        CHECK(message.find(part) != std::string::npos);
    }
    return message;
}

/// OpenMP's thread count set to `n` while in scope (nothing without OpenMP).
class omp_threads {
public:
    explicit omp_threads(int n) {
#if defined(_OPENMP)
        before_ = omp_get_max_threads();
        omp_set_num_threads(n);
#else
        (void)n;
#endif
    }
    omp_threads(const omp_threads&) = delete;
    omp_threads& operator=(const omp_threads&) = delete;
    ~omp_threads() {
#if defined(_OPENMP)
        omp_set_num_threads(before_);
#endif
    }

private:
    int before_ = 1;
};

}  // namespace dlm_test
