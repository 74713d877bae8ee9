// custom_preset.cpp — a preset of one's own, added to dlm's preset registry with one line.
//
// "Capped threshold": CDLM's block-causal mask and exact block cache, with a schedule that commits
// the slots whose confidence reaches `threshold` but at most `max_per_step` of them (and always the
// best one). The registry reads from the policy types what the preset accepts (the mask has a
// block_length, the schedule a threshold, the sampler is greedy), so names, flags-to-options,
// defaults, validation and the decoder visitor work for it as for the shipped presets.
//
//   custom_preset models/cdlm "Tom has 3 apples. He buys 4 more. How many apples does he have now?" [PRESET]     # PRESET: capped-threshold (default) or any shipped one
#include <algorithm>
#include <iostream>
#include <numeric>

#include <dlm/cpu/transformer.hpp>
#include <dlm/io/tokenizer.hpp>
#include <dlm/registry/describe.hpp>
#include <dlm/registry/validate.hpp>

struct capped_threshold_schedule {
    double threshold = 0.8;  // the registry sees this member: the preset accepts "threshold", default 0.8
    dlm::index_t max_per_step = 2;

    void validate(const dlm::canvas_layout&) const {
        if (!(threshold > 0.0 && threshold <= 1.0))
            throw dlm::invalid_parameter("threshold", "must be in (0, 1], got " + std::to_string(threshold));
    }
    void select(const dlm::step_context&, std::span<const dlm::candidate> masked, std::vector<dlm::index_t>& chosen) const {
        std::vector<dlm::index_t> order(masked.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](auto a, auto b) { return masked[std::size_t(a)].probability > masked[std::size_t(b)].probability; });
        for (dlm::index_t i : order) {
            const bool confident = masked[std::size_t(i)].probability >= static_cast<float>(threshold);
            if (!chosen.empty() && (!confident || dlm::index_t(chosen.size()) == max_per_step)) break;
            chosen.push_back(i);  // always the best one: progress
        }
    }
};
static_assert(dlm::unmask_schedule<capped_threshold_schedule>);

template <class Model>
using capped_threshold = dlm::decoder<Model, dlm::block_causal_mask, dlm::prefix_cache, capped_threshold_schedule, dlm::greedy_sampler>;

// The one registry line: dlm's presets and this one.
inline constexpr auto presets = dlm::registry::builtin.with(dlm::registry::preset<capped_threshold>{"capped-threshold", "CDLM with at most 2 commits per step"});

int main(int argc, char** argv) try {
    if (argc < 3 || argc > 4) {
        std::cerr << "usage: " << argv[0] << " MODEL_DIR PROMPT [PRESET]\n";
        return 2;
    }
    auto model = dlm::cpu::transformer::load(argv[1]);
    const auto tokenizer = dlm::io::tokenizer::load(argv[1]);
    const auto id = presets.find(argc == 4 ? argv[3] : "capped-threshold");
    if (!id) throw dlm::invalid_parameter("PRESET", std::string("unknown preset (one of ") + presets.list() + ")");

    // The options it lacks are refused by name, as the shipped presets' are.
    try {
        dlm::registry::check_accepted(presets, *id, {.temperature = 0.7f});
    } catch (const dlm::invalid_parameter& e) {
        std::cout << "refused: " << e.what() << '\n';
    }
    const dlm::decoding_hints h = dlm::decoding_hints_of(model);
    const dlm::registry::settings s = dlm::registry::resolve(
        presets, *id, {}, {h.gen_length.value.value_or(0), h.block_length.value.value_or(0)});
    const auto r = dlm::registry::visit<dlm::cpu::transformer>(presets, *id, [&]<class D>(std::type_identity<D>) {
        D d = dlm::registry::make_decoder<D>(model, s);
        return d.generate(tokenizer.encode(argv[2]), {.gen_length = s.gen_length, .seed = s.seed});
    });
    std::cout << dlm::registry::describe(presets, s) << '\n'
              << tokenizer.decode(std::span(r.tokens).first(std::size_t(r.answer_length)), true) << '\n'
              << r.stats.forwards << " forwards for " << r.stats.committed << " tokens\n";
} catch (const dlm::error& e) {
    std::cerr << "custom_preset: " << e.what() << '\n';
    return 1;
}
