// python/src/any_engine.hpp — dlm::engine behind one run-time interface, so Python can pick a preset
// by name: the registry's visitor (dlm/registry/table.hpp) instantiates the engine of each preset's
// decoder type over the CPU transformer, and an engine whose schedule is a Python callable over the
// mask, cache and sampler of a preset; or the composed decoder of four policies named in the policy
// name table (registry/compose.hpp: only its mask x cache pairs are instantiated).
//
//   auto eng = dlm::python::make_engine(model, settings, nullptr);          // the preset's own schedule
//   auto id = eng->add(prompt, {.gen_length = settings.gen_length, .seed = 7}, nullptr);
//   while (!eng->idle()) eng->step();
//
// Only the engine's public API is used (add, add_batch, step, cancel, take_finished,
// committed_prefix, canvas, idle, active, stats).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <dlm/cpu/transformer.hpp>
#include <dlm/engine.hpp>
#include <dlm/registry/compose.hpp>
#include <dlm/registry/policies.hpp>
#include <dlm/registry/table.hpp>

#include "py_schedule.hpp"

namespace dlm::python {

/// What one step did to one sequence (engine::step_report, for every decoder type).
struct step_report {
    std::uint64_t id = 0;
    std::vector<index_t> committed;
    bool finished = false;
};

/// An engine of some decoder type over the CPU transformer.
class any_engine {
public:
    virtual ~any_engine() = default;
    /// Queues a prompt; with `own`, its own mask, schedule and sampler built from those settings (of
    /// this engine's preset or composition: engine::policies), else the engine's.
    virtual std::uint64_t add(std::vector<token_id> prompt, const generation_options& o, const registry::settings* own) = 0;
    virtual std::vector<std::uint64_t> add_batch(std::span<const std::vector<token_id>> prompts, const generation_options& o) = 0;
    virtual std::vector<step_report> step() = 0;
    virtual void cancel(std::uint64_t id) = 0;
    virtual std::vector<std::pair<std::uint64_t, sequence_result>> take_finished() = 0;
    [[nodiscard]] virtual std::span<const token_id> committed_prefix(std::uint64_t id) const = 0;
    [[nodiscard]] virtual std::span<const token_id> canvas(std::uint64_t id) const = 0;
    [[nodiscard]] virtual bool idle() const = 0;
    [[nodiscard]] virtual std::size_t active() const = 0;
    [[nodiscard]] virtual decode_stats stats() const = 0;
    /// The Python schedule of this engine, or null.
    [[nodiscard]] virtual py_callable* schedule_callable() const { return nullptr; }
};

template <class Decoder>
class engine_of final : public any_engine {
public:
    explicit engine_of(Decoder&& d, std::shared_ptr<py_callable> fn = {}) : dec_(std::move(d)), eng_(dec_), fn_(std::move(fn)) {}

    std::uint64_t add(std::vector<token_id> prompt, const generation_options& o, const registry::settings* own) override {
        typename engine<Decoder>::policies p;
        if (own) {
            p.mask = registry::make_policy<typename Decoder::mask_type>(*own);
            p.sampler = registry::make_policy<typename Decoder::sampler_type>(*own);
            // A Python schedule has no options: every sequence shares the engine's callable.
            if constexpr (!std::is_same_v<typename Decoder::schedule_type, py_schedule>)
                p.schedule = registry::make_policy<typename Decoder::schedule_type>(*own);
        }
        return eng_.add(std::move(prompt), o, p);
    }
    std::vector<std::uint64_t> add_batch(std::span<const std::vector<token_id>> prompts, const generation_options& o) override {
        return eng_.add_batch(prompts, o);
    }
    std::vector<step_report> step() override {
        std::vector<step_report> out;
        for (const auto& r : eng_.step()) out.push_back({r.id, r.committed, r.finished});
        return out;
    }
    void cancel(std::uint64_t id) override { eng_.cancel(id); }
    std::vector<std::pair<std::uint64_t, sequence_result>> take_finished() override { return eng_.take_finished(); }
    std::span<const token_id> committed_prefix(std::uint64_t id) const override { return eng_.committed_prefix(id); }
    std::span<const token_id> canvas(std::uint64_t id) const override { return eng_.canvas(id); }
    bool idle() const override { return eng_.idle(); }
    std::size_t active() const override { return eng_.active(); }
    decode_stats stats() const override { return eng_.stats(); }
    py_callable* schedule_callable() const override { return fn_.get(); }

private:
    Decoder dec_;
    engine<Decoder> eng_;  // after dec_: it holds a pointer to it
    std::shared_ptr<py_callable> fn_;
};

/// The engine of composition s.composed over `model` (registry::visit_composition), its policies
/// configured from `s`. Compiled in its own translation unit (composed_engine.cpp): its decoder
/// types, one per mask x cache pair, build beside the presets' rather than after them.
[[nodiscard]] std::unique_ptr<any_engine> make_composed_engine(cpu::transformer& model, const registry::settings& s);

/// The engine of preset s.preset over `model`, its policies configured from `s`; with `fn`, the
/// preset's mask, cache and sampler and a schedule calling `fn` (stop_at_eos: CDLM's early stop).
/// With s.composed, the composed decoder of those four policies (registry/compose.hpp); a Python
/// schedule then is refused (it runs over a preset's policies). Throws dlm::invalid_parameter naming
/// "schedule" for a preset whose cache depends on its schedule's sub-blocks (fast-dllm-v2 and its
/// block-cache variant), which a Python schedule does not have.
[[nodiscard]] inline std::unique_ptr<any_engine> make_engine(cpu::transformer& model, const registry::settings& s,
                                                             std::shared_ptr<py_callable> fn, bool stop_at_eos = true) {
    using registry::builtin;
    if (s.composed) {
        if (fn) throw invalid_parameter("schedule", "a Python schedule runs over a preset's mask, cache and sampler: give a preset, not policy names");
        return make_composed_engine(model, s);
    }
    return registry::visit<cpu::transformer>(builtin, s.preset, [&]<class D>(std::type_identity<D>) -> std::unique_ptr<any_engine> {
        if (!fn) return std::make_unique<engine_of<D>>(registry::make_decoder<D>(model, s));
        using P = registry::policies_of<D>;
        if constexpr (schedule_has_sub_block<typename P::schedule>) {
            throw invalid_parameter("schedule", "the " + std::string(builtin.name_of(s.preset)) +
                                                    " preset's cache follows its schedule's sub-blocks, which a Python schedule does not "
                                                    "have; use the mask and cache of another preset (cdlm, fast-dllm, llada, cd4lm, ...)");
        } else {
            using custom = decoder<cpu::transformer, typename P::mask, typename P::cache, py_schedule, typename P::sampler>;
            custom d(model, registry::make_policy<typename P::mask>(s), registry::make_policy<typename P::cache>(s), py_schedule{fn, stop_at_eos},
                     registry::make_policy<typename P::sampler>(s));
            return std::make_unique<engine_of<custom>>(std::move(d), fn);
        }
    });
}

}  // namespace dlm::python
