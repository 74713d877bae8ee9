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
