// dlm/io/pretokenizer_regex.hpp — the small regex engine behind tokenizer.json's Split pre-tokenizer.
//
// It implements the part of Oniguruma's syntax that byte-level BPE pre-tokenizers use (Qwen2, Llama 3,
// GPT-2, LLaDA, Ling): literals and escapes, character classes with \p{L} \p{N} \s and their negations,
// `.`, alternation, groups ((?:...), (?i:...), (?>...), named and plain), lookahead (?=...) (?!...),
// and the quantifiers ? * + {n} {n,} {n,m} in their greedy, lazy and possessive forms. Matching is
// leftmost-first with backtracking, as in Oniguruma. Anything else — anchors, back-references,
// lookbehind, \d \w, other Unicode properties — is refused with a pattern_error naming it, rather
// than matched differently from the reference.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "unicode.hpp"

namespace dlm::io::detail {

/// A pattern dlm cannot compile; the tokenizer turns it into a file_error naming the file.
class pattern_error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// How deep groups may nest (and how many quantifiers one atom may stack: 4), and how many instructions a pattern may compile
/// to. The pre-tokenizers dlm reads nest three groups and compile to a few hundred instructions; the
/// parser and the compiler recurse once per level, and {n,m} copies its operand, so a pattern past
/// either bound (a 400 KB one nested 100,000 deep, `(?:(?:(?:ab){1000}){1000}){1000}` in 35 bytes)
/// would overflow the stack or ask for gigabytes. It is refused instead.
inline constexpr int max_regex_depth = 64;
inline constexpr std::size_t max_regex_program = std::size_t{1} << 18;

/// A set of code points: ranges and Unicode classes, possibly negated as a whole.
struct char_set {
    enum class property : std::uint8_t { letter, number, space, any_but_newline };
    std::vector<std::pair<char32_t, char32_t>> ranges;
    std::vector<std::pair<property, bool>> properties;  // (class, negated)
    bool negated = false;
    std::array<std::uint64_t, 2> ascii{};  // membership of U+0000..U+007F, filled by finish()

    [[nodiscard]] static bool has(property p, char32_t c) {
        switch (p) {
            case property::letter: return is_letter(c);
            case property::number: return is_number(c);
            case property::space: return is_white_space(c);
            case property::any_but_newline: return c != '\n';
        }
        return false;
    }
    [[nodiscard]] bool slow_contains(char32_t c) const {
        bool in = false;
        for (const auto& [lo, hi] : ranges) in = in || (c >= lo && c <= hi);
        for (const auto& [p, neg] : properties) in = in || (has(p, c) != neg);
        return in != negated;
    }
    void finish() {
        for (char32_t c = 0; c < 128; ++c)
            if (slow_contains(c)) ascii[c >> 6] |= std::uint64_t{1} << (c & 63);
    }
    [[nodiscard]] bool contains(char32_t c) const {
        return c < 128 ? ((ascii[c >> 6] >> (c & 63)) & 1) != 0 : slow_contains(c);
    }
};

class pattern_regex {
public:
    explicit pattern_regex(std::string_view pattern) : pattern_(pattern) {
        parser p{*this, decode_utf8(pattern)};
        const int root = p.parse_alternation();
        if (p.pos != p.src.size()) p.fail("unbalanced ')'");
        compile(root);
        code_.push_back({op::match, 0, 0});
        for (auto& s : sets_) s.finish();
    }

    /// Calls `f(begin, end)` with the [begin, end) code point offsets of the successive matches in
    /// `text`, as the reference's find_iter yields them (an empty match right after a match is
    /// skipped), one at a time: nothing is held for the matches already passed.
    template <class F>
    void for_each_match(std::u32string_view text, F&& f) const {
        std::size_t from = 0;
        std::optional<std::size_t> last_match_end;
        std::vector<frame> stack;
        while (from <= text.size()) {
            std::optional<std::pair<std::size_t, std::size_t>> m;
            for (std::size_t s = from; s <= text.size() && !m; ++s)
                if (const auto e = run(text, 0, s, stack)) m.emplace(s, *e);
            if (!m) return;
            if (m->first == m->second && last_match_end == m->second) {
                from = m->second + 1;
                continue;
            }
            from = m->second;
            last_match_end = m->second;
            f(m->first, m->second);
        }
    }

    /// Appends the matches for_each_match finds.
    void find_all(std::u32string_view text, std::vector<std::pair<std::size_t, std::size_t>>& out) const {
        for_each_match(text, [&](std::size_t b, std::size_t e) { out.emplace_back(b, e); });
    }

    [[nodiscard]] const std::string& pattern() const noexcept { return pattern_; }

private:
    enum class op : std::uint8_t { set, run, split, jump, look, atomic, match };
    struct inst {
        op kind;
        int x, y;            // set: set index; split: preferred, other; jump: target;
                             // look / atomic: continuation (sub-program at pc + 1), y = negative
        int min = 0, max = 0;  // run: repetition bounds (max -1 = unbounded)
        bool possessive = false;
    };
    struct node {
        enum class kind : std::uint8_t { set, concat, alternation, repeat, look, atomic, empty } k;
        std::vector<int> children;
        int set = -1, min = 0, max = 0;  // max -1: unbounded
        bool greedy = true, possessive = false, negative = false;
    };
    struct frame {
        int pc;
        std::size_t pos;
        std::size_t low;  // run frames: the smallest position still to try; npos otherwise
    };

    struct parser {
        pattern_regex& re;
        std::u32string src;
        std::size_t pos = 0;
        bool icase = false;
        int depth = 0;  // groups open around pos

        /// One level deeper for the scope of the returned guard; refused past max_regex_depth.
        struct level {
            int& d;
            ~level() { --d; }
        };
        [[nodiscard]] level deeper() {
            if (++depth > max_regex_depth) {
                --depth;
                fail("groups nested more than " + std::to_string(max_regex_depth) + " deep");
            }
            return level{depth};
        }

        [[noreturn]] void fail(const std::string& what) const {
            throw pattern_error("regex " + re.quoted() + ": " + what + " (at character " + std::to_string(pos) +
                                "), which dlm's pre-tokenizer regex does not implement");
        }
        bool eat(char32_t c) {
            if (pos < src.size() && src[pos] == c) return ++pos, true;
            return false;
        }
        int add(node n) {
            re.nodes_.push_back(std::move(n));
            return static_cast<int>(re.nodes_.size()) - 1;
        }
        int add_set(char_set s) {
            re.sets_.push_back(std::move(s));
            node n{node::kind::set, {}};
            n.set = static_cast<int>(re.sets_.size()) - 1;
            return add(std::move(n));
        }
        int parse_alternation() {
            std::vector<int> alts{parse_concat()};
            while (eat('|')) alts.push_back(parse_concat());
            if (alts.size() == 1) return alts[0];
            return add({node::kind::alternation, std::move(alts)});
        }
        int parse_concat() {
            std::vector<int> items;
            while (pos < src.size() && src[pos] != '|' && src[pos] != ')') items.push_back(parse_quantified());
            if (items.empty()) return add({node::kind::empty, {}});
            if (items.size() == 1) return items[0];
            return add({node::kind::concat, std::move(items)});
        }
        int parse_quantified() {
            int atom = parse_atom();
            for (int stacked = 0;; ++stacked) {
                int mn = 0, mx = -1;
                if (eat('?')) mn = 0, mx = 1;
                else if (eat('*')) mn = 0, mx = -1;
                else if (eat('+')) mn = 1, mx = -1;
                else if (pos < src.size() && src[pos] == '{' && parse_braces(mn, mx)) {}
                else return atom;
                if (stacked == 4) fail("more than 4 quantifiers stacked on one atom");
                node n{node::kind::repeat, {atom}};
                n.min = mn, n.max = mx;
                if (eat('?')) n.greedy = false;
                else if (eat('+')) n.possessive = true;
                atom = add(std::move(n));
            }
        }
        bool parse_braces(int& mn, int& mx) {  // {n} {n,} {n,m} {,m}; anything else is a literal '{'
            std::size_t p = pos + 1;
            const auto number = [&](int& v) {
                const std::size_t start = p;
                long long acc = 0;
                while (p < src.size() && src[p] >= '0' && src[p] <= '9' && acc < 100000) acc = acc * 10 + (src[p++] - '0');
                v = static_cast<int>(acc);
                return p > start;
            };
            int a = 0, b = -1;
            const bool has_a = number(a);
            if (p < src.size() && src[p] == ',') {
                ++p;
                if (!number(b)) b = -1;
                else if (b < a) fail("a {n,m} quantifier with m < n");
            } else {
                if (!has_a) return false;
                b = a;
            }
            if (p >= src.size() || src[p] != '}') return false;
            if (a > 1000 || b > 1000) fail("a repetition count over 1000");
            pos = p + 1, mn = a, mx = b;
            return true;
        }
        int parse_atom() {
            const char32_t c = src[pos++];
            switch (c) {
                case '(': return parse_group();
                case '[': return add_set(parse_class());
                case '.': {
                    char_set s;
                    s.properties.emplace_back(char_set::property::any_but_newline, false);
                    return add_set(std::move(s));
                }
                case '\\': {
                    char_set s;
                    parse_escape(s);
                    return add_set(std::move(s));
                }
                case '^': case '$': --pos, fail("an anchor");
                case '*': case '+': case '?': --pos, fail("a quantifier with nothing to repeat");
                default: {
                    char_set s;
                    add_literal(s, c, c);
                    return add_set(std::move(s));
                }
            }
        }
        int parse_group() {
            const level in_group = deeper();
            const bool saved_icase = icase;
            node::kind k = node::kind::concat;
            bool negative = false;
            if (eat('?')) {
                if (eat(':')) {
                } else if (eat('=')) k = node::kind::look;
                else if (eat('!')) k = node::kind::look, negative = true;
                else if (eat('>')) k = node::kind::atomic;
                else if (pos < src.size() && src[pos] == '<' && pos + 1 < src.size() && src[pos + 1] != '=' &&
                         src[pos + 1] != '!') {
                    while (pos < src.size() && src[pos] != '>') ++pos;  // named group: the name is not needed
                    if (!eat('>')) fail("an unterminated group name");
                } else if (src.compare(pos, 2, U"i:") == 0) pos += 2, icase = true;
                else if (src.compare(pos, 2, U"i)") == 0) {  // (?i) holds to the end of the enclosing group
                    pos += 2, icase = true;
                    return add({node::kind::empty, {}});
                } else fail("a group construct other than (?:, (?i:, (?=, (?!, (?>");
            }
            const int inner = parse_alternation();
            if (!eat(')')) fail("an unterminated group");
            icase = saved_icase;
            if (k == node::kind::concat) return inner;
            node n{k, {inner}};
            n.negative = negative;
            return add(std::move(n));
        }
        char_set parse_class() {
            char_set s;
            if (eat('^')) s.negated = true;
            bool first = true;
            while (pos < src.size() && (src[pos] != ']' || first)) {
                first = false;
                if (src[pos] == '[') fail("a nested or POSIX character class");
                if (src.compare(pos, 2, U"&&") == 0) fail("a class intersection");
                char32_t lo = 0;
                if (src[pos] == '\\') {
                    ++pos;
                    if (!class_escape(s, lo)) continue;  // a class such as \p{L} was added
                } else {
                    lo = src[pos++];
                }
                char32_t hi = lo;
                if (pos + 1 < src.size() && src[pos] == '-' && src[pos + 1] != ']') {
                    ++pos;
                    if (src[pos] == '\\') {
                        ++pos;
                        if (!class_escape(s, hi)) fail("a range ending in a character class");
                    } else {
                        hi = src[pos++];
                    }
                    if (hi < lo) fail("a reversed range");
                }
                add_literal(s, lo, hi);
            }
            if (!eat(']')) fail("an unterminated character class");
            return s;
        }
        // After a backslash inside a class: a literal (returned in `c`, true) or a class (false).
        bool class_escape(char_set& s, char32_t& c) {
            if (pos >= src.size()) fail("a trailing backslash");
            if (const auto lit = escaped_literal()) return c = *lit, true;
            escape_class(s, src[pos++]);
            return false;
        }
        void parse_escape(char_set& s) {
            if (pos >= src.size()) fail("a trailing backslash");
            if (const auto lit = escaped_literal()) return add_literal(s, *lit, *lit);
            escape_class(s, src[pos++]);
        }
        std::optional<char32_t> escaped_literal() {
            const char32_t c = src[pos];
            switch (c) {
                case 't': ++pos; return U'\t';
                case 'n': ++pos; return U'\n';
                case 'r': ++pos; return U'\r';
                case 'f': ++pos; return U'\f';
                case 'v': ++pos; return U'\v';
                case 'a': ++pos; return U'\a';
                case 'e': ++pos; return char32_t{0x1B};
                case 'x': case 'u': {
                    ++pos;
                    const bool braces = eat('{');
                    const std::size_t max_digits = braces ? 8 : (c == 'x' ? 2 : 4);
                    char32_t v = 0;
                    std::size_t n = 0;
                    for (; n < max_digits && pos < src.size(); ++n, ++pos) {
                        const char32_t d = src[pos];
                        const int h = d >= '0' && d <= '9' ? int(d - '0') : (d | 0x20) >= 'a' && (d | 0x20) <= 'f' ? int((d | 0x20) - 'a' + 10) : -1;
                        if (h < 0) break;
                        v = v * 16 + static_cast<char32_t>(h);
                    }
                    if (n == 0 || (braces && !eat('}')) || v > 0x10FFFF) fail("a malformed \\x or \\u escape");
                    return v;
                }
                default: break;
            }
            if (c < 128 && !((c | 0x20) >= 'a' && (c | 0x20) <= 'z') && !(c >= '0' && c <= '9')) return ++pos, c;
            if (c >= 128) return ++pos, c;
            return std::nullopt;
        }
        void escape_class(char_set& s, char32_t c) {
            using property = char_set::property;
            switch (c) {
                case 's': s.properties.emplace_back(property::space, false); return;
                case 'S': s.properties.emplace_back(property::space, true); return;
                case 'p': case 'P': {
                    bool neg = c == 'P';
                    if (!eat('{')) fail("a \\p without braces");
                    if (eat('^')) neg = !neg;
                    std::u32string name;
                    while (pos < src.size() && src[pos] != '}') name.push_back(src[pos++]);
                    if (!eat('}')) fail("an unterminated \\p{...}");
                    if (name == U"L" || name == U"Letter") s.properties.emplace_back(property::letter, neg);
                    else if (name == U"N" || name == U"Number") s.properties.emplace_back(property::number, neg);
                    else fail("the Unicode property \\p{" + encode_utf8(name) + "} (only L and N are known)");
                    return;
                }
                default:
                    --pos;
                    fail(std::string("the escape \\") + static_cast<char>(c < 128 ? c : '?'));
            }
        }
        void add_literal(char_set& s, char32_t lo, char32_t hi) {
            s.ranges.emplace_back(lo, hi);
            if (!icase) return;
            for (char32_t c = lo; c <= hi && c < 0x80; ++c) {
                if (!((c | 0x20) >= 'a' && (c | 0x20) <= 'z')) continue;
                s.ranges.emplace_back(c ^ 0x20, c ^ 0x20);
                if ((c | 0x20) == 's') s.ranges.emplace_back(0x17F, 0x17F);   // ſ folds to s
                if ((c | 0x20) == 'k') s.ranges.emplace_back(0x212A, 0x212A); // the Kelvin sign folds to k
            }
            for (char32_t c = std::max<char32_t>(lo, 0x80); c <= hi; ++c)
                if (is_letter(c)) fail("case-insensitive matching of a non-ASCII letter");
        }
    };

    [[nodiscard]] bool nullable(int n) const {
        const node& x = nodes_[static_cast<std::size_t>(n)];
        switch (x.k) {
            case node::kind::set: return false;
            case node::kind::concat:
                for (const int c : x.children) if (!nullable(c)) return false;
                return true;
            case node::kind::alternation:
                for (const int c : x.children) if (nullable(c)) return true;
                return false;
            case node::kind::repeat: return x.min == 0 || nullable(x.children[0]);
            case node::kind::atomic: return nullable(x.children[0]);
            case node::kind::look: case node::kind::empty: return true;
        }
        return true;
    }
    int emit(inst i) {
        if (code_.size() >= max_regex_program)
            throw pattern_error("regex " + quoted() + ": compiles to more than " + std::to_string(max_regex_program) +
                                " instructions (its counted repetitions multiply), which dlm's pre-tokenizer regex does not implement");
        code_.push_back(i);
        return static_cast<int>(code_.size()) - 1;
    }
    int here() const { return static_cast<int>(code_.size()); }

    void compile(int n) {
        const node x = nodes_[static_cast<std::size_t>(n)];
        switch (x.k) {
            case node::kind::empty: return;
            case node::kind::set: emit({op::set, x.set, 0}); return;
            case node::kind::concat:
                for (const int c : x.children) compile(c);
                return;
            case node::kind::alternation: {
                std::vector<int> jumps;
                for (std::size_t i = 0; i + 1 < x.children.size(); ++i) {
                    const int split = emit({op::split, 0, 0});
                    code_[static_cast<std::size_t>(split)].x = here();
                    compile(x.children[i]);
                    jumps.push_back(emit({op::jump, 0, 0}));
                    code_[static_cast<std::size_t>(split)].y = here();
                }
                compile(x.children.back());
                for (const int j : jumps) code_[static_cast<std::size_t>(j)].x = here();
                return;
            }
            case node::kind::look: case node::kind::atomic: {
                const int at = emit({x.k == node::kind::look ? op::look : op::atomic, 0, x.negative ? 1 : 0});
                compile(x.children[0]);
                emit({op::match, 0, 0});
                code_[static_cast<std::size_t>(at)].x = here();
                return;
            }
            case node::kind::repeat: compile_repeat(x); return;
        }
    }
    void compile_repeat(const node& x) {
        const int child = x.children[0];
        const node& c = nodes_[static_cast<std::size_t>(child)];
        if (c.k == node::kind::set && (x.greedy || x.possessive)) {
            inst i{op::run, c.set, 0};
            i.min = x.min, i.max = x.max, i.possessive = x.possessive;
            emit(i);
            return;
        }
        if (x.max < 0 && nullable(child)) throw pattern_error("regex " + quoted() + ": an unbounded repetition of something that can match empty, which dlm's pre-tokenizer regex does not implement");
        if (x.possessive) {  // x*+ is (?>x*)
            node greedy = x;
            greedy.possessive = false;
            const int at = emit({op::atomic, 0, 0});
            compile_repeat(greedy);
            emit({op::match, 0, 0});
            code_[static_cast<std::size_t>(at)].x = here();
            return;
        }
        for (int i = 0; i < x.min; ++i) compile(child);
        const auto optional_copy = [&](bool loop) {
            const int split = emit({op::split, 0, 0});
            const int body = here();
            compile(child);
            if (loop) emit({op::jump, split, 0});
            const int out = here();
            code_[static_cast<std::size_t>(split)].x = x.greedy ? body : out;
            code_[static_cast<std::size_t>(split)].y = x.greedy ? out : body;
            return out;
        };
        if (x.max < 0) {
            optional_copy(true);
        } else {
            for (int i = x.min; i < x.max; ++i) optional_copy(false);
        }
    }

    // Runs the program from `pc` at `pos`; the end of the first (highest-priority) match, if any.
    std::optional<std::size_t> run(std::u32string_view t, int pc, std::size_t pos, std::vector<frame>& stack) const {
        const std::size_t base = stack.size();
        constexpr std::size_t npos = static_cast<std::size_t>(-1);
        for (;;) {
            const inst& i = code_[static_cast<std::size_t>(pc)];
            bool ok = true;
            switch (i.kind) {
                case op::set:
                    if (pos < t.size() && sets_[static_cast<std::size_t>(i.x)].contains(t[pos])) ++pos, ++pc;
                    else ok = false;
                    break;
                case op::run: {
                    const char_set& s = sets_[static_cast<std::size_t>(i.x)];
                    std::size_t n = 0;
                    while (pos + n < t.size() && (i.max < 0 || n < static_cast<std::size_t>(i.max)) && s.contains(t[pos + n])) ++n;
                    if (n < static_cast<std::size_t>(i.min)) {
                        ok = false;
                        break;
                    }
                    if (!i.possessive && n > static_cast<std::size_t>(i.min))
                        stack.push_back({pc + 1, pos + n - 1, pos + static_cast<std::size_t>(i.min)});
                    pos += n, ++pc;
                    break;
                }
                case op::split: stack.push_back({i.y, pos, npos}); pc = i.x; break;
                case op::jump: pc = i.x; break;
                case op::match: stack.resize(base); return pos;
                case op::look: {
                    const bool found = run(t, pc + 1, pos, stack).has_value();
                    if (found != (i.y != 0)) pc = i.x;
                    else ok = false;
                    break;
                }
                case op::atomic: {
                    if (const auto end = run(t, pc + 1, pos, stack)) pos = *end, pc = i.x;
                    else ok = false;
                    break;
                }
            }
            if (ok) continue;
            if (stack.size() == base) return std::nullopt;
            frame f = stack.back();
            stack.pop_back();
            if (f.low != npos && f.pos > f.low) stack.push_back({f.pc, f.pos - 1, f.low});
            pc = f.pc, pos = f.pos;
        }
    }

    /// The pattern as an error message quotes it: cut after 80 bytes (a refused one may be 400 KB).
    [[nodiscard]] std::string quoted() const {
        if (pattern_.size() <= 80) return pattern_;
        std::size_t cut = 77;
        while (cut > 0 && (static_cast<unsigned char>(pattern_[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 sequence
        return pattern_.substr(0, cut) + "...";
    }

    std::string pattern_;
    std::vector<node> nodes_;
    std::vector<char_set> sets_;
    std::vector<inst> code_;
};

}  // namespace dlm::io::detail
