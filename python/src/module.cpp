// python/src/module.cpp — dlm._dlm, the compiled half of the Python package (python/dlm/ is the other):
// a loaded model and its tokenizer, the preset registry's settings, the step-wise engine of any preset
// (or of a preset's policies with a Python schedule), results, and the server's text stream.
//
// Everything here is a thin layer on the library and on cli/ (model loading, the model's default
// preset, prompt encoding and answer text: the same pieces dlm-generate uses, so the answers agree).
// The GIL is released around every model forward, engine step and model load.
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <dlm/mask/masks.hpp>
#include <dlm/registry/compose.hpp>
#include <dlm/registry/describe.hpp>
#include <dlm/registry/validate.hpp>
#include <dlm/server/text_stream.hpp>

#include "any_engine.hpp"
#include "cli/model.hpp"
#include "cli/presets.hpp"
#include "errors.hpp"
#include "py_model.hpp"
#include "py_schedule.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace dlm::python {
namespace {

/// A numpy array owning `v` (moved, not copied).
template <class T>
nb::ndarray<nb::numpy, T, nb::ndim<1>> to_numpy(std::vector<T> v) {
    auto* heap = new std::vector<T>(std::move(v));
    nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
    return nb::ndarray<nb::numpy, T, nb::ndim<1>>(heap->data(), {heap->size()}, owner);
}
template <class T>
nb::ndarray<nb::numpy, T, nb::ndim<1>> to_numpy(std::span<const T> s) {
    return to_numpy(std::vector<T>(s.begin(), s.end()));
}

/// Python's think (None, True, False) as the chat template's enable_thinking.
io::chat_thinking thinking_of(std::optional<bool> think) {
    return !think ? io::chat_thinking::template_default : *think ? io::chat_thinking::on : io::chat_thinking::off;
}

/// thinking_of a prompt's `think`, which only a chat prompt takes.
io::chat_thinking chat_thinking_of(std::optional<bool> think, bool chat) {
    if (think && !chat) throw invalid_parameter("think", "sets the chat template's enable_thinking: it needs chat=True");
    return thinking_of(think);
}

registry::preset_id preset_of(const std::string& name) {
    if (auto p = registry::builtin.find(name)) return *p;
    throw invalid_parameter("preset", "unknown preset '" + name + "' (one of " + registry::builtin.list() + ")");
}

model_ptr load(const std::string& path, const std::string& dtype, nb::handle progress, const std::string& kv) {
    if (!dtype.empty() && dtype != "f32" && dtype != "bf16" && dtype != "f16")
        throw invalid_parameter("dtype", "must be one of f32, bf16, f16 (or empty: as stored), got '" + dtype + "'");
    if (!kv.empty() && kv != "f32" && kv != "bf16") throw invalid_parameter("kv", "must be f32 or bf16 (or empty: f32), got '" + kv + "'");
    if (!progress.is_none() && !PyCallable_Check(progress.ptr()))
        throw invalid_parameter("progress", "must be a callable (done, total) or None");
    cpu::load_progress report;
    if (!progress.is_none())  // a borrowed handle: the caller's frame keeps it alive for the whole load
        report = [progress](std::uint64_t done, std::uint64_t total) {
            nb::gil_scoped_acquire locked;
            progress(done, total);  // an exception it raises (KeyboardInterrupt) ends the load
        };
    nb::gil_scoped_release unlocked;
    return load_model(path, dtype, kv, std::move(report));
}

/// The logits of one forward of the transformer over `tokens` (every row), under a causal or
/// bidirectional mask, as a rows x vocab float32 array that owns the buffer the model wrote (no copy).
nb::ndarray<nb::numpy, float, nb::ndim<2>> forward(const model_ptr& m, std::vector<token_id> tokens, const std::string& mask) {
    if (m->uniform_state())
        throw invalid_parameter("model", "forward runs the transformer families; DiffusionGemma's denoiser reads an encoded prompt context "
                                         "and self-conditioning state that only its engine keeps (use generate or engine)");
    auto& model = m->visit([]<class M>(cli::basic_loaded_model<M>& x) -> cpu::transformer& {
        if constexpr (std::is_same_v<M, cpu::transformer>) return x.model;
        else throw contract_error("dlm: forward over a model that is not the transformer");
    });
    if (tokens.empty()) throw invalid_parameter("tokens", "must hold at least one token");
    // Bounded before the rows x vocab logits are allocated (as a decode's prompt + generation is).
    if (tokens.size() > static_cast<std::size_t>(model.max_context()))
        throw invalid_parameter("tokens", std::to_string(tokens.size()) + " tokens exceed the model's context of " +
                                              std::to_string(model.max_context()) + " positions");
    if (mask != "bidirectional" && mask != "causal") throw invalid_parameter("mask", "must be 'bidirectional' or 'causal', got '" + mask + "'");
    const auto n = static_cast<index_t>(tokens.size());
    const auto vocab = static_cast<std::size_t>(model.vocab_size());
    auto* logits = new std::vector<float>(static_cast<std::size_t>(n) * vocab);
    nb::capsule owner(logits, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
    {
        nb::gil_scoped_release unlocked;
        const std::lock_guard one_at_a_time(m->forwards);
        using request = forward_request<cpu::transformer::kv_cache>;
        const request rq{tokens, canvas_layout{0, n, n, false}, forward_plan{0, n, 0, n, 0, 0, n}, nullptr};
        if (mask == "causal") model.forward(std::span<const request>(&rq, 1), causal_mask{}, std::span<float>(*logits));
        else model.forward(std::span<const request>(&rq, 1), bidirectional_mask{}, std::span<float>(*logits));
    }
    return nb::ndarray<nb::numpy, float, nb::ndim<2>>(logits->data(), {static_cast<std::size_t>(n), vocab}, owner);
}

/// A policy named on the axis of `list`, in place of `row`.
template <class List>
void name_row(const List& list, std::size_t& row, const std::optional<std::string>& name) {
    if (!name) return;
    const std::string axis(registry::name_of(list.which));
    if (auto i = list.find(*name)) row = *i;
    else throw invalid_parameter(axis, "unknown " + axis + " '" + *name + "' (one of " + list.list() + ")");
}

/// The registry's settings of `preset` (empty: the model's default preset) for the given options,
/// validated; a refusal names the option as Python spells it (the registry's names). With a mask,
/// cache, schedule or sampler named, the composition of those policies, the others the preset's
/// (registry/compose.hpp).
registry::settings resolve(const model_ptr& m, const std::string& preset, std::optional<std::string> mask, std::optional<std::string> cache,
                           std::optional<std::string> schedule, std::optional<std::string> sampler, std::optional<index_t> gen_length,
                           std::optional<index_t> block_length, std::optional<index_t> steps, std::optional<double> threshold,
                           std::optional<double> eps, std::optional<double> alg_temp, std::optional<std::string> algorithm,
                           std::optional<float> temperature, std::optional<index_t> top_k, std::optional<float> top_p,
                           std::optional<std::uint64_t> seed, std::optional<double> editing_threshold) {
    const registry::preset_id id = preset.empty() ? m->visit([](const auto& x) { return cli::model_preset(x).preset; }) : preset_of(preset);
    // As dlm-generate: a preset that does not fit the model is refused first.
    m->visit([&]<class M>(const cli::basic_loaded_model<M>&) { registry::check_fits<M>(registry::builtin, id); });
    const auto& hints = m->visit([](const auto& x) -> const auto& { return x.hints; });
    registry::choices c{gen_length, block_length, steps,  threshold, eps,  alg_temp,         std::nullopt,
                        temperature, top_k,      top_p, seed,      editing_threshold};
    if (algorithm) {
        c.alg = registry::algorithm_from_name(*algorithm);
        if (!c.alg) throw invalid_parameter("algorithm", "unknown algorithm '" + *algorithm + "' (origin, maskgit_plus, topk_margin, entropy, random)");
    }
    if (!mask && !cache && !schedule && !sampler) {
        registry::settings s = registry::resolve(registry::builtin, id, c, hints);
        m->visit([&](const auto& x) { cli::check_fits_shift(s, x.model, "preset"); });  // fast-dllm-v2 on an unshifted model
        return s;
    }
    if (m->uniform_state())
        throw invalid_parameter(mask ? "mask" : cache ? "cache" : schedule ? "schedule" : "sampler",
                                "DiffusionGemma decodes with its diffusion-gemma preset's policies; the policy name table composes "
                                "masked-diffusion decoders");
    registry::composition comp = registry::composition_of(registry::builtin, id);
    name_row(registry::masks, comp.mask, mask);
    name_row(registry::caches, comp.cache, cache);
    name_row(registry::schedules, comp.schedule, schedule);
    name_row(registry::samplers, comp.sampler, sampler);
    registry::settings s = registry::resolve_composition(comp, c, hints);
    s.preset = id;  // where the policies not named came from
    return s;
}

/// {axis: policy name} of settings `s`: its composition's, or its preset's policies.
nb::typed<nb::dict, nb::str, nb::str> policies_of(const registry::settings& s) {
    const registry::composition c = s.composed ? *s.composed : registry::composition_of(registry::builtin, s.preset);
    nb::dict d;
    d["mask"] = std::string(registry::masks.name_of(c.mask));
    d["cache"] = std::string(registry::caches.name_of(c.cache));
    d["schedule"] = std::string(registry::schedules.name_of(c.schedule));
    d["sampler"] = std::string(registry::samplers.name_of(c.sampler));
    return nb::typed<nb::dict, nb::str, nb::str>(std::move(d));
}

/// (name, description) of every row of a policy list.
template <class List>
std::vector<std::pair<std::string, std::string>> rows_of(const List& list) {
    std::vector<std::pair<std::string, std::string>> out;
    for (std::size_t i = 0; i < list.size; ++i) out.emplace_back(list.name_of(i), list.description_of(i));
    return out;
}

/// The options the schedule named `name` takes on its own (the policy name table's accepts).
std::vector<std::string> schedule_options(const std::string& name) {
    std::vector<std::string> out;
    if (const auto i = registry::schedules.find(name))
        for (std::size_t o = 0; o < registry::option_count; ++o)
            if (registry::schedules.accepts(*i).takes(static_cast<registry::option>(o))) out.emplace_back(registry::option_names[o]);
    return out;
}

/// The engine as Python holds it: the model it decodes (kept alive), its settings, the engine, and a
/// guard against two Python threads using it at once (the engine is single-threaded).
class py_engine {
public:
    py_engine(model_ptr m, const registry::settings& s, nb::object schedule, bool stop_at_eos) : model_(std::move(m)), settings_(s) {
        if (!schedule.is_none()) {
            if (!PyCallable_Check(schedule.ptr())) throw invalid_parameter("schedule", "must be callable (ScheduleStep -> indices to commit)");
            fn_ = std::make_shared<py_callable>(schedule);
        }
        eng_ = make_engine(*model_, settings_, fn_, stop_at_eos);
    }

    /// With `own`: the sequence's own settings (of this engine's preset or composition), for its
    /// generation length, seed, mask, schedule and sampler.
    std::uint64_t add(std::vector<token_id> prompt, std::optional<std::uint64_t> seed, double cfg, const registry::settings* own) {
        const auto lock = guard();
        if (!own) return eng_->add(std::move(prompt), options(seed, cfg));
        if (own->composed != settings_.composed || (!own->composed && own->preset != settings_.preset))
            throw invalid_parameter("settings", "a sequence's own settings must be of the engine's preset or composition (" + describe() + ")");
        generation_options o = options(seed.value_or(own->seed), cfg);
        o.gen_length = own->gen_length;
        return eng_->add(std::move(prompt), o, eng_->make_policies(*own));
    }
    std::vector<std::uint64_t> add_batch(const std::vector<std::vector<token_id>>& prompts, std::optional<std::uint64_t> seed, double cfg) {
        const auto lock = guard();
        return eng_->add_batch(prompts, options(seed, cfg));
    }
    void check_batch(const std::vector<std::vector<token_id>>& prompts, std::optional<std::uint64_t> seed, double cfg, std::size_t at_once) {
        const auto lock = guard();
        eng_->check_batch(prompts, options(seed, cfg), at_once);
    }
    std::vector<step_report> step() {
        const auto lock = guard();
        std::vector<step_report> r;
        {
            nb::gil_scoped_release unlocked;
            const std::lock_guard one_at_a_time(model_->forwards);
            r = eng_->step();
        }
        if (fn_) fn_->reraise_pending();
        return r;
    }
    void cancel(std::uint64_t id) {
        const auto lock = guard();
        eng_->cancel(id);
    }
    std::vector<std::pair<std::uint64_t, sequence_result>> take_finished() {
        const auto lock = guard();
        return eng_->take_finished();
    }
    nb::ndarray<nb::numpy, token_id, nb::ndim<1>> committed_prefix(std::uint64_t id) {
        const auto lock = guard();
        return to_numpy(eng_->committed_prefix(id));
    }
    nb::ndarray<nb::numpy, token_id, nb::ndim<1>> canvas(std::uint64_t id) {
        const auto lock = guard();
        return to_numpy(eng_->canvas(id));
    }
    bool idle() const { return eng_->idle(); }
    std::size_t active() const { return eng_->active(); }
    decode_stats stats() const { return eng_->stats(); }
    const registry::settings& settings() const { return settings_; }
    std::string describe() const { return registry::describe(registry::builtin, settings_); }
    const model_ptr& model() const { return model_; }
    /// The Python objects the engine holds (its Python schedule), for the cycle collector.
    int traverse(visitproc visit, void* arg) const { return fn_ ? fn_->traverse(visit, arg) : 0; }
    /// Drops them, breaking a cycle through the schedule (the engine can no longer run its steps).
    void clear() {
        if (fn_) fn_->clear();
    }

private:
    generation_options options(std::optional<std::uint64_t> seed, double cfg) const {
        generation_options o;
        o.gen_length = settings_.gen_length;
        o.seed = seed.value_or(settings_.seed);
        o.cfg_scale = cfg;
        return o;
    }
    std::unique_lock<std::mutex> guard() {
        std::unique_lock<std::mutex> lock(busy_, std::try_to_lock);
        if (!lock.owns_lock()) throw contract_error("dlm.Engine: another thread is using this engine (an engine is single-threaded)");
        return lock;
    }

    model_ptr model_;
    registry::settings settings_;
    std::shared_ptr<py_callable> fn_;  // the Python schedule, or null
    std::unique_ptr<any_engine> eng_;
    std::mutex busy_;
};

const char* status_name(sequence_status s) {
    return s == sequence_status::finished ? "finished" : s == sequence_status::cancelled ? "cancelled" : "failed";
}

void bind_model(nb::module_& m) {
    // Each property reads the folder held, whichever model it is (py_model::visit).
    const auto of = [](auto f) { return [f](const py_model& x) { return x.visit(f); }; };
    nb::class_<py_model>(m, "Model", "A loaded model (the CPU transformer, or DiffusionGemma), its tokenizer and chat format.")
        .def_prop_ro("path", of([](const auto& x) { return x.dir.string(); }))
        .def_prop_ro("vocab_size", of([](const auto& x) { return x.model.vocab_size(); }))
        .def_prop_ro("mask_id", of([](const auto& x) { return x.model.mask_id(); }),
                     "The id of a not yet committed slot (DiffusionGemma: its pad id, which its canvases never hold).")
        .def_prop_ro("eos_ids", of([](const auto& x) {
            const auto e = x.model.eos_ids();
            return std::vector<token_id>(e.begin(), e.end());
        }))
        .def_prop_ro("logits_shift", of([](const auto& x) { return x.model.logits_shift(); }))
        .def_prop_ro("max_context", of([](const auto& x) { return x.model.max_context(); }), "Positions a canvas may hold (prompt and answer).")
        .def_prop_ro("architecture", &py_model::architecture)
        .def_prop_ro("uniform_state", &py_model::uniform_state,
                     "Whether the model is a uniform-state diffusion model (DiffusionGemma): canvases start from random tokens.")
        .def_prop_ro("default_preset", of([](const auto& x) { return std::string(cli::name_of(cli::model_preset(x).preset)); }))
        .def_prop_ro("has_chat_template", of([](const auto& x) { return x.chat != io::chat_format::none; }),
                     "Whether the folder has a chat template (chat=True is refused where it is not one dlm writes: chat_template).")
        .def_prop_ro("chat_template", of([](const auto& x) { return std::string(io::chat_format_name(x.chat)); }),
                     "The chat template dlm writes for chat=True: llada, chatml, qwen2_5, chatml_bare, qwen3, gemma4; none (no template) or unsupported.")
        .def_prop_ro("weight_type", of([](const auto& x) { return std::string(x.model.weight_type()); }))
        .def("encode", [](const py_model& x, const std::string& text, bool chat, std::optional<bool> think, std::optional<bool> special) {
                 const io::chat_thinking thinking = chat_thinking_of(think, chat);
                 return x.visit([&](const auto& f) {
                     return f.tokenizer.encode(cli::prompt_text(f, text, chat, thinking), special.value_or(cli::adds_special_tokens(f, chat)));
                 });
             }, "text"_a, "chat"_a = false, "think"_a = nb::none(), "special"_a = nb::none())
        .def("encode_prompt", [](const py_model& x, const std::string& text, bool chat, std::optional<bool> think, index_t gen_length, const std::string& name) {
                 const io::chat_thinking thinking = chat_thinking_of(think, chat);
                 return x.visit([&](const auto& f) { return cli::encode_prompt_within_context(f, text, chat, thinking, {}, gen_length, name); });
             }, "text"_a, "chat"_a, "think"_a, "gen_length"_a, "name"_a,
             "A text prompt's ids as encode gives them, tokenized only as far as a prompt beside gen_length fits the model's context: "
             "a longer one raises dlm.InvalidParameter naming `name` (cli::encode_within_context).")
        .def("encode_templated", [](const py_model& x, const std::string& text, index_t gen_length, const std::string& name) {
                 return x.visit([&](const auto& f) { return cli::encode_within_context(f, text, cli::adds_special_tokens(f, true), gen_length, name); });
             }, "text"_a, "gen_length"_a, "name"_a,
             "The ids of a prompt text the chat template wrote already (LLM.chat), with the special tokens a chat prompt gets, tokenized only as "
             "far as a prompt beside gen_length fits the model's context: a longer one raises dlm.InvalidParameter naming `name`.")
        .def("adds_special_tokens", [](const py_model& x, bool chat) { return x.visit([&](const auto& f) { return cli::adds_special_tokens(f, chat); }); },
             "chat"_a, "Whether a prompt's text gets the tokenizer's own special tokens: a plain one does, a templated chat one not (cli::adds_special_tokens).")
        .def("apply_chat_template", [](const py_model& x, const std::vector<std::pair<std::string, std::string>>& messages,
                                        bool add_generation_prompt, std::optional<bool> think) {
                 std::vector<io::chat_message> m;
                 for (const auto& [role, content] : messages) m.push_back({role, content});
                 return x.visit([&](const auto& f) {
                     cli::check_chat(f, true, "messages");
                     return io::apply_chat_template(f.chat, m, add_generation_prompt, thinking_of(think));
                 });
             }, "messages"_a, "add_generation_prompt"_a = true, "think"_a = nb::none(),
             "The conversation's prompt text in the model's chat template ((role, content) pairs, checked by dlm._args.messages).")
        .def("decode", [](const py_model& x, const std::vector<token_id>& ids, bool skip_special) {
                 return x.visit([&](const auto& f) { return f.tokenizer.decode(ids, skip_special); });
             }, "tokens"_a, "skip_special"_a = true)
        .def("answer_text", [](const py_model& x, const sequence_result& r) {
                 return x.visit([&](const auto& f) { return cli::answer_text(f, r); });
             }, "result"_a);
    // Held by shared_ptr in Python so engines keep their model alive.
    m.def("load", &load, "path"_a, "dtype"_a = "", "progress"_a = nb::none(), "kv"_a = "");
    m.def("forward", &forward, "model"_a, "tokens"_a, "mask"_a = "bidirectional");
}

void bind_settings(nb::module_& m) {
    using registry::settings;
    nb::class_<settings>(m, "Settings", "A preset's resolved settings (dlm/registry/settings.hpp).")
        .def_prop_ro("preset", [](const settings& s) { return std::string(registry::builtin.name_of(s.preset)); },
                     "The preset; for a composition, the preset its policies not named came from.")
        .def_prop_ro("composed", [](const settings& s) { return s.composed.has_value(); }, "Whether the policies were composed by name.")
        .def_prop_ro("policies", [](const settings& s) { return policies_of(s); }, "{axis: policy name} of mask, cache, schedule and sampler.")
        .def_ro("gen_length", &settings::gen_length)
        .def_ro("block_length", &settings::block_length)
        .def_ro("steps", &settings::steps)
        .def_ro("threshold", &settings::threshold)
        .def_ro("eps", &settings::eps)
        .def_ro("alg_temp", &settings::alg_temp)
        .def_prop_ro("algorithm", [](const settings& s) { return std::string(registry::name_of(s.alg)); })
        .def_ro("temperature", &settings::temperature)
        .def_ro("top_k", &settings::top_k)
        .def_ro("top_p", &settings::top_p)
        .def_ro("seed", &settings::seed)
        .def_ro("editing_threshold", &settings::editing_threshold)
        .def("source", [](const settings& s, const std::string& option) {
            const auto o = registry::option_of_parameter(option);
            if (!o) throw invalid_parameter("option", "no option '" + option + "'");
            return std::string(registry::name_of(s.source_of(*o)));
        }, "option"_a)
        .def("describe", [](const settings& s) { return registry::describe(registry::builtin, s); });
    m.def("resolve", &resolve, "model"_a, "preset"_a = "", "mask"_a = nb::none(), "cache"_a = nb::none(), "schedule"_a = nb::none(),
          "sampler"_a = nb::none(), "gen_length"_a = nb::none(), "block_length"_a = nb::none(), "steps"_a = nb::none(),
          "threshold"_a = nb::none(), "eps"_a = nb::none(), "alg_temp"_a = nb::none(), "algorithm"_a = nb::none(),
          "temperature"_a = nb::none(), "top_k"_a = nb::none(), "top_p"_a = nb::none(), "seed"_a = nb::none(),
          "editing_threshold"_a = nb::none());
    m.def("policies", [] {
        return std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>>{
            {"mask", rows_of(registry::masks)}, {"cache", rows_of(registry::caches)}, {"schedule", rows_of(registry::schedules)},
            {"sampler", rows_of(registry::samplers)}};
    }, "[(axis, [(name, description)])] of the policy name table (dlm/registry/policy_names.hpp).");
    m.def("schedule_options", &schedule_options, "name"_a, "The options the schedule `name` takes on its own (registry/policy_names.hpp).");
    m.def("option_bounds", [] {
        std::vector<std::tuple<std::string, double, double, bool, bool, bool>> out;
        for (std::size_t i = 0; i < registry::option_count; ++i) {
            const auto o = static_cast<registry::option>(i);
            if (o == registry::option::algorithm || o == registry::option::seed) continue;  // a name, a 64-bit seed: checked by python/dlm/_args.py
            const cli::option_bounds b = cli::bounds_of(o);
            out.emplace_back(std::string(registry::name_of(o)), b.lo, b.hi, b.open_lo, b.open_hi, b.integer);
        }
        return out;
    }, "[(option, lo, hi, open_lo, open_hi, integer)]: the values each numeric option may take, as dlm-generate's flags (cli/bounds.hpp).");
    m.def("presets", [] {
        std::vector<std::pair<std::string, std::string>> out;
        for (std::size_t i = 0; i < registry::builtin.size; ++i)
            out.emplace_back(registry::builtin.name_of({i}), registry::builtin.description_of({i}));
        return out;
    });
}

void bind_results(nb::module_& m) {
    nb::class_<sequence_result>(m, "Result", "One decoded sequence (dlm::sequence_result).")
        .def_prop_ro("tokens", [](const sequence_result& r) { return to_numpy(std::span<const token_id>(r.tokens)); }, nb::rv_policy::move)
        .def_prop_ro("commit_forward", [](const sequence_result& r) { return to_numpy(std::span<const index_t>(r.commit_forward)); }, nb::rv_policy::move)
        .def_prop_ro("commit_confidence", [](const sequence_result& r) { return to_numpy(std::span<const float>(r.commit_confidence)); }, nb::rv_policy::move)
        .def_ro("answer_length", &sequence_result::answer_length)
        .def_ro("stopped_early", &sequence_result::stopped_early)
        .def_prop_ro("status", [](const sequence_result& r) { return std::string(status_name(r.status)); })
        .def_ro("message", &sequence_result::message)
        .def_prop_ro("forwards", [](const sequence_result& r) { return r.stats.forwards; })
        .def_prop_ro("committed", [](const sequence_result& r) { return r.stats.committed; })
        .def_prop_ro("rows_computed", [](const sequence_result& r) { return r.stats.rows_computed; })
        .def_prop_ro("steps_per_block", [](const sequence_result& r) { return r.stats.steps_per_block; })
        .def_prop_ro("tokens_per_forward", [](const sequence_result& r) { return r.stats.tokens_per_forward(); })
        .def_prop_ro("seed", [](const sequence_result& r) { return r.settings.seed.value; })
        .def("raise_if_failed", &sequence_result::rethrow_if_failed);
    nb::class_<decode_stats>(m, "EngineStats")
        .def_ro("forwards", &decode_stats::forwards)
        .def_ro("model_seconds", &decode_stats::model_seconds)
        .def_ro("overhead_seconds", &decode_stats::overhead_seconds);
    nb::class_<step_report>(m, "StepReport")
        .def_ro("id", &step_report::id)
        .def_ro("committed", &step_report::committed)
        .def_ro("finished", &step_report::finished)
        .def_ro("edited", &step_report::edited);
    nb::class_<schedule_step>(m, "ScheduleStep", "What a Python schedule sees at one step; select by returning candidate indices.")
        .def_prop_ro("position", [](const schedule_step& s) { return to_numpy(std::span<const index_t>(s.position)); }, nb::rv_policy::move)
        .def_prop_ro("token", [](const schedule_step& s) { return to_numpy(std::span<const token_id>(s.token)); }, nb::rv_policy::move)
        .def_prop_ro("probability", [](const schedule_step& s) { return to_numpy(std::span<const float>(s.probability)); }, nb::rv_policy::move)
        .def_prop_ro("margin", [](const schedule_step& s) { return to_numpy(std::span<const float>(s.margin)); }, nb::rv_policy::move)
        .def_prop_ro("neg_entropy", [](const schedule_step& s) { return to_numpy(std::span<const float>(s.neg_entropy)); }, nb::rv_policy::move)
        .def("__len__", [](const schedule_step& s) { return s.position.size(); })
        .def_ro("forward", &schedule_step::forward)
        .def_ro("block", &schedule_step::block)
        .def_ro("step_in_block", &schedule_step::step_in_block)
        .def_ro("block_begin", &schedule_step::block_begin)
        .def_ro("block_end", &schedule_step::block_end)
        .def_ro("masked_at_block_start", &schedule_step::masked_at_block_start)
        .def_ro("committed", &schedule_step::committed)
        .def_ro("seed", &schedule_step::seed);
    nb::class_<server::text_stream>(m, "TextStream", "What of a growing committed prefix's text may be shown now (dlm-server's rule).")
        .def(nb::init<std::vector<std::string>>(), "stop"_a = std::vector<std::string>{})
        .def("advance", &server::text_stream::advance, "text"_a, "final"_a)
        .def_prop_ro("stopped", &server::text_stream::stopped);
}

// Garbage-collector support of every bound type that holds a Python callable: the engine (its
// Python schedule). nanobind's "reference cycles involving functions": without tp_traverse and
// tp_clear a schedule that refers back to whatever holds its engine (a bound method of the object
// owning the engine) makes a cycle Python cannot see, and the engine, its model and its K/V leak.
// (A load's progress callable is borrowed for the load alone and never held.)
int engine_traverse(PyObject* self, visitproc visit, void* arg) {
    Py_VISIT(Py_TYPE(self));
    if (!nb::inst_ready(self)) return 0;  // before or during __init__: no C++ state to read yet
    return nb::inst_ptr<py_engine>(self)->traverse(visit, arg);
}
int engine_clear(PyObject* self) {
    if (nb::inst_ready(self)) nb::inst_ptr<py_engine>(self)->clear();
    return 0;
}
PyType_Slot engine_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(engine_traverse)},
                              {Py_tp_clear, reinterpret_cast<void*>(engine_clear)},
                              {0, nullptr}};

void bind_engine(nb::module_& m) {
    nb::class_<py_engine>(m, "Engine", "The step-wise engine of one preset (dlm::engine).", nb::type_slots(engine_slots))
        .def(nb::init<model_ptr, const registry::settings&, nb::object, bool>(), "model"_a, "settings"_a, "schedule"_a = nb::none(),
             "stop_at_eos"_a = true)
        .def("add", &py_engine::add, "prompt"_a, "seed"_a = nb::none(), "cfg"_a = 0.0, "settings"_a = nb::none())
        .def("add_batch", &py_engine::add_batch, "prompts"_a, "seed"_a = nb::none(), "cfg"_a = 0.0)
        .def("check_batch", &py_engine::check_batch, "prompts"_a, "seed"_a = nb::none(), "cfg"_a = 0.0, "at_once"_a = 1)
        .def("step", &py_engine::step)
        .def("cancel", &py_engine::cancel, "id"_a)
        .def("take_finished", &py_engine::take_finished)
        .def("committed_prefix", &py_engine::committed_prefix, "id"_a)
        .def("canvas", &py_engine::canvas, "id"_a)
        .def_prop_ro("idle", &py_engine::idle)
        .def_prop_ro("active", &py_engine::active)
        .def_prop_ro("stats", &py_engine::stats)
        .def_prop_ro("settings", &py_engine::settings)
        .def_prop_ro("model", &py_engine::model);
}

}  // namespace
}  // namespace dlm::python

NB_MODULE(_dlm, m) {
    m.doc() = "dlm's compiled core; use the dlm package (python/dlm/__init__.py).";
    nb::register_exception_translator(&dlm::python::translate_error);
    dlm::python::bind_model(m);
    dlm::python::bind_settings(m);
    dlm::python::bind_results(m);
    dlm::python::bind_engine(m);
    m.attr("default_threads") = std::min(dlm::cli::current_threads(), dlm::cli::max_threads);  // the process's, read at import (OpenMP's setting is per thread)
    m.def("sequence_seed", &dlm::sequence_seed, "seed"_a, "index"_a);  // the seed of a batch's sequence `index` (core/defaults.hpp)
    m.attr("max_threads") = dlm::cli::max_threads;  // dlm-generate's -t bound
    m.def("set_threads", [](int n) {
        if (n < 1 || n > dlm::cli::max_threads)
            throw dlm::invalid_parameter("threads", "must be in [1, " + std::to_string(dlm::cli::max_threads) + "], got " + std::to_string(n));
        dlm::cli::set_threads(n);
    }, "n"_a);
}
