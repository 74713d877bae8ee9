// The device-side decoding kernels against their host counterparts, without a model: Philox on the
// device vs the host, the fused sampling kernel vs the host samplers, the device selection vs the host
// schedules (every shipped one, ties and edge cases included). Suite "host" runs without a GPU.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <dlm/cuda/device_decoder.cuh>
#include <dlm/cuda/gemm.cuh>
#include <dlm/cuda/transformer.cuh>
#include <dlm/presets.hpp>

using namespace dlm;

namespace {

__global__ void philox_kernel(random_key key, std::uint32_t n, double* out) {
    for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = key.uniform(i);
}

std::vector<double> device_uniforms(const random_key& key, std::uint32_t n) {
    dlm::cuda::device_buffer<double> d(n, "uniforms");
    philox_kernel<<<64, 256>>>(key, n, d.data());
    dlm::cuda::check_launch("philox_kernel", nullptr);
    std::vector<double> out(n);
    dlm::cuda::check(cudaMemcpy(out.data(), d.data(), n * sizeof(double), cudaMemcpyDeviceToHost), "cudaMemcpy");
    return out;
}

/// Random logits rows with the features the samplers care about.
std::vector<float> random_rows(std::size_t rows, index_t vocab, unsigned seed) {
    std::mt19937 g(seed);
    std::normal_distribution<float> d(0.0f, 3.0f);
    std::vector<float> z(rows * static_cast<std::size_t>(vocab));
    for (float& v : z) v = d(g);
    return z;
}

bool close(float a, float b) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    return std::abs(a - b) <= 1e-6f * std::max(1.0f, std::abs(b));
}

template <class Sampler>
void check_sampler(const Sampler& sampler, const std::vector<float>& z, index_t vocab, std::vector<unsigned char> banned, std::vector<token_id> eos,
                   const std::string& what) {
    CAPTURE(what);
    const std::size_t rows = z.size() / static_cast<std::size_t>(vocab);
    std::vector<random_key> keys;
    for (std::size_t r = 0; r < rows; ++r)
        keys.push_back({0x1234abcdULL + r % 3, rng_stream::sampling, static_cast<index_t>(r % 5), static_cast<index_t>(17 + r)});  // seeds per row
    if (banned.empty()) banned.assign(rows, 0);
    const auto device = dlm::cuda::sample_on_device(sampler, z, vocab, keys, banned, eos);
    REQUIRE(device.size() == rows);
    for (std::size_t r = 0; r < rows; ++r) {
        CAPTURE(r);
        const std::span<const float> row(z.data() + r * static_cast<std::size_t>(vocab), static_cast<std::size_t>(vocab));
        const slot_choice host = sampler.sample(row, keys[r], banned[r] ? std::span<const token_id>(eos) : std::span<const token_id>{});
        CHECK(device[r].token == host.token);
        CHECK(close(device[r].probability, host.probability));
        CHECK(close(device[r].margin, host.margin));
        CHECK(close(device[r].neg_entropy, host.neg_entropy));
    }
}

/// Candidates with ties, EOS tokens and values around the thresholds.
std::vector<candidate> random_candidates(std::mt19937& g, index_t n, index_t first_position, bool coarse) {
    std::vector<candidate> c(static_cast<std::size_t>(n));
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    for (index_t i = 0; i < n; ++i) {
        candidate& x = c[static_cast<std::size_t>(i)];
        x.position = first_position + i;
        x.token = static_cast<token_id>(g() % 12);  // 0 and 1 are the EOS ids below
        x.probability = coarse ? static_cast<float>(g() % 11) / 10.0f : u(g);
        x.margin = coarse ? static_cast<float>(g() % 5) / 8.0f : u(g) * x.probability;
        x.neg_entropy = coarse ? -static_cast<float>(g() % 7) / 4.0f : -u(g) * 3.0f;
    }
    return c;
}

template <class Schedule>
void check_schedule(const Schedule& schedule, const std::string& what, index_t block_length = 64, index_t gen_length = 256) {
    CAPTURE(what);
    static const std::vector<token_id> eos{0, 1}, end_of_turn{5};
    std::mt19937 g(7);
    std::vector<step_context> contexts;
    std::vector<std::vector<candidate>> cands;
    for (int trial = 0; trial < 40; ++trial) {
        const canvas_layout l{11, gen_length, block_length, trial % 2 == 0};
        const index_t n = trial == 0 ? 0 : trial == 1 ? 1 : trial == 2 ? block_length : static_cast<index_t>(g() % static_cast<unsigned>(block_length + 1));
        step_context ctx{l,
                         {static_cast<index_t>(g() % static_cast<unsigned>(l.block_count())), static_cast<index_t>(g() % 70)},
                         block_length,
                         static_cast<index_t>(g() % static_cast<unsigned>(gen_length)),
                         static_cast<index_t>(g() % 300),
                         99 + static_cast<std::uint64_t>(trial % 3),  // each sequence its own seed
                         eos,
                         end_of_turn};
        ctx.masked_at_block_start = std::max(n, static_cast<index_t>(g() % static_cast<unsigned>(block_length + 1)));
        contexts.push_back(ctx);
        cands.push_back(random_candidates(g, n, l.block_begin(ctx.cursor.block), trial % 3 == 0));
    }
    const auto device = dlm::cuda::select_on_device(schedule, std::span<const step_context>(contexts), std::span<const std::vector<candidate>>(cands), 12);
    for (std::size_t i = 0; i < contexts.size(); ++i) {
        CAPTURE(i);
        std::vector<index_t> host;
        schedule.select(contexts[i], std::span<const candidate>(cands[i]), host);
        CHECK(device[i] == host);
    }
}

}  // namespace

TEST_SUITE("host") {
    TEST_CASE("the device policies are the shipped ones, and refuse what they do not implement") {
        static_assert(dlm::cuda::device_sampler<greedy_sampler>::supported);
        static_assert(dlm::cuda::device_sampler<categorical_sampler>::supported);
        static_assert(dlm::cuda::device_sampler<presets::llada_sampler>::supported);
        static_assert(dlm::cuda::device_schedule<threshold_schedule>::supported);
        static_assert(dlm::cuda::device_schedule<presets::cdlm_schedule>::supported);
        static_assert(dlm::cuda::device_schedule<factor_schedule>::supported);
        static_assert(dlm::cuda::device_schedule<llada_schedule>::supported);
        static_assert(dlm::cuda::device_schedule<dream_schedule>::supported);
        static_assert(dlm::cuda::device_schedule<cd4lm_schedule>::supported);
        static_assert(dlm::cuda::device_schedule<next_slot_schedule>::supported);
        struct my_schedule {
            void select(const step_context&, std::span<const candidate>, std::vector<index_t>&) const {}
        };
        static_assert(!dlm::cuda::device_schedule<my_schedule>::supported);
        CHECK(dlm::cuda::device_sampler<categorical_sampler>::params({0.7f, 0, 1.0f, confidence_source::raw}).raw_confidence);
        CHECK(dlm::cuda::device_sampler<categorical_sampler>::params({0.7f, 0, 1.0f}).temperature == 0.7f);
        CHECK_THROWS_WITH_AS(dlm::cuda::device_sampler<categorical_sampler>::params({0.7f, 40, 1.0f}), doctest::Contains("top_k"), invalid_parameter);
        CHECK_THROWS_WITH_AS(dlm::cuda::device_sampler<categorical_sampler>::params({0.7f, 0, 0.9f}), doctest::Contains("top_p"), invalid_parameter);
        CHECK_THROWS_AS(dlm::cuda::device_sampler<categorical_sampler>::params({-1.0f, 0, 1.0f}), invalid_parameter);
        CHECK(dlm::cuda::max_selection_slots == 1024);
    }

    TEST_CASE("DLM_CUDA_SYNC turns the debug mode on for any value but empty and 0; DLM_CUDA_GRAPHS=0 turns graphs off") {
        CHECK(dlm::cuda::sync_requested("1"));
        CHECK(dlm::cuda::sync_requested("yes"));
        CHECK(!dlm::cuda::sync_requested("0"));
        CHECK(!dlm::cuda::sync_requested(""));
        CHECK(!dlm::cuda::sync_requested(nullptr));
        CHECK(dlm::cuda::graphs_refused("0"));
        CHECK(!dlm::cuda::graphs_refused("1"));
        CHECK(!dlm::cuda::graphs_refused(nullptr));
    }

    TEST_CASE("DLM_CUDA_ATTENTION names an attention path; auto takes tensor cores for bf16 and f16 models with heads of 32, 64 or 128") {
        using dlm::cuda::attention_path;
        CHECK(dlm::cuda::parse_attention_path("simt", "DLM_CUDA_ATTENTION") == attention_path::simt);
        CHECK(dlm::cuda::parse_attention_path("tc", "DLM_CUDA_ATTENTION") == attention_path::tc);
        CHECK(dlm::cuda::parse_attention_path("auto", "DLM_CUDA_ATTENTION") == attention_path::automatic);
        CHECK(dlm::cuda::name(attention_path::tc) == "tc");
        CHECK_THROWS_WITH_AS((void)dlm::cuda::parse_attention_path("TC", "DLM_CUDA_ATTENTION"), doctest::Contains("DLM_CUDA_ATTENTION"), invalid_parameter);
        CHECK_THROWS_WITH_AS((void)dlm::cuda::parse_attention_path("", "--attention"), doctest::Contains("simt, tc, auto"), invalid_parameter);
        for (const index_t d : {32, 64, 128}) {
            CHECK(dlm::cuda::resolve_attention_path(attention_path::automatic, false, d) == attention_path::tc);
            CHECK(dlm::cuda::resolve_attention_path(attention_path::tc, false, d) == attention_path::tc);
            CHECK(dlm::cuda::resolve_attention_path(attention_path::simt, false, d) == attention_path::simt);
            CHECK(dlm::cuda::resolve_attention_path(attention_path::tc, true, d) == attention_path::simt);  // f32 models keep f32 attention
        }
        for (const index_t d : {8, 16, 96, 256}) CHECK(dlm::cuda::resolve_attention_path(attention_path::tc, false, d) == attention_path::simt);
    }

    TEST_CASE("DLM_CUDA_GEMM names a GEMM path; anything else is refused by name") {
        CHECK(dlm::cuda::parse_gemm_path("cublas", "DLM_CUDA_GEMM") == dlm::cuda::gemm_path::cublas);
        CHECK(dlm::cuda::parse_gemm_path("lt", "DLM_CUDA_GEMM") == dlm::cuda::gemm_path::lt);
        CHECK(dlm::cuda::parse_gemm_path("skinny", "DLM_CUDA_GEMM") == dlm::cuda::gemm_path::skinny);
        CHECK(dlm::cuda::parse_gemm_path("tc", "DLM_CUDA_GEMM") == dlm::cuda::gemm_path::tc);
        CHECK(dlm::cuda::parse_gemm_path("auto", "DLM_CUDA_GEMM") == dlm::cuda::gemm_path::automatic);
        CHECK(dlm::cuda::name(dlm::cuda::gemm_path::skinny) == "skinny");
        CHECK(dlm::cuda::name(dlm::cuda::gemm_path::tc) == "tc");
        CHECK_THROWS_WITH_AS((void)dlm::cuda::parse_gemm_path("cuBLAS", "DLM_CUDA_GEMM"), doctest::Contains("DLM_CUDA_GEMM"), invalid_parameter);
        CHECK_THROWS_AS((void)dlm::cuda::parse_gemm_path("", "DLM_CUDA_GEMM"), invalid_parameter);
        // auto is skinny for one row and cublas for more (measured: gemm_path.cuh); skinny and tc fall back
        // to cublas where their kernel does not apply.
        using dlm::cuda::gemm_path;
        const auto* aligned = reinterpret_cast<const dlm::cuda::bf16*>(std::uintptr_t{256});
        const auto* aligned_f16 = reinterpret_cast<const dlm::cuda::f16*>(std::uintptr_t{256});
        const auto* aligned_f32 = reinterpret_cast<const float*>(std::uintptr_t{256});
        const auto* misaligned = reinterpret_cast<const dlm::cuda::bf16*>(std::uintptr_t{258});
        CHECK(dlm::cuda::resolve_gemm_path(gemm_path::automatic, 1, 4096, 4096, aligned, aligned) == gemm_path::skinny);
        CHECK(dlm::cuda::resolve_gemm_path(gemm_path::automatic, 2, 4096, 4096, aligned, aligned) == gemm_path::cublas);
        CHECK(dlm::cuda::resolve_gemm_path(gemm_path::automatic, 33, 4608, 3584, aligned, aligned) == gemm_path::cublas);
        CHECK(dlm::cuda::resolve_gemm_path(gemm_path::automatic, 1, 4096, 100, aligned, aligned) == gemm_path::cublas);
        CHECK(dlm::cuda::resolve_gemm_path(gemm_path::tc, 64, 4096, 4096, aligned_f16, aligned_f16) == gemm_path::tc);
        CHECK(dlm::cuda::resolve_gemm_path(gemm_path::tc, 65, 4096, 4096, aligned, aligned) == gemm_path::cublas);
        CHECK(dlm::cuda::resolve_gemm_path(gemm_path::tc, 8, 4096, 4096, misaligned, aligned) == gemm_path::cublas);
        CHECK(dlm::cuda::resolve_gemm_path(gemm_path::tc, 8, 4096, 100, aligned, aligned) == gemm_path::cublas);
        CHECK(dlm::cuda::resolve_gemm_path(gemm_path::tc, 1, 4096, 4096, aligned_f32, aligned_f32) == gemm_path::cublas);
        CHECK(dlm::cuda::resolve_gemm_path(gemm_path::tc, 33, 4096, 4096, aligned, aligned) == gemm_path::tc);
        CHECK(dlm::cuda::resolve_gemm_path(gemm_path::skinny, 16, 4096, 4096, aligned, aligned) == gemm_path::skinny);
        CHECK(dlm::cuda::resolve_gemm_path(gemm_path::skinny, 17, 4096, 4096, aligned, aligned) == gemm_path::cublas);
        CHECK(dlm::cuda::resolve_gemm_path(gemm_path::skinny, 4, 4096, 100, aligned, aligned) == gemm_path::cublas);
        CHECK(dlm::cuda::resolve_gemm_path(gemm_path::lt, 64, 4096, 100, aligned, aligned) == gemm_path::lt);
    }

    TEST_CASE("the tensor-core kernel splits k over whole chunks, by n, k and the device alone") {
        using dlm::cuda::tc_split_for;
        // Dream-7B on 132 multiprocessors: q/k/v 36 row blocks (7 splits), o 28 (7: 8 would leave a
        // split of 3 chunks), down 28 (8), gate/up 296 and the head 1188 (none).
        CHECK(tc_split_for(4608, 3584, 132).splits == 7);
        CHECK(tc_split_for(4608, 3584, 132).span == 512);
        CHECK(tc_split_for(3584, 3584, 132).splits == 7);
        CHECK(tc_split_for(3584, 18944, 132).splits == 8);
        CHECK(tc_split_for(3584, 18944, 132).span == 2432);
        CHECK(tc_split_for(37888, 3584, 132).splits == 1);
        CHECK(tc_split_for(152064, 3584, 132).splits == 1);
        // Never more splits than chunks, every split non-empty, and the ranges cover k.
        for (const index_t k : {8, 72, 128, 136, 1000, 2056, 18944})
            for (const index_t n : {1, 45, 1037, 4100})
                for (const int sms : {1, 16, 132}) {
                    const auto s = tc_split_for(n, k, sms);
                    CAPTURE(k);
                    CAPTURE(n);
                    CAPTURE(sms);
                    CHECK(s.splits >= 1);
                    CHECK(s.splits <= dlm::cuda::tc_max_splits);
                    CHECK(s.span % dlm::cuda::tc_chunk == 0);
                    CHECK(static_cast<index_t>(s.splits - 1) * s.span < k);
                    CHECK(static_cast<index_t>(s.splits) * s.span >= k);
                }
    }

    TEST_CASE("a device decoder type for every preset") {
        using M = struct fake_model;  // only the type mapping is checked here
        static_assert(std::is_same_v<dlm::cuda::device_decoder_t<presets::cdlm<M>>,
                                     dlm::cuda::device_decoder<M, block_causal_mask, prefix_cache, presets::cdlm_schedule, greedy_sampler>>);
        static_assert(std::is_same_v<dlm::cuda::device_decoder_t<presets::llada<M>>,
                                     dlm::cuda::device_decoder<M, semi_ar_mask, no_cache, llada_schedule, presets::llada_sampler>>);
        CHECK(dlm::cuda::device_count() >= 0);
    }

    TEST_CASE("the KV cache is f32 by default and bf16 in transformer_bf16_kv, half the bytes (Dream-7B: 42 and 21 MiB for 384 positions)") {
        static_assert(std::is_same_v<dlm::cuda::transformer::kv_element, float>);
        static_assert(std::is_same_v<dlm::cuda::transformer_bf16_kv::kv_element, dlm::cuda::bf16>);
        static_assert(std::is_same_v<dlm::cuda::transformer_bf16_kv::element_type, dlm::cuda::bf16>);
        static_assert(std::is_same_v<dlm::cuda::transformer_bf16_kv::kv_cache, dlm::cuda::kv_cache<dlm::cuda::bf16>>);
        // Sizes from the shape alone (a default cache holds no device memory): 28 layers, 4 KV heads, head_dim 128.
        auto shaped = [](auto cache) {
            cache.capacity = 384;
            cache.layers = 28;
            cache.kv_heads = 4;
            cache.head_dim = 128;
            return cache.bytes();
        };
        CHECK(shaped(dlm::cuda::transformer::kv_cache{}) == std::size_t{42} << 20);
        CHECK(shaped(dlm::cuda::transformer_bf16_kv::kv_cache{}) == std::size_t{21} << 20);
    }
}

TEST_SUITE("philox") {
    TEST_CASE("Philox draws the same numbers on the device as on the host") {
        const std::uint32_t n = 100000;
        for (const random_key key : {random_key{0, rng_stream::sampling, 0, 0}, random_key{0xdeadbeefcafef00dULL, rng_stream::remasking, 17, 4093},
                                     random_key{42, rng_stream::selection, 1 << 20, 151935}, random_key{~0ULL, rng_stream::transfer, -1, -7}}) {
            const std::vector<double> d = device_uniforms(key, n);
            std::size_t mismatches = 0;
            for (std::uint32_t i = 0; i < n; ++i) {
                const double h = key.uniform(i);
                if (std::memcmp(&h, &d[i], sizeof(double)) != 0) ++mismatches;
            }
            CHECK(mismatches == 0);
        }
    }
}

TEST_SUITE("sampling") {
    TEST_CASE("the fused sampling kernel returns the host samplers' tokens and confidences") {
        const index_t vocab = 5003;
        std::vector<float> z = random_rows(24, vocab, 3);
        // Row 1: a tied maximum (the lower id wins; top-2 equals top-1, margin 0).
        z[vocab + 10] = 30.0f;
        z[vocab + 4000] = 30.0f;
        // Row 2: the argmax is an EOS id (banned below).
        z[2 * vocab + 1] = 40.0f;
        // Row 3: -inf entries (as a filter would leave them).
        for (index_t i = 0; i < vocab; i += 3) z[3 * static_cast<std::size_t>(vocab) + i] = -std::numeric_limits<float>::infinity();
        // Row 4: a peaked row, most entries just above or below the bound (best − max_gumbel) under
        // which the kernel skips their draws.
        for (index_t i = 0; i < vocab; ++i) z[4 * static_cast<std::size_t>(vocab) + i] = i % 2 ? 12.6f : 12.4f;
        z[4 * static_cast<std::size_t>(vocab) + 77] = 50.0f;
        std::vector<unsigned char> banned(24, 0);
        banned[2] = 1;
        banned[5] = 1;
        const std::vector<token_id> eos{1, 2};
        check_sampler(greedy_sampler{}, z, vocab, banned, eos, "greedy");
        check_sampler(categorical_sampler{}, z, vocab, banned, eos, "categorical, temperature 0");
        check_sampler(categorical_sampler{0.7f}, z, vocab, banned, eos, "categorical, temperature 0.7, filtered confidence");
        check_sampler(presets::llada_sampler{1.3f}, z, vocab, banned, eos, "LLaDA, temperature 1.3, raw confidence");
    }

    TEST_CASE("a full-size vocabulary row (152064) and tiny temperatures") {
        const index_t vocab = 152064;
        const std::vector<float> z = random_rows(3, vocab, 11);
        check_sampler(greedy_sampler{}, z, vocab, {}, {}, "greedy");
        check_sampler(categorical_sampler{1.0f}, z, vocab, {}, {}, "temperature 1");
        check_sampler(categorical_sampler{1e-3f}, z, vocab, {}, {}, "temperature 1e-3");
        // Below about 1e-38 the logits over the temperature overflow: the host's greedy limit
        // (sampler/temperature.hpp), the row shifted by its largest finite logit, on the device too.
        check_sampler(categorical_sampler{1e-40f}, z, vocab, {}, {}, "temperature 1e-40");
        check_sampler(presets::llada_sampler{1e-45f}, z, vocab, {}, {}, "LLaDA, temperature 1e-45");
        // A logit so large that even a temperature of 0.5 overflows it: the shift applies at any temperature below 1.
        std::vector<float> huge = z;
        huge[17] = 1e38f;
        check_sampler(categorical_sampler{0.5f}, huge, vocab, {}, {}, "a 1e38 logit at temperature 0.5");
    }

    TEST_CASE("a row with every token banned gives NaN confidences") {
        const index_t vocab = 4;
        const std::vector<float> z = {1.f, 2.f, 3.f, 4.f};
        const std::vector<random_key> keys(1, random_key{1, rng_stream::sampling, 0, 0});
        const std::vector<unsigned char> banned = {1};
        const std::vector<token_id> all = {0, 1, 2, 3};  // banned as the EOS ids of the row
        const auto r = dlm::cuda::sample_on_device(greedy_sampler{}, z, vocab, keys, banned, all);
        CHECK(std::isnan(r.front().probability));
    }

    TEST_CASE("a row with NaN or +Inf, or every logit -Inf, gives NaN confidences") {
        const index_t vocab = 64;
        std::vector<float> z = random_rows(3, vocab, 5);
        z[7] = std::numeric_limits<float>::quiet_NaN();
        z[vocab + 9] = std::numeric_limits<float>::infinity();
        for (index_t i = 0; i < vocab; ++i) z[2 * static_cast<std::size_t>(vocab) + i] = -std::numeric_limits<float>::infinity();
        const std::vector<random_key> keys(3, random_key{1, rng_stream::sampling, 0, 0});
        const auto r = dlm::cuda::sample_on_device(greedy_sampler{}, z, vocab, keys, {}, {});
        for (const auto& x : r) CHECK(std::isnan(x.probability));
    }
}

TEST_SUITE("selection") {
    TEST_CASE("the device selection chooses what the host schedules choose, in the same order") {
        check_schedule(threshold_schedule{0.9}, "threshold 0.9");
        check_schedule(threshold_schedule{0.5}, "threshold 0.5");
        check_schedule(presets::cdlm_schedule{}, "cdlm");
        check_schedule(factor_schedule{1.0}, "factor 1");
        check_schedule(factor_schedule{0.3}, "factor 0.3");
        check_schedule(factor_schedule{4.0}, "factor 4");
        check_schedule(llada_schedule{256}, "llada low confidence");
        check_schedule(llada_schedule{64, remasking::random}, "llada random");
        check_schedule(dream_schedule{64}, "dream origin");
        check_schedule(dream_schedule{64, 1e-3, dream_alg::maskgit_plus}, "dream maskgit_plus");
        check_schedule(dream_schedule{128, 1e-3, dream_alg::topk_margin}, "dream topk_margin");
        check_schedule(dream_schedule{32, 1e-3, dream_alg::entropy}, "dream entropy");
        check_schedule(dream_schedule{64, 1e-3, dream_alg::maskgit_plus, 0.5}, "dream alg_temp 0.5");
        check_schedule(cd4lm_schedule{}, "cd4lm defaults");
        check_schedule(cd4lm_schedule{0.5, 2, 5, 0.9, 3}, "cd4lm tau 0.5, 2-5 tokens, guard 0.9, 3 steps");
        check_schedule(next_slot_schedule{}, "next slot");
    }

    TEST_CASE("blocks of the largest size the device takes") {
        check_schedule(llada_schedule{1024}, "llada, block 1024", 1024, 1024);
        check_schedule(factor_schedule{1.0}, "factor, block 1024", 1024, 1024);
        check_schedule(threshold_schedule{0.9}, "threshold, block 1024", 1024, 1024);
    }
}

namespace {

/// Runs y (+)= x · Wᵀ by `path` on random inputs of type T and checks it against a double-precision host
/// reference from the same rounded inputs: within 1e-4 of the sum of |products| (f32 accumulation, which
/// tensor cores may truncate; a wrong index or a lost term is off by far more).
/// Returns the device result.
template <class T>
std::vector<float> check_gemm(dlm::cuda::gemm_path path, index_t m, index_t n, index_t k, float beta, unsigned seed) {
    CAPTURE(dlm::cuda::name(path));
    CAPTURE(m);
    CAPTURE(n);
    CAPTURE(k);
    CAPTURE(beta);
    std::mt19937 g(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<T> x(static_cast<std::size_t>(m) * k), w(static_cast<std::size_t>(n) * k);
    for (T& v : x) v = dlm::cuda::element<T>::from_float(u(g));
    for (T& v : w) v = dlm::cuda::element<T>::from_float(u(g) * 0.1f);
    std::vector<float> y0(static_cast<std::size_t>(m) * n);
    for (float& v : y0) v = u(g);
    dlm::cuda::stream_context ctx;
    dlm::cuda::gemm_engine engine;
    dlm::cuda::device_buffer<T> dx(x.size() + 1, "x"), dw(w.size() + 1, "W");
    dlm::cuda::device_buffer<float> dy(y0.size() + 1, "y");
    dlm::cuda::upload(dx.data(), x.data(), x.size(), ctx.stream(), "x");
    dlm::cuda::upload(dw.data(), w.data(), w.size(), ctx.stream(), "W");
    dlm::cuda::upload(dy.data(), y0.data(), y0.size(), ctx.stream(), "y");
    engine.run(ctx, path, m, n, k, dx.data(), dw.data(), dy.data(), beta, "test product");
    std::vector<float> y(y0.size());
    dlm::cuda::download(y.data(), dy.data(), y.size(), ctx.stream(), "y");
    ctx.synchronize("test product");
    std::size_t bad = 0;
    for (index_t i = 0; i < m; ++i)
        for (index_t j = 0; j < n; ++j) {
            double sum = 0, size = 0;
            for (index_t t = 0; t < k; ++t) {
                const double p = static_cast<double>(dlm::cuda::element<T>::to_float(x[static_cast<std::size_t>(i) * k + t])) *
                                 dlm::cuda::element<T>::to_float(w[static_cast<std::size_t>(j) * k + t]);
                sum += p;
                size += std::abs(p);
            }
            const std::size_t at = static_cast<std::size_t>(i) * n + j;
            const double expect = sum + beta * static_cast<double>(y0[at]);
            if (!(std::abs(y[at] - expect) <= 1e-4 * (size + std::abs(beta * y0[at])) + 1e-6)) ++bad;
        }
    CHECK(bad == 0);
    return y;
}

}  // namespace

TEST_SUITE("gemm") {
    TEST_CASE("every GEMM path computes the product and the fused residual, on odd shapes") {
        using dlm::cuda::gemm_path;
        for (const gemm_path path : {gemm_path::cublas, gemm_path::lt, gemm_path::skinny, gemm_path::tc})
            for (const index_t m : {1, 3, 16})
                for (const float beta : {0.0f, 1.0f}) {
                    check_gemm<dlm::cuda::bf16>(path, m, 1037, 2056, beta, 1);  // k spans chunks of the skinny kernel with a tail
                    check_gemm<dlm::cuda::f16>(path, m, 77, 520, beta, 2);
                    check_gemm<float>(path, m, 301, 260, beta, 3);
                }
        // Above skinny_max_rows and for k not a multiple of its vector, the skinny path is cuBLAS's.
        check_gemm<dlm::cuda::bf16>(gemm_path::skinny, 33, 1037, 2056, 1.0f, 4);
        check_gemm<dlm::cuda::bf16>(gemm_path::skinny, 3, 129, 100, 0.0f, 5);
        check_gemm<dlm::cuda::bf16>(gemm_path::lt, 64, 129, 100, 1.0f, 6);
        // The tensor-core kernel at every tile count (8, 9, 33, 64 rows), with k ending inside a chunk and
        // inside a 32-element group (2056 = 32 chunks + 8), n ending inside a block (1037 = 32 · 32 + 13),
        // a k smaller than one chunk per warp (72); above 64 rows, for f32 and for k not a multiple of 8 it
        // is cuBLAS's.
        for (const index_t m : {8, 9, 33, 64}) {
            check_gemm<dlm::cuda::bf16>(gemm_path::tc, m, 1037, 2056, 1.0f, 7);
            check_gemm<dlm::cuda::f16>(gemm_path::tc, m, 77, 520, 0.0f, 8);
        }
        check_gemm<dlm::cuda::bf16>(gemm_path::tc, 5, 45, 72, 1.0f, 9);
        check_gemm<dlm::cuda::bf16>(gemm_path::tc, 1, 4100, 18944, 0.0f, 10);  // down-projection depth, many blocks
        check_gemm<dlm::cuda::bf16>(gemm_path::tc, 65, 129, 264, 1.0f, 11);
        check_gemm<dlm::cuda::bf16>(gemm_path::tc, 3, 129, 100, 0.0f, 12);
        check_gemm<float>(gemm_path::tc, 3, 129, 264, 0.0f, 13);
    }

    TEST_CASE("the tensor-core kernel: a row's result is bit for bit the same alone and in batches of 2 to 64") {
        const index_t n = 1037, k = 2056, rows = 64;
        std::mt19937 g(19);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        std::vector<dlm::cuda::bf16> x(rows * static_cast<std::size_t>(k)), w(static_cast<std::size_t>(n) * k);
        for (auto& v : x) v = __float2bfloat16_rn(u(g));
        for (auto& v : w) v = __float2bfloat16_rn(u(g));
        dlm::cuda::stream_context ctx;
        dlm::cuda::device_buffer<dlm::cuda::bf16> dx(x.size(), "x"), dw(w.size(), "W");
        dlm::cuda::device_buffer<float> dy(rows * static_cast<std::size_t>(n), "y");
        dlm::cuda::upload(dx.data(), x.data(), x.size(), ctx.stream(), "x");
        dlm::cuda::upload(dw.data(), w.data(), w.size(), ctx.stream(), "W");
        auto product = [&](index_t first, index_t m) {  // rows first .. first + m - 1 of x
            dlm::cuda::tc_linear(ctx.stream(), m, n, k, dx.data() + static_cast<std::size_t>(first) * k, dw.data(), dy.data(), 0.0f, "batch");
            std::vector<float> y(static_cast<std::size_t>(m) * n);
            dlm::cuda::download(y.data(), dy.data(), y.size(), ctx.stream(), "y");
            ctx.synchronize("tc batch invariance");
            return y;
        };
        const std::vector<float> all = product(0, rows);
        // Each batch puts its rows at other tile positions and runs another tile count (NT 1..8).
        for (const auto& [first, m] : std::vector<std::pair<index_t, index_t>>{{0, 1}, {5, 1}, {63, 1}, {3, 2}, {7, 9}, {31, 33}, {1, 63}, {20, 17}}) {
            CAPTURE(first);
            CAPTURE(m);
            const std::vector<float> part = product(first, m);
            CHECK(std::memcmp(part.data(), all.data() + static_cast<std::size_t>(first) * n, part.size() * sizeof(float)) == 0);
        }
    }

    TEST_CASE("the tensor-core kernel refuses what it does not take, by name") {
        dlm::cuda::stream_context ctx;
        dlm::cuda::device_buffer<dlm::cuda::bf16> x(72 * 104, "x"), w(8 * 104, "W");
        dlm::cuda::device_buffer<float> xf(72 * 104, "x"), wf(8 * 104, "W");
        dlm::cuda::device_buffer<float> y(72 * 8, "y");
        CHECK_THROWS_WITH_AS(dlm::cuda::tc_linear(ctx.stream(), 65, 8, 104, x.data(), w.data(), y.data(), 0.0f, "too many rows"),
                             doctest::Contains("'m'"), invalid_parameter);
        CHECK_THROWS_WITH_AS(dlm::cuda::tc_linear(ctx.stream(), 2, 8, 100, x.data(), w.data(), y.data(), 0.0f, "odd k"), doctest::Contains("'k'"),
                             invalid_parameter);
        CHECK_THROWS_WITH_AS(dlm::cuda::tc_linear(ctx.stream(), 2, 8, 104, xf.data(), wf.data(), y.data(), 0.0f, "f32"), doctest::Contains("bf16 or f16"),
                             invalid_parameter);
        CHECK_NOTHROW(dlm::cuda::tc_linear(ctx.stream(), 64, 8, 104, x.data(), w.data(), y.data(), 0.0f, "fits"));
        ctx.synchronize("tc refusals");
    }

    TEST_CASE("the skinny kernel: a row's result is bit for bit the same in a batch of 16 as alone") {
        const index_t n = 1037, k = 2056;
        std::mt19937 g(9);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        std::vector<dlm::cuda::bf16> x(16 * static_cast<std::size_t>(k)), w(static_cast<std::size_t>(n) * k);
        for (auto& v : x) v = __float2bfloat16_rn(u(g));
        for (auto& v : w) v = __float2bfloat16_rn(u(g));
        dlm::cuda::stream_context ctx;
        dlm::cuda::device_buffer<dlm::cuda::bf16> dx(x.size(), "x"), dw(w.size(), "W");
        dlm::cuda::device_buffer<float> batch(16 * static_cast<std::size_t>(n), "y"), alone(static_cast<std::size_t>(n), "y");
        dlm::cuda::upload(dx.data(), x.data(), x.size(), ctx.stream(), "x");
        dlm::cuda::upload(dw.data(), w.data(), w.size(), ctx.stream(), "W");
        dlm::cuda::skinny_linear(ctx.stream(), 16, n, k, dx.data(), dw.data(), batch.data(), 0.0f, "batch of 16");
        std::vector<float> yb(16 * static_cast<std::size_t>(n)), ya(static_cast<std::size_t>(n));
        dlm::cuda::download(yb.data(), batch.data(), yb.size(), ctx.stream(), "y");
        for (const index_t row : {0, 5, 15}) {
            CAPTURE(row);
            dlm::cuda::skinny_linear(ctx.stream(), 1, n, k, dx.data() + static_cast<std::size_t>(row) * k, dw.data(), alone.data(), 0.0f, "alone");
            dlm::cuda::download(ya.data(), alone.data(), ya.size(), ctx.stream(), "y");
            ctx.synchronize("skinny batch invariance");
            CHECK(std::memcmp(ya.data(), yb.data() + static_cast<std::size_t>(row) * n, ya.size() * sizeof(float)) == 0);
        }
    }

    TEST_CASE("the skinny kernel refuses what it does not take, by name") {
        dlm::cuda::stream_context ctx;
        dlm::cuda::device_buffer<dlm::cuda::bf16> x(64 * 104, "x"), w(8 * 104, "W");
        dlm::cuda::device_buffer<float> y(64 * 8, "y");
        CHECK_THROWS_WITH_AS(dlm::cuda::skinny_linear(ctx.stream(), 17, 8, 104, x.data(), w.data(), y.data(), 0.0f, "too many rows"),
                             doctest::Contains("'m'"), invalid_parameter);
        CHECK_THROWS_WITH_AS(dlm::cuda::skinny_linear(ctx.stream(), 2, 8, 100, x.data(), w.data(), y.data(), 0.0f, "odd k"), doctest::Contains("'k'"),
                             invalid_parameter);
        CHECK_NOTHROW(dlm::cuda::skinny_linear(ctx.stream(), 2, 8, 104, x.data(), w.data(), y.data(), 0.0f, "fits"));
        ctx.synchronize("skinny refusals");
    }
}
