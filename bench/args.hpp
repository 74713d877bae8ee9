// bench/args.hpp — the command line of the benchmark programs (dlm-bench-forward, dlm-bench-quant,
// dlm-bench-batch, dlm-bench-prompt-cache, dlm-make-checkpoint, dlm-dump-logits): flags walked in
// order, each value read and bounded by cli/values.hpp, so that a bad one is refused as dlm-generate
// refuses it (dlm::invalid_parameter naming the flag), and one `main` that prints it.
//
//   int main(int argc, char** argv) {
//       return dlm::bench::run_main("dlm-bench-x", usage_text(), [&] {
//           dlm::bench::args a(argc, argv);
//           while (a.next()) {
//               if (a.is("--reps")) reps = a.integer(1, 1000);
//               else a.unknown();
//           }
//           ...
//           return 0;
//       });
//   }
//
// Exit status, as dlm-generate's: 0 success (and -h / --help, the usage on stdout), 1 an error while
// running, 2 a bad flag or value (its message, then the usage, on stderr).
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <dlm/core/error.hpp>

#include "../cli/values.hpp"

namespace dlm::bench {

/// Thrown by args::next() on -h / --help; run_main prints the usage on stdout and exits 0.
struct help_requested {};

/// The arguments after the program's name, read flag by flag.
class args {
public:
    args(int argc, char** argv) : argv_(argv + 1, argv + argc) {}

    /// Moves to the next flag; false once every argument is read. Throws help_requested on -h / --help.
    bool next() {
        if (at_ >= argv_.size()) return false;
        flag_ = argv_[at_++];
        if (flag_ == "-h" || flag_ == "--help") throw help_requested{};
        return true;
    }
    [[nodiscard]] const std::string& flag() const noexcept { return flag_; }
    /// Whether the flag is `name` (or its other spelling `alias`, "-t" for "--threads").
    [[nodiscard]] bool is(std::string_view name, std::string_view alias = {}) const { return flag_ == name || (!alias.empty() && flag_ == alias); }

    /// The flag's value: the next argument.
    std::string value() {
        if (at_ >= argv_.size()) cli::detail::bad(flag_, "needs a value");
        return argv_[at_++];
    }
    /// The value as a file or folder name: not empty (an empty -m would mean "no model" in silence).
    std::string path() {
        return cli::detail::non_empty(flag_, value(), "a path");
    }
    /// The value as a whole number in [lo, hi].
    template <class Int = long long>
    Int integer(Int lo, Int hi) { return cli::detail::to_integer<Int>(flag_, value(), lo, hi); }
    /// The value as a number in [lo, hi].
    double number(double lo, double hi) { return cli::detail::in_range(flag_, value(), lo, hi, false); }
    /// The value as a comma-separated list of whole numbers, each in [lo, hi] ("1,8,32").
    template <class Int = long long>
    std::vector<Int> integers(Int lo, Int hi) {
        const std::string v = value();
        std::vector<Int> out;
        for (const std::string_view part : cli::detail::split_commas(v)) out.push_back(cli::detail::to_integer<Int>(flag_, part, lo, hi));
        return out;
    }
    /// The value as a comma-separated list of names, each non-empty.
    std::vector<std::string> names() {
        const std::string v = value();
        std::vector<std::string> out;
        for (const std::string_view part : cli::detail::split_commas(v)) {
            if (part.empty()) cli::detail::bad(flag_, "has an empty item in " + cli::detail::quoted(v));
            out.emplace_back(part);
        }
        return out;
    }
    /// Refuses the flag: no program reads it.
    [[noreturn]] void unknown() const { cli::detail::bad(flag_, "unknown flag (see --help)"); }

private:
    std::vector<std::string> argv_;
    std::size_t at_ = 0;
    std::string flag_;
};

/// Runs `body()` (its return value is the exit status) and reports what it throws: help_requested
/// (the usage on stdout, 0), a dlm::invalid_parameter naming a flag (the message and the usage on
/// stderr, 2), any other error (the message, 1).
template <class Body>
int run_main(const char* program, const std::string& usage, Body body) {
    try {
        return body();
    } catch (const help_requested&) {
        std::fputs(usage.c_str(), stdout);
        return 0;
    } catch (const invalid_parameter& e) {
        std::fprintf(stderr, "%s: %s\n", program, e.what());
        if (!e.parameter().starts_with('-')) return 1;  // a library parameter, found while running
        std::fputs(usage.c_str(), stderr);
        return 2;
    } catch (const error& e) {
        std::fprintf(stderr, "%s: %s\n", program, e.what());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: error: %s\n", program, e.what());
    }
    return 1;
}

}  // namespace dlm::bench
