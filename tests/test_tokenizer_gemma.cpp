// Tests of DiffusionGemma's (Gemma 4's) tokenizer and chat template. The fixtures under
// data/tokenizer_gemma/ were written by tools/make_gemma_tokenizer_fixtures.py from the real Gemma 4
// vocabulary (262,144 tokens, 514,906 merges) with the HF tokenizers library and transformers as the
// reference; tokenizer.json is that vocabulary pruned to what the samples need, with its real ids.
#include <doctest/doctest.h>

#include <sys/resource.h>

#include <chrono>
#include <fstream>
#include <utility>
#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dlm/io/chat_template.hpp"
#include "dlm/io/tokenizer.hpp"
#include "dlm/io/unicode.hpp"
#include "io_test_util.hpp"
#include "tokenizer_test_util.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_tokenizer_gemma {

using dlm::token_id;
using dlm::io::tokenizer;
using dlm_test::show;
using nlohmann::json;

namespace {

const std::filesystem::path data_dir = std::filesystem::path(DLM_TEST_DATA) / "tokenizer_gemma";

const json& source() {
    static const json j = dlm_test::read_json(data_dir / "source.json");
    return j;
}

/// The pruned real tokenizer.json with every id it leaves out, up to the full vocabulary's size,
/// taken by a filler token that no text forms (no merge makes it, and it is not one character).
json filled_json() {
    json j = dlm_test::read_json(data_dir / "tokenizer.json");
    const auto size = source().at("vocab_size").get<std::size_t>();
    std::vector<bool> used(size, false);
    for (const auto& [token, id] : j["model"]["vocab"].items()) used.at(id.get<std::size_t>()) = true;
    for (std::size_t id = 0; id < size; ++id)
        if (!used[id]) j["model"]["vocab"]["<dlm_filler_" + std::to_string(id) + ">"] = id;
    return j;
}

const tokenizer& gemma() {
    static const tokenizer tok = tokenizer::parse(filled_json(), "tokenizer_gemma/tokenizer.json (filled)");
    return tok;
}

const std::vector<json>& cases() {
    static const std::vector<json> all = dlm_test::read_jsonl(data_dir / "cases.jsonl");
    return all;
}

/// Counts, over the fixture lines that `has` `key`, those where `check` fails (printing the first few).
template <class Check>
void count_mismatches(const char* key, const char* what, Check check) {
    std::size_t checked = 0, wrong = 0;
    for (const json& c : cases()) {
        if (!c.contains(key)) continue;
        ++checked;
        if (const std::string diff = check(c); !diff.empty() && ++wrong <= 8) MESSAGE(diff);
    }
    MESSAGE(checked << " " << std::string(what) << ", " << wrong << " differ from the reference");
    CHECK(checked > 0);
    CHECK(wrong == 0);
}

std::string compare_ids(const std::string& input, const std::vector<token_id>& want, const std::vector<token_id>& got) {
    if (want == got) return {};
    return "input " + json(dlm::io::detail::to_valid_utf8(input)).dump() + "\n  expected " + show(want) + "\n  got      " + show(got);
}

std::string compare_text(const std::vector<token_id>& ids, const json& c) {
    const std::string out = gemma().decode(ids), out_skip = gemma().decode(ids, true);
    if (out == c["out"].get<std::string>() && out_skip == c["out_skip"].get<std::string>()) return {};
    return "ids " + show(ids) + "\n  expected " + c["out"].dump() + " / " + c["out_skip"].dump() + "\n  got      " + json(out).dump() +
           " / " + json(out_skip).dump();
}

std::string input_of(const json& c) {
    return c.contains("text") ? c["text"].get<std::string>() : dlm_test::from_hex(c["hex"].get<std::string>());
}

}  // namespace

TEST_CASE("gemma tokenizer: the real vocabulary's tokens keep their ids, and control tokens are special") {
    const tokenizer& tok = gemma();
    CHECK(tok.vocab_size() == source().at("vocab_size").get<dlm::index_t>());
    const json file = dlm_test::read_json(data_dir / "tokenizer.json");
    std::size_t special = 0;
    for (const json& t : file["added_tokens"]) {
        const auto content = t["content"].get<std::string>();
        INFO("added token " << content);
        CHECK(tok.token_to_id(content) == t["id"].get<token_id>());
        CHECK(tok.id_to_token(t["id"].get<token_id>()) == content);
        CHECK(tok.is_special(t["id"].get<token_id>()) == t["special"].get<bool>());
        special += t["special"].get<bool>();
    }
    CHECK(special > 0);
    CHECK(special < file["added_tokens"].size());  // the tool-call and channel markers are not special
    for (int b = 0; b < 256; ++b) {  // byte_fallback needs all 256 byte tokens
        static constexpr char hex[] = "0123456789ABCDEF";
        CHECK(tok.token_to_id(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">").has_value());
    }
}

TEST_CASE("gemma tokenizer: encoding the sample texts, with and without <bos>, gives the reference's ids") {
    count_mismatches("ids", "texts encoded", [](const json& c) {
        const std::string input = input_of(c);
        std::string diff = compare_ids(input, c["ids"].get<std::vector<token_id>>(), gemma().encode(input));
        if (diff.empty()) diff = compare_ids(input, c["ids_bos"].get<std::vector<token_id>>(), gemma().encode(input, true));
        return diff;
    });
}

TEST_CASE("gemma tokenizer: decoding, with and without skip_special_tokens, gives the reference's text") {
    count_mismatches("ids", "encoded texts decoded", [](const json& c) { return compare_text(c["ids"].get<std::vector<token_id>>(), c); });
    count_mismatches("decode", "random id sequences decoded (byte tokens, markers, unknown ids)",
                     [](const json& c) { return compare_text(c["decode"].get<std::vector<token_id>>(), c); });
}

namespace {

/// A tokenizer.json with Gemma 4's pipeline and exactly `size` tokens, as text: <pad> <eos> <bos>
/// <unk>, the 256 byte tokens, ▁, 128 one-character tokens (Yi syllables), their 16,384 pairs, and
/// triples up to `size`, each made by two merges (xy + z and x + yz): about as many merges as the real
/// vocabulary's 514,906. `merges` is set to their number.
std::string synthetic_json(std::size_t size, std::size_t& merges) {
    const json file = dlm_test::read_json(data_dir / "tokenizer.json");
    std::vector<std::string> chars(128);
    for (std::size_t i = 0; i < chars.size(); ++i) dlm::io::detail::append_utf8(chars[i], static_cast<char32_t>(0xA000 + i));
    std::string vocab, pairs;
    std::size_t id = 0;
    const auto add = [&](const std::string& token) {
        vocab += (id ? ",\"" : "\"") + token + "\":" + std::to_string(id);
        ++id;
    };
    const auto merge = [&](const std::string& a, const std::string& b) {
        pairs += (pairs.empty() ? "[\"" : ",[\"") + a + "\",\"" + b + "\"]";
    };
    for (const char* t : {"<pad>", "<eos>", "<bos>", "<unk>"}) add(t);
    for (int b = 0; b < 256; ++b) {
        static constexpr char hex[] = "0123456789ABCDEF";
        add(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
    }
    add("\xE2\x96\x81");  // ▁
    for (const auto& c : chars) add(c);
    for (const auto& x : chars)
        for (const auto& y : chars) add(x + y), merge(x, y);
    for (std::size_t t = 0; t < size; ++t) {  // each pass adds one token (id counts them): stop at size
        if (id >= size) break;
        const std::string &x = chars[t / (128 * 128)], &y = chars[t / 128 % 128], &z = chars[t % 128];
        add(x + y + z), merge(x + y, z), merge(x, y + z);
    }
    merges = 128 * 128 + 2 * (size - 4 - 256 - 1 - 128 - 128 * 128);
    return "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":2,\"content\":\"<bos>\",\"special\":true,\"normalized\":false}],"
           "\"normalizer\":" + file["normalizer"].dump() + ",\"pre_tokenizer\":" + file["pre_tokenizer"].dump() +
           ",\"post_processor\":" + file["post_processor"].dump() + ",\"decoder\":" + file["decoder"].dump() +
           ",\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"fuse_unk\":true,\"byte_fallback\":true,\"vocab\":{" + vocab +
           "},\"merges\":[" + pairs + "]}}";
}

/// The resident and peak resident memory of this process in KiB (Linux), or -1 where unknown.
std::pair<long, long> memory_kib() {
    std::ifstream in("/proc/self/status");
    long rss = -1, peak = -1;
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("VmRSS:", 0) == 0) rss = std::stol(line.substr(6));
        if (line.rfind("VmHWM:", 0) == 0) peak = std::stol(line.substr(6));
    }
    return {rss, peak};
}

}  // namespace

TEST_CASE("gemma tokenizer: a 262,144-token vocabulary with half a million merges loads in bounded time and memory") {
    const auto size = source().at("vocab_size").get<std::size_t>();
    dlm_test::temp_dir dir;
    std::size_t merges = 0;
    dlm_test::write_text(dir / "tokenizer.json", synthetic_json(size, merges));
    const auto before = memory_kib();
    const auto t0 = std::chrono::steady_clock::now();
    const tokenizer tok = tokenizer::load(dir / "tokenizer.json");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto after = memory_kib();
    const double grown_mib = static_cast<double>(after.second - before.first) / 1024.0;
    MESSAGE(size << " tokens and " << merges << " merges (" << std::filesystem::file_size(dir / "tokenizer.json") / 1000000
                 << " MB of JSON) loaded in " << seconds << " s; peak memory " << grown_mib << " MiB above the resident size before");
    CHECK(tok.vocab_size() == static_cast<dlm::index_t>(size));
    CHECK(merges > 500000);
#ifdef NDEBUG
    CHECK(seconds < 30.0);  // generous: under a second in a Release build on the 2-core development machine
#else
    CHECK(seconds < 180.0);  // a Debug build with the sanitizers took 18 s there
#endif
    if (before.first >= 0 && after.second >= 0) CHECK(grown_mib < 1024.0);  // 167 MiB measured, 346 with the sanitizers

    // A long text of the synthetic characters (one BPE word: no pre-tokenizer split applies) merges
    // into pairs and triples and decodes back.
    std::string text;
    for (int i = 0; i < 30000; ++i) dlm::io::detail::append_utf8(text, static_cast<char32_t>(0xA000 + (i * 37 + i / 128) % 128));
    const auto t1 = std::chrono::steady_clock::now();
    const auto ids = tok.encode(text);
    MESSAGE("30,000 characters encoded into " << ids.size() << " ids in "
                                              << std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count() << " s");
    CHECK(ids.size() < 20000);  // merged (30,000 ids without any merge)
    CHECK(tok.decode(ids) == text);
}

TEST_CASE("gemma chat template: conversations with and without the generation prompt, thinking off and on, render as transformers renders them") {
    const json chats = dlm_test::read_json(data_dir / "chat.json");
    std::size_t checked = 0, thinking = 0;
    for (const json& c : chats["conversations"]) {
        const auto messages = dlm_test::chat_messages(c);
        const bool prompt = c["add_generation_prompt"].get<bool>();
        const bool think = c.value("enable_thinking", false);
        const std::string text = dlm::io::apply_chat_template(dlm::io::chat_format::gemma4, messages, prompt,
                                                              think ? dlm::io::chat_thinking::on : dlm::io::chat_thinking::template_default);
        INFO("conversation " << c["messages"].dump() << ", add_generation_prompt " << prompt << ", enable_thinking " << think);
        CHECK(text == c["text"].get<std::string>());
        CHECK(show(gemma().encode(text)) == show(c["ids"].get<std::vector<token_id>>()));  // markers are single ids
        ++checked;
        thinking += think ? 1 : 0;
    }
    CHECK(checked >= 2);
    CHECK(thinking >= 2);
    const json& first = chats["conversations"][0];  // the system + user + assistant + user conversation
    REQUIRE(first["messages"][0]["role"] == "system");
    CHECK(first["add_generation_prompt"].get<bool>());
}

TEST_CASE("gemma chat template: Gemma 4's template is recognised in a model folder, Gemma 3's is not taken for it") {
    using dlm::io::chat_format;
    dlm_test::temp_dir dir;
    const std::string gemma4 =
        "{{- bos_token -}}{%- for message in messages -%}{%- set role = 'model' if message['role'] == 'assistant' else "
        "message['role'] -%}{{- '<|turn>' + role + '\n' }}{{- message['content'] | trim -}}{{- '<turn|>\n' -}}{%- endfor -%}"
        "{%- if add_generation_prompt -%}{{- '<|turn>model\n' -}}{%- endif -%}";
    const std::string gemma3 = "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + message['role'] + '\n' + "
                               "message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}";
    CHECK(dlm::io::chat_format_of_template(gemma4) == chat_format::gemma4);
    CHECK(dlm::io::chat_format_of_template(gemma3) == chat_format::unsupported);  // written by no format: refused, not misread
    dlm_test::write_text(dir / "chat_template.jinja", gemma4);
    CHECK(dlm::io::detect_chat_format(dir.path()) == chat_format::gemma4);
    dlm_test::write_text(dir / "tokenizer_config.json", json{{"chat_template", gemma4}, {"bos_token", "<bos>"}}.dump());
    CHECK(dlm::io::detect_chat_format(dir.path()) == chat_format::gemma4);
    // An empty conversation: <bos> and the generation prompt (transformers refuses one).
    CHECK(dlm::io::apply_chat_template(chat_format::gemma4, {}) == "<bos><|turn>model\n<|channel>thought\n<channel|>");
    CHECK(dlm::io::apply_chat_template(chat_format::gemma4, {}, true, dlm::io::chat_thinking::on) ==
          "<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>model\n");
}

}  // namespace test_tokenizer_gemma
