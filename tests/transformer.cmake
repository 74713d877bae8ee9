# The CPU transformer (dlm::cpu): parity with transformers on tiny fixtures, exact KV caching.
dlm_test(test_transformer test_transformer.cpp CPU)
# The bf16 KV cache: its tolerance to the f32 cache, and the exactness properties it keeps.
dlm_test(test_kv_cache test_kv_cache.cpp CPU)
# The kernels of every instruction set and their run-time dispatch (dlm/cpu/dispatch.hpp).
dlm_test(test_kernels test_kernels.cpp CPU)
# The attention's kernels: products reading A in place, the softmax's, rows alone and together.
dlm_test(test_attention_kernels test_attention_kernels.cpp CPU)
# The kernel table's row operations (RMSNorm, the rotary rotation): one order, the same bits on every path.
dlm_test(test_row_kernels test_row_kernels.cpp CPU)
# The AMX kernels: amx-bf16, its own determinism class (skipped, saying why, without AMX).
dlm_test(test_amx test_amx.cpp CPU)
