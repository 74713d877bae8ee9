# The tokenizer (tokenizer.json, byte-level BPE) and the chat templates.
dlm_test(test_tokenizer test_tokenizer.cpp CPU)
# DiffusionGemma's (Gemma 4's) tokenizer and chat template, against the real vocabulary.
dlm_test(test_tokenizer_gemma test_tokenizer_gemma.cpp CPU)
# The chat formats against the templates the published checkpoints ship (tools/make_chat_template_fixtures.py).
dlm_test(test_chat_templates test_chat_templates.cpp CPU)
