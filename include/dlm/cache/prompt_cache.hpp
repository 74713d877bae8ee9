// dlm/cache/prompt_cache.hpp — prompt-cache reuse across requests: the exact K/V of shared prompt
// prefixes (system prompts, few-shot examples, chat history), kept in a bounded radix tree over token
// blocks and copied into later requests' K/V stores, so their first forward computes only the rest.
//
// As SGLang's RadixCache: a request matches the longest cached prefix (whole blocks), the match is
// pinned by a reference count while the request runs, the request's own final prompt blocks are
// inserted once its first forward stored them, and when an insert would pass the byte bound the least
// recently used unpinned leaves are evicted first; so are they, as many bytes as it is short of, when
// a joining request is refused for memory (evict_unpinned, called by engine::release_cached). Unlike
// SGLang the blocks are copied (into the request's own store, and from it into the tree), not shared,
// so a request never attends to memory the tree may free.
//
// Exact (docs/determinism.md): only positions whose K/V are a function of the tokens before them
// alone are kept, i.e. under a mask whose committed K/V are final, prompt positions that attend to no
// later key (reusable_prompt below); copying K/V is bit-exact and dlm's forwards give a row the same
// bits whether a key was computed in its window or read from a store, so a request decodes the same
// tokens, forward for forward, with and without the prompt cache.
//
// Model hooks (model_has_kv_copy): `kv_cache_bytes(capacity)`, the bytes of make_kv_cache(capacity),
// and `copy_kv(src, src_begin, dst, dst_begin, count)`, which copies stored K/V between two stores of
// the model and marks them stored. Single-threaded, as the engine that owns it.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <map>
#include <memory>
#include <queue>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "../mask/block_diffusion.hpp"
#include "../mask/masks.hpp"
#include "../core/plan.hpp"

namespace dlm {

/// A model whose K/V stores can be measured and copied between (the prompt cache's hooks).
template <class M>
concept model_has_kv_copy = requires(const M& m, const typename M::kv_cache& src, typename M::kv_cache& dst, index_t i) {
    { m.kv_cache_bytes(i) } -> std::convertible_to<std::uint64_t>;
    m.copy_kv(src, i, dst, i, i);
};

/// Masks for which dlm knows which prompt positions' K/V depend on the tokens before them alone.
template <class Mask>
inline constexpr bool mask_has_prompt_blocks =
    std::same_as<Mask, causal_mask> || std::same_as<Mask, block_causal_mask> || std::derived_from<Mask, block_diffusion_mask>;

/// The options of an engine's prompt cache.
struct prompt_cache_options {
    /// Bound on the bytes the cache holds (K/V and the tokens keying them); 0: no prompt cache.
    std::uint64_t bytes = 0;
    /// Tokens per block under a causal mask (a block-causal mask's blocks are its own).
    index_t causal_block = 32;
};

/// The prompt positions [0, end) a request may take from, and give to, the prompt cache, cut in
/// blocks of `block` tokens (end is a multiple of block). Requests share blocks only with requests
/// of the same block length.
struct prompt_span {
    index_t block = 0;
    index_t end = 0;
};

/// Causal: every prompt position sees only earlier ones, blocks of `causal_block`. Block-diffusion
/// (SDAR, LLaDA2, Fast-dLLM v2): the prompt's whole blocks before the first generated block (a block
/// shared with generated slots is recomputed until finished, never cached). Block-causal (CDLM): the
/// prompt attends to itself bidirectionally, so it is one block: only a whole equal prompt is reused.
template <class Mask>
[[nodiscard]] prompt_span reusable_prompt(const Mask& mask, const canvas_layout& l, index_t causal_block) {
    static_assert(mask_has_prompt_blocks<Mask>, "dlm::reusable_prompt: this mask's prompt K/V are not known to be final");
    prompt_span s;
    if constexpr (std::same_as<Mask, causal_mask>) s.block = causal_block;
    else if constexpr (std::same_as<Mask, block_causal_mask>) s.block = l.prompt_length;
    else s.block = l.block_length;
    const index_t final_end = std::min(l.prompt_length, l.block_begin(0));
    s.end = s.block > 0 ? final_end / s.block * s.block : 0;
    for (index_t q = 0; q < s.end; ++q)  // a mask rule that let a kept position see a later key would not be exact
        if (mask.key_end(l, q) > s.end)
            throw contract_error("dlm::prompt_cache: prompt position " + std::to_string(q) + " attends past the cached prefix end " +
                                 std::to_string(s.end));
    return s;
}

/// A prompt cache's counters since construction (tokens unless said otherwise).
struct prompt_cache_counters {
    std::uint64_t lookups = 0;          ///< requests looked up
    std::uint64_t hit_lookups = 0;      ///< of them, requests that reused at least one block
    std::uint64_t queried_tokens = 0;   ///< prompt tokens of the requests looked up (vLLM's prefix_cache_queries)
    std::uint64_t hit_tokens = 0;       ///< prompt tokens whose K/V were reused (vLLM's prefix_cache_hits)
    std::uint64_t inserted_tokens = 0;  ///< tokens whose K/V were added to the tree
    std::uint64_t evicted_tokens = 0;   ///< tokens evicted: to stay within the bound, or to make room for a request
    std::uint64_t room_evictions = 0;   ///< times blocks were evicted to make room for a request refused for memory (evict_unpinned)
    std::uint64_t room_evicted_tokens = 0;  ///< of evicted_tokens, those evicted to make room for such a request
    std::uint64_t skipped_tokens = 0;   ///< final prompt tokens not inserted: the bound, the rest pinned
};

/// The bounded radix tree over token blocks of one model's K/V (see the header comment).
template <class Model>
class prompt_cache {
public:
    using kv_type = typename Model::kv_cache;

    using counters = prompt_cache_counters;

    struct node;
    /// One request's hold on the cache: what it may share, what it reused, the match it pins.
    struct ticket {
        prompt_span span;
        index_t reused = 0;       ///< positions [0, reused) were copied from the tree
        index_t stored_upto = 0;  ///< positions [0, stored_upto) are stored in the request's own store
        node* pinned = nullptr;
        bool open = false;        ///< looked up and not yet inserted or released
    };

    struct match_result {
        node* last = nullptr;  ///< the deepest node matched (a root: nothing)
        index_t length = 0;    ///< tokens matched, a multiple of the block
    };

    prompt_cache(const Model& model, const prompt_cache_options& o) : model_(&model), options_(o) {
        if (o.causal_block < 1) throw invalid_parameter("prompt_cache_options::causal_block", "must be >= 1, got " + std::to_string(o.causal_block));
    }
    prompt_cache(const prompt_cache&) = delete;
    prompt_cache& operator=(const prompt_cache&) = delete;

    /// The longest cached prefix of `tokens` in whole blocks of `block` tokens, the nodes on its path
    /// marked as used now. A match ending inside a node splits it there (no K/V is copied).
    match_result match(std::span<const token_id> tokens, index_t block) {
        node* n = &root(block);
        const std::uint64_t now = ++clock_;
        index_t at = 0;
        while (at + block <= static_cast<index_t>(tokens.size())) {
            auto it = n->children.find(block_key(tokens, at, block));
            if (it == n->children.end()) break;
            node* c = it->second.get();
            const index_t blocks = c->blocks(block);
            index_t k = 1;  // the key is its first block
            while (k < blocks && at + (k + 1) * block <= static_cast<index_t>(tokens.size()) &&
                   std::equal(tokens.begin() + at + k * block, tokens.begin() + at + (k + 1) * block, c->tokens.begin() + k * block))
                ++k;
            if (k < blocks) c = split(*c, k, block);
            c->last_use = now;
            n = c;
            at += k * block;
        }
        return {n, at};
    }

    /// Copies the K/V of a match's path into `dst` (positions [0, m.length)), marked stored there.
    void copy_out(const match_result& m, kv_type& dst) const {
        for (const node* n = m.last; n != nullptr && n->parent != nullptr; n = n->parent)
            for (std::size_t b = 0; b < n->kv.size(); ++b) {
                const index_t block = static_cast<index_t>(n->tokens.size() / n->kv.size());
                model_->copy_kv(n->kv[b], 0, dst, n->begin + static_cast<index_t>(b) * block, block);
            }
    }

    /// Adds the blocks of `tokens` (a multiple of `block`) that the tree lacks, their K/V copied from
    /// `src` (positions [0, tokens.size()) stored there), evicting least recently used unpinned leaves
    /// as the bound asks. Blocks that do not fit are left out. Returns the tokens inserted.
    index_t insert(std::span<const token_id> tokens, index_t block, const kv_type& src) {
        const match_result m = match(tokens, block);
        const index_t want = (static_cast<index_t>(tokens.size()) - m.length) / block;
        if (want == 0) return 0;
        const std::uint64_t per = block_bytes(block);
        pin(m.last);  // the attachment point and its path stay while leaves are evicted
        evict(std::uint64_t(want) * per);
        unpin(m.last);
        const index_t fit = static_cast<index_t>(std::min<std::uint64_t>(std::uint64_t(want), free_bytes() / per));
        stats_.skipped_tokens += std::uint64_t(want - fit) * std::uint64_t(block);
        if (fit == 0) return 0;
        auto leaf = std::make_unique<node>();
        leaf->parent = m.last;
        leaf->begin = m.length;
        leaf->last_use = clock_;
        leaf->tokens.assign(tokens.begin() + m.length, tokens.begin() + m.length + fit * block);
        leaf->kv.reserve(static_cast<std::size_t>(fit));
        for (index_t b = 0; b < fit; ++b) {
            leaf->kv.push_back(model_->make_kv_cache(block));
            model_->copy_kv(src, m.length + b * block, leaf->kv.back(), 0, block);
        }
        bytes_ += std::uint64_t(fit) * per;
        blocks_ += static_cast<std::uint64_t>(fit);
        stats_.inserted_tokens += std::uint64_t(fit) * std::uint64_t(block);
        m.last->children.emplace(block_key(tokens, m.length, block), std::move(leaf));
        return fit * block;
    }

    /// Reference counts: a pinned node and every node above it are never evicted.
    void pin(node* n) noexcept {
        for (; n != nullptr; n = n->parent) ++n->pins;
    }
    void unpin(node* n) noexcept {
        for (; n != nullptr; n = n->parent) --n->pins;
    }

    /// Evicts the last blocks of the least recently used unpinned leaves (a node left empty goes, and
    /// a parent left childless becomes a leaf) until `need` more bytes fit within the bound, or nothing
    /// is evictable. Returns the bytes freed.
    std::uint64_t evict(std::uint64_t need) {
        return evict_lru([&](std::uint64_t) { return need > free_bytes(); });
    }

    /// Evicts least recently used unpinned blocks, as evict() does, until at least `bytes` are freed
    /// or none is left unpinned: room for a request the engine refused for memory (engine.hpp,
    /// release_cached). Counted in counters::room_evictions. Returns the bytes freed.
    std::uint64_t evict_unpinned(std::uint64_t bytes) {
        const std::uint64_t tokens = stats_.evicted_tokens;
        const std::uint64_t freed = evict_lru([&](std::uint64_t so_far) { return so_far < bytes; });
        if (freed > 0) ++stats_.room_evictions;
        stats_.room_evicted_tokens += stats_.evicted_tokens - tokens;
        return freed;
    }

    /// The bytes evict_unpinned could free now: the blocks of every node no request pins (a pinned
    /// node's path above it is pinned too, so these are exactly the nodes under no pin).
    [[nodiscard]] std::uint64_t evictable_bytes() const {
        std::uint64_t total = 0;
        for (const auto& [block, r] : roots_) total += unpinned_bytes(*r, block);
        return total;
    }

    /// The request's lookup before its first forward: copies the longest cached prefix of its final
    /// prompt blocks into `kv` and pins it until release() or the insert after its prompt is stored.
    template <class Mask>
    ticket admit(const Mask& mask, const canvas_layout& l, std::span<const token_id> canvas, kv_type& kv) {
        ticket t;
        t.span = reusable_prompt(mask, l, options_.causal_block);
        ++stats_.lookups;
        stats_.queried_tokens += static_cast<std::uint64_t>(l.prompt_length);
        if (t.span.end == 0) return t;
        const match_result m = match(canvas.first(static_cast<std::size_t>(t.span.end)), t.span.block);
        copy_out(m, kv);
        t.reused = t.stored_upto = m.length;
        t.pinned = m.last;
        t.open = true;
        pin(t.pinned);
        stats_.hit_tokens += static_cast<std::uint64_t>(m.length);
        if (m.length > 0) ++stats_.hit_lookups;
        return t;
    }

    /// The request's plan with the positions it reused taken out of the window (and the store): the
    /// rows it still computes are the rest of the prompt and whatever rows the plan asks logits of.
    [[nodiscard]] static forward_plan skip_reused(forward_plan p, const ticket& t) noexcept {
        if (t.reused <= p.window_begin) return p;
        p.window_begin = std::min(t.reused, p.logits_begin);
        if (p.stores()) p.store_begin = std::max(p.store_begin, p.window_begin);
        if (p.store_begin >= p.store_end) p.store_begin = p.store_end = 0;
        return p;
    }

    /// After a forward of the request: once its final prompt blocks are stored, inserts them and
    /// releases its pin.
    void after_forward(ticket& t, const forward_plan& p, std::span<const token_id> canvas, const kv_type& kv) {
        if (!t.open) return;
        if (p.stores() && p.store_begin <= t.stored_upto) t.stored_upto = std::max(t.stored_upto, p.store_end);
        if (t.stored_upto < t.span.end) return;
        insert(canvas.first(static_cast<std::size_t>(t.span.end)), t.span.block, kv);
        release(t);
    }

    /// Drops the request's pin (it finished, failed or was cancelled before its prompt was stored).
    void release(ticket& t) noexcept {
        if (!t.open) return;
        unpin(t.pinned);
        t.open = false;
    }

    [[nodiscard]] const counters& stats() const noexcept { return stats_; }
    [[nodiscard]] std::uint64_t bytes() const noexcept { return bytes_; }            ///< held now
    [[nodiscard]] std::uint64_t capacity_bytes() const noexcept { return options_.bytes; }
    [[nodiscard]] std::uint64_t blocks() const noexcept { return blocks_; }          ///< held now
    [[nodiscard]] const prompt_cache_options& options() const noexcept { return options_; }
    /// What one block of `block` tokens costs: its K/V store and its tokens.
    [[nodiscard]] std::uint64_t block_bytes(index_t block) const {
        return static_cast<std::uint64_t>(model_->kv_cache_bytes(block)) + std::uint64_t(block) * sizeof(token_id);
    }

    /// A node: an edge of whole blocks starting at canvas position `begin`, one K/V store per block.
    struct node {
        node* parent = nullptr;
        index_t begin = 0;
        std::vector<token_id> tokens;
        std::vector<kv_type> kv;
        std::map<std::vector<token_id>, std::unique_ptr<node>> children;  // by their first block
        std::uint64_t last_use = 0;
        int pins = 0;
        [[nodiscard]] index_t blocks(index_t block) const noexcept { return static_cast<index_t>(tokens.size()) / block; }
    };

private:
    static std::vector<token_id> block_key(std::span<const token_id> tokens, index_t at, index_t block) {
        return {tokens.begin() + at, tokens.begin() + at + block};
    }

    [[nodiscard]] std::uint64_t free_bytes() const noexcept { return options_.bytes > bytes_ ? options_.bytes - bytes_ : 0; }

    node& root(index_t block) {
        auto& r = roots_[block];
        if (!r) r = std::make_unique<node>();
        return *r;
    }

    /// Cuts `c` after its first k blocks: a new node holds them (and c's pins, as every pin of c
    /// counts on the path above it) and becomes c's parent. Returns the new node.
    node* split(node& c, index_t k, index_t block) {
        node* parent = c.parent;
        auto& slot = parent->children.at(block_key(c.tokens, 0, block));
        auto mid = std::make_unique<node>();
        mid->parent = parent;
        mid->begin = c.begin;
        mid->last_use = c.last_use;
        mid->pins = c.pins;
        const auto cut = static_cast<std::ptrdiff_t>(k * block);
        mid->tokens.assign(c.tokens.begin(), c.tokens.begin() + cut);
        mid->kv.assign(std::make_move_iterator(c.kv.begin()), std::make_move_iterator(c.kv.begin() + k));
        c.tokens.erase(c.tokens.begin(), c.tokens.begin() + cut);
        c.kv.erase(c.kv.begin(), c.kv.begin() + k);
        c.begin += k * block;
        c.parent = mid.get();
        std::unique_ptr<node> owned = std::move(slot);
        mid->children.emplace(block_key(c.tokens, 0, block), std::move(owned));
        slot = std::move(mid);
        return slot.get();
    }

    /// The eviction loop of evict() and evict_unpinned(): the last block of the least recently used
    /// unpinned leaf goes while `more(bytes freed so far)` says so and one is left.
    template <class More>
    std::uint64_t evict_lru(More more) {
        using item = std::pair<std::uint64_t, node*>;
        std::priority_queue<item, std::vector<item>, std::greater<>> leaves;
        for (auto& [block, r] : roots_) collect_leaves(*r, leaves);
        std::uint64_t freed = 0;
        while (more(freed) && !leaves.empty()) {
            node* n = leaves.top().second;  // its last block goes; the node, once empty
            const index_t block = static_cast<index_t>(n->tokens.size() / n->kv.size());
            const std::uint64_t b = block_bytes(block);
            bytes_ -= b;
            freed += b;
            --blocks_;
            stats_.evicted_tokens += static_cast<std::uint64_t>(block);
            if (n->kv.size() > 1) {
                n->kv.pop_back();
                n->tokens.resize(n->tokens.size() - static_cast<std::size_t>(block));
                continue;
            }
            leaves.pop();
            node* parent = n->parent;
            parent->children.erase(block_key(n->tokens, 0, block));  // frees n
            if (parent->parent != nullptr && parent->children.empty() && parent->pins == 0) leaves.push({parent->last_use, parent});
        }
        return freed;
    }

    /// The bytes of the unpinned nodes under `n` (a tree of blocks of `block` tokens).
    [[nodiscard]] std::uint64_t unpinned_bytes(const node& n, index_t block) const {
        std::uint64_t total = 0;
        for (const auto& [key, c] : n.children)
            total += (c->pins == 0 ? std::uint64_t(c->blocks(block)) * block_bytes(block) : 0) + unpinned_bytes(*c, block);
        return total;
    }

    template <class Heap>
    static void collect_leaves(node& n, Heap& leaves) {
        for (auto& [key, c] : n.children) {
            if (c->children.empty()) {
                if (c->pins == 0) leaves.push({c->last_use, c.get()});
            } else {
                collect_leaves(*c, leaves);
            }
        }
    }

    const Model* model_;
    prompt_cache_options options_;
    std::map<index_t, std::unique_ptr<node>> roots_;  // one tree per block length
    std::uint64_t bytes_ = 0, blocks_ = 0, clock_ = 0;
    counters stats_;
};

}  // namespace dlm
