// tests/support/scheduler_testing.hpp — what dlm-server's scheduler tests share
// (test_server_scheduler.cpp, test_server_memory.cpp): waiting for a job, a turnstile that lets a
// scripted model's forwards run one at a time, and an engine whose memory holds a budget of slots.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <dlm/presets.hpp>
#include <dlm/registry/any_engine.hpp>
#include <dlm/server/scheduler.hpp>

#include "scripts.hpp"

namespace dlm_test::scheduler_testing {

using namespace dlm;
using namespace dlm::server;
using testing::scripted_model;
using decoder_t = presets::llada<scripted_model>;

template <class Job>
void wait_end(Job& j) {
    std::unique_lock lock(j.m);
    j.cv.wait(lock, [&] { return j.ended(); });
}

template <class Job>
bool has_ended(const Job& j) {
    const std::lock_guard lock(j.m);
    return j.ended();
}

/// Lets a scripted model's forwards run one at a time: forward f waits until the test has let more
/// than f pass. The scheduler admits queued jobs between two forwards, so once forward f + 1 has
/// begun, the admission after forward f has run.
struct turnstile {
    std::atomic<index_t> allowed{0}, begun{-1};

    testing::script wrap(testing::script s) {
        return [this, s = std::move(s)](const testing::script_view& v, std::span<float> out) {
            for (index_t b = begun.load(); b < v.forward && !begun.compare_exchange_weak(b, v.forward);) {}
            while (v.forward >= allowed.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
            s(v, out);
        };
    }
    /// Lets the forwards before `f` run, and waits until forward `f` has begun.
    void pass(index_t f) {
        allowed = f;
        while (begun.load() < f) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    void open() { allowed = std::numeric_limits<index_t>::max(); }
};

struct open_on_exit {  // declared after a scheduler, so that a failed REQUIRE lets it stop
    turnstile& gate;
    ~open_on_exit() { gate.open(); }
};

/// An engine whose memory holds `budget` slots: add throws dlm::memory_error when the slots of the
/// sequences it holds and the joining one's gen_length pass the budget, as engine/prepare.hpp weighs
/// a joining sequence beside the running ones. It counts its refusals and logs the sequences it took
/// (by their prompt's first token), in order.
class memory_bound_engine {
public:
    using inner_type = engine<decoder_t>;
    using policies = inner_type::policies;
    using sequence_id = inner_type::sequence_id;
    static constexpr std::uint64_t slot_bytes = std::uint64_t{1} << 20;

    memory_bound_engine(decoder_t& d, index_t budget) : inner_(d), budget_(budget) {}

    sequence_id add(std::vector<token_id> prompt, const generation_options& o, const policies& p = {}) {
        const index_t slots = o.gen_length.value();  // the tests set it
        index_t held = 0;
        for (const auto& [id, n] : held_) held += n;
        if (const index_t short_by = held + slots + cached - budget_; short_by > 0) {
            if (short_by <= cached) {  // as engine::add: the cache's blocks make room when they alone cover what is short
                cached -= short_by;
                ++view_.counts.room_evictions;
            } else {
                ++refusals;
                throw memory_error("the decoding state of " + std::to_string(slots) + " slots beside " + std::to_string(held) + " held",
                                   slot_bytes * static_cast<std::uint64_t>(held + slots + cached), slot_bytes * static_cast<std::uint64_t>(budget_),
                                   "ask for fewer slots (gen_length)");
            }
        }
        const token_id first = prompt.empty() ? -1 : prompt.front();
        const sequence_id id = inner_.add(std::move(prompt), o, p);
        held_[id] = slots;
        const std::lock_guard lock(m_);
        taken_.push_back(first);
        return id;
    }
    auto take_finished() {
        auto done = inner_.take_finished();
        for (const auto& [id, result] : done) held_.erase(id);
        return done;
    }
    void cancel(sequence_id id) { inner_.cancel(id); }
    decltype(auto) step() { return inner_.step(); }
    [[nodiscard]] bool idle() const noexcept { return inner_.idle(); }
    /// The slots' bytes (host memory) the sequences it holds would give back as they end.
    [[nodiscard]] std::uint64_t held_bytes(memory_kind where) const {
        if (where != memory_kind::host) return 0;
        index_t held = 0;
        for (const auto& [id, n] : held_) held += n;
        return slot_bytes * static_cast<std::uint64_t>(held);
    }
    [[nodiscard]] auto committed_prefix(sequence_id id) const { return inner_.committed_prefix(id); }
    [[nodiscard]] auto canvas(sequence_id id) const { return inner_.canvas(id); }
    /// What the stand-in prompt cache could free (host memory only).
    [[nodiscard]] std::uint64_t evictable_bytes(memory_kind where) const {
        return where == memory_kind::host ? slot_bytes * static_cast<std::uint64_t>(cached) : 0;
    }
    /// The stand-in prompt cache's figures: its evictions for room.
    [[nodiscard]] const registry::prompt_cache_view* prompt_cache() const noexcept { return &view_; }

    /// The first prompt token of each sequence taken, in the order taken (any thread).
    [[nodiscard]] std::vector<token_id> taken() const {
        const std::lock_guard lock(m_);
        return taken_;
    }
    std::atomic<int> refusals{0};  ///< memory_errors thrown
    /// Slots a stand-in prompt cache holds (none unless a test sets them before the scheduler runs):
    /// memory the budget counts, freed as engine::add frees unpinned cached blocks.
    index_t cached = 0;

private:
    inner_type inner_;
    index_t budget_;
    std::map<sequence_id, index_t> held_;  // engine thread only: the slots of each sequence it holds
    mutable std::mutex m_;
    std::vector<token_id> taken_;
    registry::prompt_cache_view view_;
};
using bounded_scheduler = scheduler<memory_bound_engine>;

std::shared_ptr<bounded_scheduler::job> bounded_job(std::vector<token_id> prompt, std::uint64_t seed, index_t gen) {
    auto j = std::make_shared<bounded_scheduler::job>();
    j->prompt = std::move(prompt);
    j->options.gen_length = gen;
    j->options.seed = seed;
    return j;
}
}  // namespace dlm_test::scheduler_testing
