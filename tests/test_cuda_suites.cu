// test_cuda's CUDA suites, compiled as one translation unit. Each file instantiates the CUDA transformer's
// kernels, its GEMM paths and the device decoder for the same models; compiled apart, nvcc built those
// instantiations once per file: 200 core-seconds for the five on the 2-core development host (2026-12-07,
// test_cuda's flags, `/usr/bin/time nvcc ...` one after another: test_cuda_presets.cu 69 s, test_cuda.cu 57 s,
// test_cuda_attention.cu 42 s, test_cuda_kernels.cu 27 s, test_cuda_rows.cu 5.5 s), against 88 s for this
// one in the same conditions. The files stay suites of their own (each a doctest suite, docs/cuda.md's
// table); a new CUDA test file is included here.
#include "test_cuda.cu"
#include "test_cuda_presets.cu"
#include "test_cuda_kernels.cu"
#include "test_cuda_rows.cu"
#include "test_cuda_attention.cu"
