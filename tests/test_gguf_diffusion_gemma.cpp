// DiffusionGemma from a GGUF file of llama.cpp's diffusion-gemma architecture: the tiny model of
// tests/data/families/diffusion_gemma_tiny as llama.cpp's converter lays it out
// (tools/make_gguf_fixtures.py --only diffusion-gemma, written with the gguf package) gives the
// folder's config, the folder's logits where the weights are held alike, a Q8_0 file logits near
// transformers', the preset the same decoding; keys dlm does not compute are refused by name.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <dlm/cpu/diffusion_gemma.hpp>
#include <dlm/cpu/transformer.hpp>
#include <dlm/io/gguf_diffusion_gemma.hpp>
#include <dlm/io/gguf_tokenizer.hpp>
#include <dlm/io/gguf_writer.hpp>
#include <dlm/presets.hpp>

#include "io_test_util.hpp"
#include "tokenizer_test_util.hpp"
#include "support/compare.hpp"
#include "support/drafts.hpp"
#include "support/kernel_testing.hpp"

namespace test_gguf_diffusion_gemma {

using namespace dlm;
using dlm::cpu::diffusion_gemma;
namespace fs = std::filesystem;

namespace {

const fs::path folder = fs::path(DLM_TEST_DATA) / "families" / "diffusion_gemma_tiny";
const fs::path bf16_file = fs::path(DLM_TEST_DATA) / "gguf" / "diffusion_gemma_tiny.bf16.gguf";
const fs::path q8_file = fs::path(DLM_TEST_DATA) / "gguf" / "diffusion_gemma_tiny.q8_0.gguf";

nlohmann::json read_json(const fs::path& p) {
    std::ifstream in(p);
    REQUIRE_MESSAGE(in, "missing fixture " << p);
    return nlohmann::json::parse(in);
}
std::vector<token_id> ids(const nlohmann::json& j) { return j.get<std::vector<token_id>>(); }

/// The folder's weights held in bf16: what the BF16 file holds (matrices bf16, vectors and router f32).
diffusion_gemma folder_in_bf16() {
    cpu::load_options o;
    o.weight_dtype = io::dtype::bf16;
    return diffusion_gemma::load(folder, o);
}

/// The canvas logits of the fixture's four cases (expected.json): the first step, self-conditioning,
/// a second block, and the prompt encoded in two chunks.
std::vector<std::vector<float>> case_logits(diffusion_gemma& m) {
    const nlohmann::json e = read_json(folder / "expected.json");
    const auto v = static_cast<std::size_t>(m.vocab_size());
    auto decode = [&](const cpu::gemma_context& ctx, const std::vector<token_id>& canvas, const float* sc) {
        std::vector<float> l(canvas.size() * v);
        m.decode(ctx, canvas, sc, l);
        return l;
    };
    std::vector<std::vector<float>> out;
    auto ctx = m.new_context(64);
    m.encode(ctx, ids(e["prompt"]));
    out.push_back(decode(ctx, ids(e["canvas_a"]), nullptr));
    std::vector<float> sc = out.back();
    for (float& x : sc) x /= e["selfcond_temperature"].get<float>();
    out.push_back(decode(ctx, ids(e["canvas_b"]), sc.data()));
    m.encode(ctx, ids(e["canvas_a"]));
    out.push_back(decode(ctx, ids(e["canvas_b"]), nullptr));
    auto chunked = m.new_context(64);
    const auto p = ids(e["prompt"]);
    m.encode(chunked, std::vector<token_id>(p.begin(), p.begin() + 5));
    m.encode(chunked, std::vector<token_id>(p.begin() + 5, p.end()));
    out.push_back(decode(chunked, ids(e["canvas_a"]), nullptr));
    return out;
}

/// A trajectory fixture's settings decoded with presets::diffusion_gemma: the draft after every
/// forward, then the answer.
std::vector<std::vector<token_id>> decode_trajectory(diffusion_gemma& m, const std::string& name) {
    const nlohmann::json t = read_json(folder / ("trajectory_" + name + ".json"));
    const entropy_bound_schedule schedule = dlm_test::trajectory_schedule(t["settings"]);
    presets::diffusion_gemma<diffusion_gemma> dec(m, block_causal_mask{}, prefix_cache{}, schedule, sdar_sampler(t["greedy"].get<bool>() ? 0.f : 1.f));
    std::vector<std::vector<token_id>> drafts;
    const sequence_result r = dec.generate(ids(t["prompt"]), {.gen_length = t["gen_length"].get<index_t>(), .seed = t["seed"].get<std::uint64_t>()},
                                           dlm_test::record_drafts(drafts, 16));
    drafts.emplace_back(r.tokens.begin(), r.tokens.begin() + r.answer_length);
    return drafts;
}

/// A diffusion-gemma file of two layers (sliding, full) with only what the config reads: its keys,
/// token_embd and rope_freqs; `more` adds keys, `drop` leaves one of the base keys out.
fs::path config_file(const std::string& tag, const std::function<void(io::gguf_writer&)>& more, const std::string& drop = "") {
    io::gguf_writer w;
    const std::string a = "diffusion-gemma.";
    auto u32 = [&](const std::string& k, std::uint32_t v) {
        if (k != drop) w.add_u32(k, v);
    };
    w.add_string("general.architecture", "diffusion-gemma");
    u32(a + "block_count", 2);
    u32(a + "embedding_length", 64);
    u32(a + "feed_forward_length", 96);
    u32(a + "attention.head_count", 4);
    w.add_i32s(a + "attention.head_count_kv", std::vector<std::int32_t>{2, 1});
    u32(a + "attention.key_length", 32);
    u32(a + "attention.key_length_swa", 16);
    u32(a + "attention.sliding_window", 8);
    w.add_bools(a + "attention.sliding_window_pattern", {true, false});
    u32(a + "attention.value_length_swa", 16);
    w.add_f32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
    u32(a + "expert_count", 4);
    u32(a + "expert_used_count", 2);
    u32(a + "expert_feed_forward_length", 24);
    u32("diffusion.canvas_length", 16);
    if (more) more(w);
    const std::vector<float> emb(64 * 8, 0.f);
    const std::int64_t emb_shape[] = {64, 8}, freq_shape[] = {16};
    w.add_tensor("token_embd.weight", emb_shape, emb);
    std::vector<float> freqs(16, 1e30f);
    std::fill(freqs.begin(), freqs.begin() + 4, 1.f);
    if (tag == "freqs") freqs[6] = 2.f;
    w.add_tensor("rope_freqs.weight", freq_shape, freqs);
    const fs::path p = fs::temp_directory_path() / ("dlm_dg_config_" + tag + ".gguf");
    w.write(p);
    return p;
}

std::string config_error(const std::string& tag, const std::function<void(io::gguf_writer&)>& more, const std::string& drop = "") {
    const io::gguf_file f = io::gguf_file::open(config_file(tag, more, drop));
    try {
        (void)io::gguf_diffusion_gemma_config(f.header());
    } catch (const error& e) {
        return e.what();
    }
    return "(no error)";
}

}  // namespace

TEST_CASE("gguf diffusion-gemma: the file's config equals the folder's config.json, layer by layer") {
    const io::gguf_file f = io::gguf_file::open(bf16_file);
    const io::diffusion_gemma_config g = io::gguf_diffusion_gemma_config(f.header());
    const io::diffusion_gemma_config c = io::load_diffusion_gemma_config(folder);
    CHECK(g.vocab_size == c.vocab_size);
    CHECK(g.hidden_size == c.hidden_size);
    CHECK(g.intermediate_size == c.intermediate_size);
    CHECK(g.num_layers == c.num_layers);
    CHECK(g.num_heads == c.num_heads);
    REQUIRE(g.layers.size() == c.layers.size());
    for (std::size_t l = 0; l < c.layers.size(); ++l) {
        CAPTURE(l);
        CHECK(g.layers[l].sliding == c.layers[l].sliding);
        CHECK(g.layers[l].head_dim == c.layers[l].head_dim);
        CHECK(g.layers[l].kv_heads == c.layers[l].kv_heads);
        CHECK(g.layers[l].k_eq_v == c.layers[l].k_eq_v);  // the file's full layer has no attn_v
    }
    for (const auto& [gr, cr] : {std::pair{g.sliding_rope, c.sliding_rope}, std::pair{g.full_rope, c.full_rope}}) {
        CHECK(gr.theta == cr.theta);
        CHECK(gr.factor == cr.factor);
        CHECK(gr.rotated_pairs == cr.rotated_pairs);  // the full layers': rope_freqs' run of 1s (4 of 16)
    }
    CHECK(g.sliding_window == c.sliding_window);
    CHECK(g.rms_norm_eps == doctest::Approx(c.rms_norm_eps).epsilon(1e-7));  // stored as f32 in GGUF
    CHECK(g.final_logit_softcapping == c.final_logit_softcapping);
    CHECK(g.num_experts == c.num_experts);
    CHECK(g.experts_per_token == c.experts_per_token);
    CHECK(g.moe_intermediate_size == c.moe_intermediate_size);
    CHECK(g.canvas_length == c.canvas_length);
    CHECK(g.max_context == c.max_context);
    CHECK(g.bos_id == c.bos_id);
    CHECK(g.pad_id == c.pad_id);
    CHECK(g.eos_ids == c.eos_ids);
    CHECK(g.image_token_id == no_token);  // the converter drops the vision tower
}

TEST_CASE("gguf diffusion-gemma: a BF16 file gives the logits of the folder held in bf16, bit for bit, in all four cases") {
    diffusion_gemma from_file = diffusion_gemma::load(bf16_file);
    diffusion_gemma from_folder = folder_in_bf16();
    CHECK(from_file.weight_type() == "bf16");
    const auto a = case_logits(from_file), b = case_logits(from_folder);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        CAPTURE(i);
        CHECK(dlm_test::same_bits(a[i], b[i]));
    }
}

namespace {

double mean_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double sum = 0;
    for (std::size_t i = 0; i < a.size(); ++i) sum += std::abs(static_cast<double>(a[i]) - b[i]);
    return sum / static_cast<double>(a.size());
}

std::size_t same_argmax_rows(const std::vector<float>& a, const std::vector<float>& b, std::size_t v) {
    std::size_t same = 0;
    for (std::size_t r = 0; r < a.size() / v; ++r) {
        const auto row = static_cast<std::ptrdiff_t>(r * v), end = static_cast<std::ptrdiff_t>((r + 1) * v);
        same += std::max_element(a.begin() + row, a.begin() + end) - a.begin() == std::max_element(b.begin() + row, b.begin() + end) - b.begin();
    }
    return same;
}

}  // namespace

TEST_CASE("gguf diffusion-gemma: a Q8_0 file decodes near transformers' f32 logits, argmax equal on all but one row in 16") {
    diffusion_gemma q8 = diffusion_gemma::load(q8_file);
    CHECK(q8.weight_type() == "q8_0");
    const auto got = case_logits(q8);
    const std::string names[] = {"first", "selfcond", "second", "first"};
    const auto v = static_cast<std::size_t>(q8.vocab_size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        CAPTURE(names[i]);
        const std::vector<float> want = dlm_test::read_f32_file(folder / ("logits_" + names[i] + ".f32"));
        // Measured on this fixture (docs/models.md): max |d| 2.3-4.1, mean |d| 0.25-0.28, argmax equal on 15-16 of 16 rows,
        // logits of about ±16. The same blocks dequantized to f32 at load are as far off (max |d| 3.6-4.1): the weights'
        // rounding, not the Q8 activations, moves these few logits (the bf16 folder's rounding moves the first case's by under 1).
        CHECK(dlm_test::max_abs_diff(got[i], want) < 5.0);
        CHECK(mean_abs_diff(got[i], want) < 0.4);
        CHECK(same_argmax_rows(got[i], want, v) >= 15);
    }
}

TEST_CASE("gguf diffusion-gemma: the preset decodes the greedy and sampled trajectories from the file as from the folder held alike") {
    diffusion_gemma from_file = diffusion_gemma::load(bf16_file);
    diffusion_gemma from_folder = folder_in_bf16();
    for (const char* name : {"greedy", "sampled"}) {
        CAPTURE(name);
        CHECK(decode_trajectory(from_file, name) == decode_trajectory(from_folder, name));
    }
}

TEST_CASE("gguf diffusion-gemma: keys dlm does not compute as llama.cpp's graph does are refused by name") {
    const std::string a = "diffusion-gemma.";
    CHECK(config_error("base", nullptr) == "(no error)");
    const auto has = [](const std::string& what, const std::string& part) {
        CAPTURE(what);
        return what.find(part) != std::string::npos;
    };
    CHECK(has(config_error("scaling", [&](io::gguf_writer& w) { w.add_string(a + "rope.scaling.type", "linear"); }), "'diffusion-gemma.rope.scaling.type'"));
    CHECK(has(config_error("factor", [&](io::gguf_writer& w) { w.add_f32(a + "rope.scaling.factor", 8.f); }), "'diffusion-gemma.rope.scaling.factor'"));
    CHECK(has(config_error("attn_cap", [&](io::gguf_writer& w) { w.add_f32(a + "attn_logit_softcapping", 50.f); }), "'diffusion-gemma.attn_logit_softcapping'"));
    CHECK(has(config_error("shared_kv", [&](io::gguf_writer& w) { w.add_u32(a + "attention.shared_kv_layers", 1); }), "'diffusion-gemma.attention.shared_kv_layers': must be 0"));
    CHECK(has(config_error("ple", [&](io::gguf_writer& w) { w.add_u32(a + "embedding_length_per_layer_input", 256); }), "embedding_length_per_layer_input': must be 0"));
    CHECK(has(config_error("causal", [&](io::gguf_writer& w) { w.add_bool(a + "attention.causal", true); }), "'diffusion-gemma.attention.causal': true"));
    CHECK(has(config_error("gating", [&](io::gguf_writer& w) { w.add_u32(a + "expert_gating_func", 2); }), "'diffusion-gemma.expert_gating_func': not softmax"));
    CHECK(has(config_error("n_rot", [&](io::gguf_writer& w) { w.add_u32(a + "rope.dimension_count", 8); }), "'diffusion-gemma.rope.dimension_count': 8 rotates part of a head"));
    CHECK(has(config_error("logit_scale", [&](io::gguf_writer& w) { w.add_f32(a + "logit_scale", 2.f); }), "'diffusion-gemma.logit_scale'"));
    CHECK(has(config_error("value", [&](io::gguf_writer& w) { w.add_u32(a + "attention.value_length", 16); }), "'diffusion-gemma.attention.value_length': 16 differs"));
    CHECK(has(config_error("no_canvas", nullptr, "diffusion.canvas_length"), "key 'diffusion.canvas_length': missing"));
    CHECK(has(config_error("no_swa_length", nullptr, a + "attention.key_length_swa"), "key 'diffusion-gemma.attention.key_length_swa': missing"));
    CHECK(has(config_error("freqs", nullptr), "tensor 'rope_freqs.weight': not a proportional rope's table"));
    CHECK(has(config_error("ffn", [&](io::gguf_writer& w) { w.add_i32s(a + "feed_forward_length", std::vector<std::int32_t>{96, 192}); }, a + "feed_forward_length"),
              "'diffusion-gemma.feed_forward_length': differs between layers"));
}

// llama.cpp (src/llama-vocab.cpp, 00ad355e) puts a vocabulary's <eos>, <turn|> and <|tool_response>
// into its end-of-generation set by their text, beside the eos and eot ids the file names.
TEST_CASE("gguf diffusion-gemma: <eos>, <turn|> and <|tool_response> end the answer beside the file's eos and eot ids, as llama.cpp's end-of-generation set has them") {
    const auto eos_of = [](const std::string& tag, std::vector<std::string> tokens, std::optional<std::uint32_t> eot) {
        const io::gguf_file f = io::gguf_file::open(config_file(tag, [&](io::gguf_writer& w) {
            w.add_strings("tokenizer.ggml.tokens", tokens);
            w.add_u32("tokenizer.ggml.eos_token_id", 1);
            if (eot) w.add_u32("tokenizer.ggml.eot_token_id", *eot);
        }));
        return io::gguf_diffusion_gemma_config(f.header()).eos_ids;
    };
    const std::vector<std::string> gemma4 = {"<pad>", "<eos>", "<bos>", "<|tool_response>", "a", "<|turn>", "<turn|>", "b"};
    CHECK(eos_of("eog", gemma4, std::nullopt) == std::vector<token_id>{1, 3, 6});
    CHECK(eos_of("eog_eot", gemma4, 6) == std::vector<token_id>{1, 6, 3});  // each id once
    // A vocabulary without them (the fixtures'), or a token past token_embd's rows, adds nothing.
    CHECK(eos_of("eog_none", {"<pad>", "<eos>", "<bos>", "a", "b", "c", "d", "e"}, std::nullopt) == std::vector<token_id>{1});
    CHECK(eos_of("eog_past", {"<pad>", "<eos>", "<bos>", "a", "b", "c", "d", "e", "<turn|>"}, std::nullopt) == std::vector<token_id>{1});
}

TEST_CASE("gguf diffusion-gemma: a file of another architecture is refused by name, and the transformer refuses this one naming its class") {
    const io::gguf_file f = io::gguf_file::open(fs::path(DLM_TEST_DATA) / "gguf" / "dream_tiny.bf16.gguf");
    CHECK_THROWS_WITH_AS((void)io::gguf_diffusion_gemma_config(f.header()), doctest::Contains("'general.architecture': not 'diffusion-gemma'"), file_error);
    CHECK_FALSE(io::is_diffusion_gemma_gguf(f.header()));
    CHECK(io::is_diffusion_gemma_gguf(io::gguf_file::open(bf16_file).header()));
    CHECK_THROWS_WITH_AS((void)cpu::transformer::load_gguf(bf16_file), doctest::Contains("dlm::cpu::diffusion_gemma::load reads the file"), file_error);
}

namespace {

/// tests/data/tokenizer_gemma/tokenizer.json (Gemma 4's real vocabulary, pruned, real ids) as a
/// converter's "gemma4" GGUF keys: every id up to the full 262,144 named (a filler token no text forms
/// where the pruned file has none), types control / user-defined / byte / unknown / normal, merges
/// "left right" in rank order, <bos> added.
fs::path gemma4_vocab_file(const nlohmann::json& tj, std::size_t size) {
    std::vector<std::string> tokens(size);
    std::vector<std::int32_t> types(size, 1);
    for (std::size_t id = 0; id < size; ++id) tokens[id] = "<dlm_filler_" + std::to_string(id) + ">";
    for (const auto& [text, id] : tj["model"]["vocab"].items()) {
        tokens.at(id.get<std::size_t>()) = text;
        types[id.get<std::size_t>()] = text == "<unk>" ? 2 : text.size() == 6 && text.starts_with("<0x") ? 6 : 1;
    }
    for (const auto& t : tj["added_tokens"]) types.at(t["id"].get<std::size_t>()) = t["special"].get<bool>() ? 3 : 4;
    std::vector<std::string> merges;
    for (const auto& m : tj["model"]["merges"]) merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    io::gguf_writer w;
    w.add_string("general.architecture", "diffusion-gemma");
    w.add_string("tokenizer.ggml.model", "gemma4");
    w.add_strings("tokenizer.ggml.tokens", tokens);
    w.add_i32s("tokenizer.ggml.token_type", types);
    w.add_strings("tokenizer.ggml.merges", merges);
    w.add_u32("tokenizer.ggml.bos_token_id", 2);
    w.add_bool("tokenizer.ggml.add_bos_token", true);
    const fs::path p = fs::temp_directory_path() / "dlm_gemma4_vocab.gguf";
    w.write(p);
    return p;
}

/// A gemma4 vocabulary of 263 tokens: <pad> <eos> <bos> <unk> (<unk> of type unknown, the others
/// control), the 256 byte tokens, then ▁ (260), a (261) and ▁a (262), one merge "▁ a"; `keys` adds
/// the keys a case is about (as test_gguf's small_gguf_tokenizer does for a byte-level vocabulary).
io::tokenizer tiny_gemma4_tokenizer(const std::function<void(io::gguf_writer&)>& keys) {
    std::vector<std::string> tokens = {"<pad>", "<eos>", "<bos>", "<unk>"};
    std::vector<std::int32_t> types = {3, 3, 3, 2};
    for (int b = 0; b < 256; ++b) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "<0x%02X>", b);
        tokens.emplace_back(hex);
        types.push_back(6);
    }
    for (const char* t : {"▁", "a", "▁a"}) {
        tokens.emplace_back(t);
        types.push_back(1);
    }
    io::gguf_writer w;
    w.add_string("tokenizer.ggml.model", "gemma4");
    w.add_strings("tokenizer.ggml.tokens", tokens);
    w.add_i32s("tokenizer.ggml.token_type", types);
    w.add_strings("tokenizer.ggml.merges", std::vector<std::string>{"▁ a"});
    keys(w);
    const std::vector<std::byte> b = w.bytes();
    return io::gguf_tokenizer(io::gguf_header::parse(b, "gemma4.gguf"));
}

}  // namespace

TEST_CASE("gguf diffusion-gemma: Gemma 4's vocabulary from GGUF encodes and decodes the tokenizer fixture's texts as transformers does") {
    const fs::path dir = fs::path(DLM_TEST_DATA) / "tokenizer_gemma";
    const nlohmann::json tj = dlm_test::read_json(dir / "tokenizer.json");
    const auto size = dlm_test::read_json(dir / "source.json").at("vocab_size").get<std::size_t>();
    const io::gguf_file f = io::gguf_file::open(gemma4_vocab_file(tj, size));
    const io::tokenizer tok = io::gguf_tokenizer(f.header());
    CHECK(tok.vocab_size() == static_cast<index_t>(size));
    std::size_t checked = 0, wrong = 0;
    for (const nlohmann::json& c : dlm_test::read_jsonl(dir / "cases.jsonl")) {
        if (!c.contains("ids")) continue;
        const std::string input = c.contains("text") ? c["text"].get<std::string>() : dlm_test::from_hex(c["hex"].get<std::string>());
        const auto ids = c["ids"].get<std::vector<token_id>>();
        const bool same = tok.encode(input) == ids && tok.encode(input, true) == c["ids_bos"].get<std::vector<token_id>>() &&
                          tok.decode(ids) == c["out"].get<std::string>() && tok.decode(ids, true) == c["out_skip"].get<std::string>();
        ++checked;
        if (!same && ++wrong <= 4) MESSAGE("differs: " << nlohmann::json(io::detail::to_valid_utf8(input)).dump());
    }
    CHECK(checked > 1000);
    CHECK(wrong == 0);
}

// llama.cpp's gemma4 vocabulary (src/llama-vocab.cpp at 00ad355e): add_bos is forced on for the
// gemma4 pre-tokenizer whatever tokenizer.ggml.add_bos_token says (its "workaround for Gemma 4"),
// and check_add_special_token then requires bos_token_id. " a" is escaped to "▁a", merged by "▁ a".
TEST_CASE("gguf diffusion-gemma: a gemma4 vocabulary adds <bos> even where the file says add_bos_token false, as llama.cpp does") {
    const auto bos = [](bool add) {
        return [add](io::gguf_writer& w) {
            w.add_u32("tokenizer.ggml.bos_token_id", 2);
            w.add_bool("tokenizer.ggml.add_bos_token", add);
        };
    };
    CHECK(tiny_gemma4_tokenizer(bos(true)).encode(" a", true) == std::vector<token_id>{2, 262});
    CHECK(tiny_gemma4_tokenizer(bos(false)).encode(" a", true) == std::vector<token_id>{2, 262});
    CHECK(tiny_gemma4_tokenizer(bos(false)).encode(" a") == std::vector<token_id>{262});
    CHECK_THROWS_WITH_AS((void)tiny_gemma4_tokenizer([](io::gguf_writer&) {}), doctest::Contains("'tokenizer.ggml.bos_token_id'"), file_error);
}

// llama.cpp reads tokenizer.ggml.add_space_prefix for every vocabulary; a BPE one (gemma4 is) never
// prepends the space, but its detokenizer then strips one leading space from the first piece. The
// converter writes false; dlm refuses true rather than decode a text differently at its start.
TEST_CASE("gguf diffusion-gemma: a gemma4 vocabulary with add_space_prefix true is refused by key") {
    const auto prefix = [](bool add) {
        return [add](io::gguf_writer& w) {
            w.add_u32("tokenizer.ggml.bos_token_id", 2);
            w.add_bool("tokenizer.ggml.add_space_prefix", add);
        };
    };
    CHECK(tiny_gemma4_tokenizer(prefix(false)).decode(std::vector<token_id>{262}) == " a");
    CHECK_THROWS_WITH_AS((void)tiny_gemma4_tokenizer(prefix(true)), doctest::Contains("'tokenizer.ggml.add_space_prefix'"), file_error);
}

// llama.cpp's tokenizer_st_partition matches control, user-defined and unknown tokens in the text
// (cache_special_tokens), and token_to_piece hides control and unknown ones unless asked for special
// tokens: a token of type unknown is a special token, as transformers' Gemma <unk> is.
TEST_CASE("gguf diffusion-gemma: a token of type unknown is a special token: matched in the text, hidden when decoding without special tokens") {
    const io::tokenizer tok = tiny_gemma4_tokenizer([](io::gguf_writer& w) { w.add_u32("tokenizer.ggml.bos_token_id", 2); });
    CHECK(tok.encode("a<unk> a") == std::vector<token_id>{261, 3, 262});
    CHECK(tok.decode(std::vector<token_id>{261, 3, 262}) == "a<unk> a");
    CHECK(tok.decode(std::vector<token_id>{261, 3, 262}, true) == "a a");
}

}  // namespace test_gguf_diffusion_gemma
