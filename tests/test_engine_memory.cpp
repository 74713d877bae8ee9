// The engine's memory checks: a joining batch's canvases, K/V stores (host and device) and logits
// rows weighed before anything is allocated, against what is available and what the stepper's
// buffer holds spare; check_batch's at_once.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <dlm/engine.hpp>
#include <dlm/presets.hpp>

#include "support/child.hpp"
#include "support/scripts.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_engine_memory {

using namespace dlm;
using dlm::testing::scripted_model;
using tvec = std::vector<token_id>;
TEST_CASE("engine: sequences whose states and logits rows cannot fit are refused with memory_error before anything is allocated, summed with those added before the step; check_batch weighs each alone") {
    // A vocabulary of 2^30: a block of 65536 rows of logits is 2^48 bytes (256 TiB), which no machine
    // has; the script must never run.
    constexpr index_t vocab = index_t{1} << 30;
    scripted_model huge(vocab, vocab - 1, {vocab - 2}, false, [](const testing::script_view&, std::span<float>) { FAIL("a forward ran"); });
    using decoder_t = decoder<scripted_model, semi_ar_mask, no_cache, threshold_schedule, greedy_sampler>;
    decoder_t wide(huge, semi_ar_mask{65536}, {}, threshold_schedule{0.9});
    try {
        (void)wide.generate(tvec{1, 2}, {.gen_length = 65536});
        FAIL("no memory_error");
    } catch (const memory_error& e) {
        CHECK(e.needed() > (std::uint64_t{1} << 47));
        CHECK(std::string(e.what()).find("the decoding state and logits rows of 1 sequence(s) (gen_length 65536 in blocks of 65536, a vocabulary of 1073741824)") !=
              std::string::npos);
    }
#if defined(DLM_TEST_SANITIZER) || !defined(__unix__)
    MESSAGE("the sum is checked without sanitizers on Unix: it limits a child's address space (RLIMIT_AS)");
#else
    // Two sequences of 8 rows, each needing 60 % of what a child limited to 1 GiB more address space
    // than it maps may allocate: either fits alone (check_batch, which a caller adding a few at a time
    // asks), both together do not (add_batch, or add twice before a step). The limit, not the
    // machine, sets the figure.
    const int code = dlm_test::in_child_with_room(std::uint64_t{1} << 30, [&](std::uint64_t avail) {
        const auto v = static_cast<index_t>(avail / 10 * 6 / (8 * sizeof(float)));
        scripted_model big(v, v - 1, {v - 2}, false, [](const testing::script_view&, std::span<float>) { std::abort(); });
        decoder_t d(big, semi_ar_mask{8}, {}, threshold_schedule{0.9});
        engine<decoder_t> eng(d);
        const std::vector<tvec> two{{1, 2}, {3, 4}};
        try {
            eng.check_batch(two, {.gen_length = 8});
        } catch (...) {
            return 2;
        }
        try {
            (void)eng.add_batch(two, {.gen_length = 8});
            return 3;
        } catch (const memory_error&) {
            if (!eng.idle()) return 4;
        } catch (...) {
            return 5;
        }
        // One at a time before a step: the first's rows are promised (not yet allocated), so the
        // second is weighed beside them and refused.
        try {
            (void)eng.add(two[0], {.gen_length = 8});
        } catch (...) {
            return 6;
        }
        try {
            (void)eng.add(two[1], {.gen_length = 8});
            return 8;
        } catch (const memory_error&) {
            return eng.active() == 1 ? 0 : 9;
        } catch (...) {
            return 10;
        }
    });
    if (code == dlm_test::room_unmeasurable) MESSAGE("skipped the sum: less than 1 GiB available");
    else CHECK(code == 0);
#endif
}

/// A scripted model whose K/V stores say they hold `claimed` bytes each (per slot of their capacity
/// where `per_slot`; the store made is the scripted one), and which counts the stores it makes.
struct claiming_model : scripted_model {
    claiming_model(std::uint64_t bytes, index_t vocab_size = 32)
        : scripted_model(vocab_size, vocab_size - 1, {vocab_size - 2}, false, dlm_test::context_hash()), claimed(bytes) {}
    [[nodiscard]] std::uint64_t kv_cache_bytes(index_t capacity) const noexcept {
        return per_slot ? claimed * static_cast<std::uint64_t>(capacity) : claimed;
    }
    [[nodiscard]] kv_cache make_kv_cache(index_t capacity) const {
        ++*made;
        return scripted_model::make_kv_cache(capacity);
    }
    std::uint64_t claimed;
    bool per_slot = false;
    std::shared_ptr<int> made = std::make_shared<int>(0);
};

TEST_CASE("engine: a batch whose K/V stores cannot fit is refused before any store is made, the stores of all its sequences summed, twice with guidance") {
    using cached_t = decoder<claiming_model, block_causal_mask, prefix_cache, threshold_schedule, greedy_sampler>;
    claiming_model huge(std::uint64_t{1} << 50);  // a petabyte a store: no machine has one
    cached_t d(huge, block_causal_mask{4}, {}, threshold_schedule{0.9});
    try {
        (void)d.generate(tvec{1, 2}, {.gen_length = 8});
        FAIL("no memory_error");
    } catch (const memory_error& e) {
        CHECK(e.needed() >= (std::uint64_t{1} << 50));
        CHECK(std::string(e.what()).find("the decoding state, K/V stores and logits rows of 1 sequence(s)") != std::string::npos);
    }
    CHECK(*huge.made == 0);
    // A cache that keeps no K/V makes no store, so the model's claim is not weighed.
    decoder<claiming_model, semi_ar_mask, no_cache, threshold_schedule, greedy_sampler> uncached(huge, semi_ar_mask{4}, {}, threshold_schedule{0.9});
    CHECK(uncached.generate(tvec{1, 2}, {.gen_length = 8}).tokens.size() == 8);
#if defined(DLM_TEST_SANITIZER) || !defined(__unix__)
    MESSAGE("the sum is checked without sanitizers on Unix: it limits a child's address space (RLIMIT_AS)");
#else
    // Stores claiming 60 % of what a child limited to 1 GiB more address space than it maps may
    // allocate: one sequence fits (its one store; check_batch weighs each prompt alone), two together
    // do not, nor one with guidance (a second store for the unconditional pass).
    const int code = dlm_test::in_child_with_room(std::uint64_t{1} << 30, [&](std::uint64_t avail) {
        claiming_model big(avail / 10 * 6);
        decoder<claiming_model, semi_ar_mask, approx_prefix_cache, threshold_schedule, greedy_sampler> dec(big, semi_ar_mask{4}, {}, threshold_schedule{0.9});
        engine eng(dec);
        const std::vector<tvec> two{{1, 2}, {3, 4}};
        try {
            eng.check_batch(two, {.gen_length = 8});
            (void)eng.add(two[0], {.gen_length = 8});
        } catch (...) {
            return 2;
        }
        for (const bool guided : {false, true}) {
            try {
                if (guided) (void)eng.add(two[1], {.gen_length = 8, .cfg_scale = 1.0});
                else (void)eng.add_batch(two, {.gen_length = 8});
                return 3;
            } catch (const memory_error&) {
            } catch (...) {
                return 4;
            }
        }
        return *big.made == 1 && eng.active() == 1 ? 0 : 5;
    });
    if (code == dlm_test::room_unmeasurable) MESSAGE("skipped the sum: less than 1 GiB available");
    else CHECK(code == 0);
#endif
}

TEST_CASE("engine: check_batch weighs the at_once largest sequences of a list together, as a caller running that many at once needs") {
    using cached_t = decoder<claiming_model, semi_ar_mask, approx_prefix_cache, threshold_schedule, greedy_sampler>;
    claiming_model m(1);
    cached_t d(m, semi_ar_mask{8}, {}, threshold_schedule{0.9});
    engine eng(d);
    CHECK_THROWS_WITH_AS(eng.check_batch(std::vector<tvec>{{1, 2}}, {.gen_length = 8}, 0), doctest::Contains("at_once"), invalid_parameter);
#if defined(DLM_TEST_SANITIZER) || !defined(__unix__)
    MESSAGE("the sum is checked without sanitizers on Unix: it limits a child's address space (RLIMIT_AS)");
#else
    // Stores of 1/200 of a child's room per slot: a short prompt's (82 + 8 slots) is 45 % of it, a
    // long one's (112 + 8) 60 %. Two short ones fit together, a long one and a short one do not.
    const int code = dlm_test::in_child_with_room(std::uint64_t{1} << 30, [&](std::uint64_t avail) {
        m.claimed = avail / 200;
        m.per_slot = true;
        const tvec short_prompt(82, 1), long_prompt(112, 1);
        const std::vector<tvec> list{short_prompt, short_prompt, long_prompt};
        try {
            eng.check_batch(list, {.gen_length = 8});  // each alone
            eng.check_batch(list, {.gen_length = 8}, 1);
            eng.check_batch(std::vector<tvec>{short_prompt, short_prompt}, {.gen_length = 8}, 2);
        } catch (...) {
            return 2;
        }
        for (const std::size_t at_once : {std::size_t{2}, std::size_t{3}, std::size_t{100}}) {
            try {
                eng.check_batch(list, {.gen_length = 8}, at_once);  // the long prompt and a short one, at least
                return 3;
            } catch (const memory_error& e) {
                const std::string whose = at_once == 2 ? "the 2 largest of 3 sequences, as many as run at once" : "3 sequence(s)";
                if (std::string(e.what()).find(whose) == std::string::npos) return 4;
            } catch (...) {
                return 5;
            }
        }
        return *m.made == 0 && eng.idle() ? 0 : 6;
    });
    if (code == dlm_test::room_unmeasurable) MESSAGE("skipped the sum: less than 1 GiB available");
    else CHECK(code == 0);
#endif
}

/// A claiming_model whose stores are device memory, on a device with `free` bytes free before any
/// store is made (each store made takes its claim).
struct device_model : claiming_model {
    static constexpr bool kv_on_device = true;
    device_model(std::uint64_t bytes, std::uint64_t free_bytes) : claiming_model(bytes), free(free_bytes) {}
    [[nodiscard]] std::uint64_t device_bytes_free() const noexcept {
        const std::uint64_t used = detail::saturating_mul(static_cast<std::uint64_t>(*made), claimed);
        return free > used ? free - used : 0;
    }
    std::uint64_t free;
};

/// The message of the memory_error `add` throws, which must name the device and these bytes needed and
/// available (a failed check when it throws none).
template <class F>
std::string refused_on_device(F&& add, std::uint64_t needed, std::uint64_t available) {
    try {
        add();
    } catch (const memory_error& e) {
        CHECK(e.where() == memory_kind::device);
        CHECK(e.needed() == needed);
        CHECK(e.available() == available);
        return e.what();
    }
    FAIL_CHECK("no memory_error");
    return {};
}

TEST_CASE("engine: a batch whose device K/V stores cannot fit in the device's free memory together is refused naming the device before any store is made; one that fits joins") {
    static_assert(model_reports_device_memory<device_model> && !model_reports_device_memory<claiming_model>);
    // Stores of 40 MiB (each below the size a store is weighed at alone) on a device with 100 MiB free.
    device_model m(std::uint64_t{40} << 20, std::uint64_t{100} << 20);
    decoder<device_model, semi_ar_mask, approx_prefix_cache, threshold_schedule, greedy_sampler> d(m, semi_ar_mask{4}, {}, threshold_schedule{0.9});
    engine eng(d);
    const std::vector<tvec> three{{1, 2}, {3, 4}, {5, 6}};
    CHECK(refused_on_device([&] { (void)eng.add_batch(three, {.gen_length = 8}); }, std::uint64_t{120} << 20, std::uint64_t{100} << 20)
              .find("the device K/V stores of 3 sequence(s) (up to 10 positions each) on the device") != std::string::npos);
    CHECK(*m.made == 0);
    CHECK(eng.idle());
    eng.check_batch(three, {.gen_length = 8});  // each alone fits
    CHECK_THROWS_WITH_AS(eng.check_batch(three, {.gen_length = 8}, 3), doctest::Contains("on the device"), memory_error);  // not together
    (void)eng.add(three[0], {.gen_length = 8, .cfg_scale = 1.0});  // guided: two stores, 80 MiB of the 100
    CHECK(*m.made == 2);
    CHECK(eng.held_bytes(memory_kind::device) == (std::uint64_t{80} << 20));  // the stores, device memory
    CHECK(eng.held_bytes() < (std::uint64_t{1} << 20));                       // the host holds its canvas and results
    CHECK_THROWS_AS((void)eng.add_batch(std::span(three).subspan(1), {.gen_length = 8}), memory_error);  // 80 MiB of the 20 left
    CHECK(*m.made == 2);
    CHECK(eng.active() == 1);
    // The host's own check counts no device store: stores of a petabyte on a device said to have more.
    device_model vast(std::uint64_t{1} << 50, std::numeric_limits<std::uint64_t>::max());
    decoder<device_model, semi_ar_mask, approx_prefix_cache, threshold_schedule, greedy_sampler> dv(vast, semi_ar_mask{4}, {}, threshold_schedule{0.9});
    engine big(dv);
    CHECK_NOTHROW((void)big.add(three[0], {.gen_length = 8}));
}

constexpr std::uint64_t mib = std::uint64_t{1} << 20;

/// A claiming_model that makes its logits rows in device memory, as the CUDA transformer does: a
/// device of `free` bytes less the stores made (given back never, here) and its logits buffer, which
/// a forward grows to its rows and keeps (device_logits_bytes).
struct device_logits_model : claiming_model {
    static constexpr bool kv_on_device = true;
    device_logits_model(std::uint64_t store, std::uint64_t free_bytes, index_t vocab_size) : claiming_model(store, vocab_size), free(free_bytes) {}
    [[nodiscard]] kv_cache make_kv_cache(index_t capacity) const {
        stores = detail::saturating_add(stores, kv_cache_bytes(capacity));
        return claiming_model::make_kv_cache(capacity);
    }
    [[nodiscard]] std::uint64_t device_bytes_free() const noexcept {
        const std::uint64_t used = detail::saturating_add(stores, buffer);
        return free > used ? free - used : 0;
    }
    [[nodiscard]] std::uint64_t device_logits_bytes() const noexcept { return buffer; }
    template <attention_mask Mask>
    void forward(std::span<const forward_request<kv_cache>> requests, const Mask& mask, std::span<float> logits) {
        buffer = std::max<std::uint64_t>(buffer, logits.size() * sizeof(float));
        claiming_model::forward(requests, mask, logits);
    }
    std::uint64_t free;
    std::uint64_t buffer = 0;
    mutable std::uint64_t stores = 0;
};

TEST_CASE("engine: a batch whose device logits rows and K/V stores cannot fit in the device's free memory together is refused naming both before anything is allocated, beside the rows promised since the last step") {
    static_assert(model_reports_device_logits<device_logits_model> && !model_reports_device_logits<device_model>);
    // Stores of 20 MiB and 8 rows of a 2^19 vocabulary (16 MiB) a sequence, on a device with 100 MiB
    // free: the stores of three fit (60 MiB), their rows beside them do not (108 MiB).
    device_logits_model m(20 * mib, 100 * mib, index_t{1} << 19);
    decoder<device_logits_model, semi_ar_mask, approx_prefix_cache, threshold_schedule, greedy_sampler> d(m, semi_ar_mask{8}, {}, threshold_schedule{0.9});
    engine eng(d);
    const std::vector<tvec> three{{1, 2}, {3, 4}, {5, 6}};
    CHECK(refused_on_device([&] { (void)eng.add_batch(three, {.gen_length = 8}); }, 108 * mib, 100 * mib)
              .find("the device K/V stores and logits rows of 3 sequence(s) (up to 10 positions each; gen_length 8 in blocks of 8, a "
                    "vocabulary of 524288) on the device") != std::string::npos);
    CHECK(*m.made == 0);
    CHECK(eng.idle());
    CHECK_THROWS_WITH_AS(eng.check_batch(three, {.gen_length = 8}, 3), doctest::Contains("logits rows"), memory_error);
    (void)eng.add(three[0], {.gen_length = 8, .cfg_scale = 1.0});  // guided: two stores and twice the rows, 72 MiB of the 100
    CHECK(*m.made == 2);
    CHECK(eng.held_bytes(memory_kind::device) == 72 * mib);  // its stores, and the rows promised it
    // 60 MiB are free: a sequence's 36 MiB would fit alone, not beside the 32 MiB of rows promised.
    CHECK(refused_on_device([&] { (void)eng.add(three[1], {.gen_length = 8}); }, 68 * mib, 60 * mib)
              .find("beside 33554432 bytes of logits rows promised to sequences added since the last step") != std::string::npos);
    CHECK(*m.made == 2);
    CHECK(eng.active() == 1);
    // A cache that keeps no K/V makes no store; the rows are the device's all the same (32 MiB each).
    device_logits_model bare(0, 80 * mib, index_t{1} << 20);
    decoder<device_logits_model, semi_ar_mask, no_cache, threshold_schedule, greedy_sampler> nd(bare, semi_ar_mask{8}, {}, threshold_schedule{0.9});
    engine uncached(nd);
    CHECK_THROWS_WITH_AS((void)uncached.add_batch(three, {.gen_length = 8}),
                         doctest::Contains("the device logits rows of 3 sequence(s) (gen_length 8 in blocks of 8, a vocabulary of 1048576) on the device"),
                         memory_error);
}

TEST_CASE("engine: the device logits buffer's spare rows offset a joining sequence's device rows, never its device K/V stores") {
    // Rows of 8 MiB a sequence (8 of a 2^18 vocabulary); stores free, at first.
    device_logits_model m(0, std::numeric_limits<std::uint64_t>::max(), index_t{1} << 18);
    decoder<device_logits_model, semi_ar_mask, approx_prefix_cache, threshold_schedule, greedy_sampler> d(m, semi_ar_mask{8}, {}, threshold_schedule{0.9});
    engine eng(d);
    const auto ids = eng.add_batch(std::vector<tvec>(8, tvec{1, 2}), {.gen_length = 8});
    (void)eng.step();
    REQUIRE(m.buffer == 64 * mib);  // 8 sequences' rows, all of it spare once they leave
    CHECK(eng.held_bytes(memory_kind::device) == 64 * mib);  // what their ends give back: dlm-server waits for it
    for (const auto id : ids) eng.cancel(id);
    (void)eng.take_finished();
    REQUIRE(eng.idle());
    m.free = m.buffer + 30 * mib;  // 30 MiB free beside the buffer
    const std::vector<tvec> five(5, tvec{1, 2});
    m.claimed = 7 * mib;  // 40 MiB of rows fit in the spare buffer; 35 MiB of stores do not fit in the 30 free
    (void)refused_on_device([&] { (void)eng.add_batch(five, {.gen_length = 8}); }, 35 * mib, 30 * mib);
    CHECK(*m.made == 8);
    m.claimed = 5 * mib;  // 25 MiB of stores fit; with the rows, 65 MiB, only because the buffer holds the rows
    CHECK(eng.add_batch(five, {.gen_length = 8}).size() == 5);
    CHECK(*m.made == 13);
}

TEST_CASE("engine: the stepper's spare logits rows offset a joining sequence's rows, never its K/V stores") {
#if defined(DLM_TEST_SANITIZER) || !defined(__unix__)
    MESSAGE("checked without sanitizers on Unix: it limits a child's address space (RLIMIT_AS)");
#else
    claiming_model m(0, index_t{1} << 16);
    decoder<claiming_model, block_causal_mask, prefix_cache, threshold_schedule, greedy_sampler> dec(m, block_causal_mask{32}, {}, threshold_schedule{0.9});
    engine eng(dec);
    const auto ids = eng.add_batch(std::vector<tvec>(8, tvec{1, 2}), {.gen_length = 32});
    (void)eng.step();  // 8 sequences' 32 rows of 2^16 logits: a buffer of 64 MiB, all of it spare once they leave
    CHECK(eng.held_bytes() >= (std::uint64_t{64} << 20));  // their rows, beside their canvases: what their ends give back
    CHECK(eng.held_bytes() < (std::uint64_t{65} << 20));
    for (const auto id : ids) eng.cancel(id);
    (void)eng.take_finished();
    REQUIRE(eng.idle());
    // In a child (forked after the forward: it runs none, so OpenMP's threads are not needed there).
    const int code = dlm_test::in_child_with_room(std::uint64_t{1} << 30, [&](std::uint64_t avail) {
        m.claimed = avail + (std::uint64_t{32} << 20);  // a store 32 MiB larger than there is
        try {
            (void)eng.add(tvec{1, 2}, {.gen_length = 32});  // its 8 MiB of rows fit in the buffer; its store does not fit anywhere
            return 3;
        } catch (const memory_error&) {
            return *m.made == 8 ? 0 : 4;
        } catch (...) {
            return 5;
        }
    });
    if (code == dlm_test::room_unmeasurable) MESSAGE("skipped: less than 1 GiB available");
    else CHECK(code == 0);
#endif
}

/// A claiming_model that reads back its last step's logits (model_self_conditions): each sequence
/// keeps a copy of its rows beside the stepper's buffer.
struct self_conditioning_claimer : claiming_model {
    using claiming_model::claiming_model;
    static constexpr bool self_conditioning = true;
};

TEST_CASE("engine: the stepper's spare logits rows never offset a self-conditioning sequence's own copy of its logits") {
#if defined(DLM_TEST_SANITIZER) || !defined(__unix__)
    MESSAGE("checked without sanitizers on Unix: it limits a child's address space (RLIMIT_AS)");
#else
    static_assert(model_self_conditions<self_conditioning_claimer>, "the test model must read back its logits");
    self_conditioning_claimer m(0, index_t{1} << 16);
    decoder<self_conditioning_claimer, block_causal_mask, prefix_cache, threshold_schedule, greedy_sampler> dec(m, block_causal_mask{32}, {},
                                                                                                             threshold_schedule{0.9});
    engine eng(dec);
    const auto ids = eng.add_batch(std::vector<tvec>(8, tvec{1, 2}), {.gen_length = 32});
    (void)eng.step();  // a buffer of 64 MiB of rows, all of it spare once they leave
    for (const auto id : ids) eng.cancel(id);
    (void)eng.take_finished();
    REQUIRE(eng.idle());
    const int code = dlm_test::in_child_with_room(std::uint64_t{1} << 30, [&](std::uint64_t avail) {
        // A store leaving 4 MiB: the 8 MiB of rows fit in the spare buffer, the 8 MiB copy does not.
        m.claimed = avail - (std::uint64_t{4} << 20);
        try {
            (void)eng.add(tvec{1, 2}, {.gen_length = 32});
            return 3;
        } catch (const memory_error&) {
        } catch (...) {
            return 4;
        }
        m.claimed = avail - (std::uint64_t{12} << 20);  // room for the copy too: it joins
        try {
            (void)eng.add(tvec{1, 2}, {.gen_length = 32});
        } catch (...) {
            return 5;
        }
        return eng.active() == 1 ? 0 : 6;
    });
    if (code == dlm_test::room_unmeasurable) MESSAGE("skipped: less than 1 GiB available");
    else CHECK(code == 0);
#endif
}

/// A device_logits_model (no K/V claimed, a vocabulary of 16: 512 bytes of logits rows a sequence)
/// whose forward work buffers take `per_row` bytes a window row on the device, grown to a forward's
/// rows and kept (work_bytes, work_bytes_held), as the CUDA transformer's are.
struct device_work_model : device_logits_model {
    device_work_model(std::uint64_t per_row_bytes, std::uint64_t free_bytes) : device_logits_model(0, free_bytes, 16), per_row(per_row_bytes) {}
    [[nodiscard]] std::uint64_t work_bytes(index_t rows) const noexcept { return static_cast<std::uint64_t>(rows) * per_row; }
    [[nodiscard]] std::uint64_t work_bytes_held() const noexcept { return work; }
    [[nodiscard]] std::uint64_t device_bytes_free() const noexcept {
        const std::uint64_t left = device_logits_model::device_bytes_free();
        return left > work ? left - work : 0;
    }
    template <attention_mask Mask>
    void forward(std::span<const forward_request<kv_cache>> requests, const Mask& mask, std::span<float> logits) {
        std::uint64_t rows = 0;
        for (const auto& rq : requests) rows += static_cast<std::uint64_t>(rq.plan.window_size());
        work = std::max(work, rows * per_row);
        device_logits_model::forward(requests, mask, logits);
    }
    std::uint64_t per_row;
    std::uint64_t work = 0;
};

TEST_CASE("engine: a batch whose forward work buffers cannot fit on the device beside the running sequences' canvases is refused before it joins, and what the buffers hold offsets it") {
    static_assert(model_reports_work_bytes<device_work_model> && work_on_device<device_work_model>);
    // 8 MiB a window row; canvases of 10 rows (a 2-token prompt, 8 slots), uncached: 80 MiB a sequence,
    // on a device with 800 MiB free (sums above weighed_above, 64 MiB, are measured).
    constexpr std::uint64_t u = 8 * mib;
    device_work_model m(u, 100 * u);
    decoder<device_work_model, semi_ar_mask, no_cache, threshold_schedule, greedy_sampler> d(m, semi_ar_mask{8}, {}, threshold_schedule{0.9});
    engine eng(d);
    const generation_options o{.gen_length = 8};
    const std::vector<tvec> eleven(11, tvec{1, 2}), nine(9, tvec{1, 2});
    CHECK(refused_on_device([&] { (void)eng.add_batch(eleven, o); }, 110 * u + 11 * 512, 100 * u)
              .find("the device logits rows of 11 sequence(s) (gen_length 8 in blocks of 8, a vocabulary of 16) and the forward's work "
                    "buffers over their canvases on the device") != std::string::npos);
    CHECK(eng.idle());
    CHECK_THROWS_AS(eng.check_batch(eleven, o, 11), memory_error);
    eng.check_batch(eleven, o, 9);  // nine at a time fit (ten need their rows beside 800 MiB)
    auto ids = eng.add_batch(nine, o);
    CHECK(eng.held_bytes(memory_kind::device) == 90 * u + 9 * 512);  // their canvases' share of the buffers, their rows promised
    CHECK(eng.held_bytes() < mib);                                      // none of it host memory
    // One more fits alone, not beside the nine: their canvases come first. Guided, it counts twice.
    (void)refused_on_device([&] { (void)eng.add(tvec{1, 2}, o); }, 100 * u + 10 * 512, 100 * u);
    (void)refused_on_device([&] { (void)eng.add(tvec{1, 2}, {.gen_length = 8, .cfg_scale = 1.0}); }, 110 * u + 11 * 512, 100 * u);
    CHECK(eng.active() == 9);
    (void)eng.step();
    REQUIRE(m.work == 90 * u);  // 80 MiB left free beside the buffers and 4608 bytes of logits
    CHECK(eng.held_bytes(memory_kind::device) == 90 * u + 9 * 512);
    for (const auto id : ids) eng.cancel(id);
    (void)eng.take_finished();
    REQUIRE(eng.idle());
    // The buffers they leave hold another nine: they join with 80 MiB free.
    ids = eng.add_batch(nine, o);
    (void)eng.step();
    for (const auto id : ids) eng.cancel(id);
    (void)eng.take_finished();
    CHECK(m.work == 90 * u);
    // Eleven need 160 MiB more than the buffers hold, and 1024 bytes of rows beyond the logits buffer's 4608.
    (void)refused_on_device([&] { (void)eng.add_batch(eleven, o); }, 20 * u + 1024, 10 * u - 9 * 512);
}

TEST_CASE("engine: a host model's forward work buffers are weighed with the decoding state, named in the refusal") {
    // 2^40 bytes a window row: a 10-row canvas needs 10 TiB of activations, which no machine has.
    struct vast_work : claiming_model {
        using claiming_model::claiming_model;
        [[nodiscard]] std::uint64_t work_bytes(index_t rows) const noexcept { return static_cast<std::uint64_t>(rows) << 40; }
        [[nodiscard]] std::uint64_t work_bytes_held() const noexcept { return 0; }
    };
    static_assert(model_reports_work_bytes<vast_work> && !work_on_device<vast_work>);
    vast_work m(0);
    decoder<vast_work, semi_ar_mask, no_cache, threshold_schedule, greedy_sampler> d(m, semi_ar_mask{8}, {}, threshold_schedule{0.9});
    engine eng(d);
    try {
        (void)eng.add(tvec{1, 2}, {.gen_length = 8});
        FAIL("no memory_error");
    } catch (const memory_error& e) {
        CHECK(e.where() == memory_kind::host);
        CHECK(e.needed() >= (std::uint64_t{10} << 40));
        CHECK(std::string(e.what()).find("(gen_length 8 in blocks of 8, a vocabulary of 32) and the forward's work buffers over their canvases") !=
              std::string::npos);
    }
    CHECK(eng.idle());
}

}  // namespace test_engine_memory
