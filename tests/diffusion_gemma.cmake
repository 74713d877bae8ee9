# DiffusionGemma (uniform-state block diffusion on Gemma 4's MoE backbone): config, checkpoint and the
# encoder/decoder forward modes against transformers' DiffusionGemmaForBlockDiffusion on a tiny random
# model (tools/make_diffusion_gemma_fixtures.py wrote tests/data/families/diffusion_gemma_tiny); the same model
# as llama.cpp's diffusion-gemma GGUF (tools/make_gguf_fixtures.py --only diffusion-gemma, tests/data/gguf/).
dlm_test(test_diffusion_gemma test_diffusion_gemma.cpp test_gguf_diffusion_gemma.cpp CPU)

if(NOT DLM_HAVE_CPU OR NOT DLM_BUILD_EXAMPLES OR NOT COMMAND cli_case)
  return()
endif()
# The tiny model with the CLI tests' 300-token tokenizer: dlm-generate decodes a DiffusionGemma folder
# with its own preset, and refuses the presets that do not fit it (and it to the others' models).
set(_dg ${CMAKE_CURRENT_BINARY_DIR}/diffusion_gemma_tiny_cli)
foreach(f IN ITEMS config.json model.safetensors)
  configure_file(${DLM_TEST_DATA}/families/diffusion_gemma_tiny/${f} ${_dg}/${f} COPYONLY)
endforeach()
configure_file(${DLM_TEST_DATA}/cli/tokenizer.json ${_dg}/tokenizer.json COPYONLY)
# Gemma 4's chat format (a stand-in template: dlm recognises it by its <|turn> / <turn|> markers and writes it itself).
configure_file(${DLM_TEST_DATA}/cli/tokenizer_config_gemma4.json ${_dg}/tokenizer_config.json COPYONLY)
cli_case("default preset: a DiffusionGemma folder decodes with diffusion-gemma" dlm-generate
         ARGS "-m|${_dg}|-p|Tom has 3 apples|-n|32|--steps|6|--stats"
         EXPECT "preset: diffusion-gemma, the default for DiffusionGemmaForBlockDiffusion%%diffusion-gemma: [0-9]+ forwards, steps per block \\[[1-6] [1-6]\\]")
# The same model as a diffusion-gemma GGUF file (tools/make_gguf_fixtures.py): the BF16 fixture carries a Gemma 4
# ("gemma4") vocabulary of byte tokens, the Q8_0 one the CLI tests' byte-level tokenizer; either runs from the file alone.
cli_case("default preset: a diffusion-gemma GGUF file with Gemma 4's vocabulary decodes with diffusion-gemma" dlm-generate
         ARGS "-m|${DLM_TEST_DATA}/gguf/diffusion_gemma_tiny.bf16.gguf|-p|Tom has 3 apples|-n|32|--steps|6|--stats"
         EXPECT "preset: diffusion-gemma, the default for DiffusionGemmaForBlockDiffusion \\(general.architecture diffusion-gemma of the GGUF file\\)%%diffusion-gemma: [0-9]+ forwards")
cli_case("gguf: a diffusion-gemma Q8_0 file with a byte-level tokenizer decodes with diffusion-gemma" dlm-generate
         ARGS "-m|${DLM_TEST_DATA}/gguf/diffusion_gemma_tiny.q8_0.gguf|-p|Tom has 3 apples|-n|16|--steps|4|--stats"
         EXPECT "q8_0 weights%%diffusion-gemma: [0-9]+ forwards")
cli_case("generate --preset diffusion-gemma --threshold --temp 0: the entropy bound and greedy draws" dlm-generate
         ARGS "-m|${_dg}|-p|Tom has 3 apples|-n|16|--steps|4|--threshold|0.5|--temp|0|--stats" EXPECT "diffusion-gemma: [1-4] forwards")
cli_case("generate --preset cdlm on a DiffusionGemma folder is refused, naming the flag" dlm-generate
         ARGS "-m|${_dg}|-p|x|--preset|cdlm" RC 2 EXPECT "'--preset': 'cdlm' decodes masked-diffusion models, and this model is a uniform-state")
cli_case("generate --compare on a DiffusionGemma folder is refused, naming --compare, whose default presets do not fit" dlm-generate
         ARGS "-m|${_dg}|-p|x|--compare" RC 2 EXPECT "'--compare': 'llada' decodes masked-diffusion models")
cli_case("generate --compare-presets naming a preset that does not fit is refused, naming that flag" dlm-generate
         ARGS "-m|${_dg}|-p|x|--compare-presets|diffusion-gemma,cdlm" RC 2 EXPECT "'--compare-presets': 'cdlm' decodes masked-diffusion models")
cli_case("generate --preset diffusion-gemma on a masked-diffusion model is refused, naming the flag" dlm-generate
         ARGS "-p|x|--preset|diffusion-gemma" RC 2 EXPECT "'--preset': 'diffusion-gemma' denoises canvases of uniformly random tokens")
cli_case("generate --kv bf16 on a DiffusionGemma folder is refused, naming the flag (exit 2)" dlm-generate
         ARGS "-m|${_dg}|-p|x|--kv|bf16" RC 2 EXPECT "invalid parameter '--kv': DiffusionGemma's contexts hold f32 K/V")
# dlm-eval and dlm-server take a DiffusionGemma folder like any other: its own preset by default.
if(DLM_BUILD_BENCH)
  cli_case("eval: a DiffusionGemma folder is scored with diffusion-gemma" dlm-eval
           ARGS "-m|${_dg}|--limit|2|-n|16|--steps|4|--no-progress" EXPECT "preset: diffusion-gemma%%accuracy +[0-9.]+ % \\(")
  cli_case("eval: a diffusion-gemma GGUF file is scored with diffusion-gemma" dlm-eval
           ARGS "-m|${DLM_TEST_DATA}/gguf/diffusion_gemma_tiny.q8_0.gguf|--limit|2|-n|16|--steps|4|--no-progress" EXPECT "preset: diffusion-gemma%%accuracy +[0-9.]+ % \\(")
endif()
find_package(Python3 COMPONENTS Interpreter QUIET)
if(DLM_HAVE_SERVER AND Python3_Interpreter_FOUND)
  add_test(NAME "server: a DiffusionGemma folder is served with its own preset, answering as dlm-generate"
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/server/client_test.py uniform-state
                   --server $<TARGET_FILE:dlm-server> --generate $<TARGET_FILE:dlm-generate> --model ${_dg})
  set_tests_properties("server: a DiffusionGemma folder is served with its own preset, answering as dlm-generate"
                       PROPERTIES LABELS server SKIP_RETURN_CODE 77 TIMEOUT 120 RUN_SERIAL ON)
endif()
