# The CUDA backend (dlm::cuda): built whenever a CUDA compiler works (DLM_CUDA_COMPILER, set by the top
# level), so a CUDA build break fails the default build. One executable; one ctest per doctest suite,
# label "cuda". Without a usable GPU each exits with code 77, which ctest reports as skipped; the suite
# "host" needs no GPU and always runs. Compile-fail tests check, with nvcc, that the device decoder
# refuses policies it cannot run, with a sentence that says why.
if(NOT DLM_CUDA_COMPILER)
  return()
endif()

set(DLM_CUDA_SKIP_CODE 77)
# The five test_cuda*.cu files are one translation unit, test_cuda_suites.cu (its comment says why).
add_executable(test_cuda test_cuda_main.cpp test_cuda_suites.cu)
target_link_libraries(test_cuda PRIVATE dlm::cuda dlm::cpu_kernels doctest::doctest)
target_compile_definitions(test_cuda PRIVATE DLM_TEST_DATA="${DLM_TEST_DATA}" DLM_CUDA_SKIP_CODE=${DLM_CUDA_SKIP_CODE})
target_compile_options(test_cuda PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic>
                                         $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unknown-pragmas -diag-suppress=1675>)
# The suite's host code at -O0 in optimized builds (with DLM_TEST_OPTIMIZATION set: the suites' code is not
# the build's level, tests/CMakeLists.txt): it checks results, and the model's work runs in the kernels' library
# and on the GPU. nvcc's -O is the host compiler's level (the device code keeps ptxas' own), replaced in this
# directory's flags, where test_cuda is the only CUDA target (nvcc warns when -O is given twice).
# test_cuda_presets.cu (nvcc --time): host g++ 85 s at -O1, 59 s at -O0 (158 s at -O3 before).
if(DLM_TEST_OPTIMIZATION)
  foreach(_config IN ITEMS RELEASE RELWITHDEBINFO MINSIZEREL)
    string(REGEX REPLACE "(^| )-O[0-9s]( |$)" "\\1-O0\\2" CMAKE_CUDA_FLAGS_${_config} "${CMAKE_CUDA_FLAGS_${_config}}")
  endforeach()
endif()
target_compile_options(test_cuda PRIVATE $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CONFIG:Release,RelWithDebInfo,MinSizeRel>>:${DLM_TEST_OPTIMIZATION}>)

foreach(_suite IN ITEMS host philox sampling selection gemm rows attention parity cache presets errors)
  add_test(NAME "test_cuda: ${_suite}" COMMAND test_cuda --test-suite=${_suite})
  set_tests_properties("test_cuda: ${_suite}" PROPERTIES SKIP_RETURN_CODE ${DLM_CUDA_SKIP_CODE} LABELS cuda)
endforeach()

# The model through the other GEMM paths (gemm.cuh): the same parity with the CPU model.
foreach(_path IN ITEMS lt skinny tc)
  add_test(NAME "test_cuda: parity (DLM_CUDA_GEMM=${_path})" COMMAND test_cuda --test-suite=parity)
  set_tests_properties("test_cuda: parity (DLM_CUDA_GEMM=${_path})" PROPERTIES SKIP_RETURN_CODE ${DLM_CUDA_SKIP_CODE} LABELS cuda
                       ENVIRONMENT DLM_CUDA_GEMM=${_path})
endforeach()

# The debug mode (every launch synchronised and checked) on the suite that runs every kernel of a
# forward and of device-side decoding.
add_test(NAME "test_cuda: cache (DLM_CUDA_SYNC=1)" COMMAND test_cuda --test-suite=cache)
set_tests_properties("test_cuda: cache (DLM_CUDA_SYNC=1)" PROPERTIES SKIP_RETURN_CODE ${DLM_CUDA_SKIP_CODE} LABELS cuda ENVIRONMENT DLM_CUDA_SYNC=1)

foreach(_case IN ITEMS "cuda_exact_cache_bidirectional|an exact KV cache needs a mask under which committed keys and values are final"
                       "cuda_unsupported_schedule|this schedule has no device implementation"
                       "cuda_unsupported_sampler|this sampler has no device implementation"
                       "cuda_block_causal_preset|the hook dlm::cuda::device_schedule<Schedule> (prepare on the host, select on the device) is missing"
                       "cuda_revising_schedule|a revising schedule (one with revise and block_done, e.g. llada21_schedule) runs on the host decoder")
  string(REPLACE "|" ";" _parts "${_case}")
  list(GET _parts 0 _name)
  list(GET _parts 1 _expect)
  add_test(NAME "compile_fail: ${_name}"
           COMMAND ${CMAKE_COMMAND} -DNVCC=${CMAKE_CUDA_COMPILER} -DSOURCE=${CMAKE_CURRENT_SOURCE_DIR}/compile_fail/${_name}.cu
                   -DINCLUDE=${PROJECT_SOURCE_DIR}/include "-DEXPECT=${_expect}" -P ${CMAKE_CURRENT_SOURCE_DIR}/compile_fail/check_cuda.cmake)
  set_tests_properties("compile_fail: ${_name}" PROPERTIES LABELS cuda COST 10)  # about 10 s of nvcc: started early
endforeach()
