// dlm/io/bpe.hpp — the BPE model of a tokenizer.json ("model": {"type": "BPE", ...}) and the GPT-2
// byte <-> character map that byte-level pre-tokenizers and decoders share.
//
// Merges are applied by rank exactly as the HF tokenizers library does it: a min-heap of candidate
// pairs ordered by (rank, position), stale entries skipped. Words already seen are cached.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../core/config.hpp"
#include "unicode.hpp"

namespace dlm::io::detail {

/// GPT-2's reversible map from bytes to printable characters (bytes_to_unicode): printable Latin-1
/// bytes map to themselves, the others to U+0100 onwards in byte order.
class byte_level_map {
public:
    byte_level_map() {
        char32_t next = 0x100;
        for (unsigned b = 0; b < 256; ++b) {
            const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            const char32_t c = printable ? b : next++;
            to_char_[b].clear();
            append_utf8(to_char_[b], c);
            from_char_[c] = static_cast<unsigned char>(b);
        }
    }
    [[nodiscard]] static const byte_level_map& get() {
        static const byte_level_map m;
        return m;
    }
    /// The UTF-8 of the character standing for byte `b`.
    [[nodiscard]] const std::string& encode(unsigned char b) const { return to_char_[b]; }
    /// The byte a character stands for, if it is one of the 256.
    [[nodiscard]] std::optional<unsigned char> decode(char32_t c) const {
        if (c >= from_char_.size() || (from_char_[c] == 0 && c != 0x100)) return std::nullopt;
        return from_char_[c];
    }
    /// `s` with every byte replaced by its character.
    [[nodiscard]] std::string encode_all(std::string_view s) const {
        std::string out;
        out.reserve(s.size() * 2);
        for (const char c : s) out += to_char_[static_cast<unsigned char>(c)];
        return out;
    }

private:
    std::array<std::string, 256> to_char_;
    std::array<unsigned char, 0x144> from_char_{};  // every mapped character is below U+0144
};

struct bpe_options {
    std::optional<std::string> unk_token;
    std::string continuing_subword_prefix, end_of_word_suffix;
    bool fuse_unk = false, byte_fallback = false, ignore_merges = false;
};

class bpe_model {
public:
    bpe_model() = default;
    bpe_model(const bpe_model& o) : vocab_(o.vocab_), merges_(o.merges_), options_(o.options_) {}
    bpe_model(bpe_model&& o) noexcept : vocab_(std::move(o.vocab_)), merges_(std::move(o.merges_)), options_(std::move(o.options_)) {}
    bpe_model& operator=(bpe_model o) noexcept {
        vocab_ = std::move(o.vocab_), merges_ = std::move(o.merges_), options_ = std::move(o.options_);
        std::lock_guard lock(cache_mutex_);
        cache_.clear();
        return *this;
    }

    /// Builds the model. `merges` are (left, right) token strings in rank order. Returns an error
    /// message, or an empty string on success.
    std::string build(std::unordered_map<std::string, token_id> vocab,
                      const std::vector<std::pair<std::string, std::string>>& merges, bpe_options options) {
        vocab_ = std::move(vocab);
        options_ = std::move(options);
        merges_.clear();
        merges_.reserve(merges.size());
        const std::size_t prefix = options_.continuing_subword_prefix.size();
        for (std::size_t rank = 0; rank < merges.size(); ++rank) {
            const auto& [a, b] = merges[rank];
            const auto ia = vocab_.find(a), ib = vocab_.find(b);
            if (ia == vocab_.end() || ib == vocab_.end())
                return "merges[" + std::to_string(rank) + "] (\"" + a + "\", \"" + b + "\") uses a token missing from the vocab";
            const std::string_view tail =
                prefix != 0 && std::string_view(b).substr(0, prefix) == options_.continuing_subword_prefix
                    ? std::string_view(b).substr(prefix) : std::string_view(b);
            const auto merged = vocab_.find(a + std::string(tail));
            if (merged == vocab_.end())
                return "merges[" + std::to_string(rank) + "] (\"" + a + "\", \"" + b + "\") makes a token missing from the vocab";
            // A repeated pair keeps its last rank, as the reference's map does.
            merges_.insert_or_assign(key(ia->second, ib->second), merge_info{static_cast<std::uint32_t>(rank), merged->second});
        }
        if (options_.unk_token && !vocab_.count(*options_.unk_token))
            return "unk_token \"" + *options_.unk_token + "\" is not in the vocab";
        std::lock_guard lock(cache_mutex_);
        cache_.clear();
        return {};
    }

    [[nodiscard]] const std::unordered_map<std::string, token_id>& vocab() const noexcept { return vocab_; }

    /// Appends the ids of one pre-tokenized word.
    void tokenize(std::string_view word, std::vector<token_id>& out) const {
        if (word.empty()) return;
        const bool cacheable = word.size() < max_cached_length;
        if (cacheable) {
            std::lock_guard lock(cache_mutex_);
            if (const auto it = cache_.find(std::string(word)); it != cache_.end()) {
                out.insert(out.end(), it->second.begin(), it->second.end());
                return;
            }
        }
        std::vector<token_id> ids = merge_word(word);
        out.insert(out.end(), ids.begin(), ids.end());
        if (cacheable) {
            std::lock_guard lock(cache_mutex_);
            if (cache_.size() >= max_cache_entries) cache_.clear();
            cache_.emplace(std::string(word), std::move(ids));
        }
    }

private:
    static constexpr std::size_t max_cached_length = 256, max_cache_entries = 1 << 16;
    struct merge_info {
        std::uint32_t rank;
        token_id id;
    };
    struct symbol {
        token_id id;
        std::ptrdiff_t prev, next;
        bool removed;
    };
    struct candidate {
        std::uint32_t rank;
        std::size_t pos;
        token_id id;
        bool operator<(const candidate& o) const {  // priority_queue top = lowest rank, then leftmost
            return rank != o.rank ? rank > o.rank : pos > o.pos;
        }
    };
    static std::uint64_t key(token_id a, token_id b) {
        return (std::uint64_t(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
    }
    [[nodiscard]] const merge_info* find_merge(token_id a, token_id b) const {
        const auto it = merges_.find(key(a, b));
        return it == merges_.end() ? nullptr : &it->second;
    }

    [[nodiscard]] std::vector<token_id> merge_word(std::string_view w) const {
        if (options_.ignore_merges)
            if (const auto it = vocab_.find(std::string(w)); it != vocab_.end()) return {it->second};
        // Initial symbols: one per character (with prefix / suffix), unknown ones per the options.
        std::vector<token_id> ids;
        std::optional<std::pair<token_id, std::size_t>> unk;  // pending unknown run (id, bytes)
        std::size_t i = 0;
        while (i < w.size()) {
            const std::size_t start = i;
            (void)next_code_point(w, i);
            std::string s(w.substr(start, i - start));
            const std::size_t bytes = s.size();
            if (start != 0) s = options_.continuing_subword_prefix + s;
            if (i == w.size()) s += options_.end_of_word_suffix;
            if (const auto it = vocab_.find(s); it != vocab_.end()) {
                if (unk) ids.push_back(unk->first), unk.reset();
                ids.push_back(it->second);
                continue;
            }
            if (options_.byte_fallback) {
                std::vector<token_id> bytes_ids;
                for (const char c : s) {
                    static constexpr char hex[] = "0123456789ABCDEF";
                    const auto b = static_cast<unsigned char>(c);
                    const auto it = vocab_.find(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
                    if (it == vocab_.end()) break;
                    bytes_ids.push_back(it->second);
                }
                if (bytes_ids.size() == s.size()) {
                    // As in the reference, a pending unknown run is not flushed here (only by a known token).
                    ids.insert(ids.end(), bytes_ids.begin(), bytes_ids.end());
                    continue;
                }
            }
            if (options_.unk_token) {
                const token_id unk_id = vocab_.at(*options_.unk_token);
                if (unk && options_.fuse_unk) unk->second += bytes;
                else {
                    if (unk) ids.push_back(unk->first);
                    unk.emplace(unk_id, bytes);
                }
            }
        }
        if (unk) ids.push_back(unk->first);
        return apply_merges(ids);
    }

    [[nodiscard]] std::vector<token_id> apply_merges(const std::vector<token_id>& ids) const {
        if (ids.size() < 2) return ids;
        std::vector<symbol> sym(ids.size());
        for (std::size_t k = 0; k < ids.size(); ++k)
            sym[k] = {ids[k], static_cast<std::ptrdiff_t>(k) - 1,
                      k + 1 < ids.size() ? static_cast<std::ptrdiff_t>(k + 1) : -1, false};
        std::priority_queue<candidate> queue;
        for (std::size_t k = 0; k + 1 < ids.size(); ++k)
            if (const auto* m = find_merge(ids[k], ids[k + 1])) queue.push({m->rank, k, m->id});
        while (!queue.empty()) {
            const candidate top = queue.top();
            queue.pop();
            symbol& cur = sym[top.pos];
            if (cur.removed || cur.next < 0) continue;
            const auto next_pos = static_cast<std::size_t>(cur.next);
            const auto* m = find_merge(cur.id, sym[next_pos].id);
            if (m == nullptr || m->id != top.id) continue;  // a stale entry
            cur.id = top.id;
            cur.next = sym[next_pos].next;
            sym[next_pos].removed = true;
            if (cur.next >= 0) sym[static_cast<std::size_t>(cur.next)].prev = static_cast<std::ptrdiff_t>(top.pos);
            if (cur.prev >= 0)
                if (const auto* p = find_merge(sym[static_cast<std::size_t>(cur.prev)].id, cur.id))
                    queue.push({p->rank, static_cast<std::size_t>(cur.prev), p->id});
            if (cur.next >= 0)
                if (const auto* n = find_merge(cur.id, sym[static_cast<std::size_t>(cur.next)].id))
                    queue.push({n->rank, top.pos, n->id});
        }
        std::vector<token_id> out;
        for (const symbol& s : sym)
            if (!s.removed) out.push_back(s.id);
        return out;
    }

    std::unordered_map<std::string, token_id> vocab_;
    std::unordered_map<std::uint64_t, merge_info> merges_;
    bpe_options options_;
    mutable std::mutex cache_mutex_;
    mutable std::unordered_map<std::string, std::vector<token_id>> cache_;
};

}  // namespace dlm::io::detail
