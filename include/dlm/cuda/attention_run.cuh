// dlm/cuda/attention_run.cuh — the attention of one layer: the kernel attention_path.cuh chooses (the
// CUDA-core kernel, attention.cuh, or the tensor-core one, attention_tc.cuh), specialised for the head
// size, and the merge of its key splits.
#pragma once

#include <type_traits>

#include "../mask/concept.hpp"
#include "attention.cuh"
#include "attention_path.cuh"
#include "attention_tc.cuh"

namespace dlm::cuda::kernels {

/// The CUDA-core kernel, specialised for head_dim (DPL = dimensions per lane).
template <class Mask, class KV, class T>
void launch_attention_simt_for(const Mask& mask, const attention_args<KV, T>& a, index_t n_tiles, cudaStream_t stream) {
    const index_t D = a.s.head_dim;
    if (D <= 32) launch_attention_simt<Mask, KV, T, 1>(mask, a, n_tiles, stream);
    else if (D <= 64) launch_attention_simt<Mask, KV, T, 2>(mask, a, n_tiles, stream);
    else if (D <= 128) launch_attention_simt<Mask, KV, T, 4>(mask, a, n_tiles, stream);
    else launch_attention_simt<Mask, KV, T, 8>(mask, a, n_tiles, stream);
}

/// The tensor-core kernel where `path` resolves to it (then true), specialised for head_dim; false
/// (nothing launched) otherwise. Not instantiated for f32 models, which never take it.
template <class Mask, class KV, class T>
bool launch_attention_tc_for(const Mask& mask, const attention_args<KV, T>& a, index_t n_tiles, attention_path path, cudaStream_t stream) {
    const index_t D = a.s.head_dim;
    if (resolve_attention_path(path, false, D) != attention_path::tc) return false;
    if (D == 32) launch_attention_tc<Mask, KV, T, 1>(mask, a, n_tiles, stream);
    else if (D == 64) launch_attention_tc<Mask, KV, T, 2>(mask, a, n_tiles, stream);
    else launch_attention_tc<Mask, KV, T, 4>(mask, a, n_tiles, stream);
    return true;
}

/// Runs the attention of every tile for every query head, writing the heads' outputs (rows of q_dim,
/// in T) into a.out; `rows` window rows in all. With a.splits > 1 (attention_splits) the key range is
/// split over that many blocks per tile, whose partial results (a.partial: rows · heads · splits ·
/// partial_floats(head_dim) floats) attention_combine merges. `path` is resolved here
/// (resolve_attention_path: tc for bf16 and f16 models with heads of 32, 64 or 128). head_dim must be
/// at most max_head_dim (checked when the model is made).
template <attention_mask Mask, class KV, class T>
void run_attention(const Mask& mask, const attention_args<KV, T>& a, index_t n_tiles, index_t rows, attention_path path, cudaStream_t stream) {
    if (n_tiles == 0) return;
    if constexpr (std::is_same_v<T, float>) launch_attention_simt_for(mask, a, n_tiles, stream);
    else if (!launch_attention_tc_for(mask, a, n_tiles, path, stream)) launch_attention_simt_for(mask, a, n_tiles, stream);
    if (a.splits > 1) launch_attention_combine(a, rows, stream);
}

}  // namespace dlm::cuda::kernels
