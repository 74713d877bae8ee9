// dlm/cuda/profiler.cuh — where a forward's time goes, phase by phase, measured with CUDA events.
//
//   dlm::cuda::forward_profiler prof;
//   model.set_profiler(&prof);                 // enqueue records an event after each phase
//   model.forward_device(requests, mask);
//   model.synchronize();
//   prof.collect();                            // adds this forward's phase times to the totals
//   model.set_profiler(nullptr);               // back to zero cost (one null test per phase)
//
// The time between two consecutive events is charged to the phase the later event closes, summed over
// layers (rms_norm counts both norms of each layer). Events are recorded on the model's stream between
// kernels, so they add a few microseconds each (about 10 per layer); not for use inside a CUDA graph
// capture (the device decoder's replays do not profile). Host code only.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime.cuh"

namespace dlm::cuda {

enum class forward_phase {
    upload,
    rope,
    embed,
    rms_norm,
    qkv_gemm,
    qkv_epilogue,
    attention,
    o_gemm,
    gate_up_gemm,
    silu,
    down_gemm,
    final_norm,
    head_gemm,
    count
};

inline constexpr std::array<std::string_view, static_cast<std::size_t>(forward_phase::count)> forward_phase_names{
    "metadata upload", "rope tables", "embed", "rms_norm", "q/k/v GEMM", "qkv_epilogue", "attention", "o GEMM", "gate/up GEMM", "silu", "down GEMM",
    "final norm", "head GEMM"};

class forward_profiler {
public:
    static constexpr std::size_t phases = static_cast<std::size_t>(forward_phase::count);

    /// Room for `max_marks` phase events per forward (a 28-layer forward records about 290).
    explicit forward_profiler(std::size_t max_marks = 2048) {
        events_.reserve(max_marks + 1);
        for (std::size_t i = 0; i <= max_marks; ++i) {
            cudaEvent_t e = nullptr;
            const cudaError_t s = cudaEventCreate(&e);
            if (s != cudaSuccess) {
                release();
                check(s, "cudaEventCreate (forward_profiler)");
            }
            events_.push_back(e);
        }
    }
    forward_profiler(const forward_profiler&) = delete;
    forward_profiler& operator=(const forward_profiler&) = delete;
    ~forward_profiler() { release(); }

    /// Starts a forward: the next mark measures from here.
    void begin(cudaStream_t stream) {
        marks_.clear();
        check(cudaEventRecord(events_[0], stream), "cudaEventRecord (forward_profiler)");
    }
    /// Closes phase `p`: the time since the previous event is charged to it. Throws cuda_error when a
    /// forward records more marks than the profiler was made for.
    void mark(forward_phase p, cudaStream_t stream) {
        if (marks_.size() + 1 >= events_.size())
            throw cuda_error("forward_profiler::mark", "more than " + std::to_string(events_.size() - 1) + " phase events in one forward");
        check(cudaEventRecord(events_[marks_.size() + 1], stream), "cudaEventRecord (forward_profiler)");
        marks_.push_back(p);
    }
    /// After the forward's stream is synchronised: adds its phase times to the totals (one forward more).
    void collect() {
        for (std::size_t i = 0; i < marks_.size(); ++i) {
            float ms = 0;
            check(cudaEventElapsedTime(&ms, events_[i], events_[i + 1]), "cudaEventElapsedTime (forward_profiler)");
            total_ms_[static_cast<std::size_t>(marks_[i])] += ms;
        }
        marks_.clear();
        ++forwards_;
    }
    /// Milliseconds per forward in each phase, averaged over the collected forwards.
    [[nodiscard]] std::array<double, phases> phase_ms() const {
        std::array<double, phases> r{};
        for (std::size_t i = 0; i < phases; ++i) r[i] = forwards_ ? total_ms_[i] / forwards_ : 0.0;
        return r;
    }
    [[nodiscard]] int forwards() const noexcept { return forwards_; }
    void reset() noexcept {
        total_ms_ = {};
        forwards_ = 0;
        marks_.clear();
    }

private:
    void release() noexcept {
        for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
        events_.clear();
    }
    std::vector<cudaEvent_t> events_;
    std::vector<forward_phase> marks_;
    std::array<double, phases> total_ms_{};
    int forwards_ = 0;
};

}  // namespace dlm::cuda
