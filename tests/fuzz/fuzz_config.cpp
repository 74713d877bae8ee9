// Fuzz target: the bytes of a config.json -> strict JSON parsing -> dlm::io::parse_config, then the
// same bytes as a generation_config.json on top of a valid config.
//
// Invalid JSON, unknown architectures and inconsistent sizes must all be dlm::error; an accepted
// config must be one dlm's transformer can be built from (positive sizes, ids inside the vocabulary).
#include <algorithm>
#include <string>

#include "dlm/io/json_util.hpp"
#include "dlm/io/model_config.hpp"
#include "fuzz_common.hpp"

namespace {

void check_accepted(const dlm::io::model_config& c) {
    using dlm_fuzz::fuzz_check;
    fuzz_check(c.vocab_size > 0 && c.hidden_size > 0 && c.intermediate_size > 0 && c.num_layers > 0 && c.num_heads > 0 &&
                   c.num_kv_heads > 0 && c.head_dim > 0 && c.max_context > 0,
               "an accepted config has a size that is not positive");
    fuzz_check(c.num_heads % c.num_kv_heads == 0, "accepted: num_kv_heads does not divide num_heads");
    fuzz_check(c.head_dim % 2 == 0, "accepted: odd head_dim");
    fuzz_check(c.mask_id >= 0 && c.mask_id < c.vocab_size, "accepted: mask id outside the vocabulary");
    fuzz_check(std::all_of(c.eos_ids.begin(), c.eos_ids.end(), [&](dlm::token_id t) { return t >= 0 && t < c.vocab_size; }),
               "accepted: an EOS id outside the vocabulary");
    fuzz_check(c.rope_theta > 0 && c.rms_norm_eps > 0, "accepted: rope_theta or rms_norm_eps not positive");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text = dlm_fuzz::as_text(data, size);
    nlohmann::json j;
    try {
        j = dlm::io::detail::parse_json_strict(text, "config.json", "config");
    } catch (const dlm::error&) {
        return 0;
    }
    try {
        check_accepted(dlm::io::parse_config(j, "config.json"));
    } catch (const dlm::error&) {
    }
    // The same document as a generation_config.json (eos_token_id: an int or a list).
    try {
        static const dlm::io::model_config base = dlm::io::parse_config(
            nlohmann::json{{"model_type", "qwen2"}, {"hidden_size", 8}, {"num_attention_heads", 2}, {"num_hidden_layers", 1},
                           {"intermediate_size", 16}, {"vocab_size", 64}},
            "base.json");
        dlm::io::model_config c = base;
        dlm::io::add_generation_config(c, j, "generation_config.json");
        check_accepted(c);
    } catch (const dlm::error&) {
    }
    return 0;
}
