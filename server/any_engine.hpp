// server/any_engine.hpp — dlm-server's engine behind one run-time interface: the scheduler, the
// HTTP service and the routes are compiled once for every preset (server/serve_engine.hpp), and only
// the engine is instantiated per decoder type (engine_of<Decoder>, in dlm_server.cpp for the CPU
// models and in serve_cuda.cu for the GPU). A request's mask, schedule and sampler are built from its
// settings on the HTTP worker (make_policies, which refuses a bad option there, by name) and handed
// to the engine thread as an opaque any_policies.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include <dlm/cache/prompt_cache.hpp>
#include <dlm/engine.hpp>
#include <dlm/registry/policies.hpp>

namespace dlm::server {

/// One request's policies for the engine that built them (any_engine::make_policies).
struct any_policies {
    virtual ~any_policies() = default;
};

/// The prompt cache's figures as prompt_cache_figures::copy_from (dlm/server/metrics.hpp) reads them.
struct prompt_cache_view {
    struct counters {
        std::uint64_t queried_tokens = 0, hit_tokens = 0, evicted_tokens = 0;
    } counts;
    std::uint64_t held_bytes = 0, capacity = 0, held_blocks = 0;
    [[nodiscard]] const counters& stats() const noexcept { return counts; }
    [[nodiscard]] std::uint64_t bytes() const noexcept { return held_bytes; }
    [[nodiscard]] std::uint64_t capacity_bytes() const noexcept { return capacity; }
    [[nodiscard]] std::uint64_t blocks() const noexcept { return held_blocks; }
};

/// The part of dlm::engine the scheduler drives (dlm/server/scheduler.hpp), whatever the decoder.
class any_engine {
public:
    using sequence_id = std::uint64_t;
    using policies = std::shared_ptr<const any_policies>;  ///< null: the engine's own

    virtual ~any_engine() = default;
    /// The mask, schedule and sampler of settings `s` for this engine's decoder; throws
    /// dlm::invalid_parameter naming the option a policy refuses. Reads no engine state, so the HTTP
    /// workers call it while the engine thread steps; every other member is the engine thread's.
    [[nodiscard]] virtual policies make_policies(const registry::settings& s) const = 0;
    virtual sequence_id add(std::vector<token_id> prompt, const generation_options& o, const policies& p) = 0;
    virtual void step() = 0;
    virtual void cancel(sequence_id id) = 0;
    [[nodiscard]] virtual std::vector<std::pair<sequence_id, sequence_result>> take_finished() = 0;
    [[nodiscard]] virtual std::span<const token_id> committed_prefix(sequence_id id) const = 0;
    [[nodiscard]] virtual std::span<const token_id> canvas(sequence_id id) const = 0;
    [[nodiscard]] virtual bool idle() const = 0;
    /// The prompt cache's figures as of this call, or null when the engine keeps none.
    [[nodiscard]] virtual const prompt_cache_view* prompt_cache() const = 0;
};

/// dlm::engine<Decoder> as an any_engine.
template <class Decoder>
class engine_of final : public any_engine {
    struct policies_of final : any_policies {
        typename engine<Decoder>::policies p;
    };

public:
    /// Throws dlm::invalid_parameter for a prompt cache the decoder cannot keep exactly (engine's constructor).
    engine_of(Decoder& dec, const prompt_cache_options& cache) : eng_(dec, cache) {}

    [[nodiscard]] policies make_policies(const registry::settings& s) const override {
        auto out = std::make_shared<policies_of>();
        out->p = {registry::make_policy<typename Decoder::mask_type>(s), registry::make_policy<typename Decoder::schedule_type>(s),
                  registry::make_policy<typename Decoder::sampler_type>(s)};
        return out;
    }
    sequence_id add(std::vector<token_id> prompt, const generation_options& o, const policies& p) override {
        if (!p) return eng_.add(std::move(prompt), o);
        return eng_.add(std::move(prompt), o, static_cast<const policies_of&>(*p).p);
    }
    void step() override { (void)eng_.step(); }
    void cancel(sequence_id id) override { eng_.cancel(id); }
    [[nodiscard]] std::vector<std::pair<sequence_id, sequence_result>> take_finished() override { return eng_.take_finished(); }
    [[nodiscard]] std::span<const token_id> committed_prefix(sequence_id id) const override { return eng_.committed_prefix(id); }
    [[nodiscard]] std::span<const token_id> canvas(sequence_id id) const override { return eng_.canvas(id); }
    [[nodiscard]] bool idle() const override { return eng_.idle(); }
    [[nodiscard]] const prompt_cache_view* prompt_cache() const override {
        const auto* pc = eng_.prompt_cache();
        if (!pc) return nullptr;
        figures_.counts = {pc->stats().queried_tokens, pc->stats().hit_tokens, pc->stats().evicted_tokens};
        figures_.held_bytes = pc->bytes();
        figures_.capacity = pc->capacity_bytes();
        figures_.held_blocks = pc->blocks();
        return &figures_;
    }

private:
    engine<Decoder> eng_;
    mutable prompt_cache_view figures_;  // the engine thread's snapshot (the only caller)
};

}  // namespace dlm::server
