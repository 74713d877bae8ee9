# The preset registry (include/dlm/registry/): test_registry on the scripted model (every preset's
# decoder, what each accepts, refusals by name, defaults and their sources, a table extended by one
# line), test_compose the policy name table and run-time composition (every preset spelled by its policies' names
# decodes as the preset), and examples/custom_preset.cpp, a preset of one's own added with one registry line, decoding
# the shipped CDLM student.
dlm_test(test_registry test_registry.cpp)

if(DLM_HAVE_CPU AND DLM_BUILD_EXAMPLES)
  add_test(NAME "registry: a custom preset added with one registry line builds its decoder, refuses what it lacks and decodes"
           COMMAND custom_preset ${DLM_MODELS_DIR}/cdlm "Tom has 3 apples. He buys 4 more. How many apples does he have now?")
  set_tests_properties("registry: a custom preset added with one registry line builds its decoder, refuses what it lacks and decodes"
                       PROPERTIES PASS_REGULAR_EXPRESSION
                       "refused: invalid parameter 'temperature': does not apply to the capped-threshold preset \\(it samples greedily\\).*capped-threshold: gen [0-9]+, block [0-9]+, threshold 0.8\n.*#### 7\n[0-9]+ forwards for [0-9]+ tokens")
endif()
dlm_test(test_compose test_compose.cpp)
