// dlm/cuda/cuda.cuh — the CUDA backend in one include: the transformer (transformer.cuh) and device-side
// decoding (device_decoder.cuh). Compile with nvcc (C++20); link dlm::cuda (cuBLAS, the CUDA runtime).
// docs/cuda.md describes the architecture.
#pragma once

#include "device_decoder.cuh"
#include "transformer.cuh"
