# The step-wise engine: joining a running batch, cancel, failure isolation, the committed prefix; its memory checks.
dlm_test(test_engine test_engine.cpp test_engine_memory.cpp CPU)
# The prompt cache: its radix tree over token blocks, and exact K/V reuse across the engine's requests.
dlm_test(test_prompt_cache test_prompt_cache.cpp CPU)
# The engine behind one run-time interface (registry/any_engine.hpp), as dlm-server and Python drive it.
dlm_test(test_any_engine test_any_engine.cpp CPU)
