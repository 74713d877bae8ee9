// cli/png.hpp — rasterizes a draw::scene and writes it as PNG with libpng (built only when
// CMake finds libpng: DLM_CLI_HAVE_PNG). Rectangles and lines are axis-aligned pixel fills (the
// trace is a grid); text uses a built-in 3x5 pixel font of ASCII capitals, digits and punctuation
// (lower case is drawn in capitals), scaled to the text size.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <png.h>

#include <dlm/core/error.hpp>

#include "scene.hpp"

namespace dlm::cli {

namespace detail {

/// A glyph: five rows of three pixels, "1" = ink, written top row first.
struct glyph {
    char c;
    const char* rows;  // 15 characters
};

// clang-format off
inline constexpr glyph font3x5[] = {
    {'0', "111101101101111"}, {'1', "010110010010111"}, {'2', "111001111100111"}, {'3', "111001111001111"},
    {'4', "101101111001001"}, {'5', "111100111001111"}, {'6', "111100111101111"}, {'7', "111001001001001"},
    {'8', "111101111101111"}, {'9', "111101111001111"},
    {'A', "010101111101101"}, {'B', "110101110101110"}, {'C', "011100100100011"}, {'D', "110101101101110"},
    {'E', "111100110100111"}, {'F', "111100110100100"}, {'G', "011100101101011"}, {'H', "101101111101101"},
    {'I', "111010010010111"}, {'J', "001001001101010"}, {'K', "101101110101101"}, {'L', "100100100100111"},
    {'M', "101111111101101"}, {'N', "110101101101101"}, {'O', "010101101101010"}, {'P', "110101110100100"},
    {'Q', "010101101110011"}, {'R', "110101110101101"}, {'S', "011100010001110"}, {'T', "111010010010010"},
    {'U', "101101101101111"}, {'V', "101101101101010"}, {'W', "101101111111101"}, {'X', "101101010101101"},
    {'Y', "101101010010010"}, {'Z', "111001010100111"},
    {'.', "000000000000010"}, {',', "000000000010100"}, {':', "000010000010000"}, {';', "000010000010100"},
    {'-', "000000111000000"}, {'+', "000010111010000"}, {'=', "000111000111000"}, {'(', "001010010010001"},
    {')', "100010010010100"}, {'/', "001001010100100"}, {'%', "101001010100101"}, {'\'', "010010000000000"},
    {'"', "101101000000000"}, {'#', "101111101111101"}, {'[', "011010010010011"}, {']', "110010010010110"},
    {'<', "001010100010001"}, {'>', "100010001010100"}, {'_', "000000000000111"}, {'?', "111001010000010"},
    {'!', "010010010000010"}, {'|', "010010010010010"}, {'*', "000101010101000"}, {'~', "000011110000000"},
    {'&', "010101010101011"}, {'@', "111101111100011"}, {'{', "011010110010011"}, {'}', "110010011010110"},
    {'^', "010101000000000"}, {'`', "100010000000000"}, {'$', "011110010011110"}, {'\\', "100100010001001"},
};
// clang-format on

inline const char* glyph_rows(char c) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    for (const glyph& g : font3x5)
        if (g.c == c) return g.rows;
    return nullptr;
}

/// UTF-8 text as the font's characters: common typographic characters become ASCII look-alikes,
/// anything else a '?'.
inline std::string to_font_text(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x80) {
            out += static_cast<char>(c);
            ++i;
            continue;
        }
        std::size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        const std::string_view cp = s.substr(i, len);
        if (cp == "—" || cp == "–" || cp == "−") out += '-';
        else if (cp == "·" || cp == "•") out += '.';
        else if (cp == "→") out += "->";
        else if (cp == "↓") out += 'v';
        else if (cp == "≥") out += ">=";
        else if (cp == "“" || cp == "”") out += '"';
        else if (cp == "‘" || cp == "’") out += '\'';
        else out += '?';
        i += len;
    }
    return out;
}

/// An RGB image.
class raster {
public:
    raster(int w, int h) : w_(w), h_(h), px_(static_cast<std::size_t>(w) * static_cast<std::size_t>(h) * 3, 255) {}

    [[nodiscard]] int width() const noexcept { return w_; }
    [[nodiscard]] int height() const noexcept { return h_; }
    [[nodiscard]] const std::uint8_t* data() const noexcept { return px_.data(); }

    void set(int x, int y, draw::rgb c) {
        if (x < 0 || y < 0 || x >= w_ || y >= h_) return;
        std::uint8_t* p = &px_[(static_cast<std::size_t>(y) * static_cast<std::size_t>(w_) + static_cast<std::size_t>(x)) * 3];
        p[0] = c.r, p[1] = c.g, p[2] = c.b;
    }

    /// Pixels [x0, x1) x [y0, y1), from scene coordinates rounded to the nearest pixel edge.
    void fill(double x0, double y0, double x1, double y1, draw::rgb c, bool hatch = false) {
        const int a = static_cast<int>(std::lround(x0)), b = static_cast<int>(std::lround(y0));
        const int e = std::max(a + 1, static_cast<int>(std::lround(x1))), f = std::max(b + 1, static_cast<int>(std::lround(y1)));
        for (int y = b; y < f; ++y)
            for (int x = a; x < e; ++x) set(x, y, hatch && (x + y) % 6 < 2 ? draw::palette::hatch_fg : c);
    }

    /// A line of `width` pixels (axis-aligned lines are exact; others are stepped).
    void line(double x1, double y1, double x2, double y2, draw::rgb c, double width) {
        const double half = std::max(0.5, width / 2);
        const double len = std::max(std::abs(x2 - x1), std::abs(y2 - y1));
        const int n = std::max(1, static_cast<int>(std::ceil(len)));
        if (x1 == x2 || y1 == y2) {
            fill(std::min(x1, x2) - (x1 == x2 ? half : 0), std::min(y1, y2) - (y1 == y2 ? half : 0),
                 std::max(x1, x2) + (x1 == x2 ? half : 0), std::max(y1, y2) + (y1 == y2 ? half : 0), c);
            return;
        }
        for (int i = 0; i <= n; ++i) {
            const double t = static_cast<double>(i) / n;
            const double x = x1 + (x2 - x1) * t, y = y1 + (y2 - y1) * t;
            fill(x - half, y - half, x + half, y + half, c);
        }
    }

    /// Text with its baseline at y; glyphs are 3x5 cells of `scale` pixels, advancing 4 cells.
    void text(double x, double y, std::string_view utf8, int scale, draw::anchor at, draw::rgb c, bool bold) {
        const std::string s = to_font_text(utf8);
        const double w = static_cast<double>(s.size()) * 4 * scale - scale;
        double left = at == draw::anchor::start ? x : at == draw::anchor::middle ? x - w / 2 : x - w;
        const int x0 = static_cast<int>(std::lround(left)), y0 = static_cast<int>(std::lround(y)) - 5 * scale;
        for (std::size_t i = 0; i < s.size(); ++i) {
            const char* rows = glyph_rows(s[i]);
            if (!rows && s[i] != ' ') rows = glyph_rows('?');
            if (!rows) continue;
            for (int r = 0; r < 5; ++r)
                for (int k = 0; k < 3; ++k)
                    if (rows[r * 3 + k] == '1') {
                        const int gx = x0 + static_cast<int>(i) * 4 * scale + k * scale, gy = y0 + r * scale;
                        for (int dy = 0; dy < scale; ++dy)
                            for (int dx = 0; dx < scale + (bold ? 1 : 0); ++dx) set(gx + dx, gy + dy, c);
                    }
        }
    }

private:
    int w_, h_;
    std::vector<std::uint8_t> px_;
};

}  // namespace detail

/// The scene drawn at `zoom` pixels per scene unit.
[[nodiscard]] inline detail::raster rasterize(const draw::scene& sc, double zoom = 2.0) {
    detail::raster img(static_cast<int>(std::ceil(sc.width * zoom)), static_cast<int>(std::ceil(sc.height * zoom)));
    for (const draw::rect& r : sc.rects) {
        const double x0 = r.x * zoom, y0 = r.y * zoom, x1 = (r.x + r.w) * zoom, y1 = (r.y + r.h) * zoom;
        if (r.hatch) img.fill(x0, y0, x1, y1, draw::palette::hatch_bg, true);
        else if (r.fill) img.fill(x0, y0, x1, y1, *r.fill);
        if (r.stroke) {
            const double sw = std::max(1.0, r.stroke_width * zoom);
            img.fill(x0, y0, x1, y0 + sw, *r.stroke);
            img.fill(x0, y1 - sw, x1, y1, *r.stroke);
            img.fill(x0, y0, x0 + sw, y1, *r.stroke);
            img.fill(x1 - sw, y0, x1, y1, *r.stroke);
        }
    }
    for (const draw::line& l : sc.lines) img.line(l.x1 * zoom, l.y1 * zoom, l.x2 * zoom, l.y2 * zoom, l.colour, l.width * zoom);
    for (const draw::text& t : sc.texts) {
        // A 3x5 glyph whose capitals are about 0.7 of the font size tall.
        const int scale = std::max(1, static_cast<int>(std::lround(t.size * zoom * 0.7 / 5)));
        img.text(t.x * zoom, t.y * zoom, t.s, scale, t.at, t.colour, t.bold);
    }
    return img;
}

/// Writes the scene as an 8-bit RGB PNG. Throws dlm::file_error naming the file.
inline void write_png(const std::filesystem::path& file, const draw::scene& sc) {
    const detail::raster img = rasterize(sc);
    png_image image{};
    image.version = PNG_IMAGE_VERSION;
    image.width = static_cast<png_uint_32>(img.width());
    image.height = static_cast<png_uint_32>(img.height());
    image.format = PNG_FORMAT_RGB;
    if (!png_image_write_to_file(&image, file.c_str(), 0, img.data(), 0, nullptr)) {
        const std::string why = image.message[0] ? image.message : "libpng could not write it";
        png_image_free(&image);
        throw file_error(file.string(), why);
    }
}

}  // namespace dlm::cli
