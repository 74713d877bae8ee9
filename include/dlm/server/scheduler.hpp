// dlm/server/scheduler.hpp — the engine thread of dlm-server: requests handed in by HTTP threads
// through a bounded queue join the running batch at forward boundaries, and their progress (the
// committed prefix, the canvas) and results are handed back.
//
//   dlm::engine eng(decoder);
//   dlm::server::scheduler sched(eng, {.max_active = 8, .max_queue = 32});
//   auto j = std::make_shared<decltype(sched)::job>();  j->prompt = ...;  j->options = ...;
//   if (!sched.submit(j)) reply 429;                    // the queue is full
//   j->wait(...)                                        // or poll j under j->m for updates
//
// The engine is single-threaded; only the scheduler's thread touches it. A job's `cancel` (set by
// its HTTP thread when the client leaves) and its deadline end its sequence at the next forward
// boundary, without touching any other sequence.
//
// Jobs join in the order they came (FIFO). One the engine refuses for memory (dlm::memory_error:
// its canvas, K/V stores and logits rows beside what the running sequences hold) while others run waits at the
// queue's head, and the jobs behind it wait for it, until a running sequence ends; then it is tried
// again (the engine first evicts unpinned prompt-cache blocks when they alone cover the shortfall:
// engine::add). Refused for memory with nothing running, or for more than the running sequences hold,
// the prompt cache could free and the memory available together, it is not expected to fit: it is
// refused (a 400 naming max_tokens). A waiting job's cancel and deadline end it as they end any queued job.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <dlm/core/defaults.hpp>
#include <dlm/core/error.hpp>
#include <dlm/core/memory.hpp>
#include <dlm/core/result.hpp>
#include <dlm/server/metrics.hpp>

namespace dlm::server {

using clock = std::chrono::steady_clock;

/// How a job ended other than with a result from the engine.
enum class job_end { none, finished, refused, timed_out, failed };

/// One request's decode, shared by the HTTP thread that waits for it and the engine thread.
template <class Policies>
struct basic_job {
    // Set by the HTTP thread before submit().
    std::vector<token_id> prompt;
    generation_options options;
    /// The request gave no seed: the engine thread seeds it when the engine takes it, the n-th such
    /// job the engine accepts (from 0) with sequence_seed(options.seed, n) (options.seed: the
    /// server's --seed). A refused job draws nothing, so the first accepted one decodes with --seed.
    bool draw_seed = false;
    Policies policies{};
    bool want_updates = false;  ///< publish the committed prefix as it grows (a stream); else only the end
    bool want_canvas = false;   ///< publish the canvas after every forward (stream_canvas)
    std::size_t max_tokens = 0; ///< the answer is cut there (the request's max_tokens); 0: the whole canvas
    std::vector<token_id> eos_ids;  ///< the answer ends at the first of these (the model's EOS ids): the metrics count the tokens before it
    clock::time_point received = clock::now();
    clock::time_point deadline = clock::time_point::max();

    /// Set by the HTTP thread when its client has gone (or a stop string ended the answer); the
    /// sequence is freed at the next forward boundary.
    std::atomic<bool> cancel{false};
    /// Set with `cancel` when a stop string ended the answer (the metrics count it as "stop", not "abort").
    std::atomic<bool> stop_string{false};
    /// Set before `stop_string`: the answer tokens through the stop string, as the client is billed.
    std::atomic<std::size_t> stop_tokens{0};
    /// Set by the HTTP thread before submit(): where a stop string cuts a finished answer (its tokens
    /// before EOS, at most max_tokens): the tokens its client is billed for (server::tokens_through_stop),
    /// nullopt when none does. The request's stop strings are read by the route only. Called once, when
    /// the sequence ends, so that vllm:generation_tokens and the finish reason say what the response says.
    std::function<std::optional<std::size_t>(std::span<const token_id>)> billed;

    // Written by the engine thread under `m`; `version` counts the updates, `cv` announces them.
    mutable std::mutex m;
    std::condition_variable cv;
    std::uint64_t version = 0;
    std::vector<token_id> prefix;  ///< the committed prefix so far (never shrinks)
    std::vector<token_id> canvas;  ///< the answer's slots after the last forward (want_canvas only)
    std::int64_t forwards = 0;     ///< forwards this sequence took part in (as of the last update)
    std::int64_t stepped = 0;      ///< the same, kept by the engine thread alone
    std::size_t committed = 0;     ///< engine thread alone: answer tokens committed in order before EOS, as of the last forward
    clock::time_point last_token{};  ///< engine thread alone: when `committed` last grew
    bool joined = false;           ///< it joined the batch
    job_end end = job_end::none;
    std::optional<sequence_result> result;  ///< end == finished
    std::string error_param, error_message;  ///< end == refused (the engine's invalid_parameter) or failed

    [[nodiscard]] bool ended() const noexcept { return end != job_end::none; }

    /// Waits (holding `lock` on m) until an update after `seen`, the end, or `until`.
    bool wait_update(std::unique_lock<std::mutex>& lock, std::uint64_t seen, clock::time_point until) {
        return cv.wait_until(lock, until, [&] { return version != seen || ended(); });
    }
};

/// How many requests the scheduler holds: max_active decoding plus max_queue waiting for a place;
/// submit() refuses the next one. max_queue 0: none waits, a request is taken only while the batch
/// has room.
struct scheduler_limits {
    std::size_t max_active = 8;   ///< sequences in the running batch at most
    std::size_t max_queue = 32;   ///< requests waiting to join at most; more get 429
};

template <class Engine>
class scheduler {
public:
    using job = basic_job<typename Engine::policies>;
    using sequence_id = typename Engine::sequence_id;

    /// Starts the engine thread, which first calls `on_start` (e.g. to set its OpenMP thread count:
    /// OpenMP's settings are per thread, and the model's forward runs on this one).
    scheduler(Engine& e, scheduler_limits limits, metrics* m = nullptr, std::function<void()> on_start = {})
        : engine_(e), limits_(limits), metrics_(m) {
        thread_ = std::thread([this, on_start = std::move(on_start)] {
            if (on_start) on_start();
            run();
        });
    }
    ~scheduler() { stop(); }
    scheduler(const scheduler&) = delete;
    scheduler& operator=(const scheduler&) = delete;

    /// Queues `j`; false when max_active + max_queue requests are held already (the caller answers
    /// 429). A request counts as running from the moment the engine thread takes it from the queue,
    /// so a burst into an idle batch is counted as the batch will hold it, not as it waits to be woken.
    [[nodiscard]] bool submit(std::shared_ptr<job> j) {
        {
            const std::lock_guard lock(m_);
            if (stopping_ || queue_.size() + running_count_ >= limits_.max_active + limits_.max_queue) return false;
            queue_.push_back(std::move(j));
        }
        cv_.notify_one();
        return true;
    }

    /// Wakes the engine thread (after setting a job's cancel flag, so a queued job leaves at once).
    void poke() { cv_.notify_one(); }

    [[nodiscard]] std::size_t queue_length() const {
        const std::lock_guard lock(m_);
        return queue_.size();
    }
    [[nodiscard]] std::size_t active() const noexcept { return active_.load(); }
    [[nodiscard]] const scheduler_limits& limits() const noexcept { return limits_; }

    /// Ends the engine thread; running and queued jobs end as failed ("the server is stopping").
    void stop() {
        {
            const std::lock_guard lock(m_);
            if (stopping_) return;
            stopping_ = true;
        }
        cv_.notify_one();
        if (thread_.joinable()) thread_.join();
    }

private:
    static void finish(job& j, job_end how, std::string param = {}, std::string message = {}) {
        {
            const std::lock_guard lock(j.m);
            j.end = how;
            j.error_param = std::move(param);
            j.error_message = std::move(message);
            ++j.version;
        }
        j.cv.notify_all();
    }

    /// Moves queued jobs into the engine, in order, while the batch has room; drops those cancelled or
    /// late. A job the engine refuses for memory while other sequences run goes back to the queue's
    /// head with those taken behind it, and none joins until a running sequence has ended (defer).
    void admit(clock::time_point now) {
        std::vector<std::shared_ptr<job>> joining, dropped;
        take_queued(now, joining, dropped);
        for (auto& j : dropped) finish(*j, j->cancel ? job_end::failed : job_end::timed_out, {}, "left the queue before joining the batch");
        for (std::size_t i = 0; i < joining.size(); ++i)
            if (!join(joining[i], now)) {
                defer(std::span(joining).subspan(i));
                break;
            }
        if (metrics_) metrics_->waiting_for_memory = memory_wait_.head ? 1 : 0;
    }

    /// Takes the cancelled and late jobs out of the queue into `dropped`, and the jobs that may join
    /// now from its head into `joining`: none while the head waits for memory and no sequence has
    /// ended since it was deferred.
    void take_queued(clock::time_point now, std::vector<std::shared_ptr<job>>& joining, std::vector<std::shared_ptr<job>>& dropped) {
        const std::lock_guard lock(m_);
        std::erase_if(queue_, [&](std::shared_ptr<job>& j) {
            if (!j->cancel && now < j->deadline) return false;
            dropped.push_back(std::move(j));
            return true;
        });
        if (memory_wait_.head) {
            const bool still_waits = !queue_.empty() && queue_.front().get() == memory_wait_.head;
            if (still_waits && running_.size() >= memory_wait_.running) return;  // nothing freed its memory yet
            memory_wait_ = {};  // it left the queue, or a sequence ended: the head is tried again
        }
        while (!queue_.empty() && running_.size() + joining.size() < limits_.max_active) {
            joining.push_back(std::move(queue_.front()));
            queue_.pop_front();
        }
        running_count_ = running_.size() + joining.size();
    }

    /// Adds `j` to the engine. False when the engine refuses it for memory while other sequences run
    /// and may_fit_later: it waits (the caller defers it). Otherwise refused for memory naming
    /// gen_length (the server's 400 naming max_tokens). Any other refusal or failure ends it too.
    bool join(const std::shared_ptr<job>& j, clock::time_point now) {
        try {
            generation_options options = j->options;  // a deferred job draws its seed when it joins, not before
            if (j->draw_seed) options.seed = sequence_seed(j->options.seed, unseeded_);
            const sequence_id id = engine_.add(j->prompt, options, j->policies);
            unseeded_ += j->draw_seed;
            running_.emplace(id, j);
            {
                const std::lock_guard lock(j->m);
                j->joined = true;
                ++j->version;
            }
            j->cv.notify_all();
            if (metrics_) {
                const double waited = std::chrono::duration<double>(now - j->received).count();
                metrics_->queue_wait.observe(waited);
                metrics_->vllm.queue_time.observe(waited);
                metrics_->vllm.prompt_tokens += j->prompt.size();
            }
        } catch (const invalid_parameter& e) {
            finish(*j, job_end::refused, e.parameter(), e.rule());
        } catch (const memory_error& e) {  // engine/prepare.hpp weighs its canvas, K/V stores and logits rows beside what the running sequences hold
            if (may_fit_later(e)) return false;
            finish(*j, job_end::refused, "gen_length", e.what());
        } catch (const std::exception& e) {
            finish(*j, job_end::failed, {}, e.what());
        }
        return true;
    }

    /// Whether a job refused for `e` may fit once running sequences end: some run (the scheduler's and
    /// the engine's), and what they hold with what the prompt cache could free where memory is short
    /// would cover the shortfall (the engine evicts cached blocks itself when they alone cover it:
    /// engine::add). Otherwise waiting would only hold the queue behind a job that cannot fit.
    [[nodiscard]] bool may_fit_later(const memory_error& e) const {
        if (running_.empty() || engine_.idle()) return false;
        return e.short_by() <= dlm::detail::saturating_add(engine_.held_bytes(e.where()), engine_.evictable_bytes(e.where()));
    }

    /// Puts `rest` back at the queue's head, in order: its first job, which the engine refused for
    /// memory while the running sequences held it, then those taken behind it. They wait there (their
    /// cancel and deadline still apply) until a running sequence ends.
    void defer(std::span<std::shared_ptr<job>> rest) {
        const std::lock_guard lock(m_);
        memory_wait_ = {rest.front().get(), running_.size()};
        queue_.insert(queue_.begin(), std::make_move_iterator(rest.begin()), std::make_move_iterator(rest.end()));
        running_count_ = running_.size();
        if (metrics_) ++metrics_->memory_deferrals;
    }

    /// Publishes each running job's committed prefix (and canvas), and hands back finished results.
    void publish() {
        const auto now = clock::now();
        for (auto& [id, j] : running_) {
            ++j->stepped;
            const auto prefix = engine_.committed_prefix(id);
            record_tokens(*j, prefix, now);
            if (!j->want_updates && !j->want_canvas) continue;  // waits for the end only: no wake-up per forward
            if (prefix.size() == j->prefix.size() && !j->want_canvas) continue;
            {
                const std::lock_guard lock(j->m);
                j->prefix.assign(prefix.begin(), prefix.end());
                if (j->want_canvas) {
                    const auto canvas = engine_.canvas(id).subspan(j->prompt.size());
                    j->canvas.assign(canvas.begin(), canvas.end());
                }
                j->forwards = j->stepped;
                ++j->version;
            }
            j->cv.notify_all();
        }
        for (auto& [id, result] : engine_.take_finished()) {
            const auto it = running_.find(id);
            if (it == running_.end()) continue;
            job& j = *it->second;
            {
                const std::lock_guard lock(j.m);
                j.prefix.assign(result.tokens.begin(), result.tokens.begin() + result.answer_length);
                j.forwards = j.stepped;
                j.end = timed_out_.erase(id) ? job_end::timed_out : job_end::finished;
                record_end(j, result, now);
                j.result = std::move(result);
                ++j.version;
            }
            j.cv.notify_all();
            running_.erase(it);
        }
    }

    /// The answer tokens of committed prefix `prefix`: before the first EOS, at most max_tokens (the
    /// tokens before j.committed hold no EOS, so the search starts there).
    static std::size_t answer_tokens(const job& j, std::span<const token_id> prefix) {
        const std::size_t n = j.max_tokens > 0 ? std::min(prefix.size(), j.max_tokens) : prefix.size();
        const auto end = prefix.begin() + static_cast<std::ptrdiff_t>(n);
        const auto eos = std::find_first_of(prefix.begin() + static_cast<std::ptrdiff_t>(std::min(j.committed, n)), end, j.eos_ids.begin(),
                                            j.eos_ids.end());
        return static_cast<std::size_t>(eos - prefix.begin());
    }

    /// vLLM's token timings: the first answer token committed in order (time to first token), then
    /// the time between forwards that grew the answer (inter-token latency); EOS and the slots after
    /// it are no answer tokens.
    void record_tokens(job& j, std::span<const token_id> prefix, clock::time_point now) {
        if (!metrics_) return;
        const std::size_t committed = answer_tokens(j, prefix);
        if (committed <= j.committed) return;
        if (j.committed == 0) metrics_->vllm.first_token.observe(std::chrono::duration<double>(now - j.received).count());
        else metrics_->vllm.inter_token.observe(std::chrono::duration<double>(now - j.last_token).count());
        j.committed = committed;
        j.last_token = now;
    }

    /// vLLM's end-of-request figures, for a sequence the engine handed back (a failed one is no success).
    void record_end(const job& j, const sequence_result& r, clock::time_point now) {
        if (!metrics_ || r.failed()) return;
        const std::size_t cap = j.max_tokens > 0 ? j.max_tokens : r.tokens.size();
        const auto answer = static_cast<std::size_t>(r.answer_length);
        metrics_->vllm.e2e.observe(std::chrono::duration<double>(now - j.received).count());
        if (r.cancelled() || j.end == job_end::timed_out) {
            const bool stopped = j.stop_string && j.end != job_end::timed_out;
            metrics_->vllm.generation_tokens += stopped ? j.stop_tokens.load() : std::min(j.committed, cap);
            metrics_->vllm.finish(stopped ? finish_reason::stop : finish_reason::abort);
            return;
        }
        const std::size_t shown = std::min(answer, cap);
        // A stop string the sequence finished with (in the forward that completed it): as the client is told.
        const std::optional<std::size_t> cut = j.billed ? j.billed(std::span(r.tokens).first(shown)) : std::nullopt;
        metrics_->vllm.generation_tokens += cut.value_or(shown);
        metrics_->vllm.finish(cut || (answer < r.tokens.size() && answer <= cap) ? finish_reason::stop : finish_reason::length);
    }

    /// The running count submit() reads, after the engine thread changed running_.
    void sync_running() {
        active_ = running_.size();
        const std::lock_guard lock(m_);
        running_count_ = running_.size();
    }

    void run() {
        for (;;) {
            {
                std::unique_lock lock(m_);
                cv_.wait_for(lock, std::chrono::milliseconds(50), [&] { return stopping_ || !queue_.empty() || !running_.empty(); });
                if (stopping_) break;
            }
            const auto now = clock::now();
            admit(now);
            for (auto& [id, j] : running_) {
                const bool late = now >= j->deadline;
                if (late) timed_out_.insert(id);
                if (late || j->cancel) {
                    engine_.cancel(id);
                    if (metrics_) ++metrics_->sequences_cancelled;
                }
            }
            sync_running();
            try {
                if (!engine_.idle()) {
                    engine_.step();
                    if (metrics_) ++metrics_->forwards;
                }
                // After the step, and after a join (admit) that evicted cached blocks yet was refused.
                if (const auto* pc = engine_.prompt_cache(); pc && metrics_) metrics_->prompt_cache.copy_from(*pc);
                publish();
            } catch (const std::exception& e) {  // the model's forward itself failed: every running job ends
                for (auto& [id, j] : running_) {
                    engine_.cancel(id);
                    finish(*j, job_end::failed, {}, e.what());
                }
                running_.clear();
                (void)engine_.take_finished();
            }
            sync_running();
        }
        // Stopping: everything still here ends.
        std::deque<std::shared_ptr<job>> left;
        {
            const std::lock_guard lock(m_);
            left.swap(queue_);
        }
        for (auto& j : left) finish(*j, job_end::failed, {}, "the server is stopping");
        memory_wait_ = {};
        if (metrics_) metrics_->waiting_for_memory = 0;
        for (auto& [id, j] : running_) {
            engine_.cancel(id);
            finish(*j, job_end::failed, {}, "the server is stopping");
        }
        running_.clear();
    }

    Engine& engine_;
    scheduler_limits limits_;
    metrics* metrics_;
    mutable std::mutex m_;
    std::condition_variable cv_;
    std::deque<std::shared_ptr<job>> queue_;
    bool stopping_ = false;
    std::size_t running_count_ = 0;  ///< under m_: jobs taken from the queue and not yet ended
    std::atomic<std::size_t> active_{0};
    // Engine thread only.
    std::map<sequence_id, std::shared_ptr<job>> running_;
    std::set<sequence_id> timed_out_;
    /// The queue's head, refused for memory while `running` sequences ran: neither it nor any job
    /// behind it joins until fewer run (none joins meanwhile, so only an end makes them fewer).
    struct memory_wait {
        const job* head = nullptr;  ///< null: no job waits for memory
        std::size_t running = 0;
    };
    memory_wait memory_wait_;
    std::uint64_t unseeded_ = 0;  ///< jobs with draw_seed the engine has accepted
    std::thread thread_;
};

}  // namespace dlm::server
