// dlm/cuda/graphs.cuh — a cache of CUDA graphs keyed by a step's shape and buffers: a body of work
// seen once with a key runs uncaptured; seen again, it is captured into a graph and replayed from
// then on. A capture the driver refuses turns graphs off (status() says why); work goes on without.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "runtime.cuh"

namespace dlm::cuda {

/// Whether a value of DLM_CUDA_GRAPHS turns the device decoder's CUDA graphs off ("0").
[[nodiscard]] inline bool graphs_refused(const char* value) noexcept { return value && std::string_view(value) == "0"; }

class graph_cache {
public:
    static constexpr std::size_t max_graphs = 16;

    /// On by default; off in the debug mode DLM_CUDA_SYNC=1 and with DLM_CUDA_GRAPHS=0.
    graph_cache() : on_(!sync_after_launch() && !graphs_refused(std::getenv("DLM_CUDA_GRAPHS"))) {}

    void enable(bool on) {
        on_ = on;
        if (!on_) graphs_.clear();
    }
    [[nodiscard]] bool enabled() const noexcept { return on_; }
    /// Bodies run by replaying a captured graph.
    [[nodiscard]] std::size_t replays() const noexcept { return replays_; }
    /// "" while graphs work (or are off by choice); else why a capture failed.
    [[nodiscard]] const std::string& status() const noexcept { return failure_; }

    /// Replays the graph captured for `key`, capturing `body` now if the key was seen once before;
    /// false when the body must run uncaptured (graphs off, first sight of the key, a failed capture).
    template <class Body>
    bool launch(const std::vector<std::uintptr_t>& key, Body&& body, cudaStream_t stream) {
        if (!on_) return false;
        for (entry& g : graphs_) {
            if (g.key != key) continue;
            if (!g.exec && !(g.exec = capture(body, stream))) return false;
            check(cudaGraphLaunch(g.exec.get(), stream), "cudaGraphLaunch (decoding step)");
            ++replays_;
            return true;
        }
        if (graphs_.size() >= max_graphs) graphs_.erase(graphs_.begin());
        graphs_.push_back({key, nullptr});
        return false;
    }

private:
    struct deleter {
        void operator()(cudaGraphExec_t e) const noexcept { (void)cudaGraphExecDestroy(e); }
    };
    using exec_ptr = std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, deleter>;
    struct entry {
        std::vector<std::uintptr_t> key;
        exec_ptr exec;
    };

    /// Captures `body` on `stream` into an executable graph; on a CUDA error, turns graphs off (keeping
    /// the reason) and returns null. Nothing captured has run.
    template <class Body>
    exec_ptr capture(Body& body, cudaStream_t stream) {
        cudaGraph_t graph = nullptr;
        const auto drop = [&graph] {
            if (graph) (void)cudaGraphDestroy(graph);
            graph = nullptr;
        };
        try {
            check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture (decoding step)");
            try {
                body();
            } catch (...) {
                (void)cudaStreamEndCapture(stream, &graph);
                drop();
                throw;
            }
            check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture (decoding step)");
            cudaGraphExec_t exec = nullptr;
            check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate (decoding step)");
            drop();
            return exec_ptr(exec);
        } catch (const cuda_error& e) {
            drop();
            (void)cudaGetLastError();
            on_ = false;
            failure_ = std::string("CUDA graphs turned off: ") + e.what();
            return nullptr;
        }
    }

    bool on_;
    std::vector<entry> graphs_;
    std::size_t replays_ = 0;
    std::string failure_;
};

}  // namespace dlm::cuda
