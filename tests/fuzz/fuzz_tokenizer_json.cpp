// Fuzz target: the bytes of a tokenizer.json -> strict JSON parsing -> dlm::io::tokenizer::parse
// (the BPE model, added tokens, normalizers, pre-tokenizers and their regexes, post-processor,
// decoders). A tokenizer that loads then encodes and decodes a fixed text.
//
// Malformed or unsupported files must be dlm::error; a loaded tokenizer must only produce ids it can
// decode, and decode to valid UTF-8.
#include <string>
#include <vector>

#include "dlm/io/json_util.hpp"
#include "dlm/io/tokenizer.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using dlm_fuzz::fuzz_check;
    const std::string_view text = dlm_fuzz::as_text(data, size);
    std::optional<dlm::io::tokenizer> tok;
    try {
        tok.emplace(dlm::io::tokenizer::parse(dlm::io::detail::parse_json_strict(text, "tokenizer.json", "tokenizer.json"),
                                              "tokenizer.json"));
    } catch (const dlm::error&) {
        return 0;
    }
    static const std::string sample = "Hello, world! 3 + 4 = 7 <|endoftext|>\n\t  caf\xC3\xA9 \xE6\x9D\xB1\xE4\xBA\xAC \xF0\x9F\x98\x80 \xFF";
    for (const bool special : {false, true}) {
        const std::vector<dlm::token_id> ids = tok->encode(sample, special);
        for (const dlm::token_id id : ids)
            fuzz_check(id >= 0 && id < tok->vocab_size(), "encode produced an id outside the tokenizer's vocabulary");
        const std::string back = tok->decode(ids, special);
        fuzz_check(dlm::io::detail::to_valid_utf8(back) == back, "decode produced invalid UTF-8");
    }
    std::vector<dlm::token_id> all;
    for (dlm::token_id id = -2; id < std::min<dlm::token_id>(tok->vocab_size(), 512) + 2; ++id) all.push_back(id);
    const std::string decoded = tok->decode(all);
    fuzz_check(dlm::io::detail::to_valid_utf8(decoded) == decoded, "decode produced invalid UTF-8");
    return 0;
}
