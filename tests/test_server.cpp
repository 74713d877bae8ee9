// dlm-server's pieces without a socket: the request parser and its checks against the preset,
// whole-character and stop-string streaming, the OpenAI bodies, the Prometheus text, the server's
// flags (the scheduler on a scripted model: test_server_scheduler.cpp; the HTTP layer's socket
// options: test_server_http.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <dlm/presets.hpp>
#include <dlm/server/metrics.hpp>
#include <dlm/server/request.hpp>
#include <dlm/server/response.hpp>
#include <dlm/server/text_stream.hpp>

#include "cli/options.hpp"
#include "server/preset_rules.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_server {

using namespace dlm;
using namespace dlm::server;

namespace {

/// The rules dlm-server makes for `preset` on a model whose config suggests 48 slots in blocks of 8,
/// with a context of 128 (server/preset_rules.hpp, from the preset registry).
request_rules rules_of(std::string_view preset) {
    const registry::preset_id id = registry::builtin.find(preset).value();
    return rules_for(registry::resolve(registry::builtin, id, {}, {48, 8}), false, 128, "cdlm");
}

request_rules cdlm_rules() { return rules_of("cdlm"); }

/// The field a body is refused for ("" when accepted).
std::string refused(std::string_view body, endpoint kind = endpoint::completions, const request_rules& rules = cdlm_rules()) {
    try {
        (void)parse_request(body, kind, rules);
    } catch (const request_error& e) {
        return e.parameter().empty() ? "<body>" : e.parameter();
    }
    return "";
}

}  // namespace

TEST_CASE("server request: the OpenAI fields and dlm's extensions are read and checked") {
    const auto r = parse_request(R"({"model": "cdlm", "prompt": "3 + 4?", "max_tokens": 20, "seed": 7, "stop": ["\n", "####"],
                                     "stream": true, "stream_options": {"include_usage": true}, "threshold": 0.8, "block_length": 4})",
                                 endpoint::completions, cdlm_rules());
    CHECK(r.prompt == "3 + 4?");
    CHECK(r.max_tokens == 20);
    CHECK(r.gen_length == 20);  // a multiple of the request's block length 4
    CHECK(r.seed == 7u);
    CHECK(r.stop == std::vector<std::string>{"\n", "####"});
    CHECK(r.stream);
    CHECK(r.include_usage);
    CHECK(r.threshold == 0.8);
    CHECK(r.block_length == 4);

    // max_tokens rounds the canvas up to whole blocks of the server's block length; the default is the model's.
    CHECK(parse_request(R"({"prompt": "x", "max_tokens": 13})", endpoint::completions, cdlm_rules()).gen_length == 16);
    CHECK(parse_request(R"({"prompt": "x"})", endpoint::completions, cdlm_rules()).gen_length == 48);
    CHECK(!parse_request(R"({"prompt": ["x"]})", endpoint::completions, cdlm_rules()).seed);

    const auto c = parse_request(R"({"messages": [{"role": "system", "content": "Be brief."},
                                                  {"role": "user", "content": [{"type": "text", "text": "Hi"}]}]})",
                                 endpoint::chat, cdlm_rules());
    REQUIRE(c.messages.size() == 2);
    CHECK(c.messages[1].role == "user");
    CHECK(c.messages[1].content == "Hi");
    CHECK(c.thinking == io::chat_thinking::template_default);
    // vLLM's chat_template_kwargs: the template's thinking mode (Gemma 4's enable_thinking).
    const auto t = parse_request(R"({"messages": [{"role": "user", "content": "Hi"}], "chat_template_kwargs": {"enable_thinking": true}})",
                                 endpoint::chat, cdlm_rules());
    CHECK(t.thinking == io::chat_thinking::on);
    const auto f = parse_request(R"({"messages": [{"role": "user", "content": "Hi"}], "chat_template_kwargs": {"enable_thinking": false}})",
                                 endpoint::chat, cdlm_rules());
    CHECK(f.thinking == io::chat_thinking::off);  // Qwen3's empty thought; not the template's default
}

TEST_CASE("server request: every refusal names the field, and another model is 404") {
    CHECK(refused("") == "<body>");
    CHECK(refused("{") == "<body>");
    CHECK(refused("[]") == "<body>");
    CHECK(refused(R"({"prompt": "a", "prompt": "b"})") == "<body>");  // a key twice
    CHECK(refused(R"({"max_tokens": 8})") == "prompt");
    CHECK(refused(R"({"prompt": 3})") == "prompt");
    CHECK(refused(R"({"prompt": ["a", "b"]})") == "prompt");  // one prompt per request
    CHECK(refused(R"({"prompt": [[1, 2], [3]]})") == "prompt");
    CHECK(refused(R"({"prompt": []})") == "prompt");
    CHECK(refused(R"({"prompt": [[]]})") == "prompt[0]");
    CHECK(refused(R"({"prompt": [1, -2]})") == "prompt[1]");
    CHECK(refused(R"({"prompt": [[1, 2.5]]})") == "prompt[0][1]");
    CHECK(refused(R"({"prompt": [1, 3000000000]})") == "prompt[1]");
    CHECK(refused(R"({"prompt": "x", "bogus": 1})") == "bogus");
    CHECK(refused(R"({"prompt": "x", "max_tokens": 0})") == "max_tokens");
    CHECK(refused(R"({"prompt": "x", "max_tokens": 129})") == "max_tokens");
    CHECK(refused(R"({"prompt": "x", "max_tokens": 8.0})") == "max_tokens");
    CHECK(refused(R"({"prompt": "x", "max_tokens": 125})").empty());  // 128 slots: still fits
    CHECK(refused(R"({"prompt": "x", "max_tokens": 121, "block_length": 48})") == "block_length");  // 144 slots
    CHECK(refused(R"({"prompt": "x", "temperature": 0.7})") == "temperature");  // cdlm samples greedily
    CHECK(refused(R"({"prompt": "x", "temperature": 0})").empty());            // a neutral value passes
    CHECK(refused(R"({"prompt": "x", "top_p": 0})") == "top_p");
    CHECK(refused(R"({"prompt": "x", "top_p": 1e-50})") == "top_p");  // in (0, 1] as a double, 0 as the sampler's float
    CHECK_THROWS_WITH((void)parse_request(R"({"prompt": "x", "top_p": 1e-50})", endpoint::completions, cdlm_rules()),
                      doctest::Contains("which the sampler's float holds as 0.000000"));
    CHECK(refused(R"({"prompt": "x", "steps": 8})") == "steps");  // cdlm's schedule has no steps
    CHECK(refused(R"({"prompt": "x", "threshold": 1.5})") == "threshold");
    CHECK(refused(R"({"prompt": "x", "seed": 18446744073709551616})") == "seed");  // past 64 bits
    CHECK(refused(R"({"prompt": "x", "top_k": -2})") == "top_k");
    CHECK(refused(R"({"prompt": "x", "stop": ""})") == "stop");
    CHECK(refused(R"({"prompt": "x", "stop": ["a", "b", "c", "d", "e"]})").empty());  // lm-eval's until lists pass OpenAI's 4
    CHECK(refused(R"({"prompt": "x", "stop": ["1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16", "17"]})") == "stop");
    CHECK(refused(R"({"prompt": "x", "stop": ["a", 1]})") == "stop[1]");
    CHECK(refused(R"({"prompt": "x", "stream": "yes"})") == "stream");
    CHECK(refused(R"({"prompt": "x", "stream_canvas": true})") == "stream_canvas");
    CHECK(refused(R"({"prompt": "x", "stream_options": {"x": 1}})") == "stream_options.x");
    CHECK(refused(R"({"prompt": "x", "stream_options": {"include_usage": true}})") == "stream_options");  // not streamed: as OpenAI
    CHECK(refused(R"({"prompt": "x", "stream": false, "stream_options": {"include_usage": false}})") == "stream_options");
    CHECK(refused(R"({"prompt": "x", "stream_options": null})").empty());
    CHECK(refused(R"({"prompt": "x", "n": 2})") == "n");
    CHECK(refused(R"({"messages": []})", endpoint::chat) == "messages");
    CHECK(refused(R"({"messages": [{"role": "robot", "content": "x"}]})", endpoint::chat) == "messages[0].role");
    CHECK(refused(R"({"messages": [{"role": "user"}]})", endpoint::chat) == "messages[0].content");
    CHECK(refused(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", endpoint::chat) == "messages[0].content[0].type");
    CHECK(refused(R"({"prompt": "x"})", endpoint::chat) == "prompt");  // the chat route reads messages
    const std::string hi = R"("messages": [{"role": "user", "content": "Hi"}])";
    CHECK(refused("{" + hi + R"(, "chat_template_kwargs": {"enable_thinking": 1}})", endpoint::chat) == "chat_template_kwargs.enable_thinking");
    CHECK(refused("{" + hi + R"(, "chat_template_kwargs": {"tools": []}})", endpoint::chat) == "chat_template_kwargs.tools");
    CHECK(refused("{" + hi + R"(, "chat_template_kwargs": []})", endpoint::chat) == "chat_template_kwargs");
    CHECK(refused("{" + hi + R"(, "chat_template_kwargs": null})", endpoint::chat).empty());
    CHECK(refused(R"({"prompt": "x", "chat_template_kwargs": {"enable_thinking": true}})") == "chat_template_kwargs");  // chat only

    try {
        (void)parse_request(R"({"model": "gpt-4", "prompt": "x"})", endpoint::completions, cdlm_rules());
        FAIL("accepted another model");
    } catch (const request_error& e) {
        CHECK(e.status() == 404);
        CHECK(e.code() == "model_not_found");
        const auto body = error_body(e);
        CHECK(body["error"]["param"] == "model");
        CHECK(body["error"]["type"] == "invalid_request_error");
    }

    const request_rules llada = rules_of("llada");
    CHECK(refused(R"({"prompt": "x", "max_tokens": 16, "steps": 3})", endpoint::completions, llada) == "steps");  // 2 blocks
    CHECK(refused(R"({"prompt": "x", "max_tokens": 16, "steps": 4, "temperature": 0.5, "top_k": 5})", endpoint::completions, llada).empty());
    CHECK(refused(R"({"prompt": "x", "threshold": 0.5})", endpoint::completions, llada) == "threshold");
}

TEST_CASE("server request: llada's steps past the canvas's slots are refused naming steps and the bound, not clamped") {
    const request_rules llada = rules_of("llada");  // blocks of 8: max_tokens 16 is 2 blocks, 16 slots
    CHECK(refused(R"({"prompt": "x", "max_tokens": 16, "steps": 16})", endpoint::completions, llada).empty());
    CHECK(refused(R"({"prompt": "x", "max_tokens": 16, "steps": 18})", endpoint::completions, llada) == "steps");
    CHECK(refused(R"({"prompt": "x", "max_tokens": 13, "steps": 16})", endpoint::completions, llada).empty());  // 16 slots
    CHECK(refused(R"({"prompt": "x", "max_tokens": 16, "steps": 9600})", endpoint::completions, llada) == "steps");
    try {
        (void)parse_request(R"({"prompt": "x", "max_tokens": 16, "steps": 9600})", endpoint::completions, llada);
        FAIL("steps 9600 accepted");
    } catch (const request_error& e) {
        CHECK(e.status() == 400);
        CHECK(std::string(e.what()).find("at most 16") != std::string::npos);
    }
    const request_rules sdar = rules_of("sdar");  // steps per block: any number the engine accepts
    CHECK(refused(R"({"prompt": "x", "max_tokens": 16, "steps": 3})", endpoint::completions, sdar).empty());
    CHECK(refused(R"({"prompt": "x", "max_tokens": 16, "steps": 64})", endpoint::completions, sdar).empty());  // a plan, not this rule
}

TEST_CASE("server request: OpenAI's unused fields pass at their neutral values, as gateways send them, and are refused otherwise") {
    // The SGLang model gateway (smg) forwards completions with "echo": false and chat with "logprobs": false.
    CHECK(refused(R"({"prompt": "x", "echo": false, "logprobs": null, "best_of": 1, "suffix": "", "presence_penalty": 0,
                      "frequency_penalty": 0.0, "logit_bias": {}})").empty());
    CHECK(refused(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": false, "top_logprobs": null})", endpoint::chat).empty());
    CHECK(refused(R"({"prompt": "x", "echo": true})") == "echo");
    CHECK(refused(R"({"prompt": "x", "logprobs": 2})") == "logprobs");
    CHECK(refused(R"({"prompt": "x", "best_of": 3})") == "best_of");
    CHECK(refused(R"({"prompt": "x", "presence_penalty": 0.5})") == "presence_penalty");
    CHECK(refused(R"({"prompt": "x", "logit_bias": {"5": 1}})") == "logit_bias");
    CHECK(refused(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true})", endpoint::chat) == "logprobs");
    CHECK(refused(R"({"messages": [{"role": "user", "content": "x"}], "echo": false})", endpoint::chat) == "echo");  // not chat's
    CHECK(refused(R"({"prompt": "x", "top_logprobs": null})") == "top_logprobs");                                   // chat's only
}

TEST_CASE("server request: null is an absent field and zero log-probabilities are none, as vLLM reads them") {
    const std::string chat = R"("messages": [{"role": "user", "content": "x"}])";
    CHECK(refused(R"({"prompt": "x", "logprobs": 0})").empty());
    CHECK(refused("{" + chat + R"(, "logprobs": false, "top_logprobs": 0})", endpoint::chat).empty());
    CHECK(refused(R"({"prompt": "x", "user": null, "model": null})").empty());
    CHECK(refused("{" + chat + R"(, "user": null, "model": null})", endpoint::chat).empty());
    CHECK(refused("{" + chat + R"(, "top_logprobs": 1})", endpoint::chat) == "top_logprobs");
    CHECK(refused(R"({"prompt": "x", "logprobs": 0.5})") == "logprobs");
    CHECK(refused(R"({"prompt": "x", "user": 3})") == "user");
    CHECK(refused(R"({"prompt": "x", "model": 3})") == "model");
}

TEST_CASE("server request: max_completion_tokens wins over max_tokens whatever their order, as in vLLM") {
    const auto chat = [](std::string_view fields) {
        return parse_request(std::string(R"({"messages": [{"role": "user", "content": "x"}], )") + std::string(fields) + "}", endpoint::chat,
                             cdlm_rules());
    };
    // nlohmann reads an object's keys sorted: max_completion_tokens before max_tokens, whatever the body's order.
    CHECK(chat(R"("max_tokens": 20, "max_completion_tokens": 5)").max_tokens == 5);
    CHECK(chat(R"("max_completion_tokens": 5, "max_tokens": 20)").max_tokens == 5);
    CHECK(chat(R"("max_completion_tokens": null, "max_tokens": 20)").max_tokens == 20);
    CHECK(chat(R"("max_completion_tokens": 7)").max_tokens == 7);
    const std::string m = R"({"messages": [{"role": "user", "content": "x"}], )";
    CHECK(refused(m + R"("max_tokens": 8, "max_completion_tokens": 0})", endpoint::chat) == "max_completion_tokens");
    CHECK(refused(m + R"("max_tokens": 8, "max_completion_tokens": 125})", endpoint::chat).empty());
    CHECK(refused(R"({"prompt": "x", "max_completion_tokens": 8})") == "max_completion_tokens");  // chat's only, as OpenAI's
}

TEST_CASE("server request: max_tokens is bounded by max_slots on a model of huge context, and its rounding to blocks never wraps") {
    const registry::preset_id id = registry::builtin.find("cdlm").value();
    const request_rules huge = rules_for(registry::resolve(registry::builtin, id, {}, {48, 8}), false, 2147483647, "cdlm");
    CHECK(huge.max_context == 2147483647);
    CHECK(huge.max_max_tokens == max_slots);
    const std::string m = R"({"messages": [{"role": "user", "content": "x"}], )";
    CHECK(refused(R"({"prompt": "x", "max_tokens": 2147483641})", endpoint::completions, huge) == "max_tokens");
    CHECK(refused(m + R"("max_completion_tokens": 2147483647})", endpoint::chat, huge) == "max_completion_tokens");
    CHECK(refused(R"({"prompt": "x", "max_tokens": 1048576})", endpoint::completions, huge).empty());
    CHECK(refused(R"({"prompt": "x", "max_tokens": 1048577})", endpoint::completions, huge) == "max_tokens");
    // Rules a library user sets by hand, past max_slots: 2^31 - 7 rounded up to blocks of 8 is 2^31,
    // which wrapped to -2^31 in 32 bits and was refused as "must be >= 1, got -2147483648".
    request_rules wide = huge;
    wide.max_max_tokens = 2147483647;
    try {
        (void)parse_request(R"({"prompt": "x", "max_tokens": 2147483641})", endpoint::completions, wide);
        FAIL("accepted");
    } catch (const request_error& e) {
        CHECK(e.parameter() == "max_tokens");
        CHECK(std::string(e.what()).find("is 2147483648 slots") != std::string::npos);
    }
}

TEST_CASE("server request: a prompt of token ids, vLLM's top_k -1 and signed seeds, and text parts joined by newlines") {
    const auto ids = parse_request(R"({"prompt": [5, 0, 7]})", endpoint::completions, cdlm_rules());
    CHECK(ids.prompt_ids == std::vector<token_id>{5, 0, 7});
    CHECK(parse_request(R"({"prompt": [[5, 0, 7]]})", endpoint::completions, cdlm_rules()).prompt_ids == ids.prompt_ids);
    const auto text = parse_request(R"({"prompt": ["3 + 4?"]})", endpoint::completions, cdlm_rules());
    CHECK((text.prompt == "3 + 4?" && !text.prompt_ids));
    std::string many = "{\"prompt\": [1";
    for (int i = 0; i < 128; ++i) many += ", 1";
    CHECK(refused(many + "]}") == "prompt");  // 129 ids: more than the context of 128

    const request_rules llada = rules_of("llada");
    CHECK(parse_request(R"({"prompt": "x", "top_k": -1})", endpoint::completions, llada).top_k == 0);
    CHECK(parse_request(R"({"prompt": "x", "seed": -1})", endpoint::completions, cdlm_rules()).seed == ~std::uint64_t{0});
    CHECK(parse_request(R"({"prompt": "x", "seed": 18446744073709551615})", endpoint::completions, cdlm_rules()).seed == ~std::uint64_t{0});
    CHECK(parse_request(R"({"prompt": "x", "max_tokens": 9})", endpoint::completions, cdlm_rules()).max_tokens_field == "max_tokens");
    CHECK(parse_request(R"({"prompt": "x"})", endpoint::completions, cdlm_rules()).max_tokens_field.empty());  // the default: fitted to the prompt

    const auto chat = parse_request(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})",
                                    endpoint::chat, cdlm_rules());
    CHECK(chat.messages.at(0).content == "a\nb");
}

TEST_CASE("server usage: an answer cut by a stop string bills the fewest tokens whose text holds it") {
    const std::vector<std::string> pieces = {"3", " +", " 4", " =", " 7", "\n", "####", " 7"};
    const auto text_of = [&](std::size_t k) {
        std::string t;
        for (std::size_t i = 0; i < k; ++i) t += pieces[i];
        return t;
    };
    CHECK(tokens_through_stop(pieces.size(), {"="}, text_of) == 4);
    CHECK(tokens_through_stop(pieces.size(), {"4 ="}, text_of) == 4);      // across tokens
    CHECK(tokens_through_stop(pieces.size(), {"##", "+"}, text_of) == 2);  // the first of several
    CHECK(tokens_through_stop(pieces.size(), {"7\n#"}, text_of) == 7);
    CHECK(tokens_through_stop(pieces.size(), {"%"}, text_of) == pieces.size());  // none: all of them
    CHECK(tokens_through_stop(pieces.size(), {}, text_of) == pieces.size());
    CHECK(tokens_through_stop(0, {"="}, text_of) == 0);
    // Whatever prefix of the answer holds the stop string (the whole answer, or the committed prefix a
    // stream was cancelled at), the count is the same.
    for (std::size_t n = 4; n <= pieces.size(); ++n) CHECK(tokens_through_stop(n, {"="}, text_of) == 4);
}

TEST_CASE("server stream: whole characters only, stop strings cut, nothing retracted") {
    text_stream s;
    CHECK(s.advance("caf\xC3", false) == "caf");        // half of é waits
    CHECK(s.advance("caf\xC3\xA9 \xE2\x82", false) == "\xC3\xA9 ");  // é; half of € waits
    CHECK(s.advance("caf\xC3\xA9 \xEF\xBF\xBD", false).empty());    // a replacement character may be a split one
    CHECK(s.advance("caf\xC3\xA9 \xE2\x82\xAC!", true) == "\xE2\x82\xAC!");
    CHECK(s.sent() == "caf\xC3\xA9 \xE2\x82\xAC!");

    text_stream t({"####", "\n\n"});
    CHECK(t.advance("3 + 4 = 7 #", false) == "3 + 4 = 7 ");  // "#" may begin "####"
    CHECK(t.advance("3 + 4 = 7 ##", false).empty());
    CHECK(t.advance("3 + 4 = 7 ## x", false) == "## x");
    CHECK(t.advance("3 + 4 = 7 ## x####7", false).empty());
    CHECK(t.stopped());
    CHECK(t.sent() == "3 + 4 = 7 ## x");
    CHECK(t.advance("3 + 4 = 7 ## x####7 more", true).empty());

    // Any split of a text into growing prefixes sends exactly the text cut at its first stop string.
    const std::string text = "r\xC3\xA9sum\xC3\xA9: 12 \xE2\x82\xAC\n\nnext";
    std::string cut = text;
    CHECK(cut_at_stop(cut, {"\n\n", "zz"}));
    for (std::size_t step = 1; step <= 5; ++step) {
        text_stream u({"\n\n", "zz"});
        std::string got;
        for (std::size_t n = 0; n < text.size(); n += step) got += u.advance(std::string_view(text).substr(0, n), false);
        got += u.advance(text, true);
        CHECK(got == cut);
    }
    CHECK(whole_characters("ab\xF0\x9F\x98") == 2);
    CHECK(whole_characters("ab\xF0\x9F\x98\x80") == 6);
}

TEST_CASE("server bodies: OpenAI's objects and chunks, and invalid UTF-8 never throws") {
    const response_head h{"chatcmpl-1", 5, "cdlm", endpoint::chat};
    const auto first = chunk_body(h, "Hi", std::nullopt, true);
    CHECK(first["object"] == "chat.completion.chunk");
    CHECK(first["choices"][0]["delta"]["role"] == "assistant");
    CHECK(first["choices"][0]["delta"]["content"] == "Hi");
    CHECK(first["choices"][0]["finish_reason"].is_null());
    const auto last = chunk_body(h, "", std::string("stop"));
    CHECK(last["choices"][0]["delta"].empty());
    CHECK(last["choices"][0]["finish_reason"] == "stop");
    const auto whole = completion_body({"cmpl-1", 5, "cdlm", endpoint::completions}, "7", "length", {3, 4});
    CHECK(whole["object"] == "text_completion");
    CHECK(whole["choices"][0]["text"] == "7");
    CHECK(whole["usage"]["total_tokens"] == 7);
    CHECK(sse_event(nlohmann::json{{"a", "\xC3"}}) == "data: {\"a\":\"\xEF\xBF\xBD\"}\n\n");
    CHECK(sse_done() == "data: [DONE]\n\n");
    const auto canvas = canvas_body(h, 3, {std::string("a"), std::nullopt});
    CHECK(canvas["object"] == "dlm.canvas");
    CHECK(canvas["canvas"][1].is_null());
}

TEST_CASE("server metrics: Prometheus text with cumulative histogram buckets") {
    metrics m;
    m.request("/v1/completions", 200);
    m.request("/v1/completions", 200);
    m.request("/v1/completions", 429);
    m.forwards += 3;
    m.latency.observe(0.004);
    m.latency.observe(0.3);
    m.latency.observe(1000);
    const std::string t = m.render(2, 5);
    CHECK(t.find("dlm_requests_total{route=\"/v1/completions\",status=\"200\"} 2\n") != std::string::npos);
    CHECK(t.find("dlm_requests_total{route=\"/v1/completions\",status=\"429\"} 1\n") != std::string::npos);
    CHECK(t.find("# TYPE dlm_forwards_total counter\ndlm_forwards_total 3\n") != std::string::npos);
    CHECK(t.find("dlm_queue_length 2\n") != std::string::npos);
    CHECK(t.find("dlm_active_sequences 5\n") != std::string::npos);
    CHECK(t.find("dlm_request_duration_seconds_bucket{le=\"0.005\"} 1\n") != std::string::npos);
    CHECK(t.find("dlm_request_duration_seconds_bucket{le=\"0.25\"} 1\n") != std::string::npos);
    CHECK(t.find("dlm_request_duration_seconds_bucket{le=\"0.5\"} 2\n") != std::string::npos);
    CHECK(t.find("dlm_request_duration_seconds_bucket{le=\"+Inf\"} 3\n") != std::string::npos);
    CHECK(t.find("dlm_request_duration_seconds_count 3\n") != std::string::npos);
}

TEST_CASE("server metrics: the prompt cache's figures appear, under vLLM's names and dlm's, only when the server keeps one") {
    metrics m;
    m.model_name = "ar";
    CHECK(m.render(0, 0).find("prefix_cache") == std::string::npos);
    CHECK(m.render(0, 0).find("dlm_prompt_cache") == std::string::npos);
    struct fake_cache {
        struct counters {
            std::uint64_t queried_tokens = 100, hit_tokens = 64, evicted_tokens = 32, room_evictions = 3;
        } c;
        [[nodiscard]] const counters& stats() const { return c; }
        [[nodiscard]] std::uint64_t bytes() const { return 4096; }
        [[nodiscard]] std::uint64_t capacity_bytes() const { return 1 << 20; }
        [[nodiscard]] std::uint64_t blocks() const { return 2; }
    };
    m.prompt_cache.copy_from(fake_cache{});
    const std::string t = m.render(0, 0);
    for (const std::string line : {"# TYPE vllm:prefix_cache_queries_total counter\nvllm:prefix_cache_queries_total{model_name=\"ar\"} 100\n",
                                   "# TYPE vllm:prefix_cache_hits_total counter\nvllm:prefix_cache_hits_total{model_name=\"ar\"} 64\n",
                                   "dlm_prompt_cache_hit_tokens_total 64\n", "dlm_prompt_cache_query_tokens_total 100\n",
                                   "dlm_prompt_cache_evicted_tokens_total 32\n", "# TYPE dlm_prompt_cache_bytes gauge\ndlm_prompt_cache_bytes 4096\n",
                                   "dlm_prompt_cache_capacity_bytes 1048576\n", "dlm_prompt_cache_blocks 2\n",
                                   "# TYPE dlm_memory_evictions_total counter\ndlm_memory_evictions_total 3\n"}) {
        INFO(line);
        CHECK(t.find(line) != std::string::npos);
    }
}

TEST_CASE("server metrics: vLLM's names, types, bucket bounds and model_name label beside dlm's own") {
    metrics m;
    m.model_name = "LLaDA-8B \"x\"";
    m.vllm.prompt_tokens += 7;
    m.vllm.generation_tokens += 5;
    m.vllm.finish(finish_reason::stop);
    m.vllm.finish(finish_reason::stop);
    m.vllm.finish(finish_reason::length);
    m.vllm.first_token.observe(0.0005);
    m.vllm.first_token.observe(3000);
    m.vllm.inter_token.observe(0.06);
    m.vllm.e2e.observe(0.4);
    const std::string t = m.render(2, 5);
    const std::string l = R"(model_name="LLaDA-8B \"x\"")";
    const auto has = [&](const std::string& line) {
        INFO(line);
        CHECK(t.find(line) != std::string::npos);
    };
    has("dlm_queue_length 2\n");  // dlm's own stay
    has("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{" + l + "} 5\n");
    has("# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{" + l + "} 2\n");
    CHECK(t.find("vllm:kv_cache_usage_perc") == std::string::npos);  // no batch bound given: no gauge
    m.batch_capacity = 8;
    CHECK(m.render(2, 5).find("# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{" + l + "} 0.625\n") != std::string::npos);
    CHECK(m.render(0, 8).find("vllm:kv_cache_usage_perc{" + l + "} 1\n") != std::string::npos);  // the next request waits
    has("# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{" + l + "} 7\n");
    has("# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{" + l + "} 5\n");
    has("vllm:request_success_total{" + l + ",finished_reason=\"stop\"} 2\n");
    has("vllm:request_success_total{" + l + ",finished_reason=\"length\"} 1\n");
    has("vllm:request_success_total{" + l + ",finished_reason=\"abort\"} 0\n");
    has("# TYPE vllm:time_to_first_token_seconds histogram\n");
    has("vllm:time_to_first_token_seconds_bucket{" + l + ",le=\"0.001\"} 1\n");
    has("vllm:time_to_first_token_seconds_bucket{" + l + ",le=\"2560\"} 1\n");  // vLLM's last bound
    has("vllm:time_to_first_token_seconds_bucket{" + l + ",le=\"+Inf\"} 2\n");
    has("vllm:time_to_first_token_seconds_count{" + l + "} 2\n");
    has("vllm:inter_token_latency_seconds_bucket{" + l + ",le=\"0.05\"} 0\n");
    has("vllm:inter_token_latency_seconds_bucket{" + l + ",le=\"0.075\"} 1\n");
    has("vllm:time_per_output_token_seconds_count{" + l + "} 1\n");  // the superseded name, as vLLM still emits it
    has("vllm:e2e_request_latency_seconds_bucket{" + l + ",le=\"0.3\"} 0\n");
    has("vllm:e2e_request_latency_seconds_bucket{" + l + ",le=\"0.5\"} 1\n");
    has("vllm:e2e_request_latency_seconds_sum{" + l + "} 0.4\n");
    has("# TYPE vllm:request_queue_time_seconds histogram\n");
}

TEST_CASE("server flags: dlm-server's own, dlm-generate's decoding flags, and each program refuses the other's") {
    const std::vector<std::string_view> args{"--port", "0", "-np", "4", "--queue", "2", "--timeout", "1.5", "--preset", "llada", "--steps", "16"};
    const auto o = cli::parse_args(args, cli::program::server);
    const std::vector<std::string_view> no_queue{"--queue", "0"};  // none waits: the batch's places only
    CHECK(cli::parse_args(no_queue, cli::program::server).queue == 0);
    CHECK(cli::help_text(cli::program::server).find("0: none waits") != std::string::npos);
    CHECK(o.port == 0);
    CHECK(o.parallel == 4);
    CHECK(o.queue == 2);
    CHECK(o.timeout == 1.5);
    CHECK(o.steps == 16);
    const std::string help = cli::help_text(cli::program::server);
    for (const auto* flag : {"--host", "--port", "--parallel", "--queue", "--max-body", "--timeout", "--preset", "--threshold", "--prompt-cache"})
        CHECK_MESSAGE(help.find(flag) != std::string::npos, flag);
    CHECK(help.find("-p, --prompt ") == std::string::npos);  // dlm-generate's prompt flag (--prompt-cache is the server's)
    const std::vector<std::string_view> cache{"--prompt-cache", "64"};
    CHECK(cli::parse_args(cache, cli::program::server).prompt_cache_mib == 64);
    const std::vector<std::string_view> no_cache{"--prompt-cache", "64"};
    CHECK_THROWS_WITH_AS((void)cli::parse_args(no_cache), doctest::Contains("is a flag of dlm-server"), invalid_parameter);
    const std::vector<std::string_view> gen{"-p", "x", "--port", "1"};
    CHECK_THROWS_WITH_AS((void)cli::parse_args(gen), doctest::Contains("is a flag of dlm-server"), invalid_parameter);
    const std::vector<std::string_view> bad{"--timeout", "0"};
    CHECK_THROWS_WITH_AS((void)cli::parse_args(bad, cli::program::server), doctest::Contains("--timeout"), invalid_parameter);
}

}  // namespace test_server
