// custom_schedule.cpp — a user-written unmasking schedule plugged into dlm's decoder.
//
// "Top-p commit": commit the most confident slots until their confidences add up to a budget, so a
// step commits many slots when the model is sure and one when it is not. Any type with this select()
// hook is an unmasking schedule; the mask, cache and sampler are the shipped ones.
//
//   custom_schedule MODEL_DIR "What is 3 + 4?"
#include <algorithm>
#include <dlm/cpu/transformer.hpp>
#include <dlm/dlm.hpp>
#include <dlm/io/tokenizer.hpp>
#include <iostream>
#include <numeric>

struct confidence_budget_schedule {
    float budget = 2.5f;  // commit slots while the sum of their confidences stays within the budget

    void select(const dlm::step_context&, std::span<const dlm::candidate> masked, std::vector<dlm::index_t>& chosen) const {
        std::vector<dlm::index_t> order(masked.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](auto a, auto b) { return masked[std::size_t(a)].probability > masked[std::size_t(b)].probability; });
        float spent = 0.f;
        for (dlm::index_t i : order) {
            spent += masked[std::size_t(i)].probability;
            if (!chosen.empty() && spent > budget) break;  // always at least one slot: progress
            chosen.push_back(i);
        }
    }
};
static_assert(dlm::unmask_schedule<confidence_budget_schedule>);

int main(int argc, char** argv) try {
    if (argc != 3) {
        std::cerr << "usage: " << argv[0] << " MODEL_DIR PROMPT\n";
        return 2;
    }
    auto model = dlm::cpu::transformer::load(argv[1]);
    const auto tokenizer = dlm::io::tokenizer::load(argv[1]);
    dlm::decoder<dlm::cpu::transformer, dlm::block_causal_mask, dlm::prefix_cache, confidence_budget_schedule,
                 dlm::greedy_sampler>
        decoder(model, dlm::block_causal_mask{8});
    const auto r = decoder.generate(tokenizer.encode(argv[2]), {.gen_length = 64});
    std::cout << tokenizer.decode(std::span(r.tokens).first(std::size_t(r.answer_length)), true) << '\n'
              << r.stats.forwards << " forwards for " << r.stats.committed << " tokens\n";
} catch (const dlm::error& e) {
    std::cerr << "custom_schedule: " << e.what() << '\n';
    return 1;
}
