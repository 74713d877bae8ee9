// bench/ceilings.hpp — the measured ceilings a CPU forward is compared with, at each thread count
// of a run: the compute peaks (peak.hpp) and the read bandwidth (bandwidth.hpp), and the one peak
// that applies to a model's weights (the instruction its products run on).
#pragma once

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <dlm/cpu/gemm.hpp>

#include "bandwidth.hpp"
#include "peak.hpp"

namespace dlm::bench {

/// The ceilings on `threads` threads (peaks summed over the threads' own chains).
struct ceiling {
    int threads = 1;
    peaks pk;
    double read_bps = 0;  ///< bytes/s read from memory (0: not measured)
};

/// The ceilings at every thread count of a run.
struct ceilings {
    std::vector<ceiling> at;

    /// The ceiling measured at `threads` (a zero one where none was).
    [[nodiscard]] ceiling of(int threads) const {
        for (const ceiling& c : at)
            if (c.threads == threads) return c;
        return {threads, {}, 0};
    }
};

/// Measures the peaks (where `compute`) and the read bandwidth over a `mib` MiB buffer (where
/// mib > 0) at each of `threads` (1 and the largest count are always among them).
inline ceilings measure_ceilings(std::vector<int> threads, bool compute, std::size_t mib) {
    threads.push_back(1);
    std::sort(threads.begin(), threads.end());
    threads.erase(std::unique(threads.begin(), threads.end()), threads.end());
    ceilings out;
    std::optional<bandwidth_buffer> buffer;
    if (mib > 0) buffer.emplace(mib, threads.back());
    for (const int t : threads) {
        ceiling c{t, compute ? measure_peaks(t) : peaks{}, buffer ? buffer->read_bandwidth(t) : 0.0};
        out.at.push_back(c);
    }
    if (buffer) {
        buffer.reset();
        forget_peak_resident();
    }
    return out;
}

/// Prints one line per thread count: "ceilings, 2 threads: f32 FMA ... GFLOP/s, ..., read ... GB/s".
inline void print_ceilings(const ceilings& cs, std::size_t mib) {
    for (const ceiling& c : cs.at) {
        std::printf("ceilings, %d thread(s):", c.threads);
        const char* sep = " ";
        auto item = [&](const char* name, double v, const char* unit) {
            if (v <= 0) return;
            std::printf("%s%s %.1f %s", sep, name, v / 1e9, unit);
            sep = ", ";
        };
        item("f32 FMA", c.pk.fma, "GFLOP/s");
        item("vdpbf16ps", c.pk.bf16_dot, "GFLOP/s");
        item("vpmaddubsw", c.pk.int8_madd, "GOP/s");
        item("vpdpbusd", c.pk.int8_dot, "GOP/s");
        item("AMX bf16", c.pk.amx_bf16, "GFLOP/s");
        item("AMX int8", c.pk.amx_int8, "GOP/s");
        if (c.read_bps > 0) std::printf("%sread %.1f GB/s (%zu MiB)", sep, c.read_bps / 1e9, mib);
        std::printf("\n");
    }
    if (cpu::detect_isa() != cpu::isa::amx) std::printf("ceilings: no AMX peaks (%s)\n", std::string(cpu::amx_unavailable_reason()).c_str());
}

/// The product form the model's matrices run on: "amx-bf16", "vdpbf16ps", "fma", "amx-int8",
/// "vpdpbusd", ... (the quantized form for GGUF block types and mixtures of them).
inline std::string weight_product(const std::string& weight_type) {
    const cpu::kernel_table& kt = cpu::kernels();
    if (weight_type == "bf16") return cpu::bf16_product().name;
    if (weight_type == "f16") return kt.f16.name;
    if (weight_type == "f32") return kt.f32.name;
    return kt.quant.name;
}

/// The peak that applies to products of form `product` (amx-bf16, amx-int8, vdpbf16ps, vpdpbusd,
/// vpmaddubsw; the f32 FMA peak for every other form), and its name.
struct applied_peak {
    double rate = 0;
    const char* name = "f32 FMA";
};
inline applied_peak peak_for(const peaks& p, const std::string& product) {
    if (product == "amx-bf16") return {p.amx_bf16, "AMX bf16"};
    if (product == "amx-int8") return {p.amx_int8, "AMX int8"};
    if (product == "vdpbf16ps") return {p.bf16_dot, "vdpbf16ps"};
    if (product == "vpdpbusd") return {p.int8_dot, "vpdpbusd"};
    if (product == "vpmaddubsw") return {p.int8_madd, "vpmaddubsw"};
    return {p.fma, "f32 FMA"};
}

inline nlohmann::json to_json(const ceilings& cs) {
    nlohmann::json a = nlohmann::json::array();
    for (const ceiling& c : cs.at)
        a.push_back({{"threads", c.threads},
                     {"f32_fma_flops", c.pk.fma},
                     {"bf16_dot_flops", c.pk.bf16_dot},
                     {"int8_dot_ops", c.pk.int8_dot},
                     {"int8_madd_ops", c.pk.int8_madd},
                     {"amx_bf16_flops", c.pk.amx_bf16},
                     {"amx_int8_ops", c.pk.amx_int8},
                     {"read_bytes_per_s", c.read_bps}});
    return a;
}

}  // namespace dlm::bench
