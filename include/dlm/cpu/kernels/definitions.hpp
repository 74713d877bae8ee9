// dlm/cpu/kernels/definitions.hpp — compiles dlm's CPU kernels once for a whole program. Include it
// from exactly one translation unit, and define DLM_CPU_KERNELS_SEPARATE for every translation unit
// of the program (that one too), so the others only declare them (dispatch.hpp):
//
//   // dlm_kernels.cpp, compiled with -DDLM_CPU_KERNELS_SEPARATE like the rest of the program
//   #include <dlm/cpu/kernels/definitions.hpp>
//
// With CMake, linking dlm::cpu_kernels instead of dlm::cpu does both. Without it, every translation
// unit that includes dlm's CPU model compiles all the kernels (four instruction sets, every weight
// type): correct, only slow to build.
#pragma once

#if !defined(DLM_CPU_KERNELS_SEPARATE)
#error "dlm/cpu/kernels/definitions.hpp: define DLM_CPU_KERNELS_SEPARATE for every translation unit of the program, this one included"
#endif

#include "all.hpp"
