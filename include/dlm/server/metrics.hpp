// dlm/server/metrics.hpp — dlm-server's counters, gauges and latency histograms, rendered in
// Prometheus' text exposition format (GET /metrics): dlm's own (dlm_*), and beside them the names
// vLLM exposes (vllm:*, with vLLM's bucket bounds and its model_name label), so that dashboards and
// routers written for vLLM read dlm-server as they read vLLM.
//
//   dlm::server::metrics m;
//   m.request("/v1/completions", 200);  m.completion_tokens += 12;  m.latency.observe(0.4);
//   std::string text = m.render(queue_length, active_sequences);
//
// Thread-safe: HTTP threads and the engine thread update it; counters are atomics, histograms and
// the per-route request counts take a lock. The vllm:* figures are recorded by the scheduler
// (scheduler.hpp), at forward boundaries.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlm::server {

/// A Prometheus histogram: cumulative counts per upper bound ("le"), their sum and count.
class histogram {
public:
    explicit histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

    void observe(double v) {
        const std::lock_guard lock(m_);
        std::size_t i = 0;
        while (i < bounds_.size() && v > bounds_[i]) ++i;
        ++counts_[i];
        sum_ += v;
        ++count_;
    }

    /// The text lines of metric `name` (with its HELP and TYPE lines); `labels` (`model_name="x"`,
    /// already escaped) go on every line.
    [[nodiscard]] std::string render(const std::string& name, const std::string& help, const std::string& labels = {}) const {
        const std::lock_guard lock(m_);
        std::string out = "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
        const std::string before_le = labels.empty() ? "{" : "{" + labels + ",";
        const std::string own = labels.empty() ? "" : "{" + labels + "}";
        std::uint64_t cumulative = 0;
        for (std::size_t i = 0; i <= bounds_.size(); ++i) {
            cumulative += counts_[i];
            out += name + "_bucket" + before_le + "le=\"" + (i < bounds_.size() ? number(bounds_[i]) : std::string("+Inf")) + "\"} " +
                   std::to_string(cumulative) + "\n";
        }
        out += name + "_sum" + own + " " + number(sum_) + "\n" + name + "_count" + own + " " + std::to_string(count_) + "\n";
        return out;
    }

    [[nodiscard]] std::uint64_t count() const {
        const std::lock_guard lock(m_);
        return count_;
    }

    [[nodiscard]] static std::string number(double v) {
        char b[40];
        std::snprintf(b, sizeof b, "%.9g", v);
        return b;
    }

private:
    mutable std::mutex m_;
    std::vector<double> bounds_;
    std::vector<std::uint64_t> counts_;
    double sum_ = 0;
    std::uint64_t count_ = 0;
};

/// Seconds from 5 ms to 5 minutes, roughly ×2.5 apart.
[[nodiscard]] inline std::vector<double> latency_buckets() {
    return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60, 120, 300};
}

/// vLLM's bounds (vllm/v1/metrics/loggers.py): time to first token,
[[nodiscard]] inline std::vector<double> vllm_first_token_buckets() {
    return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}
/// time between tokens (inter_token_latency, time_per_output_token),
[[nodiscard]] inline std::vector<double> vllm_token_latency_buckets() {
    return {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
}
/// and whole requests (e2e_request_latency, request_queue_time).
[[nodiscard]] inline std::vector<double> vllm_request_latency_buckets() {
    return {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}

/// `v` as a Prometheus label value: backslash, double quote and newline escaped.
[[nodiscard]] inline std::string label_value(std::string_view v) {
    std::string out;
    for (const char c : v) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') out += "\\n";
        else out += c;
    }
    return out;
}

/// Why a sequence ended, as vLLM's finished_reason label says it.
enum class finish_reason { stop, length, abort };

/// What vLLM's engine metrics count, recorded by the scheduler at forward boundaries. A "token" is
/// an answer token the engine committed in order (the committed prefix: what a stream can send),
/// before the first EOS and within max_tokens.
struct vllm_stats {
    std::atomic<std::uint64_t> prompt_tokens{0};      ///< vllm:prompt_tokens: prompts of the sequences that joined the batch
    std::atomic<std::uint64_t> generation_tokens{0};  ///< vllm:generation_tokens: answer tokens of the ended sequences
    std::atomic<std::uint64_t> finished[3] = {0, 0, 0};  ///< vllm:request_success by finish_reason
    histogram first_token{vllm_first_token_buckets()};     ///< received to the first answer token committed
    histogram inter_token{vllm_token_latency_buckets()};   ///< between forwards that grew the committed prefix
    histogram e2e{vllm_request_latency_buckets()};         ///< received to the sequence's end
    histogram queue_time{vllm_request_latency_buckets()};  ///< received to joining the batch

    void finish(finish_reason why) { ++finished[static_cast<int>(why)]; }
};

/// The prompt cache's figures (dlm/cache/prompt_cache.hpp), copied by the scheduler after each forward
/// (the cache is the engine's, read on the engine thread only); rendered only when the server keeps one.
struct prompt_cache_figures {
    std::atomic<bool> enabled{false};
    std::atomic<std::uint64_t> queried_tokens{0}, hit_tokens{0}, evicted_tokens{0}, bytes{0}, capacity_bytes{0}, blocks{0};
    std::atomic<std::uint64_t> room_evictions{0};  ///< times unpinned blocks were evicted to make room for a request refused for memory

    template <class PromptCache>
    void copy_from(const PromptCache& pc) {
        enabled = true;
        queried_tokens = pc.stats().queried_tokens;
        hit_tokens = pc.stats().hit_tokens;
        evicted_tokens = pc.stats().evicted_tokens;
        room_evictions = pc.stats().room_evictions;
        bytes = pc.bytes();
        capacity_bytes = pc.capacity_bytes();
        blocks = pc.blocks();
    }
};

struct metrics {
    std::atomic<std::uint64_t> prompt_tokens{0};      ///< prompt tokens of the requests decoded
    std::atomic<std::uint64_t> completion_tokens{0};  ///< answer tokens sent
    std::atomic<std::uint64_t> forwards{0};           ///< batched model forwards the engine ran
    std::atomic<std::uint64_t> sequences_cancelled{0};  ///< freed early: client gone, timeout, stop string
    std::atomic<std::uint64_t> memory_deferrals{0};   ///< joins the engine refused for memory while others ran: the request waited
    std::atomic<std::size_t> waiting_for_memory{0};   ///< 1 while the queue's head waits for a running sequence to free memory
    histogram latency{latency_buckets()};             ///< request received to last byte queued
    histogram first_text{latency_buckets()};          ///< request received to the first streamed text
    histogram queue_wait{latency_buckets()};          ///< request received to joining the batch
    vllm_stats vllm;                                  ///< vLLM's names (the scheduler records them)
    prompt_cache_figures prompt_cache;                ///< the prompt cache's, when the server keeps one
    std::string model_name = "dlm";                   ///< the model_name label of the vllm: metrics (dlm-server: the model's id)
    std::size_t batch_capacity = 0;                   ///< sequences the batch holds at most (-np); 0: no vllm:kv_cache_usage_perc

    /// Counts one answered request by route and HTTP status.
    void request(const std::string& route, int status) {
        const std::lock_guard lock(m_);
        ++requests_[{route, status}];
    }

    /// Every metric in Prometheus' text format; the two gauges are read by the caller.
    [[nodiscard]] std::string render(std::size_t queue_length, std::size_t active_sequences) const {
        std::string out = "# HELP dlm_requests_total HTTP requests answered, by route and status.\n# TYPE dlm_requests_total counter\n";
        {
            const std::lock_guard lock(m_);
            for (const auto& [key, n] : requests_)
                out += "dlm_requests_total{route=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"} " + std::to_string(n) + "\n";
        }
        const auto counter = [&](const char* name, const char* help, std::uint64_t v) {
            out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n" + name + " " + std::to_string(v) + "\n";
        };
        const auto gauge = [&](const char* name, const char* help, std::size_t v) {
            out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n" + name + " " + std::to_string(v) + "\n";
        };
        counter("dlm_prompt_tokens_total", "Prompt tokens of the requests decoded.", prompt_tokens);
        counter("dlm_completion_tokens_total", "Answer tokens sent.", completion_tokens);
        counter("dlm_forwards_total", "Batched model forwards run by the engine.", forwards);
        counter("dlm_sequences_cancelled_total", "Sequences freed before the end (client gone, timeout, stop string).", sequences_cancelled);
        gauge("dlm_queue_length", "Requests waiting to join the batch.", queue_length);
        gauge("dlm_active_sequences", "Sequences in the running batch.", active_sequences);
        gauge("dlm_requests_waiting_for_memory",
              "Requests at the head of the queue waiting for a running sequence to free memory (0 or 1: those behind it wait in order).",
              waiting_for_memory);
        counter("dlm_memory_deferrals_total", "Times a request's join was deferred because memory was short while other sequences ran.",
                memory_deferrals);
        counter("dlm_memory_evictions_total",
                "Times prompt-cache blocks were evicted to make room for a request refused for memory.",
                prompt_cache.room_evictions);
        out += latency.render("dlm_request_duration_seconds", "Time from receiving a request to its last byte.");
        out += first_text.render("dlm_time_to_first_text_seconds", "Time from receiving a streamed request to its first text.");
        out += queue_wait.render("dlm_queue_wait_seconds", "Time a request waited before joining the batch.");
        return out + render_vllm(queue_length, active_sequences);
    }

    /// The vllm:* lines alone: vLLM's names, types, bucket bounds and model_name label.
    [[nodiscard]] std::string render_vllm(std::size_t queue_length, std::size_t active_sequences) const {
        const std::string labels = "model_name=\"" + label_value(model_name) + "\"";
        std::string out;
        const auto head = [&](const char* name, const char* help, const char* type) {
            out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
        };
        const auto sample = [&](const char* name, const std::string& extra, std::uint64_t v) {
            out += std::string(name) + "{" + labels + extra + "} " + std::to_string(v) + "\n";
        };
        head("vllm:num_requests_running", "Number of requests in model execution batches.", "gauge");
        sample("vllm:num_requests_running", "", active_sequences);
        head("vllm:num_requests_waiting", "Number of requests waiting to be processed.", "gauge");
        sample("vllm:num_requests_waiting", "", queue_length);
        if (batch_capacity > 0) {
            // dlm keeps no block pool: a sequence's K/V is allocated with it, and what makes a request
            // wait is the batch's bound (-np). Its occupancy is the usage a router balances on: 1 when
            // the next request waits, as vLLM's is when no KV block is free.
            head("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", "gauge");
            out += "vllm:kv_cache_usage_perc{" + labels + "} " +
                   histogram::number(static_cast<double>(std::min(active_sequences, batch_capacity)) / static_cast<double>(batch_capacity)) + "\n";
        }
        head("vllm:prompt_tokens_total", "Number of prefill tokens processed.", "counter");
        sample("vllm:prompt_tokens_total", "", vllm.prompt_tokens);
        head("vllm:generation_tokens_total", "Number of generation tokens processed.", "counter");
        sample("vllm:generation_tokens_total", "", vllm.generation_tokens);
        head("vllm:request_success_total", "Count of successfully processed requests.", "counter");
        const char* reasons[] = {"stop", "length", "abort"};
        for (int i = 0; i < 3; ++i) sample("vllm:request_success_total", std::string(",finished_reason=\"") + reasons[i] + "\"", vllm.finished[i]);
        out += vllm.first_token.render("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", labels);
        out += vllm.inter_token.render("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", labels);
        // vLLM still emits the superseded name beside its replacement, with the same observations.
        out += vllm.inter_token.render("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.", labels);
        out += vllm.e2e.render("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", labels);
        out += vllm.queue_time.render("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", labels);
        if (!prompt_cache.enabled) return out;
        // vLLM counts its prefix cache in tokens under these two names; dlm's own beside them.
        head("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.", "counter");
        sample("vllm:prefix_cache_queries_total", "", prompt_cache.queried_tokens);
        head("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", "counter");
        sample("vllm:prefix_cache_hits_total", "", prompt_cache.hit_tokens);
        const auto plain = [&](const char* name, const char* help, const char* type, std::uint64_t v) {
            out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + std::to_string(v) + "\n";
        };
        plain("dlm_prompt_cache_query_tokens_total", "Prompt tokens looked up in the prompt cache.", "counter", prompt_cache.queried_tokens);
        plain("dlm_prompt_cache_hit_tokens_total", "Prompt tokens whose exact K/V came from the prompt cache.", "counter", prompt_cache.hit_tokens);
        plain("dlm_prompt_cache_evicted_tokens_total",
              "Tokens evicted from the prompt cache: to stay within its bound, or to make room for a request refused for memory.", "counter",
              prompt_cache.evicted_tokens);
        plain("dlm_prompt_cache_bytes", "Bytes the prompt cache holds.", "gauge", prompt_cache.bytes);
        plain("dlm_prompt_cache_capacity_bytes", "The prompt cache's bound (--prompt-cache).", "gauge", prompt_cache.capacity_bytes);
        plain("dlm_prompt_cache_blocks", "Token blocks the prompt cache holds.", "gauge", prompt_cache.blocks);
        return out;
    }

private:
    mutable std::mutex m_;
    std::map<std::pair<std::string, int>, std::uint64_t> requests_;
};

}  // namespace dlm::server
