# GGUF files (dlm/io/gguf*.hpp, dlm/cpu/gguf_source.hpp): the reader's errors, parity with the
# safetensors models (fixtures from tools/make_gguf_fixtures.py), the tokenizer from the metadata.
dlm_test(test_gguf test_gguf.cpp test_gguf_errors.cpp test_gguf_llada2.cpp CPU)

# The programs take -m x.gguf: dlm-generate needs the file's tokenizer (the tiny fixture has none, and
# the refusal names the key), dlm-bench-forward runs the model.
if(DLM_BUILD_EXAMPLES AND COMMAND cli_case)
  cli_case("gguf: -m x.gguf without a tokenizer is refused by key" dlm-generate
           ARGS "-m|${DLM_TEST_DATA}/gguf/llada_tiny.f32.gguf|-p|x" RC 1
           EXPECT "llada_tiny.f32.gguf: key 'tokenizer.ggml.model': missing")
endif()
if(DLM_BUILD_BENCH AND DLM_HAVE_CPU)
  add_test(NAME "bench: dlm-bench-forward runs a GGUF file"
           COMMAND dlm-bench-forward -m ${DLM_TEST_DATA}/gguf/dream_tiny.bf16.gguf --reps 1 --no-peak --canvas 24 --block 8 --cache 16 --threads 1)
  set_tests_properties("bench: dlm-bench-forward runs a GGUF file" PROPERTIES LABELS bench PASS_REGULAR_EXPRESSION "weights bf16")
  add_test(NAME "bench: dlm-bench-forward runs a llada-moe GGUF file with Q8_0 experts"
           COMMAND dlm-bench-forward -m ${DLM_TEST_DATA}/gguf/lladamoe_tiny.q8_0.gguf --reps 1 --no-peak --canvas 24 --block 8 --cache 16 --threads 1)
  set_tests_properties("bench: dlm-bench-forward runs a llada-moe GGUF file with Q8_0 experts" PROPERTIES LABELS bench
                       PASS_REGULAR_EXPRESSION "weights q8_0.*experts: [0-9.]+ % of the forward")
  add_test(NAME "bench: dlm-bench-forward runs a llada2 GGUF file with Q8_0 weights and a shared expert"
           COMMAND dlm-bench-forward -m ${DLM_TEST_DATA}/gguf/llada2_tiny.q8_0.gguf --reps 1 --no-peak --canvas 24 --block 8 --cache 16 --threads 1)
  set_tests_properties("bench: dlm-bench-forward runs a llada2 GGUF file with Q8_0 weights and a shared expert" PROPERTIES LABELS bench
                       PASS_REGULAR_EXPRESSION "weights q8_0.*experts: [0-9.]+ % of the forward")
endif()

# dlm-make-checkpoint --format gguf (bench/gguf_checkpoint.hpp) on the tiny-k shape (rows of 256, so
# Q4_K_M's K-quants fit): the reader loads each written file, which holds exactly
# transformer::random(config, 3, type) (logits equal and finite), and dlm-generate decodes from the
# file alone (config and byte-level tokenizer from its metadata).
if(DLM_BUILD_BENCH AND DLM_HAVE_CPU)
  foreach(_t IN ITEMS q8_0 q4_k_m bf16 f16)
    set(_gg ${CMAKE_CURRENT_BINARY_DIR}/tiny-k.${_t}.gguf)
    set(_verify --verify-random 3)
    if(NOT _t MATCHES "^b?f16$")
      list(APPEND _verify --verify-type ${_t})
    endif()
    add_test(NAME "bench: dlm-make-checkpoint writes a tiny-k GGUF ${_t}"
             COMMAND dlm-make-checkpoint --shape tiny-k --format gguf --type ${_t} --seed 3 --out ${_gg})
    set_tests_properties("bench: dlm-make-checkpoint writes a tiny-k GGUF ${_t}" PROPERTIES FIXTURES_SETUP gguf_tiny_k_${_t} LABELS bench)
    add_test(NAME "bench: the tiny-k GGUF ${_t} holds the random model it was made from"
             COMMAND dlm-bench-forward -m ${_gg} ${_verify} --reps 1 --no-peak --canvas 16 --block 8 --cache 8 --threads 1)
    set_tests_properties("bench: the tiny-k GGUF ${_t} holds the random model it was made from" PROPERTIES FIXTURES_REQUIRED gguf_tiny_k_${_t}
                         LABELS bench PASS_REGULAR_EXPRESSION "verify: the folder holds exactly")
  endforeach()
  if(DLM_BUILD_EXAMPLES AND COMMAND cli_case)
    cli_case("gguf: dlm-generate decodes a Q4_K_M file dlm-make-checkpoint wrote" dlm-generate
             ARGS "-m|${CMAKE_CURRENT_BINARY_DIR}/tiny-k.q4_k_m.gguf|-p|Hi there|--gen-length|16|--block-length|8|--stats"
             EXPECT "cpu: [^\n]*mixed weights[^\n]*, loaded in [0-9.]+ s \\([0-9.]+ GB/s\\)%%preset: cdlm, the default for LLaDAModelLM \\(general.architecture of the GGUF file\\)%%cdlm: [0-9]+ forwards")
    set_tests_properties("cli: gguf: dlm-generate decodes a Q4_K_M file dlm-make-checkpoint wrote" PROPERTIES FIXTURES_REQUIRED gguf_tiny_k_q4_k_m)
  endif()
endif()
