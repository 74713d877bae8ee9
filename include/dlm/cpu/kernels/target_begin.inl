// dlm/cpu/kernels/target_begin.inl — compiles what follows, up to target_end.inl, for the
// instruction set DLM_KERNEL_TARGET names ("avx2,fma,f16c", ...), whatever the build's -march:
// the code runs only after dispatch.hpp checked that the CPU has it.
#ifndef DLM_KERNEL_PRAGMA
#define DLM_KERNEL_PRAGMA_(x) _Pragma(#x)
#define DLM_KERNEL_PRAGMA(x) DLM_KERNEL_PRAGMA_(x)
#endif
#if defined(__clang__)
DLM_KERNEL_PRAGMA(clang attribute push(__attribute__((target(DLM_KERNEL_TARGET))), apply_to = function))
#elif defined(__GNUC__)
#pragma GCC push_options
DLM_KERNEL_PRAGMA(GCC target(DLM_KERNEL_TARGET))
// -O3's SLP vectorizer turns the micro kernels' per-row broadcasts of A into one vector load and
// sixteen vpermd shuffles on the FMA port: 35 % slower. The kernels are written for -O2's code.
#pragma GCC optimize("O2")
#endif
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"  // vector arguments of inline kernels never cross an ABI boundary
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // _mm512_undefined_ps inside the intrinsics headers
#pragma GCC diagnostic ignored "-Wuninitialized"        // the same, where the quantized kernels inline vcvtph2ps
#endif
#endif
