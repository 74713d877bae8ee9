// The test programs' main: doctest's, except that a run whose filters select no test case fails. ctest runs
// each case by name (suites/discover.cmake); a name the filter cannot match would otherwise pass without
// running anything, as five cases whose names hold a semicolon once did.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string_view>

namespace {

unsigned cases_selected = 0;  // by the run's filters, whether they then passed, failed or were skipped
bool run_ended = false;

struct selected_counter : doctest::IReporter {
    explicit selected_counter(const doctest::ContextOptions&) {}
    void report_query(const doctest::QueryData&) override {}
    void test_run_start() override {}
    void test_run_end(const doctest::TestRunStats& s) override {
        cases_selected = s.numTestCasesPassingFilters;
        run_ended = true;
    }
    void test_case_start(const doctest::TestCaseData&) override {}
    void test_case_reenter(const doctest::TestCaseData&) override {}
    void test_case_end(const doctest::CurrentTestCaseStats&) override {}
    void test_case_exception(const doctest::TestCaseException&) override {}
    void subcase_start(const doctest::SubcaseSignature&) override {}
    void subcase_end() override {}
    void log_assert(const doctest::AssertData&) override {}
    void log_message(const doctest::MessageData&) override {}
    void test_case_skipped(const doctest::TestCaseData&) override {}
};

}  // namespace

DOCTEST_REGISTER_LISTENER("selected_counter", 1, selected_counter);

int main(int argc, char** argv) {
    doctest::Context context(argc, argv);
    const int status = context.run();
    if (context.shouldExit() || !run_ended) return status;  // --help, --list-test-cases and other queries
    bool filtered = false;
    for (int i = 1; i < argc; ++i) filtered = filtered || std::string_view(argv[i]).starts_with("--test-case=");
    if (status == 0 && filtered && cases_selected == 0) {
        std::fprintf(stderr, "no test case matches the filters: a test that runs nothing cannot pass\n");
        return 1;
    }
    return status;
}
