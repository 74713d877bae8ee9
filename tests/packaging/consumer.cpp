// The program every packaging consumer builds: it decodes with dlm::presets::cdlm on the scripted
// model and returns non-zero unless the result is the one the script implies. Built with
// DLM_CONSUMER_CPU, it also uses what dlm::cpu brings (nlohmann_json).
#include <dlm/dlm.hpp>
#include <dlm/testing/scripted_model.hpp>

#include <algorithm>
#include <cstdio>
#include <span>
#include <vector>

#ifdef DLM_CONSUMER_CPU
#include <nlohmann/json.hpp>
#endif

int main() {
    // Vocabulary 16, MASK 15, EOS 14. Every row predicts (row % 10) + 1 with p = 0.95, above CDLM's
    // threshold, so each 32-slot block is committed whole.
    constexpr dlm::index_t gen_length = 64;
    dlm::testing::scripted_model model(16, 15, {14}, false,
                                       [](const dlm::testing::script_view& v, std::span<float> out) {
                                           dlm::testing::peaked_logits(out, v.row % 10 + 1, 0.95);
                                       });
    dlm::presets::cdlm<dlm::testing::scripted_model> decoder(model);
    const std::vector<dlm::token_id> prompt{3, 1, 4, 1, 5};
    const dlm::sequence_result r = decoder.generate(prompt, {gen_length, 0});

    int wrong = 0;
    if (r.tokens.size() != static_cast<std::size_t>(gen_length)) {
        std::fprintf(stderr, "expected %d tokens, got %zu\n", gen_length, r.tokens.size());
        return 1;
    }
    for (dlm::index_t g = 0; g < gen_length; ++g) {
        const dlm::token_id expected = (static_cast<dlm::token_id>(prompt.size()) + g) % 10 + 1;
        if (r.tokens[static_cast<std::size_t>(g)] != expected) {
            std::fprintf(stderr, "slot %d: expected token %d, got %d\n", g, expected, r.tokens[static_cast<std::size_t>(g)]);
            ++wrong;
        }
    }
    if (r.answer_length != gen_length || r.stopped_early || r.cancelled()) {
        std::fprintf(stderr, "answer_length %d, stopped_early %d, cancelled %d: expected %d, 0, 0\n", r.answer_length,
                     r.stopped_early, r.cancelled(), gen_length);
        ++wrong;
    }
    if (r.stats.steps_per_block != std::vector<dlm::index_t>{1, 1}) {
        std::fprintf(stderr, "expected one step per block over 2 blocks, got %zu blocks\n", r.stats.steps_per_block.size());
        ++wrong;
    }

#ifdef DLM_CONSUMER_CPU
    // The dependency chain dlm::cpu -> nlohmann_json: usable from the consumer.
    const float lowest = *std::min_element(r.commit_confidence.begin(), r.commit_confidence.end());
    if (!(lowest > 0.9f)) {
        std::fprintf(stderr, "a committed confidence is %f, expected > 0.9\n", static_cast<double>(lowest));
        ++wrong;
    }
    const nlohmann::json tokens = r.tokens;
    if (tokens.size() != r.tokens.size() || tokens.front().get<dlm::token_id>() != r.tokens.front()) {
        std::fprintf(stderr, "the tokens do not convert to JSON\n");
        ++wrong;
    }
#endif

    if (wrong == 0) std::printf("dlm consumer: %d tokens decoded as expected\n", gen_length);
    return wrong == 0 ? 0 : 1;
}
