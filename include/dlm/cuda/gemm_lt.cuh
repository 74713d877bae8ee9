// dlm/cuda/gemm_lt.cuh — the linear layers through cublasLt, planned once per shape.
//
//   y[m × n] (f32) = x[m × k] (T) · W[n × k]ᵀ (T) + beta · y
//
// The same math as gemm.cuh's cublasGemmEx (inputs T, output f32, CUBLAS_COMPUTE_32F, yᵀ = W · xᵀ with W
// transposed in place), but the algorithm is chosen by the library's heuristic for the exact (m, n, k,
// T, beta) and cached: the first product of a shape creates its descriptors and asks
// cublasLtMatmulAlgoGetHeuristic once; later products of that shape reuse them (no planning per call,
// nothing allocated: the workspace is the stream_context's cuBLAS workspace, in stream order with it).
//
// Determinism: the heuristic is a function of the shape, the types, the preference and the device
// (and the library version), and the plan takes its first answer, so a shape always runs the same
// algorithm. What could make one algorithm's result vary from run to run is a split-K reduction in an
// unordered way. The preference restricts the reduction schemes to the documented ordered ones
// (CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK = NONE | INPLACE | COMPUTE_TYPE: in place means "counters
// in the workspace guarantee the sequentiality", compute type means partial results in the workspace
// reduced by a separate step), and the plan refuses (cuda_error) an algorithm whose configured scheme
// lies outside that mask, so a scheme added by a later library is not taken silently.
// dlm-bench-cuda --gemm-sweep also checks it: it runs each product twice and compares the bits.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include <cublasLt.h>

#include "element.cuh"
#include "runtime.cuh"

namespace dlm::cuda {

/// The configuration of the algorithm a plan uses (cublasLtMatmulAlgoConfigGetAttribute's numbers).
struct lt_algo_info {
    int id = -1, tile = -1, stages = -1, splitk = -1, reduction = -1, cluster = -1;
    [[nodiscard]] std::string to_string() const {
        return "algo " + std::to_string(id) + " tile " + std::to_string(tile) + " stages " + std::to_string(stages) + " splitK " +
               std::to_string(splitk) + " reduction " + std::to_string(reduction) + " cluster " + std::to_string(cluster);
    }
};

/// The reduction schemes a plan accepts (ordered ones only; see the header comment).
inline constexpr std::uint32_t lt_deterministic_reductions =
    CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_INPLACE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;

/// A cublasLt handle and the plans of the shapes it has run. Move-only; not thread-safe (one per model).
class lt_planner {
public:
    lt_planner() {
        cublasLtHandle_t h = nullptr;
        check(cublasLtCreate(&h), "cublasLtCreate");
        handle_.reset(h);
    }

    /// y (+)= x · Wᵀ on `ctx`'s stream, with its workspace.
    template <storage_element T>
    void run(const stream_context& ctx, index_t m, index_t n, index_t k, const T* x, const T* w, float* y, float beta, const char* what) {
        if (m == 0 || n == 0) return;
        const plan& p = plan_for(element<T>::cuda_type, m, n, k, beta, {alignment(w), alignment(x), alignment(y)}, what);
        const float alpha = 1.0f;
        const std::string call = "cublasLtMatmul (" + shape_string(what, m, n, k) + ")";
        check(cublasLtMatmul(handle_.get(), p.desc.get(), &alpha, w, p.a.get(), x, p.b.get(), &beta, y, p.c.get(), y, p.c.get(), &p.algo,
                             ctx.workspace(), stream_context::blas_workspace_bytes, ctx.stream()),
              call);
        check_launch(call, ctx.stream());
    }

    /// The algorithm the plan of this shape uses, for buffers at cudaMalloc's alignment (plans it if needed).
    template <storage_element T>
    [[nodiscard]] lt_algo_info algo_info(index_t m, index_t n, index_t k, float beta) {
        const plan& p = plan_for(element<T>::cuda_type, m, n, k, beta, {max_alignment, max_alignment, max_alignment}, "algo_info");
        lt_algo_info i;
        auto get = [&](cublasLtMatmulAlgoConfigAttributes_t a, int& out) {
            std::uint32_t v = 0;  // every attribute read here is 32-bit (uint32_t or int32_t)
            std::size_t written = 0;
            if (cublasLtMatmulAlgoConfigGetAttribute(&p.algo, a, &v, sizeof(v), &written) == CUBLAS_STATUS_SUCCESS) out = static_cast<int>(v);
        };
        get(CUBLASLT_ALGO_CONFIG_ID, i.id);
        get(CUBLASLT_ALGO_CONFIG_TILE_ID, i.tile);
        get(CUBLASLT_ALGO_CONFIG_STAGES_ID, i.stages);
        get(CUBLASLT_ALGO_CONFIG_SPLITK_NUM, i.splitk);
        get(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, i.reduction);
        get(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, i.cluster);
        return i;
    }

    /// Number of shapes planned so far.
    [[nodiscard]] std::size_t plans() const noexcept { return plans_.size(); }

private:
    struct handle_deleter {
        void operator()(cublasLtHandle_t h) const noexcept { (void)cublasLtDestroy(h); }
    };
    struct desc_deleter {
        void operator()(cublasLtMatmulDesc_t d) const noexcept { (void)cublasLtMatmulDescDestroy(d); }
    };
    struct layout_deleter {
        void operator()(cublasLtMatrixLayout_t l) const noexcept { (void)cublasLtMatrixLayoutDestroy(l); }
    };
    struct preference_deleter {
        void operator()(cublasLtMatmulPreference_t p) const noexcept { (void)cublasLtMatmulPreferenceDestroy(p); }
    };
    using layout_ptr = std::unique_ptr<std::remove_pointer_t<cublasLtMatrixLayout_t>, layout_deleter>;

    struct plan {
        std::unique_ptr<std::remove_pointer_t<cublasLtMatmulDesc_t>, desc_deleter> desc;
        layout_ptr a, b, c;  // W (column-major k × n, transposed), x (column-major k × m), y (column-major n × m)
        cublasLtMatmulAlgo_t algo{};
    };
    /// Byte alignments of W, x and y: an algorithm is planned for the alignment it will get (cublasLt
    /// otherwise assumes 256 bytes).
    using alignments = std::array<std::uint32_t, 3>;
    using key = std::tuple<int, index_t, index_t, index_t, bool, alignments>;  // type, m, n, k, beta != 0, alignments
    static constexpr std::uint32_t max_alignment = 256;

    static std::uint32_t alignment(const void* p) noexcept {
        const auto a = reinterpret_cast<std::uintptr_t>(p);
        const std::uintptr_t low = a & (~a + 1);  // the lowest set bit
        return a == 0 || low >= max_alignment ? max_alignment : static_cast<std::uint32_t>(low);
    }

    static std::string shape_string(const char* what, index_t m, index_t n, index_t k) {
        return std::string(what) + ", m " + std::to_string(m) + ", n " + std::to_string(n) + ", k " + std::to_string(k);
    }

    static layout_ptr layout(cudaDataType_t type, index_t rows, index_t cols, const std::string& shape) {
        cublasLtMatrixLayout_t l = nullptr;
        check(cublasLtMatrixLayoutCreate(&l, type, static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(cols), rows),
              "cublasLtMatrixLayoutCreate (" + shape + ")");
        return layout_ptr(l);
    }

    const plan& plan_for(cudaDataType_t type, index_t m, index_t n, index_t k, float beta, const alignments& align, const char* what) {
        const key kk{static_cast<int>(type), m, n, k, beta != 0.0f, align};
        if (const auto it = plans_.find(kk); it != plans_.end()) return it->second;
        const std::string shape = shape_string(what, m, n, k);
        plan p;
        cublasLtMatmulDesc_t d = nullptr;
        check(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate (" + shape + ")");
        p.desc.reset(d);
        const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
        check(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof(op_t)), "cublasLtMatmulDescSetAttribute (TRANSA)");
        check(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof(op_n)), "cublasLtMatmulDescSetAttribute (TRANSB)");
        p.a = layout(type, k, n, shape);
        p.b = layout(type, k, m, shape);
        p.c = layout(CUDA_R_32F, n, m, shape);
        cublasLtMatmulPreference_t pref_raw = nullptr;
        check(cublasLtMatmulPreferenceCreate(&pref_raw), "cublasLtMatmulPreferenceCreate");
        const std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>, preference_deleter> pref(pref_raw);
        const std::size_t bytes = stream_context::blas_workspace_bytes;
        check(cublasLtMatmulPreferenceSetAttribute(pref_raw, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof(bytes)),
              "cublasLtMatmulPreferenceSetAttribute (workspace)");
        const std::pair<cublasLtMatmulPreferenceAttributes_t, std::uint32_t> aligned[] = {{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align[0]},
                                                                                        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align[1]},
                                                                                        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align[2]},
                                                                                        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align[2]}};
        for (const auto& [attribute, bytes_aligned] : aligned)
            check(cublasLtMatmulPreferenceSetAttribute(pref_raw, attribute, &bytes_aligned, sizeof(bytes_aligned)),
                  "cublasLtMatmulPreferenceSetAttribute (alignment)");
        const std::uint32_t schemes = lt_deterministic_reductions;
        check(cublasLtMatmulPreferenceSetAttribute(pref_raw, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof(schemes)),
              "cublasLtMatmulPreferenceSetAttribute (reduction schemes)");
        cublasLtMatmulHeuristicResult_t result{};
        int found = 0;
        check(cublasLtMatmulAlgoGetHeuristic(handle_.get(), d, p.a.get(), p.b.get(), p.c.get(), p.c.get(), pref_raw, 1, &result, &found),
              "cublasLtMatmulAlgoGetHeuristic (" + shape + ")");
        if (found < 1 || result.state != CUBLAS_STATUS_SUCCESS)
            throw cuda_error("cublasLtMatmulAlgoGetHeuristic (" + shape + ")", "no algorithm for this shape with an ordered reduction");
        std::uint32_t scheme = 0;
        std::size_t written = 0;
        check(cublasLtMatmulAlgoConfigGetAttribute(&result.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof(scheme), &written),
              "cublasLtMatmulAlgoConfigGetAttribute (reduction scheme)");
        if ((scheme & ~lt_deterministic_reductions) != 0)
            throw cuda_error("cublasLt plan (" + shape + ")", "the heuristic chose reduction scheme " + std::to_string(scheme) +
                                                                  ", outside the ordered ones dlm accepts");
        p.algo = result.algo;
        return plans_.emplace(kk, std::move(p)).first->second;
    }

    std::unique_ptr<std::remove_pointer_t<cublasLtHandle_t>, handle_deleter> handle_;
    std::map<key, plan> plans_;
};

}  // namespace dlm::cuda
