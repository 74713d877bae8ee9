// Helpers shared by the CUDA model tests (test_cuda.cu, test_cuda_presets.cu).
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <dlm/cuda/cuda.cuh>
#include <dlm/cpu/transformer.hpp>
#include <dlm/presets.hpp>

#include "cache_walk.hpp"
#include "support/compare.hpp"

namespace dlm_cuda_test {

using namespace dlm;
using tvec = std::vector<token_id>;
using gpu32 = dlm::cuda::basic_transformer<float>;
using gpu16 = dlm::cuda::transformer;


inline const std::filesystem::path models_dir = std::filesystem::path(DLM_TEST_DATA) / "models";

inline forward_plan full_plan(const canvas_layout& l) { return {0, l.size(), 0, l.size(), 0, 0, l.size()}; }

template <class Model, class Mask>
std::vector<float> run(Model& m, const Mask& mask, const tvec& canvas, const canvas_layout& l, const forward_plan& p,
                       typename Model::kv_cache* cache = nullptr) {
    std::vector<float> out(static_cast<std::size_t>(p.logits_rows()) * static_cast<std::size_t>(m.vocab_size()));
    const forward_request<typename Model::kv_cache> rq{canvas, l, p, cache};
    m.forward(std::span<const forward_request<typename Model::kv_cache>>(&rq, 1), mask, out);
    return out;
}

using dlm_test::bitwise_equal;
using dlm_test::scaled_diff;  // +inf where either side holds a NaN

inline constexpr double f32_tolerance = 1e-4;   // different summation orders
inline constexpr double bf16_tolerance = 3e-2;  // product inputs (activations) rounded to bf16 (8 significant bits) at every product
/// A bf16 KV cache against the f32 one of the same bf16 model (docs/determinism.md, "A bf16 KV cache"):
/// each key and value moves by at most u = 2^-8 of itself (bf16 keeps 8 significant bits; 1.6e-3 root
/// mean square), a score q·k/√D by at most u·Σ|q_d k_d|/√D, the softmax weights by at most twice the largest
/// score change (in their sum of absolute changes), so a head's output by at most u·(1 + 2·max Σ|q_d k_d|/√D)
/// of its largest value: a few bf16 roundings of the attention output per layer, of the size the bf16 model
/// already applies to each product input, which the rest of the network carries to the logits as it
/// carries those. Measured by emulating the rounding in the CPU model (bf16 weights, 2026-12-04): 4.5e-3 on
/// both fixtures' canvases, at most 7.9e-3 over 300 random canvases per fixture and mask; the bound is
/// 2.5 times the worst of those.
inline constexpr double bf16_kv_tolerance = 2e-2;

struct fixture {
    tvec ids;
    canvas_layout layout;
};

inline fixture read_fixture(const std::string& name, bool shift) {
    std::ifstream in(models_dir / name / "expected.json");
    REQUIRE_MESSAGE(in, "missing fixture " << name);
    const auto j = nlohmann::json::parse(in);
    return {j.at("input_ids").get<tvec>(),
            {j.at("prompt_length").get<index_t>(), j.at("gen_length").get<index_t>(), j.at("block_length").get<index_t>(), shift}};
}

inline io::model_config random_config(index_t heads, index_t kv_heads, index_t head_dim, bool bias, bool tied) {
    io::model_config c;
    c.arch = bias ? io::architecture::dream : io::architecture::llada;
    c.vocab_size = 301;
    c.num_heads = heads;
    c.num_kv_heads = kv_heads;
    c.head_dim = head_dim;
    c.hidden_size = 96;
    c.intermediate_size = 136;
    c.num_layers = 2;
    c.max_context = 1024;
    c.rope_theta = 10000.0;
    c.rms_norm_eps = 1e-6;
    c.tie_word_embeddings = tied;
    c.qkv_bias = bias;
    c.mask_id = 300;
    c.eos_ids = {3};
    c.logits_shift = bias;
    return c;
}

inline tvec random_canvas(index_t prompt, index_t gen, token_id vocab_without_mask, token_id mask_id, unsigned seed) {
    std::mt19937 g(seed);
    tvec c(static_cast<std::size_t>(prompt + gen), mask_id);
    for (index_t i = 0; i < prompt + gen; ++i)
        if (i < prompt || g() % 3 == 0) c[static_cast<std::size_t>(i)] = static_cast<token_id>(g() % static_cast<unsigned>(vocab_without_mask));
    return c;
}


template <class Decoder, class Model, class... Options>
decode_result decode(Model& m, const std::vector<tvec>& prompts, index_t gen, Options... options) {
    Decoder d(m, options...);
    return d.generate(std::span<const tvec>(prompts), {gen, 5});
}

inline void check_same_tokens(const decode_result& a, const decode_result& b, bool same_forwards = true) {
    REQUIRE(a.sequences.size() == b.sequences.size());
    for (std::size_t i = 0; i < a.sequences.size(); ++i) {
        CAPTURE(i);
        CHECK(a.sequences[i].tokens == b.sequences[i].tokens);
        if (same_forwards) CHECK(a.sequences[i].commit_forward == b.sequences[i].commit_forward);
    }
}

/// A committed slot never holds the mask id (the decoders ban it from every draw).
inline void check_no_mask_committed(const sequence_result& r, token_id mask_id) {
    for (std::size_t g = 0; g < r.tokens.size(); ++g)
        if (r.commit_forward[g] >= 0) CHECK(r.tokens[g] != mask_id);
}

/// Decodes a random canvas block by block (tests/cache_walk.hpp) with Cache's plans and, at each step,
/// a full recompute (no_cache); checks that their logits agree within `tolerance` (0: bit for bit) and
/// returns the number of steps compared.
template <class Cache, class Model, class Mask>
int compare_with_full_recompute(Model& m, const Mask& mask, canvas_layout l, unsigned seed, int steps_per_block, double tolerance) {
    tvec canvas = random_canvas(l.prompt_length, 0, m.mask_id(), m.mask_id(), seed);
    canvas.resize(static_cast<std::size_t>(l.size()), m.mask_id());
    return dlm_test::walk_cached_steps<Cache>(
        m, mask, l, std::move(canvas), seed, steps_per_block,
        [&](const tvec& c, const forward_plan& p, typename Model::kv_cache* cache) { return run(m, mask, c, l, p, cache); },
        [&](const forward_plan&, const forward_plan&, const std::vector<float>& cached, const std::vector<float>& full, index_t b, index_t step) {
            if (tolerance == 0) CHECK_MESSAGE(bitwise_equal(cached, full), "block " << b << " step " << step);  // bit for bit
            else CHECK_MESSAGE(scaled_diff(cached, full) <= tolerance, "block " << b << " step " << step);
        });
}


}  // namespace dlm_cuda_test
