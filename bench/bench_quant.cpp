// dlm-bench-quant — one quantized product, Y[m × n] = X[m × k] · Wᵀ with W in a GGUF block type,
// at several row counts: ms per matrix, the weights' GB/s, the ratio to the weight-streaming floor
// (the matrix's bytes over the read bandwidth measured in the same run) and the share of the
// quantized form's measured peak. Several matrices are multiplied in turn, so that the weights come
// from memory as a model's do (docs/benchmarks.md, "Small-row products"), and the time the activations'
// quantization alone takes of each product. With --amx-vector-side, also the same products on the
// AMX kernels with every tile instruction a no-op (amx_vector_side.hpp): their vector side alone,
// a bound on amx-int8 that a CPU without tiles can measure.
//
//   dlm-bench-quant [--types q8_0,q4_0,q4_k,q5_k,q6_k] [--rows 1,4,8,32] [--k 4096] [--n 4096]
//                   [--matrices 8] [--threads 1] [--reps 5] [--bandwidth-mib 1024] [--no-peak] [--amx-vector-side]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <dlm/cpu/quant/matrix.hpp>

#include "amx_vector_side.hpp"
#include "args.hpp"
#include "ceilings.hpp"

namespace {

using namespace dlm;

struct options {
    std::vector<io::gguf_type> types{io::gguf_type::q8_0, io::gguf_type::q4_0, io::gguf_type::q4_k, io::gguf_type::q5_k, io::gguf_type::q6_k};
    std::vector<index_t> rows{1, 4, 8, 32};
    index_t k = 4096, n = 4096;
    int matrices = 8, threads = 1, reps = 5;
    std::size_t bandwidth_mib = 1024;
    bool peak = true;
    bool amx_vector_side = false;
};

const std::string usage_text =
    "usage: dlm-bench-quant [--types q8_0,q4_0,q4_k,q5_k,q6_k] [--rows 1,4,8,32] [--k N] [--n N] [--matrices N] [--threads N]\n"
    "                       [--reps N] [--bandwidth-mib N] [--no-peak] [--amx-vector-side]\n";

std::vector<io::gguf_type> parse_types(bench::args& a) {
    const std::pair<const char*, io::gguf_type> known[] = {{"q8_0", io::gguf_type::q8_0}, {"q4_0", io::gguf_type::q4_0},
                                                            {"q4_k", io::gguf_type::q4_k}, {"q5_k", io::gguf_type::q5_k},
                                                            {"q6_k", io::gguf_type::q6_k}};
    std::vector<io::gguf_type> types;
    for (const std::string& t : a.names()) {
        const auto* hit = std::find_if(std::begin(known), std::end(known), [&](const auto& e) { return t == e.first; });
        if (hit == std::end(known)) throw invalid_parameter(a.flag(), "'" + t + "' is not one of q8_0, q4_0, q4_k, q5_k, q6_k");
        types.push_back(hit->second);
    }
    return types;
}

options parse(int argc, char** argv) {
    options o;
    bench::args a(argc, argv);
    while (a.next()) {
        if (a.is("--no-peak")) o.peak = false;
        else if (a.is("--amx-vector-side")) {
            if (const char* refusal = bench::amx_vector_side_refusal(); *refusal != '\0') throw invalid_parameter(a.flag(), refusal);
            o.amx_vector_side = true;
        } else if (a.is("--types")) o.types = parse_types(a);
        else if (a.is("--rows")) o.rows = a.integers<index_t>(1, 4096);
        else if (a.is("--k")) o.k = a.integer<index_t>(1, 1 << 16);
        else if (a.is("--n")) o.n = a.integer<index_t>(1, 1 << 18);
        else if (a.is("--matrices")) o.matrices = a.integer(1, 256);
        else if (a.is("--threads", "-t")) o.threads = a.integer(1, cli::max_threads);
        else if (a.is("--reps")) o.reps = a.integer(1, 1000);
        else if (a.is("--bandwidth-mib")) o.bandwidth_mib = a.integer<std::size_t>(1, 1 << 16);
        else a.unknown();
    }
    return o;
}

/// `count` matrices of n × k in `type`, from normal values by quant::quantize_row.
std::vector<cpu::quant::matrix> random_matrices(io::gguf_type type, index_t n, index_t k, int count, std::mt19937& rng) {
    const std::vector<cpu::quant::part_spec> parts{{n, type}};
    const std::size_t total = cpu::quant::matrix::bytes_for(k, parts) * static_cast<std::size_t>(count);
    if (total > (std::size_t{16} << 30)) throw invalid_parameter("--matrices", "the matrices would take " + std::to_string(total >> 20) + " MiB (16 GiB at most)");
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const std::size_t rb = cpu::quant::row_bytes(type, k);
    std::vector<float> row(static_cast<std::size_t>(k));
    std::vector<std::byte> raw(rb * static_cast<std::size_t>(n));
    std::vector<cpu::quant::matrix> ms;
    for (int i = 0; i < count; ++i) {
        ms.emplace_back(k, parts);
        for (index_t r = 0; r < n; ++r) {
            for (float& v : row) v = normal(rng);
            cpu::quant::quantize_row(type, row.data(), raw.data() + static_cast<std::size_t>(r) * rb, k);
        }
        ms.back().set_rows(0, raw.data(), n);
    }
    return ms;
}

}  // namespace

int main(int argc, char** argv) {
    return bench::run_main("dlm-bench-quant", usage_text, [&] {
        const options o = parse(argc, argv);
        bench::set_threads(o.threads);
        const bench::ceilings cs = bench::measure_ceilings({o.threads}, o.peak, o.bandwidth_mib);
        const bench::ceiling c = cs.of(o.threads);
        const cpu::kernel_table& kt = cpu::kernels();
        const bench::applied_peak pk = bench::peak_for(c.pk, kt.quant.name);
        std::printf("dlm quantized product benchmark: kernels %s, products %s, %d thread(s), best of %d, %d matrices of %lld x %lld in turn\n",
                    kt.name, kt.quant.name, o.threads, o.reps, o.matrices, static_cast<long long>(o.n), static_cast<long long>(o.k));
        bench::print_ceilings(cs, o.bandwidth_mib);
        const index_t most_rows = *std::max_element(o.rows.begin(), o.rows.end());
        std::mt19937 rng(1);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        std::vector<float> x(static_cast<std::size_t>(most_rows * o.k)), y(static_cast<std::size_t>(most_rows * o.n));
        for (float& v : x) v = normal(rng);
        for (const io::gguf_type type : o.types) {
            const std::vector<cpu::quant::matrix> ms = random_matrices(type, o.n, o.k, o.matrices, rng);
            const double bytes = static_cast<double>(ms.front().bytes());
            std::printf("%s: %.1f MB a matrix\n", std::string(io::gguf_type_name(type)).c_str(), bytes / 1e6);
            for (const index_t m : o.rows) {
                // Seconds per matrix, the best of o.reps passes over every matrix.
                const auto product = [&] { return bench::best_of(o.reps, [&] { for (const cpu::quant::matrix& w : ms) cpu::quant::linear(m, x.data(), o.k, w, y.data(), o.n); }) / o.matrices; };
                const double best = product();
                // The activations' quantization alone (a part of each product above), best of as many.
                cpu::quant::activations act;
                const double quantize = bench::best_of(o.reps, [&] { act.quantize(m, o.k, x.data(), o.k, cpu::quant::geometry(type).block, kt.quant); });
                const double ops = 2.0 * static_cast<double>(m) * static_cast<double>(o.n) * static_cast<double>(o.k);
                double vector_side = 0;  // the AMX kernels without their tile instructions (--amx-vector-side)
    #if defined(__x86_64__)
                if (o.amx_vector_side) {
                    const bench::amx_vector_side on;
                    vector_side = product();
                }
    #endif
                std::printf("  %4lld rows: %8.3f ms  %6.1f GB/s", static_cast<long long>(m), best * 1e3, bytes / best / 1e9);
                if (c.read_bps > 0) std::printf("  floor x %5.2f", best / (bytes / c.read_bps));
                std::printf("  %7.1f GOP/s", ops / best / 1e9);
                if (pk.rate > 0) std::printf("  %5.1f %% of peak (%s)", 100.0 * ops / best / pk.rate, pk.name);
                std::printf("  quantizing A %.4f ms (%.1f %%)", quantize * 1e3, 100.0 * quantize / best);
                if (vector_side > 0) std::printf("  amx-int8 vector side alone %.3f ms (%.1f GOP/s at most)", vector_side * 1e3, ops / vector_side / 1e9);
                std::printf("\n");
            }
        }
        return 0;
    });
}
