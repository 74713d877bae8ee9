// dlm-server's pieces without a socket: the request parser and its checks against the preset,
// whole-character and stop-string streaming, the OpenAI bodies, the Prometheus text, the server's
// flags, and the scheduler (requests joining a running engine) on a scripted model.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <dlm/presets.hpp>
#include <dlm/server/metrics.hpp>
#include <dlm/server/request.hpp>
#include <dlm/server/response.hpp>
#include <dlm/server/scheduler.hpp>
#include <dlm/server/text_stream.hpp>

#include "cli/options.hpp"
#include "support/scripts.hpp"

using namespace dlm;
using namespace dlm::server;

namespace {

request_rules cdlm_rules() {
    request_rules r;
    r.model = "cdlm";
    r.has_threshold = true;
    r.has_blocks = true;
    r.default_max_tokens = 48;
    r.max_max_tokens = 128;
    r.block_length = 8;
    return r;
}

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
}

TEST_CASE("server request: every refusal names the field, and another model is 404") {
    CHECK(refused("") == "<body>");
    CHECK(refused("{") == "<body>");
    CHECK(refused("[]") == "<body>");
    CHECK(refused(R"({"prompt": "a", "prompt": "b"})") == "<body>");  // a key twice
    CHECK(refused(R"({"max_tokens": 8})") == "prompt");
    CHECK(refused(R"({"prompt": 3})") == "prompt");
    CHECK(refused(R"({"prompt": ["a", "b"]})") == "prompt");
    CHECK(refused(R"({"prompt": "x", "bogus": 1})") == "bogus");
    CHECK(refused(R"({"prompt": "x", "max_tokens": 0})") == "max_tokens");
    CHECK(refused(R"({"prompt": "x", "max_tokens": 129})") == "max_tokens");
    CHECK(refused(R"({"prompt": "x", "max_tokens": 8.0})") == "max_tokens");
    CHECK(refused(R"({"prompt": "x", "max_tokens": 125})").empty());  // 128 slots: still fits
    CHECK(refused(R"({"prompt": "x", "max_tokens": 121, "block_length": 48})") == "block_length");  // 144 slots
    CHECK(refused(R"({"prompt": "x", "temperature": 0.7})") == "temperature");  // cdlm samples greedily
    CHECK(refused(R"({"prompt": "x", "temperature": 0})").empty());            // a neutral value passes
    CHECK(refused(R"({"prompt": "x", "top_p": 0})") == "top_p");
    CHECK(refused(R"({"prompt": "x", "steps": 8})") == "steps");  // cdlm's schedule has no steps
    CHECK(refused(R"({"prompt": "x", "threshold": 1.5})") == "threshold");
    CHECK(refused(R"({"prompt": "x", "seed": -1})") == "seed");
    CHECK(refused(R"({"prompt": "x", "stop": ""})") == "stop");
    CHECK(refused(R"({"prompt": "x", "stop": ["a", "b", "c", "d", "e"]})") == "stop");
    CHECK(refused(R"({"prompt": "x", "stop": ["a", 1]})") == "stop[1]");
    CHECK(refused(R"({"prompt": "x", "stream": "yes"})") == "stream");
    CHECK(refused(R"({"prompt": "x", "stream_canvas": true})") == "stream_canvas");
    CHECK(refused(R"({"prompt": "x", "stream_options": {"x": 1}})") == "stream_options.x");
    CHECK(refused(R"({"prompt": "x", "n": 2})") == "n");
    CHECK(refused(R"({"messages": []})", endpoint::chat) == "messages");
    CHECK(refused(R"({"messages": [{"role": "robot", "content": "x"}]})", endpoint::chat) == "messages[0].role");
    CHECK(refused(R"({"messages": [{"role": "user"}]})", endpoint::chat) == "messages[0].content");
    CHECK(refused(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", endpoint::chat) == "messages[0].content[0].type");
    CHECK(refused(R"({"prompt": "x"})", endpoint::chat) == "prompt");  // the chat route reads messages

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

    request_rules llada = cdlm_rules();
    llada.has_threshold = false;
    llada.has_steps = llada.samples = true;
    CHECK(refused(R"({"prompt": "x", "max_tokens": 16, "steps": 3})", endpoint::completions, llada) == "steps");  // 2 blocks
    CHECK(refused(R"({"prompt": "x", "max_tokens": 16, "steps": 4, "temperature": 0.5, "top_k": 5})", endpoint::completions, llada).empty());
    CHECK(refused(R"({"prompt": "x", "threshold": 0.5})", endpoint::completions, llada) == "threshold");
    request_rules sdar = llada;  // steps per block: any number the engine accepts
    sdar.steps_total = false;
    CHECK(refused(R"({"prompt": "x", "max_tokens": 16, "steps": 3})", endpoint::completions, sdar).empty());
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

TEST_CASE("server flags: dlm-server's own, dlm-generate's decoding flags, and each program refuses the other's") {
    const std::vector<std::string_view> args{"--port", "0", "-np", "4", "--queue", "2", "--timeout", "1.5", "--preset", "llada", "--steps", "16"};
    const auto o = cli::parse_args(args, cli::program::server);
    CHECK(o.port == 0);
    CHECK(o.parallel == 4);
    CHECK(o.queue == 2);
    CHECK(o.timeout == 1.5);
    CHECK(o.steps == 16);
    const std::string help = cli::help_text(cli::program::server);
    for (const auto* flag : {"--host", "--port", "--parallel", "--queue", "--max-body", "--timeout", "--preset", "--threshold"})
        CHECK_MESSAGE(help.find(flag) != std::string::npos, flag);
    CHECK(help.find("--prompt") == std::string::npos);
    const std::vector<std::string_view> gen{"-p", "x", "--port", "1"};
    CHECK_THROWS_WITH_AS((void)cli::parse_args(gen), doctest::Contains("is a flag of dlm-server"), invalid_parameter);
    const std::vector<std::string_view> bad{"--timeout", "0"};
    CHECK_THROWS_WITH_AS((void)cli::parse_args(bad, cli::program::server), doctest::Contains("--timeout"), invalid_parameter);
}

namespace {

using testing::scripted_model;
using decoder_t = presets::llada<scripted_model>;
using scheduler_t = scheduler<engine<decoder_t>>;
constexpr token_id mask_id = 31, eos_id = 30;

std::shared_ptr<scheduler_t::job> job_for(std::vector<token_id> prompt, std::uint64_t seed, index_t gen = 16) {
    auto j = std::make_shared<scheduler_t::job>();
    j->prompt = std::move(prompt);
    j->options.gen_length = gen;
    j->options.seed = seed;
    return j;
}

void wait_end(scheduler_t::job& j) {
    std::unique_lock lock(j.m);
    j.cv.wait(lock, [&] { return j.ended(); });
}

}  // namespace

TEST_CASE("server scheduler: requests joining a running batch get exactly their single-request answers") {
    scripted_model m(32, mask_id, {eos_id}, false, dlm_test::context_hash());
    decoder_t d(m, semi_ar_mask{8}, {}, llada_schedule{16}, presets::llada_sampler(1.0f));
    engine<decoder_t> eng(d);
    metrics stats;
    scheduler_t sched(eng, {.max_active = 3, .max_queue = 16}, &stats);
    std::vector<std::shared_ptr<scheduler_t::job>> jobs;
    std::vector<std::vector<token_id>> seen;  // every prefix job 1 was shown, as a streaming client sees them
    std::thread watcher;
    for (std::uint64_t i = 0; i < 10; ++i) {
        jobs.push_back(job_for({static_cast<token_id>(1 + i % 3), 2, 3}, 100 + i));
        jobs.back()->want_updates = i % 2 == 1;
        REQUIRE(sched.submit(jobs.back()));
        if (i == 1)
            watcher = std::thread([&seen, j = jobs.back()] {
                std::unique_lock lock(j->m);
                for (std::uint64_t v = 0; !j->ended(); v = j->version) {
                    j->wait_update(lock, v, clock::now() + std::chrono::seconds(10));
                    seen.push_back(j->prefix);
                }
            });
        if (i % 4 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // join mid-decode
    }
    // Every job first: the decoder and its model are the scheduler thread's until the batch is done
    // (generating alone here while it still decodes later jobs raced on the scripted model's log).
    for (const auto& j : jobs) wait_end(*j);
    for (std::uint64_t i = 0; i < jobs.size(); ++i) {
        REQUIRE(jobs[i]->end == job_end::finished);
        const sequence_result alone = d.generate(jobs[i]->prompt, {.gen_length = 16, .seed = 100 + i});
        CHECK(jobs[i]->result->tokens == alone.tokens);
        CHECK(jobs[i]->prefix == std::vector<token_id>(alone.tokens.begin(), alone.tokens.begin() + alone.answer_length));
    }
    watcher.join();
    const std::vector<token_id>& final_answer = jobs[1]->prefix;
    for (std::size_t k = 0; k < seen.size(); ++k) {  // it only grew, and was always the start of the answer
        REQUIRE(seen[k].size() <= final_answer.size());
        CHECK(std::equal(seen[k].begin(), seen[k].end(), final_answer.begin()));
        if (k > 0) CHECK(seen[k].size() >= seen[k - 1].size());
    }
    CHECK(stats.forwards > 0);
    CHECK(stats.queue_wait.count() == jobs.size());
}

TEST_CASE("server scheduler: a full queue refuses, a cancelled or late job ends alone, the engine refuses bad options") {
    // The model holds its forward while `gate` is set, so the test decides what happens between steps.
    std::atomic<bool> gate{false};
    scripted_model m(32, mask_id, {eos_id}, false, [&gate, hash = dlm_test::context_hash()](const testing::script_view& v, std::span<float> out) {
        while (gate.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        hash(v, out);
    });
    decoder_t d(m, semi_ar_mask{8}, {}, llada_schedule{64}, presets::llada_sampler(1.0f));
    engine<decoder_t> eng(d);
    scheduler_t sched(eng, {.max_active = 1, .max_queue = 1});
    auto running = job_for({1, 2}, 1, 64);
    auto cancelled = job_for({1, 2}, 2, 64);
    gate = true;
    REQUIRE(sched.submit(running));
    {  // it joins, and its first forward waits at the gate
        std::unique_lock lock(running->m);
        running->cv.wait(lock, [&] { return running->joined; });
    }
    REQUIRE(sched.submit(cancelled));
    CHECK_FALSE(sched.submit(job_for({1, 2}, 3, 64)));  // the queue holds one
    cancelled->cancel = true;
    running->cancel = true;
    gate = false;
    wait_end(*cancelled);
    CHECK(cancelled->end == job_end::failed);  // left the queue before joining
    wait_end(*running);
    CHECK(running->end == job_end::finished);
    CHECK(running->result->cancelled());
    CHECK(running->result->stats.forwards <= 1);  // freed at the first forward boundary (before it, if the flag came first)

    auto late = job_for({1, 2}, 4, 64);
    late->deadline = clock::now();
    REQUIRE(sched.submit(late));
    wait_end(*late);
    CHECK(late->end == job_end::timed_out);

    auto bad = job_for({}, 5, 64);  // an empty prompt
    REQUIRE(sched.submit(bad));
    wait_end(*bad);
    CHECK(bad->end == job_end::refused);
    CHECK(!bad->error_param.empty());

    auto after = job_for({3, 4}, 6, 16);  // the scheduler still serves
    REQUIRE(sched.submit(after));
    wait_end(*after);
    CHECK(after->result->tokens == d.generate(after->prompt, {.gen_length = 16, .seed = 6}).tokens);
}
