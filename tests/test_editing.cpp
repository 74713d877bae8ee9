// Revisable canvases: LLaDA 2.1's token-editing schedule (schedule/editing.hpp) on its own, the
// llada21 presets against the published LLaDA2.1 generate() forward by forward (fills and edits,
// tools/make_llada21_fixtures.py), and what a client may be sent while a block can still change.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>

#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include <dlm/cpu/transformer.hpp>
#include <dlm/engine.hpp>
#include <dlm/presets.hpp>

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_editing {

using namespace dlm;
using dlm::cpu::transformer;
using tvec = std::vector<token_id>;

namespace {

const std::filesystem::path fixture_dir = std::filesystem::path(DLM_TEST_DATA) / "families" / "llada2_tiny";
const char* const trajectories[] = {"trajectory_llada21_quality.json",        "trajectory_llada21_speedy.json",
                                    "trajectory_llada21_edit_0.2.json",       "trajectory_llada21_two_post_steps.json",
                                    "trajectory_llada21_no_post_steps.json",  "trajectory_llada21_two_per_forward.json",
                                    "trajectory_llada21_unaligned_prompt.json", "trajectory_llada21_eos_stop.json"};

nlohmann::json read_json(const std::filesystem::path& p) {
    std::ifstream f(p);
    REQUIRE(f.good());
    return nlohmann::json::parse(f);
}

/// One forward's writes: fills (position, token) and edits (position, old, new), in position order.
struct writes {
    std::vector<std::pair<index_t, token_id>> fills;
    std::vector<std::tuple<index_t, token_id, token_id>> edits;
    bool operator==(const writes&) const = default;
};

std::vector<writes> reference_writes(const nlohmann::json& t) {
    std::vector<writes> out;
    for (const auto& f : t.at("forwards")) {
        writes w;
        for (const auto& x : f.at("fills")) w.fills.emplace_back(x.at(0).get<index_t>(), x.at(1).get<token_id>());
        for (const auto& x : f.at("edits")) w.edits.emplace_back(x.at(0).get<index_t>(), x.at(1).get<token_id>(), x.at(2).get<token_id>());
        out.push_back(std::move(w));
    }
    return out;
}

std::string show(const std::vector<writes>& t) {
    std::string s;
    for (std::size_t f = 0; f < t.size(); ++f) {
        s += "\n  forward " + std::to_string(f) + ":";
        for (const auto& [p, tok] : t[f].fills) s += " " + std::to_string(p) + "=" + std::to_string(tok);
        for (const auto& [p, a, b] : t[f].edits) s += " " + std::to_string(p) + ":" + std::to_string(a) + "->" + std::to_string(b);
    }
    return s;
}

llada21_schedule schedule_of(const nlohmann::json& p) {
    llada21_schedule s;
    s.threshold = p.at("threshold").get<double>();
    s.editing_threshold = p.at("editing_threshold").get<double>();
    s.max_post_steps = p.at("max_post_steps").get<index_t>();
    s.num_to_transfer = p.at("num_to_transfer").get<index_t>();
    s.stop_at_eos = p.at("eos_early_stop").get<bool>();
    return s;
}

/// Decodes fixture `t` with the llada21 preset; returns each forward's writes (from the step
/// events) and the result.
std::pair<std::vector<writes>, sequence_result> replay(transformer& m, const nlohmann::json& t) {
    presets::llada21<transformer> d(m, aligned_block_diffusion_mask{t.at("block_length").get<index_t>()}, {}, schedule_of(t.at("params")));
    std::vector<writes> got;
    std::vector<token_id> before;
    generation_options o{};
    o.gen_length = t.at("gen_length").get<index_t>();
    if (t.at("params").contains("eos_id")) o.eos_ids = std::vector<token_id>{t.at("params").at("eos_id").get<token_id>()};
    sequence_result r = d.generate(t.at("prompt").get<tvec>(), o, [&](const step_event& ev) {
        writes w;
        for (index_t p : ev.committed) w.fills.emplace_back(p, ev.canvas[static_cast<std::size_t>(p)]);
        for (index_t p : ev.edited) {
            // The edit's old token: its revision, the last one recorded for p at this forward.
            const auto& revs = ev.result->revisions;
            const auto it = std::find_if(revs.rbegin(), revs.rend(), [&](const revision& x) { return x.position == p && x.forward == ev.forward; });
            REQUIRE(it != revs.rend());
            w.edits.emplace_back(p, it->old_token, ev.canvas[static_cast<std::size_t>(p)]);
        }
        std::sort(w.fills.begin(), w.fills.end());
        std::sort(w.edits.begin(), w.edits.end());
        got.push_back(std::move(w));
        return step_action::proceed;
    });
    return {std::move(got), std::move(r)};
}

}  // namespace

TEST_CASE("llada21 preset: the same fills and edits, forward by forward, as LLaDA2.1's generate()") {
    auto m = transformer::load(fixture_dir);
    index_t edits_seen = 0;
    for (const char* name : trajectories) {
        CAPTURE(name);
        const auto t = read_json(fixture_dir / name);
        const auto replayed = replay(m, t);
        const auto& got = replayed.first;
        const auto& r = replayed.second;
        const auto want = reference_writes(t);
        CHECK_MESSAGE(got == want, "dlm:" << show(got) << "\nreference:" << show(want));
        const auto answer = t.at("answer").get<tvec>();
        REQUIRE(answer.size() <= r.tokens.size());
        CHECK(tvec(r.tokens.begin(), r.tokens.begin() + static_cast<std::ptrdiff_t>(answer.size())) == answer);
        // Every revision is recorded, and the count agrees; a slot's commit forward is when it was filled.
        CHECK(r.stats.edits == static_cast<index_t>(r.revisions.size()));
        CHECK(r.stats.forwards == static_cast<index_t>(want.size()));
        for (std::size_t f = 0; f < want.size(); ++f)
            for (const auto& [p, tok] : want[f].fills)
                CHECK(r.commit_forward[static_cast<std::size_t>(p - static_cast<index_t>(t.at("prompt").size()))] == static_cast<index_t>(f));
        edits_seen += r.stats.edits;
    }
    CHECK(edits_seen > 0);  // the fixtures exercise editing
}

TEST_CASE("llada21 schedule: fills the masked slots above the threshold, else the most confident ones") {
    llada21_schedule s = llada21_schedule::of(llada21_mode::quality);
    const step_context ctx{};
    const std::vector<candidate> c{{10, 1, 0.2f}, {11, 2, 0.71f}, {12, 3, 0.9f}, {13, 4, 0.7f}};
    std::vector<index_t> chosen;
    s.select(ctx, c, chosen);
    CHECK(chosen == std::vector<index_t>{1, 2});  // strictly above 0.7
    chosen.clear();
    s.num_to_transfer = 3;  // fewer than 3 above: the 3 most confident
    s.select(ctx, c, chosen);
    std::sort(chosen.begin(), chosen.end());
    CHECK(chosen == std::vector<index_t>{1, 2, 3});
}

TEST_CASE("llada21 schedule: edits a filled slot whose new choice differs, strictly above the editing threshold") {
    const llada21_schedule q = llada21_schedule::of(llada21_mode::quality), sp = llada21_schedule::of(llada21_mode::speedy);
    CHECK(q.threshold == 0.7);
    CHECK(q.editing_threshold == 0.5);
    CHECK(sp.threshold == 0.5);
    CHECK(sp.editing_threshold == 0.0);
    const std::vector<filled_candidate> f{{{20, 5, 0.9f}, 5}, {{21, 6, 0.5f}, 7}, {{22, 8, 0.51f}, 7}, {{23, 9, 0.01f}, 1}};
    std::vector<index_t> edits;
    q.revise(step_context{}, f, edits);
    CHECK(edits == std::vector<index_t>{2});  // 20 unchanged, 21 not above 0.5, 23 too unsure
    edits.clear();
    sp.revise(step_context{}, f, edits);
    CHECK(edits == std::vector<index_t>{1, 2, 3});  // Speedy: any changed choice
}

TEST_CASE("llada21 schedule: a block is final after an edit-only forward that edits nothing, or max_post_steps of them") {
    llada21_schedule s;
    s.max_post_steps = 2;
    step_context ctx{};
    CHECK_FALSE(s.block_done(ctx, {3, 1, 0}));  // a slot still masked
    CHECK_FALSE(s.block_done(ctx, {1, 0, 0}));  // just filled: edit-only forwards follow
    CHECK(s.block_done(ctx, {0, 0, 0}));        // an edit-only forward that edited nothing
    CHECK_FALSE(s.block_done(ctx, {0, 0, 2}));  // the first edit-only forward edited
    ctx.steps_after_filled = 1;
    CHECK(s.block_done(ctx, {0, 0, 2}));  // the second: max_post_steps reached
    s.max_post_steps = 0;
    ctx.steps_after_filled = 0;
    CHECK(s.block_done(ctx, {1, 0, 1}));  // none: final when filled
}

TEST_CASE("llada21 schedule: a wrong option is refused by its name") {
    const canvas_layout l{4, 8, 8};
    auto refused = [&](llada21_schedule s, const char* name) {
        CHECK_THROWS_WITH_AS(s.validate(l), doctest::Contains(name), invalid_parameter);
    };
    refused({0.7, 1.5}, "editing_threshold");
    refused({0.7, 0.5, -1}, "max_post_steps");
    refused({0.7, 0.5, 16, 0}, "num_to_transfer");
    refused({1.5}, "threshold");
}

namespace broken {
struct revises_without_block_done {
    void select(const step_context&, std::span<const candidate>, std::vector<index_t>&) const {}
    void revise(const step_context&, std::span<const filled_candidate>, std::vector<index_t>&) const {}
};
struct block_final_misnamed : llada21_schedule {
    bool block_final(const step_context&, const block_step&) const { return true; }  // block_done
};
}  // namespace broken

TEST_CASE("a revising schedule needs both revision hooks, in their known form") {
    static_assert(revising_schedule<llada21_schedule> && revising_schedule<llada21_speedy_schedule>);
    static_assert(!revising_schedule<llada2_schedule> && !revising_schedule<threshold_schedule>);
    static_assert(!unmask_schedule<broken::revises_without_block_done>);
    static_assert(!unmask_schedule<broken::block_final_misnamed>);
    static_assert(detail::cache_fits_revision<prefix_cache, llada21_schedule>);
    static_assert(!detail::cache_fits_revision<sub_block_cache, llada21_schedule>);
    static_assert(detail::cache_fits_revision<sub_block_cache, sub_block_threshold_schedule>);
    CHECK(true);
}

TEST_CASE("engine under a revising schedule: the committed prefix holds final blocks only and never changes what it held") {
    auto m = transformer::load(fixture_dir);
    const auto t = read_json(fixture_dir / "trajectory_llada21_speedy.json");
    presets::llada21_s<transformer> d(m, aligned_block_diffusion_mask{8});
    engine eng(d);
    const auto id = eng.add(t.at("prompt").get<tvec>(), {.gen_length = 24});
    std::vector<std::vector<token_id>> sent;  // what a client got, step by step
    bool edited_after_filled = false;         // an edit of a slot the canvas stream had shown
    while (!eng.idle()) {
        const auto& events = eng.step();
        for (const auto& ev : events) edited_after_filled = edited_after_filled || !ev.edited.empty();
        if (eng.active() == 0) break;
        const auto prefix = eng.committed_prefix(id);
        sent.emplace_back(prefix.begin(), prefix.end());
        CHECK(prefix.size() % 8 == 0);  // whole blocks: the active one is still open
    }
    auto done = eng.take_finished();
    REQUIRE(done.size() == 1);
    const auto& final_tokens = done.front().second.tokens;
    CHECK(edited_after_filled);
    for (std::size_t i = 0; i < sent.size(); ++i) {
        REQUIRE(sent[i].size() <= final_tokens.size());
        CHECK(std::equal(sent[i].begin(), sent[i].end(), final_tokens.begin()));  // never retracted
        if (i > 0) CHECK(sent[i].size() >= sent[i - 1].size());
    }
}

TEST_CASE("schedules that never revise record no revision") {
    auto m = transformer::load(fixture_dir);
    presets::llada2<transformer> d(m, aligned_block_diffusion_mask{8});
    std::size_t edited = 0;
    const auto r = d.generate(tvec{1, 2, 3}, {.gen_length = 16}, [&](const step_event& ev) {
        edited += ev.edited.size();
        return step_action::proceed;
    });
    CHECK(edited == 0);
    CHECK(r.revisions.empty());
    CHECK(r.stats.edits == 0);
}

TEST_CASE("a LLaDA2 folder is taken for LLaDA 2.1 by its decoder's keys or its name, never by its architecture alone") {
    namespace fs = std::filesystem;
    const fs::path root = fs::temp_directory_path() / ("dlm_test_editing_" + std::to_string(::getpid()));
    const auto folder = [&](const fs::path& rel, const char* generation_config) {
        const fs::path dir = root / rel;
        fs::create_directories(dir);
        fs::copy_file(fixture_dir / "config.json", dir / "config.json", fs::copy_options::overwrite_existing);
        if (generation_config) std::ofstream(dir / "generation_config.json") << generation_config;
        return io::load_config(dir).decoding.token_editing;
    };
    const auto plain = folder("llada2_plain", nullptr);
    CHECK_FALSE(plain.value.has_value());
    const auto keyed = folder("llada2_keyed", R"({"eos_token_id": 297, "max_post_steps": 16})");
    CHECK(keyed.value == true);
    CHECK(keyed.origin.find("generation_config.json key 'max_post_steps'") != std::string::npos);
    const auto named = folder("LLaDA2.1-mini", nullptr);
    CHECK(named.value == true);
    CHECK(named.origin == "the folder name 'LLaDA2.1-mini'");
    CHECK(folder(fs::path("models--inclusionAI--LLaDA2.1-flash") / "snapshots" / "0123abcd", nullptr).value == true);
    CHECK_FALSE(folder(fs::path("llada2.1-experiments") / "LLaDA2.0-mini", nullptr).value.has_value());  // a parent's name says nothing
    fs::remove_all(root);
}

}  // namespace test_editing
