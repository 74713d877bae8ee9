// Load a model folder and decode with the preset of your choice.
#include <dlm/cpu/transformer.hpp>
#include <dlm/dlm.hpp>
#include <dlm/io/tokenizer.hpp>
#include <iostream>

int main(int argc, char** argv) try {
    if (argc != 3) {
        std::cerr << "usage: app MODEL_DIR PROMPT\n";
        return 2;
    }
    auto model = dlm::cpu::transformer::load(argv[1]);
    const auto tokenizer = dlm::io::tokenizer::load(argv[1]);
    dlm::presets::fast_dllm<dlm::cpu::transformer> decoder(model, dlm::semi_ar_mask{8});
    const auto r = decoder.generate(tokenizer.encode(argv[2]), {.gen_length = 64});
    std::cout << tokenizer.decode(std::span(r.tokens).first(std::size_t(r.answer_length)), true) << '\n';
} catch (const dlm::error& e) {
    std::cerr << "app: " << e.what() << '\n';
    return 1;
}
