# cmake -DNVCC=<nvcc> -DSOURCE=<file.cu> -DINCLUDE=<dir> -DEXPECT=<text> -P check_cuda.cmake
# Passes when nvcc rejects SOURCE and its diagnostics contain EXPECT (check.cmake, for CUDA sources).
# The sources include only dlm's own headers (no Eigen, no cuBLAS), so the front end stops early.
execute_process(COMMAND ${NVCC} -std=c++20 -arch=sm_90 -I${INCLUDE} -c ${SOURCE} -o ${CMAKE_CURRENT_BINARY_DIR}/compile_fail_cuda.o
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(REMOVE ${CMAKE_CURRENT_BINARY_DIR}/compile_fail_cuda.o)
if(rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must be rejected")
endif()
string(FIND "${out}${err}" "${EXPECT}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${SOURCE} was rejected, but the diagnostics do not say \"${EXPECT}\":\n${out}${err}")
endif()
message(STATUS "rejected as expected: ${EXPECT}")
