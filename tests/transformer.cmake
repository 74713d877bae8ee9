# The CPU transformer (dlm::cpu): parity with transformers on tiny fixtures, exact KV caching.
dlm_test(test_transformer test_transformer.cpp CPU)
