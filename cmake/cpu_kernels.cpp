// The translation unit of dlm::cpu_kernels (CMakeLists.txt): dlm's CPU kernels, compiled once for
// every program of the build that links that target instead of dlm::cpu.
#include <dlm/cpu/kernels/definitions.hpp>
