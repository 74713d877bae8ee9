# libFuzzer targets (tests/fuzz/fuzz_*.cpp): every parser of untrusted input, built with clang++
# -fsanitize=fuzzer,address,undefined whatever compiler builds the rest of the project, by custom
# commands that call clang++ directly (the targets only need dlm's headers and nlohmann_json).
# Each target gets a ctest test "fuzz: <target>" (label "fuzz") that runs it for DLM_FUZZ_SECONDS
# from its committed seed corpus tests/fuzz/corpus/<target>/ (DLM_FUZZ_SECONDS 0: replay the seeds
# once). Without a clang++ that links -fsanitize=fuzzer (Debian: clang, libclang-rt-14-dev), the
# tests are registered and report themselves skipped. docs/fuzzing.md has the details.

# DLM_BUILD_FUZZ OFF leaves them out: the asan preset does, since the targets carry their own sanitizers
# whatever the preset, and the default workflow already builds and runs them.
option(DLM_BUILD_FUZZ "Build the libFuzzer targets and register their tests" ON)
if(NOT DLM_BUILD_FUZZ)
  return()
endif()
set(DLM_FUZZ_SECONDS 10 CACHE STRING "Seconds each fuzz target runs under ctest (0: replay the seed corpus only)")
find_program(DLM_FUZZ_CXX NAMES clang++ clang++-19 clang++-18 clang++-17 clang++-16 clang++-15 clang++-14
             DOC "clang++ with libFuzzer, for the fuzz targets")

set(_fuzz_src ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)
set(_fuzz_bin ${CMAKE_CURRENT_BINARY_DIR}/fuzz)
file(GLOB _fuzz_sources CONFIGURE_DEPENDS ${_fuzz_src}/fuzz_*.cpp)
set(_fuzz_targets)
foreach(_source IN LISTS _fuzz_sources)
  get_filename_component(_name ${_source} NAME_WE)
  string(REGEX REPLACE "^fuzz_" "" _name ${_name})
  list(APPEND _fuzz_targets ${_name})
endforeach()

# Can DLM_FUZZ_CXX build and link a libFuzzer target? Probed once per compiler.
set(_fuzz_flags -std=c++20 -g1 -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)  # -g1: line tables for the crash reports
set(_fuzz_skip_reason "")
if(NOT DLM_HAVE_CPU)
  set(_fuzz_skip_reason "nlohmann_json was not found")
elseif(NOT DLM_FUZZ_CXX)
  set(_fuzz_skip_reason "no clang++ found (Debian: apt-get install clang libclang-rt-14-dev)")
else()
  if(NOT DLM_FUZZ_CXX STREQUAL _DLM_FUZZ_PROBED)
    set(_probe ${_fuzz_bin}/probe)
    file(WRITE ${_probe}.cpp "#include <cstddef>\n#include <cstdint>\n"
                             "extern \"C\" int LLVMFuzzerTestOneInput(const std::uint8_t*, std::size_t) { return 0; }\n")
    execute_process(COMMAND ${DLM_FUZZ_CXX} ${_fuzz_flags} ${_probe}.cpp -o ${_probe}
                    RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
    if(_rc EQUAL 0)
      set(_works ON)
    else()
      set(_works OFF)
    endif()
    set(_DLM_FUZZ_PROBED "${DLM_FUZZ_CXX}" CACHE INTERNAL "")
    set(_DLM_FUZZ_WORKS ${_works} CACHE INTERNAL "")
  endif()
  if(NOT _DLM_FUZZ_WORKS)
    set(_fuzz_skip_reason "${DLM_FUZZ_CXX} cannot link -fsanitize=fuzzer (Debian: apt-get install libclang-rt-14-dev)")
  endif()
endif()

if(_fuzz_skip_reason)
  message(STATUS "dlm: fuzz targets not built: ${_fuzz_skip_reason}")
  foreach(_name IN LISTS _fuzz_targets)
    add_test(NAME "fuzz: ${_name}" COMMAND ${CMAKE_COMMAND} -E echo "skipped: ${_fuzz_skip_reason}")
    set_tests_properties("fuzz: ${_name}" PROPERTIES LABELS fuzz SKIP_REGULAR_EXPRESSION "skipped: ")
  endforeach()
  return()
endif()

# nlohmann_json's headers; the compiler's own system folders are left out (naming them with -I would
# reorder the standard library's #include_next chain).
set(_fuzz_includes -I${PROJECT_SOURCE_DIR}/include)
get_target_property(_json_dirs nlohmann_json::nlohmann_json INTERFACE_INCLUDE_DIRECTORIES)
foreach(_dir IN LISTS _json_dirs)
  if(_dir AND NOT _dir MATCHES "^/usr(/local)?/include/?$")
    list(APPEND _fuzz_includes -isystem ${_dir})
  endif()
endforeach()

set(_fuzz_exes)
foreach(_name IN LISTS _fuzz_targets)
  set(_exe ${_fuzz_bin}/fuzz_${_name})
  add_custom_command(OUTPUT ${_exe}
                     COMMAND ${DLM_FUZZ_CXX} ${_fuzz_flags} ${_fuzz_includes}
                             "-DDLM_FUZZ_TOKENIZER=\"${DLM_TEST_DATA}/tokenizer/tokenizer.json\""
                             -MD -MF ${_exe}.d ${_fuzz_src}/fuzz_${_name}.cpp -o ${_exe}
                     DEPENDS ${_fuzz_src}/fuzz_${_name}.cpp
                     DEPFILE ${_exe}.d
                     COMMENT "Building fuzz target fuzz_${_name} with ${DLM_FUZZ_CXX}"
                     VERBATIM)
  list(APPEND _fuzz_exes ${_exe})

  set(_extra)
  if(_name MATCHES "^(safetensors|config|tokenizer_json)$")
    list(APPEND _extra -DDICT=${_fuzz_src}/json.dict)
  elseif(EXISTS ${_fuzz_src}/${_name}.dict)
    list(APPEND _extra -DDICT=${_fuzz_src}/${_name}.dict)
  endif()
  if(_name STREQUAL "tokenizer_json")
    list(APPEND _extra -DMAX_LEN=8192)
  endif()
  add_test(NAME "fuzz: ${_name}"
           COMMAND ${CMAKE_COMMAND} -DFUZZER=${_exe} -DSECONDS=${DLM_FUZZ_SECONDS} -DSEEDS=${_fuzz_src}/corpus/${_name}
                   -DWORK=${_fuzz_bin}/${_name} ${_extra} -P ${_fuzz_src}/run_fuzz.cmake)
  math(EXPR _timeout "${DLM_FUZZ_SECONDS} + 300")
  math(EXPR _cost "${DLM_FUZZ_SECONDS} + 2")  # started early by ctest (tests/python.cmake says why)
  set_tests_properties("fuzz: ${_name}" PROPERTIES LABELS fuzz TIMEOUT ${_timeout} COST ${_cost})
endforeach()
add_custom_target(dlm_fuzz_targets ALL DEPENDS ${_fuzz_exes})
