// Every preset on the GPU: identical greedy tokens on CPU and GPU (f32 storage), and device-side
// decoding (dlm::cuda::device_decoder) equal to host-side decoding (dlm::decoder) on the same GPU model.
#include "cuda_test_util.cuh"

using namespace dlm_cuda_test;

namespace {

template <class Gpu>
void check_presets(cpu::transformer* cpu, Gpu& gpu, const std::vector<tvec>& prompts) {
    const index_t gen = 32;
    auto both = [&]<template <class> class Preset>(const char* name, auto... options) {
        CAPTURE(name);
        const auto host = decode<Preset<Gpu>>(gpu, prompts, gen, options...);
        const auto device = decode<dlm::cuda::device_decoder_t<Preset<Gpu>>>(gpu, prompts, gen, options...);
        check_same_tokens(host, device);
        for (std::size_t i = 0; i < host.sequences.size(); ++i) {
            CHECK(host.sequences[i].stats.forwards == device.sequences[i].stats.forwards);
            CHECK(host.sequences[i].stats.rows_computed == device.sequences[i].stats.rows_computed);
        }
        if (cpu) check_same_tokens(decode<Preset<cpu::transformer>>(*cpu, prompts, gen, options...), host);
    };
    both.template operator()<presets::autoregressive>("autoregressive");
    both.template operator()<presets::llada>("llada");
    both.template operator()<presets::dream>("dream", bidirectional_mask{}, no_cache{}, dream_schedule{32});
    both.template operator()<presets::fast_dllm>("fast_dllm", semi_ar_mask{8});
    both.template operator()<presets::fast_dllm_dual>("fast_dllm_dual", semi_ar_mask{8});
    both.template operator()<presets::cdlm>("cdlm", block_causal_mask{8});
    both.template operator()<presets::cd4lm>("cd4lm", semi_ar_mask{8});
}


}  // namespace

TEST_SUITE("presets") {
    TEST_CASE("every preset: identical greedy tokens on CPU and GPU (f32), and device-side decoding equals host-side") {
        const std::vector<tvec> prompts{{5, 17, 42, 7, 99, 3}, {11, 12, 250, 31, 8, 200, 140, 77, 6, 2, 19}};
        for (const char* name : {"llada_tiny", "dream_tiny"}) {
            CAPTURE(name);
            auto cpu = cpu::transformer::load(models_dir / name);
            auto g32 = gpu32::load(models_dir / name);
            check_presets(&cpu, g32, prompts);
        }
    }

    TEST_CASE("device-side decoding equals host-side decoding with bf16 weights") {
        const std::vector<tvec> prompts{{5, 17, 42, 7, 99, 3}, {11, 12, 250, 31, 8, 200, 140, 77, 6, 2, 19}, {1}};
        for (const char* name : {"llada_tiny", "dream_tiny"}) {
            CAPTURE(name);
            auto g16 = gpu16::load(models_dir / name);
            check_presets(static_cast<cpu::transformer*>(nullptr), g16, prompts);
        }
    }

    TEST_CASE("sampled decoding (temperature > 0) is the same on host and device, and on CPU and GPU") {
        auto cpu = cpu::transformer::load(models_dir / "llada_tiny");
        auto g32 = gpu32::load(models_dir / "llada_tiny");
        const std::vector<tvec> prompts{{5, 17, 42, 7, 99, 3}, {8, 9}};
        using P = presets::llada<gpu32>;
        const presets::llada_sampler hot(0.8f);
        const auto host = decode<P>(g32, prompts, 32, semi_ar_mask{8}, no_cache{}, llada_schedule{32}, hot);
        const auto device = decode<dlm::cuda::device_decoder_t<P>>(g32, prompts, 32, semi_ar_mask{8}, no_cache{}, llada_schedule{32}, hot);
        check_same_tokens(host, device);
        check_same_tokens(decode<presets::llada<cpu::transformer>>(cpu, prompts, 32, semi_ar_mask{8}, no_cache{}, llada_schedule{32}, hot), host);
    }

    TEST_CASE("the step callback sees the same events and can cancel") {
        auto g = gpu32::load(models_dir / "llada_tiny");
        dlm::cuda::device_decoder_t<presets::cdlm<gpu32>> d(g, block_causal_mask{8});
        int events = 0;
        const auto r = d.generate(tvec{5, 6, 7}, {32, 1}, [&](const step_event& e) {
            ++events;
            CHECK(!e.committed.empty());
            return events == 3 ? step_action::cancel : step_action::proceed;
        });
        CHECK(events == 3);
        CHECK(r.cancelled());
    }
}
