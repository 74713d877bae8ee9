// Masks: allowed(q, k), key_end and the block structure, on hand-computed layouts.
#include <doctest/doctest.h>

#include <dlm/mask/block_diffusion.hpp>
#include <dlm/mask/masks.hpp>

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_masks {

using namespace dlm;

namespace {
// prompt of 3, 8 slots in blocks of 4: positions 0-2 prompt, 3-6 block 0, 7-10 block 1.
constexpr canvas_layout layout{3, 8, 4, false};

template <class Mask>
void check_key_end_consistent(const Mask& m, const canvas_layout& l) {
    for (index_t q = 0; q < l.size(); ++q)
        for (index_t k = m.key_end(l, q); k < l.size(); ++k) CHECK_FALSE(m.allowed(l, q, k));
}
}  // namespace

TEST_CASE("layout: blocks, positions and the logit shift") {
    CHECK(layout.size() == 11);
    CHECK(layout.block_count() == 2);
    CHECK(layout.block_begin(1) == 7);
    CHECK(layout.block_end(1) == 11);
    CHECK(layout.block_of(2) == -1);
    CHECK(layout.block_of(3) == 0);
    CHECK(layout.block_of(7) == 1);
    CHECK(layout.row_for_slot(5) == 5);
    constexpr canvas_layout shifted{3, 8, 4, true};
    CHECK(shifted.row_for_slot(5) == 4);
}

TEST_CASE("causal mask: k <= q, blocks of one slot") {
    const causal_mask m;
    CHECK(m.allowed(layout, 5, 5));
    CHECK(m.allowed(layout, 5, 0));
    CHECK_FALSE(m.allowed(layout, 5, 6));
    CHECK(m.key_end(layout, 5) == 6);
    CHECK(m.block_length_for(8) == 1);
    CHECK(causal_mask::committed_kv_is_final);
    check_key_end_consistent(m, layout);
}

TEST_CASE("bidirectional mask: everything, one block") {
    const bidirectional_mask m;
    CHECK(m.allowed(layout, 0, 10));
    CHECK(m.allowed(layout, 10, 0));
    CHECK(m.key_end(layout, 0) == 11);
    CHECK(m.block_length_for(8) == 8);
    CHECK_FALSE(bidirectional_mask::committed_kv_is_final);
}

TEST_CASE("semi-autoregressive mask: bidirectional attention, blocks validated") {
    const semi_ar_mask m{4};
    CHECK(m.allowed(layout, 3, 10));
    CHECK(m.block_length_for(8) == 4);
    CHECK(semi_ar_mask{0}.block_length_for(8) == 8);
    CHECK_FALSE(semi_ar_mask{}.block_length.has_value());  // unset: the decoder takes the model's, else 32
    CHECK(semi_ar_mask{}.block_length_for(64) == 32);
    CHECK_THROWS_AS((void)semi_ar_mask{3}.block_length_for(8), invalid_parameter);
    CHECK_THROWS_WITH((void)semi_ar_mask{3}.block_length_for(8),
                      doctest::Contains("'block_length': must divide gen_length (8), got 3"));
    CHECK_THROWS_AS((void)semi_ar_mask{-1}.block_length_for(8), invalid_parameter);
    CHECK_FALSE(semi_ar_mask::committed_kv_is_final);
}

TEST_CASE("block-causal mask: prompt sees prompt, block b sees prompt, blocks < b and itself") {
    const block_causal_mask m{4};
    // The prompt attends to the prompt only, bidirectionally.
    CHECK(m.allowed(layout, 0, 2));
    CHECK_FALSE(m.allowed(layout, 2, 3));
    // Block 0 (3-6): prompt and itself, bidirectionally, not block 1.
    CHECK(m.allowed(layout, 3, 0));
    CHECK(m.allowed(layout, 3, 6));
    CHECK_FALSE(m.allowed(layout, 6, 7));
    // Block 1 (7-10): everything before and itself.
    CHECK(m.allowed(layout, 7, 3));
    CHECK(m.allowed(layout, 7, 10));
    CHECK(m.key_end(layout, 1) == 3);
    CHECK(m.key_end(layout, 4) == 7);
    CHECK(m.key_end(layout, 9) == 11);
    CHECK(block_causal_mask::committed_kv_is_final);
    CHECK_FALSE(block_causal_mask{}.block_length.has_value());
    CHECK(block_causal_mask{}.block_length_for(64) == 32);
    CHECK_THROWS_AS((void)block_causal_mask{5}.block_length_for(8), invalid_parameter);
    check_key_end_consistent(m, layout);
}

TEST_CASE("block-causal mask with blocks of one slot is the causal mask on the generation") {
    const block_causal_mask bc{1};
    const causal_mask c;
    const canvas_layout l{2, 6, 1, false};
    for (index_t q = l.prompt_length; q < l.size(); ++q)
        for (index_t k = 0; k < l.size(); ++k) CHECK((bc.allowed(l, q, k) == c.allowed(l, q, k) || k < l.prompt_length));
}

TEST_CASE("every mask dlm ships declares allowed_is_prefix, and the keys it allows are those below key_end on every layout") {
    // The CPU attention takes a query's keys as [0, key_end) for such a mask without asking
    // allowed (mask/concept.hpp): a key left out below key_end would be attended.
    const auto check = [](const auto& m) {
        static_assert(mask_allowed_is_prefix<std::remove_cvref_t<decltype(m)>>());
        for (index_t prompt = 0; prompt <= 6; ++prompt)
            for (index_t block : {1, 2, 4})
                for (index_t lead = 0; lead < block && lead <= prompt; ++lead) {
                    const canvas_layout l{prompt, 8, block, false, lead};
                    for (index_t q = 0; q < l.size(); ++q)
                        for (index_t k = 0; k < l.size(); ++k) {
                            CAPTURE(prompt);
                            CAPTURE(block);
                            CAPTURE(lead);
                            CAPTURE(q);
                            CAPTURE(k);
                            CHECK(m.allowed(l, q, k) == (k < m.key_end(l, q)));
                        }
                }
    };
    check(causal_mask{});
    check(bidirectional_mask{});
    check(semi_ar_mask{4});
    check(block_causal_mask{4});
    check(block_diffusion_mask{4});
    check(aligned_block_diffusion_mask{4});
}

}  // namespace test_masks
