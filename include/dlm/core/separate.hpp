// dlm/core/separate.hpp — which of dlm's non-template entry points a translation unit defines.
//
// The CPU kernels, the tokenizer's load/encode/decode and the CPU models' loaders are the code that
// costs most to compile and that no template parameter changes (the tokenizer alone: 19 s of g++ -O3
// in every program that decodes text). Header-only use defines them inline in every translation unit
// that calls them. A program that defines DLM_CPU_KERNELS_SEPARATE for all its translation units
// (CMake: link dlm::cpu_kernels) compiles them once, in the one translation unit that includes
// <dlm/cpu/kernels/definitions.hpp>; every other one sees their declarations only.
//
// A header with such an entry point declares it in its class, and defines it after the class as
//
//   #if DLM_SEPARATE_BODIES
//   DLM_SEPARATE_INLINE tokenizer tokenizer::load(const std::filesystem::path& path) { ... }
//   #endif
#pragma once

#if defined(DLM_CPU_KERNELS_SEPARATE) && !defined(DLM_SEPARATE_DEFINITIONS)
#define DLM_SEPARATE_BODIES 0  // declarations only: the definitions come from the program's one definitions TU
#else
#define DLM_SEPARATE_BODIES 1
#endif

#if defined(DLM_CPU_KERNELS_SEPARATE)
#define DLM_SEPARATE_INLINE  // defined once, in the definitions TU
#else
#define DLM_SEPARATE_INLINE inline  // header-only: in every translation unit that uses it
#endif

#define DLM_SEPARATE_HPP_INCLUDED 1
