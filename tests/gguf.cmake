# GGUF files (dlm/io/gguf*.hpp, dlm/cpu/gguf_source.hpp): the reader's errors, parity with the
# safetensors models (fixtures from tools/make_gguf_fixtures.py), the tokenizer from the metadata.
dlm_test(test_gguf test_gguf.cpp test_gguf_errors.cpp CPU)
