// dlm/model/request_check.hpp — the checks every model backend runs on a forward request, and on a
// copy between K/V stores (the prompt cache's hook), before it touches memory, so a bad request is
// refused with the same words on CPU and GPU.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>

#include "../core/error.hpp"
#include "concept.hpp"

namespace dlm::detail {

/// What a request is checked against: the model's shape and vocabulary.
struct request_shape {
    index_t layers = 0, kv_heads = 0, head_dim = 0, vocab_size = 0;
};

/// Throws dlm::contract_error when request `i` is inconsistent (canvas vs layout, window, logits
/// rows, attend_end, store range, a cache of another shape or too small), and
/// dlm::invalid_parameter("requests[i].canvas") for a window token outside the vocabulary. `who`
/// names the caller ("cpu::transformer::forward"). `KvCache` has `layers`, `kv_heads`, `head_dim`
/// and `capacity`.
template <class KvCache>
void check_request(const forward_request<KvCache>& rq, std::size_t i, const request_shape& shape, const char* who) {
    const forward_plan& p = rq.plan;
    const canvas_layout& l = rq.layout;
    const auto range = [](index_t b, index_t e) { return "[" + std::to_string(b) + ", " + std::to_string(e) + ")"; };
    const auto fail = [&](const std::string& why) {
        throw contract_error(std::string(who) + ": request " + std::to_string(i) + ": " + why);
    };
    if (rq.canvas.size() != static_cast<std::size_t>(l.size()))
        fail("the canvas holds " + std::to_string(rq.canvas.size()) + " tokens, the layout " + std::to_string(l.size()));
    if (!(0 <= p.window_begin && p.window_begin <= p.window_end && p.window_end <= l.size()))
        fail("window " + range(p.window_begin, p.window_end) + " is not inside the canvas " + range(0, l.size()));
    if (!(p.window_begin <= p.logits_begin && p.logits_begin <= p.logits_end && p.logits_end <= p.window_end))
        fail("logits rows " + range(p.logits_begin, p.logits_end) + " are not inside the window " + range(p.window_begin, p.window_end));
    if (!(0 <= p.attend_end && p.attend_end <= l.size()))
        fail("attend_end " + std::to_string(p.attend_end) + " is outside the canvas " + range(0, l.size()));
    if (p.stores()) {
        if (!(p.window_begin <= p.store_begin && p.store_end <= p.window_end))
            fail("store range " + range(p.store_begin, p.store_end) + " is not inside the window " + range(p.window_begin, p.window_end) +
                 " (only K/V computed in this forward can be stored)");
        if (!rq.cache) fail("the plan stores K/V but the request has no cache");
    }
    if (rq.cache) {
        const KvCache& c = *rq.cache;
        if (c.layers != shape.layers || c.kv_heads != shape.kv_heads || c.head_dim != shape.head_dim)
            fail("the KV cache was made for another model shape");
        if (c.capacity < p.attend_end || c.capacity < p.store_end)
            fail("the KV cache holds " + std::to_string(c.capacity) + " positions, the plan needs " +
                 std::to_string(std::max(p.attend_end, p.store_end)));
    }
    for (index_t k = p.window_begin; k < p.window_end; ++k) {
        const token_id t = rq.canvas[static_cast<std::size_t>(k)];
        if (t < 0 || t >= shape.vocab_size)
            throw invalid_parameter("requests[" + std::to_string(i) + "].canvas",
                                    "token at position " + std::to_string(k) + " is " + std::to_string(t) + ", outside the vocabulary [0, " +
                                        std::to_string(shape.vocab_size) + ")");
    }
}

/// Throws dlm::contract_error unless positions [src_begin, src_begin + count) of `src` may be copied
/// to [dst_begin, dst_begin + count) of `dst` (a model's copy_kv, the prompt cache's hook): stores
/// of one shape, both ranges inside their stores, every source position stored. `who` names the
/// caller ("cpu::copy_kv"). `KvCache` has `layers`, `kv_heads`, `head_dim`, `capacity` and `stored`.
template <class KvCache>
void check_kv_copy(const KvCache& src, index_t src_begin, const KvCache& dst, index_t dst_begin, index_t count, const char* who) {
    const bool shape = src.layers == dst.layers && src.kv_heads == dst.kv_heads && src.head_dim == dst.head_dim;
    const bool range = count >= 0 && src_begin >= 0 && dst_begin >= 0 && src_begin + count <= src.capacity && dst_begin + count <= dst.capacity;
    if (!shape || !range)
        throw contract_error(std::string(who) + ": cannot copy " + std::to_string(count) + " positions from " + std::to_string(src_begin) +
                             " of a store of " + std::to_string(src.capacity) + " to " + std::to_string(dst_begin) + " of a store of " +
                             std::to_string(dst.capacity) + (shape ? "" : " (the stores' layers, heads or head size differ)"));
    const auto first = src.stored.begin() + src_begin;
    if (std::find(first, first + count, 0) != first + count)
        throw contract_error(std::string(who) + ": the source range holds positions whose K/V were never stored");
}

}  // namespace dlm::detail
