// The command-line layer (cli/): option parsing, settings, preset dispatch, scoring,
// statistics and pictures. The programs themselves run end to end in tests/cli.cmake.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include <dlm/cpu/transformer.hpp>

#include "cli/files.hpp"
#include "cli/model.hpp"
#include "cli/scene.hpp"
#include "cli/options.hpp"
#include "cli/presets.hpp"
#include "cli/score.hpp"
#include "cli/stats.hpp"
#include "cli/trace.hpp"

#include "bench/args.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_cli {

namespace cli = dlm::cli;
using cli::preset_id;

namespace {

cli::options parse(std::vector<std::string_view> args, cli::program p = cli::program::generate) {
    return cli::parse_args(std::span<const std::string_view>(args), p);
}

/// The flag an invalid_parameter names, or "" when parsing succeeds.
std::string refused(std::vector<std::string_view> args, cli::program p = cli::program::generate) {
    try {
        (void)parse(std::move(args), p);
    } catch (const dlm::invalid_parameter& e) {
        return e.parameter();
    }
    return "";
}

}  // namespace

TEST_CASE("cli: --help lists every name of every flag of the program") {
    for (const auto prog : {cli::program::generate, cli::program::eval}) {
        const std::string help = cli::help_text(prog);
        for (const cli::flag& f : cli::flags()) {
            if (!(f.programs & static_cast<unsigned>(prog))) continue;
            for (const auto name : cli::names_of(f)) CHECK_MESSAGE(help.find(name) != std::string::npos, name);
            CHECK(help.find(cli::with_preset_lists(f.help).substr(0, 20)) != std::string::npos);  // preset lists expanded
        }
    }
    CHECK(parse({"--help", "--no-such-flag"}).help);
}

TEST_CASE("cli: llama.cpp's names and ours set the same option") {
    for (const auto spelling : {"--steps", "--diffusion-steps"}) {
        const auto o = parse({"-p", "x", "--preset", "llada", spelling, "12"});
        CHECK(o.steps == 12);
        CHECK(o.spelling("--steps") == spelling);
    }
    const auto o = parse({"--prompt=hi", "--diffusion-block-length=4", "-n", "16", "--diffusion-visual", "-s", "9", "-m", "dir"});
    CHECK(o.prompt == "hi");
    CHECK(o.block_length == 4);
    CHECK(o.gen_length == 16);
    CHECK(o.visual);
    CHECK(o.seed == 9);
    CHECK(o.model == "dir");
    CHECK(o.preset == cli::preset_named("cdlm"));
    const auto e = parse({"--data", "set.jsonl", "--batch", "8", "--limit", "5", "--json", "out.json"}, cli::program::eval);
    CHECK(e.batch == 8);
    CHECK(e.limit == 5);
    CHECK(e.data == "set.jsonl");
}

TEST_CASE("cli: --diffusion-algorithm takes names and llama.cpp's numbers") {
    using cli::algorithm;
    const std::pair<std::string_view, algorithm> cases[] = {
        {"0", algorithm::origin},       {"1", algorithm::entropy},         {"2", algorithm::topk_margin},
        {"3", algorithm::random},       {"4", algorithm::maskgit_plus},    {"origin", algorithm::origin},
        {"maskgit_plus", algorithm::maskgit_plus}, {"topk_margin", algorithm::topk_margin}, {"entropy", algorithm::entropy},
        {"confidence", algorithm::maskgit_plus},   {"margin", algorithm::topk_margin},
    };
    for (const auto& [name, a] : cases) CHECK(cli::algorithm_from_name(name) == a);
    CHECK(parse({"-p", "x", "--preset", "llada", "--diffusion-algorithm", "3"}).alg == algorithm::random);
    CHECK(refused({"-p", "x", "--preset", "llada", "--diffusion-algorithm", "entropy"}) == "--diffusion-algorithm");
    CHECK(refused({"-p", "x", "--preset", "dream", "--alg", "3"}) == "--alg");
    CHECK(refused({"-p", "x", "--preset", "dream", "--alg", "5"}) == "--alg");
}

TEST_CASE("cli: a bad flag or value is refused naming the flag as typed") {
    CHECK(refused({"-p", "x", "--bogus"}) == "--bogus");
    CHECK(refused({"-p", "x", "--steps"}) == "--steps");
    CHECK(refused({"-p", "x", "--preset", "llada", "--diffusion-steps", "1x"}) == "--diffusion-steps");
    CHECK(refused({"-p", "x", "-n", "0"}) == "-n");
    CHECK(refused({"-p", "x", "--threshold", "0"}) == "--threshold");
    CHECK(refused({"-p", "x", "--threshold", "nan"}) == "--threshold");
    CHECK(refused({"-p", "x", "--top-p", "1.01"}) == "--top-p");
    CHECK(refused({"-p", "x", "--seed", "-1"}) == "--seed");
    CHECK(refused({"-p", "x", "--stats=1"}) == "--stats");
    CHECK(refused({"-p", "x", "--compare-presets", "llada,,cdlm"}) == "--compare-presets");
    CHECK(refused({"-p", "x", "--trace", "x.pdf"}) == "--trace");
    CHECK(refused({"x"}) == "x");
    CHECK(refused({""}) == "\"\"");  // an empty argument is named too
    CHECK(refused({}) == "-p");
    CHECK(refused({"--batch", "0"}, cli::program::eval) == "--batch");
    CHECK(refused({"-p", "x"}, cli::program::eval) == "-p");
    CHECK(refused({"-p", "x", "--json", "f"}) == "--json");
    CHECK(refused({"-p", "x", "--think"}) == "--think");  // the chat template's mode: needs --chat
    CHECK(refused({"-p", "x", "--chat", "--think"}).empty());
    CHECK(parse({"-p", "x", "--chat", "--think"}).thinking() == dlm::io::chat_thinking::on);
    CHECK(parse({"-p", "x", "--chat", "--no-think"}).thinking() == dlm::io::chat_thinking::off);  // Qwen3's empty thought
    CHECK(parse({"-p", "x", "--chat"}).thinking() == dlm::io::chat_thinking::template_default);
    CHECK(refused({"-p", "x", "--no-think"}) == "--no-think");
    CHECK(refused({"-p", "x", "--system", "Be brief."}) == "--system");  // the template's system turn: needs --chat
    CHECK(refused({"-p", "x", "--chat", "--system", ""}) == "--system");
    CHECK(parse({"-p", "x", "--chat", "--system", "Be brief."}).system == "Be brief.");
    CHECK(refused({"-p", "x", "--chat", "--think", "--no-think"}) == "--no-think");
    CHECK(refused({"-p", "x", "--kv", "f16"}) == "--kv");  // a KV cache holds f32 or bf16
    CHECK(parse({"-p", "x", "--kv", "bf16"}).kv == "bf16");
    CHECK(parse({"-p", "x"}).kv.empty());
    CHECK(refused({"--kv", "bf16", "--device", "cuda"}, cli::program::server) == "--kv");  // the GPU server holds f32 K/V
    // DiffusionGemma's contexts are f32: --kv bf16 is refused before anything loads.
    CHECK_THROWS_AS((void)cli::load_diffusion_gemma("no-such-folder", cli::load_choice{"", "bf16"}), dlm::invalid_parameter);
    // Options a preset's policies do not have (without --preset, choose_preset checks them against the model's).
    CHECK(refused({"-p", "x", "--preset", "cdlm", "--temp", "0.5"}) == "--temp");  // cdlm samples greedily
    CHECK(refused({"-p", "x", "--preset", "cdlm", "--temp", "0"}).empty());          // neutral values pass
    CHECK(refused({"-p", "x", "--temp", "0.5"}).empty());                            // no preset yet: checked once the model's is known
    CHECK(refused({"-p", "x", "--preset", "dream", "--block-length", "8"}) == "--block-length");
    CHECK(refused({"-p", "x", "--preset", "cdlm", "--steps", "8"}) == "--steps");
    CHECK(refused({"-p", "x", "--preset", "fast-dllm", "--diffusion-eps", "0.1"}) == "--diffusion-eps");
    // Under --compare such options apply where they can.
    CHECK(refused({"-p", "x", "--compare", "--threshold", "0.5", "--steps", "24"}).empty());
    CHECK(refused({"-p", "x", "--compare", "--preset", "cdlm"}) == "--preset");
}

TEST_CASE("cli: without --preset the model's architecture picks it, and the flags are checked against it") {
    using A = dlm::io::architecture;
    const auto preset_of = [](A a) { return cli::default_preset(a, "config.json architectures").preset; };
    CHECK(preset_of(A::sdar) == cli::preset_named("sdar"));
    CHECK(preset_of(A::sdar_moe) == cli::preset_named("sdar"));
    CHECK(preset_of(A::fast_dllm_v2) == cli::preset_named("fast-dllm-v2"));
    CHECK(preset_of(A::llada2_moe) == cli::preset_named("llada2"));
    // LLaDA 2.1 shares LLaDA 2.0's architecture; what marks it (io/decoding_keys.hpp) makes llada21 the default.
    const cli::preset_choice v21 = cli::default_preset(A::llada2_moe, "config.json architectures", {true, "the folder name 'LLaDA2.1-mini'"});
    CHECK(v21.preset == cli::preset_named("llada21"));
    CHECK(v21.reason.find("the default for LLaDA 2.1 checkpoints (the folder name 'LLaDA2.1-mini')") == 0);
    CHECK(cli::default_preset(A::sdar, "config.json architectures", {true, "x"}).preset == cli::preset_named("sdar"));  // only for LLaDA2
    CHECK(preset_of(A::qwen2) == cli::preset_named("autoregressive"));
    for (const A a : {A::llada, A::dream, A::lladamoe}) CHECK(preset_of(a) == cli::preset_named("cdlm"));
    const cli::preset_choice sdar = cli::default_preset(A::sdar, "config.json architectures");
    CHECK(sdar.reason == "the default for SDARForCausalLM (config.json architectures)");
    CHECK(cli::default_preset(A::llada, "general.architecture of the GGUF file").reason ==
          "the default for LLaDAModelLM (general.architecture of the GGUF file), dlm's CDLM students' preset; --preset llada runs the family's reference decoder");
    CHECK(cli::default_preset(A::dream, "config.json architectures").reason.find("--preset dream runs the family's reference decoder") != std::string::npos);
    {  // A llada2 GGUF file carries nothing that tells LLaDA 2.1 from 2.0 (docs/families.md): llada2.
        const dlm::io::gguf_file f = dlm::io::gguf_file::open(DLM_TEST_DATA "/gguf/llada2_tiny.bf16.gguf");
        const dlm::io::model_config g = dlm::io::gguf_model_config(f.header());
        const cli::preset_choice c = cli::default_preset(g.arch, "general.architecture of the GGUF file", g.decoding.token_editing);
        CHECK(c.preset == cli::preset_named("llada2"));
        CHECK(c.reason == "the default for LLaDA2MoeModelLM (general.architecture of the GGUF file)");
    }
    const cli::preset_choice llada = cli::default_preset(A::llada, "config.json architectures");
    // An explicit --preset wins, and says so.
    const cli::preset_choice given = cli::choose_preset(parse({"-p", "x", "--preset", "llada"}), sdar);
    CHECK(given.preset == cli::preset_named("llada"));
    CHECK(given.reason == "--preset llada");
    CHECK(cli::choose_preset(parse({"-p", "x"}), sdar).preset == cli::preset_named("sdar"));
    // --temp 0.5: sdar samples, cdlm (LLaDA's default) is greedy; --steps: sdar plans steps per block, cdlm has none.
    CHECK_NOTHROW((void)cli::choose_preset(parse({"-p", "x", "--temp", "0.5", "--steps", "4"}), sdar));
    try {
        (void)cli::choose_preset(parse({"-p", "x", "--temp", "0.5"}), llada);
        FAIL("cdlm samples greedily");
    } catch (const dlm::invalid_parameter& e) {
        CHECK(e.parameter() == "--temp");
        CHECK(std::string(e.what()).find("the cdlm preset") != std::string::npos);
    }
    CHECK_NOTHROW((void)cli::choose_preset(parse({"-p", "x", "--compare", "--temp", "0.5"}), llada));  // --compare applies it where it can
}

TEST_CASE("cli: --compare defaults and lists") {
    CHECK(parse({"-p", "x", "--compare"}).compare_presets ==
          std::vector<preset_id>{cli::preset_named("llada"), cli::preset_named("fast-dllm"), cli::preset_named("cdlm"), cli::preset_named("cd4lm")});
    const auto o = parse({"-p", "x", "--compare-presets", "autoregressive,fast_dllm_dual"});
    CHECK(o.compare);
    CHECK(o.compare_presets == std::vector<preset_id>{cli::preset_named("autoregressive"), cli::preset_named("fast-dllm-dual")});
}

TEST_CASE("cli: settings come from the flags, then the model, then the preset") {
    const cli::model_hints shipped{48, 8}, none{};
    const auto o = parse({"-p", "x"});
    const auto s = cli::resolve(o, cli::preset_named("cdlm"), shipped);
    CHECK(s.gen_length == 48);
    CHECK(s.block_length == 8);
    CHECK(s.threshold == 0.9);
    CHECK(cli::resolve(o, cli::preset_named("cd4lm"), shipped).threshold == 0.95);
    const auto l = cli::resolve(o, cli::preset_named("llada"), shipped);
    CHECK(l.steps == 48);
    CHECK(l.alg == cli::algorithm::maskgit_plus);
    CHECK(cli::effective_block_length(cli::resolve(o, cli::preset_named("dream"), shipped)) == 48);
    CHECK(cli::resolve(o, cli::preset_named("dream"), shipped).alg == cli::algorithm::origin);
    CHECK(cli::effective_block_length(cli::resolve(o, cli::preset_named("autoregressive"), shipped)) == 1);
    const auto d = cli::resolve(o, cli::preset_named("llada"), none);  // LLaDA's own: 128 slots, blocks of 32, 128 steps
    CHECK(d.gen_length == 128);
    CHECK(d.block_length == 32);
    CHECK(d.steps == 128);
    const auto f = cli::resolve(parse({"-p", "x", "-n", "64", "--block-length", "16", "--threshold", "0.7"}), cli::preset_named("fast-dllm"), shipped);
    CHECK(f.gen_length == 64);
    CHECK(f.block_length == 16);
    CHECK(f.threshold == 0.7);
    try {
        (void)cli::resolve(parse({"-p", "x", "-n", "20"}), cli::preset_named("cdlm"), shipped);
        FAIL("block length 8 does not divide 20");
    } catch (const dlm::invalid_parameter& e) {
        CHECK(e.parameter() == "--block-length");
        CHECK(std::string(e.what()).find("-n 20") != std::string::npos);
    }
    CHECK_THROWS_AS((void)cli::resolve(parse({"-p", "x", "--preset", "llada", "--steps", "7"}), cli::preset_named("llada"), shipped),
                    dlm::invalid_parameter);
    CHECK_NOTHROW((void)cli::resolve(parse({"-p", "x", "-n", "20"}), cli::preset_named("dream"), shipped));  // no blocks to divide
}

TEST_CASE("cli: with_preset calls the lambda with the preset's decoder type") {
    using M = dlm::cpu::transformer;
    namespace p = dlm::presets;
    const auto is = [](preset_id id, auto expected) {
        return cli::with_preset<M>(id, [&]<class D>(std::type_identity<D>) { return std::is_same_v<D, typename decltype(expected)::type>; });
    };
    CHECK(is(cli::preset_named("autoregressive"), std::type_identity<p::autoregressive<M>>{}));
    CHECK(is(cli::preset_named("llada"), std::type_identity<p::llada<M>>{}));
    CHECK(is(cli::preset_named("dream"), std::type_identity<p::dream<M>>{}));
    CHECK(is(cli::preset_named("fast-dllm"), std::type_identity<p::fast_dllm<M>>{}));
    CHECK(is(cli::preset_named("fast-dllm-dual"), std::type_identity<p::fast_dllm_dual<M>>{}));
    CHECK(is(cli::preset_named("cdlm"), std::type_identity<p::cdlm<M>>{}));
    CHECK(is(cli::preset_named("cd4lm"), std::type_identity<p::cd4lm<M>>{}));
}

TEST_CASE("cli: make_decoder configures every policy from the settings") {
    auto model = dlm::cpu::transformer::load(DLM_TEST_DATA "/models/llada_tiny");
    const cli::model_hints h{24, 4};
    const auto llada = cli::resolve(parse({"-p", "x", "--preset", "llada", "--steps", "12", "--alg", "random", "--temp", "0.5", "--top-k", "3"}),
                                    cli::preset_named("llada"), h);
    const auto dl = cli::make_decoder<dlm::presets::llada<dlm::cpu::transformer>>(model, llada);
    CHECK(dl.mask().block_length == 4);
    CHECK(dl.schedule().steps == 12);
    CHECK(dl.schedule().mode == dlm::remasking::random);
    CHECK(dl.sampler().temperature == 0.5f);
    CHECK(dl.sampler().top_k == 3);
    CHECK(dl.sampler().confidence == dlm::confidence_source::raw);

    const auto dream = cli::resolve(parse({"-p", "x", "--preset", "dream", "--eps", "0.01", "--alg", "2", "--alg-temp", "0.3"}),
                                    cli::preset_named("dream"), h);
    const auto dd = cli::make_decoder<dlm::presets::dream<dlm::cpu::transformer>>(model, dream);
    CHECK(dd.schedule().steps == 24);
    CHECK(dd.schedule().eps == 0.01);
    CHECK(dd.schedule().alg == dlm::dream_alg::topk_margin);
    CHECK(dd.schedule().alg_temp == 0.3);

    auto cd = cli::make_decoder<dlm::presets::cdlm<dlm::cpu::transformer>>(
        model, cli::resolve(parse({"-p", "x", "--threshold", "0.6"}), cli::preset_named("cdlm"), h));
    CHECK(cd.mask().block_length == 4);
    CHECK(cd.schedule().tau == 0.6);
    CHECK(cd.schedule().stop_at_eos);
    const auto c4 = cli::make_decoder<dlm::presets::cd4lm<dlm::cpu::transformer>>(model, cli::resolve(parse({"-p", "x"}), cli::preset_named("cd4lm"), h));
    CHECK(c4.schedule().tau == 0.95);
    CHECK(c4.schedule().max_tokens == 32);

    // And it decodes: the settings' gen_length and block length reach the result.
    const auto r = cd.generate(std::vector<dlm::token_id>{1, 2, 3}, {.gen_length = 24, .seed = 0});
    CHECK(r.tokens.size() == 24);
}

TEST_CASE("cli: text in a trace picture is well-formed XML, bytes that are not UTF-8 as U+FFFD") {
    CHECK(cli::draw::detail::xml_escape("Tom has \xff 3 <apples> & \"x\"\x01") == "Tom has \xEF\xBF\xBD 3 &lt;apples&gt; &amp; &quot;x&quot;");
    CHECK(cli::draw::detail::xml_escape("caf\xC3\xA9") == "caf\xC3\xA9");
}

TEST_CASE("cli: the final number is extracted as tools/score.py extracts it") {
    const std::pair<std::string_view, std::optional<std::string>> cases[] = {
        {"3 + 4 = 7\n#### 7", "7"},
        {"#### 1,234", "1234"},
        {"#### -5", "-5"},
        {"#### 12.0", "12"},
        {"#### 2.5", "2.5"},
        {"#### .5", "0.5"},
        {"#### 5.", "5"},
        {"#### 1.5.3", "1.5"},
        {"#### 5,", "5"},
        {"#### 3 then #### 9", "9"},
        {"#### 4 #### x", "4"},
        {"#####8", "8"},
        {"####\n\t 42 apples", "42"},
        {"#### -", std::nullopt},
        {"the answer is 7", std::nullopt},
        {"", std::nullopt},
        {"#### 007", "7"},
        // Python's str(float) and str(int(value)), as tools/score.py prints them (values from python3 3.11).
        {"#### 0.0001", "0.0001"},
        {"#### 0.00001", "1e-05"},
        {"#### 9000000000000000", "9000000000000000"},
        {"#### 12345678901234567890", "12345678901234567168"},
        {"#### 123.25", "123.25"},
        {"#### -0.0005", "-0.0005"},
        {"#### 0.00000025", "2.5e-07"},
        {"#### 100000000000000000000.5", "100000000000000000000"},
        {"#### -0.0", "0"},
    };
    for (const auto& c : cases) CHECK_MESSAGE(cli::extract_final(c.first) == c.second, c.first);
    CHECK(cli::format_prompt("Q: {question}\nA:", "2+2?") == "Q: 2+2?\nA:");
    CHECK(cli::format_prompt("{question}", "x") == "x");
}

TEST_CASE("cli: a data line that is not a JSON object is refused with the parser's reason and its line") {
    const auto path = std::filesystem::temp_directory_path() / ("dlm_test_cli_" + std::to_string(::getpid()) + ".jsonl");
    const auto refusal = [&](const std::string& text) {
        std::ofstream(path, std::ios::binary) << text;
        try {
            (void)cli::read_problems(path);
        } catch (const dlm::file_error& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    CHECK(refusal("{\"question\": \"x\", \"final\": 1}\n{\"question\": \"x\"\n").find("line 2: expected a JSON object, but it is not JSON: parse error at line 1, column 17: syntax error") !=
          std::string::npos);
    CHECK(refusal("{\"question\": \"x\", \"final\": 1e400}\n").find("line 1: expected a JSON object, but it is not JSON: number overflow") !=
          std::string::npos);
    CHECK(refusal("[1, 2]\n").find("line 1: expected a JSON object, got array") != std::string::npos);
    std::filesystem::remove(path);
}

TEST_CASE("cli: Unicode digits and spaces after #### are read as tools/score.py reads them") {
    // The files of the test "tools: score.py reads Unicode digits and spaces as dlm-eval does", where
    // score.py finds every answer right: Arabic-Indic, full-width and mathematical digits, a no-break
    // space, U+3000, U+2028 and U+001C (Python's str.isspace), the last #### of several.
    const auto problems = cli::read_problems(DLM_TEST_DATA "/cli/unicode_final.jsonl");
    std::vector<std::string> answers;
    std::ifstream in(DLM_TEST_DATA "/cli/unicode_final_pred.jsonl");
    for (std::string line; std::getline(in, line);) answers.push_back(nlohmann::json::parse(line)["answer"].get<std::string>());
    REQUIRE(problems.size() == 8);
    REQUIRE(answers.size() == problems.size());
    for (std::size_t i = 0; i < problems.size(); ++i) {
        CAPTURE(i);
        CHECK(cli::extract_final(answers[i]) == problems[i].final);
    }
    CHECK(cli::extract_final("####\xff 5") == std::nullopt);  // U+FFFD is not a space
    CHECK(cli::extract_final("#### 5\xff") == "5");
    CHECK(cli::detail::python_digit(U'\u0669') == 9);
    CHECK(cli::detail::python_digit(U'\u00b2') == -1);  // superscript two: a digit, not decimal (float() refuses it)
    CHECK(cli::detail::python_space(U'\u001f'));
    CHECK_FALSE(cli::detail::python_space(U'\u200b'));  // zero-width space is not whitespace to Python
}

TEST_CASE("cli: a numeric final scores as tools/score.py scores it") {
    // The files of the test "tools: score.py scores a numeric final as dlm-eval does": finals 40, 40.0,
    // 2.5 and "40"; every prediction right.
    const auto problems = cli::read_problems(DLM_TEST_DATA "/cli/numeric_final.jsonl");
    REQUIRE(problems.size() == 4);
    CHECK(problems[0].final == "40");
    CHECK(problems[1].final == "40");
    CHECK(problems[2].final == "2.5");
    CHECK(problems[3].final == "40");
    CHECK(problems[3].line == 4);
    const std::string_view answers[] = {"8 x 5 = 40\n#### 40", "#### 40.0", "#### 2.5", "#### 40"};
    for (std::size_t i = 0; i < problems.size(); ++i) CHECK(cli::extract_final(answers[i]) == problems[i].final);
}

TEST_CASE("cli: --help lists the presets a flag applies to from the registry") {
    // What the registry refuses a flag for and what --help lists come from the same presets' types.
    CHECK(cli::presets_taking(dlm::registry::option::editing_threshold) == "llada21, llada21-s, cdlm-edit, fast-dllm-edit");
    const std::string temp = cli::presets_taking(dlm::registry::option::temperature);
    for (const char* p : {"llada2", "llada21", "fast-dllm-edit", "diffusion-gemma"}) CHECK(temp.find(p) != std::string::npos);
    CHECK(temp.find("cdlm,") == std::string::npos);
    const std::string threshold = cli::presets_taking(dlm::registry::option::threshold);
    for (const char* p : {"llada2", "llada21", "fast-dllm-edit", "diffusion-gemma"}) CHECK(threshold.find(p) != std::string::npos);
    for (const char* flag : {"--threshold", "--editing-threshold", "--temp", "--steps"}) {
        const cli::flag* f = cli::find_flag(flag, cli::program::generate);
        REQUIRE(f);
        CHECK(std::string(f->help).find("{takes:") != std::string::npos);
        CHECK(cli::with_preset_lists(f->help).find('{') == std::string::npos);
    }
    CHECK(cli::with_preset_lists("x {takes:temperature} y") == "x " + temp + " y");
}

TEST_CASE("cli: latency statistics") {
    const auto s = cli::summarize({4, 1, 3, 2});
    CHECK(s.mean == doctest::Approx(2.5));
    CHECK(s.p50 == doctest::Approx(2.5));   // numpy.percentile([1,2,3,4], 50)
    CHECK(s.p95 == doctest::Approx(3.85));  // numpy.percentile([1,2,3,4], 95)
    CHECK(cli::summarize({}).count == 0);
    CHECK(cli::format_seconds(0.0123) == "12.30 ms");
    CHECK(cli::format_seconds(2.5) == "2.50 s");
    CHECK(cli::format_steps({3, 2, 1}) == "[3 2 1]");
}

TEST_CASE("cli: the trace draws one coloured cell per committed slot, and valid SVG") {
    cli::trace_run run;
    run.label = "a & <b>";
    run.block_length = 2;
    auto& r = run.result;
    r.tokens = {5, 6, 7, 1};
    r.commit_forward = {0, 1, 1, -1};  // slot 3: EOS fill after an early stop
    r.commit_confidence = {0.9f, 0.5f, 0.2f, 0.f};
    r.stopped_early = true;
    r.stats.forwards = 2;
    r.stats.committed = 3;
    run.text = {"x", "y\"", "z", "<eos>"};
    const std::vector<cli::trace_run> runs{run};
    const auto sc = cli::trace_scene(runs, "title", "sub");
    int cells = 0, hatched = 0;
    for (const auto& rect : sc.rects) {
        cells += rect.tooltip.find("forward") != std::string::npos;
        hatched += rect.hatch && !rect.tooltip.empty();
    }
    CHECK(cells == 3);
    CHECK(hatched == 1);
    const std::string svg = cli::draw::to_svg(sc);
    CHECK(svg.rfind("<svg", 0) == 0);
    CHECK(svg.find("a &amp; &lt;b&gt;") != std::string::npos);
    CHECK(svg.find("&apos;y&quot;&apos;") != std::string::npos);
    CHECK(cli::draw::hex(cli::draw::confidence_colour(0)) == "#440154");
    CHECK(cli::draw::hex(cli::draw::confidence_colour(1)) == "#fde725");
}

TEST_CASE("cli: the trace outlines each edit of a revising schedule in the row of its forward") {
    cli::trace_run run;
    run.label = "llada21";
    run.block_length = 2;
    auto& r = run.result;
    r.tokens = {5, 9};
    r.commit_forward = {0, 0};
    r.commit_confidence = {0.9f, 0.5f};
    r.revisions = {{11, 1, 6, 9, 1, 0.8f}};  // canvas position 11 (slot 1): 6 -> 9 at forward 1
    r.stats.forwards = 3;
    r.stats.committed = 2;
    r.stats.edits = 1;
    const std::vector<cli::trace_run> runs{run};
    const auto sc = cli::trace_scene(runs, "title", "sub");
    std::vector<const cli::draw::rect*> edits;
    for (const auto& rect : sc.rects)
        if (rect.stroke && cli::draw::hex(*rect.stroke) == cli::draw::hex(cli::draw::palette::edited) && !rect.tooltip.empty())
            edits.push_back(&rect);
    REQUIRE(edits.size() == 1);
    CHECK(edits.front()->tooltip == "slot 1, forward 2: edited 6 -> 9, p = 0.80");
    const std::string svg = cli::draw::to_svg(sc);
    CHECK(svg.find("token edited (outlined)") != std::string::npos);  // the legend says what the outline is
    // Without revisions there is neither outline nor legend entry.
    run.result.revisions.clear();
    CHECK(cli::draw::to_svg(cli::trace_scene(std::vector<cli::trace_run>{run}, "t", "s")).find("token edited") == std::string::npos);
}

TEST_CASE("cli: a config.json whose model_type is not a string is left to the model's reader, which names the key") {
    const auto dir = std::filesystem::temp_directory_path() / "dlm_test_cli_model_type";
    std::filesystem::create_directories(dir);
    const auto write = [&](const char* text) { std::ofstream(dir / "config.json") << text; };
    write(R"({"model_type": 5})");  // nlohmann's own type_error escaped from here before
    CHECK_FALSE(cli::is_diffusion_gemma(dir));
    write(R"({"model_type": null})");
    CHECK_FALSE(cli::is_diffusion_gemma(dir));
    write(R"({"model_type": ["diffusion_gemma"]})");
    CHECK_FALSE(cli::is_diffusion_gemma(dir));
    write(R"({"model_type": "diffusion_gemma"})");
    CHECK(cli::is_diffusion_gemma(dir));
    std::filesystem::remove_all(dir);
}

// bench/args.hpp: the benchmark programs' flags, refused with cli/values.hpp's words.
namespace {

struct argv_of {
    std::vector<std::string> words;
    std::vector<char*> ptrs;
    explicit argv_of(std::vector<std::string> w) : words(std::move(w)) {
        words.insert(words.begin(), "dlm-bench-x");
        for (std::string& x : words) ptrs.push_back(x.data());
    }
    [[nodiscard]] int argc() const { return static_cast<int>(ptrs.size()); }
    char** argv() { return ptrs.data(); }
};

// Reads --n (a count in [1, 64]), --rows (a list in [1, 8]), --scale (in [0.5, 2]), --names and -t / --threads.
std::string read_bench_flags(std::vector<std::string> words) {
    argv_of a(std::move(words));
    dlm::bench::args f(a.argc(), a.argv());
    std::string seen;
    while (f.next()) {
        if (f.is("--n")) seen += "n=" + std::to_string(f.integer(1, 64)) + " ";
        else if (f.is("--rows")) for (const int r : f.integers(1, 8)) seen += "row=" + std::to_string(r) + " ";
        else if (f.is("--scale")) seen += "scale=" + std::to_string(f.number(0.5, 2.0)).substr(0, 4) + " ";
        else if (f.is("--names")) for (const std::string& x : f.names()) seen += "name=" + x + " ";
        else if (f.is("--threads", "-t")) seen += "threads=" + f.value() + " ";
        else f.unknown();
    }
    return seen;
}

std::string refusal(std::vector<std::string> words) {
    try {
        (void)read_bench_flags(std::move(words));
    } catch (const dlm::invalid_parameter& e) {
        return e.what();
    }
    return "accepted";
}

}  // namespace

TEST_CASE("cli: the benchmarks' flags are read in order, lists and aliases included") {
    CHECK(read_bench_flags({"--n", "64", "--rows", "1,8", "-t", "2", "--scale", "0.5", "--names", "a,b"}) ==
          "n=64 row=1 row=8 threads=2 scale=0.50 name=a name=b ");
    CHECK(read_bench_flags({"--threads", "3"}) == "threads=3 ");
    CHECK(read_bench_flags({}).empty());
}

TEST_CASE("cli: a benchmark refuses a bad flag or value by name, as dlm-generate does") {
    CHECK(refusal({"--n", "0"}) == "invalid parameter '--n': must be >= 1, got 0");
    CHECK(refusal({"--n", "65"}) == "invalid parameter '--n': must be <= 64, got 65");
    CHECK(refusal({"--n", "-1"}) == "invalid parameter '--n': must be >= 1, got -1");
    CHECK(refusal({"--n", "abc"}) == "invalid parameter '--n': expected an integer, got 'abc'");
    CHECK(refusal({"--n", "4x"}) == "invalid parameter '--n': expected an integer, got '4x'");
    CHECK(refusal({"--n", "99999999999999999999"}) == "invalid parameter '--n': value '99999999999999999999' is out of range");
    CHECK(refusal({"--n"}) == "invalid parameter '--n': needs a value");
    CHECK_THROWS_WITH_AS((void)cli::detail::to_integer<std::size_t>("--requests", "-1", 2, 4096), "invalid parameter '--requests': must be >= 2, got -1",
                         dlm::invalid_parameter);
    CHECK(cli::detail::to_integer<std::uint64_t>("--seed", "18446744073709551615", 0, ~std::uint64_t{0}) == ~std::uint64_t{0});
    CHECK(refusal({"--rows", "1,,2"}) == "invalid parameter '--rows': expected an integer, got ''");
    CHECK(refusal({"--rows", "1,9"}) == "invalid parameter '--rows': must be <= 8, got 9");
    CHECK(refusal({"--scale", "3"}) == "invalid parameter '--scale': must be in [0.5, 2], got 3");
    CHECK(refusal({"--scale", "nan"}) == "invalid parameter '--scale': expected a finite number, got 'nan'");
    CHECK(refusal({"--names", "a,"}) == "invalid parameter '--names': has an empty item in 'a,'");
    CHECK(refusal({"--bogus"}) == "invalid parameter '--bogus': unknown flag (see --help)");
    CHECK_THROWS_AS(read_bench_flags({"--n", "1", "--help"}), dlm::bench::help_requested);
    CHECK_THROWS_AS(read_bench_flags({"-h"}), dlm::bench::help_requested);
}

TEST_CASE("cli: a benchmark's main exits 0 on help, 2 on a bad flag and 1 on any other error") {
    const std::string usage = "usage: dlm-bench-x\n";
    CHECK(dlm::bench::run_main("dlm-bench-x", usage, [] { return 0; }) == 0);
    CHECK(dlm::bench::run_main("dlm-bench-x", usage, []() -> int { throw dlm::bench::help_requested{}; }) == 0);
    CHECK(dlm::bench::run_main("dlm-bench-x", usage, []() -> int { throw dlm::invalid_parameter("--n", "must be >= 1, got 0"); }) == 2);
    CHECK(dlm::bench::run_main("dlm-bench-x", usage, []() -> int { throw dlm::invalid_parameter("gen_length", "must be > 0"); }) == 1);
    CHECK(dlm::bench::run_main("dlm-bench-x", usage, []() -> int { throw dlm::file_error("x.json", "cannot open"); }) == 1);
    CHECK(dlm::bench::run_main("dlm-bench-x", usage, []() -> int { throw std::runtime_error("boom"); }) == 1);
}

TEST_CASE("cli: an output file is written whole or refused naming it, and flags naming one file are refused") {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / "dlm-test-cli-files";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    cli::write_file(dir / "a.json", "{}\n");
    CHECK(std::filesystem::file_size(dir / "a.json") == 3);
    CHECK_THROWS_WITH_AS(cli::write_file(dir, "x"), doctest::Contains("is a directory"), dlm::file_error);
    CHECK_THROWS_WITH_AS(cli::write_file(dir / "none" / "a.json", "x"), doctest::Contains("cannot be written: No such file or directory"), dlm::file_error);
    if (std::filesystem::exists("/dev/full"))  // a full disk: the bytes fail at close, not at open
        CHECK_THROWS_WITH_AS(cli::write_file("/dev/full", "{}"), doctest::Contains("/dev/full: cannot be written: No space left on device"), dlm::file_error);
    CHECK_NOTHROW(cli::check_writable(dir / "b.json"));
    CHECK_FALSE(std::filesystem::exists(dir / "b.json"));  // removed again: it was not there
    CHECK_THROWS_WITH_AS(cli::check_writable(dir), doctest::Contains("is a directory"), dlm::file_error);
    CHECK_NOTHROW(cli::check_writable("/dev/null"));  // a device is taken as given, not opened
    REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);  // opened here, it would block (no reader) or end a reader's input
    CHECK_NOTHROW(cli::check_writable(dir / "fifo"));
    CHECK_NOTHROW(cli::check_distinct({{"--json", dir / "a.json"}, {"--predictions", dir / "p.jsonl"}, {"--trace", ""}}, {{"--data", dir / "d.jsonl"}}));
    CHECK_THROWS_WITH_AS(cli::check_distinct({{"--json", dir / "a.json"}, {"--predictions", dir / "." / "a.json"}}),
                         doctest::Contains("invalid parameter '--predictions': names"), dlm::invalid_parameter);
    CHECK_THROWS_WITH_AS(cli::check_distinct({{"--json", dir / "a.json"}}, {{"--data", dir / "sub" / ".." / "a.json"}}),
                         doctest::Contains("the file --data reads"), dlm::invalid_parameter);
    std::filesystem::remove_all(dir);
}

}  // namespace test_cli

