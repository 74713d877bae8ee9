// dlm-bench-tokenizer — the time to tokenize adversarial text, as a hostile client could send it (a
// 1 MiB request body, a long -p): for each tokenizer and each text of --mib MiB, the whole encode and
// the encode bounded at --bound tokens (io::tokenizer::encode_at_most, what dlm-server, dlm-generate,
// dlm-eval and Python's text prompts use), best of --reps. The tokenizers: the shipped default
// model's (models/cdlm: Qwen2's pre-tokenizer regex, NFC), its vocabulary under Llama 3's and GPT-2's
// regexes (as a GGUF file's llama-bpe and gpt-2 name them), and a Gemma 4 vocabulary (tests/data's
// tiny DiffusionGemma GGUF: SentencePiece-style BPE with byte fallback, whose whole text is one word).
//
//   dlm-bench-tokenizer [--tokenizer PATH] [--pre NAME,...] [--mib N] [--bound N] [--reps N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <dlm/io/gguf.hpp>
#include <dlm/io/gguf_tokenizer.hpp>
#include <dlm/io/json_util.hpp>
#include <dlm/io/tokenizer.hpp>

#include "args.hpp"

namespace {

using namespace dlm;

const char* const usage_text =
    "usage: dlm-bench-tokenizer [--tokenizer PATH] [--pre NAME,...] [--mib N] [--bound N] [--reps N]\n"
    "  --tokenizer  a model folder, tokenizer.json or .gguf file (default: models/cdlm, and tests/data's\n"
    "               tiny DiffusionGemma GGUF for a Gemma 4 vocabulary)\n"
    "  --pre        also run the (byte-level) vocabulary under these pre-tokenizers of a GGUF file's\n"
    "               tokenizer.ggml.pre (qwen2, llama-bpe, gpt-2, bailingmoe; default with the default\n"
    "               tokenizers: llama-bpe,gpt-2)\n"
    "  --mib        MiB of each text (default 1: dlm-server's --max-body)\n"
    "  --bound      the bounded encode's token limit (default 4096)\n"
    "  --reps       encodes timed, the best kept (default 3)\n";

struct options {
    std::vector<std::string> tokenizers;
    std::vector<std::string> pre;
    std::size_t bytes = std::size_t{1} << 20;
    std::size_t bound = 4096;
    int reps = 3;
};

options parse(int argc, char** argv) {
    options o;
    bench::args a(argc, argv);
    bool pre_given = false;
    while (a.next()) {
        if (a.is("--tokenizer")) o.tokenizers.push_back(a.path());
        else if (a.is("--pre")) o.pre = a.names(), pre_given = true;
        else if (a.is("--mib")) o.bytes = a.integer<std::size_t>(1, 256) << 20;
        else if (a.is("--bound")) o.bound = a.integer<std::size_t>(0, std::size_t{1} << 30);
        else if (a.is("--reps")) o.reps = a.integer<int>(1, 100);
        else a.unknown();
    }
    for (const std::string& p : o.pre)
        if (!io::find_gguf_pretokenizer(p)) throw invalid_parameter("--pre", "'" + p + "' is not a pre-tokenizer name dlm knows the regex of");
    if (o.tokenizers.empty()) {
        o.tokenizers = {std::string(DLM_BENCH_MODELS_DIR) + "/cdlm", std::string(DLM_BENCH_TEST_DATA_DIR) + "/gguf/diffusion_gemma_tiny.bf16.gguf"};
        if (!pre_given) o.pre = {"llama-bpe", "gpt-2"};
    }
    return o;
}

/// The tokenizer.json of `path`: a .gguf file's rebuilt one, else the file (or the folder's tokenizer.json).
nlohmann::json tokenizer_json(const std::filesystem::path& path) {
    if (path.extension() == ".gguf") return io::gguf_tokenizer_json(io::gguf_file::open(path).header());
    const std::filesystem::path file = std::filesystem::is_directory(path) ? path / "tokenizer.json" : path;
    return io::detail::parse_json_strict(io::detail::read_text_file(file), file.string(), "tokenizer.json");
}

struct named_tokenizer {
    std::string name;
    io::tokenizer tok;
};

/// Each path's tokenizer as it is, then each byte-level one under each --pre regex.
std::vector<named_tokenizer> tokenizers(const options& o) {
    std::vector<named_tokenizer> out;
    for (const std::string& path : o.tokenizers) {
        const nlohmann::json j = tokenizer_json(path);
        const std::string name = std::filesystem::path(path).filename().string();
        out.push_back({name, io::tokenizer::parse(j, path)});
        const bool byte_level = j.contains("decoder") && j["decoder"].is_object() && j["decoder"].value("type", "") == "ByteLevel";
        if (!byte_level) continue;
        for (const std::string& pre : o.pre) {
            nlohmann::json v = j;
            io::set_gguf_pretokenizer(v, *io::find_gguf_pretokenizer(pre));
            out.push_back({name + " as " + pre, io::tokenizer::parse(v, path + " (pre-tokenizer " + pre + ")")});
        }
    }
    return out;
}

/// The adversarial texts, `bytes` long (a repeated character whole, never cut inside one).
std::vector<std::pair<std::string, std::string>> texts(std::size_t bytes) {
    std::mt19937 rng(7);
    const auto repeat = [&](const std::string& unit) {
        std::string s;
        s.reserve(bytes + unit.size());
        while (s.size() + unit.size() <= bytes) s += unit;
        return s;
    };
    const auto drawn = [&](const std::string& alphabet) {
        std::string s(bytes, ' ');
        for (char& c : s) c = alphabet[rng() % alphabet.size()];
        return s;
    };
    std::string random_bytes(bytes, '\0');
    for (char& c : random_bytes) c = static_cast<char>(rng() & 0xFF);
    return {{"one letter, no space", repeat("a")},
            {"random letters, no space", drawn("abcdefghijklmnopqrstuvwxyz")},
            {"random bytes (invalid UTF-8)", std::move(random_bytes)},
            {"digits", drawn("0123456789")},
            {"spaces", repeat(" ")},
            {"one emoji", repeat("\xF0\x9F\x98\x80")},
            {"combining accent U+0301", repeat("\xCC\x81")},
            {"English words (the usual case)", repeat("the quick brown fox jumps over a lazy dog ")}};
}

/// The best of `reps` runs of f, in seconds.
template <class F>
double best_of(int reps, F&& f) {
    double best = 1e300;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
}

}  // namespace

int main(int argc, char** argv) {
    return bench::run_main("dlm-bench-tokenizer", usage_text, [&] {
        const options o = parse(argc, argv);
        const std::vector<named_tokenizer> toks = tokenizers(o);
        const auto inputs = texts(o.bytes);
        std::printf("dlm tokenizer benchmark: %zu MiB texts, best of %d; bounded: encode_at_most(text, %zu)\n", o.bytes >> 20, o.reps, o.bound);
        std::printf("%-31s %-31s %9s %10s %9s %12s\n", "tokenizer", "text", "ids", "whole (s)", "MiB/s", "bounded (s)");
        for (const named_tokenizer& t : toks) {
            for (const auto& input : inputs) {  // no structured binding: clang 14 cannot capture one in the lambdas below
                const auto& name = input.first;
                const auto& text = input.second;
                std::size_t ids = 0;
                const double whole = best_of(o.reps, [&] { ids = t.tok.encode(text).size(); });
                std::optional<std::vector<token_id>> bounded;
                const double cut = best_of(o.reps, [&] { bounded = t.tok.encode_at_most(text, o.bound); });
                std::printf("%-31s %-31s %9zu %10.3f %9.1f %12.4f%s\n", t.name.c_str(), name.c_str(), ids, whole,
                            static_cast<double>(text.size()) / (1 << 20) / whole, cut, bounded ? " (within)" : "");
            }
        }
        return 0;
    });
}
