// Fuzz target: a fixed tokenizer (tests/data/tokenizer/tokenizer.json: Qwen2's pipeline, NFC, the
// Qwen2 split regex, byte-level BPE) encoding and decoding arbitrary bytes.
//
// Input: byte 0 picks the options (bit 0: add_special, bit 1: skip_special, bit 2: decode the rest as
// little-endian int32 ids instead of encoding it as text). Checks: encode never throws on any bytes
// (invalid UTF-8 becomes U+FFFD); every id is inside the vocabulary; text without added tokens
// round-trips to its NFC form (added tokens decode as written, so text holding one is not checked);
// decode of any ids (negative, unknown, special) gives valid UTF-8.
#include <cstring>
#include <string>
#include <vector>

#include "dlm/io/tokenizer.hpp"
#include "fuzz_common.hpp"

#ifndef DLM_FUZZ_TOKENIZER
#error "DLM_FUZZ_TOKENIZER must name the tokenizer.json the target loads"
#endif

namespace {

struct fixed_tokenizer {
    dlm::io::tokenizer tok = dlm::io::tokenizer::load(DLM_FUZZ_TOKENIZER);
    std::vector<std::string> added;  // the added tokens' contents: they decode as written, not as normalized text
    fixed_tokenizer() {
        const auto j = nlohmann::json::parse(dlm::io::detail::read_text_file(DLM_FUZZ_TOKENIZER));
        for (const auto& t : j.at("added_tokens")) added.push_back(t.at("content").get<std::string>());
    }
    [[nodiscard]] bool mentions_added(std::string_view s) const {
        for (const auto& a : added)
            if (s.find(a) != std::string_view::npos) return true;
        return false;
    }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using dlm_fuzz::fuzz_check;
    static const fixed_tokenizer fixed;
    const dlm::io::tokenizer& tok = fixed.tok;
    if (size == 0) return 0;
    const bool add_special = data[0] & 1, skip_special = data[0] & 2, decode_only = data[0] & 4;
    const std::string_view text = dlm_fuzz::as_text(data + 1, size - 1);
    if (decode_only) {
        std::vector<dlm::token_id> ids(text.size() / 4);
        if (!ids.empty()) std::memcpy(ids.data(), text.data(), ids.size() * 4);
        if (data[0] & 8)  // mostly ids near the vocabulary, some far outside
            for (auto& id : ids) id = static_cast<dlm::token_id>(static_cast<std::uint32_t>(id) % (tok.vocab_size() + 8u)) - 4;
        const std::string out = tok.decode(ids, skip_special);
        fuzz_check(dlm::io::detail::to_valid_utf8(out) == out, "decode produced invalid UTF-8");
        return 0;
    }
    const std::vector<dlm::token_id> ids = tok.encode(text, add_special);
    for (const dlm::token_id id : ids) fuzz_check(id >= 0 && id < tok.vocab_size(), "encode produced an id outside the vocabulary");
    const std::string back = tok.decode(ids, skip_special);
    fuzz_check(dlm::io::detail::to_valid_utf8(back) == back, "decode produced invalid UTF-8");
    if (add_special) return 0;
    const std::string expected = dlm::io::detail::nfc_utf8(dlm::io::detail::to_valid_utf8(text));
    if (!fixed.mentions_added(text) && !fixed.mentions_added(expected))
        fuzz_check(back == expected, "text without added tokens does not round-trip to its NFC form");
    return 0;
}
