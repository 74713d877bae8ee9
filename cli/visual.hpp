// cli/visual.hpp — the --visual canvas: the generation slots as they are unmasked.
//
// On a terminal the canvas is redrawn in place after every forward (cursor up + clear, which xterm,
// tmux and screen all understand): masked slots are a dim '·', the slots the forward just committed
// are highlighted (bold on green), the slots it edited (a revising schedule, LLaDA 2.1) bold on blue,
// EOS is a dim '∎', and a cyan '|' marks each block boundary. A
// status line above says which forward, block and step it is. When stdout is not a terminal, each
// forward prints one plain line instead:
//     forward 3  block 1 step 3  +2 | 3 + 4 = [7][\n]____ | ________ |
// (forwards, blocks and steps are counted from 1)
// ('_' masked, [x] committed by this forward, {x} edited by it (the count after "edit"), '~' EOS,
// '\n' a newline inside a token).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <dlm/core/result.hpp>
#include <dlm/io/tokenizer.hpp>

#include "terminal.hpp"

namespace dlm::cli {

class canvas_view {
public:
    /// `terminal`: redraw in place with colours; else plain lines. `delay_ms`: pause after each
    /// terminal redraw, so that a fast decode can be watched.
    canvas_view(const io::tokenizer& tokenizer, token_id mask, std::span<const token_id> eos, bool terminal, int delay_ms,
                std::FILE* out = stdout)
        : tok_(&tokenizer), mask_(mask), eos_(eos.begin(), eos.end()), terminal_(terminal), delay_ms_(delay_ms), out_(out) {}

    /// Starts a decode: `header` names it (the preset and its settings).
    void begin(const std::string& header) {
        const auto t0 = clock::now();
        header_ = header;
        lines_drawn_ = 0;
        if (terminal_) {
            write(std::string(ansi::bold) + header + std::string(ansi::reset) + "\n" + std::string(ansi::hide_cursor));
        } else {
            write("# " + header + "\n# one line per forward: _ masked, [x] committed by this forward, {x} edited by it, ~ EOS, | block boundary\n");
        }
        spent_ += seconds_since(t0);
    }

    /// The step callback: draws the canvas of sequence 0 after its step.
    step_action operator()(const step_event& ev) {
        if (ev.sequence != 0) return step_action::proceed;
        const auto t0 = clock::now();
        if (terminal_) {
            draw_terminal(ev);
            std::fflush(out_);
            if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
        } else {
            write(plain_line(ev) + "\n");
        }
        spent_ += seconds_since(t0);
        return step_action::proceed;
    }

    /// Ends a decode (shows the cursor again).
    void end() {
        if (terminal_) write(std::string(ansi::show_cursor));
        std::fflush(out_);
    }

    /// Seconds spent drawing and pausing, to be left out of the measured latency.
    [[nodiscard]] double seconds() const noexcept { return spent_; }

private:
    using clock = std::chrono::steady_clock;
    enum class style { masked, fresh, edited, committed, eos };

    static double seconds_since(clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); }
    void write(const std::string& s) { std::fwrite(s.data(), 1, s.size(), out_); }

    [[nodiscard]] bool is_eos(token_id t) const { return std::find(eos_.begin(), eos_.end(), t) != eos_.end(); }

    /// The text of one token (cached; control characters made visible by the caller).
    const std::string& piece(token_id t) {
        auto it = pieces_.find(t);
        if (it == pieces_.end()) it = pieces_.emplace(t, tok_->decode(std::span<const token_id>(&t, 1), false)).first;
        return it->second;
    }

    struct cell {
        std::string text;  // already made printable
        style st;
        bool break_after;  // the token ends with a newline
    };

    /// The generation slots of the event as cells (boundaries are added by the renderers).
    std::vector<cell> cells(const step_event& ev, bool fancy) {
        std::vector<cell> out;
        const canvas_layout& l = ev.layout;
        for (index_t g = 0; g < l.gen_length; ++g) {
            const index_t p = l.prompt_length + g;
            const token_id t = ev.canvas[static_cast<std::size_t>(p)];
            const bool fresh = std::find(ev.committed.begin(), ev.committed.end(), p) != ev.committed.end();
            const bool edited = std::find(ev.edited.begin(), ev.edited.end(), p) != ev.edited.end();
            if (t == mask_ && !fresh) {
                out.push_back({fancy ? "·" : "_", style::masked, false});
            } else if (is_eos(t)) {
                out.push_back({fancy ? "∎" : "~", fresh ? style::fresh : edited ? style::edited : style::eos, false});
            } else {
                std::string s;
                bool brk = false;
                for (char c : piece(t)) {
                    if (c == '\n') {
                        s += fancy ? "↵" : "\\n";
                        brk = fancy;
                    } else if (c == '\t' || c == '\r') {
                        s += ' ';
                    } else if (static_cast<unsigned char>(c) < 0x20) {
                        s += '?';
                    } else {
                        s += c;
                    }
                }
                if (s.empty()) s = fancy ? "∅" : "?";
                out.push_back({s, fresh ? style::fresh : edited ? style::edited : style::committed, brk});
            }
        }
        return out;
    }

    /// A block starts at slot g (blocks of one slot, autoregressive, and a single block draw none).
    static bool boundary_at(const canvas_layout& l, std::size_t g) {
        return l.block_length > 1 && l.block_length < l.gen_length && g % static_cast<std::size_t>(l.block_length) == 0;
    }

    std::string plain_line(const step_event& ev) {
        const canvas_layout& l = ev.layout;
        std::string s = "forward " + std::to_string(ev.forward + 1) + "  block " + std::to_string(ev.cursor.block + 1) + " step " +
                        std::to_string(ev.cursor.step_in_block + 1) + "  +" + std::to_string(ev.committed.size()) + (ev.edited.empty() ? "" : " edit " + std::to_string(ev.edited.size())) + " |";
        const auto cs = cells(ev, false);
        for (std::size_t g = 0; g < cs.size(); ++g) {
            if (g > 0 && boundary_at(l, g)) s += " | ";
            s += cs[g].st == style::fresh ? "[" + cs[g].text + "]" : cs[g].st == style::edited ? "{" + cs[g].text + "}" : cs[g].text;
        }
        return s + " |";
    }

    void draw_terminal(const step_event& ev) {
        const canvas_layout& l = ev.layout;
        const terminal_size ts = size_of_terminal(fileno(out_));
        const int width = std::max(20, ts.columns - 1);
        const index_t blocks = l.block_length > 0 ? l.block_count() : 1;
        std::size_t masked = 0;
        const auto cs = cells(ev, true);
        for (const auto& c : cs) masked += c.st == style::masked;

        std::vector<std::string> lines;
        lines.push_back(std::string(ansi::dim) + "forward " + std::to_string(ev.forward + 1) + "   block " + std::to_string(ev.cursor.block + 1) +
                        "/" + std::to_string(blocks) + "   step " + std::to_string(ev.cursor.step_in_block + 1) + "   +" +
                        std::to_string(ev.committed.size()) + " committed   " +
                        (ev.edited.empty() ? std::string() : std::to_string(ev.edited.size()) + " edited   ") + std::to_string(masked) + " masked" +
                        std::string(ansi::reset));
        std::string line;
        int used = 0;
        const auto put = [&](const std::string& text, std::string_view sgr, int w) {
            if (used + w > width && used > 0) {
                lines.push_back(line);
                line.clear();
                used = 0;
            }
            line += sgr.empty() ? text : std::string(sgr) + text + std::string(ansi::reset);
            used += w;
        };
        for (std::size_t g = 0; g < cs.size(); ++g) {
            if (g > 0 && boundary_at(l, g))
                put(" | ", ansi::boundary, 3);
            const cell& c = cs[g];
            const std::string_view sgr = c.st == style::fresh       ? ansi::fresh
                                         : c.st == style::edited    ? ansi::edited
                                         : c.st == style::committed ? std::string_view{}
                                                                    : ansi::dim;
            put(c.text, sgr, display_width(c.text));
            if (c.break_after) {
                lines.push_back(line);
                line.clear();
                used = 0;
            }
        }
        if (!line.empty()) lines.push_back(line);
        // Never draw more lines than the terminal holds: cursor-up cannot reach scrolled-off lines.
        const auto room = static_cast<std::size_t>(std::max(2, ts.rows - 2));
        if (lines.size() > room) {
            lines.resize(room);
            lines.back() = std::string(ansi::dim) + "… (canvas taller than the terminal)" + std::string(ansi::reset);
        }
        std::string frame = ansi::up(lines_drawn_) + std::string(ansi::clear_to_end);
        for (const auto& x : lines) frame += x + "\n";
        write(frame);
        lines_drawn_ = static_cast<int>(lines.size());
    }

    const io::tokenizer* tok_;
    token_id mask_;
    std::vector<token_id> eos_;
    bool terminal_;
    int delay_ms_;
    std::FILE* out_;
    std::string header_;
    int lines_drawn_ = 0;
    double spent_ = 0;
    std::unordered_map<token_id, std::string> pieces_;
};

}  // namespace dlm::cli
