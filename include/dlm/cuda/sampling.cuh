// dlm/cuda/sampling.cuh — the fused per-slot kernel of device-side decoding: for every masked slot of
// the active block, one thread block reads the slot's logits row once and returns the chosen token and
// its probability, margin and negative entropy.
//
// One pass over the vocabulary: each thread keeps, over its share of the row, the top two logits, an
// online-softmax sum and entropy term (rescaled whenever its maximum grows, in double), the best choice
// score and its index; a CUB BlockReduce merges the threads' states. The arithmetic is the host
// samplers' (sampler/samplers.hpp): temperature as an f32 division, Gumbel-max with float64 noise
// from dlm::random_key (Philox: the host's uniforms bit for bit; the noise's two logs are CUDA's and
// glibc's, each within an ulp, so a token could differ only on a Gumbel tie to ~1e-16), ties to the lowest token id,
// probabilities in double. Banned tokens (the mask id always, EOS while a schedule suppresses it)
// count as -inf, as the host decoder's `banned` list.
//
// Gumbel noise is bounded: a draw is a double in (0, 1) with 53 bits, at most 1 - 2^-53
// (random_key::unit_interval), so -log(-log(u)) <= 36.74. A token whose tempered logit is more than max_gumbel below the best score
// the thread has already seen cannot win, so its Philox draw and two logs are skipped: the same
// choice as drawing every entry, at a fraction of the cost once a thread has seen a likely token.
//
// Supported samplers: greedy_sampler, categorical_sampler and llada_sampler without top-k or
// top-p filtering (those need a sort of the row; use dlm::decoder for them).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <cub/block/block_reduce.cuh>
#include <math_constants.h>

#include "../core/rng.hpp"
#include "../sampler/samplers.hpp"
#include "runtime.cuh"

namespace dlm::cuda {

/// What the sampling kernel needs to know of a sampler.
struct sampler_params {
    float temperature = 0.0f;     ///< 0: argmax
    bool raw_confidence = false;  ///< confidences from the untempered logits (LLaDA)
};

/// `device_sampler<S>::supported` says whether S runs on the device; `params(s)` converts its options
/// (throwing dlm::invalid_parameter for options the device kernel does not implement).
template <class S>
struct device_sampler {
    static constexpr bool supported = false;
};

template <>
struct device_sampler<greedy_sampler> {
    static constexpr bool supported = true;
    static sampler_params params(const greedy_sampler&) { return {}; }
};

template <>
struct device_sampler<categorical_sampler> {
    static constexpr bool supported = true;
    static sampler_params params(const categorical_sampler& s) {
        s.validate();
        if (s.top_k != 0)
            throw invalid_parameter("top_k", "the device decoder samples from the whole vocabulary; top-k filtering (" + std::to_string(s.top_k) +
                                                 ") needs dlm::decoder");
        if (s.top_p != 1.0f)
            throw invalid_parameter("top_p", "the device decoder samples from the whole vocabulary; nucleus filtering (" + std::to_string(s.top_p) +
                                                 ") needs dlm::decoder");
        return {s.temperature, s.confidence == confidence_source::raw};
    }
};

template <>
struct device_sampler<llada_sampler> : device_sampler<categorical_sampler> {};

/// One masked slot to sample: its sequence's seed, its row in the stacked logits, its canvas position
/// and the sequence's forward index (the coordinates of its random numbers), its sequence's ban list
/// (`banned` ids of the step's id pool from `ban_first`: [mask id, EOS ids...], 1 bans the mask id,
/// 1 + n_eos bans EOS too) and its sequence's sampler options.
struct slot_task {
    std::uint64_t seed = 0;
    index_t row = 0;
    index_t position = 0;
    index_t forward = 0;
    index_t banned = 0;
    index_t ban_first = 0;
    sampler_params sp{};
};

/// The sampler's answer for one slot (dlm::slot_choice; NaN confidences for a non-finite row).
struct slot_result {
    token_id token = no_token;
    float probability = 0.0f;
    float margin = 0.0f;
    float neg_entropy = 0.0f;
};

namespace kernels {

inline constexpr unsigned sample_threads = 256;
inline constexpr index_t no_choice = 0x7fffffff;  ///< best_index before any token was offered
/// Above the largest Gumbel noise -log(-log(u)) of a random_key draw (u <= 1 - 2^-53: 36.74).
inline constexpr double max_gumbel = 37.5;

/// A thread's (and, merged, the block's) summary of part of a row.
struct row_state {
    float m1, m2;        ///< the two largest statistic-space logits (with multiplicity)
    double sum, wsum;    ///< Σ e^(v - m1) and Σ e^(v - m1) (v - m1) over the finite entries
    double best;         ///< best choice score so far
    index_t best_index;  ///< its token (ties: the lowest)
    int bad;             ///< a NaN or +Inf entry was seen

    __device__ static row_state empty() {
        return {-CUDART_INF_F, -CUDART_INF_F, 0.0, 0.0, -CUDART_INF, no_choice, 0};
    }
    /// Adds one statistic-space value v (the online-softmax step).
    __device__ void add_stat(float v) {
        if (isnan(v) || v == CUDART_INF_F) {
            bad = 1;
            return;
        }
        if (v > m1) {
            m2 = m1;
            if (sum > 0.0) {
                const double d = static_cast<double>(m1) - v, f = exp(d);
                wsum = f * (wsum + d * sum);
                sum *= f;
            }
            m1 = v;
            sum += 1.0;
        } else {
            if (v > m2) m2 = v;
            if (v != -CUDART_INF_F) {
                const double d = static_cast<double>(v) - m1, e = exp(d);
                sum += e;
                wsum += e * d;
            }
        }
    }
    __device__ void offer(double score, index_t i) {
        if (score > best || (score == best && i < best_index)) {
            best = score;
            best_index = i;
        }
    }
};

struct merge_rows {
    __device__ row_state operator()(const row_state& a, const row_state& b) const {
        row_state r;
        r.m1 = fmaxf(a.m1, b.m1);
        r.m2 = fmaxf(fminf(a.m1, b.m1), fmaxf(a.m2, b.m2));
        r.sum = 0.0;
        r.wsum = 0.0;
        const auto add = [&r](const row_state& s) {
            if (s.sum > 0.0) {
                const double d = static_cast<double>(s.m1) - r.m1, f = exp(d);
                r.sum += s.sum * f;
                r.wsum += f * (s.wsum + d * s.sum);
            }
        };
        add(a);
        add(b);
        const bool take_b = b.best > a.best || (b.best == a.best && b.best_index < a.best_index);
        r.best = take_b ? b.best : a.best;
        r.best_index = take_b ? b.best_index : a.best_index;
        r.bad = a.bad | b.bad;
        return r;
    }
};

/// The larger of two floats, for a block reduction.
struct max_of {
    __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

__device__ inline bool banned_token(index_t i, const token_id* list, int n) {
    for (int e = 0; e < n; ++e)
        if (list[e] == i) return true;
    return false;
}

/// One block per task: the slot's token and confidences. (A template only so that the header may be
/// included by several translation units.)
template <class = void>
__global__ void __launch_bounds__(sample_threads)
    sample_slots_impl(const float* __restrict__ logits, index_t vocab, const slot_task* __restrict__ tasks, slot_result* __restrict__ out,
                      const token_id* __restrict__ id_pool, const index_t* __restrict__ count) {
    if (count && static_cast<index_t>(blockIdx.x) >= *count) return;  // a padded grid (CUDA graphs): past the step's slots
    using reduce = cub::BlockReduce<row_state, sample_threads>;
    __shared__ typename reduce::TempStorage temp;
    const float ni = -CUDART_INF_F;
    const slot_task task = tasks[blockIdx.x];
    const sampler_params sp = task.sp;
    const token_id* ban_list = id_pool + task.ban_first;
    const float* z = logits + static_cast<std::size_t>(task.row) * static_cast<std::size_t>(vocab);
    const bool tempered = sp.temperature > 0.0f;
    const random_key key{task.seed, rng_stream::sampling, task.forward, task.position};
    const int bans = task.banned;
    // The host's detail::divide_by_temperature: where a logit over the temperature would overflow
    // float, the row is divided shifted by its largest finite logit (the greedy limit). Any temperature
    // below 1 can overflow a large enough logit (1e38 at 0.5): a pre-pass finds the row's top and reach.
    __shared__ float shift_by;
    __shared__ bool shifted;
    if (tempered && sp.temperature < 1.0f) {
        using reduce_f = cub::BlockReduce<float, sample_threads>;
        __shared__ typename reduce_f::TempStorage ftemp;
        float top = ni, reach = 0.0f;
        for (index_t i = static_cast<index_t>(threadIdx.x); i < vocab; i += sample_threads) {
            const float v = z[i];
            if (!isfinite(v) || (bans && banned_token(i, ban_list, bans))) continue;
            top = fmaxf(top, v);
            reach = fmaxf(reach, fabsf(v));
        }
        top = reduce_f(ftemp).Reduce(top, max_of{});
        __syncthreads();
        reach = reduce_f(ftemp).Reduce(reach, max_of{});
        if (threadIdx.x == 0) {
            shifted = !isfinite(reach / sp.temperature);
            shift_by = top;
        }
        __syncthreads();
    } else if (threadIdx.x == 0) {
        shifted = false;
    }
    __syncthreads();
    // Statistic space: the distribution the confidences describe (tempered unless raw); choice space:
    // what the token is drawn from (tempered when sampling).
    auto values = [&](index_t i, float& stat, float& choice) {
        float v = z[i];
        if (bans && banned_token(i, ban_list, bans)) v = ni;
        choice = !tempered ? v : shifted ? (v - shift_by) / sp.temperature : v / sp.temperature;
        stat = sp.raw_confidence ? v : choice;
    };
    row_state st = row_state::empty();
    for (index_t i = static_cast<index_t>(threadIdx.x); i < vocab; i += sample_threads) {
        float stat, choice;
        values(i, stat, choice);
        st.add_stat(stat);
        if (!tempered) {
            st.offer(static_cast<double>(choice), i);
        } else if (choice != ni && static_cast<double>(choice) + kernels::max_gumbel > st.best) {  // else it cannot win
            st.offer(static_cast<double>(choice) - log(-log(key.uniform(static_cast<std::uint32_t>(i)))), i);
        }
    }
    const row_state r = reduce(temp).Reduce(st, merge_rows{});
    if (threadIdx.x != 0) return;
    slot_result res;
    res.token = r.best_index == no_choice ? 0 : r.best_index;
    if (r.bad || r.m1 == ni) {
        const float nan = CUDART_NAN_F;
        res.probability = res.margin = res.neg_entropy = nan;
    } else {
        float stat, choice;
        values(res.token, stat, choice);
        res.probability = static_cast<float>(exp(static_cast<double>(stat) - r.m1) / r.sum);
        res.margin = static_cast<float>((1.0 - (r.m2 == ni ? 0.0 : exp(static_cast<double>(r.m2) - r.m1))) / r.sum);
        res.neg_entropy = static_cast<float>(r.wsum / r.sum - log(r.sum));
    }
    out[blockIdx.x] = res;
}

}  // namespace kernels

/// Enqueues the sampling of `n` tasks (device arrays) on `stream`; task i bans tasks[i].banned tokens
/// of `id_pool` from tasks[i].ban_first. `count` (device, optional): only the first *count tasks are
/// sampled, the grid staying `n` (a shape a CUDA graph can replay whatever the count).
inline void sample_slots(const float* logits, index_t vocab, const slot_task* tasks, slot_result* out, std::size_t n, const token_id* id_pool,
                         cudaStream_t stream, const index_t* count = nullptr) {
    if (n == 0) return;
    kernels::sample_slots_impl<><<<static_cast<unsigned>(n), kernels::sample_threads, 0, stream>>>(logits, vocab, tasks, out, id_pool, count);
    check_launch("dlm::cuda sample_slots", stream);
}

/// Samples rows of host logits on the device (a test and reference entry point): row i of `logits`
/// (rows of `vocab`) with `keys[i]` (stream must be sampling), the `eos` ids banned where `banned[i]`.
template <class Sampler>
std::vector<slot_result> sample_on_device(const Sampler& sampler, std::span<const float> logits, index_t vocab, std::span<const random_key> keys,
                                          std::span<const unsigned char> banned, std::span<const token_id> eos) {
    static_assert(device_sampler<Sampler>::supported, "dlm::cuda::sample_on_device: this sampler has no device implementation");
    const sampler_params sp = device_sampler<Sampler>::params(sampler);
    const std::size_t n = keys.size();
    if (logits.size() != n * static_cast<std::size_t>(vocab)) throw invalid_parameter("logits", "must hold keys.size() rows of vocab floats");
    std::vector<slot_task> tasks(n);
    for (std::size_t i = 0; i < n; ++i) {
        if (keys[i].stream != rng_stream::sampling) throw invalid_parameter("keys", "every key must use the sampling stream");
        const bool ban = !banned.empty() && banned[i];
        tasks[i] = {keys[i].seed, static_cast<index_t>(i), keys[i].position, keys[i].step, ban ? static_cast<index_t>(eos.size()) : 0, 0, sp};
    }
    stream_context ctx;
    device_buffer<float> d_logits(std::max<std::size_t>(logits.size(), 1), "logits");
    device_buffer<slot_task> d_tasks(std::max<std::size_t>(n, 1), "slot tasks");
    device_buffer<slot_result> d_out(std::max<std::size_t>(n, 1), "slot results");
    device_buffer<token_id> d_eos(std::max<std::size_t>(eos.size(), 1), "EOS ids");
    upload(d_logits.data(), logits.data(), logits.size(), ctx.stream(), "logits");
    upload(d_tasks.data(), tasks.data(), n, ctx.stream(), "slot tasks");
    upload(d_eos.data(), eos.data(), eos.size(), ctx.stream(), "EOS ids");
    sample_slots(d_logits.data(), vocab, d_tasks.data(), d_out.data(), n, d_eos.data(), ctx.stream());
    std::vector<slot_result> out(n);
    download(out.data(), d_out.data(), n, ctx.stream(), "slot results");
    ctx.synchronize();
    return out;
}

}  // namespace dlm::cuda
