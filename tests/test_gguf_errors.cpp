// Malformed GGUF files (docs/errors.md, "GGUF files"): every case is refused with a typed error
// naming the file and the key or tensor, before anything is allocated for it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <dlm/cpu/transformer.hpp>
#include <dlm/io/gguf_tokenizer.hpp>

#include "gguf_test_util.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_gguf_errors {

using namespace dlm;
using bytes = std::vector<std::byte>;

namespace {

const std::filesystem::path data = DLM_TEST_DATA;

/// One key and two f32 tensors: "a" [8 x 2] at offset 0 and "b" [8] at offset 64.
bytes small_file() {
    io::gguf_writer w;
    w.add_string("general.architecture", "llada");
    const std::vector<float> a(16, 1.0f), b(8, 2.0f);
    const std::int64_t sa[] = {8, 2}, sb[] = {8};
    w.add_tensor("a", sa, a);
    w.add_tensor("b", sb, b);
    return w.bytes();
}

template <class T>
void poke(bytes& f, std::size_t at, T v) {
    std::memcpy(f.data() + at, &v, sizeof(T));
}

/// Byte offset of the tensor info of `name`: its name's length field.
std::size_t tensor_info_at(const bytes& f, const std::string& name) {
    const std::string needle = std::string(1, static_cast<char>(name.size())) + std::string(7, '\0') + name;
    const std::string_view s(reinterpret_cast<const char*>(f.data()), f.size());
    const std::size_t at = s.rfind(needle);
    REQUIRE(at != std::string_view::npos);
    return at;
}
/// Offsets of tensor `name`'s fields (it has `dims` dimensions).
std::size_t type_at(const bytes& f, const std::string& name, std::size_t dims) { return tensor_info_at(f, name) + 8 + name.size() + 4 + 8 * dims; }
std::size_t offset_at(const bytes& f, const std::string& name, std::size_t dims) { return type_at(f, name, dims) + 4; }

/// The message of the error parsing `f` throws, which must be of type E.
template <class E = file_error>
std::string parse_error(const bytes& f) {
    try {
        (void)io::gguf_header::parse(f, "x.gguf");
    } catch (const E& e) {
        const std::string m = e.what();
        CHECK(m.rfind("x.gguf: ", 0) == 0);
        return m;
    } catch (const std::exception& e) {
        FAIL("wrong error type: " << e.what());
    }
    FAIL("no error");
    return {};
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// The message of loading the llada_tiny model converted with `e`.
template <class E = file_error>
std::string load_error(const test::gguf_edit& e) {
    const auto path = std::filesystem::temp_directory_path() / "dlm_test_bad.gguf";
    test::f32_gguf_writer(data / "models" / "llada_tiny", e).write(path);
    std::string m;
    try {
        (void)cpu::transformer::load(path);
    } catch (const E& err) {
        m = err.what();
    } catch (const std::exception& err) {
        FAIL("wrong error type: " << err.what());
    }
    std::filesystem::remove(path);
    REQUIRE_MESSAGE(!m.empty(), "no error");
    return m;
}

/// A llada2 file's metadata: the llada2_tiny fixture's keys, with u32 `key` set to `value` (or left out
/// when `value` is negative).
io::gguf_writer llada2_keys(const std::string& key = "", std::int64_t value = 0) {
    std::vector<std::pair<std::string, std::int64_t>> keys = {
        {"block_count", 3}, {"embedding_length", 64}, {"feed_forward_length", 96}, {"attention.head_count", 4},
        {"attention.head_count_kv", 2}, {"attention.key_length", 16}, {"rope.dimension_count", 8}, {"expert_count", 8},
        {"expert_used_count", 2}, {"expert_group_count", 4}, {"expert_group_used_count", 2}, {"expert_gating_func", 2},
        {"leading_dense_block_count", 1}, {"expert_feed_forward_length", 32}, {"expert_shared_feed_forward_length", 32},
        {"expert_shared_count", 1}};
    if (std::find_if(keys.begin(), keys.end(), [&](const auto& kv) { return "llada2." + kv.first == key; }) == keys.end() && !key.empty())
        keys.emplace_back(key.substr(7), value);
    io::gguf_writer w;
    w.add_string("general.architecture", "llada2");
    for (const auto& [k, v] : keys) {
        const std::string name = "llada2." + k;
        const std::int64_t set = name == key ? value : v;
        if (set >= 0) w.add_u32(name, static_cast<std::uint32_t>(set));
    }
    w.add_f32("llada2.expert_weights_scale", 2.5f);
    w.add_bool("llada2.expert_weights_norm", true);
    w.add_u32("tokenizer.ggml.mask_token_id", 299);
    return w;
}

/// The message of reading the config of llada2_keys(key, value) with an embedding; empty when it is accepted.
std::string llada2_config_error(const std::string& key = "", std::int64_t value = 0) {
    io::gguf_writer w = llada2_keys(key, value);
    const std::vector<float> emb(64 * 300, 0.5f);
    const std::int64_t shape[] = {64, 300};
    w.add_tensor("token_embd.weight", shape, emb);
    const bytes b = w.bytes();
    try {
        (void)io::gguf_model_config(io::gguf_header::parse(b, "l.gguf"));
    } catch (const file_error& e) {
        return e.what();
    }
    return {};
}

}  // namespace

TEST_CASE("a valid file parses: keys, shapes, types and data offsets") {
    const bytes f = small_file();
    const io::gguf_header h = io::gguf_header::parse(f, "x.gguf");
    CHECK(h.version() == 3);
    CHECK(h.string("general.architecture") == "llada");
    REQUIRE(h.tensors().size() == 2);
    CHECK(h.tensor("a").rows() == 2);
    CHECK(h.tensor("a").cols() == 8);
    CHECK(h.tensor("b").offset == 64);
    CHECK(h.data_offset() % 32 == 0);
    CHECK(h.tensor("b").bytes.data() == f.data() + h.data_offset() + 64);
}

TEST_CASE("header errors: truncated, magic, version, byte order, counts") {
    bytes f = small_file();
    CHECK(has(parse_error(bytes(f.begin(), f.begin() + 6)), "truncated: the version"));
    CHECK(has(parse_error(bytes(f.begin(), f.begin() + 2)), "truncated"));
    bytes g = f;
    g[0] = std::byte{'X'};
    CHECK(has(parse_error(g), "not a GGUF file"));
    g = f;
    poke<std::uint32_t>(g, 4, 4);
    CHECK(has(parse_error(g), "GGUF version 4 is not supported"));
    poke<std::uint32_t>(g, 4, 1);
    CHECK(has(parse_error(g), "GGUF version 1 is not supported"));
    poke<std::uint32_t>(g, 4, 0x03000000u);
    CHECK(has(parse_error(g), "big-endian"));
    g = f;
    poke<std::uint64_t>(g, 16, std::uint64_t{1} << 60);  // key count
    CHECK(has(parse_error(g), "cannot hold them"));
    g = f;
    poke<std::uint64_t>(g, 8, std::uint64_t{1} << 40);  // tensor count
    CHECK(has(parse_error(g), "cannot hold them"));
}

TEST_CASE("metadata errors: string lengths, value types, arrays, duplicates, alignment") {
    const bytes f = small_file();
    bytes g = f;
    poke<std::uint64_t>(g, 24, 1000000);  // the first key's name length
    CHECK(has(parse_error(g), "truncated: metadata key #0's name"));
    g = f;
    poke<std::uint32_t>(g, 24 + 8 + 20, 99);  // "general.architecture" is 20 bytes; then its value type
    CHECK(has(parse_error(g), "key 'general.architecture': unknown value type 99"));
    g = f;
    poke<std::uint64_t>(g, 24 + 8 + 20 + 4, 100000);  // the value string's length
    CHECK(has(parse_error(g), "truncated: key 'general.architecture''s value"));

    const auto one = [](const auto& add) {
        io::gguf_writer w;
        add(w);
        return w.bytes();
    };
    CHECK(has(parse_error(one([](io::gguf_writer& w) { w.add_u32("k", 1); w.add_u32("k", 2); })), "key 'k': appears twice"));
    CHECK(has(parse_error(one([](io::gguf_writer& w) { w.add_u32("general.alignment", 24); })), "key 'general.alignment': 24 is not a power of two"));
    CHECK(has(parse_error(one([](io::gguf_writer& w) { w.add_u64("general.alignment", 32); })), "key 'general.alignment': expected uint32"));
    bytes b = one([](io::gguf_writer& w) { w.add_bool("flag", true); });
    b.back() = std::byte{2};
    CHECK(has(parse_error(b), "key 'flag': a bool stored as 2"));
    bytes arr = one([](io::gguf_writer& w) { w.add_i32s("list", std::vector<std::int32_t>{1, 2, 3}); });
    poke<std::uint64_t>(arr, arr.size() - 12 - 8, std::uint64_t{1} << 62);
    CHECK(has(parse_error(arr), "key 'list': array of 4611686018427387904 int32 runs past the end"));
    arr = one([](io::gguf_writer& w) { w.add_i32s("list", std::vector<std::int32_t>{1, 2, 3}); });
    poke<std::uint32_t>(arr, arr.size() - 12 - 8 - 4, 9);  // element type: array
    CHECK(has(parse_error(arr), "key 'list': an array of arrays"));
    const std::string strs[] = {"x", "y"};
    arr = one([&](io::gguf_writer& w) { w.add_strings("names", strs); });
    poke<std::uint64_t>(arr, arr.size() - 9, 1000);  // the last string's length
    CHECK(has(parse_error(arr), "truncated: key 'names' element 1"));
}

TEST_CASE("tensor info errors: dimensions, types, block sizes, offsets, overlaps, names") {
    const bytes f = small_file();
    bytes g = f;
    poke<std::uint32_t>(g, type_at(g, "a", 2), 99);
    CHECK(has(parse_error<tensor_error>(g), "tensor 'a': unknown ggml type id 99"));
    g = f;
    poke<std::uint32_t>(g, type_at(g, "a", 2), static_cast<std::uint32_t>(io::gguf_type::q8_0));
    CHECK(has(parse_error<tensor_error>(g), "tensor 'a': row length 8 is not a multiple of Q8_0's block of 32 elements"));
    g = f;
    poke<std::uint32_t>(g, tensor_info_at(g, "a") + 9, 5);
    CHECK(has(parse_error<tensor_error>(g), "tensor 'a': 5 dimensions; GGUF tensors have 1 to 4"));
    g = f;
    poke<std::uint64_t>(g, tensor_info_at(g, "a") + 13, 0);
    CHECK(has(parse_error<tensor_error>(g), "tensor 'a': dimension 0 is 0 (empty)"));
    g = f;
    poke<std::uint64_t>(g, offset_at(g, "b", 1), 48);
    CHECK(has(parse_error<tensor_error>(g), "tensor 'b': data offset 48 is not a multiple of the alignment 32"));
    g = f;
    poke<std::uint64_t>(g, offset_at(g, "b", 1), 1 << 20);
    CHECK(has(parse_error<tensor_error>(g), "tensor 'b': data [1048576, 1048576 + 32) runs past the end of the data section"));
    g = f;
    poke<std::uint64_t>(g, offset_at(g, "b", 1), 32);
    CHECK(has(parse_error<tensor_error>(g), "tensor 'b': data at offset 32 overlaps tensor 'a' [0, 64)"));
    // 2^62 f32 elements: 2^64 bytes, which wrapped to 0 and loaded (an audit's 4 MB file declaring 16 EiB).
    g = f;
    poke<std::uint64_t>(g, tensor_info_at(g, "b") + 13, std::uint64_t{1} << 62);
    CHECK(has(parse_error<tensor_error>(g), "tensor 'b': 4611686018427387904 elements of F32: the byte count overflows"));
    g = f;
    g[tensor_info_at(g, "b") + 8] = std::byte{'a'};
    CHECK(has(parse_error<tensor_error>(g), "tensor 'a': appears twice"));
    g = f;
    g.resize(g.size() - 1);
    CHECK(has(parse_error<tensor_error>(g), "tensor 'b'"));
    io::gguf_writer w;
    const std::vector<float> v(4, 0.0f);
    const std::int64_t s[] = {4};
    w.add_tensor(std::string(64, 'n'), s, v);
    CHECK(has(parse_error<tensor_error>(w.bytes()), "name is 64 bytes; ggml allows 63"));
}

TEST_CASE("model errors: architecture, required keys, inconsistent sizes, tensors") {
    CHECK(has(load_error({.architecture = "llama"}), "key 'general.architecture': architecture 'llama' is not supported"));
    CHECK(has(load_error({.drop_key = "general.architecture"}), "key 'general.architecture': missing"));
    CHECK(has(load_error({.drop_key = "llada.block_count"}), "key 'llada.block_count': missing (a required key)"));
    CHECK(has(load_error({.drop_key = "llada.attention.head_count"}), "key 'llada.attention.head_count': missing"));
    CHECK(has(load_error({.drop_key = "llada.embedding_length",
                          .more_keys = [](io::gguf_writer& w) { w.add_string("llada.embedding_length", "48"); }}),
              "key 'llada.embedding_length': expected an integer, found string"));
    CHECK(has(load_error({.drop_key = "llada.attention.head_count_kv",
                          .more_keys = [](io::gguf_writer& w) { w.add_u32("llada.attention.head_count_kv", 4); }}),
              "key 'llada.attention.head_count_kv': 4 does not divide llada.attention.head_count 6"));
    CHECK(has(load_error({.drop_key = "llada.rope.dimension_count",
                          .more_keys = [](io::gguf_writer& w) { w.add_u32("llada.rope.dimension_count", 4); }}),
              "key 'llada.rope.dimension_count': 4 differs from the head size 8"));
    CHECK(has(load_error({.drop_key = "tokenizer.ggml.mask_token_id",
                          .more_keys = [](io::gguf_writer& w) { w.add_u32("tokenizer.ggml.mask_token_id", 300); }}),
              "key 'tokenizer.ggml.mask_token_id': token id 300 is outside the vocabulary [0, 300)"));
    CHECK(has(load_error({.more_keys = [](io::gguf_writer& w) { w.add_u32("dlm.gen_length", 1073741824); }}),
              "key 'dlm.gen_length': 1073741824 is outside [1, 1048576]"));
    // llama.cpp divides every position by rope.scaling.factor (or the older rope.scale_linear) whatever
    // rope.scaling.type says; 0 and 1 scale nothing.
    for (const char* key : {"llada.rope.scaling.factor", "llada.rope.scale_linear"}) {
        CAPTURE(key);
        CHECK(has(load_error({.more_keys = [key](io::gguf_writer& w) { w.add_f32(key, 4.0f); }}),
                  std::string("key '") + key + "': 4.000000 is not supported: llama.cpp divides every position by it"));
    }
    {
        const auto path = std::filesystem::temp_directory_path() / "dlm_test_rope_factor_one.gguf";
        test::f32_gguf_writer(data / "models" / "llada_tiny", {.more_keys = [](io::gguf_writer& w) {
                                  w.add_string("llada.rope.scaling.type", "none");
                                  w.add_f32("llada.rope.scaling.factor", 1.0f);
                                  w.add_f32("llada.rope.scale_linear", 2.0f);  // unread: the factor is there
                              }}).write(path);
        CHECK_NOTHROW((void)cpu::transformer::load(path));
        std::filesystem::remove(path);
    }
    CHECK(has(load_error<tensor_error>({.drop_tensor = "blk.1.ffn_up.weight"}), "tensor 'blk.1.ffn_up.weight': missing from the file"));
    CHECK(has(load_error<tensor_error>({.reshape_tensor = "blk.0.ffn_down.weight", .new_shape = {48, 80}}),
              "tensor 'blk.0.ffn_down.weight': shape [48, 80] (ggml order, row length first) does not fit the metadata, which needs [80, 48]"));
    CHECK(has(load_error<tensor_error>({.more_tensors = [](io::gguf_writer& w) {
                  const std::vector<float> v(48, 0.0f);
                  const std::int64_t s[] = {48};
                  w.add_tensor("blk.2.attn_norm.weight", s, v);
              }}),
              "tensor 'blk.2.attn_norm.weight': not a tensor of the llada model the metadata describes"));
    // A block_count the tensors cannot hold is refused naming the first missing layer, before
    // anything is counted per layer (2^31 - 1 layers asked for gigabytes of names first).
    CHECK(has(load_error<tensor_error>({.drop_key = "llada.block_count",
                                        .more_keys = [](io::gguf_writer& w) { w.add_u32("llada.block_count", 2147483647); }}),
              "tensor 'blk.2.attn_norm.weight': missing from the file, whose metadata's block_count gives 2147483647 layers"));
}

TEST_CASE("tokenizer errors: SentencePiece vocabularies and unknown pre-tokenizers are refused by name") {
    const auto tok_error = [](const auto& add) {
        io::gguf_writer w;
        add(w);
        const bytes b = w.bytes();
        const io::gguf_header h = io::gguf_header::parse(b, "t.gguf");
        try {
            (void)io::gguf_tokenizer(h);
        } catch (const file_error& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    CHECK(has(tok_error([](io::gguf_writer& w) { w.add_string("tokenizer.ggml.model", "llama"); }),
              "key 'tokenizer.ggml.model': 'llama' is not supported; dlm reads byte-level BPE vocabularies ('gpt2') (this is a SentencePiece vocabulary)"));
    CHECK(has(tok_error([](io::gguf_writer& w) {
                  w.add_string("tokenizer.ggml.model", "gpt2");
                  w.add_string("tokenizer.ggml.pre", "deepseek-coder");
              }),
              "key 'tokenizer.ggml.pre': pre-tokenizer 'deepseek-coder' is not one dlm knows the regex of; it reads 'qwen2', "
              "'llama-bpe', 'llama3', 'gpt-2', 'bailingmoe', 'bailingmoe2', 'llada-moe'"));
    CHECK(has(tok_error([](io::gguf_writer& w) { w.add_string("tokenizer.ggml.model", "gpt2"); }), "key 'tokenizer.ggml.pre'"));
    // A GGUF string need not be UTF-8: a bad merge is still named, its bad bytes quoted as U+FFFD
    // (found by fuzz: gguf, which saw the error path itself throw).
    CHECK(has(tok_error([](io::gguf_writer& w) {
                  w.add_string("tokenizer.ggml.model", "gpt2");
                  w.add_string("tokenizer.ggml.pre", "gpt-2");
                  const std::vector<std::string> tokens = {"a", "b"}, merges = {"a\xff\xfe" "b"};
                  w.add_strings("tokenizer.ggml.tokens", tokens);
                  w.add_strings("tokenizer.ggml.merges", merges);
              }),
              "expected \"left right\", got \"a\xef\xbf\xbd\xef\xbf\xbd" "b\""));
}

TEST_CASE("a llada2 file whose routing or attention llama.cpp's llada2 graph does not compute is refused by key") {
    REQUIRE(llada2_config_error().empty());  // the fixture's keys themselves are read
    // `key` set to `value` is refused naming `named` (the key itself unless given).
    const auto refused = [](const std::string& key, std::int64_t value, const std::string& why, const std::string& named = "") {
        CAPTURE(key);
        CAPTURE(value);
        const std::string m = llada2_config_error(key, value);
        CHECK(has(m, "key '" + (named.empty() ? key : named) + "'"));
        CHECK(has(m, why));
    };
    refused("llada2.expert_gating_func", 1, "1 is not sigmoid (2)");
    refused("llada2.expert_gating_func", -1, "missing (a required key)");
    refused("llada2.expert_shared_count", 0, "llama.cpp's llada2 graph, which dlm computes, always adds a shared expert");
    refused("llada2.expert_shared_feed_forward_length", -1, "missing (a required key)");
    refused("llada2.leading_dense_block_count", 4, "4 is outside [0, 3]");
    refused("llada2.nextn_predict_layers", 1, "multi-token-prediction layers");
    refused("llada2.expert_group_count", 3, "3 is not fewer than and a divisor of llada2.expert_count 8 (llama.cpp asserts both)");
    refused("llada2.expert_group_count", 8, "8 is not fewer than and a divisor of");
    refused("llada2.expert_group_used_count", 4, "4 is not fewer than llada2.expert_group_count 4 (llama.cpp asserts it)");
    refused("llada2.expert_used_count", 5, "5 is more than the experts of the 2 groups kept");
    refused("llada2.attention.key_length", 8, "4 heads of 8 are not llada2.embedding_length 64: llama.cpp's llada2 graph splits the fused attn_qkv",
            "llada2.attention.head_count");
    refused("llada2.rope.dimension_count", 7, "7 rotated dims of a head of 16; dlm needs an even number no larger than the head");
    refused("llada2.rope.dimension_count", 18, "18 rotated dims");
    // One group (or none) is no group, as in llama.cpp.
    CHECK(llada2_config_error("llada2.expert_group_count", 1).empty());
    CHECK(llada2_config_error("llada2.expert_group_count", -1).empty());
}

TEST_CASE("a llada2 file with a qkv or attention output bias, which llama.cpp's llada2 graph does not add, is refused by tensor") {
    const io::gguf_file fixture = io::gguf_file::open(data / "gguf" / "llada2_tiny.bf16.gguf");
    const auto path = std::filesystem::temp_directory_path() / "dlm_test_llada2_bias.gguf";
    for (const auto& bias_tensor : {std::pair{"blk.0.attn_qkv.bias", 128}, std::pair{"blk.2.attn_output.bias", 64}}) {
        const char* const name = bias_tensor.first;  // not a structured binding: clang before 16 captures none (CAPTURE's lambda)
        const int rows = bias_tensor.second;
        CAPTURE(name);
        io::gguf_writer w = llada2_keys();
        for (const io::gguf_tensor& t : fixture.header().tensors()) w.add_tensor(t.name, t.type, t.shape, t.bytes);
        const std::vector<float> bias(static_cast<std::size_t>(rows), 0.0f);
        const std::int64_t shape[] = {rows};
        w.add_tensor(name, shape, bias);
        w.write(path);
        CHECK_NOTHROW((void)io::gguf_model_config(io::gguf_file::open(path).header()));
        try {
            (void)cpu::transformer::load(path);
            FAIL("accepted");
        } catch (const tensor_error& e) {
            CHECK(has(e.what(), std::string("tensor '") + name + "': not a tensor of the llada2_moe model the metadata describes"));
        }
    }
    std::filesystem::remove(path);
}

TEST_CASE("corrupted bytes of a model file give dlm::error and nothing else") {
    const auto path = data / "gguf" / "llada_tiny.f32.gguf";
    const io::gguf_file good = io::gguf_file::open(path);
    const std::span<const std::byte> all = good.header().tensors().front().bytes;
    const bytes original(all.data() - good.header().data_offset() - good.header().tensors().front().offset, all.data());
    std::mt19937 rng(14);
    int refused = 0;
    for (int trial = 0; trial < 300; ++trial) {
        bytes b = original;  // the header only: every corruption lands in a checked field or a name
        for (int k = 0; k < 3; ++k) b[rng() % b.size()] = static_cast<std::byte>(rng());
        try {
            const io::gguf_header h = io::gguf_header::parse(b, "c.gguf");
            (void)io::gguf_model_config(h);
        } catch (const dlm::error&) {
            ++refused;
        }
    }
    MESSAGE(refused << " of 300 corrupted headers refused");
    CHECK(refused > 0);
}

}  // namespace test_gguf_errors
