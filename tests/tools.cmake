# The Python training code (tools/train/selftest.py: masks, block rows, export round trip, decoders,
# disjoint data splits; about ten seconds). It needs Debian's python3-torch and the tokenizers and
# safetensors wheels, in build/venv-train (tools/train/README.md) or else in /usr/bin/python3; without
# them the test reports itself as skipped.
# Registered once, in the builds without sanitizers (the Python code does not change with them).
if(NOT CMAKE_CXX_FLAGS MATCHES "sanitize")
  add_test(NAME "tools: training selftest"
           COMMAND sh -c "py=/usr/bin/python3; [ -x build/venv-train/bin/python ] && py=build/venv-train/bin/python; $py -c 'import torch, tokenizers, safetensors' 2>/dev/null || { echo \"skipped: $py lacks torch, tokenizers or safetensors (see tools/train/README.md)\"; exit 77; }; OPENBLAS_NUM_THREADS=1 exec $py tools/train/selftest.py"
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties("tools: training selftest" PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()

# tools/ncu_kernels.py (the GPU check's ncu phase): a capture of an H200 run, cut to seven launches, gives
# one line per kernel and launch shape with the launches' mean and least time; a file that is no capture
# is refused with a sentence.
if(NOT CMAKE_CXX_FLAGS MATCHES "sanitize")
  find_package(Python3 COMPONENTS Interpreter QUIET)
  if(Python3_Interpreter_FOUND)
    add_test(NAME "tools: ncu_kernels.py sums a capture per kernel and launch shape"
             COMMAND ${Python3_EXECUTABLE} tools/ncu_kernels.py tests/data/ncu/capture.csv WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties("tools: ncu_kernels.py sums a capture per kernel and launch shape" PROPERTIES
                         PASS_REGULAR_EXPRESSION "rms_norm<__nv_bfloat16, 4> +\\(384, 1, 1\\) +\\(256, 1, 1\\) +3 +5\\.44 +5\\.15\n.*qkv_epilogue<float> +\\(384, 36, 1\\) +\\(64, 1, 1\\) +1 +11\\.58.*\n.*rms_norm<__nv_bfloat16, 4> +\\(1, 1, 1\\) +\\(256, 1, 1\\) +2 +4\\.78 +4\\.70")
    # A JSON number "final" (40, 40.0) is its canonical string ("40"), as dlm-eval reads it (cli/score.hpp;
    # test_cli's "cli: a numeric final scores as tools/score.py scores it" reads the same files).
    add_test(NAME "tools: score.py scores a numeric final as dlm-eval does"
             COMMAND ${Python3_EXECUTABLE} tools/score.py --ref tests/data/cli/numeric_final.jsonl --pred tests/data/cli/numeric_final_pred.jsonl
             WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties("tools: score.py scores a numeric final as dlm-eval does" PROPERTIES PASS_REGULAR_EXPRESSION "exact match: 4/4 ")
    # Unicode digits and spaces (٣, ４２.５, 𝟗, a no-break space, U+001C) read as Python's \d, \s and float()
    # read them; test_cli's "cli: Unicode digits and spaces ..." checks dlm-eval's extraction on the same files.
    add_test(NAME "tools: score.py reads Unicode digits and spaces as dlm-eval does"
             COMMAND ${Python3_EXECUTABLE} tools/score.py --ref tests/data/cli/unicode_final.jsonl --pred tests/data/cli/unicode_final_pred.jsonl
             WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties("tools: score.py reads Unicode digits and spaces as dlm-eval does" PROPERTIES PASS_REGULAR_EXPRESSION "exact match: 8/8 ")
    add_test(NAME "tools: ncu_kernels.py refuses a file that holds no capture"
             COMMAND ${Python3_EXECUTABLE} tools/ncu_kernels.py README.md WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties("tools: ncu_kernels.py refuses a file that holds no capture" PROPERTIES
                         PASS_REGULAR_EXPRESSION "README.md: no ncu CSV header")
  endif()
endif()

# tools/doc_snippets.py: every ```cpp block of README.md and docs/*.md compiles against the headers as they
# are (g++ -fsyntax-only with the examples' include flags from compile_commands.json; the CUDA blocks with
# nvcc where the build has one, else reported as skipped), so the docs move with the API. Blocks with the
# same includes share a compiler run: about 40 s of one core with nvcc, 20 s without. Registered once, in the
# builds without sanitizers (what the docs say does not change with them).
if(NOT CMAKE_CXX_FLAGS MATCHES "sanitize")
  find_package(Python3 COMPONENTS Interpreter QUIET)
  if(Python3_Interpreter_FOUND)
    if(DLM_CUDA_COMPILER)
      set(_dlm_doc_cuda --nvcc ${CMAKE_CUDA_COMPILER})
    else()
      set(_dlm_doc_cuda --no-cuda)
    endif()
    set(_dlm_doc_test "docs: every C++ block of README.md and docs/*.md compiles against the headers")
    add_test(NAME "${_dlm_doc_test}"
             COMMAND ${Python3_EXECUTABLE} tools/doc_snippets.py --cxx ${CMAKE_CXX_COMPILER} --build ${PROJECT_BINARY_DIR} ${_dlm_doc_cuda}
             WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties("${_dlm_doc_test}" PROPERTIES LABELS docs TIMEOUT 300 COST 10)  # about 40 s: started early
  endif()
endif()

# tools/doc_reference.py: the reference tables of the docs against the code, both ways: each program's flags (its --help,
# the one flag table of cli/options.hpp) against docs/cli.md, the flags of every command line README.md and docs/*.md
# write (dlm's programs, the benchmarks, the Python scripts), the metrics /metrics exports with their types against
# docs/server.md, the error classes against docs/errors.md and docs/python.md, the DLM_* environment variables, the
# preset names, dlm-server's request fields (docs/server.md) and dlm-eval's --json keys (docs/cli.md). A second; no model, no network. Registered once, in the builds without sanitizers, as the C++ blocks.
if(NOT CMAKE_CXX_FLAGS MATCHES "sanitize")
  find_package(Python3 COMPONENTS Interpreter QUIET)
  if(Python3_Interpreter_FOUND)
    set(_dlm_doc_programs)
    if(DLM_HAVE_CPU AND DLM_BUILD_EXAMPLES)
      list(APPEND _dlm_doc_programs --generate $<TARGET_FILE:dlm-generate>)
    endif()
    if(DLM_HAVE_CPU AND DLM_BUILD_BENCH)
      list(APPEND _dlm_doc_programs --eval $<TARGET_FILE:dlm-eval>)
    endif()
    if(TARGET dlm-server)
      list(APPEND _dlm_doc_programs --server $<TARGET_FILE:dlm-server>)
    endif()
    add_test(NAME "docs: the reference tables match the code, both ways"
             COMMAND ${Python3_EXECUTABLE} tools/doc_reference.py ${_dlm_doc_programs} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties("docs: the reference tables match the code, both ways" PROPERTIES LABELS docs TIMEOUT 60)
  endif()
endif()
