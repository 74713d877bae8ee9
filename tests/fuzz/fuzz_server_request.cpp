// Fuzz target: the bytes of an HTTP request body -> dlm::server::parse_request for both routes under
// two presets' rules (cdlm: threshold, blocks, greedy; llada: steps, blocks, sampling), then the
// accepted request's prompt streamed through text_stream in growing prefixes and its answer bodies
// written as JSON.
//
// The rules are dlm-server's (server/preset_rules.hpp: the preset registry's checks).
// Refusals must be dlm::server::request_error with a status of 400 or 404; an accepted request must
// be one the engine can be handed: max_tokens in [1, the context], the canvas whole blocks holding
// max_tokens, steps a multiple of the blocks, at most 16 non-empty stop strings, stream_canvas only
// with stream. Streaming any text must send exactly the text cut at its first stop string.
#include <string>

#include "../../server/preset_rules.hpp"
#include "dlm/server/request.hpp"
#include "dlm/server/response.hpp"
#include "dlm/server/text_stream.hpp"
#include "fuzz_common.hpp"

namespace {

using dlm_fuzz::fuzz_check;
using namespace dlm::server;

/// dlm-server's rules for cdlm or llada on a model suggesting 48 slots in blocks of 8, context 128.
request_rules rules(bool llada) {
    const dlm::registry::preset_id id = dlm::registry::builtin.find(llada ? "llada" : "cdlm").value();
    return rules_for(dlm::registry::resolve(dlm::registry::builtin, id, {}, {48, 8}), false, 128, "cdlm");
}

void check_accepted(const completion_request& q, const request_rules& r, bool llada) {
    fuzz_check(q.max_tokens >= 1 && q.max_tokens <= r.max_max_tokens, "accepted: max_tokens out of range");
    const dlm::index_t block = q.block_length.value_or(r.block_length);
    fuzz_check(q.gen_length >= q.max_tokens && q.gen_length <= r.max_max_tokens && q.gen_length % block == 0 &&
                   q.gen_length - q.max_tokens < block,
               "accepted: the canvas is not the fewest whole blocks holding max_tokens");
    fuzz_check(!q.steps || (llada && *q.steps % (q.gen_length / block) == 0), "accepted: steps not a multiple of the blocks");
    fuzz_check(!q.threshold || (!llada && *q.threshold > 0 && *q.threshold <= 1), "accepted: threshold");
    fuzz_check(!q.temperature || *q.temperature == 0 || llada, "accepted: a temperature the preset cannot apply");
    fuzz_check(q.stop.size() <= r.max_stop, "accepted: too many stop strings");
    for (const auto& s : q.stop) fuzz_check(!s.empty() && s.size() <= r.max_stop_bytes, "accepted: an empty or long stop string");
    fuzz_check(!q.stream_canvas || q.stream, "accepted: stream_canvas without stream");
    fuzz_check(q.kind == endpoint::chat ? !q.messages.empty() : q.messages.empty(), "accepted: messages on the wrong route");

    // Stream the prompt as if it were the answer, in prefixes growing by 7 bytes.
    const std::string& text = q.kind == endpoint::chat ? q.messages.back().content : q.prompt;
    text_stream s(q.stop);
    std::string sent;
    for (std::size_t n = 0; n < text.size(); n += 7) sent += s.advance(std::string_view(text).substr(0, n), false);
    sent += s.advance(text, true);
    std::string cut = text;
    cut_at_stop(cut, q.stop);
    fuzz_check(sent == cut, "streaming sent another text than the answer cut at its first stop string");
    const response_head h{"id", 0, r.model, q.kind};
    (void)sse_event(chunk_body(h, sent, std::string("stop"), true));
    (void)dump(completion_body(h, sent, "length", {1, 2}));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view body = dlm_fuzz::as_text(data, size);
    for (const bool llada : {false, true})
        for (const endpoint kind : {endpoint::completions, endpoint::chat}) {
            const request_rules r = rules(llada);
            try {
                check_accepted(parse_request(body, kind, r), r, llada);
            } catch (const request_error& e) {
                fuzz_check(e.status() == 400 || e.status() == 404, "a refusal with another status than 400 or 404");
                (void)dump(error_body(e));
            }
        }
    return 0;
}
