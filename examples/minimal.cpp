// minimal.cpp — load a Hugging Face model folder, decode one prompt with CDLM's decoder, print it.
//
//   minimal MODEL_DIR "What is 3 + 4?"
#include <dlm/cpu/transformer.hpp>
#include <dlm/dlm.hpp>
#include <dlm/io/tokenizer.hpp>
#include <iostream>

int main(int argc, char** argv) try {
    if (argc != 3) {
        std::cerr << "usage: " << argv[0] << " MODEL_DIR PROMPT\n";
        return 2;
    }
    auto model = dlm::cpu::transformer::load(argv[1]);
    const auto tokenizer = dlm::io::tokenizer::load(argv[1]);

    dlm::presets::cdlm<dlm::cpu::transformer> decoder(model, dlm::block_causal_mask{8});
    const auto result = decoder.generate(tokenizer.encode(argv[2]), {.gen_length = 64, .seed = 0});

    const auto answer = std::span(result.tokens).first(static_cast<std::size_t>(result.answer_length));
    std::cout << tokenizer.decode(answer, /*skip_special=*/true) << '\n'
              << result.stats.forwards << " forwards, " << result.stats.tokens_per_forward() << " tokens per forward\n";
} catch (const dlm::error& e) {
    std::cerr << "minimal: " << e.what() << '\n';
    return 1;
}
