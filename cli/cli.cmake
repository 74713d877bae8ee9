# dlm_cli — the headers shared by dlm-generate (examples/), dlm-eval (bench/) and dlm-server (server/):
# option parsing, flags to the preset registry's options (include/dlm/registry/), model loading,
# terminal output, trace pictures. Included by each folder's list; `#include "cli/..."` from the
# source root.
if(TARGET dlm_cli)
  return()
endif()

# The model dlm-generate and dlm-eval use without -m (or $DLM_MODEL), and dlm-eval's default set.
set(DLM_DEFAULT_MODEL_DIR "${PROJECT_SOURCE_DIR}/models/cdlm" CACHE PATH
    "Model folder dlm-generate and dlm-eval use when neither -m nor DLM_MODEL names one")
set(DLM_DEFAULT_EVAL_DATA "${PROJECT_SOURCE_DIR}/tools/data/test.jsonl" CACHE FILEPATH
    "JSONL problem set dlm-eval uses without --data")

add_library(dlm_cli INTERFACE)
target_include_directories(dlm_cli INTERFACE ${PROJECT_SOURCE_DIR})
target_link_libraries(dlm_cli INTERFACE dlm::cpu_kernels)
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
