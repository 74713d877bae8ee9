// Fuzz target: the command line of dlm-generate and dlm-eval -> dlm::cli::parse_args
// (cli/options.hpp).
//
// Input: byte 0 picks the program (bit 0: dlm-eval), the rest is the argument list, arguments
// separated by NUL bytes (as argv holds them). Any malformed flag or value must be a
// dlm::invalid_parameter naming the flag; accepted options must be ones the programs can use.
#include <string_view>
#include <vector>

#include "../../cli/options.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using dlm_fuzz::fuzz_check;
    if (size == 0) return 0;
    const auto prog = data[0] & 1 ? dlm::cli::program::eval : dlm::cli::program::generate;
    const std::string_view text = dlm_fuzz::as_text(data + 1, size - 1);
    std::vector<std::string_view> args;
    for (std::size_t begin = 0; begin <= text.size();) {
        const std::size_t end = std::min(text.find('\0', begin), text.size());
        args.push_back(text.substr(begin, end - begin));
        begin = end + 1;
    }
    if (text.empty()) args.clear();
    dlm::cli::options o;
    try {
        o = dlm::cli::parse_args(args, prog);
    } catch (const dlm::invalid_parameter& e) {
        fuzz_check(!e.parameter().empty(), "a refused command line names no flag");
        return 0;
    }
    fuzz_check(o.prog == prog, "parse_args returned options of the other program");
    if (o.help) return 0;
    fuzz_check(prog != dlm::cli::program::generate || o.was_given("--prompt"), "dlm-generate accepted a command line without -p");
    fuzz_check(!o.gen_length || *o.gen_length >= 1, "accepted a gen length < 1");
    fuzz_check(o.batch >= 1 && o.limit >= 0, "accepted a batch < 1 or a negative limit");
    return 0;
}
