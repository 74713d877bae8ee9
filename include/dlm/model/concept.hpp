// dlm/model/concept.hpp — what the decoder needs from a model.
#pragma once

#include <concepts>
#include <cstdint>
#include <span>

#include "../core/plan.hpp"
#include "../core/defaults.hpp"
#include "../core/hooks.hpp"
#include "../mask/masks.hpp"

namespace dlm {

/// One sequence's part of a batched forward. `canvas` is the sequence's whole current canvas; the
/// model reads the tokens of the plan's window from it. `cache` is the sequence's K/V store, or null
/// when the cache policy keeps none.
template <class KvCache>
struct forward_request {
    std::span<const token_id> canvas;
    canvas_layout layout;
    forward_plan plan;
    KvCache* cache = nullptr;
    /// A self-conditioning model's input (model_self_conditions): the tempered logits of the
    /// sequence's previous step of this block, one row per logits row of the plan; empty on a block's
    /// first step. Empty for every other model.
    std::span<const float> self_conditioning{};
};

/// A model that reads the previous step's tempered logits (DiffusionGemma's self-conditioning):
/// `static constexpr bool self_conditioning = true`. The engine keeps them per sequence and passes
/// them in forward_request::self_conditioning.
template <class M>
concept model_self_conditions = requires {
    requires M::self_conditioning;
};

/// Hooks: `vocab_size()`, `mask_id()`, `eos_ids()` and `logits_shift()` (true for the Dream family:
/// slot p is predicted by output row p-1).
template <class M>
concept model_has_traits = requires(const M& m) {
    { m.vocab_size() } -> std::convertible_to<index_t>;
    { m.mask_id() } -> std::convertible_to<token_id>;
    { m.eos_ids() } -> std::convertible_to<std::span<const token_id>>;
    { m.logits_shift() } -> std::same_as<bool>;
};

/// Hook: `M::kv_cache` and `make_kv_cache(capacity)` — the per-sequence K/V store for `capacity`
/// canvas positions.
template <class M>
concept model_has_kv_cache = requires(const M& m, index_t capacity) {
    typename M::kv_cache;
    { m.make_kv_cache(capacity) } -> std::same_as<typename M::kv_cache>;
};

/// Optional hooks of the K/V store: `std::uint64_t kv_cache_bytes(capacity) const`, the bytes
/// make_kv_cache(capacity) holds (the prompt cache's bound counts them too: cache/prompt_cache.hpp,
/// a layer below, states the same requirement), and `static constexpr bool kv_on_device = true`
/// where they are device memory. The engine weighs a joining batch's host stores before it makes any.
template <class M>
concept model_has_kv_bytes = requires(const M& m, index_t capacity) {
    { m.kv_cache_bytes(capacity) } -> std::convertible_to<std::uint64_t>;
};

/// The bytes of one make_kv_cache(capacity), host or device: its kv_cache_bytes; 0 where the model
/// does not say.
template <class M>
[[nodiscard]] std::uint64_t kv_cache_bytes_of(const M& m, index_t capacity) {
    if constexpr (model_has_kv_bytes<M>) return static_cast<std::uint64_t>(m.kv_cache_bytes(capacity));
    else return 0;
}

/// A model whose K/V stores are device memory: `static constexpr bool kv_on_device = true`.
template <class M>
concept model_kv_on_device = requires { requires M::kv_on_device; };

/// The host bytes of one make_kv_cache(capacity): 0 where the stores are device memory
/// (`kv_on_device`), else kv_cache_bytes_of.
template <class M>
[[nodiscard]] std::uint64_t host_kv_cache_bytes(const M& m, index_t capacity) {
    if constexpr (model_kv_on_device<M>) return 0;
    else return kv_cache_bytes_of(m, capacity);
}

/// The device bytes of one make_kv_cache(capacity): kv_cache_bytes_of where the stores are device
/// memory (`kv_on_device`), else 0.
template <class M>
[[nodiscard]] std::uint64_t device_kv_cache_bytes(const M& m, index_t capacity) {
    if constexpr (model_kv_on_device<M>) return kv_cache_bytes_of(m, capacity);
    else return 0;
}

/// Hook: `forward(requests, mask, logits)` — run one batched forward, templated on the mask, and
/// write the logits of each request's rows [logits_begin, logits_end), requests in order, rows of
/// `vocab_size()` floats, into `logits`.
template <class M>
concept model_has_forward =
    model_has_kv_cache<M> && requires(M& m, std::span<const forward_request<typename M::kv_cache>> requests,
                                      std::span<float> logits) {
        { m.forward(requests, bidirectional_mask{}, logits) };
    };

/// Optional hook: `decoding_hints()` — what the model says about how to decode it (block and
/// generation length, end-of-turn ids, where its mask and EOS ids come from).
template <class M>
concept model_has_decoding_hints = requires(const M& m) {
    { m.decoding_hints() } -> std::convertible_to<decoding_hints>;
};

/// A model's decoding hints: its `decoding_hints()`, else the `decoding` member of its `config()`
/// (dlm's transformers: io::model_config::decoding), else none.
template <class M>
[[nodiscard]] decoding_hints decoding_hints_of(const M& m) {
    if constexpr (model_has_decoding_hints<M>) return m.decoding_hints();
    else if constexpr (requires { { m.config().decoding } -> std::convertible_to<decoding_hints>; }) return m.config().decoding;
    else return {};
}

// Optional hooks of a model: this is the one list (core/hooks.hpp says how it is checked).
// `decoding_hints()` (above) is one; `max_context()`, `device_bytes_free()`,
// `device_logits_bytes()` and `work_bytes(rows)` with `work_bytes_held()` the others.

/// `index_t max_context() const` — the longest canvas the model accepts.
template <class M>
concept model_has_max_context = requires(const M& m) {
    { m.max_context() } -> std::convertible_to<index_t>;
};

/// `std::uint64_t device_bytes_free() const` — the device memory free now (CUDA: cudaMemGetInfo), of
/// a model whose K/V stores are device memory (`kv_on_device`; meaningless without it). With it the
/// engine sums a joining batch's device stores (device_kv_cache_bytes), with their logits rows where
/// the model makes them on the device (device_logits_bytes, below), and weighs them against it
/// before it makes any (engine/prepare.hpp); without it a store is weighed, if at all, by the
/// model's make_kv_cache alone.
template <class M>
concept model_reports_device_memory = model_kv_on_device<M> && requires(const M& m) {
    { m.device_bytes_free() } -> std::convertible_to<std::uint64_t>;
};

/// `std::uint64_t device_logits_bytes() const` — the bytes of the model's device logits buffer now, of
/// a model that reports its device memory (above) and makes every forward's logits rows in device
/// memory, whoever reads them (the CUDA transformer: rows × vocabulary × 4 B, a request's rows twice
/// with guidance, kept between forwards and grown, old buffer freed first, when a forward has more
/// rows). With it the engine weighs a joining batch's logits rows on the device with its device
/// stores, offset by what this buffer holds beyond the running sequences' rows (engine/prepare.hpp).
template <class M>
concept model_reports_device_logits = model_reports_device_memory<M> && requires(const M& m) {
    { m.device_logits_bytes() } -> std::convertible_to<std::uint64_t>;
};

/// The bytes of the model's device logits buffer now: its device_logits_bytes, else 0.
template <class M>
[[nodiscard]] std::uint64_t device_logits_bytes_of(const M& m) {
    if constexpr (model_reports_device_logits<M>) return static_cast<std::uint64_t>(m.device_logits_bytes());
    else return 0;
}

/// `std::uint64_t work_bytes(index_t rows) const` and `std::uint64_t work_bytes_held() const` — the
/// bytes the model's forward work buffers (activations over the forward's rows) need for a forward
/// whose windows hold `rows` rows in all, and the bytes they hold now: buffers kept between forwards
/// and grown, the old ones freed first, when a forward has more rows. They are device memory for a
/// model that reports its device memory (model_reports_device_memory), host memory otherwise. With
/// them the engine weighs a joining batch's rows, each sequence at its whole canvas (the most a
/// forward's window holds: all of it without a cache), twice with guidance, beside the running
/// sequences' canvases, less what the buffers hold (engine/prepare.hpp).
template <class M>
concept model_reports_work_bytes = requires(const M& m, index_t rows) {
    { m.work_bytes(rows) } -> std::convertible_to<std::uint64_t>;
    { m.work_bytes_held() } -> std::convertible_to<std::uint64_t>;
};

/// Whether a model's forward work buffers are device memory (model_reports_work_bytes).
template <class M>
inline constexpr bool work_on_device = model_reports_device_memory<M>;

#define DLM_MODEL_HOOKS                                                                          \
    "`decoding_hints decoding_hints() const`, `index_t max_context() const`, and (with kv_on_device) " \
    "`std::uint64_t device_bytes_free() const` and `std::uint64_t device_logits_bytes() const`, and "     \
    "`std::uint64_t work_bytes(index_t rows) const` with `std::uint64_t work_bytes_held() const`"

template <class M>
concept model_hook_misnamed = DLM_HAS_MEMBER_NAMED(M, max_context_length) || DLM_HAS_MEMBER_NAMED(M, context_length) ||
                              DLM_HAS_MEMBER_NAMED(M, decoding_hint) || DLM_HAS_MEMBER_NAMED(M, decode_hints) ||
                              DLM_HAS_MEMBER_NAMED(M, device_free_bytes) || DLM_HAS_MEMBER_NAMED(M, free_device_bytes) ||
                              DLM_HAS_MEMBER_NAMED(M, device_bytes_available) || DLM_HAS_MEMBER_NAMED(M, device_logit_bytes) ||
                              DLM_HAS_MEMBER_NAMED(M, logits_device_bytes) || DLM_HAS_MEMBER_NAMED(M, work_buffer_bytes) ||
                              DLM_HAS_MEMBER_NAMED(M, forward_work_bytes) || DLM_HAS_MEMBER_NAMED(M, held_work_bytes);
template <class M>
concept model_hook_mistyped = (DLM_HAS_MEMBER_NAMED(M, max_context) && !model_has_max_context<M>) ||
                              (DLM_HAS_MEMBER_NAMED(M, decoding_hints) && !model_has_decoding_hints<M>) ||
                              (DLM_HAS_MEMBER_NAMED(M, device_bytes_free) && !model_reports_device_memory<M>) ||
                              (DLM_HAS_MEMBER_NAMED(M, device_logits_bytes) && !model_reports_device_logits<M>) ||
                              ((DLM_HAS_MEMBER_NAMED(M, work_bytes) || DLM_HAS_MEMBER_NAMED(M, work_bytes_held)) && !model_reports_work_bytes<M>);
/// Every member named like a model hook is one, in its known form.
template <class M>
concept model_hooks_known = !model_hook_misnamed<M> && !model_hook_mistyped<M>;

/// A (diffusion or autoregressive) language model.
template <class M>
concept language_model = model_has_traits<M> && model_has_kv_cache<M> && model_has_forward<M> && model_hooks_known<M>;

}  // namespace dlm
