// Tests of dlm::io::tokenizer and the chat templates. The parity fixtures under data/tokenizer/ were
// written by tools/make_tokenizer_fixtures.py with the HF tokenizers library (the reference).
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dlm/io/chat_template.hpp"
#include "dlm/io/tokenizer.hpp"
#include "io_test_util.hpp"
#include "tokenizer_test_util.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_tokenizer {

using dlm::token_id;
using dlm::io::tokenizer;
using dlm_test::from_hex;
using dlm_test::read_json;
using dlm_test::show;
using nlohmann::json;

namespace {

const std::filesystem::path data_dir = std::filesystem::path(DLM_TEST_DATA) / "tokenizer";

const json& base_json() {
    static const json j = read_json(data_dir / "tokenizer.json");
    return j;
}

/// The tokenizer.json of a fixture variant: the base file with the variant's stages swapped in.
json variant_json(const std::string& name) {
    if (name == "qwen2") return base_json();
    static const json variants = read_json(data_dir / "variants.json");
    json j = base_json();
    const json& v = variants.at(name);
    for (const char* key : {"normalizer", "pre_tokenizer", "post_processor", "decoder"}) j[key] = v.at(key);
    for (const auto& [token, id] : v.at("vocab_extra").items()) j["model"]["vocab"][token] = id;
    for (const auto& [key, value] : v.at("model").items()) j["model"][key] = value;
    return j;
}

const tokenizer& variant(const std::string& name) {
    static std::map<std::string, tokenizer> cache;
    auto it = cache.find(name);
    if (it == cache.end()) it = cache.emplace(name, tokenizer::parse(variant_json(name), name)).first;
    return it->second;
}

const std::vector<json>& cases() {
    static const std::vector<json> all = dlm_test::read_jsonl(data_dir / "cases.jsonl");
    return all;
}

/// Encodes every text case of the fixture with `tok` (default: the case's variant) and counts the
/// lines whose ids or round-trip text differ from the reference.
void check_encode_parity(const std::function<const tokenizer&(const json&)>& pick, const std::function<bool(const json&)>& filter) {
    std::size_t checked = 0, wrong = 0;
    for (const json& c : cases()) {
        if (!(c.contains("text") || c.contains("hex")) || !filter(c)) continue;
        const tokenizer& tok = pick(c);
        const std::string text = c.contains("text") ? c["text"].get<std::string>() : from_hex(c["hex"].get<std::string>());
        const auto expected = c["ids"].get<std::vector<token_id>>();
        const auto ids = tok.encode(text, c.value("special", false));
        ++checked;
        std::string expected_text = dlm::io::detail::to_valid_utf8(text);
        if (c.contains("decoded")) expected_text = c["decoded"].get<std::string>();
        else if (c.contains("nfc")) expected_text = dlm::io::detail::nfc_utf8(expected_text);
        const std::string decoded = c.contains("text") ? tok.decode(expected) : expected_text;
        if (ids != expected || decoded != expected_text) {
            if (++wrong <= 8)
                MESSAGE("variant " << c["v"].get<std::string>() << ", input " << json(dlm::io::detail::to_valid_utf8(text)).dump()
                                   << "\n  expected ids " << show(expected) << "\n  got      ids " << show(ids)
                                   << "\n  expected text " << json(expected_text).dump() << "\n  got      text " << json(decoded).dump());
        }
    }
    MESSAGE(checked << " lines encoded, " << wrong << " differ from the reference");
    CHECK(checked > 0);
    CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("tokenizer: every fixture line encodes and decodes as the reference does") {
    check_encode_parity([](const json& c) -> const tokenizer& { return variant(c["v"].get<std::string>()); },
                        [](const json&) { return true; });
}

TEST_CASE("tokenizer: decoding random ids (invalid UTF-8, special tokens, unknown ids) matches the reference") {
    std::size_t checked = 0, wrong = 0;
    for (const json& c : cases()) {
        if (!c.contains("decode")) continue;
        const tokenizer& tok = variant(c["v"].get<std::string>());
        const auto ids = c["decode"].get<std::vector<token_id>>();
        const std::string out = tok.decode(ids), out_skip = tok.decode(ids, true);
        ++checked;
        if (out != c["out"].get<std::string>() || out_skip != c["out_skip"].get<std::string>()) {
            if (++wrong <= 8)
                MESSAGE("variant " << c["v"].get<std::string>() << ", ids " << show(ids) << "\n  expected " << c["out"].dump()
                                   << " / " << c["out_skip"].dump() << "\n  got      " << json(out).dump() << " / "
                                   << json(out_skip).dump());
        }
    }
    MESSAGE(checked << " id sequences decoded, " << wrong << " differ from the reference");
    CHECK(checked > 0);
    CHECK(wrong == 0);
}

TEST_CASE("tokenizer: merges written as [left, right] pairs read the same as \"left right\" strings") {
    json j = base_json();
    REQUIRE(j["model"]["merges"][0].is_string());
    for (auto& m : j["model"]["merges"]) {
        const std::string s = m.get<std::string>();
        m = json::array({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)});
    }
    const tokenizer pairs = tokenizer::parse(j, "pairs");
    check_encode_parity([&](const json&) -> const tokenizer& { return pairs; },
                        [](const json& c) { return c["v"] == "qwen2"; });
}

TEST_CASE("tokenizer: special and added tokens") {
    const tokenizer tok = tokenizer::load(data_dir);  // the folder form
    const token_id mask = tok.token_to_id("<|mdm_mask|>").value();
    const token_id im_start = tok.token_to_id("<|im_start|>").value();
    const token_id im_end = tok.token_to_id("<|im_end|>").value();
    CHECK(tok.id_to_token(mask) == "<|mdm_mask|>");
    CHECK(tok.is_special(mask));
    CHECK_FALSE(tok.is_special(tok.token_to_id("<think>").value()));
    CHECK_FALSE(tok.token_to_id("<|no such token|>").has_value());
    CHECK(tok.token_to_id("Ġthe").has_value());  // model vocabulary, byte-level alphabet
    CHECK(tok.vocab_size() == static_cast<dlm::index_t>(tok.token_to_id("<|fim|>").value() + 1));

    // Special tokens in running text are single ids, wherever they sit.
    const auto ids = tok.encode("<|im_start|>user\nHi<|mdm_mask|><|mdm_mask|>!<|im_end|>");
    CHECK(ids.front() == im_start);
    CHECK(ids.back() == im_end);
    CHECK(std::count(ids.begin(), ids.end(), mask) == 2);
    CHECK(tok.decode(ids) == "<|im_start|>user\nHi<|mdm_mask|><|mdm_mask|>!<|im_end|>");
    CHECK(tok.decode(ids, true) == "user\nHi!");
    // A near miss is plain text.
    const auto near = tok.encode("<|mdm_mask|");
    CHECK(std::find(near.begin(), near.end(), mask) == near.end());
    // The Qwen2-format file has no special-token post-processor: add_special changes nothing.
    CHECK(tok.encode("hi there", true) == tok.encode("hi there"));
    // The Llama-3-style variant prepends its BOS.
    const tokenizer& llama = variant("llama3");
    CHECK(llama.encode("hi", true).front() == llama.token_to_id("<|startoftext|>").value());

    dlm_test::expect_error<dlm::invalid_parameter>([&] { (void)tok.id_to_token(tok.vocab_size()); }, {"id", "not a token"});
    dlm_test::expect_error<dlm::invalid_parameter>([&] { (void)tok.id_to_token(-1); }, {"id"});
    CHECK(tok.decode(std::vector<token_id>{-5, tok.vocab_size() + 7}).empty());  // unknown ids are skipped
}

TEST_CASE("tokenizer: a model path transformer::load takes reads its folder's tokenizer; a .gguf path says which call reads its own") {
    dlm_test::temp_dir dir;
    std::filesystem::copy_file(data_dir / "tokenizer.json", dir / "tokenizer.json");
    dlm_test::write_text(dir / "config.json", "{}");
    dlm_test::write_text(dir / "model.safetensors", "");
    const tokenizer folder = tokenizer::load(dir.path());
    for (const char* file : {"config.json", "model.safetensors"}) {
        CAPTURE(file);
        const tokenizer via = tokenizer::load(dir / file);
        CHECK(via.vocab_size() == folder.vocab_size());
        CHECK(via.encode("Hello <|mdm_mask|> world") == folder.encode("Hello <|mdm_mask|> world"));
    }
    CHECK(tokenizer::load(dir / "tokenizer.json").vocab_size() == folder.vocab_size());  // the file itself, as before
    dlm_test::expect_error<dlm::file_error>([&] { (void)tokenizer::load(dir / "model.gguf"); }, {"model.gguf", "is a GGUF file", "io::gguf_tokenizer"});
}

TEST_CASE("tokenizer: a folder with vocab.json and merges.txt (Dream's slow Qwen2 tokenizer)") {
    dlm_test::temp_dir dir;
    const json& base = base_json();
    dlm_test::write_text(dir / "vocab.json", base["model"]["vocab"].dump());
    std::string merges = "#version: 0.2\n";
    for (const auto& m : base["model"]["merges"]) merges += m.get<std::string>() + "\n";
    dlm_test::write_text(dir / "merges.txt", merges);
    json config = {{"tokenizer_class", "DreamTokenizer"}, {"added_tokens_decoder", json::object()}};
    for (const auto& t : base["added_tokens"]) {
        json entry = t;
        entry.erase("id");
        config["added_tokens_decoder"][std::to_string(t["id"].get<int>())] = entry;
    }
    dlm_test::write_text(dir / "tokenizer_config.json", config.dump());
    const tokenizer slow = tokenizer::load(dir.path());
    // The slow tokenizer normalizes before it looks for added tokens; lines where that order matters
    // (a combining mark next to an added token) are left out.
    check_encode_parity([&](const json&) -> const tokenizer& { return slow; },
                        [](const json& c) { return c["v"] == "qwen2" && c.contains("text") && c["text"].get<std::string>().find("caf") == std::string::npos; });

    config["tokenizer_class"] = "GPT2Tokenizer";
    dlm_test::write_text(dir / "tokenizer_config.json", config.dump());
    dlm_test::expect_error<dlm::file_error>([&] { (void)tokenizer::load(dir.path()); },
                                            {"tokenizer_config.json", "GPT2Tokenizer", "no tokenizer.json"});
}

TEST_CASE("tokenizer: errors name the file and what is wrong") {
    using dlm_test::expect_error;
    dlm_test::temp_dir dir;
    expect_error<dlm::file_error>([&] { (void)tokenizer::load(dir / "missing.json"); }, {"missing.json", "no such file"});
    expect_error<dlm::file_error>([&] { (void)tokenizer::load(dir.path()); }, {"tokenizer.json", "no such file"});

    dlm_test::write_text(dir / "bad.json", "{\"model\": {\"type\": \"BPE\", ");
    expect_error<dlm::file_error>([&] { (void)tokenizer::load(dir / "bad.json"); }, {"bad.json", "not valid JSON"});

    const auto refused = [&](const char* name, const std::function<void(json&)>& edit, std::initializer_list<std::string_view> parts) {
        json j = base_json();
        edit(j);
        dlm_test::write_text(dir / name, j.dump());
        std::vector<std::string_view> all(parts);
        all.push_back(name);
        const std::string message = expect_error<dlm::file_error>([&] { (void)tokenizer::load(dir / name); }, {});
        for (const auto part : all) {
            INFO("expected in the message: " << part);
            CHECK(message.find(part) != std::string::npos);
        }
    };
    refused("wordpiece.json", [](json& j) { j["model"]["type"] = "WordPiece"; }, {"model type 'WordPiece'", "not supported"});
    refused("metaspace.json", [](json& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"}}; },
            {"pre_tokenizer", "Metaspace", "not supported"});
    refused("nfkc.json", [](json& j) { j["normalizer"] = {{"type", "NFKC"}}; }, {"normalizer", "NFKC"});
    refused("digits_regex.json", [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\d+|\\s+"; },
            {"pre_tokenizer.pretokenizers[0].pattern", "\\d"});
    refused("lookbehind.json", [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(?<=a)b"; },
            {"pattern", "group construct"});
    // Patterns that overflowed the parser's stack (groups 100,000 deep in 400 KB) or asked for
    // gigabytes as they compiled (counted repetitions that multiply, 35 bytes) are refused.
    const auto regex = [](std::string pattern) {
        return [pattern = std::move(pattern)](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = pattern; };
    };
    std::string deep;
    for (int i = 0; i < 100000; ++i) deep += "(?:";
    deep += "a" + std::string(100000, ')');
    refused("deep_groups.json", regex(deep), {"pattern", "groups nested more than 64 deep"});
    try {  // the message quotes the 400 KB pattern cut
        const dlm::io::detail::pattern_regex r(deep);
        FAIL("no error");
    } catch (const dlm::io::detail::pattern_error& e) {
        CHECK(std::string_view(e.what()).size() < 300);
    }
    refused("multiplied_counts.json", regex("(?:(?:(?:ab){1000}){1000}){1000}"), {"pattern", "compiles to more than 262144 instructions"});
    refused("stacked_quantifiers.json", regex("a{2}{2}{2}{2}{2}"), {"pattern", "more than 4 quantifiers stacked on one atom"});
    refused("deep_sequence.json", [](json& j) {  // Sequences of pre-tokenizers 200 deep: past the JSON depth bound
        json inner = j["pre_tokenizer"];
        for (int i = 0; i < 200; ++i) inner = json{{"type", "Sequence"}, {"pretokenizers", json::array({inner})}};
        j["pre_tokenizer"] = inner;
    }, {"nests arrays and objects more than 128 deep"});
    refused("bad_merge.json", [](json& j) { j["model"]["merges"][0] = "nosuchtoken Ġ"; }, {"merges", "missing from the vocab"});
    refused("dropout.json", [](json& j) { j["model"]["dropout"] = 0.1; }, {"dropout", "not supported"});
    refused("single_word.json", [](json& j) { j["added_tokens"][0]["single_word"] = true; }, {"added_tokens[0]", "single_word"});
    refused("no_model.json", [](json& j) { j.erase("model"); }, {"missing key 'model'"});
    refused("bad_id.json", [](json& j) { j["model"]["vocab"]["Ġthe"] = "x"; }, {"vocab", "expected an id"});
    refused("decoder.json", [](json& j) { j["decoder"] = {{"type", "WordPiece"}}; }, {"decoder", "WordPiece"});
    // An id far past the number of tokens would size the id tables (4.2 GB at 134,217,728; a
    // std::bad_alloc further on): refused, naming the file, the token and the id, before any of it.
    refused("huge_id.json", [](json& j) { j["model"]["vocab"]["ow"] = 134217728; }, {"token \"ow\" has id 134217728", "lists 2014 tokens"});
    refused("largest_id.json", [](json& j) { j["model"]["vocab"]["ow"] = 2147483646; }, {"has id 2147483646"});
    const tokenizer gap = tokenizer::parse([] {  // a hole below the bound still loads
        json j = base_json();
        j["model"]["vocab"]["ow"] = 3014;
        return j;
    }(), "gap");
    CHECK(gap.token_to_id("ow") == 3014);
}

TEST_CASE("tokenizer: long inputs stay fast") {
    const tokenizer& tok = variant("qwen2");
    std::string text;
    for (int i = 0; i < 2000; ++i) text += "The diffusion model unmasks 128 tokens per block; 東京で会いましょう 😀\n";
    text += std::string(20000, ' ') + "x" + std::string(20000, '\t');  // long whitespace runs (backtracking)
    const auto t0 = std::chrono::steady_clock::now();
    const auto ids = tok.encode(text);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MESSAGE(text.size() << " bytes encoded into " << ids.size() << " ids in " << seconds << " s");
    CHECK(tok.decode(ids) == text);
    CHECK(seconds < 20.0);  // generous: a pathological (quadratic) path would take far longer
}

TEST_CASE("tokenizer: a bounded encode gives encode's ids within its bound, and nothing past it, the post-processor's ids counted") {
    const std::string text = "Hello <|endoftext|> world, 東京 123 😀\n  x";
    for (const char* name : {"qwen2", "llama3", "gpt2", "spm_byte_fallback", "unk_fused"}) {
        CAPTURE(name);
        const tokenizer& tok = variant(name);
        for (const bool special : {false, true}) {
            CAPTURE(special);
            const std::vector<token_id> ids = tok.encode(text, special);
            REQUIRE(ids.size() > 2);
            CHECK(tok.encode_at_most(text, ids.size(), special) == ids);
            CHECK(tok.encode_at_most(text, ids.size() + 100, special) == ids);
            CHECK_FALSE(tok.encode_at_most(text, ids.size() - 1, special).has_value());
            CHECK_FALSE(tok.encode_at_most(text, 0, special).has_value());
        }
    }
    // gpt2's post-processor wraps a text in <|startoftext|> ... <|endoftext|>: both count.
    const tokenizer& gpt2 = variant("gpt2");
    REQUIRE(gpt2.encode("hi", true).size() == gpt2.encode("hi").size() + 2);
    CHECK_FALSE(gpt2.encode_at_most("hi", gpt2.encode("hi").size() + 1, true).has_value());
    CHECK(gpt2.encode_at_most("", 2, true) == gpt2.encode("", true));
    CHECK_FALSE(gpt2.encode_at_most("", 1, true).has_value());
}

TEST_CASE("tokenizer: a bounded encode of a long text is refused past its bound, as the whole encode finds it too long") {
    // 4 MiB of 1,000-letter words (none cached: longer than the word cache takes), whose BPE merges
    // cost far more than the linear passes before the words (UTF-8 repair, the added-token split).
    const tokenizer& tok = variant("qwen2");
    std::string text;
    std::uint32_t x = 12345;
    while (text.size() < (std::size_t{4} << 20)) {
        for (int i = 0; i < 1000; ++i) {
            x = x * 1664525u + 1013904223u;
            text += static_cast<char>('a' + (x >> 16) % 26);
        }
        text += ' ';
    }
    const auto time = [](auto&& f) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    std::optional<std::vector<token_id>> bounded;
    std::vector<token_id> whole;
    const double bounded_s = time([&] { bounded = tok.encode_at_most(text, 4096); });
    const double whole_s = time([&] { whole = tok.encode(text); });
    MESSAGE(text.size() << " bytes: " << whole.size() << " ids in " << whole_s << " s; refused past 4096 ids in " << bounded_s << " s");
    CHECK(whole.size() > 4096);
    CHECK_FALSE(bounded.has_value());
    // How much sooner it stops is a benchmark's figure, not a test's (dlm-bench-tokenizer, docs/server.md).
}

TEST_CASE("tokenizer: BPE merges one 1 MiB word in near-linear time, giving the rank-order merges' ids") {
    // a, aa, a^4, ..., a^1024, each merged from two of the one before: rescanning the word for the best
    // pair after each merge (the textbook loop) would take ~10^12 steps on a 2^20 + 3-letter word; the
    // heap of candidate pairs takes n log n. Merging leftmost first by rank, the word becomes 1024 tokens
    // of a^1024 and then the binary digits of the remainder 3, largest first: aa, a.
    json j = {{"model", {{"type", "BPE"}, {"vocab", json::object()}, {"merges", json::array()}}}};
    std::string piece = "a";
    for (int k = 0; k <= 10; ++k, piece += piece) {
        j["model"]["vocab"][piece] = k;
        if (k < 10) j["model"]["merges"].push_back(json::array({piece, piece}));
    }
    const tokenizer tok = tokenizer::parse(j, "doubling merges");
    const std::size_t n = (std::size_t{1} << 20) + 3;
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<token_id> ids = tok.encode(std::string(n, 'a'));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    MESSAGE(n << " letters in one word merged into " << ids.size() << " ids in " << seconds << " s");
    std::vector<token_id> expected(n >> 10, 10);
    for (int k = 9; k >= 0; --k)
        if ((n >> k) & 1) expected.push_back(k);
    CHECK(ids == expected);
    CHECK(seconds < 20.0);  // about 0.1 s here; the quadratic loop would take hours
}

TEST_CASE("chat templates: the exact strings of LLaDA-8B-Instruct's and Dream-v0-Instruct-7B's templates") {
    using dlm::io::apply_chat_template;
    using dlm::io::chat_format;
    using dlm::io::chat_message;
    // Expected strings: the two templates rendered with jinja2 (trim_blocks, lstrip_blocks), as
    // transformers renders them.
    const std::vector<chat_message> one{{"user", "What is 2+2?"}};
    CHECK(apply_chat_template(chat_format::llada, one) ==
          "<|startoftext|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
          "<|start_header_id|>assistant<|end_header_id|>\n\n");
    CHECK(apply_chat_template(chat_format::chatml, one) ==
          "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
          "<|im_start|>assistant\n");
    CHECK(apply_chat_template(chat_format::chatml, one, false) ==
          "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n");
    // Neither template has a thinking mode: enable_thinking changes nothing (Jinja ignores the variable).
    for (const chat_format f : {chat_format::llada, chat_format::chatml, chat_format::none})
        CHECK(apply_chat_template(f, one, true, dlm::io::chat_thinking::on) == apply_chat_template(f, one));

    const std::vector<chat_message> multi{{"system", "  Be brief.\n"},
                                          {"user", "\tHi there \u3000"},
                                          {"assistant", "Hello!"},
                                          {"user", "Tell me a joke.\x1c"}};
    CHECK(apply_chat_template(chat_format::llada, multi) ==
          "<|startoftext|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user"
          "<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
          "<|start_header_id|>user<|end_header_id|>\n\nTell me a joke.<|eot_id|><|start_header_id|>assistant"
          "<|end_header_id|>\n\n");
    CHECK(apply_chat_template(chat_format::chatml, multi) ==
          "<|im_start|>system\n  Be brief.\n<|im_end|>\n<|im_start|>user\n\tHi there \u3000<|im_end|>\n<|im_start|>"
          "assistant\nHello!<|im_end|>\n<|im_start|>user\nTell me a joke.\x1c<|im_end|>\n<|im_start|>assistant\n");
    // LLaDA's template always ends on the assistant header; dlm leaves it out when asked to.
    CHECK(apply_chat_template(chat_format::llada, multi, false) ==
          "<|startoftext|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user"
          "<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
          "<|start_header_id|>user<|end_header_id|>\n\nTell me a joke.<|eot_id|>");

    CHECK(apply_chat_template(chat_format::llada, {}) == "<|start_header_id|>assistant<|end_header_id|>\n\n");
    CHECK(apply_chat_template(chat_format::chatml, {}) == "<|im_start|>assistant\n");
    CHECK(apply_chat_template(chat_format::none, multi) == "  Be brief.\n\n\n\tHi there \u3000\n\nHello!\n\nTell me a joke.\x1c");

    // The prompt tokenizes with the chat markers as single special tokens.
    const tokenizer& tok = variant("qwen2");
    const auto ids = tok.encode(apply_chat_template(chat_format::chatml, one));
    CHECK(std::count(ids.begin(), ids.end(), tok.token_to_id("<|im_start|>").value()) == 3);
}

TEST_CASE("chat templates: the format is detected from the model folder") {
    using dlm::io::chat_format;
    using dlm::io::detect_chat_format;
    dlm_test::temp_dir dir;
    const std::string llada =
        "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
        "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
        "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{{ '<|start_header_id|>assistant"
        "<|end_header_id|>\n\n' }}";
    const std::string chatml =
        "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
        "You are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
        "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
    CHECK(detect_chat_format(dir.path()) == chat_format::none);  // a base model: no template anywhere
    dlm_test::write_text(dir / "tokenizer_config.json", json{{"chat_template", llada}, {"bos_token", "<|startoftext|>"}}.dump());
    CHECK(detect_chat_format(dir.path()) == chat_format::llada);
    dlm_test::write_text(dir / "tokenizer_config.json", json{{"chat_template", chatml}}.dump());
    CHECK(detect_chat_format(dir.path()) == chat_format::chatml);
    dlm_test::write_text(dir / "tokenizer_config.json",
                         json{{"chat_template", json::array({json{{"name", "default"}, {"template", llada}}})}}.dump());
    CHECK(detect_chat_format(dir.path()) == chat_format::llada);
    dlm_test::write_text(dir / "tokenizer_config.json", json{{"add_bos_token", false}}.dump());
    CHECK(detect_chat_format(dir.path()) == chat_format::none);
    dlm_test::write_text(dir / "chat_template.jinja", chatml);
    CHECK(detect_chat_format(dir.path()) == chat_format::chatml);
    std::filesystem::remove(dir / "chat_template.jinja");  // read first, as transformers 5 reads it
    dlm_test::write_text(dir / "tokenizer_config.json", "{\"chat_template\": 3}");
    dlm_test::expect_error<dlm::file_error>([&] { (void)detect_chat_format(dir.path()); }, {"tokenizer_config.json", "chat_template"});
    dlm_test::expect_error<dlm::file_error>([&] { (void)detect_chat_format(dir / "nope"); }, {"nope"});
}

}  // namespace test_tokenizer
