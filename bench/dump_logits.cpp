// dlm-dump-logits — the logits of one full forward (every row, bidirectional: dlm-bench-forward's
// "full" case) of a model folder or GGUF file, written as raw little-endian f32 [rows x vocabulary],
// so that another implementation of the same model can be checked against dlm's numbers
// (bench/compare_torch.py compares a plain PyTorch forward of the same checkpoint with them).
//
//   dlm-dump-logits -m DIR|FILE.gguf --out FILE [--tokens ID,ID,...] [--rows N] [--dtype keep|f32|bf16]
//
//   --tokens  the canvas; without it --rows N (default 128) tokens (i * 7919) % (vocabulary - 1),
//             the canvas dlm-bench-forward times
//   --dtype   keep (default): the weights as stored; f32 / bf16 convert at load
// Threads: OMP_NUM_THREADS (the logits do not depend on it: docs/determinism.md).
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <dlm/cpu/transformer.hpp>

#include "../cli/files.hpp"
#include "args.hpp"

using namespace dlm;

namespace {

const std::string usage_text = "usage: dlm-dump-logits -m DIR|FILE.gguf --out FILE [--tokens ID,ID,...] [--rows N] [--dtype keep|f32|bf16]\n";

struct options {
    std::string model_path, out_path, dtype = "keep";
    std::vector<token_id> tokens;
    bool given_tokens = false;
    index_t rows = 128;
};

options parse(int argc, char** argv) {
    options o;
    bench::args a(argc, argv);
    while (a.next()) {
        if (a.is("--model", "-m")) o.model_path = a.path();
        else if (a.is("--out")) o.out_path = a.path();
        else if (a.is("--tokens")) o.tokens = a.integers<token_id>(0, std::numeric_limits<token_id>::max()), o.given_tokens = true;
        else if (a.is("--rows")) o.rows = a.integer<index_t>(1, 1 << 20);
        else if (a.is("--dtype")) o.dtype = a.value();
        else a.unknown();
    }
    if (o.model_path.empty()) throw invalid_parameter("-m", "is required");
    if (o.out_path.empty()) throw invalid_parameter("--out", "is required");
    if (o.dtype != "keep" && o.dtype != "f32" && o.dtype != "bf16") throw invalid_parameter("--dtype", "must be keep, f32 or bf16, not '" + o.dtype + "'");
    cli::check_writable(o.out_path);  // before the load and the forward
    return o;
}

}  // namespace

int main(int argc, char** argv) {
    return bench::run_main("dlm-dump-logits", usage_text, [&] {
        options o = parse(argc, argv);
        std::optional<io::dtype> weight_dtype;
        if (o.dtype == "f32") weight_dtype = io::dtype::f32;
        else if (o.dtype == "bf16") weight_dtype = io::dtype::bf16;
        cpu::transformer m = cpu::transformer::load(o.model_path, {.weight_dtype = weight_dtype});
        const auto vocab = static_cast<std::size_t>(m.vocab_size());
        if (o.tokens.empty())
            for (index_t r = 0; r < o.rows; ++r) o.tokens.push_back(static_cast<token_id>((static_cast<std::size_t>(r) * 7919) % (vocab - 1)));
        for (token_id t : o.tokens)
            if (static_cast<std::size_t>(t) >= vocab)
                throw invalid_parameter("--tokens", "id " + std::to_string(t) + " is outside the vocabulary of " + std::to_string(vocab));
        if (o.tokens.size() > static_cast<std::size_t>(m.max_context()))  // positions past it have no trained RoPE or window
            throw invalid_parameter(o.given_tokens ? "--tokens" : "--rows", "holds " + std::to_string(o.tokens.size()) +
                                                                               " tokens, more than the model's context of " + std::to_string(m.max_context()));
        const auto n = static_cast<index_t>(o.tokens.size());
        const canvas_layout l{0, n, n, false};
        const forward_plan p{0, n, 0, n, 0, 0, n};
        std::vector<float> logits(o.tokens.size() * vocab);
        const forward_request<cpu::transformer::kv_cache> rq{o.tokens, l, p, nullptr};
        m.forward(std::span<const forward_request<cpu::transformer::kv_cache>>(&rq, 1), bidirectional_mask{}, logits);
        cli::write_file(o.out_path, std::string_view(reinterpret_cast<const char*>(logits.data()), logits.size() * sizeof(float)));
        std::printf("dlm-dump-logits: %d rows x %zu logits of %s (weights %s, kernels %s) into %s\n", n, vocab, o.model_path.c_str(),
                    m.weight_type().c_str(), cpu::kernels().name, o.out_path.c_str());
        return 0;
    });
}
