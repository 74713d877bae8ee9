// dlm/cuda/selection.cuh — device-side commit selection: which of a block's masked slots to commit,
// decided on the GPU from the sampling kernel's results, one thread block per sequence.
//
// `device_schedule<S>` implements schedule S on the device, in two halves: `prepare` (host) turns the
// step's context into a few numbers with the schedule's own host functions (LLaDA's transfer count,
// Dream's transfer fraction, CD4LM's forced finish and EOS guard), and `select` (device) picks the
// slots with the block-level primitives of `selector`: counts (CUB BlockReduce), the first maximum,
// an order-keeping compaction (CUB BlockScan) and a stable descending sort of scores (CUB
// BlockRadixSort), whose first k entries are the top k with ties to the lower position — the order of
// the host's detail::top_k_by. The chosen slots come out in the order the host schedule lists them.
//
// Implemented: threshold_schedule and cdlm_schedule (Fast-dLLM / CDLM threshold),
// factor_schedule (Fast-dLLM factor), llada_schedule (low-confidence and random remasking),
// dream_schedule (origin, maskgit_plus, topk_margin, entropy; alg_temp too), cd4lm_schedule (CAD) and
// next_slot_schedule. Up to `max_selection_slots` masked slots per block.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <math_constants.h>

#include "../core/rng.hpp"
#include "../schedule/cd4lm.hpp"
#include "../schedule/dream.hpp"
#include "../schedule/llada.hpp"
#include "../schedule/next_slot.hpp"
#include "../schedule/threshold.hpp"
#include "runtime.cuh"
#include "sampling.cuh"

namespace dlm::cuda {

inline constexpr unsigned selection_threads = 256;
inline constexpr int selection_items = 4;
/// The most masked slots one block may have for device selection.
inline constexpr index_t max_selection_slots = static_cast<index_t>(selection_threads) * selection_items;

/// One sequence's selection: its candidates (the masked slots of the active block, in position order)
/// are slot results [first, first + count); `k`, `fraction` and `flags` come from device_schedule::prepare.
struct selection_task {
    std::uint64_t seed = 0;  ///< the sequence's seed
    index_t first = 0, count = 0;
    index_t forward = 0;   ///< the sequence's forward index (coordinates of random draws)
    index_t deferred_first = 0, n_deferred = 0;  ///< its EOS and end-of-turn ids in the step's id pool (CD4LM defers them)
    index_t k = 0;
    double fraction = 0.0;
    std::uint32_t flags = 0;
};

/// The outcome for one sequence: `count` chosen candidates, whose commit_records follow in the order
/// the host schedule lists them; `bad` is the first candidate whose result is not finite or whose token
/// is outside the vocabulary (-1: none), in which case nothing is chosen.
struct selection_header {
    index_t count = 0;
    index_t bad = -1;
};

/// One committed slot: the candidate's index (into the sequence's candidates), its token and p(token).
/// This, and the header, is all that returns to the host per step.
struct commit_record {
    index_t index = 0;
    token_id token = no_token;
    float probability = 0.0f;
};

/// Block-level selection primitives over the candidates of one sequence (device side).
class selector {
public:
    using sort = cub::BlockRadixSort<double, selection_threads, selection_items, index_t>;
    using scan = cub::BlockScan<index_t, selection_threads>;
    using reduce = cub::BlockReduce<index_t, selection_threads>;
    struct storage {
        union {
            typename sort::TempStorage sort;
            typename scan::TempStorage scan;
            typename reduce::TempStorage reduce;
        } temp;
        double sorted[max_selection_slots];
        index_t chosen[max_selection_slots];
        index_t count;
        index_t broadcast;
    };

    /// Candidates c[0, n) with their slots t[0, n); the choice goes to s.chosen[0, s.count).
    /// `deferred` (n_deferred ids): the tokens CD4LM's guard defers, EOS and end-of-turn ids.
    __device__ selector(storage& s, const slot_result* c, const slot_task* t, index_t n, std::uint64_t seed, index_t forward,
                        const token_id* deferred, int n_deferred)
        : s_(s), c_(c), t_(t), n_(n), seed_(seed), forward_(forward), deferred_(deferred), n_deferred_(n_deferred) {}

    [[nodiscard]] __device__ index_t size() const { return n_; }
    [[nodiscard]] __device__ const slot_result& candidate(index_t i) const { return c_[i]; }
    [[nodiscard]] __device__ index_t position(index_t i) const { return t_[i].position; }
    /// The host's ctx.key(stream, position(i)).uniform(0).
    [[nodiscard]] __device__ double uniform(rng_stream stream, index_t i) const {
        return random_key{seed_, stream, forward_, t_[i].position}.uniform(0);
    }
    /// Whether candidate i's token is an EOS or end-of-turn id (the host's contains_eos on both lists).
    [[nodiscard]] __device__ bool is_eos_or_end_of_turn(index_t i) const {
        for (int e = 0; e < n_deferred_; ++e)
            if (c_[i].token == deferred_[e]) return true;
        return false;
    }

    /// Number of candidates for which pred(i) holds (every thread gets it).
    template <class Pred>
    __device__ index_t count_if(Pred pred) {
        index_t mine = 0;
        for (index_t i = static_cast<index_t>(threadIdx.x); i < n_; i += selection_threads) mine += pred(i) ? 1 : 0;
        const index_t total = reduce(s_.temp.reduce).Sum(mine);
        return share(total);
    }

    /// The first candidate with the largest probability (the host's strict-> scan).
    __device__ index_t first_most_probable() {
        if (threadIdx.x == 0) {
            index_t best = 0;
            for (index_t i = 1; i < n_; ++i)
                if (c_[i].probability > c_[best].probability) best = i;
            s_.broadcast = best;
        }
        __syncthreads();
        const index_t best = s_.broadcast;
        __syncthreads();
        return best;
    }

    /// Chooses every candidate for which pred(i) holds, in position order.
    template <class Pred>
    __device__ void choose_if(Pred pred) {
        index_t flags[selection_items], offsets[selection_items];
        for (int j = 0; j < selection_items; ++j) {
            const index_t i = static_cast<index_t>(threadIdx.x) * selection_items + j;
            flags[j] = i < n_ && pred(i) ? 1 : 0;
        }
        index_t total = 0;
        scan(s_.temp.scan).ExclusiveSum(flags, offsets, total);
        for (int j = 0; j < selection_items; ++j)
            if (flags[j]) s_.chosen[offsets[j]] = static_cast<index_t>(threadIdx.x) * selection_items + j;
        if (threadIdx.x == 0) s_.count = total;
        __syncthreads();
    }

    /// Chooses the first k candidates of the descending stable order of score(i), where
    /// k = k_of(sorted scores, n) is evaluated once, on the sorted scores.
    template <class Score, class K>
    __device__ void choose_top(Score score, K k_of) {
        double keys[selection_items];
        index_t values[selection_items];
        for (int j = 0; j < selection_items; ++j) {
            const index_t i = static_cast<index_t>(threadIdx.x) * selection_items + j;
            const double v = i < n_ ? static_cast<double>(score(i)) : -CUDART_INF;
            keys[j] = v == 0.0 ? 0.0 : v;  // one zero: -0.0 and +0.0 tie, as on the host
            values[j] = i;
        }
        sort(s_.temp.sort).SortDescending(keys, values);
        for (int j = 0; j < selection_items; ++j) {
            const index_t r = static_cast<index_t>(threadIdx.x) * selection_items + j;
            if (r < n_) s_.sorted[r] = keys[j];
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            const index_t k = k_of(static_cast<const double*>(s_.sorted), n_);
            s_.broadcast = k < 0 ? 0 : (k > n_ ? n_ : k);
            s_.count = s_.broadcast;
        }
        __syncthreads();
        const index_t k = s_.broadcast;
        for (int j = 0; j < selection_items; ++j) {
            const index_t r = static_cast<index_t>(threadIdx.x) * selection_items + j;
            if (r < k) s_.chosen[r] = values[j];
        }
        __syncthreads();
    }

    /// choose_top with a fixed k.
    template <class Score>
    __device__ void choose_top_k(Score score, index_t k) {
        choose_top(score, [k](const double*, index_t) { return k; });
    }

    /// Chooses every candidate, in position order.
    __device__ void choose_all() {
        choose_if([](index_t) { return true; });
    }

private:
    __device__ index_t share(index_t v) {
        if (threadIdx.x == 0) s_.broadcast = v;
        __syncthreads();
        const index_t out = s_.broadcast;
        __syncthreads();
        return out;
    }

    storage& s_;
    const slot_result* c_;
    const slot_task* t_;
    index_t n_;
    std::uint64_t seed_;
    index_t forward_;
    const token_id* deferred_;
    int n_deferred_;
};

/// `device_schedule<S>::supported` says whether S runs on the device (see the header comment).
template <class S>
struct device_schedule {
    static constexpr bool supported = false;
};

template <>
struct device_schedule<threshold_schedule> {
    static constexpr bool supported = true;
    static void prepare(const threshold_schedule&, const step_context&, selection_task&) {}
    __device__ static void select(const threshold_schedule& s, const selection_task&, selector& sel) {
        if (sel.size() == 0) return;
        const index_t best = sel.first_most_probable();
        const float tau = static_cast<float>(s.tau);
        sel.choose_if([&](index_t i) { return i == best || sel.candidate(i).probability >= tau; });
    }
};

template <>
struct device_schedule<cdlm_schedule> {
    static constexpr bool supported = true;
    static void prepare(const cdlm_schedule&, const step_context&, selection_task&) {}
    __device__ static void select(const cdlm_schedule& s, const selection_task& t, selector& sel) {
        device_schedule<threshold_schedule>::select(s, t, sel);
    }
};

template <>
struct device_schedule<factor_schedule> {
    static constexpr bool supported = true;
    static void prepare(const factor_schedule&, const step_context&, selection_task&) {}
    __device__ static void select(const factor_schedule& s, const selection_task&, selector& sel) {
        if (sel.size() == 0) return;
        const double f = s.factor;
        // factor_schedule::count on the sorted confidences.
        sel.choose_top([&](index_t i) { return static_cast<double>(sel.candidate(i).probability); },
                       [f](const double* sorted, index_t n) {
                           index_t i = 0;
                           for (; i < n; ++i)
                               if (i > 0 && sorted[i] < 1.0 - f / static_cast<double>(i + 2)) break;
                           if (i == n) i = n - 1;
                           if (i == 0 || i == n - 1) i += 1;
                           return i;
                       });
    }
};

template <>
struct device_schedule<llada_schedule> {
    static constexpr bool supported = true;
    static void prepare(const llada_schedule& s, const step_context& ctx, selection_task& t) {
        const index_t spb = s.steps_for(ctx.layout) / ctx.layout.block_count();
        t.k = llada_schedule::transfer_count(ctx.masked_at_block_start, spb, ctx.cursor.step_in_block);
    }
    __device__ static void select(const llada_schedule& s, const selection_task& t, selector& sel) {
        if (s.mode == remasking::low_confidence) sel.choose_top_k([&](index_t i) { return static_cast<double>(sel.candidate(i).probability); }, t.k);
        else sel.choose_top_k([&](index_t i) { return sel.uniform(rng_stream::remasking, i); }, t.k);
    }
};

template <>
struct device_schedule<dream_schedule> {
    static constexpr bool supported = true;
    static constexpr std::uint32_t last_step = 1;
    static void prepare(const dream_schedule& s, const step_context& ctx, selection_task& t) {
        const index_t spb = s.steps / ctx.layout.block_count();
        t.fraction = s.transfer_fraction(ctx.cursor.step_in_block, spb);
        t.flags = ctx.cursor.step_in_block >= spb - 1 ? last_step : 0;
    }
    __device__ static void select(const dream_schedule& s, const selection_task& t, selector& sel) {
        const double fraction = t.fraction;
        if (s.alg == dream_alg::origin) {
            sel.choose_if([&](index_t i) { return fraction >= 1.0 || sel.uniform(rng_stream::transfer, i) < fraction; });
            return;
        }
        const index_t n = sel.size();
        const index_t k = (t.flags & last_step) ? n : static_cast<index_t>(static_cast<double>(n) * fraction);
        const auto confidence = [&](index_t i) -> double {
            const slot_result& c = sel.candidate(i);
            switch (s.alg) {
                case dream_alg::topk_margin: return c.margin;
                case dream_alg::entropy: return c.neg_entropy;
                default: return c.probability;
            }
        };
        if (s.alg_temp <= 0.0) sel.choose_top_k(confidence, k);
        else
            sel.choose_top_k([&](index_t i) { return confidence(i) / s.alg_temp - log(-log(sel.uniform(rng_stream::selection, i))); }, k);
    }
};

template <>
struct device_schedule<cd4lm_schedule> {
    static constexpr bool supported = true;
    static constexpr std::uint32_t forced = 1, guard = 2;
    static void prepare(const cd4lm_schedule& s, const step_context& ctx, selection_task& t) {
        const index_t limit = s.max_steps_per_block > 0 ? s.max_steps_per_block : ctx.layout.block_length;
        t.flags = (ctx.cursor.step_in_block >= limit ? forced : 0) |
                  (static_cast<double>(ctx.committed_in_generation) < s.eos_guard * static_cast<double>(ctx.layout.gen_length) ? guard : 0);
    }
    __device__ static void select(const cd4lm_schedule& s, const selection_task& t, selector& sel) {
        if (t.flags & forced) {
            sel.choose_all();
            return;
        }
        const bool guarding = (t.flags & guard) != 0;
        const auto deferred = [&](index_t i) { return guarding && sel.is_eos_or_end_of_turn(i); };
        const float tau = static_cast<float>(s.tau);
        const index_t valid = sel.count_if([&](index_t i) { return !deferred(i); });
        const index_t confident = sel.count_if([&](index_t i) { return !deferred(i) && sel.candidate(i).probability >= tau; });
        const auto probability = [&](index_t i) { return static_cast<double>(sel.candidate(i).probability); };
        if (valid == 0) {
            sel.choose_top_k(probability, s.min_tokens < sel.size() ? s.min_tokens : sel.size());
            return;
        }
        index_t k = confident > s.min_tokens ? confident : s.min_tokens;
        k = k < s.max_tokens ? k : s.max_tokens;
        k = k < valid ? k : valid;
        sel.choose_top_k([&](index_t i) { return deferred(i) ? -CUDART_INF : probability(i); }, k);
    }
};

template <>
struct device_schedule<next_slot_schedule> {
    static constexpr bool supported = true;
    static void prepare(const next_slot_schedule&, const step_context&, selection_task&) {}
    __device__ static void select(const next_slot_schedule&, const selection_task&, selector& sel) {
        if (sel.size() > 0) sel.choose_if([](index_t i) { return i == 0; });
    }
};

namespace kernels {

/// One block per sequence: checks the candidates' results, runs the schedule's device selection (the
/// sequence's own schedule, schedules[i]) and writes the header and the commit records (`stride` per
/// sequence). `id_pool`: the step's token ids, each task's EOS and end-of-turn ids among them.
template <class Schedule>
__global__ void __launch_bounds__(selection_threads)
    select_slots(const Schedule* __restrict__ schedules, const selection_task* __restrict__ tasks, const slot_task* __restrict__ slots,
                 const slot_result* __restrict__ results, const token_id* __restrict__ id_pool, index_t vocab,
                 selection_header* __restrict__ headers, commit_record* __restrict__ records, index_t stride) {
    __shared__ selector::storage storage;
    const selection_task t = tasks[blockIdx.x];
    const Schedule schedule = schedules[blockIdx.x];
    const slot_result* c = results + t.first;
    // The first candidate with a non-finite probability or a token outside the vocabulary.
    index_t bad = t.count;
    for (index_t i = static_cast<index_t>(threadIdx.x); i < t.count; i += selection_threads)
        if (!isfinite(c[i].probability) || c[i].token < 0 || c[i].token >= vocab) bad = i < bad ? i : bad;
    using reduce = cub::BlockReduce<index_t, selection_threads>;
    bad = reduce(storage.temp.reduce).Reduce(bad, [](index_t a, index_t b) { return a < b ? a : b; });
    if (threadIdx.x == 0) {
        storage.broadcast = bad;
        storage.count = 0;
    }
    __syncthreads();
    const bool ok = storage.broadcast >= t.count;
    __syncthreads();
    if (ok) {
        selector sel(storage, c, slots + t.first, t.count, t.seed, t.forward, id_pool + t.deferred_first, t.n_deferred);
        device_schedule<Schedule>::select(schedule, t, sel);
    }
    __syncthreads();
    if (threadIdx.x == 0) headers[blockIdx.x] = {storage.count, ok ? -1 : bad};
    commit_record* out = records + static_cast<std::size_t>(blockIdx.x) * stride;
    for (index_t i = static_cast<index_t>(threadIdx.x); i < storage.count; i += selection_threads) {
        const index_t j = storage.chosen[i];
        out[i] = {j, c[j].token, c[j].probability};
    }
}

}  // namespace kernels

/// Enqueues the selection of `n` sequences on `stream` (device arrays): sequence i selects with
/// schedules[i] among its candidates; `id_pool` holds the tasks' EOS and end-of-turn ids.
template <class Schedule>
void select_slots(const Schedule* schedules, const selection_task* tasks, std::size_t n, const slot_task* slots, const slot_result* results,
                  const token_id* id_pool, index_t vocab, selection_header* headers, commit_record* records, index_t stride,
                  cudaStream_t stream) {
    static_assert(device_schedule<Schedule>::supported, "dlm::cuda::select_slots: this schedule has no device implementation");
    static_assert(std::is_trivially_copyable_v<Schedule>,
                  "dlm::cuda::select_slots: a device schedule is copied to the GPU byte for byte, so it must be trivially copyable");
    if (n == 0) return;
    kernels::select_slots<Schedule><<<static_cast<unsigned>(n), selection_threads, 0, stream>>>(schedules, tasks, slots, results, id_pool, vocab,
                                                                                              headers, records, stride);
    check_launch("dlm::cuda select_slots", stream);
}

/// Runs the device selection for host candidates (a test and reference entry point): for each
/// context, the schedule's choice among `candidates[i]` (the masked slots of the active block), as
/// indices in the order the host schedule lists them. Throws invalid_parameter for more than
/// max_selection_slots candidates.
template <class Schedule>
std::vector<std::vector<index_t>> select_on_device(const Schedule& schedule, std::span<const step_context> contexts,
                                                   std::span<const std::vector<candidate>> candidates, index_t vocab) {
    static_assert(device_schedule<Schedule>::supported, "dlm::cuda::select_on_device: this schedule has no device implementation");
    const std::size_t n = contexts.size();
    if (candidates.size() != n) throw invalid_parameter("candidates", "needs one list per context");
    std::vector<selection_task> tasks(n);
    std::vector<slot_task> slots;
    std::vector<slot_result> results;
    std::vector<token_id> eos;  // each context's EOS and end-of-turn ids
    const std::vector<Schedule> schedules(n, schedule);
    for (std::size_t i = 0; i < n; ++i) {
        tasks[i].deferred_first = static_cast<index_t>(eos.size());
        eos.insert(eos.end(), contexts[i].eos_ids.begin(), contexts[i].eos_ids.end());
        eos.insert(eos.end(), contexts[i].end_of_turn_ids.begin(), contexts[i].end_of_turn_ids.end());
        tasks[i].n_deferred = static_cast<index_t>(eos.size()) - tasks[i].deferred_first;
        if (candidates[i].size() > static_cast<std::size_t>(max_selection_slots))
            throw invalid_parameter("candidates", "device selection takes at most " + std::to_string(max_selection_slots) + " slots per block");
        tasks[i].seed = contexts[i].seed;
        tasks[i].first = static_cast<index_t>(slots.size());
        tasks[i].count = static_cast<index_t>(candidates[i].size());
        tasks[i].forward = contexts[i].forward;
        device_schedule<Schedule>::prepare(schedule, contexts[i], tasks[i]);
        for (const candidate& c : candidates[i]) {
            slots.push_back({contexts[i].seed, 0, c.position, contexts[i].forward, 0, 0, {}});
            results.push_back({c.token, c.probability, c.margin, c.neg_entropy});
        }
    }
    stream_context ctx;
    const auto at_least_one = [](std::size_t k) { return k ? k : std::size_t{1}; };
    device_buffer<Schedule> d_schedules(at_least_one(n), "schedules");
    device_buffer<selection_task> d_tasks(at_least_one(n), "selection tasks");
    device_buffer<slot_task> d_slots(at_least_one(slots.size()), "slots");
    device_buffer<slot_result> d_results(at_least_one(results.size()), "slot results");
    device_buffer<token_id> d_eos(at_least_one(eos.size()), "EOS ids");
    device_buffer<selection_header> d_headers(at_least_one(n), "selection headers");
    device_buffer<commit_record> d_records(at_least_one(n * max_selection_slots), "commit records");
    upload(d_schedules.data(), schedules.data(), n, ctx.stream(), "schedules");
    upload(d_tasks.data(), tasks.data(), n, ctx.stream(), "selection tasks");
    upload(d_slots.data(), slots.data(), slots.size(), ctx.stream(), "slots");
    upload(d_results.data(), results.data(), results.size(), ctx.stream(), "slot results");
    upload(d_eos.data(), eos.data(), eos.size(), ctx.stream(), "EOS ids");
    select_slots(d_schedules.data(), d_tasks.data(), n, d_slots.data(), d_results.data(), d_eos.data(), vocab, d_headers.data(),
                 d_records.data(), max_selection_slots, ctx.stream());
    std::vector<selection_header> headers(n);
    std::vector<commit_record> records(n * max_selection_slots);
    download(headers.data(), d_headers.data(), n, ctx.stream(), "selection headers");
    download(records.data(), d_records.data(), records.size(), ctx.stream(), "commit records");
    ctx.synchronize();
    std::vector<std::vector<index_t>> out(n);
    for (std::size_t i = 0; i < n; ++i) {
        if (headers[i].bad >= 0) throw invalid_parameter("candidates", "candidate " + std::to_string(headers[i].bad) + " has a non-finite probability");
        for (index_t j = 0; j < headers[i].count; ++j) out[i].push_back(records[i * max_selection_slots + static_cast<std::size_t>(j)].index);
    }
    return out;
}

}  // namespace dlm::cuda
