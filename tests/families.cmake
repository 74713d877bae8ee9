# Natively block-causal families (SDAR, ...): loading, logits and decoded trajectories against each
# family's published code (tools/make_family_fixtures.py), and each family's preset through the
# command-line programs (the tiny model with tests/data/cli's 300-token tokenizer).
dlm_test(test_families test_families.cpp CPU)

if(NOT DLM_HAVE_CPU OR NOT DLM_BUILD_EXAMPLES OR NOT COMMAND cli_case)
  return()
endif()
# family_cli_model(<fixture>): the fixture's config and weights with the CLI tokenizer, in the build folder.
function(family_cli_model fixture)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/${fixture}_cli)
  foreach(f IN ITEMS config.json generation_config.json model.safetensors)
    if(EXISTS ${DLM_TEST_DATA}/families/${fixture}/${f})
      configure_file(${DLM_TEST_DATA}/families/${fixture}/${f} ${dir}/${f} COPYONLY)
    endif()
  endforeach()
  foreach(f IN ITEMS tokenizer.json tokenizer_config.json)
    configure_file(${DLM_TEST_DATA}/cli/${f} ${dir}/${f} COPYONLY)
  endforeach()
endfunction()

family_cli_model(sdar_tiny)
set(_sdar "-m|${CMAKE_CURRENT_BINARY_DIR}/sdar_tiny_cli")
cli_case("generate --preset sdar: the model's block_size, SDAR's defaults" dlm-generate
         ARGS "${_sdar}|--preset|sdar|-p|Tom has 3 apples|-n|16|--stats"
         EXPECT "sdar: 16 forwards, steps per block \\[4 4 4 4\\]")
cli_case("generate --preset sdar --threshold 0.3 --temp 0" dlm-generate
         ARGS "${_sdar}|--preset|sdar|-p|Tom has 3 apples|-n|16|--threshold|0.3|--temp|0|--stats" EXPECT "sdar: [0-9]+ forwards")
cli_case("eval --preset sdar" dlm-eval
         ARGS "${_sdar}|--preset|sdar|--data|${DLM_TEST_DATA}/cli/eval.jsonl|-n|16|--limit|2|--no-progress" EXPECT "forwards/problem")

family_cli_model(fast_dllm_v2_tiny)
set(_v2 "-m|${CMAKE_CURRENT_BINARY_DIR}/fast_dllm_v2_tiny_cli")
cli_case("generate --preset fast-dllm-v2: the model's bd_size, sub-blocks, threshold 0.9" dlm-generate
         ARGS "${_v2}|--preset|fast-dllm-v2|-p|Tom has 3 apples|-n|16|--stats" EXPECT "fast-dllm-v2: [0-9]+ forwards")
cli_case("eval --preset fast-dllm-v2" dlm-eval
         ARGS "${_v2}|--preset|fast-dllm-v2|--data|${DLM_TEST_DATA}/cli/eval.jsonl|-n|16|--limit|2|--no-progress" EXPECT "forwards/problem")

family_cli_model(llada2_tiny)
set(_llada2 "-m|${CMAKE_CURRENT_BINARY_DIR}/llada2_tiny_cli")
cli_case("generate --preset llada2: mixture of experts, steps per block, threshold 0.95" dlm-generate
         ARGS "${_llada2}|--preset|llada2|-p|Tom has 3 apples|-n|16|--block-length|8|--stats"
         EXPECT "llada2: [0-9]+ forwards, steps per block \\[[0-9]+ [0-9]+\\]")
cli_case("eval --preset llada2" dlm-eval
         ARGS "${_llada2}|--preset|llada2|--data|${DLM_TEST_DATA}/cli/eval.jsonl|-n|16|--block-length|8|--limit|2|--no-progress"
         EXPECT "forwards/problem")

family_cli_model(lladamoe_tiny)
cli_case("generate --preset llada on LLaDA-MoE: bidirectional mixture of experts" dlm-generate
         ARGS "-m|${CMAKE_CURRENT_BINARY_DIR}/lladamoe_tiny_cli|--preset|llada|-p|Tom has 3 apples|-n|16|--block-length|8|--stats"
         EXPECT "llada: 16 forwards")
