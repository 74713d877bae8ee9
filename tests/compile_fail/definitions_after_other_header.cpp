// Must NOT compile: the file that compiles dlm::cpu's separate parts (core/separate.hpp) includes a dlm
// header before <dlm/cpu/kernels/definitions.hpp>, which would have read the tokenizer as declarations
// only and left its definitions out of the program. The ctest entry checks that the error says so.
#define DLM_CPU_KERNELS_SEPARATE 1
#include <dlm/io/tokenizer.hpp>
#include <dlm/cpu/kernels/definitions.hpp>

int main() {}
