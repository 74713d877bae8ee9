# GGUF files (dlm/io/gguf*.hpp, dlm/cpu/gguf_source.hpp): the reader's errors, parity with the
# safetensors models (fixtures from tools/make_gguf_fixtures.py), the tokenizer from the metadata.
dlm_test(test_gguf test_gguf.cpp test_gguf_errors.cpp CPU)

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
endif()
