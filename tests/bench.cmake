# The benchmark tools on the tiny shape: dlm-make-checkpoint writes a sharded random checkpoint laid
# out like a published one, and dlm-bench-forward loads it, checks that it holds exactly
# transformer::random(config, seed), runs every case and one cdlm decode; dlm-bench-quant times one
# quantized product per block type (docs/benchmarks.md).
if(DLM_BUILD_BENCH AND DLM_HAVE_CPU)
  set(_ck ${CMAKE_CURRENT_BINARY_DIR}/bench-tiny-checkpoint)
  add_test(NAME "bench: dlm-make-checkpoint writes a sharded tiny checkpoint"
           COMMAND dlm-make-checkpoint --shape tiny --out ${_ck} --shards 2 --seed 3)
  set_tests_properties("bench: dlm-make-checkpoint writes a sharded tiny checkpoint" PROPERTIES FIXTURES_SETUP bench_tiny_ck LABELS bench)
  add_test(NAME "bench: dlm-bench-forward loads it, verifies its weights and decodes"
           COMMAND dlm-bench-forward -m ${_ck} --verify-random 3 --reps 1 --no-peak --canvas 24 --block 8 --cache 16 --threads 1,2
                   --decode --gen 16 --prompt 8)
  set_tests_properties("bench: dlm-bench-forward loads it, verifies its weights and decodes" PROPERTIES FIXTURES_REQUIRED bench_tiny_ck
                       LABELS bench PASS_REGULAR_EXPRESSION "verify: the folder holds exactly.*decode: cdlm")
  add_test(NAME "bench: dlm-bench-forward refuses an unknown shape" COMMAND dlm-bench-forward --shape nope --no-peak)
  set_tests_properties("bench: dlm-bench-forward refuses an unknown shape" PROPERTIES WILL_FAIL TRUE LABELS bench)
  # dlm-bench-quant: one quantized product of every block type at two row counts, on a small shape.
  add_test(NAME "bench: dlm-bench-quant times every block type's product and rates it against the floor"
           COMMAND dlm-bench-quant --k 256 --n 48 --rows 1,5 --matrices 2 --reps 1 --no-peak --bandwidth-mib 16)
  set_tests_properties("bench: dlm-bench-quant times every block type's product and rates it against the floor" PROPERTIES
                       LABELS bench PASS_REGULAR_EXPRESSION "Q8_0: .*Q4_0: .*Q4_K: .*Q5_K: .*Q6_K: .* 5 rows: .* ms .* floor x")
  add_test(NAME "bench: dlm-bench-quant refuses a type it has no kernel for" COMMAND dlm-bench-quant --types q3_k --no-peak)
  set_tests_properties("bench: dlm-bench-quant refuses a type it has no kernel for" PROPERTIES
                       LABELS bench PASS_REGULAR_EXPRESSION "invalid parameter '--types': 'q3_k' is not one of")
endif()
