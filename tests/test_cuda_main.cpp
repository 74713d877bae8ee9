// The doctest main of the CUDA tests. Without a usable CUDA device (no driver, no GPU, or a driver older
// than the runtime) the executable prints why and exits with dlm_cuda_skip_code, which tests/cuda.cmake
// registers as SKIP_RETURN_CODE, so ctest reports the tests as skipped, not passed. The suite "host"
// needs no device and always runs.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>

#include <cuda_runtime.h>

#ifndef DLM_CUDA_SKIP_CODE
#define DLM_CUDA_SKIP_CODE 77
#endif

int main(int argc, char** argv) {
    int devices = 0;
    const cudaError_t status = cudaGetDeviceCount(&devices);
    if (status != cudaSuccess || devices == 0) {
        bool host_only = false;
        for (int i = 1; i < argc; ++i)
            if (std::strcmp(argv[i], "--test-suite=host") == 0 || std::strcmp(argv[i], "-ts=host") == 0) host_only = true;
        if (!host_only) {
            std::printf("%s: no CUDA device (%s): skipped\n", argv[0],
                        status != cudaSuccess ? cudaGetErrorString(status) : "cudaGetDeviceCount found none");
            return DLM_CUDA_SKIP_CODE;
        }
    }
    doctest::Context context(argc, argv);
    return context.run();
}
