// cli/terminal.hpp — terminal detection, ANSI sequences and a progress bar.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <sys/ioctl.h>
#include <unistd.h>

namespace dlm::cli {

/// Whether `fd` is a terminal (colours, in-place redraws and progress bars are only drawn there).
[[nodiscard]] inline bool is_terminal(int fd) noexcept { return ::isatty(fd) == 1; }

/// Columns and rows of the terminal on `fd`: TIOCGWINSZ, else $COLUMNS / $LINES, else 80 x 24.
struct terminal_size {
    int columns = 80, rows = 24;
};
[[nodiscard]] inline terminal_size size_of_terminal(int fd) noexcept {
    terminal_size t;
    winsize w{};
    if (::ioctl(fd, TIOCGWINSZ, &w) == 0 && w.ws_col > 0) {
        t.columns = w.ws_col;
        t.rows = w.ws_row > 0 ? w.ws_row : t.rows;
        return t;
    }
    if (const char* c = std::getenv("COLUMNS"); c && std::atoi(c) > 0) t.columns = std::atoi(c);
    if (const char* r = std::getenv("LINES"); r && std::atoi(r) > 0) t.rows = std::atoi(r);
    return t;
}

/// SGR and cursor sequences (ECMA-48), understood by xterm, tmux, screen and the Linux console.
namespace ansi {
inline constexpr std::string_view reset = "\x1b[0m";
inline constexpr std::string_view bold = "\x1b[1m";
inline constexpr std::string_view dim = "\x1b[2m";
inline constexpr std::string_view reverse = "\x1b[7m";
inline constexpr std::string_view fresh = "\x1b[1;30;42m";  // bold black on green: committed at this step
inline constexpr std::string_view edited = "\x1b[1;37;44m"; // bold white on blue: edited (revised) at this step
inline constexpr std::string_view boundary = "\x1b[36m";    // cyan block boundaries
inline constexpr std::string_view hide_cursor = "\x1b[?25l";
inline constexpr std::string_view show_cursor = "\x1b[?25h";
inline constexpr std::string_view clear_to_end = "\x1b[J";
inline constexpr std::string_view clear_line = "\x1b[K";
/// Cursor to column 1, `n` lines up.
[[nodiscard]] inline std::string up(int n) { return n > 0 ? "\r\x1b[" + std::to_string(n) + "A" : std::string("\r"); }
}  // namespace ansi

/// The number of code points of UTF-8 text (the columns it takes, for the text dlm prints).
[[nodiscard]] inline int display_width(std::string_view s) noexcept {
    int n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
}

/// A one-line progress bar on stderr, drawn only when stderr is a terminal (and `enabled`),
/// redrawn at most ten times a second:  label [#########...........]  120/500  status
class progress_bar {
public:
    progress_bar(std::string label, std::size_t total, bool enabled)
        : label_(std::move(label)), total_(total), on_(enabled && is_terminal(2)) {}
    progress_bar(const progress_bar&) = delete;
    progress_bar& operator=(const progress_bar&) = delete;
    ~progress_bar() { finish(); }

    [[nodiscard]] bool active() const noexcept { return on_; }

    void update(std::size_t done, std::string_view status = {}) {
        if (!on_) return;
        const auto now = std::chrono::steady_clock::now();
        if (done < total_ && drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
        last_ = now;
        drawn_ = true;
        const int columns = size_of_terminal(2).columns;
        const std::string count = " " + std::to_string(done) + "/" + std::to_string(total_) + " ";
        const int room = columns - 1 - display_width(label_) - 3 - static_cast<int>(count.size()) - display_width(status);
        const int width = std::max(10, std::min(40, room));
        const int full = total_ ? static_cast<int>(static_cast<double>(width) * static_cast<double>(done) / static_cast<double>(total_)) : width;
        std::string line = "\r" + label_ + " [";
        for (int i = 0; i < width; ++i) line += i < full ? "#" : ".";
        line += "]" + count;
        line += status;
        line += ansi::clear_line;
        std::fputs(line.c_str(), stderr);
        std::fflush(stderr);
    }

    /// Erases the bar (the figures are printed after it).
    void finish() {
        if (!on_ || !drawn_) return;
        std::fputs("\r\x1b[K", stderr);
        std::fflush(stderr);
        drawn_ = false;
    }

private:
    std::string label_;
    std::size_t total_;
    bool on_;
    bool drawn_ = false;
    std::chrono::steady_clock::time_point last_{};
};

}  // namespace dlm::cli
