# dlm_cli — what dlm-generate (examples/), dlm-eval and dlm-bench-batch (bench/), dlm-server (server/)
# and the Python package (python/) share: option parsing, flags to the preset registry's options
# (include/dlm/registry/), model loading, terminal output, trace pictures (headers), and every preset's
# engine over the CPU models (cli/engines.hpp), compiled once here in dlm_cli_engines instead of in
# each program. Included by each folder's list; `#include "cli/..."` from the source root.
if(TARGET dlm_cli)
  return()
endif()

# The model dlm-generate and dlm-eval use without -m (or $DLM_MODEL), and dlm-eval's default set.
set(DLM_DEFAULT_MODEL_DIR "${PROJECT_SOURCE_DIR}/models/cdlm" CACHE PATH
    "Model folder dlm-generate and dlm-eval use when neither -m nor DLM_MODEL names one")
set(DLM_DEFAULT_EVAL_DATA "${PROJECT_SOURCE_DIR}/tools/data/test.jsonl" CACHE FILEPATH
    "JSONL problem set dlm-eval uses without --data")

# The preset engines: two translation units (the transformer's presets, DiffusionGemma's), so that they
# build side by side; position-independent, as the Python module links them; compiled without waiting for
# the kernels' library, which they only link (OPTIMIZE_DEPENDENCIES).
add_library(dlm_cli_engines STATIC EXCLUDE_FROM_ALL ${PROJECT_SOURCE_DIR}/cli/engines_transformer.cpp
                                                    ${PROJECT_SOURCE_DIR}/cli/engines_gemma.cpp)
set_target_properties(dlm_cli_engines PROPERTIES POSITION_INDEPENDENT_CODE ON OPTIMIZE_DEPENDENCIES ON)
target_include_directories(dlm_cli_engines PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(dlm_cli_engines PUBLIC dlm::cpu_kernels)
target_compile_options(dlm_cli_engines PRIVATE $<$<CXX_COMPILER_ID:GNU,Clang>:-Wall -Wextra -Wpedantic>)

add_library(dlm_cli INTERFACE)
target_include_directories(dlm_cli INTERFACE ${PROJECT_SOURCE_DIR})
target_link_libraries(dlm_cli INTERFACE dlm_cli_engines dlm::cpu_kernels)
target_compile_definitions(dlm_cli INTERFACE DLM_DEFAULT_MODEL_DIR="${DLM_DEFAULT_MODEL_DIR}"
                                             DLM_DEFAULT_EVAL_DATA="${DLM_DEFAULT_EVAL_DATA}")
target_compile_options(dlm_cli INTERFACE $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU,Clang>>:-Wall -Wextra -Wpedantic>)

# PNG traces (--trace FILE.png) when libpng is installed (Debian: libpng-dev); SVG always.
find_package(PNG QUIET)
if(PNG_FOUND)
  target_link_libraries(dlm_cli INTERFACE PNG::PNG)
  target_compile_definitions(dlm_cli INTERFACE DLM_CLI_HAVE_PNG=1)
  message(STATUS "dlm: dlm-generate writes PNG traces (libpng ${PNG_VERSION_STRING})")
else()
  message(STATUS "dlm: libpng not found; dlm-generate writes SVG traces only (apt-get install libpng-dev for PNG)")
endif()
