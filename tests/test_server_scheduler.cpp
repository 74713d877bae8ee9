// dlm-server's scheduler (requests joining a running engine) on a scripted model: the answers equal
// single decodes, the queue's bounds, cancels and timeouts, engine refusals, and vLLM's figures
// (requests that wait for memory: test_server_memory.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <map>
#include <mutex>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <dlm/presets.hpp>
#include <dlm/server/metrics.hpp>
#include <dlm/server/scheduler.hpp>
#include <dlm/server/text_stream.hpp>

#include "support/scheduler_testing.hpp"
#include "support/scripts.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_server_scheduler {

using namespace dlm;
using namespace dlm::server;
using namespace dlm_test::scheduler_testing;

namespace {

using scheduler_t = scheduler<engine<decoder_t>>;
constexpr token_id mask_id = 31, eos_id = 30;

std::shared_ptr<scheduler_t::job> job_for(std::vector<token_id> prompt, std::uint64_t seed, index_t gen = 16) {
    auto j = std::make_shared<scheduler_t::job>();
    j->prompt = std::move(prompt);
    j->options.gen_length = gen;
    j->options.seed = seed;
    return j;
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

TEST_CASE("server scheduler: under token editing the text stream holds final blocks only; the canvas stream shows the edits") {
    using editing_t = decoder<scripted_model, aligned_block_diffusion_mask, prefix_cache, llada21_speedy_schedule, greedy_sampler>;
    using job_t = scheduler<engine<editing_t>>::job;
    auto j = std::make_shared<job_t>();
    // The client below must see every update (an edit shows only between two steps), so each forward waits,
    // up to a second, until the client has read the job's latest version: the steps and the reads go in
    // lockstep whatever the load on the machine (without it, a busy 2-core run once skipped the update).
    std::atomic<std::uint64_t> read_version{0};
    auto client_caught_up = [&] {
        std::unique_lock lock(j->m, std::try_to_lock);
        return lock.owns_lock() && j->version == read_version.load();
    };
    scripted_model m(32, mask_id, {eos_id}, false, [&, hash = dlm_test::context_hash()](const testing::script_view& v, std::span<float> out) {
        for (int waited = 0; waited < 1000 && !client_caught_up(); ++waited) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        hash(v, out);
    });
    editing_t d(m, aligned_block_diffusion_mask{8});
    engine<editing_t> eng(d);
    scheduler<engine<editing_t>> sched(eng, {.max_active = 2, .max_queue = 4});
    j->prompt = {1, 2, 3, 4, 5, 6, 7, 8};  // whole blocks: the answer's blocks are [0, 8), [8, 16), [16, 24)
    j->options.gen_length = 24;
    j->want_updates = j->want_canvas = true;
    std::vector<std::vector<token_id>> prefixes, canvases;  // what a streaming client was sent, update by update
    REQUIRE(sched.submit(j));
    {
        std::unique_lock lock(j->m);
        for (std::uint64_t v = 0; !j->ended(); v = j->version) {
            j->wait_update(lock, v, clock::now() + std::chrono::seconds(10));
            prefixes.push_back(j->prefix);
            canvases.push_back(j->canvas);
            read_version = j->version;
        }
    }
    REQUIRE(j->end == job_end::finished);
    const auto& final_tokens = j->result->tokens;
    REQUIRE(j->result->stats.edits > 0);  // the scripted model's choices change as the block fills
    for (std::size_t k = 0; k < prefixes.size(); ++k) {
        REQUIRE(prefixes[k].size() <= final_tokens.size());
        CHECK(std::equal(prefixes[k].begin(), prefixes[k].end(), final_tokens.begin()));  // never retracted
        if (k + 1 < prefixes.size()) CHECK(prefixes[k].size() % 8 == 0);               // whole, closed blocks
    }
    // Some canvas update showed a filled token that an edit later replaced: the opt-in canvas stream
    // is the block in progress.
    bool shown_then_edited = false;
    for (const auto& c : canvases)
        for (std::size_t g = 0; g < c.size() && g < final_tokens.size(); ++g)
            shown_then_edited = shown_then_edited || (c[g] != mask_id && c[g] != final_tokens[g]);
    CHECK(shown_then_edited);
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

    auto masked = job_for({1, mask_id, 2}, 5, 16);  // a prompt holding the mask token (<|mdm_mask|>)
    REQUIRE(sched.submit(masked));
    wait_end(*masked);
    CHECK(masked->end == job_end::refused);
    CHECK(masked->error_param == "prompts[0]");  // the server answers 400 naming prompt / messages
    CHECK(masked->error_message.find("mask id 31") != std::string::npos);

    auto after = job_for({3, 4}, 6, 16);  // the scheduler still serves
    REQUIRE(sched.submit(after));
    wait_end(*after);
    CHECK(after->result->tokens == d.generate(after->prompt, {.gen_length = 16, .seed = 6}).tokens);
}

TEST_CASE("server scheduler: a burst into an idle batch holds max_active + max_queue requests, and vLLM's metrics count them") {
    scripted_model m(32, mask_id, {eos_id}, false, dlm_test::context_hash());
    decoder_t d(m, semi_ar_mask{8}, {}, llada_schedule{16}, presets::llada_sampler(1.0f));
    engine<decoder_t> eng(d);
    metrics stats;
    // The engine thread waits in on_start until the burst is in: every request arrives before it
    // could take one from the queue, as when a burst lands faster than it wakes.
    std::atomic<bool> hold{true};
    const auto held = [&hold] {
        while (hold.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    };
    struct release_on_exit {  // declared after a scheduler, so that a failed REQUIRE lets it stop
        std::atomic<bool>& hold;
        ~release_on_exit() { hold = false; }
    };
    std::vector<std::shared_ptr<scheduler_t::job>> jobs;
    {
        scheduler_t sched(eng, {.max_active = 1, .max_queue = 2}, &stats, held);
        const release_on_exit release{hold};
        for (std::uint64_t i = 0; i < 3; ++i) {
            jobs.push_back(job_for({static_cast<token_id>(1 + i), 2, 3}, 10 + i));
            jobs.back()->max_tokens = 8;
            REQUIRE_MESSAGE(sched.submit(jobs.back()), "request " << i << " of 1 running + 2 queued");
        }
        CHECK_FALSE(sched.submit(job_for({4, 2, 3}, 13)));  // the fourth: 429
        hold = false;
        for (const auto& j : jobs) wait_end(*j);
        auto later = job_for({5, 2, 3}, 14);  // places free again once they ended
        REQUIRE(sched.submit(later));
        wait_end(*later);
        jobs.push_back(later);
    }
    std::uint64_t prompt = 0, generated = 0, stop = 0;
    for (const auto& j : jobs) {
        REQUIRE(j->end == job_end::finished);
        const sequence_result& r = *j->result;
        const std::size_t cap = j->max_tokens > 0 ? j->max_tokens : r.tokens.size();
        prompt += j->prompt.size();
        generated += std::min(static_cast<std::size_t>(r.answer_length), cap);
        stop += static_cast<std::size_t>(r.answer_length) < r.tokens.size() && static_cast<std::size_t>(r.answer_length) <= cap;
    }
    CHECK(stats.vllm.prompt_tokens == prompt);
    CHECK(stats.vllm.generation_tokens == generated);
    CHECK(stats.vllm.finished[0] == stop);
    CHECK(stats.vllm.finished[0] + stats.vllm.finished[1] == jobs.size());
    CHECK(stats.vllm.e2e.count() == jobs.size());
    CHECK(stats.vllm.queue_time.count() == jobs.size());
    CHECK(stats.vllm.first_token.count() <= jobs.size());  // a sequence with no answer token has no first token
    CHECK(stats.vllm.first_token.count() > 0);
    const std::string t = stats.render(0, 0);
    CHECK(t.find("vllm:prompt_tokens_total{model_name=\"dlm\"} " + std::to_string(prompt) + "\n") != std::string::npos);
    CHECK(t.find("vllm:e2e_request_latency_seconds_count{model_name=\"dlm\"} 4\n") != std::string::npos);

    // --queue 0: none waits; a request is taken only while the batch has a place.
    hold = true;
    scheduler_t none(eng, {.max_active = 2, .max_queue = 0}, nullptr, held);
    const release_on_exit release{hold};
    auto a = job_for({1, 2}, 1), b = job_for({2, 3}, 2);
    REQUIRE(none.submit(a));
    REQUIRE(none.submit(b));
    CHECK_FALSE(none.submit(job_for({3, 4}, 3)));
    hold = false;
    wait_end(*a);
    wait_end(*b);
    CHECK(a->end == job_end::finished);
    CHECK(b->end == job_end::finished);
}

TEST_CASE("server scheduler: vLLM's token figures count a cancelled sequence's answer before EOS, not the EOS padding") {
    // One slot per forward, in order: the answer 5 6, then EOS in every slot after it. The client
    // leaves (cancel) after six forwards, when the committed prefix is 5 6 EOS EOS EOS EOS.
    std::vector<token_id> answer(16, eos_id);
    answer[0] = 5;
    answer[1] = 6;
    std::vector<double> confidence(16);
    for (std::size_t i = 0; i < confidence.size(); ++i) confidence[i] = 0.99 - 0.01 * static_cast<double>(i);
    std::shared_ptr<scheduler_t::job> j = job_for({1, 2, 3}, 1, 16);
    const auto oracle = dlm_test::oracle(answer, confidence);
    scripted_model m(32, mask_id, {eos_id}, false, [&j, oracle](const testing::script_view& v, std::span<float> out) {
        if (v.forward >= 6) j->cancel = true;
        oracle(v, out);
    });
    decoder_t d(m, semi_ar_mask{16}, {}, llada_schedule{16}, presets::llada_sampler(0.0f));
    engine<decoder_t> eng(d);
    metrics stats;
    {
        scheduler_t sched(eng, {.max_active = 1, .max_queue = 1}, &stats);
        j->max_tokens = 16;
        j->eos_ids = {eos_id};
        j->want_updates = true;
        REQUIRE(sched.submit(j));
        wait_end(*j);
    }
    REQUIRE(j->end == job_end::finished);
    REQUIRE(j->result->cancelled());
    const auto& tokens = j->result->tokens;
    CHECK(std::count(tokens.begin(), tokens.end(), eos_id) >= 2);  // EOS padding committed before the cancel
    CHECK(stats.vllm.generation_tokens == 2);
    CHECK(stats.vllm.first_token.count() == 1);
    CHECK(stats.vllm.inter_token.count() == 1);  // the forward that committed 6; none for the EOS slots
    CHECK(stats.vllm.finished[2] == 1);          // abort
}

}  // namespace test_server_scheduler
