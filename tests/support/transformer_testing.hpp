// Helpers of the CPU transformer's suites (test_transformer, test_kv_cache): random models on each
// kernel path, one forward, bitwise comparisons, and the walk that holds an exact cache's forwards
// against full recomputes.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <dlm/cache/caches.hpp>
#include <dlm/cpu/transformer.hpp>
#include <dlm/mask/masks.hpp>

#include "../cache_walk.hpp"
#include "amx_model.hpp"
#include "compare.hpp"

namespace dlm_test::cpu_model {

using namespace dlm;
using dlm::cpu::transformer;
using kv = transformer::kv_cache;
using tvec = std::vector<token_id>;

inline forward_plan full_plan(const canvas_layout& l) { return {0, l.size(), 0, l.size(), 0, 0, l.size()}; }

template <class Mask>
std::vector<float> run(transformer& m, const Mask& mask, const tvec& canvas, const canvas_layout& l, const forward_plan& p, kv* cache = nullptr) {
    std::vector<float> out(static_cast<std::size_t>(p.logits_rows()) * static_cast<std::size_t>(m.vocab_size()));
    const forward_request<kv> rq{canvas, l, p, cache};
    m.forward(std::span<const forward_request<kv>>(&rq, 1), mask, out);
    return out;
}

using dlm_test::bitwise_equal;
using dlm_test::max_rel_diff;

/// A random-weight model of size enough to span several GEMM panels and attention tasks.
inline io::model_config small_config(io::architecture arch, bool tied, bool bias) {
    io::model_config c;
    c.arch = arch;
    c.vocab_size = 97;
    c.hidden_size = 40;
    c.intermediate_size = 72;
    c.num_layers = 2;
    c.num_heads = 4;
    c.num_kv_heads = 2;
    c.head_dim = 10;
    c.max_context = 512;
    c.rope_theta = 10000.0;
    c.rms_norm_eps = 1e-6;
    c.tie_word_embeddings = tied;
    c.qkv_bias = bias;
    c.mask_id = 96;
    c.eos_ids = {3};
    c.logits_shift = arch != io::architecture::llada;
    c.causal = arch == io::architecture::qwen2;
    return c;
}

/// One kernel path: an instruction set this CPU runs and a weight type (an element type, or the
/// GGUF block types of a llama.cpp file type). The exactness properties (batch invariance,
/// thread-count invariance, exact cache = full recompute) are tested on each. Where the CPU has no
/// AMX but AVX-512 BF16, the AMX paths run their kernels on the model of the tile instructions
/// (support/amx_model.cpp; `tile_model`).
struct kernel_path {
    cpu::isa isa;
    io::dtype type;
    std::optional<cpu::quant::file_type> quant;
    bool tile_model = false;
    [[nodiscard]] std::string name() const {
        const char* names[] = {"Q8_0", "Q4_0", "Q4_K", "Q6_K", "Q4_K_M"};
        const std::string n = quant ? names[static_cast<int>(*quant)] : std::string(io::dtype_name(type));
        return tile_model ? n + " (tile model)" : n;
    }
};
/// Every instruction set this CPU runs × every weight type; with DLM_TEST_KERNEL_PATHS=best (the asan
/// test preset: the paths share their code, and a Debug + sanitizer build is 20x slower) only the
/// best instruction set's.
inline std::vector<kernel_path> kernel_paths() {
    const char* env = std::getenv("DLM_TEST_KERNEL_PATHS");
    const std::string which = env != nullptr && *env != '\0' ? env : "all";
    REQUIRE_MESSAGE((which == "all" || which == "best"), "DLM_TEST_KERNEL_PATHS must be all or best, not " << which);
    std::vector<kernel_path> out;
    const auto add = [&](cpu::isa i, bool tile_model) {
        for (io::dtype t : {io::dtype::f32, io::dtype::bf16, io::dtype::f16}) out.push_back({i, t, std::nullopt, tile_model});
        for (auto q : {cpu::quant::file_type::q8_0, cpu::quant::file_type::q4_0, cpu::quant::file_type::q4_k_m})
            out.push_back({i, io::dtype::f32, q, tile_model});
    };
    for (const cpu::isa_info& info : cpu::isa_list)
        if (const cpu::isa i = info.id; which == "all" ? static_cast<int>(i) <= static_cast<int>(cpu::detect_isa()) : i == cpu::detect_isa())
            add(i, false);
#if defined(__x86_64__)
    if (which == "all" && cpu::detect_isa() != cpu::isa::amx && dlm_test::amx_model::runnable()) add(cpu::isa::amx, true);
#endif
    return out;
}
/// The model of `c` and `seed` on `path`: random_weights held in the path's element type, or, for a
/// quantized path, in its block types with every width a whole number of K-quant super-blocks
/// (hidden, q/k/v and MLP widths 256).
inline transformer make_model(io::model_config c, std::uint64_t seed, const kernel_path& path) {
    if (!path.quant) return transformer(c, cpu::random_weights(c, seed), {.weight_dtype = path.type});
    c.hidden_size = 256;
    c.intermediate_size = 256;
    c.head_dim = 256 / c.num_heads;
    return transformer::random(c, seed, *path.quant);
}
/// Runs the scope on one path's kernels (the instruction set's, or the AMX kernels on the tile
/// model); back to the best instruction set after.
struct path_scope {
    explicit path_scope(const kernel_path& p) {
#if defined(__x86_64__)
        if (p.tile_model) {
            model.emplace();
            return;
        }
#endif
        cpu::set_isa(p.isa);
    }
    ~path_scope() { cpu::set_isa(cpu::detect_isa()); }
    path_scope(const path_scope&) = delete;
    path_scope& operator=(const path_scope&) = delete;
#if defined(__x86_64__)
    std::optional<dlm_test::amx_model::scope> model;
#endif
};

inline tvec random_canvas(index_t prompt, index_t gen, token_id vocab_without_mask, token_id mask_id, unsigned seed) {
    std::mt19937 g(seed);
    tvec c(static_cast<std::size_t>(prompt + gen), mask_id);
    for (index_t i = 0; i < prompt; ++i) c[static_cast<std::size_t>(i)] = static_cast<token_id>(g() % static_cast<unsigned>(vocab_without_mask));
    return c;
}

/// Compares the logits of every step of a block-by-block walk under `Cache` with a full recompute
/// (no cache): bit for bit. Returns the number of steps compared.
template <class Cache, class Mask>
int compare_with_full_recompute(transformer& m, const Mask& mask, canvas_layout l, unsigned seed, int steps_per_block) {
    return dlm_test::walk_cached_steps<Cache>(
        m, mask, l, random_canvas(l.prompt_length, l.gen_length, m.mask_id(), m.mask_id(), seed), seed, steps_per_block,
        [&](const tvec& canvas, const forward_plan& p, kv* cache) { return run(m, mask, canvas, l, p, cache); },
        [](const forward_plan& pc, const forward_plan& pn, const std::vector<float>& cached, const std::vector<float>& full, index_t b, index_t step) {
            REQUIRE(pc.logits_begin == pn.logits_begin);
            CHECK(max_rel_diff(cached, full) <= 1e-5);
            CHECK_MESSAGE(bitwise_equal(cached, full), "block " << b << " step " << step);
        });
}

/// The walks of the exact-cache cases, each step bit for bit against a full recompute: LLaDA's
/// layout block-causal with a prompt of 29 (windows at 29, 45 and 61: not on multiples of 32),
/// Dream's (shifted rows) block-causal, and Dream's causal with a per-token cache (a window at every
/// position).
inline void check_cached_walks(transformer& llada, transformer& dream) {
    {
        INFO("block-causal, LLaDA layout, prompt 29, 3 blocks of 16");
        CHECK(compare_with_full_recompute<prefix_cache>(llada, block_causal_mask{16}, {29, 48, 16, false}, 1, 3) == 9);
    }
    {
        INFO("block-causal, Dream layout (shifted rows), prompt 40, 4 blocks of 12");
        CHECK(compare_with_full_recompute<prefix_cache>(dream, block_causal_mask{12}, {40, 48, 12, true}, 2, 2) == 8);
    }
    {
        INFO("causal, per-token cache, shifted rows");
        CHECK(compare_with_full_recompute<prefix_cache>(dream, causal_mask{}, {33, 40, 1, true}, 3, 1) == 40);
    }
}

}  // namespace dlm_test::cpu_model
