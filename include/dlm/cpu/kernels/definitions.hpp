// dlm/cpu/kernels/definitions.hpp — compiles dlm::cpu's separately compiled parts once for a whole
// program: the CPU kernels, the tokenizer's load/encode/decode and the CPU models' loaders
// (core/separate.hpp). Include it from exactly one translation unit, before any other dlm header, and
// define DLM_CPU_KERNELS_SEPARATE for every translation unit of the program (that one too), so the
// others only declare them (dispatch.hpp, core/separate.hpp):
//
//   // dlm_kernels.cpp, compiled with -DDLM_CPU_KERNELS_SEPARATE like the rest of the program
//   #include <dlm/cpu/kernels/definitions.hpp>
//
// With CMake, linking dlm::cpu_kernels instead of dlm::cpu does both. Without it, every translation
// unit that includes dlm's CPU model compiles all the kernels (four instruction sets, every weight
// type) and the loaders it calls: correct, only slow to build.
#pragma once

#if !defined(DLM_CPU_KERNELS_SEPARATE)
#error "dlm/cpu/kernels/definitions.hpp: define DLM_CPU_KERNELS_SEPARATE for every translation unit of the program, this one included"
#endif
#if defined(DLM_SEPARATE_HPP_INCLUDED)
#error "dlm/cpu/kernels/definitions.hpp: include it before any other dlm header (the ones before it were read as declarations only)"
#else
#define DLM_SEPARATE_DEFINITIONS 1

#include "all.hpp"
#include "../../io/tokenizer.hpp"
#include "../diffusion_gemma.hpp"
#include "../transformer.hpp"
#endif
