# The tokenizer (tokenizer.json, byte-level BPE) and the chat templates.
dlm_test(test_tokenizer test_tokenizer.cpp CPU)
