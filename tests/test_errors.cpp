// Bad input gets a typed error, never a crash and never silent garbage: the cases of docs/errors.md
// that the loaders' and the decoder's own test files do not already cover (docs/errors.md names the
// test of every case). Most cases run end to end on a copy of tests/data/models/llada_tiny.
#include <doctest/doctest.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <dlm/cpu/transformer.hpp>
#include <dlm/io/gguf.hpp>
#include <dlm/io/safetensors.hpp>
#include <dlm/io/tokenizer.hpp>
#include <dlm/presets.hpp>

#include "io_test_util.hpp"
#include "support/scripts.hpp"

#include "support/child.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_errors {

using namespace dlm;
using dlm_test::expect_error;
using dlm_test::temp_dir;
using tvec = std::vector<token_id>;
using prompts_t = std::vector<std::vector<token_id>>;

namespace {

const std::filesystem::path tiny_dir = std::filesystem::path(DLM_TEST_DATA) / "models" / "llada_tiny";

nlohmann::json tiny_config() {
    std::ifstream in(tiny_dir / "config.json");
    REQUIRE(in.good());
    return nlohmann::json::parse(in);
}

/// Every tensor of llada_tiny, in f32, by name.
std::vector<std::pair<std::string, io::tensor_data>> tiny_tensors() {
    const io::checkpoint ck = io::checkpoint::open(tiny_dir);
    std::vector<std::pair<std::string, io::tensor_data>> out;
    for (const std::string& name : ck.names()) {
        const auto& shape = ck.info(name).shape;
        out.push_back({name, {shape, ck.read_f32(name, shape)}});
    }
    return out;
}

/// A model folder in `dir`: `config` as config.json, `tensors` as model.safetensors (f32).
void write_model(const temp_dir& dir, const nlohmann::json& config, const std::vector<std::pair<std::string, io::tensor_data>>& tensors) {
    dlm_test::write_text(dir / "config.json", config.dump());
    io::write_safetensors(dir / "model.safetensors", tensors, io::dtype::f32);
}

/// Loading the folder must throw E whose message holds every part; returns the error's tensor name
/// when E is a tensor_error.
template <class E>
std::string expect_load_error(const temp_dir& dir, std::initializer_list<std::string_view> parts, const cpu::load_options& options = {}) {
    std::string tensor;
    expect_error<E>(
        [&] {
            try {
                (void)cpu::transformer::load(dir.path(), options);
            } catch (const tensor_error& e) {
                tensor = e.tensor();
                throw;
            }
        },
        parts);
    return tensor;
}

std::string read_bytes(const std::filesystem::path& p) { return io::detail::read_text_file(p); }

/// A safetensors file: the 8-byte little-endian header length, the header, `data_bytes` zero bytes.
std::string safetensors_file(const std::string& header, std::size_t data_bytes) {
    std::string file(8, '\0');
    for (int i = 0; i < 8; ++i) file[static_cast<std::size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    return file + header + std::string(data_bytes, '\0');
}

}  // namespace

// ---- checkpoints: truncated, wrong dtype, missing, wrong shape, config against weights ----

TEST_CASE("errors: a model folder that does not exist is named, not a file of its parent folder") {
    temp_dir dir;
    const std::filesystem::path missing = dir / "no-such-model";
    expect_error<file_error>([&] { (void)cpu::transformer::load(missing); }, {missing.string(), "no such model folder or file"});
    expect_error<file_error>([&] { (void)cpu::transformer::load(missing / "config.json"); },
                             {(missing / "config.json").string(), "no such model folder or file"});
    // A file inside a model folder still names the folder.
    write_model(dir, tiny_config(), tiny_tensors());
    CHECK(cpu::transformer::load(dir / "config.json").vocab_size() == tiny_config()["vocab_size"].get<index_t>());
}

TEST_CASE("errors: a model path that is a file other than config.json or a checkpoint is refused, not read as the model beside it") {
    temp_dir dir;
    write_model(dir, tiny_config(), tiny_tensors());
    // A fine-tune's weights beside the base model's: they are what is loaded, or refused, by name.
    const std::filesystem::path finetuned = dir / "finetuned.safetensors";
    dlm_test::write_text(finetuned, "");
    expect_error<file_error>([&] { (void)cpu::transformer::load(finetuned); }, {finetuned.string(), "file is 0 bytes"});
    dlm_test::write_text(dir / "README.md", "# llada_tiny\n");
    expect_error<file_error>([&] { (void)cpu::transformer::load(dir / "README.md"); },
                             {(dir / "README.md").string(), "is a file, not a model folder, its config.json, a .safetensors file"});
    // Weights under another name load with the config.json of their folder.
    temp_dir renamed;
    dlm_test::write_text(renamed / "config.json", read_bytes(tiny_dir / "config.json"));
    std::filesystem::copy_file(tiny_dir / "model.safetensors", renamed / "llada-tiny-step-100.safetensors");
    CHECK(cpu::transformer::load(renamed / "llada-tiny-step-100.safetensors").vocab_size() == tiny_config()["vocab_size"].get<index_t>());
}

TEST_CASE("errors: a truncated checkpoint is refused at open, naming the file") {
    temp_dir dir;
    dlm_test::write_text(dir / "config.json", read_bytes(tiny_dir / "config.json"));
    const std::string full = read_bytes(tiny_dir / "model.safetensors");
    const std::string file = (dir / "model.safetensors").string();
    SUBCASE("cut inside the data area") {
        dlm_test::write_text(dir / "model.safetensors", full.substr(0, full.size() / 2));
        expect_load_error<tensor_error>(dir, {file, "run past the data area"});
    }
    SUBCASE("cut inside the header") {
        dlm_test::write_text(dir / "model.safetensors", full.substr(0, 100));
        expect_load_error<file_error>(dir, {file, "runs past the end of the 100-byte file"});
    }
    SUBCASE("empty file") {
        dlm_test::write_text(dir / "model.safetensors", "");
        expect_load_error<file_error>(dir, {file, "0 bytes"});
    }
}

TEST_CASE("errors: a tensor stored in a dtype dlm does not read is named") {
    temp_dir dir;
    dlm_test::write_text(dir / "config.json", read_bytes(tiny_dir / "config.json"));
    std::string bytes = read_bytes(tiny_dir / "model.safetensors");
    // The header is JSON; swap one tensor's "F32" for "F64" (same length, so the offsets stay valid).
    const std::string key = "\"model.transformer.blocks.0.q_proj.weight\"";
    const auto at = bytes.find(key);
    REQUIRE(at != std::string::npos);
    const auto dtype_at = bytes.find("\"F32\"", at);
    REQUIRE(dtype_at != std::string::npos);
    bytes.replace(dtype_at, 5, "\"F64\"");
    dlm_test::write_text(dir / "model.safetensors", bytes);
    CHECK(expect_load_error<tensor_error>(dir, {"dtype 'F64' is not supported", "F32, F16 and BF16"}) ==
          "model.transformer.blocks.0.q_proj.weight");
}

TEST_CASE("errors: a missing tensor is named") {
    temp_dir dir;
    auto tensors = tiny_tensors();
    std::erase_if(tensors, [](const auto& t) { return t.first == "model.transformer.blocks.1.k_proj.weight"; });
    write_model(dir, tiny_config(), tensors);
    CHECK(expect_load_error<tensor_error>(dir, {"not in the checkpoint"}) == "model.transformer.blocks.1.k_proj.weight");
}

TEST_CASE("errors: a tensor of the wrong shape is named with both shapes") {
    temp_dir dir;
    auto tensors = tiny_tensors();
    for (auto& [name, t] : tensors)
        if (name == "model.transformer.blocks.0.k_proj.weight") t.shape = {t.shape[1], t.shape[0]};  // transposed
    write_model(dir, tiny_config(), tensors);
    CHECK(expect_load_error<tensor_error>(dir, {"expected shape [16, 48]", "found [48, 16]"}) ==
          "model.transformer.blocks.0.k_proj.weight");
}

TEST_CASE("errors: a config that does not match the weights") {
    temp_dir dir;
    const auto tensors = tiny_tensors();
    auto config = tiny_config();
    SUBCASE("more layers than stored: the first missing tensor is named") {
        config["n_layers"] = 3;
        write_model(dir, config, tensors);
        CHECK(expect_load_error<tensor_error>(dir, {"not in the checkpoint"}).starts_with("model.transformer.blocks.2."));
    }
    SUBCASE("fewer layers than stored: the unread tensors are refused") {
        config["n_layers"] = 1;
        write_model(dir, config, tensors);
        CHECK(expect_load_error<tensor_error>(dir, {"never read"}).starts_with("model.transformer.blocks.1."));
    }
    SUBCASE("another vocabulary size") {
        config["embedding_size"] = 320;
        write_model(dir, config, tensors);
        CHECK(expect_load_error<tensor_error>(dir, {"expected shape [320, 48]", "found [300, 48]"}) == "model.transformer.wte.weight");
    }
    SUBCASE("a vocabulary far larger than stored: the tensor is named before anything is allocated for it") {
        // 200M rows of 48: 38 GB in f32 (memory_error before the shapes were checked), 9.6 GB in
        // bf16 (allocated, then refused); the shape is now checked first, whatever type is asked for.
        config["embedding_size"] = 200'000'000;
        write_model(dir, config, tensors);
        for (const std::optional<io::dtype> type : {std::optional<io::dtype>{}, std::optional{io::dtype::f32}, std::optional{io::dtype::bf16}})
            CHECK(expect_load_error<tensor_error>(dir, {"expected shape [200000000, 48]", "found [300, 48]"}, {.weight_dtype = type}) ==
                  "model.transformer.wte.weight");
    }
    SUBCASE("another number of key/value heads") {
        config["n_kv_heads"] = 6;
        write_model(dir, config, tensors);
        CHECK(expect_load_error<tensor_error>(dir, {"expected shape [48, 48]", "found [16, 48]"}) ==
              "model.transformer.blocks.0.k_proj.weight");
    }
    SUBCASE("a tied head while the checkpoint stores a different one") {
        config["weight_tying"] = true;
        write_model(dir, config, tensors);
        CHECK(expect_load_error<tensor_error>(dir, {"weight_tying", "differs from the embedding"}) == "model.transformer.ff_out.weight");
    }
}

TEST_CASE("errors: overlapping tensors are refused, naming both") {
    // Two f32 [2] tensors whose extents [0, 8) and [4, 12) share bytes 4 to 8.
    const std::string header = R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                               R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})";
    const std::string file = safetensors_file(header, 12);
    expect_error<tensor_error>([&] { (void)io::parse_safetensors(std::as_bytes(std::span(file.data(), file.size())), "o.safetensors"); },
                               {"o.safetensors", "'b'", "bytes [4, 12) overlap tensor 'a' at [0, 8)"});
}

TEST_CASE("errors: a mask id outside the vocabulary is refused when the model is built") {
    io::model_config c = io::parse_config(tiny_config(), "config.json");
    const auto w = cpu::random_weights(c, 1);
    c.mask_id = c.vocab_size;
    expect_error<invalid_parameter>([&] { cpu::transformer m(c, w); }, {"config.mask_id", "300", "outside the vocabulary"});
}

// ---- prompts: invalid UTF-8, longer than the context, longer than any canvas ----

TEST_CASE("errors: invalid UTF-8 in a prompt becomes U+FFFD, as Python's bytes.decode(errors='replace')") {
    // Expected strings from CPython 3.11: b.decode("utf-8", "replace").encode("utf-8").
    const std::string r = "\xEF\xBF\xBD";
    const std::pair<std::string, std::string> cases[] = {
        {"a\xFF" "b", "a" + r + "b"},                 // a byte that never starts a sequence
        {"\xC0\xAF", r + r},                          // an overlong encoding: one U+FFFD per byte
        {"\xED\xA0\x80", r + r + r},                  // a UTF-16 surrogate
        {"\xF0\x9F\x98", r},                          // a truncated 4-byte sequence: one U+FFFD
        {"\xF4\x90\x80\x80", r + r + r + r},          // past U+10FFFF
        {"\x80\x80x", r + r + "x"},                   // stray continuation bytes
        {"ok\xF0\x9F\x98\x80", "ok\xF0\x9F\x98\x80"}  // valid: unchanged
    };
    const auto tok = io::tokenizer::load(std::filesystem::path(DLM_TEST_DATA) / "tokenizer" / "tokenizer.json");
    for (const auto& c : cases) {
        const auto& [bad, replaced] = c;
        CAPTURE(c.second);  // CAPTURE's lambda takes the pair: clang 14 cannot capture a structured binding
        CHECK(io::detail::to_valid_utf8(bad) == replaced);
        const tvec ids = tok.encode(bad);
        CHECK(ids == tok.encode(replaced));
        CHECK(tok.decode(ids) == replaced);
    }
}

TEST_CASE("errors: a prompt longer than the model's context names prompts[i]") {
    auto m = cpu::transformer::load(tiny_dir);  // max_sequence_length 256
    presets::cdlm<cpu::transformer> d(m, block_causal_mask{16});
    const prompts_t prompts{tvec(10, 5), tvec(241, 7)};
    try {
        (void)d.generate(prompts, {16, 0});
        FAIL("a canvas of 257 positions must be refused");
    } catch (const invalid_parameter& e) {
        CHECK(e.parameter() == "prompts[1]");
        CHECK(std::string(e.what()).find("prompt length 241 + gen_length 16 exceeds the model's context of 256") != std::string::npos);
    }
    CHECK(d.generate(prompts_t{tvec(240, 7)}, {16, 0}).sequences.size() == 1);  // exactly 256 fits
}

TEST_CASE("errors: a canvas past 2^31 positions is refused, not overflowed") {
    // No max_context: only the canvas index type bounds the length.
    dlm::testing::scripted_model m(32, 31, {30}, false, dlm_test::context_hash());
    presets::cdlm<dlm::testing::scripted_model> d(m, block_causal_mask{32});
    const index_t gen = INT_MAX / 32 * 32;  // a multiple of the block length
    try {
        (void)d.generate(prompts_t{tvec(40, 1)}, {gen, 0});
        FAIL("a canvas of 40 + 2147483616 positions must be refused");
    } catch (const invalid_parameter& e) {
        CHECK(e.parameter() == "prompts[0]");
        CHECK(std::string(e.what()).find("2147483647") != std::string::npos);
    }
    CHECK(m.log().empty());
}

TEST_CASE("errors: a prompt holding the mask token is refused before any forward, naming prompts[i]") {
    // The mask marks the slots to decode; in a prompt (a user's "<|mdm_mask|>") it would stay a hole.
    dlm::testing::scripted_model m(32, 31, {30}, false, dlm_test::context_hash());
    presets::cdlm<dlm::testing::scripted_model> d(m, block_causal_mask{8});
    try {
        (void)d.generate(prompts_t{tvec{1, 2}, tvec{5, 31, 6}}, {8, 0});
        FAIL("a prompt holding the mask id 31 was decoded");
    } catch (const invalid_parameter& e) {
        CHECK(e.parameter() == "prompts[1]");
        CHECK(std::string(e.what()).find("token 1 is the mask id 31") != std::string::npos);
    }
    CHECK(m.log().empty());
}

// ---- logits: NaN and infinities are reported with the sequence, the forward and the row ----

namespace {

/// Slot g of the generation predicts token 1 with confidence 0.95 - 0.05 g (so the schedules commit
/// slots left to right), except that row `bad_row` of the sequence with prompt length `bad_prompt`
/// at model forward `bad_forward` is filled by `poison`.
dlm::testing::script poisoned(index_t bad_prompt, index_t bad_forward, index_t bad_row, void (*poison)(std::span<float>)) {
    return [=, ranked = dlm_test::oracle(tvec(8, 1), {0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6})](
               const dlm::testing::script_view& v, std::span<float> out) {
        ranked(v, out);
        if (v.layout.prompt_length == bad_prompt && v.forward == bad_forward && v.row == bad_row) poison(out);
    };
}

void one_nan(std::span<float> z) { z[3] = std::numeric_limits<float>::quiet_NaN(); }
void one_inf(std::span<float> z) { z[5] = std::numeric_limits<float>::infinity(); }
void all_neg_inf(std::span<float> z) {
    for (float& v : z) v = -std::numeric_limits<float>::infinity();
}

/// Sequence `sequence` of a batch of two fails with a numeric_error naming it; the other finishes.
template <class Decoder>
void expect_numeric_error(Decoder& d, index_t sequence, index_t forward, index_t row) {
    const auto r = d.generate(prompts_t{{1, 2}, {1, 2, 3}}, {8, 0});
    CHECK(r.sequences[static_cast<std::size_t>(1 - sequence)].status == sequence_status::finished);
    REQUIRE(r.sequences[static_cast<std::size_t>(sequence)].failed());
    try {
        r.sequences[static_cast<std::size_t>(sequence)].rethrow_if_failed();
        FAIL("no numeric_error");
    } catch (const numeric_error& e) {
        CHECK(e.sequence() == sequence);
        CHECK(e.forward() == forward);
        CHECK(e.row() == row);
        const std::string what = e.what();
        CHECK(what.find("sequence " + std::to_string(sequence) + ", forward " + std::to_string(forward) + ", row " +
                        std::to_string(row)) != std::string::npos);
    }
}

}  // namespace

TEST_CASE("errors: NaN, +Inf or an all -Inf logits row fails its sequence with a numeric_error naming sequence, forward and row") {
    using dlm::testing::scripted_model;
    for (auto poison : {one_nan, one_inf, all_neg_inf}) {
        SUBCASE("greedy (cdlm), unshifted: row = slot") {
            // Forward 0 commits slot 3 (the most confident); at forward 1 slots 4, 5, 6 are masked.
            scripted_model m(32, 31, {30}, false, poisoned(3, 1, 6, poison));
            presets::cdlm<scripted_model> d(m, block_causal_mask{4}, {}, presets::cdlm_schedule{0.99});
            expect_numeric_error(d, 1, 1, 6);
        }
        SUBCASE("sampled (dream, temperature 1), shifted: row = slot - 1") {
            // Slot 10, the least confident, is still masked at forward 2; row 9 predicts it.
            scripted_model m(32, 31, {30}, true, poisoned(3, 2, 9, poison));
            presets::dream<scripted_model> d(m, {}, {}, dream_schedule{8, 1e-3, dream_alg::maskgit_plus}, categorical_sampler{1.f});
            expect_numeric_error(d, 1, 2, 9);
        }
    }
}

namespace {

/// The numeric_error a cdlm decode of a short prompt on `m` raises; none where it raises nothing.
std::optional<numeric_error> cdlm_numeric_error(cpu::transformer m) {
    presets::cdlm<cpu::transformer> d(m, block_causal_mask{8});
    try {
        (void)d.generate(tvec{5, 6, 7}, {8, 0});
    } catch (const numeric_error& e) {
        return e;
    }
    return std::nullopt;
}

}  // namespace

TEST_CASE("errors: NaN weights in a checkpoint surface as a numeric_error at the first forward") {
    temp_dir dir;
    auto tensors = tiny_tensors();
    for (auto& [name, t] : tensors)
        if (name == "model.transformer.ln_f.weight") t.values[0] = std::numeric_limits<float>::quiet_NaN();
    write_model(dir, tiny_config(), tensors);
    const auto e = cdlm_numeric_error(cpu::transformer::load(dir.path()));
    REQUIRE_MESSAGE(e.has_value(), "no numeric_error");
    CHECK(e->forward() == 0);
    CHECK(e->row() == 3);  // the first slot (LLaDA: unshifted)
}

namespace {
/// The numeric_error of a cdlm decode of the Q8_0 fixture (tests/data/gguf/llada_q.q8_0.gguf) whose
/// tensor `name`, of type `type`, opens with `value` instead of its own bytes; none if it decodes.
std::optional<numeric_error> poisoned_q8_0_error(const char* name, io::gguf_type type, std::span<const std::byte> value) {
    const std::filesystem::path src = std::filesystem::path(DLM_TEST_DATA) / "gguf" / "llada_q.q8_0.gguf";
    std::string bytes = read_bytes(src);
    {
        const io::gguf_file f = io::gguf_file::open(src);
        const io::gguf_tensor& t = f.header().tensor(name);
        REQUIRE(t.type == type);
        std::memcpy(bytes.data() + f.header().data_offset() + t.offset, value.data(), value.size());
    }
    temp_dir dir;
    dlm_test::write_text(dir / "nan.q8_0.gguf", bytes);
    return cdlm_numeric_error(cpu::transformer::load(dir / "nan.q8_0.gguf"));
}
}  // namespace

TEST_CASE("errors: NaN weights in a GGUF model held in Q8_0 blocks surface as a numeric_error at the first forward, not as quants that dropped them") {
    // The f32 output norm of a copy of the Q8_0 fixture gets a NaN: every row's input to the head,
    // a Q8_0 product, then holds one. Its quantized activations used to drop it (finite logits, a
    // silent garbage decode); now the block's scale is NaN and the logits are.
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const auto e = poisoned_q8_0_error("output_norm.weight", io::gguf_type::f32, std::as_bytes(std::span(&nan, 1)));
    REQUIRE_MESSAGE(e.has_value(), "no numeric_error");
    CHECK(e->forward() == 0);
}

TEST_CASE("errors: a NaN block scale in a GGUF model's query or key weights surfaces as a numeric_error, not as finite logits") {
    // The first Q8_0 block's f16 scale of blk.0.attn_q (or attn_k) set to NaN: a head's scores are then
    // NaN at every key, which the softmax used to read as a row with no key allowed (its output zeros,
    // the logits finite and wrong). Now such a row's output is NaN, and the first forward says so.
    const std::uint16_t nan_half = 0x7e00;  // a Q8_0 block opens with its f16 scale
    for (const char* name : {"blk.0.attn_q.weight", "blk.0.attn_k.weight"}) {
        CAPTURE(name);
        const auto e = poisoned_q8_0_error(name, io::gguf_type::q8_0, std::as_bytes(std::span(&nan_half, 1)));
        REQUIRE_MESSAGE(e.has_value(), "no numeric_error");
        CHECK(e->forward() == 0);
    }
}

// ---- allocation: sizes that cannot be allocated ----

TEST_CASE("errors: a header claiming a huge tensor is refused without allocating it") {
    // 2^44 bytes (16 TiB), consistent with its shape, in a file of 8 data bytes.
    const std::string header = R"({"w": {"dtype": "F32", "shape": [1048576, 1048576, 4], "data_offsets": [0, 17592186044416]}})";
    const std::string file = safetensors_file(header, 8);
    expect_error<tensor_error>([&] { (void)io::parse_safetensors(std::as_bytes(std::span(file.data(), file.size())), "huge.safetensors"); },
                               {"huge.safetensors", "'w'", "run past the data area, which holds 8 bytes"});
}

TEST_CASE("errors: a KV cache capacity past the canvas index type is invalid_parameter") {
    const auto m = cpu::transformer::load(tiny_dir);
    expect_error<invalid_parameter>([&] { (void)m.make_kv_cache(INT_MAX); }, {"'capacity'"});
    expect_error<invalid_parameter>([&] { (void)m.make_kv_cache(-1); }, {"'capacity'"});
}

TEST_CASE("errors: a hidden size the tensors do not hold is refused by the embedding before the rotary table is allocated") {
#if defined(DLM_TEST_SANITIZER)
    MESSAGE("skipped under AddressSanitizer and ThreadSanitizer: they reserve terabytes of address space (shadow memory, allocator), past the limit the test sets");
#elif !defined(__unix__)
    MESSAGE("skipped: needs fork and setrlimit");
#else
    // d_model 2^30 over one head: a head of 2^30 dims, whose rotary table (2^29 floats, 2 GiB) the
    // constructor built before any tensor was read. In a child limited to 2 GiB of address space
    // that allocation fails (std::bad_alloc); now the embedding's shape is refused first.
    temp_dir dir;
    auto config = tiny_config();
    config["d_model"] = 1 << 30;
    config["n_heads"] = 1;
    config["n_kv_heads"] = 1;
    write_model(dir, config, tiny_tensors());
    CHECK(dlm_test::in_limited_child(std::uint64_t{2} << 30, [&] {
              try {
                  (void)cpu::transformer::load(dir.path());
                  return 2;
              } catch (const tensor_error& e) {
                  return std::string(e.what()).find("model.transformer.wte.weight") != std::string::npos ? 0 : 4;
              } catch (const std::bad_alloc&) {
                  return 5;  // allocated before the shapes were checked
              }
          }) == 0);
#endif
}

TEST_CASE("errors: a KV cache larger than memory is memory_error, from make_kv_cache and from generate") {
#if defined(DLM_TEST_SANITIZER)
    MESSAGE("skipped under AddressSanitizer and ThreadSanitizer: they reserve terabytes of address space (shadow memory, allocator), past the limit the test sets");
#elif !defined(__unix__)
    MESSAGE("skipped: needs fork and setrlimit");
#else
    // A model whose context allows 2^26 positions: its cache needs 2 x 2^26 x 2 layers x 2 heads x 8
    // dims x 4 bytes = 16 GiB. Run in a child whose address space is limited to 2 GiB, so the
    // cache does not fit on any machine: make_kv_cache refuses it (memory_error, naming the bytes)
    // before allocating.
    io::model_config c = io::parse_config(tiny_config(), "config.json");
    c.max_context = 1 << 27;
    const cpu::transformer m(c, cpu::random_weights(c, 1));
    const auto in_child = [](auto&& body) {
        return dlm_test::in_limited_child(std::uint64_t{2} << 30, [&] {
            try {
                body();
                return 2;  // allocated: the limit did not hold
            } catch (const dlm::memory_error& e) {
                return e.needed() > (std::uint64_t{16} << 30) && e.available() < (std::uint64_t{2} << 30) ? 0 : 4;
            } catch (const std::bad_alloc&) {
                return 5;  // allocated before checking
            } catch (const dlm::error&) {
                return 1;
            }
        });
    };
    CHECK(in_child([&] { (void)m.make_kv_cache(1 << 26); }) == 0);
    CHECK(in_child([&] {
              auto copy = m;
              presets::cdlm<cpu::transformer> d(copy, block_causal_mask{32});
              (void)d.generate(tvec{5, 6, 7}, {1 << 26, 0});
          }) == 0);
#endif
}

}  // namespace test_errors
