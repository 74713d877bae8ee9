// python/src/composed_engine.cpp — the engines of policies composed by name (any_engine.hpp's
// make_composed_engine): a decoder type per mask x cache pair the decoder accepts
// (dlm/registry/compose.hpp), kept out of module.cpp so the two compile in parallel and an edit of
// the bindings does not rebuild them.
#include "any_engine.hpp"

namespace dlm::python {

std::unique_ptr<any_engine> make_composed_engine(cpu::transformer& model, const registry::settings& s) {
    if (!s.composed) throw contract_error("dlm: make_composed_engine needs settings of a composition");
    std::unique_ptr<any_engine> out;
    registry::visit_composition<cpu::transformer>(*s.composed, [&]<class D>(std::type_identity<D>) {
        out = std::make_unique<engine_of<D>>(std::in_place, registry::make_decoder<D>(model, s));
    });
    return out;
}

}  // namespace dlm::python
