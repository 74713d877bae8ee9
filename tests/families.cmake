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
# The prompt is 14 tokens: blocks of 4 from position 0, so block 0 holds the prompt's last 2 tokens
# and 2 slots, and the last block the remaining 2 of the 16 slots (SDAR's layout, aligned_block_diffusion_mask).
cli_case("generate --preset sdar: the model's block_size, SDAR's defaults" dlm-generate
         ARGS "${_sdar}|--preset|sdar|-p|Tom has 3 apples|-n|16|--stats"
         EXPECT "sdar: 16 forwards, steps per block \\[2 4 4 4 2\\]")
cli_case("generate --preset sdar: any gen length (blocks on multiples of 4 from position 0)" dlm-generate
         ARGS "${_sdar}|--preset|sdar|-p|Tom has 3 apples|-n|14|--stats"
         EXPECT "sdar: [0-9]+ forwards, steps per block \\[2 4 4 4\\]")
cli_case("generate --preset sdar --threshold 0.3 --temp 0" dlm-generate
         ARGS "${_sdar}|--preset|sdar|-p|Tom has 3 apples|-n|16|--threshold|0.3|--temp|0|--stats" EXPECT "sdar: [0-9]+ forwards")
cli_case("eval --preset sdar" dlm-eval
         ARGS "${_sdar}|--preset|sdar|--data|${DLM_TEST_DATA}/cli/eval.jsonl|-n|16|--limit|2|--no-progress" EXPECT "forwards/problem")

family_cli_model(sdar_moe_tiny)
cli_case("generate --preset sdar on SDAR-MoE: Qwen3-MoE experts, the model's block_size" dlm-generate
         ARGS "-m|${CMAKE_CURRENT_BINARY_DIR}/sdar_moe_tiny_cli|--preset|sdar|-p|Tom has 3 apples|-n|16|--stats"
         EXPECT "sdar: 16 forwards, steps per block \\[2 4 4 4 2\\]")

family_cli_model(fast_dllm_v2_tiny)
set(_v2 "-m|${CMAKE_CURRENT_BINARY_DIR}/fast_dllm_v2_tiny_cli")
cli_case("generate --preset fast-dllm-v2: the model's bd_size, sub-blocks, threshold 0.9" dlm-generate
         ARGS "${_v2}|--preset|fast-dllm-v2|-p|Tom has 3 apples|-n|16|--stats" EXPECT "fast-dllm-v2: [0-9]+ forwards")
cli_case("generate --preset fast-dllm-v2-block-cache: the sub-block cache" dlm-generate
         ARGS "${_v2}|--preset|fast-dllm-v2-block-cache|-p|Tom has 3 apples|-n|16|--stats"
         EXPECT "preset: fast-dllm-v2-block-cache%%fast-dllm-v2-block-cache: [0-9]+ forwards")
cli_case("eval --preset fast-dllm-v2" dlm-eval
         ARGS "${_v2}|--preset|fast-dllm-v2|--data|${DLM_TEST_DATA}/cli/eval.jsonl|-n|16|--limit|2|--no-progress" EXPECT "forwards/problem")

family_cli_model(llada2_tiny)
set(_llada2 "-m|${CMAKE_CURRENT_BINARY_DIR}/llada2_tiny_cli")
cli_case("generate --preset llada2: mixture of experts, steps per block, threshold 0.95" dlm-generate
         ARGS "${_llada2}|--preset|llada2|-p|Tom has 3 apples|-n|16|--block-length|8|--stats"
         EXPECT "llada2: [0-9]+ forwards, steps per block \\[[0-9]+ [0-9]+ [0-9]+\\]")  # 14-token prompt: blocks [8, 16) (2 slots), [16, 24), [24, 30)
cli_case("eval --preset llada2" dlm-eval
         ARGS "${_llada2}|--preset|llada2|--data|${DLM_TEST_DATA}/cli/eval.jsonl|-n|16|--block-length|8|--limit|2|--no-progress"
         EXPECT "forwards/problem")

# LLaDA 2.1's token editing on the same folder: edits happen (--stats counts them) and the trace
# outlines them (its SVG holds each edit's tooltip).
# The random model is rarely sure enough for Quality mode's 0.5, so the case lowers the editing threshold.
cli_case("generate --preset llada21: token editing, edits in --stats and in the --trace picture" dlm-generate
         ARGS "${_llada2}|--preset|llada21|--editing-threshold|0.3|-p|Tom has 3 apples|-n|16|--block-length|8|--stats|--trace|${CMAKE_CURRENT_BINARY_DIR}/llada21_trace.svg"
         EXPECT "llada21: [0-9]+ forwards, steps per block \\[[0-9 ]+\\], [0-9.]+ tokens/forward, [1-9][0-9]* edits"
         SVG ${CMAKE_CURRENT_BINARY_DIR}/llada21_trace.svg)
cli_case("generate --preset llada21-s --visual: edited slots in braces" dlm-generate
         ARGS "${_llada2}|--preset|llada21-s|-p|Tom has 3 apples|-n|16|--block-length|8|--visual"
         EXPECT "edit [1-9][0-9]* \\|.*\\{")
cli_case("generate --editing-threshold is refused for a preset that never edits, naming it" dlm-generate
         ARGS "${_llada2}|--preset|llada2|--editing-threshold|0.3|-p|x|-n|16|--block-length|8" RC 2
         EXPECT "'--editing-threshold': does not apply to the llada2 preset \\(its schedule never edits a filled slot\\); it applies to llada21")
# A LLaDA 2.1 checkpoint is told from 2.0 by its decoder's keys or its folder name (io/decoding_keys.hpp).
set(_llada21_named ${CMAKE_CURRENT_BINARY_DIR}/LLaDA2.1-tiny)
set(_llada21_keyed ${CMAKE_CURRENT_BINARY_DIR}/llada2_tiny_edit_keys)
foreach(f IN ITEMS config.json model.safetensors)
  configure_file(${DLM_TEST_DATA}/families/llada2_tiny/${f} ${_llada21_named}/${f} COPYONLY)
  configure_file(${DLM_TEST_DATA}/families/llada2_tiny/${f} ${_llada21_keyed}/${f} COPYONLY)
endforeach()
foreach(f IN ITEMS tokenizer.json tokenizer_config.json)
  configure_file(${DLM_TEST_DATA}/cli/${f} ${_llada21_named}/${f} COPYONLY)
  configure_file(${DLM_TEST_DATA}/cli/${f} ${_llada21_keyed}/${f} COPYONLY)
endforeach()
file(WRITE ${_llada21_keyed}/generation_config.json "{\"editing_threshold\": 0.5, \"max_post_steps\": 16}\n")

family_cli_model(lladamoe_tiny)
cli_case("generate --preset llada on LLaDA-MoE: bidirectional mixture of experts" dlm-generate
         ARGS "-m|${CMAKE_CURRENT_BINARY_DIR}/lladamoe_tiny_cli|--preset|llada|-p|Tom has 3 apples|-n|16|--block-length|8|--stats"
         EXPECT "llada: 16 forwards")

# Without --preset the programs decode with the model's preset (cli::default_preset): the family's own
# for SDAR (and SDAR-MoE), Fast-dLLM v2 and LLaDA2, autoregressive for Qwen2, cdlm for LLaDA and LLaDA-MoE; --stats,
# dlm-eval and dlm-server say which and why, an explicit --preset wins, and the flags are checked
# against the preset chosen.
# default_preset_case(<name> <model folder> <extra args a|b> <expected regex%%...> [RC n])
function(default_preset_case name model extra expect)
  cli_case("default preset: ${name}" dlm-generate ARGS "-m|${model}|-p|Tom has 3 apples|-n|16|--stats${extra}" EXPECT "${expect}" ${ARGN})
endfunction()
set(_b "${CMAKE_CURRENT_BINARY_DIR}")
default_preset_case("SDAR folder decodes with sdar" ${_b}/sdar_tiny_cli ""
                    "preset: sdar, the default for SDARForCausalLM \\(config.json architectures\\)%%sdar: [0-9]+ forwards")
default_preset_case("SDAR-MoE folder decodes with sdar" ${_b}/sdar_moe_tiny_cli ""
                    "preset: sdar, the default for SDARMoeForCausalLM \\(config.json architectures\\)%%sdar: [0-9]+ forwards")
default_preset_case("Fast-dLLM v2 folder decodes with fast-dllm-v2" ${_b}/fast_dllm_v2_tiny_cli ""
                    "preset: fast-dllm-v2, the default for Fast_dLLM_QwenForCausalLM%%fast-dllm-v2: [0-9]+ forwards")
default_preset_case("LLaDA2 folder decodes with llada2" ${_b}/llada2_tiny_cli "|--block-length|8"
                    "preset: llada2, the default for LLaDA2MoeModelLM%%llada2: [0-9]+ forwards")
default_preset_case("a folder named for LLaDA2.1 decodes with llada21" ${_llada21_named} "|--block-length|8"
                    "preset: llada21, the default for LLaDA 2.1 checkpoints \\(the folder name 'LLaDA2.1-tiny'\\)%%llada21: [0-9]+ forwards")
default_preset_case("a LLaDA2 folder whose generation_config sets editing_threshold decodes with llada21" ${_llada21_keyed} "|--block-length|8"
                    "preset: llada21, the default for LLaDA 2.1 checkpoints \\(.*generation_config.json key 'editing_threshold'\\)")
default_preset_case("LLaDA-MoE folder keeps cdlm" ${_b}/lladamoe_tiny_cli "|--block-length|8"
                    "preset: cdlm, the default for LLaDAMoEModelLM \\(config.json architectures\\), dlm's CDLM students' preset; --preset llada runs the family's reference decoder")
default_preset_case("LLaDA folder keeps cdlm" ${_b}/cli_model "|--block-length|8" "preset: cdlm, the default for LLaDAModelLM%%cdlm: [0-9]+ forwards")
default_preset_case("Qwen2 folder decodes autoregressively" ${PROJECT_SOURCE_DIR}/models/ar ""
                    "preset: autoregressive, the default for Qwen2ForCausalLM%%autoregressive: [0-9]+ forwards, steps per block \\[1 1")
default_preset_case("an explicit --preset wins" ${_b}/sdar_tiny_cli "|--preset|llada|--block-length|4" "preset: llada, --preset llada%%llada: 16 forwards")
default_preset_case("--steps passes on SDAR's preset" ${_b}/sdar_tiny_cli "|--steps|2" "preset: sdar")
default_preset_case("--steps is refused on LLaDA's, naming it" ${_b}/cli_model "|--steps|2" "'--steps': does not apply to the cdlm preset" RC 2)
cli_case("default preset: dlm-eval says which" dlm-eval
         ARGS "-m|${_b}/sdar_tiny_cli|--data|${DLM_TEST_DATA}/cli/eval.jsonl|-n|16|--limit|1|--no-progress" EXPECT "preset: sdar, the default for SDARForCausalLM")
