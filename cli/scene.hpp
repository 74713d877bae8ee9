// cli/scene.hpp — a tiny 2-D scene (rectangles, lines, text) written as SVG by hand, and
// the confidence colour scale of the trace pictures. png.hpp rasterizes the same scene.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <dlm/io/unicode.hpp>

namespace dlm::cli::draw {

struct rgb {
    std::uint8_t r = 0, g = 0, b = 0;
};

[[nodiscard]] inline std::string hex(rgb c) {
    char s[8];
    std::snprintf(s, sizeof s, "#%02x%02x%02x", c.r, c.g, c.b);
    return s;
}

[[nodiscard]] inline rgb mix(rgb a, rgb b, double t) {
    const auto m = [t](std::uint8_t x, std::uint8_t y) {
        return static_cast<std::uint8_t>(std::lround(static_cast<double>(x) + (static_cast<double>(y) - static_cast<double>(x)) * t));
    };
    return {m(a.r, b.r), m(a.g, b.g), m(a.b, b.b)};
}

/// The colour of a confidence in [0, 1]: a perceptually ordered dark-purple → blue → green →
/// yellow scale (the stops of matplotlib's viridis at 0, 1/4, 1/2, 3/4, 1), linear in between.
[[nodiscard]] inline rgb confidence_colour(double p) {
    static constexpr std::array<rgb, 5> stops = {rgb{0x44, 0x01, 0x54}, rgb{0x3b, 0x52, 0x8b}, rgb{0x21, 0x91, 0x8c},
                                                 rgb{0x5e, 0xc9, 0x62}, rgb{0xfd, 0xe7, 0x25}};
    const double x = std::clamp(std::isfinite(p) ? p : 0.0, 0.0, 1.0) * 4.0;
    const auto i = std::min<std::size_t>(3, static_cast<std::size_t>(x));
    return mix(stops[i], stops[i + 1], x - static_cast<double>(i));
}

namespace palette {
inline constexpr rgb white{255, 255, 255};
inline constexpr rgb ink{0x22, 0x22, 0x22};
inline constexpr rgb muted{0x66, 0x66, 0x66};
inline constexpr rgb grid{0xcc, 0xcc, 0xcc};
inline constexpr rgb earlier{0xe3, 0xe3, 0xe3};  ///< committed at an earlier forward
inline constexpr rgb boundary{0xd6, 0x27, 0x28};  ///< block boundaries
inline constexpr rgb edited{0x1f, 0x4f, 0xd6};    ///< the outline of a token-to-token edit (a revising schedule)
inline constexpr rgb hatch_bg{0xf4, 0xf4, 0xf4};
inline constexpr rgb hatch_fg{0x99, 0x99, 0x99};
}  // namespace palette

enum class anchor { start, middle, end };

struct rect {
    double x = 0, y = 0, w = 0, h = 0;
    std::optional<rgb> fill = {};
    std::optional<rgb> stroke = {};
    double stroke_width = 1;
    bool hatch = false;   ///< diagonal hatching (drawn over a light fill)
    std::string tooltip = {};  ///< SVG <title>; ignored by the raster
};

struct line {
    double x1 = 0, y1 = 0, x2 = 0, y2 = 0;
    rgb colour = palette::ink;
    double width = 1;
};

struct text {
    double x = 0, y = 0;  ///< y is the baseline
    std::string s;
    double size = 12;
    anchor at = anchor::start;
    bool bold = false;
    rgb colour = palette::ink;
};

/// Drawn in order: rectangles, then lines, then text.
struct scene {
    double width = 0, height = 0;
    std::vector<rect> rects;
    std::vector<line> lines;
    std::vector<text> texts;
};

namespace detail {

[[nodiscard]] inline std::string num(double v) {
    char s[32];
    std::snprintf(s, sizeof s, "%.2f", v);
    std::string out = s;
    out.erase(out.find_last_not_of('0') + 1);
    if (out.back() == '.') out.pop_back();
    return out == "-0" ? "0" : out;
}

/// Text made safe for XML character data and attribute values: bytes that are not UTF-8 become
/// U+FFFD (a prompt may hold them), and those that cannot appear in XML 1.0 (control characters
/// other than tab, newline, carriage return) are dropped.
[[nodiscard]] inline std::string xml_escape(std::string_view s) {
    std::string out;
    for (char c : io::detail::to_valid_utf8(s)) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            case '\'': out += "&apos;"; break;
            default:
                if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n' || c == '\r') out += c;
        }
    }
    return out;
}

}  // namespace detail

/// The scene as a standalone SVG document (it starts with "<svg").
[[nodiscard]] inline std::string to_svg(const scene& sc) {
    using detail::num;
    std::string o;
    o += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(sc.width) + "\" height=\"" + num(sc.height) + "\" viewBox=\"0 0 " +
         num(sc.width) + " " + num(sc.height) + "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n";
    o += "<defs><pattern id=\"hatch\" width=\"4\" height=\"4\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
         "<rect width=\"4\" height=\"4\" fill=\"" + hex(palette::hatch_bg) + "\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"4\" stroke=\"" +
         hex(palette::hatch_fg) + "\" stroke-width=\"1.5\"/></pattern></defs>\n";
    o += "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
    for (const rect& r : sc.rects) {
        o += "<rect x=\"" + num(r.x) + "\" y=\"" + num(r.y) + "\" width=\"" + num(r.w) + "\" height=\"" + num(r.h) + "\" fill=\"" +
             (r.hatch ? std::string("url(#hatch)") : r.fill ? hex(*r.fill) : std::string("none")) + "\"";
        if (r.stroke) o += " stroke=\"" + hex(*r.stroke) + "\" stroke-width=\"" + num(r.stroke_width) + "\"";
        if (r.tooltip.empty()) {
            o += "/>\n";
        } else {
            o += "><title>" + detail::xml_escape(r.tooltip) + "</title></rect>\n";
        }
    }
    for (const line& l : sc.lines)
        o += "<line x1=\"" + num(l.x1) + "\" y1=\"" + num(l.y1) + "\" x2=\"" + num(l.x2) + "\" y2=\"" + num(l.y2) + "\" stroke=\"" +
             hex(l.colour) + "\" stroke-width=\"" + num(l.width) + "\"/>\n";
    for (const text& t : sc.texts) {
        o += "<text x=\"" + num(t.x) + "\" y=\"" + num(t.y) + "\" font-size=\"" + num(t.size) + "\"";
        if (t.at != anchor::start) o += std::string(" text-anchor=\"") + (t.at == anchor::middle ? "middle" : "end") + "\"";
        if (t.bold) o += " font-weight=\"bold\"";
        if (t.colour.r != palette::ink.r || t.colour.g != palette::ink.g || t.colour.b != palette::ink.b) o += " fill=\"" + hex(t.colour) + "\"";
        o += '>';
        o += detail::xml_escape(t.s);
        o += "</text>\n";
    }
    o += "</svg>\n";
    return o;
}

}  // namespace dlm::cli::draw
