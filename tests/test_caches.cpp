// KV-cache policies: the exact forward each one plans, hand-computed.
#include <doctest/doctest.h>

#include <vector>

#include <dlm/cache/caches.hpp>
#include <dlm/mask/block_diffusion.hpp>

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_caches {

using namespace dlm;

namespace {
// prompt 3, 8 slots, blocks of 4: block 0 = [3, 7), block 1 = [7, 11).
constexpr canvas_layout plain{3, 8, 4, false};
constexpr canvas_layout shifted{3, 8, 4, true};
// {window_begin, window_end, logits_begin, logits_end, store_begin, store_end, attend_end}
}  // namespace

TEST_CASE("no_cache recomputes the whole canvas and needs the active block's rows") {
    const no_cache c;
    CHECK(c.plan(semi_ar_mask{4}, plain, {0, 0}) == forward_plan{0, 11, 3, 7, 0, 0, 11});
    CHECK(c.plan(semi_ar_mask{4}, plain, {1, 2}) == forward_plan{0, 11, 7, 11, 0, 0, 11});
    // Dream-family shift: slots [7, 11) are predicted by rows [6, 10).
    CHECK(c.plan(semi_ar_mask{4}, shifted, {1, 0}) == forward_plan{0, 11, 6, 10, 0, 0, 11});
    CHECK_FALSE(no_cache::needs_storage);
}

TEST_CASE("prefix_cache with a block-causal mask: one block per forward, the finished block stored with the next") {
    const prefix_cache c;
    const block_causal_mask m{4};
    // Block 0, first step: prompt stored, block 0 computed.
    CHECK(c.plan(m, plain, {0, 0}) == forward_plan{0, 7, 3, 7, 0, 3, 7});
    // Block 0, later step: only the block; keys [0, 3) come from the cache.
    CHECK(c.plan(m, plain, {0, 1}) == forward_plan{3, 7, 3, 7, 0, 0, 7});
    // Block 1, first step: block 0's final K/V produced in the same forward as block 1's first step.
    CHECK(c.plan(m, plain, {1, 0}) == forward_plan{3, 11, 7, 11, 3, 7, 11});
    CHECK(c.plan(m, plain, {1, 3}) == forward_plan{7, 11, 7, 11, 0, 0, 11});
    // Shifted: the row before the block is part of every window.
    CHECK(c.plan(m, shifted, {1, 1}) == forward_plan{6, 11, 6, 10, 0, 0, 11});
    CHECK(prefix_cache::is_exact);
}

TEST_CASE("prefix_cache with a causal mask is the per-token AR cache") {
    const prefix_cache c;
    const causal_mask m;
    const canvas_layout ar{3, 4, 1, true};  // AR models are shifted: slot p from row p-1
    // Prefill: the prompt is stored and row 2 predicts slot 3.
    CHECK(c.plan(m, ar, {0, 0}) == forward_plan{0, 3, 2, 3, 0, 3, 3});
    // Slot 4: one row (the token just committed at 3), stored.
    CHECK(c.plan(m, ar, {1, 0}) == forward_plan{3, 4, 3, 4, 3, 4, 4});
    CHECK(c.plan(m, ar, {3, 0}) == forward_plan{5, 6, 5, 6, 5, 6, 6});
    // Unshifted causal decoding also needs the slot's own row.
    const canvas_layout unshifted{3, 4, 1, false};
    CHECK(c.plan(m, unshifted, {1, 0}) == forward_plan{3, 5, 4, 5, 3, 4, 5});
}

TEST_CASE("Fast-dLLM caches: full refresh at block start, then the block (+ suffix for the prefix cache)") {
    const semi_ar_mask m{4};
    const approx_prefix_cache p;
    const dual_cache d;
    const forward_plan refresh{0, 11, 7, 11, 0, 11, 11};
    CHECK(p.plan(m, plain, {1, 0}) == refresh);
    CHECK(d.plan(m, plain, {1, 0}) == refresh);
    CHECK(p.plan(m, plain, {0, 1}) == forward_plan{3, 11, 3, 7, 0, 0, 11});
    CHECK(d.plan(m, plain, {0, 1}) == forward_plan{3, 7, 3, 7, 0, 0, 11});
    // Shifted dual cache: rows [2, 6) predict block 0 and the block's last slot (6) stays fresh.
    CHECK(d.plan(m, shifted, {0, 2}) == forward_plan{2, 7, 2, 6, 0, 0, 11});
    CHECK_FALSE(approx_prefix_cache::is_exact);
    CHECK_FALSE(dual_cache::is_exact);
}

TEST_CASE("sub_block_cache: full forwards over the block until a sub-block's first slot is committed, then that sub-block alone") {
    const sub_block_cache c{4};
    const aligned_block_diffusion_mask m{8};
    const token_id M = 99;
    // Prompt 8, 16 slots, blocks of 8 from position 0: block 1 = [16, 24), shifted (slot p from row p - 1).
    const canvas_layout l{8, 16, 8, true, 0};
    std::vector<token_id> canvas(24, M);
    for (index_t p = 0; p < 16; ++p) canvas[static_cast<std::size_t>(p)] = 1;
    const canvas_view v{canvas, M};
    // Step 0 (stores block 0, commits slot 16 alone) and step 1 (the reference's first block-cache
    // forward): the whole block, its K/V stored.
    CHECK(c.plan(m, l, {1, 0}, v) == forward_plan{8, 24, 15, 23, 8, 24, 24});
    canvas[16] = 1;
    CHECK(c.plan(m, l, {1, 1}, v) == forward_plan{15, 24, 15, 23, 16, 24, 24});
    // Sub-block [16, 20) has its first slot: rows [16, 20), logits rows [16, 19) for slots 17..19;
    // keys [0, 16) and [20, 24) from the cache, nothing stored.
    canvas[17] = 1;
    CHECK(c.plan(m, l, {1, 2}, v) == forward_plan{16, 20, 16, 19, 0, 0, 24});
    // Sub-block [20, 24) with its first slot masked: a full forward again.
    canvas[18] = canvas[19] = 1;
    CHECK(c.plan(m, l, {1, 3}, v) == forward_plan{15, 24, 15, 23, 16, 24, 24});
    canvas[20] = 1;
    CHECK(c.plan(m, l, {1, 4}, v) == forward_plan{20, 24, 20, 23, 0, 0, 24});
    // A prompt that is not whole blocks (11 tokens): block 0 = [8, 16) begins inside the prompt, so its
    // first forward is already a denoising one, and sub-block [8, 12) starts with a prompt token.
    const canvas_layout u{11, 13, 8, true, 3};
    std::vector<token_id> c2(24, M);
    for (index_t p = 0; p < 11; ++p) c2[static_cast<std::size_t>(p)] = 1;
    const canvas_view v2{c2, M};
    CHECK(c.plan(m, u, {0, 0}, v2) == forward_plan{0, 16, 7, 15, 0, 16, 16});
    CHECK(c.plan(m, u, {0, 1}, v2) == forward_plan{8, 12, 8, 11, 0, 0, 16});
    CHECK_FALSE(sub_block_cache::is_exact);
    static_assert(kv_cache_policy<sub_block_cache>);
}

}  // namespace test_caches
