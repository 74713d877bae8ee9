// dlm/server/metrics.hpp — dlm-server's counters, gauges and latency histograms, rendered in
// Prometheus' text exposition format (GET /metrics).
//
//   dlm::server::metrics m;
//   m.request("/v1/completions", 200);  m.completion_tokens += 12;  m.latency.observe(0.4);
//   std::string text = m.render(queue_length, active_sequences);
//
// Thread-safe: HTTP threads and the engine thread update it; counters are atomics, histograms and
// the per-route request counts take a lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
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

    /// The text lines of metric `name` (with its HELP and TYPE lines).
    [[nodiscard]] std::string render(const std::string& name, const std::string& help) const {
        const std::lock_guard lock(m_);
        std::string out = "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
        std::uint64_t cumulative = 0;
        for (std::size_t i = 0; i <= bounds_.size(); ++i) {
            cumulative += counts_[i];
            out += name + "_bucket{le=\"" + (i < bounds_.size() ? number(bounds_[i]) : std::string("+Inf")) + "\"} " +
                   std::to_string(cumulative) + "\n";
        }
        out += name + "_sum " + number(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
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

struct metrics {
    std::atomic<std::uint64_t> prompt_tokens{0};      ///< prompt tokens of the requests decoded
    std::atomic<std::uint64_t> completion_tokens{0};  ///< answer tokens sent
    std::atomic<std::uint64_t> forwards{0};           ///< batched model forwards the engine ran
    std::atomic<std::uint64_t> sequences_cancelled{0};  ///< freed early: client gone, timeout, stop string
    histogram latency{latency_buckets()};             ///< request received to last byte queued
    histogram first_text{latency_buckets()};          ///< request received to the first streamed text
    histogram queue_wait{latency_buckets()};          ///< request received to joining the batch

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
        out += latency.render("dlm_request_duration_seconds", "Time from receiving a request to its last byte.");
        out += first_text.render("dlm_time_to_first_text_seconds", "Time from receiving a streamed request to its first text.");
        out += queue_wait.render("dlm_queue_wait_seconds", "Time a request waited before joining the batch.");
        return out;
    }

private:
    mutable std::mutex m_;
    std::map<std::pair<std::string, int>, std::uint64_t> requests_;
};

}  // namespace dlm::server
