// dlm/registry/any_engine.hpp — dlm::engine<Decoder> behind one run-time interface, for the products
// that pick a preset by name and compile their service once for every preset: dlm-server's scheduler
// and routes (server/serve_engine.hpp), the Python package (python/src/any_engine.hpp). Only the
// engine of each decoder type is instantiated per preset (engine_of<Decoder>); a sequence's own mask,
// schedule and sampler are built from its settings by make_policies, which reads no engine state, so
// a server's HTTP workers call it (and refuse a bad option by name) while the engine thread steps.
//
//   dlm::registry::engine_of<D> eng(decoder);                        // or std::in_place, to own it
//   dlm::registry::any_engine& any = eng;
//   auto id = any.add(prompt, {.gen_length = 64, .seed = 7}, any.make_policies(settings));
//   while (!any.idle()) for (const auto& r : any.step()) use(r.committed);
//   for (auto& [id, result] : any.take_finished()) print(result.tokens);
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "../cache/prompt_cache.hpp"
#include "../engine.hpp"
#include "policies.hpp"

namespace dlm::registry {

/// One sequence's policies for the engine that built them (any_engine::make_policies).
struct any_policies {
    virtual ~any_policies() = default;
};

/// The prompt cache's figures at one moment, with prompt_cache's accessors (a server's metrics read
/// them as they read the cache itself).
struct prompt_cache_view {
    prompt_cache_counters counts;
    std::uint64_t held_bytes = 0, capacity = 0, held_blocks = 0;
    [[nodiscard]] const prompt_cache_counters& stats() const noexcept { return counts; }
    [[nodiscard]] std::uint64_t bytes() const noexcept { return held_bytes; }
    [[nodiscard]] std::uint64_t capacity_bytes() const noexcept { return capacity; }
    [[nodiscard]] std::uint64_t blocks() const noexcept { return held_blocks; }
};

using dlm::step_report;  // what one step did to one sequence (dlm/engine.hpp)

/// The engine of some decoder type. Every member but make_policies is the engine's own thread's (the
/// engine is single-threaded); each does what dlm::engine's member of that name does.
class any_engine {
public:
    using sequence_id = std::uint64_t;
    using policies = std::shared_ptr<const any_policies>;  ///< null: the decoder's own

    virtual ~any_engine() = default;
    /// The mask, schedule and sampler of settings `s` for this engine's decoder (each policy the
    /// settings configure; any other stays the decoder's); throws dlm::invalid_parameter naming the
    /// option a policy refuses. Reads no engine state: safe beside the engine thread.
    [[nodiscard]] virtual policies make_policies(const settings& s) const = 0;
    virtual sequence_id add(std::vector<token_id> prompt, const generation_options& o, const policies& p = {}) = 0;
    virtual std::vector<sequence_id> add_batch(std::span<const std::vector<token_id>> prompts, const generation_options& o) = 0;
    /// engine::check_batch: memory weighed as `at_once` of the batch's sequences running together.
    virtual void check_batch(std::span<const std::vector<token_id>> prompts, const generation_options& o, std::size_t at_once = 1) = 0;
    /// One batched forward and each sequence's step, `on_step` called after each as dlm::engine::step
    /// calls it; the reports are valid until the next step.
    virtual const std::vector<step_report>& step(const step_callback& on_step) = 0;
    const std::vector<step_report>& step() { return step(step_callback{}); }
    virtual void cancel(sequence_id id) = 0;
    [[nodiscard]] virtual std::vector<std::pair<sequence_id, sequence_result>> take_finished() = 0;
    [[nodiscard]] virtual std::span<const token_id> committed_prefix(sequence_id id) const = 0;
    [[nodiscard]] virtual std::span<const token_id> canvas(sequence_id id) const = 0;
    [[nodiscard]] virtual bool idle() const = 0;
    [[nodiscard]] virtual std::size_t active() const = 0;
    [[nodiscard]] virtual decode_stats stats() const = 0;
    /// What the running sequences hold in `where` (dlm::engine::held_bytes).
    [[nodiscard]] virtual std::uint64_t held_bytes(memory_kind where) const = 0;
    /// What the prompt cache could free in `where` (dlm::engine::evictable_bytes).
    [[nodiscard]] virtual std::uint64_t evictable_bytes(memory_kind where) const = 0;
    /// Evicts unpinned prompt-cache blocks until `bytes` are freed (dlm::engine::release_cached).
    virtual std::uint64_t release_cached(std::uint64_t bytes) = 0;
    /// The prompt cache's figures as of this call, or null when the engine keeps none.
    [[nodiscard]] virtual const prompt_cache_view* prompt_cache() const = 0;
};

/// dlm::engine<Decoder> as an any_engine, over a decoder it refers to or (std::in_place) owns.
template <class Decoder>
class engine_of final : public any_engine {
    struct policies_of final : any_policies {
        typename engine<Decoder>::policies p;
    };
    template <class P>
    static std::optional<P> from(const settings& s) {
        if constexpr (configured_by_settings<P>) return make_policy<P>(s);
        else return std::nullopt;
    }

public:
    /// Over `dec`, which must outlive the engine. Throws dlm::invalid_parameter naming
    /// prompt_cache_bytes for a prompt cache the decoder cannot keep exactly (engine's constructor).
    explicit engine_of(Decoder& dec, const prompt_cache_options& cache = {}) : eng_(dec, cache) {}
    /// Over its own copy of `dec`.
    engine_of(std::in_place_t, Decoder&& dec, const prompt_cache_options& cache = {})
        : owned_(std::move(dec)), eng_(*owned_, cache) {}

    [[nodiscard]] policies make_policies(const settings& s) const override {
        auto out = std::make_shared<policies_of>();
        out->p = {from<typename Decoder::mask_type>(s), from<typename Decoder::schedule_type>(s), from<typename Decoder::sampler_type>(s)};
        return out;
    }
    sequence_id add(std::vector<token_id> prompt, const generation_options& o, const policies& p = {}) override {
        if (!p) return eng_.add(std::move(prompt), o);
        return eng_.add(std::move(prompt), o, static_cast<const policies_of&>(*p).p);
    }
    std::vector<sequence_id> add_batch(std::span<const std::vector<token_id>> prompts, const generation_options& o) override {
        return eng_.add_batch(prompts, o);
    }
    void check_batch(std::span<const std::vector<token_id>> prompts, const generation_options& o, std::size_t at_once) override {
        eng_.check_batch(prompts, o, at_once);
    }
    using any_engine::step;
    const std::vector<step_report>& step(const step_callback& on_step) override { return eng_.step(on_step); }
    void cancel(sequence_id id) override { eng_.cancel(id); }
    [[nodiscard]] std::vector<std::pair<sequence_id, sequence_result>> take_finished() override { return eng_.take_finished(); }
    [[nodiscard]] std::span<const token_id> committed_prefix(sequence_id id) const override { return eng_.committed_prefix(id); }
    [[nodiscard]] std::span<const token_id> canvas(sequence_id id) const override { return eng_.canvas(id); }
    [[nodiscard]] bool idle() const override { return eng_.idle(); }
    [[nodiscard]] std::size_t active() const override { return eng_.active(); }
    [[nodiscard]] decode_stats stats() const override { return eng_.stats(); }
    [[nodiscard]] std::uint64_t held_bytes(memory_kind where) const override { return eng_.held_bytes(where); }
    [[nodiscard]] std::uint64_t evictable_bytes(memory_kind where) const override { return eng_.evictable_bytes(where); }
    std::uint64_t release_cached(std::uint64_t bytes) override { return eng_.release_cached(bytes); }
    [[nodiscard]] const prompt_cache_view* prompt_cache() const override {
        const auto* pc = eng_.prompt_cache();
        if (!pc) return nullptr;
        figures_ = {pc->stats(), pc->bytes(), pc->capacity_bytes(), pc->blocks()};
        return &figures_;
    }

private:
    std::optional<Decoder> owned_;  // before eng_, which refers to it when set
    engine<Decoder> eng_;
    mutable prompt_cache_view figures_;  // the engine thread's snapshot (its only caller)
};

}  // namespace dlm::registry
