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
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <dlm/cpu/transformer.hpp>

using namespace dlm;

namespace {

[[noreturn]] void usage(const char* argv0, const std::string& error) {
    if (!error.empty()) std::fprintf(stderr, "%s: %s\n", argv0, error.c_str());
    std::fprintf(stderr, "usage: %s -m DIR|FILE.gguf --out FILE [--tokens ID,ID,...] [--rows N] [--dtype keep|f32|bf16]\n", argv0);
    std::exit(2);
}

std::vector<token_id> parse_tokens(const char* argv0, const std::string& v) {
    std::vector<token_id> out;
    std::size_t at = 0;
    while (at < v.size()) {
        const std::size_t comma = v.find(',', at);
        const std::string part = v.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        char* end = nullptr;
        const long id = std::strtol(part.c_str(), &end, 10);
        if (part.empty() || *end != '\0' || id < 0) usage(argv0, "--tokens takes non-negative ids separated by commas, not '" + part + "'");
        out.push_back(static_cast<token_id>(id));
        if (comma == std::string::npos) break;
        at = comma + 1;
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    std::string model_path, out_path, dtype = "keep";
    std::vector<token_id> tokens;
    long rows = 128;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) usage(argv[0], a + " needs a value");
            return argv[++i];
        };
        if (a == "-m" || a == "--model") model_path = value();
        else if (a == "--out") out_path = value();
        else if (a == "--tokens") tokens = parse_tokens(argv[0], value());
        else if (a == "--rows") {
            const std::string v = value();
            rows = std::strtol(v.c_str(), nullptr, 10);
            if (rows < 1 || rows > (1 << 20)) usage(argv[0], "--rows needs an integer >= 1, not '" + v + "'");
        } else if (a == "--dtype") dtype = value();
        else if (a == "-h" || a == "--help") usage(argv[0], "");
        else usage(argv[0], "unknown argument '" + a + "'");
    }
    if (model_path.empty() || out_path.empty()) usage(argv[0], "-m and --out are required");
    std::optional<io::dtype> weight_dtype;
    if (dtype == "f32") weight_dtype = io::dtype::f32;
    else if (dtype == "bf16") weight_dtype = io::dtype::bf16;
    else if (dtype != "keep") usage(argv[0], "--dtype must be keep, f32 or bf16, not '" + dtype + "'");
    try {
        cpu::transformer m = cpu::transformer::load(model_path, {.weight_dtype = weight_dtype});
        const auto vocab = static_cast<std::size_t>(m.vocab_size());
        if (tokens.empty())
            for (long r = 0; r < rows; ++r) tokens.push_back(static_cast<token_id>((static_cast<std::size_t>(r) * 7919) % (vocab - 1)));
        for (token_id t : tokens)
            if (static_cast<std::size_t>(t) >= vocab) usage(argv[0], "--tokens: id " + std::to_string(t) + " is outside the vocabulary of " + std::to_string(vocab));
        const auto n = static_cast<index_t>(tokens.size());
        const canvas_layout l{0, n, n, false};
        const forward_plan p{0, n, 0, n, 0, 0, n};
        std::vector<float> logits(tokens.size() * vocab);
        const forward_request<cpu::transformer::kv_cache> rq{tokens, l, p, nullptr};
        m.forward(std::span<const forward_request<cpu::transformer::kv_cache>>(&rq, 1), bidirectional_mask{}, logits);
        std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(float)));
        if (!out) throw file_error(out_path, "write failed");
        std::printf("dlm-dump-logits: %d rows x %zu logits of %s (weights %s, kernels %s) into %s\n", n, vocab, model_path.c_str(),
                    m.weight_type().c_str(), cpu::kernels().name, out_path.c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "dlm-dump-logits: error: %s\n", e.what());
        return 1;
    }
    return 0;
}
