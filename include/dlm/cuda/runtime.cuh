// dlm/cuda/runtime.cuh — the CUDA runtime pieces every other CUDA header uses: the typed error, status
// checks that name the call that failed, device and pinned buffers, a stream and a cuBLAS handle.
//
// Everything here is host code. A failed CUDA or cuBLAS call throws dlm::cuda::cuda_error, a dlm::error,
// naming the call ("cudaMalloc of 1.2 GB for the KV cache") and the status the runtime returned.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <utility>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "../core/error.hpp"
#include "attention_path.cuh"
#include "gemm_path.cuh"

namespace dlm::cuda {

/// A CUDA runtime or cuBLAS call failed (no device, out of memory, a kernel fault, ...).
class cuda_error : public error {
public:
    cuda_error(std::string call, const std::string& status)
        : error("CUDA: " + call + " failed: " + status), call_(std::move(call)) {}
    /// The call that failed, with what it was for.
    [[nodiscard]] const std::string& call() const noexcept { return call_; }

private:
    std::string call_;
};

/// Throws cuda_error unless `status` is cudaSuccess.
inline void check(cudaError_t status, const std::string& call) {
    if (status != cudaSuccess)
        throw cuda_error(call, std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) + ")");
}

/// Throws cuda_error unless `status` is CUBLAS_STATUS_SUCCESS.
inline void check(cublasStatus_t status, const std::string& call) {
    if (status != CUBLAS_STATUS_SUCCESS) throw cuda_error(call, cublasGetStatusString(status));
}

/// Whether a value of DLM_CUDA_SYNC asks for the debug mode: set, non-empty and not "0".
[[nodiscard]] inline bool sync_requested(const char* value) noexcept { return value && *value && std::strcmp(value, "0") != 0; }

/// The debug mode (environment variable DLM_CUDA_SYNC=1, read once): every kernel launch and cuBLAS
/// product is followed by a synchronisation of its stream, so a fault is reported by the kernel that
/// caused it instead of by the next synchronisation. Slow; for finding faults only.
[[nodiscard]] inline bool sync_after_launch() noexcept {
    static const bool on = sync_requested(std::getenv("DLM_CUDA_SYNC"));
    return on;
}

/// The last kernel (or cuBLAS product) this thread enqueued: named by synchronisation errors, since a
/// fault surfaces only when the stream is next synchronised.
[[nodiscard]] inline std::string& last_launch() noexcept {
    thread_local std::string name;
    return name;
}

/// After a kernel launch (or a library call that enqueues work) on `stream`: throws cuda_error naming
/// `kernel` if the launch failed (bad configuration, too much shared memory), and, in the debug mode
/// (DLM_CUDA_SYNC=1), if the kernel itself faulted.
inline void check_launch(const std::string& kernel, cudaStream_t stream) {
    check(cudaGetLastError(), "launching " + kernel);
    last_launch() = kernel;
    if (sync_after_launch()) check(cudaStreamSynchronize(stream), kernel + " (DLM_CUDA_SYNC: synchronised after its launch)");
}

/// Waits for `stream`; a fault of an earlier kernel throws cuda_error naming `what`, the last kernel
/// enqueued, and the debug mode that names the faulting one.
inline void synchronize(cudaStream_t stream, const std::string& what) {
    const cudaError_t status = cudaStreamSynchronize(stream);
    if (status == cudaSuccess) return;
    const std::string& last = last_launch();
    check(status, "cudaStreamSynchronize (" + what + "; a kernel enqueued since the previous synchronisation failed" +
                      (last.empty() ? std::string() : ", the last one enqueued was " + last) +
                      "; run with DLM_CUDA_SYNC=1 to name the kernel that faulted)");
}

/// Number of usable CUDA devices; 0 when there is no driver, no device, or the driver is too old
/// for this runtime (the error is cleared, so later calls do not see it).
[[nodiscard]] inline int device_count() noexcept {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

/// "1.50 GB": a byte count as error messages print it.
[[nodiscard]] inline std::string byte_string(std::size_t bytes) {
    const double gb = static_cast<double>(bytes) / 1e9;
    const std::string s = std::to_string(gb);
    return s.substr(0, s.find('.') + 3) + " GB";
}

/// Device memory for `size()` elements of T. Move-only; grows with `reserve` (contents not kept).
template <class T>
class device_buffer {
public:
    device_buffer() = default;
    explicit device_buffer(std::size_t n, const char* what = "a device buffer") { reserve(n, what); }
    device_buffer(const device_buffer&) = delete;
    device_buffer& operator=(const device_buffer&) = delete;
    device_buffer(device_buffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
    device_buffer& operator=(device_buffer&& o) noexcept {
        if (this != &o) {
            release();
            p_ = std::exchange(o.p_, nullptr);
            n_ = std::exchange(o.n_, 0);
        }
        return *this;
    }
    ~device_buffer() { release(); }

    /// Makes room for at least `n` elements; reallocates (losing the contents) only when it grows.
    void reserve(std::size_t n, const char* what = "a device buffer") {
        if (n <= n_) return;
        release();
        void* p = nullptr;
        check(cudaMalloc(&p, n * sizeof(T)), std::string("cudaMalloc of ") + byte_string(n * sizeof(T)) + " for " + what);
        p_ = static_cast<T*>(p);
        n_ = n;
    }
    /// Sets every byte to zero, in order on `stream` (the stream that will use the buffer: a memset on
    /// the legacy default stream is not ordered with a non-blocking stream's work).
    void zero(cudaStream_t stream, const char* what = "a device buffer") {
        if (n_) check(cudaMemsetAsync(p_, 0, n_ * sizeof(T), stream), std::string("cudaMemsetAsync (zeroing ") + what + ")");
    }

    [[nodiscard]] T* data() noexcept { return p_; }
    [[nodiscard]] const T* data() const noexcept { return p_; }
    [[nodiscard]] std::size_t size() const noexcept { return n_; }
    [[nodiscard]] bool empty() const noexcept { return n_ == 0; }

private:
    void release() noexcept {
        if (p_) (void)cudaFree(p_);
        p_ = nullptr;
        n_ = 0;
    }
    T* p_ = nullptr;
    std::size_t n_ = 0;
};

/// Page-locked host memory (for asynchronous copies). Move-only; grows like device_buffer.
template <class T>
class pinned_buffer {
public:
    pinned_buffer() = default;
    pinned_buffer(const pinned_buffer&) = delete;
    pinned_buffer& operator=(const pinned_buffer&) = delete;
    pinned_buffer(pinned_buffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
    pinned_buffer& operator=(pinned_buffer&& o) noexcept {
        if (this != &o) {
            release();
            p_ = std::exchange(o.p_, nullptr);
            n_ = std::exchange(o.n_, 0);
        }
        return *this;
    }
    ~pinned_buffer() { release(); }

    void reserve(std::size_t n) {
        if (n <= n_) return;
        release();
        void* p = nullptr;
        check(cudaMallocHost(&p, n * sizeof(T)), "cudaMallocHost of " + byte_string(n * sizeof(T)));
        p_ = static_cast<T*>(p);
        n_ = n;
    }
    [[nodiscard]] T* data() noexcept { return p_; }
    [[nodiscard]] const T* data() const noexcept { return p_; }
    [[nodiscard]] std::size_t size() const noexcept { return n_; }

private:
    void release() noexcept {
        if (p_) (void)cudaFreeHost(p_);
        p_ = nullptr;
        n_ = 0;
    }
    T* p_ = nullptr;
    std::size_t n_ = 0;
};

/// Multiprocessors of the current device (cudaDevAttrMultiProcessorCount).
[[nodiscard]] inline int multiprocessor_count() {
    int device = 0, count = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute (multiprocessor count)");
    return count;
}

/// A non-blocking CUDA stream with a cuBLAS handle bound to it, and the settings of which implementations
/// run its linear layers (gemm_path; from DLM_CUDA_GEMM when made) and its attention (attention_path;
/// from DLM_CUDA_ATTENTION). Move-only.
class stream_context {
public:
    stream_context() : gemm_path_(gemm_path_from_environment()), attention_path_(attention_path_from_environment()) {
        check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
        if (const cublasStatus_t s = cublasCreate(&blas_); s != CUBLAS_STATUS_SUCCESS) {
            (void)cudaStreamDestroy(stream_);
            check(s, "cublasCreate");
        }
        check(cublasSetStream(blas_, stream_), "cublasSetStream");
        // A workspace of its own, so cuBLAS allocates nothing while a CUDA graph is being captured.
        workspace_.reserve(blas_workspace_bytes, "the cuBLAS workspace");
        check(cublasSetWorkspace(blas_, workspace_.data(), blas_workspace_bytes), "cublasSetWorkspace");
    }
    static constexpr std::size_t blas_workspace_bytes = std::size_t{32} << 20;
    stream_context(const stream_context&) = delete;
    stream_context& operator=(const stream_context&) = delete;
    stream_context(stream_context&& o) noexcept
        : stream_(std::exchange(o.stream_, nullptr)), blas_(std::exchange(o.blas_, nullptr)), workspace_(std::move(o.workspace_)),
          gemm_path_(o.gemm_path_), attention_path_(o.attention_path_) {}
    stream_context& operator=(stream_context&& o) noexcept {
        if (this != &o) {
            release();
            stream_ = std::exchange(o.stream_, nullptr);
            blas_ = std::exchange(o.blas_, nullptr);
            workspace_ = std::move(o.workspace_);
            gemm_path_ = o.gemm_path_;
            attention_path_ = o.attention_path_;
        }
        return *this;
    }
    ~stream_context() { release(); }

    [[nodiscard]] cudaStream_t stream() const noexcept { return stream_; }
    [[nodiscard]] cublasHandle_t blas() const noexcept { return blas_; }
    /// The cuBLAS workspace (blas_workspace_bytes); cublasLt products on this stream use it too (in stream
    /// order with cuBLAS's, so they never overlap).
    [[nodiscard]] void* workspace() const noexcept { return const_cast<std::byte*>(workspace_.data()); }
    /// Which implementation runs the linear layers (gemm.cuh); DLM_CUDA_GEMM, or auto, when made.
    [[nodiscard]] cuda::gemm_path gemm_path() const noexcept { return gemm_path_; }
    void set_gemm_path(cuda::gemm_path p) noexcept { gemm_path_ = p; }
    /// Which kernel runs the attention (attention_path.cuh); DLM_CUDA_ATTENTION, or auto, when made.
    [[nodiscard]] cuda::attention_path attention_path() const noexcept { return attention_path_; }
    void set_attention_path(cuda::attention_path p) noexcept { attention_path_ = p; }
    /// Waits for everything enqueued so far; throws cuda_error if a kernel faulted (see cuda::synchronize).
    void synchronize(const std::string& what = "stream") const { cuda::synchronize(stream_, what); }

private:
    void release() noexcept {
        if (blas_) (void)cublasDestroy(blas_);
        if (stream_) (void)cudaStreamDestroy(stream_);
        blas_ = nullptr;
        stream_ = nullptr;
    }
    cudaStream_t stream_ = nullptr;
    cublasHandle_t blas_ = nullptr;
    device_buffer<std::byte> workspace_;
    cuda::gemm_path gemm_path_ = cuda::gemm_path::automatic;
    cuda::attention_path attention_path_ = cuda::attention_path::automatic;
};

/// Copies `n` elements host → device on `stream` (asynchronous when `src` is pinned).
template <class T>
void upload(T* dst, const T* src, std::size_t n, cudaStream_t stream, const char* what) {
    if (n) check(cudaMemcpyAsync(dst, src, n * sizeof(T), cudaMemcpyHostToDevice, stream), std::string("cudaMemcpyAsync (upload of ") + what + ")");
}

/// Copies `n` elements device → host on `stream`.
template <class T>
void download(T* dst, const T* src, std::size_t n, cudaStream_t stream, const char* what) {
    if (n) check(cudaMemcpyAsync(dst, src, n * sizeof(T), cudaMemcpyDeviceToHost, stream), std::string("cudaMemcpyAsync (download of ") + what + ")");
}

/// Blocks of `threads` covering `n` items.
[[nodiscard]] constexpr unsigned grid_for(std::size_t n, unsigned threads) noexcept {
    return static_cast<unsigned>((n + threads - 1) / threads);
}

}  // namespace dlm::cuda
