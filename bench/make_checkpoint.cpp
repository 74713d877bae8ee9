// dlm-make-checkpoint — writes a random-weight checkpoint of a named shape, laid out like the
// published model: config.json (the published keys), safetensors shards named
// model-0000i-of-0000N.safetensors with model.safetensors.index.json (or one model.safetensors),
// weights in bf16 (or f16, f32). Full-size runs (LLaDA-8B, Dream-7B) can then be measured without
// downloading anything. With --format gguf, ONE GGUF file instead, as llama.cpp's converter and
// llama-quantize lay it out, matrices in --type f32, f16, bf16, q8_0 or q4_k_m (bench/gguf_checkpoint.hpp).
//
//   dlm-make-checkpoint --shape llada-8b --out build/llada-8b-random [--dtype bf16] [--seed 1]
//                       [--scale 1] [--shards N]
//   dlm-make-checkpoint --shape llada-8b --format gguf --type q4_k_m --out /tmp/llada8b-q4_k_m.gguf
//
// The values are those of cpu::random_weights(config, seed, scale), generated tensor by tensor in
// the order the transformer reads them (cpu::weight_order), so the written model loads as exactly
// the model cpu::transformer::random(config, seed, dtype, scale) builds in memory. Memory use is
// one slice of one tensor; the data streams to disk. Progress goes to stderr.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <dlm/cpu/weight_sources.hpp>
#include <dlm/io/dtype.hpp>

#include "../cli/files.hpp"
#include "../cli/terminal.hpp"
#include "args.hpp"
#include "gguf_checkpoint.hpp"
#include "shapes.hpp"

using namespace dlm;
namespace fs = std::filesystem;

namespace {

std::string usage_text() {
    return "usage: dlm-make-checkpoint --shape NAME --out DIR [--dtype bf16|f16|f32] [--seed N] [--scale S] [--shards N]\n"
           "       dlm-make-checkpoint --shape NAME --format gguf --out FILE.gguf [--type f32|f16|bf16|q8_0|q4_k_m] [--seed N] [--scale S]\n"
           "  shapes: " + bench::shape_names() + "\n";
}

struct options {
    std::string shape_name, out_dir, dtype_name = "bf16", format = "safetensors", gguf_type = "q8_0";
    std::uint64_t seed = 1;
    float scale = 1.0f;
    int shards = 0;  // 0: the shape's own count
};

options parse(int argc, char** argv) {
    options o;
    bench::args a(argc, argv);
    while (a.next()) {
        if (a.is("--shape")) o.shape_name = a.value();
        else if (a.is("--out")) o.out_dir = a.path();
        else if (a.is("--dtype")) o.dtype_name = a.value();
        else if (a.is("--seed")) o.seed = a.integer<std::uint64_t>(0, std::numeric_limits<std::uint64_t>::max());
        else if (a.is("--scale")) o.scale = static_cast<float>(a.number(1e-6, 1e6));
        else if (a.is("--shards")) o.shards = a.integer(1, 9999);
        else if (a.is("--format")) o.format = a.value();
        else if (a.is("--type")) o.gguf_type = a.value();
        else a.unknown();
    }
    if (o.shape_name.empty()) throw invalid_parameter("--shape", "is required");
    if (o.out_dir.empty()) throw invalid_parameter("--out", "is required");
    if (o.format != "safetensors" && o.format != "gguf") throw invalid_parameter("--format", "must be safetensors or gguf, not '" + o.format + "'");
    return o;
}

struct tensor_entry {
    cpu::tensor_role role;
    index_t layer;
    std::string name;
    std::vector<std::int64_t> shape;
    std::uint64_t bytes;
    int shard;
};

std::string shard_name(int i, int n) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", i + 1, n);
    return buf;
}


// The folder to write into, created if needed, without the checkpoint files of an earlier run: a
// model.safetensors left beside new shards would be the one a loader reads (the single file wins).
void prepare_folder(const fs::path& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec || !fs::is_directory(dir, ec)) throw file_error(dir.string(), "cannot be made a folder: " + (ec ? ec.message() : "a file is there"));
    const std::regex shard(R"(model-[0-9]{5}-of-[0-9]{5}\.safetensors)");
    int removed = 0;
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        if (name == "model.safetensors" || name == "model.safetensors.index.json" || std::regex_match(name, shard)) {
            fs::remove(e.path(), ec);
            if (ec) throw file_error(e.path().string(), "an earlier run's checkpoint file cannot be removed: " + ec.message());
            ++removed;
        }
    }
    if (ec) throw file_error(dir.string(), "cannot be listed: " + ec.message());
    if (removed > 0) std::fprintf(stderr, "dlm-make-checkpoint: removed %d checkpoint file(s) of an earlier run from %s\n", removed, dir.string().c_str());
}

// The tensors in the transformer's read order, each given to one of `shards` files of about equal size.
std::vector<tensor_entry> plan_tensors(const io::model_config& cfg, io::dtype type, int shards, std::uint64_t& total) {
    std::vector<tensor_entry> tensors;
    total = 0;
    for (const auto& [role, layer] : cpu::weight_order(cfg)) {
        tensor_entry t{role, layer, cpu::tensor_name(cfg.arch, role, layer), cpu::tensor_shape(cfg, role), 0, 0};
        std::uint64_t n = 1;
        for (std::int64_t d : t.shape) n *= static_cast<std::uint64_t>(d);
        t.bytes = n * io::dtype_size(type);
        total += t.bytes;
        tensors.push_back(std::move(t));
    }
    std::uint64_t running = 0;
    for (tensor_entry& t : tensors) {
        t.shard = static_cast<int>(std::min<std::uint64_t>(static_cast<std::uint64_t>(shards - 1), running * static_cast<std::uint64_t>(shards) / total));
        running += t.bytes;
    }
    return tensors;
}

// Streams one tensor's values to `out` in slices of about 4 M values; returns the bytes written.
std::uint64_t write_tensor(std::ofstream& out, cpu::random_source& src, const tensor_entry& t, io::dtype type) {
    const std::int64_t rows = t.shape.front(), cols = t.shape.size() == 2 ? t.shape[1] : 1;
    const std::int64_t chunk = std::max<std::int64_t>(1, (1 << 22) / cols);
    const std::size_t width = io::dtype_size(type);
    std::vector<float> values;
    std::vector<unsigned char> bytes;
    std::uint64_t written = 0;
    for (std::int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const std::int64_t n = std::min(chunk, rows - r0);
        values.resize(static_cast<std::size_t>(n * cols));
        src.read(t.role, t.layer, static_cast<index_t>(r0), static_cast<index_t>(n), values.data());
        bytes.resize(values.size() * width);
        for (std::size_t i = 0; i < values.size(); ++i) {
            std::uint32_t bits;
            if (type == io::dtype::f32) std::memcpy(&bits, &values[i], 4);
            else bits = type == io::dtype::bf16 ? io::f32_to_bf16(values[i]) : io::f32_to_f16(values[i]);
            for (std::size_t b = 0; b < width; ++b) bytes[i * width + b] = static_cast<unsigned char>((bits >> (8 * b)) & 0xffu);
        }
        out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
        written += bytes.size();
    }
    return written;
}

/// Whether the running "\r  done / total GB" line is drawn: only on a terminal (a log file gets the
/// first and last lines alone).
bool progress_shown() {
    static const bool shown = cli::is_terminal(2);
    return shown;
}

// A safetensors folder: config.json, the shards (or one model.safetensors) and their index.
void write_safetensors(const options& o, const bench::named_shape& shape, io::dtype type, int shards) {
    const io::model_config cfg = io::parse_config(shape.config, o.shape_name);
    std::uint64_t total = 0;
    const std::vector<tensor_entry> tensors = plan_tensors(cfg, type, shards, total);
    prepare_folder(o.out_dir);
    {
        nlohmann::json config = shape.config;
        config["torch_dtype"] = o.dtype_name == "bf16" ? "bfloat16" : o.dtype_name == "f16" ? "float16" : "float32";
        cli::write_file(fs::path(o.out_dir) / "config.json", config.dump(2) + "\n");
    }
    std::fprintf(stderr, "dlm-make-checkpoint: %s, %.2f GB of %s in %d file(s) into %s\n", o.shape_name.c_str(), static_cast<double>(total) / 1e9,
                 o.dtype_name.c_str(), shards, o.out_dir.c_str());

    cpu::random_source src(cfg, o.seed, type, o.scale);
    nlohmann::json weight_map = nlohmann::json::object();
    const auto t0 = std::chrono::steady_clock::now();
    std::uint64_t written = 0;
    for (int s = 0; s < shards; ++s) {
        const std::string file = shards == 1 ? "model.safetensors" : shard_name(s, shards);
        nlohmann::json header = nlohmann::json::object();
        header["__metadata__"] = {{"format", "pt"}};
        std::uint64_t offset = 0;
        for (const tensor_entry& t : tensors)
            if (t.shard == s) {
                header[t.name] = {{"dtype", std::string(io::dtype_name(type))}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes}}};
                offset += t.bytes;
                weight_map[t.name] = file;
            }
        std::string text = header.dump();
        text.append((8 - text.size() % 8) % 8, ' ');
        std::ofstream out(fs::path(o.out_dir) / file, std::ios::binary | std::ios::trunc);
        if (!out) throw file_error((fs::path(o.out_dir) / file).string(), "cannot open for writing");
        unsigned char len[8];
        for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((static_cast<std::uint64_t>(text.size()) >> (8 * i)) & 0xffu);
        out.write(reinterpret_cast<const char*>(len), 8);
        out.write(text.data(), static_cast<std::streamsize>(text.size()));
        for (const tensor_entry& t : tensors) {
            if (t.shard != s) continue;
            written += write_tensor(out, src, t, type);
            const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (progress_shown() && (t.role == cpu::tensor_role::down_proj || t.role == cpu::tensor_role::embedding || t.role == cpu::tensor_role::lm_head))
                std::fprintf(stderr, "\r  %6.2f / %.2f GB, %.0f MB/s   ", static_cast<double>(written) / 1e9, static_cast<double>(total) / 1e9,
                             static_cast<double>(written) / 1e6 / std::max(secs, 1e-9));
        }
        out.close();
        if (!out) throw file_error((fs::path(o.out_dir) / file).string(), "write failed (disk full?)");
    }
    if (shards > 1) {
        const nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
        cli::write_file(fs::path(o.out_dir) / "model.safetensors.index.json", index.dump(2) + "\n");
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "%sdlm-make-checkpoint: wrote %.2f GB in %.1f s\n", progress_shown() ? "\n" : "", static_cast<double>(written) / 1e9, secs);
}

// One GGUF file, as llama.cpp's converter and llama-quantize lay it out.
void write_gguf(const options& o, const bench::named_shape& shape) {
    const auto type = bench::parse_gguf_checkpoint_type(o.gguf_type);
    if (!type) throw invalid_parameter("--type", "must be f32, f16, bf16, q8_0 or q4_k_m, not '" + o.gguf_type + "'");
    const io::model_config cfg = io::parse_config(shape.config, o.shape_name);
    const auto t0 = std::chrono::steady_clock::now();
    std::fprintf(stderr, "dlm-make-checkpoint: %s as GGUF %s into %s\n", o.shape_name.c_str(), o.gguf_type.c_str(), o.out_dir.c_str());
    const std::uint64_t bytes = bench::write_gguf_checkpoint(cfg, o.shape_name, *type, o.out_dir, o.seed, o.scale, [&](std::uint64_t done, std::uint64_t total) {
        if (!progress_shown()) return;
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::fprintf(stderr, "\r  %6.2f / %.2f GB, %.0f MB/s   ", static_cast<double>(done) / 1e9, static_cast<double>(total) / 1e9,
                     static_cast<double>(done) / 1e6 / std::max(secs, 1e-9));
    });
    std::fprintf(stderr, "%sdlm-make-checkpoint: wrote %.2f GB of tensors (%llu bytes in the file) in %.1f s\n", progress_shown() ? "\n" : "",
                 static_cast<double>(bytes) / 1e9,
                 static_cast<unsigned long long>(fs::file_size(o.out_dir)),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

}  // namespace

int main(int argc, char** argv) {
    return bench::run_main("dlm-make-checkpoint", usage_text(), [&] {
        const options o = parse(argc, argv);
        const auto shape = bench::find_shape(o.shape_name);
        if (!shape) throw invalid_parameter("--shape", "unknown shape '" + o.shape_name + "' (" + bench::shape_names() + ")");
        if (bench::is_diffusion_gemma(shape->config))
            throw invalid_parameter("--shape", "'" + o.shape_name + "' is a DiffusionGemma model: dlm-make-checkpoint writes transformer "
                                    "layouts; dlm-bench-forward --shape " + o.shape_name + " measures it with random weights");
        if (o.format == "gguf") {
            write_gguf(o, *shape);
            return 0;
        }
        io::dtype type = io::dtype::bf16;
        if (o.dtype_name == "f16") type = io::dtype::f16;
        else if (o.dtype_name == "f32") type = io::dtype::f32;
        else if (o.dtype_name != "bf16") throw invalid_parameter("--dtype", "must be bf16, f16 or f32, not '" + o.dtype_name + "'");
        write_safetensors(o, *shape, type, o.shards > 0 ? o.shards : shape->shards);
        return 0;
    });
}
