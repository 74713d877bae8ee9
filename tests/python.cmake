# dlm's Python package (python/, docs/python.md) through pytest (tests/python/): one step builds the package with
# pip into a venv (scripts/setup-venv.sh) and every case reuses it (a ctest fixture); the cases compare the answers
# with dlm-generate's, stream, run schedules written in Python, check the typed exceptions and watch the resident
# memory. Without PyPI the install step and the cases report themselves skipped, saying why.
# Label python: the asan workflow leaves them out (pip builds the module in Release, outside the sanitizers; the C++
# under it is tested there by the other suites).
if(NOT DLM_HAVE_CPU OR NOT DLM_BUILD_EXAMPLES)
  return()
endif()
find_package(Python3 COMPONENTS Interpreter QUIET)
if(NOT Python3_Interpreter_FOUND)
  add_test(NAME "python: the package is tested" COMMAND ${CMAKE_COMMAND} -E echo "skipped: no python3 to make the venv with")
  set_tests_properties("python: the package is tested" PROPERTIES SKIP_REGULAR_EXPRESSION "skipped: " LABELS python)
  return()
endif()
set(DLM_PYTHON_VENV ${PROJECT_SOURCE_DIR}/build/venv-python CACHE PATH
    "Python venv the Python package's tests install it into (made by scripts/setup-venv.sh)")
set(_py ${CMAKE_CURRENT_SOURCE_DIR}/python)

add_test(NAME "python: pip builds the package's wheel and installs it into a venv"
         COMMAND ${_py}/install_package.sh build ${DLM_PYTHON_VENV} ${PROJECT_SOURCE_DIR})
set_tests_properties("python: pip builds the package's wheel and installs it into a venv"
                     PROPERTIES FIXTURES_SETUP dlm_python LABELS python SKIP_RETURN_CODE 77 TIMEOUT 1200 COST 190)
# COST (seconds measured on the 2-core machine): a fresh build has no ctest timing history, and ctest starts the
# costliest tests first, so the wheel's build (about 3 minutes beside the other tests) and the chain behind it start at
# once instead of after the short suites.
# lm-evaluation-harness (PyPI lm-eval 0.4.x; its base install needs no torch) in a venv of its own, with the same wheel.
set(DLM_LM_EVAL_VENV ${PROJECT_SOURCE_DIR}/build/venv-lm-eval CACHE PATH
    "Python venv with lm-eval and dlm's package for the harness tests (made by tests/python/install_package.sh)")
# Its PyPI install needs no wheel, so it runs while the wheel builds (mostly downloads); then the wheel goes into it.
set(_lm_eval_packages "lm-eval[api]==0.4.13" numpy pytest)
add_test(NAME "python: lm-evaluation-harness installs into a venv of its own"
         COMMAND ${_py}/install_package.sh venv ${DLM_LM_EVAL_VENV} ${PROJECT_SOURCE_DIR} ${_lm_eval_packages})
set_tests_properties("python: lm-evaluation-harness installs into a venv of its own"
                     PROPERTIES FIXTURES_SETUP dlm_lm_eval_venv LABELS python SKIP_RETURN_CODE 77 TIMEOUT 900 COST 100)
add_test(NAME "python: lm-evaluation-harness installs beside the package"
         COMMAND ${_py}/install_package.sh install ${DLM_LM_EVAL_VENV} ${PROJECT_SOURCE_DIR} ${_lm_eval_packages})
set_tests_properties("python: lm-evaluation-harness installs beside the package"
                     PROPERTIES FIXTURES_REQUIRED "dlm_python;dlm_lm_eval_venv" FIXTURES_SETUP dlm_lm_eval LABELS python
                                SKIP_RETURN_CODE 77 TIMEOUT 900 COST 60)

# name | pytest selection
set(_cases
    "answers equal dlm-generate's for every preset on every shipped model|test_answers.py"
    "a schedule written in Python reproduces the cdlm preset and its errors reach the caller|test_schedule.py"
    "bad input raises typed exceptions naming the parameter or file|test_errors.py"
    "chat prompts render as transformers renders the published templates, and refusals name the field|test_chat.py"
    "the engine adds, steps, cancels and finishes, and forwards arrive as numpy|test_engine.py"
    "resident memory stays bounded over many calls|test_leaks.py"
    "policies composed by name decode as the preset they spell and refusals name the axis|test_compose.py"
    "every Python example of docs/python.md runs|test_docs.py"
    "a DiffusionGemma folder decodes as dlm-generate decodes it, thinking on and off|test_uniform_state.py"
    "a plain prompt gets the tokenizer's own special tokens and a templated one none, in every program|test_prompt_tokens.py")
set(_server_arg "")  # the cases that compare with dlm-server skip themselves without it
if(DLM_HAVE_SERVER)
  set(_server_arg --dlm-server $<TARGET_FILE:dlm-server>)
endif()
foreach(_case IN LISTS _cases)
  string(REPLACE "|" ";" _parts "${_case}")
  list(GET _parts 0 _name)
  list(GET _parts 1 _select)
  add_test(NAME "python: ${_name}"
           COMMAND ${_py}/run_pytest.sh ${DLM_PYTHON_VENV} ${_py}/${_select} --models ${DLM_MODELS_DIR}
                   --dlm-generate $<TARGET_FILE:dlm-generate> ${_server_arg}
                   # the tiny DiffusionGemma folder with a tokenizer that tests/diffusion_gemma.cmake writes
                   --diffusion-gemma ${CMAKE_CURRENT_BINARY_DIR}/diffusion_gemma_tiny_cli)
  set_tests_properties("python: ${_name}" PROPERTIES FIXTURES_REQUIRED dlm_python LABELS python SKIP_RETURN_CODE 77 TIMEOUT 300 COST 15)
endforeach()

if(NOT DLM_BUILD_BENCH OR NOT DLM_HAVE_SERVER)  # dlm-eval and dlm-server to compare with
  return()
endif()
# The harness, offline, on the first rows of the shipped test set (tools/lm_eval/dlm_gsm_synth.yaml): its `dlm` model and
# its own local-completions model against dlm-server both score what dlm-eval scores.
foreach(_case IN ITEMS "lm-eval's dlm model scores the test rows as dlm-eval does|test_lm_eval.py::test_the_dlm_model_scores_as_dlm_eval"
                       "lm-eval's local-completions through dlm-server scores the test rows as dlm-eval does|test_lm_eval.py::test_local_completions_through_dlm_server_scores_as_dlm_eval"
                       "lm-eval's dlm model estimates log-likelihoods by LLaDA's Monte Carlo rule|test_lm_eval.py::test_loglikelihood"
                       "lm-eval's dlm model conditions an empty context on the end-of-text token as lm-eval's HFLM does|test_lm_eval.py::test_an_empty_context_conditions_on_the_end_of_text_token_as_lm_evals_hflm_does"
                       "lm-eval's dlm model decodes DiffusionGemma in thinking mode as dlm-generate does|test_lm_eval.py::test_the_dlm_model_decodes_diffusion_gemma_with_thinking_as_dlm_generate"
                       "lm-eval's --apply_chat_template writes the prompts dlm-eval --chat writes|test_lm_eval.py::test_apply_chat_template_writes_the_prompts_dlm_eval_chat_writes"
                       "lm-eval's dlm model splits contexts and continuations as lm-eval does|test_lm_eval.py::test_contexts_and_continuations_split_as_lm_eval_splits_them"
                       "lm-eval's dlm model cuts an overlong context from the left as HFLM does|test_lm_eval.py::test_an_overlong_context_is_cut_from_the_left_as_hflm_cuts_it_and_an_empty_one_is_decoded"
                       "lm-eval's dlm model reads model_args strictly and refuses a mask token in scored text|test_lm_eval.py::test_model_args_are_read_strictly_and_a_mask_token_in_scored_text_is_refused"
                       "lm-eval's dlm model conditions an empty context on the tokenizer's BOS as HFLM does|test_lm_eval.py::test_an_empty_context_is_conditioned_on_the_tokenizers_bos_and_the_continuation_gets_no_added_tokens")
  string(REPLACE "|" ";" _parts "${_case}")
  list(GET _parts 0 _name)
  list(GET _parts 1 _select)
  add_test(NAME "python: ${_name}"
           COMMAND ${_py}/run_pytest.sh ${DLM_LM_EVAL_VENV} ${_py}/${_select} --models ${DLM_MODELS_DIR}
                   --dlm-eval $<TARGET_FILE:dlm-eval> --dlm-server $<TARGET_FILE:dlm-server>
                   --dlm-generate $<TARGET_FILE:dlm-generate> --diffusion-gemma ${CMAKE_CURRENT_BINARY_DIR}/diffusion_gemma_tiny_cli
                   --fast-dllm-v2 ${CMAKE_CURRENT_BINARY_DIR}/fast_dllm_v2_tiny_cli)
  set_tests_properties("python: ${_name}" PROPERTIES FIXTURES_REQUIRED dlm_lm_eval LABELS python SKIP_RETURN_CODE 77 TIMEOUT 300 COST 15)
endforeach()
