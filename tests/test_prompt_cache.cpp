// The prompt cache (dlm/cache/prompt_cache.hpp): its radix tree over token blocks (longest match,
// insert, split, LRU eviction of leaves, pins, the byte bound), and the engine with it on the CPU
// transformer: answers bit-identical with and without reuse, alone and batched, fewer rows computed.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <numeric>
#include <vector>

#include <dlm/cpu/transformer.hpp>
#include <dlm/engine.hpp>
#include <dlm/presets.hpp>

#include "support/child.hpp"
#include "support/scripts.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_prompt_cache {

using namespace dlm;
using dlm::testing::scripted_model;
using tvec = std::vector<token_id>;

namespace {

using tree = prompt_cache<scripted_model>;
scripted_model toy() { return {64, 63, {62}, false, dlm_test::context_hash()}; }

/// A store holding `tokens` at positions [0, size) as the scripted model's K/V.
scripted_model::kv_cache stored(const scripted_model& m, const tvec& tokens) {
    auto kv = m.make_kv_cache(static_cast<index_t>(tokens.size()));
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        kv.tokens[i] = tokens[i];
        kv.stored[i] = 1;
    }
    return kv;
}
index_t insert(tree& t, const scripted_model& m, const tvec& tokens, index_t block = 4) { return t.insert(tokens, block, stored(m, tokens)); }
index_t matched(tree& t, const tvec& tokens, index_t block = 4) { return t.match(tokens, block).length; }
tvec seq(token_id from, std::size_t n) {
    tvec v(n);
    std::iota(v.begin(), v.end(), from);
    return v;
}
tvec cat(tvec a, const tvec& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

}  // namespace

TEST_CASE("prompt cache: a lookup matches the longest cached prefix in whole blocks and copies its stored K/V") {
    const auto m = toy();
    tree t(m, {.bytes = 1 << 20});
    const tvec a = seq(1, 12);
    CHECK(insert(t, m, a) == 12);
    CHECK(t.blocks() == 3);
    CHECK(matched(t, a) == 12);
    CHECK(matched(t, cat(seq(1, 8), {40, 41, 42, 43})) == 8);  // diverges in the third block
    CHECK(matched(t, cat(seq(1, 6), {40, 41})) == 4);          // diverges inside the second block
    CHECK(matched(t, seq(1, 7)) == 4);                          // a trailing partial block is never matched
    CHECK(matched(t, seq(2, 12)) == 0);
    CHECK(matched(t, a, 3) == 0);  // another block length is another tree

    const auto m8 = t.match(cat(seq(1, 8), {40, 41, 42, 43}), 4);
    auto dst = m.make_kv_cache(16);
    t.copy_out(m8, dst);
    for (index_t p = 0; p < 16; ++p) {
        CAPTURE(p);
        CHECK(static_cast<bool>(dst.stored[static_cast<std::size_t>(p)]) == (p < 8));
        if (p < 8) CHECK(dst.tokens[static_cast<std::size_t>(p)] == a[static_cast<std::size_t>(p)]);
    }
}

TEST_CASE("prompt cache: an insert that diverges inside a node splits it and adds only the blocks it lacks") {
    const auto m = toy();
    tree t(m, {.bytes = 1 << 20});
    const tvec a = seq(1, 12), b = cat(seq(1, 8), {50, 51, 52, 53, 54, 55, 56, 57});
    insert(t, m, a);
    CHECK(insert(t, m, b) == 8);  // blocks 1 and 2 are shared, 3 and 4 new
    CHECK(t.blocks() == 5);
    CHECK(t.bytes() == 5 * t.block_bytes(4));
    CHECK(matched(t, a) == 12);
    CHECK(matched(t, b) == 16);
    CHECK(insert(t, m, a) == 0);  // all there
    CHECK(t.stats().inserted_tokens == 20);
    // The split node's halves still copy the right K/V.
    auto dst = m.make_kv_cache(16);
    t.copy_out(t.match(b, 4), dst);
    CHECK(tvec(dst.tokens.begin(), dst.tokens.end()) == b);
}

TEST_CASE("prompt cache: the least recently used leaf is evicted first, and a parent left childless becomes a leaf") {
    const auto m = toy();
    tree t(m, {.bytes = 3 * toy().kv_cache_bytes(4) + 3 * 4 * sizeof(token_id)});  // three blocks
    REQUIRE(t.capacity_bytes() == 3 * t.block_bytes(4));
    const tvec x = seq(1, 4), y = seq(10, 4), z = seq(20, 4);
    insert(t, m, x);
    insert(t, m, y);
    insert(t, m, z);
    CHECK(matched(t, x) == 4);  // x is now more recent than y and z
    CHECK(insert(t, m, seq(30, 4)) == 4);
    CHECK(matched(t, y) == 0);  // the least recently used
    CHECK(matched(t, x) == 4);
    CHECK(matched(t, z) == 4);
    CHECK(t.stats().evicted_tokens == 4);
    // A chain of three blocks: evicting its leaf makes its parent the next leaf.
    tree c(m, {.bytes = 3 * t.block_bytes(4)});
    insert(c, m, seq(1, 12));
    CHECK(c.evict(2 * c.block_bytes(4)) == 2 * c.block_bytes(4));
    CHECK(matched(c, seq(1, 12)) == 4);
    CHECK(c.blocks() == 1);
    // A split node whose children are all evicted is a leaf, evicted in turn.
    tree f(m, {.bytes = 3 * t.block_bytes(4)});
    insert(f, m, seq(1, 8));
    insert(f, m, cat(seq(1, 4), seq(40, 4)));
    REQUIRE(f.blocks() == 3);
    CHECK(f.evict(3 * f.block_bytes(4)) == 3 * f.block_bytes(4));
    CHECK(f.blocks() == 0);
    CHECK(f.bytes() == 0);
}

TEST_CASE("prompt cache: a pinned prefix and its path are never evicted; an insert that cannot fit is left out") {
    const auto m = toy();
    tree t(m, {.bytes = 2 * toy().kv_cache_bytes(4) + 2 * 4 * sizeof(token_id)});  // two blocks
    const tvec x = seq(1, 4), y = seq(10, 4), z = seq(20, 4);
    insert(t, m, x);
    auto* px = t.match(x, 4).last;
    t.pin(px);
    insert(t, m, y);
    CHECK(insert(t, m, z) == 4);  // y (unpinned) goes, although x is older
    CHECK(matched(t, y) == 0);
    CHECK(matched(t, x) == 4);
    auto* pz = t.match(z, 4).last;
    t.pin(pz);
    CHECK(insert(t, m, y) == 0);  // everything pinned: left out, the bound holds
    CHECK(t.stats().skipped_tokens == 4);
    CHECK(t.bytes() <= t.capacity_bytes());
    t.unpin(px);
    CHECK(insert(t, m, y) == 4);
    CHECK(matched(t, x) == 0);
    CHECK(matched(t, z) == 4);
    t.unpin(pz);
}

TEST_CASE("prompt cache: making room evicts unpinned blocks, least recently used first, never a pinned one, and says what it could free") {
    const auto m = toy();
    tree t(m, {.bytes = 4 * toy().kv_cache_bytes(4) + 4 * 4 * sizeof(token_id)});  // four blocks
    const std::uint64_t b = t.block_bytes(4);
    const tvec x = seq(1, 4), y = seq(10, 4), z = seq(20, 8);
    insert(t, m, x);
    insert(t, m, y);
    insert(t, m, z);
    CHECK(t.evictable_bytes() == 4 * b);
    auto* px = t.match(x, 4).last;  // x: the most recently used now, and pinned
    t.pin(px);
    CHECK(t.evictable_bytes() == 3 * b);
    CHECK(t.evict_unpinned(b + 1) == 2 * b);  // whole blocks: y (the least recently used), then z's last
    CHECK(t.stats().room_evictions == 1);
    CHECK(t.stats().room_evicted_tokens == 8);
    CHECK(t.stats().evicted_tokens == 8);
    CHECK(t.evictable_bytes() == b);
    CHECK(t.evict_unpinned(100 * b) == b);  // all it may: z's first block
    CHECK(t.evict_unpinned(b) == 0);        // only the pinned block is left: nothing to free, no eviction counted
    CHECK(t.stats().room_evictions == 2);
    CHECK(t.evictable_bytes() == 0);
    CHECK(t.blocks() == 1);
    CHECK(t.bytes() == b);
    CHECK(matched(t, x) == 4);
    t.unpin(px);
    CHECK(t.evictable_bytes() == b);
}

TEST_CASE("prompt cache: the bytes held never pass the bound, and an insert inserts the blocks that fit") {
    const auto m = toy();
    tree t(m, {.bytes = 5 * toy().kv_cache_bytes(4) + 5 * 4 * sizeof(token_id)});
    CHECK(insert(t, m, seq(1, 32)) == 20);  // 8 blocks offered, 5 fit
    CHECK(t.stats().skipped_tokens == 12);
    for (token_id s = 0; s < 20; ++s) {
        insert(t, m, cat(seq(1, 4), seq(static_cast<token_id>(100 + 4 * s), 8)));
        CHECK(t.bytes() <= t.capacity_bytes());
        CHECK(t.blocks() <= 5);
    }
    tree none(m, {.bytes = t.block_bytes(4) - 1});
    CHECK(insert(none, m, seq(1, 8)) == 0);
    CHECK(none.bytes() == 0);
}

TEST_CASE("copy_kv copies stored K/V into a store of another capacity, a forward reading the copy equals one reading the original, and bad copies are refused") {
    auto m = cpu::transformer::load(std::filesystem::path(DLM_MODELS_DIR) / "cdlm");
    const block_causal_mask mask{8};
    const canvas_layout l{16, 16, 8, false};
    tvec canvas(static_cast<std::size_t>(l.size()), m.mask_id());
    for (index_t i = 0; i < l.prompt_length; ++i) canvas[static_cast<std::size_t>(i)] = static_cast<token_id>((7 * i + 3) % 100);
    const forward_plan first = prefix_cache{}.plan(mask, l, {0, 0}), next = prefix_cache{}.plan(mask, l, {0, 1});
    REQUIRE(first.store_end == l.prompt_length);
    REQUIRE(next.window_begin == l.prompt_length);  // the next forward reads the stored prompt, computes none of it
    const auto forward = [&](const forward_plan& p, cpu::kv_cache& kv) {
        std::vector<float> logits(static_cast<std::size_t>(p.logits_rows()) * static_cast<std::size_t>(m.vocab_size()));
        const forward_request<cpu::kv_cache> rq{canvas, l, p, &kv};
        m.forward(std::span<const forward_request<cpu::kv_cache>>(&rq, 1), mask, logits);
        return logits;
    };
    auto original = m.make_kv_cache(l.size());
    (void)forward(first, original);
    auto copy = m.make_kv_cache(l.size() + 24);  // other strides than the source's
    m.copy_kv(original, 0, copy, 0, first.store_end);
    for (index_t p = 0; p < copy.capacity; ++p) CHECK(static_cast<bool>(copy.stored[static_cast<std::size_t>(p)]) == (p < first.store_end));
    CHECK(forward(next, copy) == forward(next, original));  // bit for bit
    auto empty = m.make_kv_cache(l.size());
    CHECK_THROWS_WITH_AS(m.copy_kv(empty, 0, copy, 0, 4), "cpu::copy_kv: the source range holds positions whose K/V were never stored", contract_error);
    CHECK_THROWS_WITH_AS(m.copy_kv(original, 0, empty, l.size() - 2, 4), doctest::Contains("cpu::copy_kv: cannot copy 4 positions from 0 of a store of 32 to 30"),
                         contract_error);
    CHECK_THROWS_AS(m.copy_kv(original, 0, copy, 0, -1), contract_error);
    cpu::kv_cache foreign(l.size(), 1, 1, 8);
    CHECK_THROWS_WITH_AS(m.copy_kv(original, 0, foreign, 0, 4), doctest::Contains("layers, heads or head size differ"), contract_error);
    m.copy_kv(original, 0, empty, 0, 0);  // nothing to copy: fine
}

TEST_CASE("prompt cache: a position that attends past the cached end is never kept") {
    const canvas_layout l{21, 16, 8, false, 5};  // aligned block diffusion: 5 prompt positions share block 0
    const prompt_span s = reusable_prompt(aligned_block_diffusion_mask{8}, l, 32);
    CHECK(s.block == 8);
    CHECK(s.end == 16);
    const prompt_span c = reusable_prompt(block_causal_mask{8}, canvas_layout{21, 16, 8, false, 0}, 32);
    CHECK(c.block == 21);  // CDLM's prompt is one bidirectional block: only a whole equal prompt is reused
    CHECK(c.end == 21);
    const prompt_span a = reusable_prompt(causal_mask{}, canvas_layout{45, 16, 1, true, 0}, 16);
    CHECK(a.block == 16);
    CHECK(a.end == 32);
}

namespace {

/// Prompts sharing `shared` tokens, each then its own `own` tokens.
std::vector<tvec> shared_prefix(index_t vocab, std::size_t n, std::size_t shared, std::size_t own) {
    std::vector<tvec> out(n);
    for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t j = 0; j < shared; ++j) out[i].push_back(static_cast<token_id>((7 * j + 3) % 600));
        for (std::size_t j = 0; j < own; ++j) out[i].push_back(static_cast<token_id>((11 * i + 5 * j + 1) % 600));
    }
    (void)vocab;
    return out;
}

/// Decodes `prompts` on an engine (prompt cache of `bytes`, 0: none): the first alone until its
/// first forward is done, then the rest join (batched), or each after the previous finished (alone).
template <class Decoder>
std::vector<sequence_result> run(Decoder& d, const std::vector<tvec>& prompts, const generation_options& o, std::uint64_t bytes,
                                 bool batched, std::uint64_t* hit_tokens = nullptr) {
    engine eng(d, prompt_cache_options{.bytes = bytes, .causal_block = 16});
    std::vector<sequence_result> out(prompts.size());
    std::vector<std::uint64_t> ids;
    auto drain = [&] {
        for (auto& [id, r] : eng.take_finished()) out[static_cast<std::size_t>(id)] = std::move(r);
    };
    ids.push_back(eng.add(prompts[0], o));
    eng.step();
    for (std::size_t i = 1; i < prompts.size(); ++i) {
        if (!batched)
            while (!eng.idle()) eng.step();
        ids.push_back(eng.add(prompts[i], o));
    }
    while (!eng.idle()) eng.step();
    drain();
    if (hit_tokens) *hit_tokens = eng.prompt_cache() ? eng.prompt_cache()->stats().hit_tokens : 0;
    if (eng.prompt_cache()) CHECK(eng.prompt_cache()->bytes() <= eng.prompt_cache()->capacity_bytes());
    return out;
}

void check_same(const sequence_result& a, const sequence_result& b) {
    CHECK(a.status == b.status);
    CHECK(a.tokens == b.tokens);
    CHECK(a.commit_forward == b.commit_forward);
    CHECK(a.commit_confidence == b.commit_confidence);  // bit for bit
    CHECK(a.stats.forwards == b.stats.forwards);
    CHECK(a.answer_length == b.answer_length);
}

/// With and without the prompt cache, alone and batched: the same answers; with it the later
/// requests compute fewer rows, by exactly the tokens they reused.
template <class Decoder>
void check_reuse(Decoder& d, const std::vector<tvec>& prompts, const generation_options& o, index_t reused_each) {
    for (const bool batched : {false, true}) {
        CAPTURE(batched);
        const auto plain = run(d, prompts, o, 0, batched);
        std::uint64_t hits = 0;
        const auto cached = run(d, prompts, o, std::uint64_t{64} << 20, batched, &hits);
        CHECK(hits == std::uint64_t(reused_each) * (prompts.size() - 1));
        for (std::size_t i = 0; i < prompts.size(); ++i) {
            CAPTURE(i);
            check_same(plain[i], cached[i]);
            check_same(d.generate(prompts[i], o), cached[i]);
            CHECK(cached[i].stats.rows_computed == plain[i].stats.rows_computed - (i == 0 ? 0 : reused_each));
        }
    }
}

}  // namespace

TEST_CASE("engine with a prompt cache: autoregressive requests sharing a prefix decode bit-identically and compute fewer rows") {
    auto m = cpu::transformer::load(std::filesystem::path(DLM_MODELS_DIR) / "ar");
    presets::autoregressive<cpu::transformer> d(m);
    // 40 shared tokens: two blocks of 16 are reused (the third holds the requests' own tokens).
    check_reuse(d, shared_prefix(m.vocab_size(), 4, 40, 5), {.gen_length = 12, .seed = 1}, 32);
}

TEST_CASE("engine with a prompt cache: with a bf16 KV cache, autoregressive requests sharing a prefix decode bit-identically and compute fewer rows") {
    cpu::load_options bf16_kv;
    bf16_kv.kv_dtype = io::dtype::bf16;  // copies of bf16 blocks; windows of one row at every offset
    auto m = cpu::transformer::load(std::filesystem::path(DLM_MODELS_DIR) / "ar", bf16_kv);
    presets::autoregressive<cpu::transformer> d(m);
    check_reuse(d, shared_prefix(m.vocab_size(), 4, 40, 5), {.gen_length = 12, .seed = 1}, 32);
}

TEST_CASE("engine with a prompt cache: block-diffusion requests reuse only the prompt blocks before the first generated one") {
    auto m = cpu::transformer::load(std::filesystem::path(DLM_MODELS_DIR) / "cdlm");
    presets::sdar<cpu::transformer> d(m, aligned_block_diffusion_mask{8});
    // 19 shared + 2 own = 21 prompt tokens: blocks [0, 8) and [8, 16) are whole prompt blocks; [16, 24)
    // holds 5 prompt positions and the first 3 slots, recomputed until finished, so never cached.
    check_reuse(d, shared_prefix(m.vocab_size(), 3, 19, 2), {.gen_length = 16, .seed = 2}, 16);
}

TEST_CASE("engine with a prompt cache: CDLM reuses a whole equal prompt only, its prompt being one bidirectional block") {
    auto m = cpu::transformer::load(std::filesystem::path(DLM_MODELS_DIR) / "cdlm");
    presets::cdlm<cpu::transformer> d(m, block_causal_mask{8});
    const generation_options o{.gen_length = 16, .seed = 3};
    check_reuse(d, shared_prefix(m.vocab_size(), 3, 20, 0), o, 20);  // the same prompt three times
    std::uint64_t hits = 1;
    const auto prompts = shared_prefix(m.vocab_size(), 3, 20, 3);    // a shared prefix, each its own end
    const auto cached = run(d, prompts, o, std::uint64_t{64} << 20, true, &hits);
    CHECK(hits == 0);
    for (std::size_t i = 0; i < prompts.size(); ++i) check_same(d.generate(prompts[i], o), cached[i]);
}

TEST_CASE("engine with a prompt cache: a bound smaller than the prompt holds what fits and answers stay the same") {
    auto m = cpu::transformer::load(std::filesystem::path(DLM_MODELS_DIR) / "ar");
    presets::autoregressive<cpu::transformer> d(m);
    const auto prompts = shared_prefix(m.vocab_size(), 3, 40, 5);
    const std::uint64_t one_block = m.kv_cache_bytes(16) + 16 * sizeof(token_id);
    std::uint64_t hits = 0;
    const auto cached = run(d, prompts, {.gen_length = 8, .seed = 4}, one_block, true, &hits);
    CHECK(hits == 16 * (prompts.size() - 1));
    for (std::size_t i = 0; i < prompts.size(); ++i) check_same(d.generate(prompts[i], {.gen_length = 8, .seed = 4}), cached[i]);
}

TEST_CASE("engine: a decoder that cannot reuse K/V exactly refuses a prompt cache with a typed error") {
    auto m = toy();
    presets::llada<scripted_model> llada(m, semi_ar_mask{4});
    presets::fast_dllm<scripted_model> approx(m, semi_ar_mask{4});
    static_assert(!detail::supports_prompt_cache<presets::llada<scripted_model>>);
    static_assert(!detail::supports_prompt_cache<presets::fast_dllm<scripted_model>>);
    static_assert(!detail::supports_prompt_cache<presets::fast_dllm_v2_block_cache<scripted_model>>);
    static_assert(detail::supports_prompt_cache<presets::cdlm<scripted_model>>);
    static_assert(detail::supports_prompt_cache<presets::fast_dllm_v2<cpu::transformer>>);
    CHECK_THROWS_WITH_AS(engine(llada, {.bytes = 1 << 20}), doctest::Contains("prompt_cache_bytes"), invalid_parameter);
    CHECK_THROWS_AS(engine(approx, {.bytes = 1 << 20}), invalid_parameter);
    engine none(llada);  // no prompt cache asked for: fine
    CHECK(none.prompt_cache() == nullptr);
}

namespace {

/// A scripted model whose K/V stores hold `per_position` bytes of address space per position
/// (reserved, never touched; above glibc's mmap threshold, so freeing one unmaps it), as its
/// kv_cache_bytes says: the prompt cache's blocks hold memory that evicting them gives back.
struct heavy_model : scripted_model {
    explicit heavy_model(std::uint64_t bytes) : scripted_model(64, 63, {62}, true, dlm_test::context_hash()), per_position(bytes) {}
    [[nodiscard]] kv_cache make_kv_cache(index_t capacity) const {
        kv_cache kv = scripted_model::make_kv_cache(capacity);
        kv.tokens.reserve(static_cast<std::size_t>(kv_cache_bytes(capacity) / sizeof(token_id)));
        return kv;
    }
    [[nodiscard]] std::uint64_t kv_cache_bytes(index_t capacity) const noexcept { return std::uint64_t(capacity) * per_position; }
    std::uint64_t per_position;
};

}  // namespace

TEST_CASE("engine with a prompt cache: a request that fits once unpinned cached blocks are evicted joins; one that would not fit with the cache emptied is refused, the cache untouched") {
#if defined(DLM_TEST_SANITIZER) || !defined(__unix__)
    MESSAGE("checked without sanitizers on Unix: it limits a child's address space (RLIMIT_AS)");
#else
    constexpr std::uint64_t per_position = std::uint64_t{16} << 20;  // a cached block of 4 positions: 64 MiB
    heavy_model m(per_position);
    presets::autoregressive<heavy_model> d(m);
    engine eng(d, prompt_cache_options{.bytes = std::uint64_t{1} << 40, .causal_block = 4});
    for (token_id i = 0; i < 3; ++i) {  // three prompts of two blocks each: six cached blocks, 384 MiB
        (void)eng.add(seq(static_cast<token_id>(1 + 10 * i), 8), {.gen_length = 2});
        while (!eng.idle()) (void)eng.step();
    }
    (void)eng.take_finished();
    const auto* pc = eng.prompt_cache();
    REQUIRE(pc->blocks() == 6);
    const std::uint64_t block = pc->block_bytes(4);
    REQUIRE(eng.evictable_bytes() == 6 * block);
    CHECK(eng.evictable_bytes(memory_kind::device) == 0);  // the blocks are host memory
    // In a child (forked after the forwards: it runs none, so OpenMP's threads are not needed there).
    const int code = dlm_test::in_child_with_room(std::uint64_t{1} << 30, [&](std::uint64_t avail) {
        const auto positions = [&](std::uint64_t bytes) { return static_cast<index_t>(bytes / per_position) + 1; };
        try {  // short by more than all six blocks: refused, nothing evicted
            (void)eng.add(seq(40, 8), {.gen_length = positions(avail + 6 * block) + 2});
            return 2;
        } catch (const memory_error& e) {
            if (e.short_by() <= 6 * block || pc->blocks() != 6 || pc->stats().room_evictions != 0) return 3;
        }
        try {  // check_batch counts what the cache could free as free, and evicts nothing
            eng.check_batch(std::vector<tvec>{seq(40, 8)}, {.gen_length = positions(avail) + 2 - 8});
        } catch (...) {
            return 6;
        }
        try {
            eng.check_batch(std::vector<tvec>{seq(40, 8)}, {.gen_length = positions(avail + 6 * block) + 2});
            return 9;
        } catch (const memory_error&) {
            if (pc->blocks() != 6) return 8;
        }
        try {  // short by 32 to 48 MiB: one block (the least recently used) makes room
            (void)eng.add(seq(40, 8), {.gen_length = positions(avail) + 2 - 8});
        } catch (const memory_error&) {
            return 4;
        }
        return eng.active() == 1 && pc->blocks() == 5 && pc->stats().room_evictions == 1 && pc->stats().room_evicted_tokens == 4 ? 0 : 5;
    });
    if (code == dlm_test::room_unmeasurable) MESSAGE("skipped: less than 1 GiB available");
    else CHECK(code == 0);
#endif
}

namespace {

/// A scripted model whose K/V stores are device memory: `claim` bytes each, on a device whose free
/// memory `free_bytes` says.
struct device_store_model : scripted_model {
    static constexpr bool kv_on_device = true;
    device_store_model() : scripted_model(64, 63, {62}, true, dlm_test::context_hash()) {}
    [[nodiscard]] std::uint64_t kv_cache_bytes(index_t) const noexcept { return claim; }
    [[nodiscard]] std::uint64_t device_bytes_free() const { return free_bytes(); }
    std::uint64_t claim = std::uint64_t{80} << 20;
    std::function<std::uint64_t()> free_bytes = [] { return std::numeric_limits<std::uint64_t>::max(); };
};

}  // namespace

TEST_CASE("engine with a prompt cache: a request short of device memory the cache could free, and of host memory too, is refused by both add and check_batch, no block evicted") {
#if defined(DLM_TEST_SANITIZER) || !defined(__unix__)
    MESSAGE("checked without sanitizers on Unix: it limits a child's address space (RLIMIT_AS)");
#else
    device_store_model m;
    presets::autoregressive<device_store_model> d(m);
    engine eng(d, prompt_cache_options{.bytes = std::uint64_t{1} << 40, .causal_block = 4});
    for (token_id i = 0; i < 3; ++i) {  // six cached blocks of device stores
        (void)eng.add(seq(static_cast<token_id>(1 + 10 * i), 8), {.gen_length = 2});
        while (!eng.idle()) (void)eng.step();
    }
    (void)eng.take_finished();
    const auto* pc = eng.prompt_cache();
    REQUIRE(pc->blocks() == 6);
    REQUIRE(eng.evictable_bytes(memory_kind::device) > m.claim);
    m.free_bytes = [&] { return (std::uint64_t{70} << 20) + (6 - pc->blocks()) * m.claim; };  // a store is 10 MiB short, one block makes room
    const int code = dlm_test::in_child_with_room(std::uint64_t{1} << 30, [&](std::uint64_t avail) {
        const std::vector<tvec> one{seq(40, 8)};
        const generation_options huge{.gen_length = static_cast<index_t>(avail / 16 * 3 / 2)};  // its canvas and results: 1.5 times the host's room
        for (const bool check : {true, false}) {
            try {
                if (check) eng.check_batch(one, huge);
                else (void)eng.add_batch(one, huge);
                return 2;
            } catch (const memory_error& e) {
                if (e.where() != memory_kind::host) return 3;
            } catch (...) {
                return 4;
            }
        }
        return pc->blocks() == 6 && pc->stats().room_evictions == 0 && eng.idle() ? 0 : 5;
    });
    if (code == dlm_test::room_unmeasurable) MESSAGE("skipped: less than 1 GiB available");
    else CHECK(code == 0);
#endif
}

}  // namespace test_prompt_cache
