// Tests of dlm::io::load_config / parse_config on the released configs and on broken ones.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../bench/shapes.hpp"
#include "dlm/io/diffusion_gemma_config.hpp"
#include "dlm/io/model_config.hpp"
#include "io_test_util.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_io_config {

using namespace dlm::io;
using dlm_test::expect_error;
using dlm_test::temp_dir;
using dlm_test::write_text;
using json = nlohmann::json;

namespace {

const std::filesystem::path configs = std::filesystem::path(DLM_TEST_DATA) / "configs";

json fixture(const char* folder) {
    return json::parse(detail::read_text_file(configs / folder / "config.json"));
}

/// parse_config on `j` must throw file_error naming "cfg.json" and every part.
void expect_refused(const json& j, std::initializer_list<std::string_view> parts) {
    INFO("config: " << j.dump());
    expect_error<dlm::file_error>([&] { (void)parse_config(j, "cfg.json"); }, {"cfg.json"});
    expect_error<dlm::file_error>([&] { (void)parse_config(j, "cfg.json"); }, parts);
}

/// A small model in LLaDA's layout, as our own checkpoints write it.
json tiny_llada() {
    return json{{"model_type", "llada"}, {"architectures", {"LLaDAModelLM"}}, {"d_model", 64},  {"n_heads", 4},
                {"n_kv_heads", 2},       {"n_layers", 2},                     {"mlp_hidden_size", 128},
                {"vocab_size", 300},     {"embedding_size", 320},             {"mask_token_id", 299},
                {"eos_token_id", 2},     {"max_sequence_length", 256},        {"rope_theta", 10000.0},
                {"rms_norm_eps", 1e-5},  {"weight_tying", false},             {"include_bias", false}};
}

}  // namespace

TEST_CASE("LLaDA-8B-Instruct config") {
    const model_config c = load_config(configs / "llada-8b-instruct");
    CHECK(c.arch == architecture::llada);
    CHECK(c.vocab_size == 126464);
    CHECK(c.hidden_size == 4096);
    CHECK(c.intermediate_size == 12288);
    CHECK(c.num_layers == 32);
    CHECK(c.num_heads == 32);
    CHECK(c.num_kv_heads == 32);
    CHECK(c.head_dim == 128);
    CHECK(c.max_context == 4096);
    CHECK(c.rope_theta == 500000.0);
    CHECK(c.rms_norm_eps == 1e-5);
    CHECK_FALSE(c.tie_word_embeddings);
    CHECK_FALSE(c.qkv_bias);
    CHECK(c.mask_id == 126336);
    CHECK(c.eos_ids == std::vector<dlm::token_id>{126081});  // generation_config repeats it: kept once
    CHECK_FALSE(c.logits_shift);
    CHECK_FALSE(c.causal);
}

TEST_CASE("Dream-v0-Instruct-7B config") {
    const model_config c = load_config(configs / "dream-v0-instruct-7b");
    CHECK(c.arch == architecture::dream);
    CHECK(c.vocab_size == 152064);
    CHECK(c.hidden_size == 3584);
    CHECK(c.intermediate_size == 18944);
    CHECK(c.num_layers == 28);
    CHECK(c.num_heads == 28);
    CHECK(c.num_kv_heads == 4);
    CHECK(c.head_dim == 128);
    CHECK(c.max_context == 131072);
    CHECK(c.rope_theta == 1000000.0);
    CHECK(c.rms_norm_eps == 1e-6);
    CHECK_FALSE(c.tie_word_embeddings);
    CHECK(c.qkv_bias);
    CHECK(c.mask_id == 151666);  // generation_config.json's "mask_token_id": null does not override it
    CHECK(c.eos_ids == std::vector<dlm::token_id>{151643});
    CHECK(c.logits_shift);
    CHECK_FALSE(c.causal);
}

TEST_CASE("Qwen2ForCausalLM config (autoregressive)") {
    const model_config c = load_config(configs / "qwen2-0.5b-instruct" / "config.json");  // the file, not the folder
    CHECK(c.arch == architecture::qwen2);
    CHECK(c.vocab_size == 151936);
    CHECK(c.hidden_size == 896);
    CHECK(c.num_heads == 14);
    CHECK(c.num_kv_heads == 2);
    CHECK(c.head_dim == 64);
    CHECK(c.intermediate_size == 4864);
    CHECK(c.num_layers == 24);
    CHECK(c.max_context == 32768);
    CHECK(c.tie_word_embeddings);
    CHECK(c.qkv_bias);
    CHECK(c.mask_id == 151935);  // no mask token: the last (padding) embedding row
    CHECK(c.eos_ids == std::vector<dlm::token_id>{151645, 151643});  // config, then generation_config
    CHECK(c.logits_shift);
    CHECK(c.causal);
}

TEST_CASE("a small model in LLaDA's layout, and LLaDAConfig's defaults") {
    json j = tiny_llada();
    model_config c = parse_config(j, "tiny.json");
    CHECK(c.vocab_size == 320);  // embedding_size: the rows of the embedding and output head
    CHECK(c.num_kv_heads == 2);
    CHECK(c.head_dim == 16);
    CHECK(c.mask_id == 299);
    CHECK(c.eos_ids == std::vector<dlm::token_id>{2});

    for (const char* key : {"n_kv_heads", "mlp_hidden_size", "embedding_size", "weight_tying", "rope_theta",
                            "rms_norm_eps", "max_sequence_length", "eos_token_id", "include_bias"})
        j.erase(key);
    c = parse_config(j, "tiny.json");
    CHECK(c.num_kv_heads == 4);            // n_kv_heads defaults to n_heads
    CHECK(c.intermediate_size == 4 * 64);  // mlp_ratio (4) * d_model
    CHECK(c.vocab_size == 300);
    CHECK(c.tie_word_embeddings);          // LLaDAConfig's weight_tying default
    CHECK(c.rope_theta == 10000.0);
    CHECK(c.rms_norm_eps == 1e-5);
    CHECK(c.max_context == 1024);
    CHECK(c.eos_ids.empty());

    j["mlp_ratio"] = 3;
    j["n_kv_heads"] = nullptr;  // null means "not set"
    j["multi_query_attention"] = true;
    j["include_qkv_bias"] = true;
    c = parse_config(j, "tiny.json");
    CHECK(c.intermediate_size == 192);
    CHECK(c.num_kv_heads == 1);
    CHECK(c.qkv_bias);
}

TEST_CASE("mask and EOS ids: defaults, lists, nulls") {
    json j = fixture("llada-8b-instruct");
    j.erase("mask_token_id");
    CHECK(parse_config(j, "cfg.json").mask_id == llada_default_mask_id);
    j["eos_token_id"] = {126081, 126348};
    CHECK(parse_config(j, "cfg.json").eos_ids == std::vector<dlm::token_id>{126081, 126348});
    j["eos_token_id"] = nullptr;
    CHECK(parse_config(j, "cfg.json").eos_ids.empty());

    json d = fixture("dream-v0-instruct-7b");
    d.erase("mask_token_id");
    CHECK(parse_config(d, "cfg.json").mask_id == dream_default_mask_id);
    json q = fixture("qwen2-0.5b-instruct");
    q["mask_token_id"] = 151643;
    CHECK(parse_config(q, "cfg.json").mask_id == 151643);

    model_config c = parse_config(fixture("qwen2-0.5b-instruct"), "cfg.json");
    add_generation_config(c, json{{"eos_token_id", {151643, 151645, 151643}}}, "gen.json");
    CHECK(c.eos_ids == std::vector<dlm::token_id>{151645, 151643});
    add_generation_config(c, json{{"eos_token_id", nullptr}}, "gen.json");
    CHECK(c.eos_ids.size() == 2);
    expect_error<dlm::file_error>([&] { add_generation_config(c, json{{"eos_token_id", 999999}}, "gen.json"); },
                                  {"gen.json", "'eos_token_id'", "999999", "outside the vocabulary"});
    expect_error<dlm::file_error>([&] { add_generation_config(c, json::array(), "gen.json"); }, {"gen.json", "not an object"});
}

TEST_CASE("architecture detection") {
    json j = fixture("dream-v0-instruct-7b");
    j.erase("model_type");
    CHECK(parse_config(j, "cfg.json").arch == architecture::dream);  // from architectures alone
    j = fixture("dream-v0-instruct-7b");
    j.erase("architectures");
    j["model_type"] = "dream";  // case-insensitive model_type, no architectures
    CHECK(parse_config(j, "cfg.json").arch == architecture::dream);

    json llama = fixture("qwen2-0.5b-instruct");
    llama["model_type"] = "llama";
    llama["architectures"] = {"LlamaForCausalLM"};
    expect_refused(llama, {"architecture not supported", "'llama'", "'LlamaForCausalLM'", "'qwen2' (Qwen2ForCausalLM)"});
    json cls = fixture("qwen2-0.5b-instruct");
    cls["architectures"] = {"Qwen2ForSequenceClassification"};
    expect_refused(cls, {"'Qwen2ForSequenceClassification'", "dlm loads 'Qwen2ForCausalLM'"});
    json none = fixture("qwen2-0.5b-instruct");
    none.erase("model_type");
    none.erase("architectures");
    expect_refused(none, {"neither 'model_type' nor 'architectures'"});
    json bad_list = fixture("qwen2-0.5b-instruct");
    bad_list["architectures"] = "Qwen2ForCausalLM";
    expect_refused(bad_list, {"key 'architectures'", "list of class names"});
    expect_refused(json::array({1, 2}), {"not an object"});
}

TEST_CASE("missing, null and ill-typed keys are named") {
    for (const char* key : {"d_model", "n_heads", "n_layers", "vocab_size"}) {
        json j = fixture("llada-8b-instruct");
        j.erase(key);
        expect_refused(j, {std::string("key '") + key + "'", "missing"});
        j[key] = nullptr;
        expect_refused(j, {std::string("key '") + key + "'", "is null"});
    }
    for (const char* key : {"hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size", "vocab_size"}) {
        json j = fixture("dream-v0-instruct-7b");
        j.erase(key);
        expect_refused(j, {std::string("key '") + key + "'", "missing"});
    }
    json j = fixture("llada-8b-instruct");
    j["d_model"] = "4096";
    expect_refused(j, {"key 'd_model'", "expected an integer", "string", "\"4096\""});
    j = fixture("dream-v0-instruct-7b");
    j["hidden_size"] = 3584.0;
    expect_refused(j, {"key 'hidden_size'", "expected an integer", "number"});
    j = fixture("dream-v0-instruct-7b");
    j["tie_word_embeddings"] = "false";
    expect_refused(j, {"key 'tie_word_embeddings'", "expected true or false"});
    j = fixture("dream-v0-instruct-7b");
    j["rope_theta"] = "big";
    expect_refused(j, {"key 'rope_theta'", "expected a number"});
    j["rope_theta"] = -1.0;
    expect_refused(j, {"key 'rope_theta'", "positive"});
    j = fixture("dream-v0-instruct-7b");
    j["eos_token_id"] = {151643, "x"};
    expect_refused(j, {"key 'eos_token_id'", "expected an integer"});
    j = fixture("dream-v0-instruct-7b");
    j["vocab_size"] = 5000000000LL;
    expect_refused(j, {"key 'vocab_size'", "does not fit in 32 bits"});
    j = fixture("dream-v0-instruct-7b");
    j["model_type"] = 3;
    expect_refused(j, {"key 'model_type'", "expected a string"});
    j = fixture("dream-v0-instruct-7b");
    j["mask_token_id"] = {151666};
    expect_refused(j, {"key 'mask_token_id'", "expected an integer"});
}

TEST_CASE("inconsistent sizes are refused") {
    json j = fixture("dream-v0-instruct-7b");
    j["hidden_size"] = 3590;
    expect_refused(j, {"key 'num_attention_heads'", "28 does not divide hidden_size 3590"});
    j = fixture("dream-v0-instruct-7b");
    j["num_key_value_heads"] = 5;
    expect_refused(j, {"key 'num_key_value_heads'", "5 does not divide num_attention_heads 28"});
    j = fixture("llada-8b-instruct");
    j["n_kv_heads"] = 3;
    expect_refused(j, {"key 'n_kv_heads'", "does not divide n_heads 32"});
    j = fixture("llada-8b-instruct");
    j["d_model"] = 96;  // head dimension 3
    expect_refused(j, {"key 'n_heads'", "head dimension 3 is odd"});
    j = fixture("qwen2-0.5b-instruct");
    j["head_dim"] = 0;
    expect_refused(j, {"key 'head_dim'", "positive"});
    j["head_dim"] = 48;  // an explicit head_dim wins over hidden_size / heads
    CHECK(parse_config(j, "cfg.json").head_dim == 48);
    for (const char* key : {"n_layers", "n_heads", "vocab_size", "mlp_hidden_size", "max_sequence_length"}) {
        j = fixture("llada-8b-instruct");
        j[key] = key == std::string("vocab_size") ? -1 : 0;  // vocab_size is checked even with an embedding_size
        expect_refused(j, {std::string("key '") + key + "'", "must be positive"});
    }
    j = fixture("llada-8b-instruct");
    j["embedding_size"] = 100000;
    expect_refused(j, {"key 'embedding_size'", "smaller than vocab_size 126464"});
}

TEST_CASE("token ids outside the vocabulary are refused") {
    json j = fixture("dream-v0-instruct-7b");
    j["mask_token_id"] = 200000;
    expect_refused(j, {"key 'mask_token_id'", "200000", "outside the vocabulary [0, 152064)"});
    j = fixture("llada-8b-instruct");
    j["eos_token_id"] = -1;
    expect_refused(j, {"key 'eos_token_id'", "-1", "outside the vocabulary"});
    json t = tiny_llada();
    t.erase("mask_token_id");  // LLaDA's default 126336 does not fit a 320-row vocabulary
    expect_refused(t, {"key 'mask_token_id'", "126336", "default mask id"});
}

TEST_CASE("features dlm's transformer does not implement are refused by key") {
    const std::pair<const char*, json> llada_cases[] = {
        {"include_bias", true}, {"alibi", true}, {"rope", false}, {"block_type", "sequential"},
        {"layer_norm_type", "default"}, {"activation_type", "gelu"}, {"attention_layer_norm", true},
        {"scale_logits", true}, {"bias_for_layer_norm", true}};
    for (const auto& [key, value] : llada_cases) {
        json j = fixture("llada-8b-instruct");
        j[key] = value;
        expect_refused(j, {std::string("key '") + key + "'", "not supported"});
    }
    const std::pair<const char*, json> qwen_cases[] = {
        {"hidden_act", "gelu"}, {"use_sliding_window", true},
        {"use_mrope", true}, {"partial_rotary_factor", 0.5}};
    for (const auto& [key, value] : qwen_cases) {
        json j = fixture("qwen2-0.5b-instruct");
        j[key] = value;
        expect_refused(j, {std::string("key '") + key + "'", "not supported"});
    }
    // A top-level partial_rotary_factor (transformers' default rope reads it for every model) was
    // ignored outside LLaDA2 and LLaDA-MoE; 1.0 says nothing and is taken.
    for (const char* folder : {"llada-8b-instruct", "qwen2-0.5b-instruct"}) {
        json j = fixture(folder);
        j["partial_rotary_factor"] = 0.25;
        expect_refused(j, {"key 'partial_rotary_factor'", "0.25 is not supported", "rotates the whole head"});
        j["partial_rotary_factor"] = 1.0;
        CHECK_NOTHROW((void)parse_config(j, "cfg.json"));
    }
}

TEST_CASE("rope: transformers 5's rope_parameters hold the rotary base") {
    const model_config c = load_config(configs / "qwen2-transformers5");
    CHECK(c.rope_theta == 1000000.0);  // not the 10000 a reader of the top-level key alone would fall back to
    CHECK(c.rope_theta_source.find("'rope_parameters.rope_theta'") != std::string::npos);
    CHECK(load_config(configs / "qwen2-0.5b-instruct").rope_theta_source.find("'rope_theta'") != std::string::npos);

    json j = fixture("qwen2-transformers5");  // one dict per layer type, as transformers 5 may nest them
    j["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 250000.0}}}};
    CHECK(parse_config(j, "cfg.json").rope_theta == 250000.0);
    j["rope_parameters"] = {{"rope_type", "default"}};  // a type but no theta: the top-level key, if any, else the default
    j["rope_theta"] = 5e5;
    CHECK(parse_config(j, "cfg.json").rope_theta == 5e5);
}

TEST_CASE("rope: scaling types other than default are refused by key and value") {
    expect_error<dlm::file_error>([&] { (void)load_config(configs / "qwen2-transformers5-yarn"); },
                                  {"qwen2-transformers5-yarn", "key 'rope_parameters.rope_type'", "\"yarn\"", "not supported"});
    for (const char* type : {"yarn", "linear", "dynamic", "llama3", "longrope"}) {
        for (const char* type_key : {"type", "rope_type"}) {  // transformers 4.x wrote "type", 5.x "rope_type"
            json j = fixture("qwen2-0.5b-instruct");
            j["rope_scaling"] = {{type_key, type}, {"factor", 4.0}};
            expect_refused(j, {"key 'rope_scaling." + std::string(type_key) + "'", std::string("\"") + type + "\"", "not supported"});
            json l = fixture("llada-8b-instruct");  // every family reads the same keys
            l["rope_parameters"] = {{type_key, type}, {"rope_theta", 500000.0}};
            expect_refused(l, {"key 'rope_parameters." + std::string(type_key) + "'", std::string("\"") + type + "\""});
        }
    }
    json j = fixture("qwen2-transformers5");
    j["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}}}, {"sliding_attention", {{"rope_type", "linear"}}}};
    expect_refused(j, {"key 'rope_parameters.sliding_attention.rope_type'", "\"linear\""});
    j = fixture("qwen2-transformers5");
    j["rope_parameters"]["partial_rotary_factor"] = 0.5;
    expect_refused(j, {"key 'rope_parameters.partial_rotary_factor'", "0.5", "not supported"});
    j = fixture("qwen2-transformers5");
    j["rope_parameters"] = "default";
    expect_refused(j, {"key 'rope_parameters'", "expected an object"});
    j["rope_parameters"] = {{"rope_theta", "1e6"}};
    expect_refused(j, {"key 'rope_parameters.rope_theta'", "expected a number"});

    // Accepted: null, or an explicit default type (transformers 4.x and 5.x spellings).
    json d = fixture("dream-v0-instruct-7b");
    CHECK(d["rope_scaling"].is_null());
    CHECK(parse_config(d, "cfg.json").rope_theta == 1000000.0);
    for (const char* type_key : {"type", "rope_type"}) {
        d["rope_scaling"] = {{type_key, "default"}};
        CHECK(parse_config(d, "cfg.json").rope_theta == 1000000.0);
    }
}

TEST_CASE("rope: conflicting thetas are refused, naming both keys") {
    json j = fixture("qwen2-transformers5");
    j["rope_theta"] = 10000.0;
    expect_refused(j, {"key 'rope_theta'", "10000.0", "conflicts with 'rope_parameters.rope_theta' 1000000.0"});
    j["rope_theta"] = 1000000.0;  // the same value twice is not a conflict
    CHECK(parse_config(j, "cfg.json").rope_theta == 1000000.0);
    j = fixture("qwen2-0.5b-instruct");
    j["rope_scaling"] = {{"rope_type", "default"}, {"rope_theta", 20000.0}};
    expect_refused(j, {"key 'rope_theta'", "conflicts with 'rope_scaling.rope_theta' 20000.0"});
    j = fixture("qwen2-transformers5");
    j["rope_parameters"] = {{"full_attention", {{"rope_theta", 1e6}}}, {"sliding_attention", {{"rope_theta", 1e4}}}};
    expect_refused(j, {"'rope_parameters.full_attention.rope_theta'", "'rope_parameters.sliding_attention.rope_theta'"});
}

TEST_CASE("rope and epsilon: a base whose f32 frequencies vanish, or an epsilon that swamps the norm, is refused by key") {
    json j = fixture("dream-v0-instruct-7b");
    j["rope_theta"] = 1e308;  // every frequency but the first is 0 in f32: no position information
    expect_refused(j, {"key 'rope_theta'", "at most 1e12", "1e+308"});
    j["rope_theta"] = 1.0;
    expect_refused(j, {"key 'rope_theta'", "above 1"});
    j["rope_theta"] = 1e12;  // the bound itself passes
    CHECK(parse_config(j, "cfg.json").rope_theta == 1e12);
    j = fixture("dream-v0-instruct-7b");
    j.erase("rope_theta");
    j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e300}};
    expect_refused(j, {"key 'rope_parameters.rope_theta'", "at most 1e12"});
    j = fixture("dream-v0-instruct-7b");
    j["rms_norm_eps"] = 1e300;
    expect_refused(j, {"key 'rms_norm_eps'", "at most 1"});
    j["rms_norm_eps"] = 0.5;
    CHECK(parse_config(j, "cfg.json").rms_norm_eps == 0.5);
    // A config made in code is held to the same bounds when a transformer is built from it.
    auto c = parse_config(fixture("dream-v0-instruct-7b"), "cfg.json");
    c.rope_theta = 1e308;
    CHECK_THROWS_WITH_AS(dlm::io::check_model_config(c), doctest::Contains("config.rope_theta"), dlm::invalid_parameter);
    c.rope_theta = 1e4;
    c.rms_norm_eps = 2;
    CHECK_THROWS_WITH_AS(dlm::io::check_model_config(c), doctest::Contains("config.rms_norm_eps"), dlm::invalid_parameter);
}

TEST_CASE("rope: a missing theta takes the default of the family's configuration class, and says so") {
    json q = fixture("qwen2-transformers5");
    q.erase("rope_parameters");
    model_config c = parse_config(q, "cfg.json");
    CHECK(c.rope_theta == 10000.0);
    CHECK(c.rope_theta_source.find("Qwen2Config") != std::string::npos);
    CHECK(c.rope_theta_source.find("no rope_theta") != std::string::npos);
    json d = fixture("dream-v0-instruct-7b");
    d.erase("rope_theta");
    c = parse_config(d, "cfg.json");
    CHECK(c.rope_theta == 10000.0);
    CHECK(c.rope_theta_source.find("DreamConfig") != std::string::npos);
    json l = fixture("llada-8b-instruct");
    l.erase("rope_theta");
    c = parse_config(l, "cfg.json");
    CHECK(c.rope_theta == 10000.0);
    CHECK(c.rope_theta_source.find("configuration_llada.py") != std::string::npos);
}

TEST_CASE("llada2: a config without use_qk_norm norms q and k, as LLaDA2MoeConfig's default") {
    json j = json::parse(detail::read_text_file(std::filesystem::path(DLM_TEST_DATA) / "families" / "llada2_tiny" / "config.json"));
    j.erase("use_qk_norm");
    CHECK(parse_config(j, "cfg.json").qk_norm);
    j["use_qk_norm"] = false;
    CHECK_FALSE(parse_config(j, "cfg.json").qk_norm);
}

TEST_CASE("load_config: file errors name the file") {
    temp_dir dir;
    expect_error<dlm::file_error>([&] { (void)load_config(dir.path()); }, {(dir / "config.json").string(), "no such file"});
    write_text(dir / "config.json", "{\"model_type\": ");
    expect_error<dlm::file_error>([&] { (void)load_config(dir.path()); }, {(dir / "config.json").string(), "not valid JSON"});
    write_text(dir / "config.json", R"({"model_type": "qwen2", "model_type": "llada"})");
    expect_error<dlm::file_error>([&] { (void)load_config(dir.path()); }, {"config.json", "'model_type' twice"});

    write_text(dir / "config.json", fixture("qwen2-0.5b-instruct").dump());
    write_text(dir / "generation_config.json", "[");
    expect_error<dlm::file_error>([&] { (void)load_config(dir.path()); }, {(dir / "generation_config.json").string(), "not valid JSON"});
    write_text(dir / "generation_config.json", R"({"eos_token_id": [151645, 160000]})");
    expect_error<dlm::file_error>([&] { (void)load_config(dir.path()); },
                                  {(dir / "generation_config.json").string(), "160000"});
    write_text(dir / "generation_config.json", R"({"eos_token_id": 151643})");
    CHECK(load_config(dir.path()).eos_ids == std::vector<dlm::token_id>{151645, 151643});
}

TEST_CASE("decoding keys: dlm_gen_length, dlm_block_length, where mask and EOS ids came from, end-of-turn tokens") {
    json j = tiny_llada();
    model_config c = parse_config(j, "tiny.json");
    CHECK_FALSE(c.decoding.block_length.value.has_value());
    CHECK(c.decoding.mask_id_origin == "tiny.json key 'mask_token_id'");
    CHECK(c.decoding.eos_ids_origin == "tiny.json key 'eos_token_id'");
    j["dlm_gen_length"] = 48;
    j["dlm_block_length"] = 8;
    c = parse_config(j, "tiny.json");
    CHECK(c.decoding.gen_length.value == 48);
    CHECK(c.decoding.block_length.value == 8);
    CHECK(c.decoding.block_length.origin == "tiny.json key 'dlm_block_length'");
    j["dlm_block_length"] = 0;
    expect_refused(j, {"key 'dlm_block_length'", "0 must be a positive number of slots"});
    j["dlm_block_length"] = "8";
    expect_refused(j, {"key 'dlm_block_length'", "expected an integer"});
    j["dlm_block_length"] = 8;
    j["dlm_gen_length"] = 1073741824;  // a hostile file's hint: 16 GB of state before any other check
    expect_refused(j, {"key 'dlm_gen_length'", "1073741824 slots is more than the 1048576 any program takes"});
    json q = fixture("qwen2-0.5b-instruct");
    CHECK(parse_config(q, "cfg.json").decoding.mask_id_origin.find("last embedding row") != std::string::npos);

    temp_dir dir;  // end-of-turn tokens come from tokenizer.json's added tokens, EOS ids excluded
    write_text(dir / "config.json", fixture("qwen2-0.5b-instruct").dump());
    write_text(dir / "tokenizer.json", R"({"added_tokens": [{"id": 151643, "content": "<|endoftext|>"}, {"id": 151644, "content": "<|im_start|>"},
                                           {"id": 151645, "content": "<|im_end|>"}, {"id": 128009, "content": "<|eot_id|>"}]})");
    c = load_config(dir.path());
    CHECK(c.decoding.end_of_turn_ids.value == std::vector<dlm::token_id>{128009});  // 151645 is already an EOS of the config
    CHECK(c.decoding.end_of_turn_ids.origin.find("<|eot_id|> 128009") != std::string::npos);
    write_text(dir / "tokenizer.json", R"({"added_tokens": [{"id": 999999, "content": "<|im_end|>"}]})");
    expect_error<dlm::file_error>([&] { (void)load_config(dir.path()); }, {"tokenizer.json", "<|im_end|>", "999999", "outside the vocabulary"});
    const model_config llada = load_config(configs / "llada-8b-instruct");  // no tokenizer.json: none
    CHECK_FALSE(llada.decoding.end_of_turn_ids.value.has_value());
    CHECK(llada.decoding.eos_ids_origin.find("config.json key 'eos_token_id'") != std::string::npos);
}

TEST_CASE("every benchmark shape's config.json is one dlm reads (bench/shapes.hpp)") {
    for (const auto& shape : dlm::bench::shapes()) {
        CAPTURE(shape.name);
        if (dlm::bench::is_diffusion_gemma(shape.config)) {
            CHECK(dlm::io::parse_diffusion_gemma_config(shape.config, shape.name).vocab_size == 262144);
            continue;
        }
        const model_config c = parse_config(shape.config, shape.name);
        CHECK(c.vocab_size > 0);
        if (shape.name == "sdar-30b-a3b-16e") {
            CHECK(c.arch == architecture::sdar_moe);
            REQUIRE(c.moe.has_value());
            CHECK(c.moe->num_experts == 16);
            CHECK(c.moe->experts_per_token == 8);
            CHECK(c.moe->expert_intermediate_size == 768);
            for (dlm::index_t l = 0; l < c.num_layers; ++l) CHECK(c.moe->is_moe_layer(l));
        }
    }
}

TEST_CASE("the diffusiongemma-26b-a4b shape has the published counts: 25.2B parameters, 3.8B active, 210 KiB of K/V a token") {
    const auto shape = dlm::bench::find_shape("diffusiongemma-26b-a4b");
    REQUIRE(shape.has_value());
    const auto c = dlm::io::parse_diffusion_gemma_config(shape->config, shape->name);
    const double h = c.hidden_size, f = c.intermediate_size, e = c.moe_intermediate_size;
    double attention = 0, kv_bytes = 0;
    int sliding = 0;
    for (const auto& l : c.layers) {
        const double q = double(c.num_heads) * l.head_dim, kv = double(l.kv_heads) * l.head_dim;
        attention += h * q * 2 + h * kv * (l.k_eq_v ? 1 : 2);
        kv_bytes += kv * (l.k_eq_v ? 1 : 2) * 2;  // bf16; a full layer's values are its keys
        sliding += l.sliding;
    }
    const double embedding = double(c.vocab_size) * h, dense = c.num_layers * 3 * h * f, router = c.num_layers * h * c.num_experts;
    const double total = embedding + attention + dense + router + c.num_layers * 3.0 * h * e * c.num_experts;
    const double active = embedding + attention + dense + router + c.num_layers * 3.0 * h * e * c.experts_per_token;
    CHECK(sliding == 25);
    CHECK(total == doctest::Approx(25.2e9).epsilon(0.01));
    CHECK(active == doctest::Approx(3.8e9).epsilon(0.02));
    CHECK(kv_bytes == 210 * 1024);
}

}  // namespace test_io_config
