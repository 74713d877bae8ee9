// Tests of what dlm::io says about the paths it is given (io/file_paths.hpp): why a path is not a
// readable regular file, the size bound of read_text_file, symbolic link loops, optional files that
// are there but cannot be read, and the folder and checkpoint a model path names.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

#include "dlm/io/chat_template.hpp"
#include "dlm/io/diffusion_gemma_config.hpp"
#include "dlm/io/model_config.hpp"
#include "dlm/io/safetensors.hpp"
#include "dlm/io/tokenizer.hpp"
#include "io_test_util.hpp"

// The file's own scope: the suites are compiled together (tests/CMakeLists.txt, unity builds).
namespace test_io_paths {

using namespace dlm::io;
namespace fs = std::filesystem;
using dlm_test::expect_error;
using dlm_test::temp_dir;
using dlm_test::write_text;

namespace {

const fs::path tiny_dir = fs::path(DLM_TEST_DATA) / "models" / "llada_tiny";

/// `dir` holding one entry of each kind a file dlm reads must not be: a folder, a symbolic link to a
/// missing file (a Hugging Face cache without its blob), a link to itself, and a FIFO; and a regular
/// file with a link to it.
void make_entries(const temp_dir& dir) {
    write_text(dir / "file.json", "{}");
    fs::create_symlink("file.json", dir / "link.json");
    fs::create_directory(dir / "folder");
    fs::create_symlink("../blobs/missing-blob", dir / "dangling");
    fs::create_symlink("loop", dir / "loop");
    REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
}

/// A model folder without weights: llada_tiny's config.json.
void write_config(const temp_dir& dir) { fs::copy_file(tiny_dir / "config.json", dir / "config.json"); }

}  // namespace

TEST_CASE("paths: read_text_file says why a path is not a readable regular file, and never waits on a FIFO") {
    temp_dir dir;
    make_entries(dir);
    CHECK(detail::read_text_file(dir / "file.json") == "{}");
    CHECK(detail::read_text_file(dir / "link.json") == "{}");
    const auto refused = [&](const fs::path& p, std::string_view why) {
        expect_error<dlm::file_error>([&] { (void)detail::read_text_file(p); }, {p.string() + ": " + std::string(why)});
    };
    refused(dir / "none.json", "no such file");
    refused(dir / "folder", "is a directory");
    refused(dir / "dangling", "is a symbolic link to a missing file ('../blobs/missing-blob')");
    refused(dir / "loop", "is a symbolic link loop");
    refused(dir / "loop" / "config.json", "is a symbolic link loop");
    refused(dir / "fifo", "is a FIFO, not a regular file");
    refused("/dev/null", "is a character device, not a regular file");
    if (::geteuid() != 0) {  // root opens any file: the check needs an ordinary user
        fs::permissions(dir / "file.json", fs::perms::none);
        refused(dir / "file.json", "cannot open: Permission denied");
    }
}

TEST_CASE("paths: read_text_file refuses a file past its bound from its size, before reading it") {
    temp_dir dir;
    write_text(dir / "ten.txt", "0123456789");
    CHECK(detail::read_text_file(dir / "ten.txt", 10) == "0123456789");
    expect_error<dlm::file_error>([&] { (void)detail::read_text_file(dir / "ten.txt", 9); },
                                  {(dir / "ten.txt").string(), "is 10 bytes; text files dlm reads are at most 9 bytes"});
    // A sparse config.json one byte past the default bound of 256 MiB: refused at once (it was read
    // whole, 530 MB for one of 512 MiB, before its JSON was).
    write_text(dir / "config.json", "{");
    fs::resize_file(dir / "config.json", detail::max_text_file_bytes + 1);
    expect_error<dlm::file_error>([&] { (void)load_config(dir.path()); },
                                  {(dir / "config.json").string(), "is 268435457 bytes; text files dlm reads are at most 256 MiB"});
}

TEST_CASE("paths: a symbolic link loop is a dlm::file_error naming the path, never a std::filesystem error") {
    temp_dir dir;
    make_entries(dir);
    const fs::path loop = dir / "loop";
    expect_error<dlm::file_error>([&] { (void)load_diffusion_gemma_config(loop); }, {loop.string(), "symbolic link loop"});
    expect_error<dlm::file_error>([&] { (void)load_config(loop); }, {loop.string(), "symbolic link loop"});
    expect_error<dlm::file_error>([&] { (void)tokenizer::load(loop); }, {loop.string(), "symbolic link loop"});
    expect_error<dlm::file_error>([&] { (void)checkpoint::open(loop); }, {loop.string(), "symbolic link loop"});
    expect_error<dlm::file_error>([&] { (void)resolve_model_paths(loop); }, {loop.string(), "symbolic link loop"});
    write_text(dir / "model.safetensors.index.json", R"({"weight_map": {"a": "loop"}})");
    expect_error<dlm::tensor_error>(
        [&] { (void)checkpoint::open(dir.path()); },
        {"model.safetensors.index.json", "'a'", "shard 'loop' in '" + dir.path().string() + "', which is a symbolic link loop"});
}

TEST_CASE("paths: a shard the index names is refused with why it cannot be read: missing, a directory, a dangling link, a FIFO") {
    temp_dir dir;
    make_entries(dir);
    const auto refused = [&](const char* shard, std::string_view why) {
        write_text(dir / "model.safetensors.index.json", std::string(R"({"weight_map": {"a": ")") + shard + "\"}}");
        expect_error<dlm::tensor_error>([&] { (void)checkpoint::open(dir.path()); },
                                        {"model.safetensors.index.json", "tensor 'a'", std::string("shard '") + shard + "' in '" +
                                                                                          dir.path().string() + "', which " + std::string(why)});
    };
    refused("none.safetensors", "does not exist");
    refused("folder", "is a directory");
    refused("dangling", "is a symbolic link to a missing file");
    refused("fifo", "is a FIFO, not a regular file");
}

TEST_CASE("paths: an optional file that is there but not a readable regular file is named; one that is absent is skipped") {
    temp_dir dir;
    write_config(dir);
    const auto dangle = [&](const char* name) { fs::create_symlink("../blobs/missing-" + std::string(name), dir / name); };
    const auto dangling = [&](const char* name) { return (dir / name).string() + ": is a symbolic link to a missing file"; };
    SUBCASE("absent: skipped as before") {
        CHECK(load_config(dir.path()).vocab_size > 0);
        CHECK(detect_chat_format(dir.path()) == chat_format::none);
        expect_error<dlm::file_error>([&] { (void)checkpoint::open(dir.path()); }, {"folder holds neither model.safetensors nor"});
    }
    SUBCASE("generation_config.json: its EOS ids are not silently lost") {
        dangle("generation_config.json");
        expect_error<dlm::file_error>([&] { (void)load_config(dir.path()); }, {dangling("generation_config.json")});
        fs::remove(dir / "generation_config.json");
        fs::create_directory(dir / "generation_config.json");
        expect_error<dlm::file_error>([&] { (void)load_config(dir.path()); }, {(dir / "generation_config.json").string() + ": is a directory"});
    }
    SUBCASE("tokenizer.json: its end-of-turn tokens, and the tokenizer itself") {
        dangle("tokenizer.json");
        expect_error<dlm::file_error>([&] { (void)load_config(dir.path()); }, {dangling("tokenizer.json")});
        expect_error<dlm::file_error>([&] { (void)tokenizer::load(dir.path()); }, {dangling("tokenizer.json")});
        fs::remove(dir / "tokenizer.json");
        dangle("vocab.json");
        write_text(dir / "merges.txt", "#version: 0.2\n");
        expect_error<dlm::file_error>([&] { (void)tokenizer::load(dir.path()); }, {dangling("vocab.json")});
    }
    SUBCASE("tokenizer_config.json, chat_template.jinja, chat_template.json: not a base model without a template") {
        dangle("tokenizer_config.json");
        expect_error<dlm::file_error>([&] { (void)detect_chat_format(dir.path()); }, {dangling("tokenizer_config.json")});
        fs::remove(dir / "tokenizer_config.json");
        fs::create_directory(dir / "chat_template.jinja");
        expect_error<dlm::file_error>([&] { (void)detect_chat_format(dir.path()); }, {(dir / "chat_template.jinja").string() + ": is a directory"});
        fs::remove(dir / "chat_template.jinja");
        REQUIRE(::mkfifo((dir / "chat_template.json").c_str(), 0600) == 0);
        expect_error<dlm::file_error>([&] { (void)detect_chat_format(dir.path()); },
                                      {(dir / "chat_template.json").string() + ": is a FIFO, not a regular file"});
    }
    SUBCASE("model.safetensors: named, not passed over for an index the folder does not hold") {
        dangle("model.safetensors");
        expect_error<dlm::file_error>([&] { (void)checkpoint::open(dir.path()); }, {dangling("model.safetensors")});
        fs::remove(dir / "model.safetensors");
        REQUIRE(::mkfifo((dir / "model.safetensors").c_str(), 0600) == 0);
        expect_error<dlm::file_error>([&] { (void)checkpoint::open(dir.path()); },
                                      {(dir / "model.safetensors").string() + ": is a FIFO, not a regular file"});
    }
}

TEST_CASE("paths: a model path names its folder and the checkpoint to open, and any other file is refused") {
    temp_dir dir;
    make_entries(dir);
    const auto same = [](const model_paths& got, const fs::path& folder, const fs::path& ckpt) {
        CHECK(got.folder == folder);
        CHECK(got.checkpoint == ckpt);
    };
    write_text(dir / "config.json", "{}");
    write_text(dir / "finetuned.safetensors", "");
    write_text(dir / "model.safetensors.index.json", "{}");
    write_text(dir / "README.md", "# a model");
    same(resolve_model_paths(dir.path()), dir.path(), dir.path());
    same(resolve_model_paths(dir / "config.json"), dir.path(), dir.path());
    same(resolve_model_paths(dir / "finetuned.safetensors"), dir.path(), dir / "finetuned.safetensors");
    same(resolve_model_paths(dir / "model.safetensors.index.json"), dir.path(), dir / "model.safetensors.index.json");
    const auto refused = [&](const fs::path& p, std::string_view why) {
        expect_error<dlm::file_error>([&] { (void)resolve_model_paths(p); }, {p.string() + ": " + std::string(why)});
    };
    refused(dir / "README.md", "is a file, not a model folder, its config.json, a .safetensors file or a .safetensors.index.json");
    refused(dir / "file.json", "is a file, not a model folder");
    refused(dir / "no-such-model", "no such model folder or file");
    refused(dir / "dangling", "is a symbolic link to a missing file");
    refused(dir / "fifo", "is a FIFO, not a regular file");
}

}  // namespace test_io_paths
