// python/src/py_model.hpp — a loaded model folder as Python holds it: the CPU transformer's (every
// family but one) or DiffusionGemma's (uniform-state diffusion, its own model class and preset), as
// cli::with_loaded_model loads either, with the lock its forwards take.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include <dlm/io/model_config.hpp>

#include "cli/model.hpp"

namespace dlm::python {

/// A loaded folder. A model's forward uses its own scratch buffers, so forwards over one model run
/// one at a time: every forward and step takes `forwards` (after releasing the GIL, so that a Python
/// schedule inside a step can take the GIL back).
class py_model {
public:
    explicit py_model(cli::loaded_model&& m) : held_(std::move(m)) {}
    explicit py_model(cli::gemma_model&& m) : held_(std::move(m)) {}

    /// f(the cli::basic_loaded_model held), for whichever model it is.
    template <class F>
    decltype(auto) visit(F&& f) {
        return std::visit(std::forward<F>(f), held_);
    }
    template <class F>
    decltype(auto) visit(F&& f) const {
        return std::visit(std::forward<F>(f), held_);
    }
    /// Whether it is DiffusionGemma (uniform-state: its canvases start from random tokens).
    [[nodiscard]] bool uniform_state() const noexcept { return std::holds_alternative<cli::gemma_model>(held_); }
    /// The architecture class of its config.json.
    [[nodiscard]] std::string architecture() const {
        if (uniform_state()) return "DiffusionGemmaForBlockDiffusion";
        return std::string(io::architecture_class(std::get<cli::loaded_model>(held_).model.config().arch));
    }

    std::mutex forwards;

private:
    std::variant<cli::loaded_model, cli::gemma_model> held_;
};
using model_ptr = std::shared_ptr<py_model>;

/// Loads `path` as what it is (cli::with_loaded_model); dtype f32, bf16, f16 or empty (as stored);
/// kv f32, bf16 or empty (f32); `progress` hears how far the weights are.
[[nodiscard]] inline model_ptr load_model(const std::string& path, const std::string& dtype, const std::string& kv,
                                          cpu::load_progress progress = {}) {
    return cli::with_loaded_model(path, cli::load_choice{dtype, kv, "kv"}, [](auto& m) { return std::make_shared<py_model>(std::move(m)); }, std::move(progress));
}

}  // namespace dlm::python
