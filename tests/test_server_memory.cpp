// dlm-server's scheduler when memory is short, on an engine whose memory holds a budget of slots
// (support/scheduler_testing.hpp): a request refused for memory waits at the queue's head while
// others run, is refused at once when it cannot fit, makes room in the prompt cache, and leaves as a
// queued one does.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <dlm/presets.hpp>
#include <dlm/server/metrics.hpp>
#include <dlm/server/scheduler.hpp>

#include "support/scheduler_testing.hpp"
#include "support/scripts.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_server_memory {

using namespace dlm;
using namespace dlm::server;
using namespace dlm_test::scheduler_testing;

namespace {
constexpr token_id mask_id = 31, eos_id = 30;

/// A scripted model whose forwards pass a turnstile, its decoder, and an engine of 24 slots whose
/// stand-in prompt cache holds `cached` of them.
struct gated_bound {
    turnstile gate;
    scripted_model m{32, mask_id, {eos_id}, false, gate.wrap(dlm_test::context_hash())};
    decoder_t d{m, semi_ar_mask{8}, {}, llada_schedule{}, presets::llada_sampler(1.0f)};
    memory_bound_engine eng{d, 24};
    explicit gated_bound(index_t cached = 0) { eng.cached = cached; }
};

}  // namespace

// A bounded engine of 24 slots: a running request of 16 leaves room for 8 more. One slot per forward
// (llada_schedule{}): a request of 16 slots runs 16 forwards.
TEST_CASE("server scheduler: a request refused for memory while another runs waits at the queue's head, joins when that one ends, and is not overtaken") {
    gated_bound b;
    turnstile& gate = b.gate;
    memory_bound_engine& eng = b.eng;
    decoder_t& d = b.d;
    metrics stats;
    auto running = bounded_job({1, 2, 3}, 1, 16), big = bounded_job({2, 3, 4}, 7, 16), small = bounded_job({3, 4, 5}, 3, 8);
    running->draw_seed = big->draw_seed = true;  // drawn as they join: running's is the first (n = 0), big's the second,
                                                 // sequence_seed(7, 1), however often big was deferred
    {
        bounded_scheduler sched(eng, {.max_active = 4, .max_queue = 4}, &stats);
        const open_on_exit release{gate};
        REQUIRE(sched.submit(running));
        gate.pass(0);  // it joined; its first forward waits
        REQUIRE(sched.submit(big));
        REQUIRE(sched.submit(small));
        gate.pass(1);  // one admission: big does not fit beside running; small would, but waits behind it
        CHECK(eng.refusals == 1);
        CHECK(eng.taken() == std::vector<token_id>{1});
        CHECK_FALSE(has_ended(*big));
        CHECK(sched.queue_length() == 2);
        CHECK(stats.waiting_for_memory == 1);
        CHECK(stats.memory_deferrals == 1);
        const std::string t = stats.render(sched.queue_length(), sched.active());
        CHECK(t.find("dlm_requests_waiting_for_memory 1\n") != std::string::npos);
        CHECK(t.find("dlm_memory_deferrals_total 1\n") != std::string::npos);
        CHECK(t.find("vllm:num_requests_waiting{model_name=\"dlm\"} 2\n") != std::string::npos);  // both count as waiting
        gate.pass(3);  // two more admissions while running holds its slots: big is not tried again, small does not overtake it
        CHECK(eng.refusals == 1);
        CHECK(eng.taken() == std::vector<token_id>{1});
        CHECK_FALSE(has_ended(*big));
        CHECK_FALSE(has_ended(*small));
        gate.open();
        for (const auto& j : {running, big, small}) wait_end(*j);
    }
    CHECK(eng.taken() == std::vector<token_id>{1, 2, 3});  // big joined when running ended, small with it
    CHECK(eng.refusals == 1);
    for (const auto& j : {running, big, small}) REQUIRE(j->end == job_end::finished);
    CHECK(big->result->tokens == d.generate(big->prompt, {.gen_length = 16, .seed = sequence_seed(7, 1)}).tokens);
    CHECK(small->result->tokens == d.generate(small->prompt, {.gen_length = 8, .seed = 3}).tokens);
    CHECK(stats.waiting_for_memory == 0);
    CHECK(stats.memory_deferrals == 1);
    CHECK(stats.vllm.queue_time.count() == 3);
}

TEST_CASE("server scheduler: a request refused for memory with nothing running can never fit, and is refused naming gen_length") {
    scripted_model m(32, mask_id, {eos_id}, false, dlm_test::context_hash());
    decoder_t d(m, semi_ar_mask{8}, {}, llada_schedule{}, presets::llada_sampler(1.0f));
    memory_bound_engine eng(d, 8);
    metrics stats;
    bounded_scheduler sched(eng, {.max_active = 2, .max_queue = 2}, &stats);
    auto big = bounded_job({1, 2}, 1, 16);
    REQUIRE(sched.submit(big));
    wait_end(*big);
    CHECK(big->end == job_end::refused);
    CHECK(big->error_param == "gen_length");  // the server's 400 names max_tokens
    CHECK(big->error_message.find("not enough memory") != std::string::npos);
    CHECK(eng.refusals == 1);
    CHECK(stats.memory_deferrals == 0);
    CHECK(stats.waiting_for_memory == 0);
    auto fits = bounded_job({1, 2}, 2, 8);  // the scheduler still serves
    REQUIRE(sched.submit(fits));
    wait_end(*fits);
    CHECK(fits->end == job_end::finished);
}

TEST_CASE("server scheduler: a request short of more memory than the running ones hold and the prompt cache could free is refused at once, not held at the queue's head, and nothing is evicted for it") {
    // Of 24 slots: running holds 16 and the cache none, or running 8 and the cache 8; huge asks 32,
    // short by 24 either way, more than 16 (the running one's and the cache's together).
    for (const index_t cached : {0, 8}) {
        CAPTURE(cached);
        gated_bound b(cached);
        turnstile& gate = b.gate;
        memory_bound_engine& eng = b.eng;
        metrics stats;
        auto running = bounded_job({1, 2, 3}, 1, 16 - cached), huge = bounded_job({2, 3, 4}, 2, 32), small = bounded_job({3, 4, 5}, 3, 8);
        {
            bounded_scheduler sched(eng, {.max_active = 4, .max_queue = 4}, &stats);
            const open_on_exit release{gate};
            REQUIRE(sched.submit(running));
            gate.pass(0);  // it joined; its first forward waits
            REQUIRE(sched.submit(huge));
            REQUIRE(sched.submit(small));
            gate.pass(1);  // one admission: huge refused, small joins beside running
            wait_end(*huge);
            CHECK(huge->end == job_end::refused);
            CHECK(huge->error_param == "gen_length");
            CHECK(stats.memory_deferrals == 0);
            CHECK(stats.waiting_for_memory == 0);
            CHECK(eng.taken() == std::vector<token_id>{1, 3});
            CHECK(eng.cached == cached);  // nothing evicted for a request that could not fit
            gate.open();
            for (const auto& j : {running, small}) wait_end(*j);
        }
        CHECK(running->end == job_end::finished);
        CHECK(small->end == job_end::finished);
        CHECK(stats.prompt_cache.room_evictions == 0);
    }
}

// A running request of 8 slots beside 8 cached leaves 8 of the 24 free.
TEST_CASE("server scheduler: a request short of more than the running ones hold, but not of more than they hold and the prompt cache could free, waits and joins once the cache makes room") {
    gated_bound b(8);
    metrics stats;
    auto running = bounded_job({1, 2, 3}, 1, 8), big = bounded_job({2, 3, 4}, 2, 24);
    {
        bounded_scheduler sched(b.eng, {.max_active = 4, .max_queue = 4}, &stats);
        const open_on_exit release{b.gate};
        REQUIRE(sched.submit(running));
        b.gate.pass(0);              // it joined and holds 8 slots; its first forward waits
        REQUIRE(sched.submit(big));  // 24 beside 8 and 8 cached, of 24: short by 16, more than the 8 running holds
        b.gate.pass(1);
        CHECK(b.eng.refusals == 1);
        CHECK_FALSE(has_ended(*big));  // it waits: the 8 held and the 8 the cache could free cover it
        CHECK(stats.memory_deferrals == 1);
        b.gate.open();
        for (const auto& j : {running, big}) wait_end(*j);
    }
    CHECK(running->end == job_end::finished);
    REQUIRE(big->end == job_end::finished);  // running ended: 24 beside 8 cached, short by 8, which the cache freed
    CHECK(b.eng.cached == 0);
    CHECK(b.eng.refusals == 1);
    CHECK(stats.prompt_cache.room_evictions == 1);
    CHECK(stats.render(0, 0).find("dlm_memory_evictions_total 1\n") != std::string::npos);
}

TEST_CASE("server scheduler: a request waiting for memory ends as a queued one does when its client leaves or its deadline passes") {
    gated_bound b;
    turnstile& gate = b.gate;
    memory_bound_engine& eng = b.eng;
    metrics stats;
    auto running = bounded_job({1, 2, 3}, 1, 16), left = bounded_job({2, 3, 4}, 2, 16), late = bounded_job({3, 4, 5}, 3, 16);
    {
        bounded_scheduler sched(eng, {.max_active = 4, .max_queue = 4}, &stats);
        const open_on_exit release{gate};
        REQUIRE(sched.submit(running));
        gate.pass(0);
        REQUIRE(sched.submit(left));
        gate.pass(1);
        REQUIRE(eng.refusals == 1);  // it waits for memory
        left->cancel = true;         // its client leaves
        sched.poke();
        gate.pass(2);
        wait_end(*left);
        CHECK(left->end == job_end::failed);
        CHECK(left->error_message == "left the queue before joining the batch");
        CHECK(stats.waiting_for_memory == 0);
        // The deadline must not pass before one admission has run: it runs as soon as forward 2 ends.
        late->deadline = clock::now() + std::chrono::milliseconds(300);
        REQUIRE(sched.submit(late));
        gate.pass(3);
        REQUIRE(eng.refusals == 2);
        REQUIRE_FALSE(has_ended(*late));
        CHECK(stats.waiting_for_memory == 1);
        std::this_thread::sleep_until(late->deadline);
        gate.pass(4);
        wait_end(*late);
        CHECK(late->end == job_end::timed_out);
        CHECK(stats.waiting_for_memory == 0);
        CHECK_FALSE(has_ended(*running));  // it ran throughout, unaffected
        gate.open();
        wait_end(*running);
    }
    CHECK(running->end == job_end::finished);
    CHECK(eng.taken() == std::vector<token_id>{1});
    CHECK(stats.memory_deferrals == 2);
}

}  // namespace test_server_memory
