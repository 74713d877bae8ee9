// cli/trace.hpp — the picture of a decoding trajectory (--trace, --compare).
//
// One panel per decode: generation slots across, forwards down (forward 1 at the top). The cell of
// slot s in the row of the forward that committed it is coloured by the confidence p(token) it had
// then; the slot's cells below are grey (committed earlier), above white (still masked). A revising
// schedule's edit (LLaDA 2.1's token editing) outlines the cell of the forward that replaced the
// slot's token in blue, coloured by the new token's confidence. Red lines
// mark block boundaries. Slots that an early stop filled with EOS without decoding them are hatched
// in the last row. Panels of one picture share the vertical scale, so a decoder that needs fewer
// forwards draws a shorter panel. Written as SVG, or as PNG (png.hpp) when built with libpng.
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <dlm/core/error.hpp>
#include <dlm/core/result.hpp>

#include "files.hpp"
#include "scene.hpp"
#ifdef DLM_CLI_HAVE_PNG
#include "png.hpp"
#endif

namespace dlm::cli {

/// One decode to draw.
struct trace_run {
    std::string label;            ///< the panel's title, e.g. the preset name
    index_t block_length = 0;     ///< slots per block (1: autoregressive; gen_length: one block)
    sequence_result result;       ///< tokens, commit_forward, commit_confidence, stats
    std::vector<std::string> text;  ///< each slot's token text, for the SVG tooltips (may be empty)
};

namespace detail {

/// A tick step from 1, 2, 5, 10, 20, 50, ... that gives at most `max_ticks` ticks over `n`.
[[nodiscard]] inline index_t tick_step(index_t n, index_t max_ticks) {
    for (index_t m = 1;; m *= 10)
        for (index_t f : {1, 2, 5})
            if (n / (f * m) <= max_ticks) return f * m;
}

[[nodiscard]] inline std::string fixed2(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.2f", v);
    return b;
}

/// The edits of `run` (sequence_result::revisions) over its panel at x0: a cell in the row of the
/// forward that made each, coloured by the new token's confidence and outlined in blue.
inline void add_revisions(draw::scene& sc, const trace_run& run, double x0, double top, double cw, double ch, index_t forwards,
                          draw::rgb (*colour)(double)) {
    const auto& r = run.result;
    for (const revision& e : r.revisions) {
        const index_t slot = e.slot;
        if (slot < 0 || slot >= static_cast<index_t>(r.tokens.size()) || e.forward < 0 || e.forward >= forwards) continue;
        sc.rects.push_back({x0 + cw * static_cast<double>(slot), top + ch * static_cast<double>(e.forward), cw, ch, colour(e.confidence),
                            draw::palette::edited, std::max(1.0, std::min(cw, ch) / 5), false,
                            "slot " + std::to_string(slot) + ", forward " + std::to_string(e.forward + 1) + ": edited " +
                                std::to_string(e.old_token) + " -> " + std::to_string(e.new_token) + ", p = " + fixed2(e.confidence)});
    }
}

/// Where the panels of a trace picture go: cells of cw x ch, panels of panel_w side by side from `left`.
struct trace_geometry {
    double left = 64, top = 98, gap = 40, cw = 1, ch = 1, panel_w = 1, tallest = 1;
};

/// Run `i`'s panel: its label and rate, one cell per slot at the forward that committed it (the
/// slots committed earlier shaded below it), the edits, the block boundaries and the slot axis.
inline void add_trace_panel(draw::scene& sc, const trace_run& run, std::size_t i, const trace_geometry& g) {
    using namespace draw;
    const sequence_result& r = run.result;
    const double x0 = g.left + static_cast<double>(i) * (g.panel_w + g.gap), top = g.top, cw = g.cw, ch = g.ch, panel_w = g.panel_w;
    const index_t F = std::max<index_t>(1, r.stats.forwards);
    const double h = ch * static_cast<double>(F);
    const auto n = static_cast<index_t>(r.tokens.size());

    sc.texts.push_back({x0, top - 30, run.label, 13, anchor::start, true});
    sc.texts.push_back({x0 + panel_w, top - 30,
                        std::to_string(r.stats.forwards) + " forwards, " + fixed2(r.stats.tokens_per_forward()) + " tok/fwd", 11,
                        anchor::end, false, palette::muted});
    sc.rects.push_back({x0, top, panel_w, h, palette::white, std::nullopt});

    for (index_t s = 0; s < n; ++s) {
        const double x = x0 + cw * static_cast<double>(s);
        const index_t f = r.commit_forward[static_cast<std::size_t>(s)];
        const std::string tok = static_cast<std::size_t>(s) < run.text.size() ? run.text[static_cast<std::size_t>(s)] : std::string();
        if (f >= 0 && f < F) {
            const float p = r.commit_confidence[static_cast<std::size_t>(s)];
            sc.rects.push_back({x, top + ch * static_cast<double>(f), cw, ch, confidence_colour(p), std::nullopt, 1, false,
                                "slot " + std::to_string(s) + ", forward " + std::to_string(f + 1) + ": " +
                                    (tok.empty() ? std::string() : "'" + tok + "', ") + "p = " + fixed2(p)});
            if (f + 1 < F)
                sc.rects.push_back({x, top + ch * static_cast<double>(f + 1), cw, ch * static_cast<double>(F - f - 1), palette::earlier,
                                    std::nullopt});
        } else if (f < 0 && r.tokens[static_cast<std::size_t>(s)] >= 0 && r.stopped_early) {
            sc.rects.push_back({x, top + ch * static_cast<double>(F - 1), cw, ch, std::nullopt, std::nullopt, 1, true,
                                "slot " + std::to_string(s) + ": EOS fill after the early stop"});
        }
    }
    add_revisions(sc, run, x0, top, cw, ch, F, confidence_colour);
    sc.rects.push_back({x0, top, panel_w, h, std::nullopt, palette::muted, 1});

    // Block boundaries and the slot axis above the panel.
    const index_t B = run.block_length;
    const bool blocks = B > 1 && B < n;
    const index_t nb = blocks ? n / B : 1;
    const index_t every = blocks ? std::max<index_t>(1, tick_step(nb, std::max<index_t>(1, static_cast<index_t>(panel_w / 36))))
                                 : tick_step(n, std::max<index_t>(1, static_cast<index_t>(panel_w / 36)));
    if (blocks)
        for (index_t b = 1; b < nb; ++b) {
            const double x = x0 + cw * static_cast<double>(b * B);
            sc.lines.push_back({x, top - 3, x, top + h, palette::boundary, 1.5});
        }
    index_t last = 0;
    for (index_t t = 0; t <= n; t += blocks ? every * B : every) {
        sc.texts.push_back({x0 + cw * static_cast<double>(t), top - 8, std::to_string(t), 9, anchor::middle, false, palette::muted});
        last = t;
    }
    if (last != n && cw * static_cast<double>(n - last) >= 24)  // the end of the canvas, when it has room
        sc.texts.push_back({x0 + panel_w, top - 8, std::to_string(n), 9, anchor::middle, false, palette::muted});
}

/// The legend at x = lx: the confidence scale and the other cell kinds (an edited cell where `edited`).
/// Returns the y below its last line.
inline double add_trace_legend(draw::scene& sc, double lx, double top, double tallest, bool edited) {
    using namespace draw;
    const double bar_h = std::min(160.0, std::max(100.0, tallest));
    sc.texts.push_back({lx, top - 30, "confidence at commit", 11, anchor::start, true});
    constexpr int steps = 64;
    for (int j = 0; j < steps; ++j) {
        const double p = 1.0 - (static_cast<double>(j) + 0.5) / steps;
        sc.rects.push_back({lx, top + bar_h * j / steps, 16, bar_h / steps + 0.5, confidence_colour(p), std::nullopt});
    }
    sc.rects.push_back({lx, top, 16, bar_h, std::nullopt, palette::muted, 1});
    for (int j = 0; j <= 4; ++j) {
        const double y = top + bar_h * (1.0 - j / 4.0);
        sc.lines.push_back({lx + 16, y, lx + 20, y, palette::muted, 1});
        sc.texts.push_back({lx + 24, y + 3.5, fixed2(j / 4.0), 10, anchor::start, false, palette::muted});
    }
    double ly = top + bar_h + 24;
    const auto swatch = [&](rect r, const std::string& label) {
        r.x = lx, r.y = ly - 10, r.w = 16, r.h = 12;
        r.stroke = palette::muted;
        sc.rects.push_back(r);
        sc.texts.push_back({lx + 24, ly, label, 10, anchor::start, false, palette::ink});
        ly += 20;
    };
    swatch({0, 0, 0, 0, palette::earlier}, "committed earlier");
    swatch({0, 0, 0, 0, palette::white}, "still masked");
    swatch({0, 0, 0, 0, std::nullopt, std::nullopt, 1, true}, "EOS fill after early stop");
    if (edited) {
        swatch({0, 0, 0, 0, palette::white}, "token edited (outlined)");
        sc.rects.back().stroke = palette::edited;  // swatch drew it as the last rectangle
        sc.rects.back().stroke_width = 2;
    }
    sc.lines.push_back({lx, ly - 4, lx + 16, ly - 4, palette::boundary, 1.5});
    sc.texts.push_back({lx + 24, ly, "block boundary", 10, anchor::start, false, palette::ink});
    return ly + 20;
}

}  // namespace detail

/// The trace picture of `runs` (one panel each, side by side) under a title and a subtitle.
[[nodiscard]] inline draw::scene trace_scene(std::span<const trace_run> runs, const std::string& title, const std::string& subtitle) {
    using namespace draw;
    scene sc;
    const auto k = static_cast<index_t>(std::max<std::size_t>(runs.size(), 1));
    index_t gen = 1, max_forwards = 1;
    for (const auto& r : runs) {
        gen = std::max(gen, static_cast<index_t>(r.result.tokens.size()));
        max_forwards = std::max(max_forwards, r.result.stats.forwards);
    }
    cli::detail::trace_geometry g;
    const double left = g.left, top = g.top;
    const double width_budget = k == 1 ? 640 : std::max(960.0, 320.0 * static_cast<double>(k));
    const double per_panel = (width_budget - g.gap * static_cast<double>(k - 1)) / static_cast<double>(k);
    g.cw = std::clamp(std::floor(per_panel / static_cast<double>(gen)), 1.0, 16.0);
    g.ch = std::clamp(std::floor(440.0 / static_cast<double>(max_forwards)), 1.0, std::max(4.0, std::min(14.0, g.cw * 1.5)));
    g.panel_w = g.cw * static_cast<double>(gen);
    g.tallest = g.ch * static_cast<double>(max_forwards);

    sc.texts.push_back({left, 26, title, 16, anchor::start, true});
    sc.texts.push_back({left, 46, subtitle, 11, anchor::start, false, palette::muted});

    // The vertical axis (forwards), once, left of the first panel.
    const index_t ystep = cli::detail::tick_step(max_forwards, std::max<index_t>(2, static_cast<index_t>(g.tallest / 16)));
    for (index_t f = 0; f < max_forwards; ++f) {
        const index_t label = f + 1;
        // Forward 1, then every ystep-th (not so close to forward 1 that the labels touch).
        if (label != 1 && (label % ystep != 0 || static_cast<double>(label - 1) * g.ch < 12)) continue;
        const double y = top + (static_cast<double>(f) + 0.5) * g.ch;
        sc.texts.push_back({left - 8, y + 3.5, std::to_string(label), 10, anchor::end, false, palette::muted});
        sc.lines.push_back({left - 5, y, left - 1, y, palette::muted, 1});
    }
    sc.texts.push_back({left - 8, top - 8, "forward", 10, anchor::end, true, palette::muted});

    for (std::size_t i = 0; i < runs.size(); ++i) cli::detail::add_trace_panel(sc, runs[i], i, g);
    const double axis_y = top + g.tallest + 22;
    const double panels_right = left + static_cast<double>(k) * g.panel_w + static_cast<double>(k - 1) * g.gap;
    sc.texts.push_back({(left + panels_right) / 2, axis_y,
                        "generation slot (numbered above each panel; red lines: block boundaries)", 11, anchor::middle, false,
                        palette::muted});

    const double lx = panels_right + 30;
    const bool edited = std::any_of(runs.begin(), runs.end(), [](const trace_run& r) { return !r.result.revisions.empty(); });
    const double ly = cli::detail::add_trace_legend(sc, lx, top, g.tallest, edited);
    sc.width = std::max(lx + 190, left + 7.0 * static_cast<double>(std::max(title.size(), subtitle.size())) * 0.85);
    sc.height = std::max(axis_y + 16, ly + 8);
    return sc;
}

/// Writes the picture as SVG, or as PNG when the name ends in .png (parse_args refuses .png when
/// built without libpng). Throws dlm::file_error naming the file.
inline void write_trace(const std::filesystem::path& file, const draw::scene& sc) {
    std::string ext = file.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (ext == ".png") {
#ifdef DLM_CLI_HAVE_PNG
        write_png(file, sc);
        return;
#else
        throw file_error(file.string(), "this program was built without libpng; write .svg");
#endif
    }
    write_file(file, draw::to_svg(sc));
}

}  // namespace dlm::cli
