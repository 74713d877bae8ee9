// tests/cache_walk.hpp — the walk the CPU and CUDA transformer suites (test_transformer.cpp,
// cuda_test_util.cuh) use to hold an exact KV cache's forwards against full recomputes.
#pragma once

#include <cstddef>
#include <random>
#include <vector>

#include <dlm/cache/caches.hpp>
#include <dlm/core/layout.hpp>
#include <dlm/core/plan.hpp>

namespace dlm_test {

/// Walks a generation of layout `l` block by block from `canvas` (its prompt filled, its slots masked):
/// steps_per_block steps a block, one random slot of the block committed after each step and every
/// slot still masked when the block ends. Each step runs the forward `Cache` plans, with the walk's KV
/// cache, and the full recompute `no_cache` plans, without one — `run(canvas, plan, cache or null)`
/// returns a forward's logits — and hands both to `check(cached_plan, full_plan, cached, full, block,
/// step)`. Returns the number of steps.
template <class Cache, class Model, class Mask, class Run, class Check>
int walk_cached_steps(Model& m, const Mask& mask, const dlm::canvas_layout& l, std::vector<dlm::token_id> canvas, unsigned seed, int steps_per_block,
                      Run&& run, Check&& check) {
    using dlm::index_t;
    std::mt19937 g(seed + 100);
    auto cache = m.make_kv_cache(l.size());
    int steps = 0;
    for (index_t b = 0; b < l.block_count(); ++b) {
        for (index_t step = 0; step < steps_per_block; ++step) {
            const dlm::block_cursor cur{b, step};
            const dlm::forward_plan pc = Cache{}.plan(mask, l, cur), pn = dlm::no_cache{}.plan(mask, l, cur);
            const auto cached = run(canvas, pc, &cache);
            const auto full = run(canvas, pn, nullptr);
            check(pc, pn, cached, full, b, step);
            ++steps;
            const index_t p = l.block_begin(b) + static_cast<index_t>(g() % static_cast<unsigned>(l.block_length));
            canvas[static_cast<std::size_t>(p)] = static_cast<dlm::token_id>(g() % static_cast<unsigned>(m.mask_id()));
        }
        for (index_t p = l.block_begin(b); p < l.block_end(b); ++p)
            if (canvas[static_cast<std::size_t>(p)] == m.mask_id()) canvas[static_cast<std::size_t>(p)] = static_cast<dlm::token_id>(g() % 50);
    }
    return steps;
}

}  // namespace dlm_test
