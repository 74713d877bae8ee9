// GGUF models: parity of GGUF files written by the `gguf` package (tools/make_gguf_fixtures.py)
// with the safetensors models they came from, quantized files against a reference that
// dequantizes with the gguf package, the tokenizer from tokenizer.ggml.*, and the shipped teacher
// as an F32 GGUF decoding the same tokens under every preset.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <dlm/cpu/transformer.hpp>
#include <dlm/io/gguf_tokenizer.hpp>
#include <dlm/mask/masks.hpp>
#include <dlm/presets.hpp>

#include "gguf_test_util.hpp"
#include "io_test_util.hpp"
#include "tokenizer_test_util.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_gguf {

using namespace dlm;
using dlm::cpu::transformer;
using tvec = std::vector<token_id>;

namespace {

const std::filesystem::path data = DLM_TEST_DATA;
const std::filesystem::path gguf_dir = data / "gguf";

tvec fixture_ids(const std::filesystem::path& json_path) {
    std::ifstream in(json_path);
    REQUIRE_MESSAGE(in, "missing fixture " << json_path);
    return nlohmann::json::parse(in).at("input_ids").get<tvec>();
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    double worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
    return worst;
}

std::vector<float> logits_of(transformer& m, const tvec& ids) {
    const canvas_layout l{8, static_cast<index_t>(ids.size()) - 8, static_cast<index_t>(ids.size()) - 8, m.logits_shift()};
    return test::forward_all(m, bidirectional_mask{}, ids, l);
}

}  // namespace

TEST_CASE("GGUF metadata gives the config of the config.json the model came from") {
    for (const char* name : {"llada_tiny", "dream_tiny"}) {
        CAPTURE(name);
        const io::model_config hf = io::load_config(data / "models" / name);
        const io::gguf_file f = io::gguf_file::open(gguf_dir / (std::string(name) + ".f32.gguf"));
        const io::model_config g = io::gguf_model_config(f.header());
        CHECK(g.arch == hf.arch);
        CHECK(g.vocab_size == hf.vocab_size);
        CHECK(g.hidden_size == hf.hidden_size);
        CHECK(g.intermediate_size == hf.intermediate_size);
        CHECK(g.num_layers == hf.num_layers);
        CHECK(g.num_heads == hf.num_heads);
        CHECK(g.num_kv_heads == hf.num_kv_heads);
        CHECK(g.head_dim == hf.head_dim);
        CHECK(g.max_context == hf.max_context);
        CHECK(g.rope_theta == static_cast<double>(static_cast<float>(hf.rope_theta)));  // GGUF stores float32
        CHECK(g.rms_norm_eps == static_cast<double>(static_cast<float>(hf.rms_norm_eps)));
        CHECK(g.tie_word_embeddings == hf.tie_word_embeddings);
        CHECK(g.qkv_bias == hf.qkv_bias);
        CHECK(g.mask_id == hf.mask_id);
        CHECK(g.eos_ids == hf.eos_ids);
        CHECK(g.logits_shift == hf.logits_shift);
    }
}

TEST_CASE("F32, F16 and BF16 GGUF files give the logits of the safetensors model held in that type, bit for bit") {
    struct item {
        const char* name;
        const char* file;
        io::dtype type;
    };
    for (const item& it : {item{"llada_tiny", "f32", io::dtype::f32}, item{"llada_tiny", "f16", io::dtype::f16},
                           item{"llada_tiny", "bf16", io::dtype::bf16}, item{"dream_tiny", "f32", io::dtype::f32},
                           item{"dream_tiny", "bf16", io::dtype::bf16}}) {
        CAPTURE(it.name);
        CAPTURE(it.file);
        const tvec ids = fixture_ids(data / "models" / it.name / "expected.json");
        transformer st = transformer::load(data / "models" / it.name, {.weight_dtype = it.type});
        transformer gg = transformer::load(gguf_dir / (std::string(it.name) + "." + it.file + ".gguf"));
        CHECK(gg.weight_type() == st.weight_type());
        const std::vector<float> a = logits_of(gg, ids), b = logits_of(st, ids);
        CHECK(bitwise_equal(a, b));
    }
}

TEST_CASE("a GGUF source hands out rows as stored, in Hugging Face order, and refuses rows outside a tensor") {
    // LLaDA's q rows are permuted in the file; rows [3, 11) start and end inside heads of 8, so the
    // handed bytes must be the un-permuted rows themselves, not the file's stretch.
    const auto rows_read = [](const cpu::gguf_source& src, cpu::tensor_role r, index_t row0, index_t rows, index_t cols) {
        std::vector<float> v(static_cast<std::size_t>(rows * cols));
        src.read(r, 0, row0, rows, v.data());
        return v;
    };
    const index_t row0 = 3, rows = 8;
    {
        const io::gguf_file f = io::gguf_file::open(gguf_dir / "llada_tiny.bf16.gguf");
        const io::model_config c = io::gguf_model_config(f.header());
        const cpu::gguf_source src(f, c);
        const index_t cols = c.hidden_size;
        REQUIRE(c.head_dim == 8);
        for (const cpu::tensor_role r : {cpu::tensor_role::q_proj, cpu::tensor_role::v_proj}) {
            std::vector<float> got(static_cast<std::size_t>(rows * cols));
            src.use_stored(r, 0, row0, rows, [&](std::span<const std::byte> b, io::dtype t) {
                CHECK(t == io::dtype::bf16);
                REQUIRE(b.size() == got.size() * 2);
                io::convert_to_f32(t, b, std::span<float>(got));
            });
            CHECK(bitwise_equal(got, rows_read(src, r, row0, rows, cols)));
        }
        try {
            src.use_stored(cpu::tensor_role::q_proj, 0, c.hidden_size - 2, 4, [](std::span<const std::byte>, io::dtype) {});
            FAIL("rows past the tensor's end were handed out");
        } catch (const tensor_error& e) {
            CHECK(std::string(e.what()).find("blk.0.attn_q.weight") != std::string::npos);
            CHECK(std::string(e.what()).find("rows [46, 50) outside the tensor's 48 rows") != std::string::npos);
        }
    }
#if DLM_CPU_GGUF_HAVE_QUANT
    const io::gguf_file f = io::gguf_file::open(gguf_dir / "llada_q.q8_0.gguf");
    const io::model_config c = io::gguf_model_config(f.header());
    const cpu::gguf_source src(f, c);
    const index_t cols = c.hidden_size;
    const auto type = src.quant_type(cpu::tensor_role::q_proj, 0);
    REQUIRE(type.has_value());
    REQUIRE(c.head_dim > row0 + 1);
    std::vector<float> got(static_cast<std::size_t>((c.head_dim + 2) * cols));
    src.use_blocks(cpu::tensor_role::q_proj, 0, row0, c.head_dim + 2, [&](const std::byte* b) {
        for (index_t i = 0; i < c.head_dim + 2; ++i) cpu::quant::dequantize_row(*type, b + i * io::gguf_row_bytes(*type, cols), got.data() + i * cols, cols);
    });
    CHECK(bitwise_equal(got, rows_read(src, cpu::tensor_role::q_proj, row0, c.head_dim + 2, cols)));
    CHECK_THROWS_AS(src.use_stored(cpu::tensor_role::q_proj, 0, 0, 1, [](std::span<const std::byte>, io::dtype) {}), contract_error);
#endif
}

TEST_CASE("a load reports its progress: the bytes held so far after the embedding and each layer, ending at weight_bytes()") {
    for (const std::filesystem::path& path : {data / "models" / "llada_tiny", gguf_dir / "llada_tiny.bf16.gguf", gguf_dir / "lladamoe_tiny.bf16.gguf",
                                              gguf_dir / "llada2_tiny.bf16.gguf", gguf_dir / "llada2_tiny.q8_0.gguf"}) {
        CAPTURE(path.filename().string());
        std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
        cpu::load_options opt;
        opt.progress = [&](std::uint64_t done, std::uint64_t total) { calls.emplace_back(done, total); };
        const transformer m = transformer::load(path, opt);
        REQUIRE(calls.size() == static_cast<std::size_t>(m.config().num_layers) + 2);  // embedding, each layer, the end
        for (std::size_t i = 0; i < calls.size(); ++i) {
            CHECK(calls[i].second == m.weight_bytes());
            CHECK(calls[i].first > 0);
            if (i > 0) CHECK(calls[i].first > calls[i - 1].first);
        }
        CHECK(calls.back().first == m.weight_bytes());
    }
}

TEST_CASE("the F32 GGUF file equals the transformers reference as the safetensors model does") {
    // test_transformer checks the safetensors model against these logits; the GGUF file must give
    // the same numbers (a wrong un-permutation of q/k would move them far outside this).
    const auto dir = data / "models" / "llada_tiny";
    const tvec ids = fixture_ids(dir / "expected.json");
    transformer gg = transformer::load(gguf_dir / "llada_tiny.f32.gguf");
    const std::vector<float> ref = dlm_test::read_f32_file(dir / "logits_bidirectional.f32");
    CHECK(max_abs_diff(logits_of(gg, ids), ref) < 1e-3);
}

TEST_CASE("quantized GGUF files: logits against the gguf package's dequantization, or refused by tensor and type") {
    std::ifstream in(gguf_dir / "llada_q.json");
    REQUIRE(in);
    const auto meta = nlohmann::json::parse(in);
    const tvec ids = meta.at("input_ids").get<tvec>();
    const std::vector<float> exact = dlm_test::read_f32_file(gguf_dir / meta["cases"]["f32"]["logits"].get<std::string>());
    for (const auto& item : meta.at("cases").items()) {
        const std::string& label = item.key();
        const auto& c = item.value();
        if (!c.contains("gguf")) continue;
        CAPTURE(label);
        const auto path = gguf_dir / c["gguf"].get<std::string>();
        const std::vector<float> ref = dlm_test::read_f32_file(gguf_dir / c["logits"].get<std::string>());
#if DLM_CPU_GGUF_HAVE_QUANT
        transformer m = transformer::load(path);
        const std::vector<float> got = logits_of(m, ids);
        // Tolerance: dlm multiplies the stored blocks (activations may be quantized to 8 bits per
        // block, as llama.cpp's kernels do), the reference multiplies the dequantized weights in
        // f32. dlm's deviation from the reference must stay below the deviation the weight
        // quantization itself causes (reference vs the unquantized model): an error as large as the
        // quantization's own would mean the blocks were decoded wrongly, not rounded differently.
        const double own = max_abs_diff(ref, exact), dev = max_abs_diff(got, ref);
        MESSAGE(label << ": max |dlm - reference| " << dev << ", max |reference - unquantized| " << own);
        CHECK(dev < own);
#else
        try {
            (void)transformer::load(path);
            FAIL("a quantized file loaded without quantized kernels");
        } catch (const tensor_error& e) {
            CHECK(std::string(e.what()).find("is not one dlm multiplies") != std::string::npos);
        }
        (void)ref;
        (void)exact;
        (void)ids;
#endif
    }
}

TEST_CASE("the tokenizer from tokenizer.ggml.* encodes as the tokenizer.json it came from") {
    const io::gguf_file f = io::gguf_file::open(gguf_dir / "tokenizer.gguf");
    const io::tokenizer tok = io::gguf_tokenizer(f.header());
    std::ifstream cases(data / "tokenizer" / "cases.jsonl", std::ios::binary);
    REQUIRE(cases);
    const char* flagged[] = {"<tool>", "</tool>", "<|fim|>", "caf\u00e9"};
    std::size_t checked = 0, wrong = 0;
    for (std::string line; std::getline(cases, line);) {
        if (line.empty()) continue;
        const auto c = nlohmann::json::parse(line);
        if (c.value("v", "") != "qwen2" || !c.contains("text") || c.value("special", false)) continue;
        const std::string text = c["text"].get<std::string>();
        // GGUF keeps no lstrip / rstrip / normalized flags of added tokens (gguf_tokenizer.hpp): the
        // fixture's tokens that set them (<tool>, </tool>, <|fim|> strip spaces; café is normalized)
        // tokenize differently by design, so texts holding them are left out.
        const std::string nfc = io::detail::nfc_utf8(io::detail::to_valid_utf8(text));
        if (std::any_of(std::begin(flagged), std::end(flagged), [&](const char* t) { return nfc.find(t) != std::string::npos; })) continue;
        const tvec want = c["ids"].get<tvec>();
        ++checked;
        if (tok.encode(text) != want || tok.decode(want) != nfc) {
            if (++wrong <= 4) MESSAGE("differs: " << nlohmann::json(text).dump());
        }
    }
    MESSAGE(checked << " texts, " << wrong << " differ");
    CHECK(checked > 100);
    CHECK(wrong == 0);
    CHECK(tok.is_special(static_cast<token_id>(*tok.token_to_id("<|endoftext|>"))));
}

namespace {

/// A GGUF tokenizer as llama.cpp's converter writes one: the 256 byte-level symbols (in code point
/// order, ids 0-255), merges "a b" (256) and "Ġ x" (257), two tokens no merge reaches, "abc" (258)
/// and "Ġxyz" (259), and a control token <|begin_of_text|> (260) named as BOS; `keys` adds more.
std::vector<std::byte> small_gguf_bytes(std::string_view pre, const std::function<void(io::gguf_writer&)>& keys = {}) {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.push_back(io::detail::byte_level_map::get().encode(static_cast<unsigned char>(b)));
    std::sort(tokens.begin(), tokens.end());  // UTF-8 byte order is code point order
    for (const char* t : {"ab", "\xC4\xA0x", "abc", "\xC4\xA0xyz", "<|begin_of_text|>"}) tokens.push_back(t);
    std::vector<std::int32_t> types(tokens.size(), 1);
    types.back() = 3;  // control
    const std::vector<std::string> merges = {"a b", "\xC4\xA0 x"};
    io::gguf_writer w;
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_string("tokenizer.ggml.pre", pre);
    w.add_strings("tokenizer.ggml.tokens", tokens);
    w.add_i32s("tokenizer.ggml.token_type", types);
    w.add_strings("tokenizer.ggml.merges", merges);
    w.add_u32("tokenizer.ggml.bos_token_id", 260);
    if (keys) keys(w);
    return w.bytes();
}

io::tokenizer small_gguf_tokenizer(std::string_view pre, const std::function<void(io::gguf_writer&)>& keys = {}) {
    const std::vector<std::byte> b = small_gguf_bytes(pre, keys);
    return io::gguf_tokenizer(io::gguf_header::parse(b, "t.gguf"));
}

/// The pre-tokens of `text` under `steps`, as io::tokenizer cuts a text it encodes.
std::vector<std::string> pre_tokens(const std::vector<io::detail::pre_tokenizer_step>& steps, std::string_view text) {
    std::vector<std::string> words;
    auto add = [&](std::string_view w) { words.emplace_back(w); };
    io::detail::for_each_word(steps, 0, text, add);
    return words;
}

}  // namespace

// The expected ids are Hugging Face tokenizers' (0.22) on the tokenizer.json a Llama 3 tokenizer has
// (ignore_merges, a TemplateProcessing BOS), and llama.cpp's rules (llama-vocab.cpp: llama-bpe sets
// ignore_merges and add_bos; tokenizer.ggml.add_bos_token overrides the default).
TEST_CASE("a llama-bpe GGUF tokenizer takes whole-vocabulary pre-tokens as they are and adds the BOS llama.cpp adds") {
    const io::tokenizer llama3 = small_gguf_tokenizer("llama-bpe");
    CHECK(llama3.encode("abc xyz") == tvec{258, 259});
    CHECK(llama3.encode("abc xyz", true) == tvec{260, 258, 259});
    const io::tokenizer qwen2 = small_gguf_tokenizer("qwen2");  // merges only; no BOS unless the file asks
    CHECK(qwen2.encode("abc xyz") == tvec{256, static_cast<token_id>(*qwen2.token_to_id("c")), 257,
                                          static_cast<token_id>(*qwen2.token_to_id("y")), static_cast<token_id>(*qwen2.token_to_id("z"))});
    CHECK(qwen2.encode("abc", true) == qwen2.encode("abc"));
    const io::tokenizer asked = small_gguf_tokenizer("qwen2", [](io::gguf_writer& w) { w.add_bool("tokenizer.ggml.add_bos_token", true); });
    CHECK(asked.encode("abc", true) == tvec{260, 256, static_cast<token_id>(*asked.token_to_id("c"))});
    const io::tokenizer off = small_gguf_tokenizer("llama-bpe", [](io::gguf_writer& w) { w.add_bool("tokenizer.ggml.add_bos_token", false); });
    CHECK(off.encode("abc", true) == tvec{258});
    const io::tokenizer eos = small_gguf_tokenizer("gpt-2", [](io::gguf_writer& w) {
        w.add_bool("tokenizer.ggml.add_eos_token", true);
        w.add_u32("tokenizer.ggml.eos_token_id", 258);
    });
    CHECK(eos.encode("xyz", true).back() == 258);
    try {
        (void)small_gguf_tokenizer("gpt-2", [](io::gguf_writer& w) { w.add_bool("tokenizer.ggml.add_eos_token", true); });
        FAIL("add_eos_token without an EOS id was taken");
    } catch (const file_error& e) {
        CHECK(std::string(e.what()).find("key 'tokenizer.ggml.add_eos_token': is true, but the file names no tokenizer.ggml.eos_token_id") != std::string::npos);
    }
}

// The reference is llama.cpp's regex for these names (src/llama-vocab.cpp, LLAMA_VOCAB_PRE_TYPE_BAILINGMOE)
// run by PyPI's regex module (tools/make_tokenizer_fixtures.py, tests/data/tokenizer/gguf_pretokenizers.json,
// which also names the texts Ling's own tokenizer.json regex splits otherwise: a case-folded "'ſ").
TEST_CASE("a GGUF tokenizer named bailingmoe, bailingmoe2 or llada-moe cuts text into llama.cpp's pre-tokens") {
    const nlohmann::json fixture = dlm_test::read_json(data / "tokenizer" / "gguf_pretokenizers.json");
    const io::detail::byte_level_map& bytes = io::detail::byte_level_map::get();
    std::size_t names = 0;
    for (const nlohmann::json& pipeline : fixture.at("pipelines")) {
        for (const std::string name : pipeline.at("names")) {
            CAPTURE(name);
            ++names;
            const std::vector<std::byte> b = small_gguf_bytes(name);
            const io::gguf_header h = io::gguf_header::parse(b, "t.gguf");
            const nlohmann::json j = io::gguf_tokenizer_json(h);
            CHECK_FALSE(j.contains("normalizer"));  // llama.cpp normalizes no BPE text
            CHECK(j.at("model").at("ignore_merges") == false);
            std::vector<io::detail::pre_tokenizer_step> steps;
            const std::string source = "t.gguf";
            io::detail::parse_pre_tokenizer(j.at("pre_tokenizer"), {source, "pre_tokenizer"}, steps);
            const io::tokenizer tok = io::gguf_tokenizer(h);
            std::size_t checked = 0, wrong = 0;
            for (const nlohmann::json& c : pipeline.at("cases")) {
                const std::string text = c.at("text");
                std::vector<std::string> want;
                for (const std::string w : c.at("words")) want.push_back(bytes.encode_all(w));
                ++checked;
                if (pre_tokens(steps, text) != want && ++wrong <= 4) MESSAGE("pre-tokens differ: " << nlohmann::json(text).dump());
                CHECK(tok.decode(tok.encode(text)) == text);  // and nothing normalized on the way
            }
            CHECK(checked > 200);
            CHECK(wrong == 0);
            CHECK(tok.encode("abc xyz") == tvec{256, static_cast<token_id>(*tok.token_to_id("c")), 257,
                                                static_cast<token_id>(*tok.token_to_id("y")), static_cast<token_id>(*tok.token_to_id("z"))});
            CHECK(tok.encode("abc", true) == tok.encode("abc"));  // no BOS unless the file asks
        }
    }
    CHECK(names == 3);
}

TEST_CASE("the shipped teacher as an F32 GGUF decodes the tokens of the safetensors teacher under every preset") {
    const std::filesystem::path dir = std::filesystem::path(DLM_MODELS_DIR) / "teacher";
    const std::filesystem::path out = std::filesystem::temp_directory_path() / "dlm_test_teacher.f32.gguf";
    test::write_f32_gguf(dir, out);
    transformer a = transformer::load(dir, {.weight_dtype = io::dtype::f32});
    transformer b = transformer::load(out);
    std::filesystem::remove(out);
    CHECK(b.config().decoding.gen_length.value == a.config().decoding.gen_length.value);
    const tvec prompt{5, 17, 42, 7, 99, 3, 250, 11};
    const generation_options o{16, 8};  // two blocks of 8: every preset commits across a block boundary
    const auto same = [&](auto make) {
        const sequence_result x = make(a).generate(prompt, o), y = make(b).generate(prompt, o);
        CHECK(x.tokens == y.tokens);
    };
    same([](transformer& m) { return presets::autoregressive<transformer>(m); });
    same([](transformer& m) { return presets::llada<transformer>(m); });
    same([](transformer& m) { return presets::dream<transformer>(m, {}, {}, dream_schedule{16}); });
    same([](transformer& m) { return presets::fast_dllm<transformer>(m, semi_ar_mask{8}); });
    same([](transformer& m) { return presets::fast_dllm_dual<transformer>(m, semi_ar_mask{8}); });
    same([](transformer& m) { return presets::cdlm<transformer>(m); });
    same([](transformer& m) { return presets::cd4lm<transformer>(m); });
}

TEST_CASE("a GGUF file written by llama.cpp's own converter gives the logits of its safetensors checkpoint" *
          doctest::skip(std::getenv("DLM_TEST_LLAMA_CPP_GGUF") == nullptr)) {
    // Not in CI (the files are large): DLM_TEST_LLAMA_CPP_GGUF=x.f32.gguf, written by llama.cpp's
    // convert_hf_to_gguf.py --outtype f32 from the LLaDA folder DLM_TEST_LLAMA_CPP_SOURCE. Equal
    // logits prove the tensor names and the un-permutation of q/k against llama.cpp itself.
    const char* source = std::getenv("DLM_TEST_LLAMA_CPP_SOURCE");
    REQUIRE_MESSAGE(source != nullptr, "set DLM_TEST_LLAMA_CPP_SOURCE to the model folder the GGUF file was converted from");
    transformer gg = transformer::load(std::getenv("DLM_TEST_LLAMA_CPP_GGUF"));
    transformer st = transformer::load(source, {.weight_dtype = io::dtype::f32});
    tvec ids;
    for (token_id i = 0; i < 16; ++i) ids.push_back(i < 8 ? 100 + 37 * i : st.mask_id());
    CHECK(bitwise_equal(logits_of(gg, ids), logits_of(st, ids)));
}

// llada-moe: tools/make_gguf_fixtures.py writes a random LLaDA-MoE model (every layer experts, q/k
// norms) in Hugging Face's layout and as llama.cpp's LLaDAMoEModel converter lays it out.
TEST_CASE("a llada-moe GGUF file reads the config of its Hugging Face folder and gives its logits, bit for bit") {
    const auto dir = gguf_dir / "lladamoe_tiny";
    const tvec ids = fixture_ids(gguf_dir / "lladamoe_tiny.json");
    const io::gguf_file f = io::gguf_file::open(gguf_dir / "lladamoe_tiny.bf16.gguf");
    const io::model_config g = io::gguf_model_config(f.header()), hf = io::load_config(dir);
    CHECK(g.arch == io::architecture::lladamoe);
    CHECK(g.qk_norm);
    REQUIRE(g.moe.has_value());
    REQUIRE(hf.moe.has_value());
    CHECK(g.moe->num_experts == hf.moe->num_experts);
    CHECK(g.moe->experts_per_token == hf.moe->experts_per_token);
    CHECK(g.moe->expert_intermediate_size == hf.moe->expert_intermediate_size);
    CHECK(g.moe->shared_intermediate_size == 0);
    CHECK(g.moe->score == hf.moe->score);
    CHECK(g.moe->normalize == hf.moe->normalize);
    CHECK_FALSE(g.moe->selection_bias);
    for (index_t l = 0; l < g.num_layers; ++l) CHECK(g.moe->is_moe_layer(l));
    CHECK(g.mask_id == hf.mask_id);
    CHECK(g.head_dim == hf.head_dim);
    for (const io::dtype t : {io::dtype::bf16, io::dtype::f32}) {
        CAPTURE(io::dtype_name(t));
        transformer gg = transformer::load(gguf_dir / "lladamoe_tiny.bf16.gguf", {.weight_dtype = t});
        transformer st = transformer::load(dir, {.weight_dtype = t});
        CHECK(gg.weight_bytes() == st.weight_bytes());
        CHECK(bitwise_equal(logits_of(gg, ids), logits_of(st, ids)));
    }
    transformer kept = transformer::load(gguf_dir / "lladamoe_tiny.bf16.gguf");  // held as stored
    CHECK(kept.weight_type() == "bf16");
}

TEST_CASE("llada-moe experts held in Q8_0 blocks: against the gguf package's dequantization") {
    const tvec ids = fixture_ids(gguf_dir / "lladamoe_tiny.json");
    transformer ref = transformer::load(gguf_dir / "lladamoe_tiny.q8_0.dequantized.gguf");  // F32: the gguf package's values
    transformer unq = transformer::load(gguf_dir / "lladamoe_tiny.bf16.gguf");
    // Converted to f32 at load, the blocks are the gguf package's dequantized values exactly.
    transformer wide = transformer::load(gguf_dir / "lladamoe_tiny.q8_0.gguf", {.weight_dtype = io::dtype::f32});
    const std::vector<float> want = logits_of(ref, ids);
    CHECK(bitwise_equal(logits_of(wide, ids), want));
#if DLM_CPU_GGUF_HAVE_QUANT
    transformer q = transformer::load(gguf_dir / "lladamoe_tiny.q8_0.gguf");
    CHECK(q.weight_type() == "q8_0");
    // The experts stay blocks: about a quarter of the f32 bytes (34 bytes per 32 weights), not more.
    CHECK(static_cast<double>(q.weight_bytes()) < 0.35 * static_cast<double>(ref.weight_bytes()));
    // As for the dense files, dlm's deviation from the reference comes from its activations, which
    // it quantizes to 8 bits per block of 32 as llama.cpp's kernels do: the same precision as the
    // Q8_0 weights, so on this 32-wide model it is of the size of the deviation the weight
    // quantization causes (the dense fixture, 256 wide, stays below it). A block decoded wrongly,
    // or an expert's rows taken from another expert, moves the logits by their own size (max |logit|
    // is printed): ten times more.
    const std::vector<float> got = logits_of(q, ids);
    const double own = max_abs_diff(want, logits_of(unq, ids)), dev = max_abs_diff(got, want);
    double scale = 0;
    for (const float v : want) scale = std::max(scale, static_cast<double>(std::abs(v)));
    MESSAGE("llada-moe q8_0: max |dlm - reference| " << dev << ", max |reference - unquantized| " << own << ", max |logit| " << scale);
    CHECK(dev < 2 * own);
#endif
}

TEST_CASE("a llada-moe file whose routing llama.cpp's graph does not compute is refused by key") {
    const std::filesystem::path out = std::filesystem::temp_directory_path() / "dlm_test_lladamoe_keys.gguf";
    const auto write = [&](const char* key, bool as_bool, std::uint32_t value) {
        io::gguf_writer w;
        w.add_string("general.architecture", "llada-moe");
        w.add_u32("llada-moe.block_count", 1);
        w.add_u32("llada-moe.embedding_length", 32);
        w.add_u32("llada-moe.attention.head_count", 2);
        w.add_u32("llada-moe.expert_count", 4);
        w.add_u32("llada-moe.expert_used_count", 2);
        w.add_u32("llada-moe.expert_feed_forward_length", 64);
        if (as_bool) w.add_bool(key, value != 0);
        else w.add_u32(key, value);
        const std::vector<std::int64_t> shape{32, 64};
        const std::vector<float> emb(32 * 64, 0.5f);
        w.add_tensor("token_embd.weight", shape, emb);
        w.write(out);
    };
    const auto refused = [&](const char* key, const char* why) {
        CAPTURE(key);
        const io::gguf_file f = io::gguf_file::open(out);
        try {
            (void)io::gguf_model_config(f.header());
            FAIL("accepted");
        } catch (const file_error& e) {
            const std::string what = e.what();
            CHECK(what.find(std::string("key '") + key + "'") != std::string::npos);
            CHECK(what.find(why) != std::string::npos);
        }
    };
    write("llada-moe.expert_gating_func", false, 2);
    refused("llada-moe.expert_gating_func", "is not softmax");
    write("llada-moe.expert_weights_norm", true, 1);
    refused("llada-moe.expert_weights_norm", "normalised expert weights");
    write("llada-moe.expert_shared_count", false, 1);
    refused("llada-moe.expert_shared_count", "shared experts");
    std::filesystem::remove(out);
}

}  // namespace test_gguf
