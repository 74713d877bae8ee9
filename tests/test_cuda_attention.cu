// The tensor-core attention (attention_tc.cuh) against the CUDA-core kernel (attention.cuh) on bf16
// models of every head size it takes, and the determinism docs/determinism.md claims for it: an exact
// cache gives a recompute's bits, a sequence gives the same bits alone and in a batch.
#include "cuda_test_util.cuh"

using namespace dlm_cuda_test;
using dlm::cuda::attention_path;
using dlm::cuda::gemm_path;

namespace {

/// TF32 rounds queries, keys, probabilities and values to 11 significant bits, 8 times finer than the
/// bf16 KV cache's rounding of keys and values (bf16_kv_tolerance, cuda_test_util.cuh, argues that one);
/// the logits move mostly where the bf16 rounding of a head's output falls the other way, by one bf16
/// step of that output, the order of change bf16_kv_tolerance bounds (docs/determinism.md).
constexpr double tc_attention_tolerance = bf16_kv_tolerance;

struct head_shape {
    index_t heads, kv_heads, head_dim;
};
/// Groups of 2, 4 and 7 query heads per KV head (7: Dream-7B's 28/4), every head size the kernel takes.
constexpr head_shape tc_shapes[] = {{4, 2, 32}, {8, 2, 64}, {7, 1, 128}};

/// The logits of every step of a block-by-block decode with an exact prefix cache (steps in order, so
/// the cache holds the blocks before): few rows over many cached keys, so the keys are split over blocks.
template <class Model, class Mask>
std::vector<float> cached_block_steps(Model& m, const Mask& mask, const canvas_layout& l, const tvec& canvas) {
    auto cache = m.make_kv_cache(l.size());
    std::vector<float> all;
    for (index_t b = 0; b < l.block_count(); ++b)
        for (index_t step = 0; step < 2; ++step) {
            const auto z = run(m, mask, canvas, l, prefix_cache{}.plan(mask, l, {b, step}), &cache);
            all.insert(all.end(), z.begin(), z.end());
        }
    return all;
}

/// scaled_diff between what `f` computes with the tensor-core attention and with the CUDA-core one.
template <class Model, class F>
double tc_against_simt(Model& m, F&& f) {
    m.set_attention_path(attention_path::tc);
    const auto tc = f();
    m.set_attention_path(attention_path::simt);
    const auto simt = f();
    m.set_attention_path(attention_path::automatic);
    return scaled_diff(tc, simt);
}

}  // namespace

TEST_SUITE("attention") {
    TEST_CASE("the tensor-core attention gives the CUDA-core kernel's logits within TF32 rounding, on whole canvases and cached steps") {
        for (const auto& [heads, kv_heads, head_dim] : tc_shapes) {
            CAPTURE(head_dim);
            const auto cfg = random_config(heads, kv_heads, head_dim, head_dim == 64, false);
            const auto w = cpu::random_weights(cfg, 23);
            gpu16 m(cfg, w);
            const canvas_layout l{45, 64, 16, cfg.logits_shift};  // 109 rows: several row tiles and key tiles
            const tvec canvas = random_canvas(45, 64, 300, 300, 4);
            const double bidirectional = tc_against_simt(m, [&] { return run(m, bidirectional_mask{}, canvas, l, full_plan(l)); });
            const double block_causal = tc_against_simt(m, [&] { return run(m, block_causal_mask{16}, canvas, l, full_plan(l)); });
            const double causal = tc_against_simt(m, [&] { return run(m, causal_mask{}, canvas, l, full_plan(l)); });
            const double steps = tc_against_simt(m, [&] { return cached_block_steps(m, block_causal_mask{16}, l, canvas); });
            MESSAGE("head_dim " << head_dim << ": tc against simt, bidirectional " << bidirectional << ", block-causal " << block_causal << ", causal "
                                << causal << ", cached steps " << steps);
            CHECK(bidirectional < tc_attention_tolerance);
            CHECK(block_causal < tc_attention_tolerance);
            CHECK(causal < tc_attention_tolerance);
            CHECK(steps < tc_attention_tolerance);
            // Not the same kernel under two names: TF32 rounding moves some logit.
            CHECK(bidirectional + block_causal + causal + steps > 0.0);
            // Unsplit: each block walks all of its tile's keys, no merge.
            m.set_attention_split_limit(1);
            const double unsplit = tc_against_simt(m, [&] { return cached_block_steps(m, block_causal_mask{16}, l, canvas); });
            m.set_attention_split_limit(dlm::cuda::kernels::max_attention_splits);
            CHECK(unsplit < tc_attention_tolerance);
        }
    }

    TEST_CASE("the attention's split limit is 1 to 16; anything else is refused by name") {
        gpu16 m(random_config(4, 2, 32, false, false), cpu::random_weights(random_config(4, 2, 32, false, false), 3));
        CHECK(m.attention_split_limit() == dlm::cuda::kernels::max_attention_splits);
        CHECK_THROWS_WITH_AS(m.set_attention_split_limit(0), doctest::Contains("attention split limit"), invalid_parameter);
        CHECK_THROWS_AS(m.set_attention_split_limit(17), invalid_parameter);
        m.set_attention_split_limit(1);
        CHECK(m.attention_split_limit() == 1);
    }

    TEST_CASE("the tensor-core attention on an f16 model gives the CUDA-core kernel's logits within TF32 rounding") {
        // f16 product inputs keep 11 significant bits, TF32's own width, so the kernels differ by less than on bf16.
        const auto cfg = random_config(7, 1, 128, true, false);
        dlm::cuda::basic_transformer<dlm::cuda::f16> m(cfg, cpu::random_weights(cfg, 41));
        const canvas_layout l{45, 64, 16, cfg.logits_shift};
        const tvec canvas = random_canvas(45, 64, 300, 300, 6);
        const double whole = tc_against_simt(m, [&] { return run(m, block_causal_mask{16}, canvas, l, full_plan(l)); });
        const double steps = tc_against_simt(m, [&] { return cached_block_steps(m, block_causal_mask{16}, l, canvas); });
        MESSAGE("f16, head_dim 128: tc against simt, block-causal " << whole << ", cached steps " << steps);
        CHECK(whole < tc_attention_tolerance);
        CHECK(steps < tc_attention_tolerance);
        CHECK(whole + steps > 0.0);
    }

    TEST_CASE("the tensor-core attention: an exact prefix cache gives a full recompute's logits bit for bit") {
        // 24 positions: one tile of keys, so one split whatever the rows; the tensor-core GEMM gives a row
        // the same bits in any batch of up to 64 rows. The cached step's rows sit at other places of the
        // mma tiles than in the recompute, and its keys come from the cache instead of the window.
        const auto cfg = random_config(8, 2, 64, false, false);
        const auto w = cpu::random_weights(cfg, 31);
        gpu16 f32_kv(cfg, w);
        dlm::cuda::transformer_bf16_kv bf16_kv(cfg, w);
        f32_kv.set_gemm_path(gemm_path::tc);
        bf16_kv.set_gemm_path(gemm_path::tc);
        f32_kv.set_attention_path(attention_path::tc);
        bf16_kv.set_attention_path(attention_path::tc);
        const canvas_layout l{8, 16, 4, false};
        CHECK(compare_with_full_recompute<prefix_cache>(f32_kv, block_causal_mask{4}, l, 5, 3, 0.0) == 12);
        CHECK(compare_with_full_recompute<prefix_cache>(bf16_kv, block_causal_mask{4}, l, 5, 3, 0.0) == 12);
    }

    TEST_CASE("the tensor-core attention: a sequence's logits are the same bits alone and in a batch") {
        const auto cfg = random_config(7, 1, 128, true, false);
        const auto w = cpu::random_weights(cfg, 37);
        gpu16 m(cfg, w);
        m.set_gemm_path(gemm_path::tc);
        m.set_attention_path(attention_path::tc);
        const bidirectional_mask mask;
        // At most 32 positions each: one tile of keys, one split, alone or together (56 rows: the
        // tensor-core GEMM's batch-invariant range).
        const canvas_layout la{10, 16, 8, true}, lb{6, 24, 8, true};
        const tvec a = random_canvas(10, 16, 300, 300, 8), b = random_canvas(6, 24, 300, 300, 9);
        const forward_plan pa = full_plan(la), pb = full_plan(lb);
        const auto alone = run(m, mask, a, la, pa);
        using kv = gpu16::kv_cache;
        const std::vector<forward_request<kv>> batch{{b, lb, pb, nullptr}, {a, la, pa, nullptr}};
        std::vector<float> out(static_cast<std::size_t>(pa.logits_rows() + pb.logits_rows()) * 301);
        m.forward(std::span<const forward_request<kv>>(batch), mask, out);
        const std::vector<float> in_batch(out.begin() + static_cast<std::ptrdiff_t>(pb.logits_rows()) * 301, out.end());
        CHECK(bitwise_equal(in_batch, alone));
    }
}
