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
  # -m naming a DiffusionGemma checkpoint: the tiny diffusion-gemma GGUF file (tests/data/gguf/, with its gemma4
  # vocabulary), loaded as dlm-generate loads it, one step and one decode timed.
  set(_name "bench: dlm-bench-forward -m loads a DiffusionGemma GGUF file as dlm-generate does and times a step and a decode")
  add_test(NAME "${_name}" COMMAND dlm-bench-forward -m ${DLM_TEST_DATA}/gguf/diffusion_gemma_tiny.bf16.gguf --reps 1 --no-peak
                                   --threads 1 --prompt 8 --decode)
  set_tests_properties("${_name}" PROPERTIES LABELS bench
                       PASS_REGULAR_EXPRESSION "model: .*diffusion_gemma_tiny.bf16.gguf: hidden .*step +16 rows x +24 keys, 1 thread\\(s\\): .*decode +16 tokens")
  add_test(NAME "bench: dlm-bench-forward refuses a canvas longer than the model's context, naming the flag"
           COMMAND dlm-bench-forward --shape tiny --no-peak --reps 1 --threads 1 --canvas 5000)
  set_tests_properties("bench: dlm-bench-forward refuses a canvas longer than the model's context, naming the flag" PROPERTIES
                       LABELS "bench;unsanitized" PASS_REGULAR_EXPRESSION "invalid parameter '--canvas': --canvas is 5000 positions, more than the model's context of 4096")
  add_test(NAME "bench: dlm-dump-logits refuses more rows than the model's context, naming the flag"
           COMMAND dlm-dump-logits -m ${_ck} --rows 5000 --out ${CMAKE_CURRENT_BINARY_DIR}/bench-dump-never-written.bin)
  set_tests_properties("bench: dlm-dump-logits refuses more rows than the model's context, naming the flag" PROPERTIES
                       FIXTURES_REQUIRED bench_tiny_ck LABELS "bench;unsanitized"
                       PASS_REGULAR_EXPRESSION "invalid parameter '--rows': holds 5000 tokens, more than the model's context of 4096")
  add_test(NAME "bench: dlm-bench-forward refuses an unknown shape" COMMAND dlm-bench-forward --shape nope --no-peak)
  set_tests_properties("bench: dlm-bench-forward refuses an unknown shape" PROPERTIES WILL_FAIL TRUE LABELS bench)
  # dlm-bench-quant: one quantized product of every block type at two row counts, on a small shape.
  add_test(NAME "bench: dlm-bench-quant times every block type's product and rates it against the floor"
           COMMAND dlm-bench-quant --k 256 --n 48 --rows 1,5 --matrices 2 --reps 1 --no-peak --bandwidth-mib 16)
  set_tests_properties("bench: dlm-bench-quant times every block type's product and rates it against the floor" PROPERTIES
                       LABELS bench PASS_REGULAR_EXPRESSION "Q8_0: .*Q4_0: .*Q4_K: .*Q5_K: .*Q6_K: .* 5 rows: .* ms .* floor x")
  # dlm-bench-sampling: a step's draws in turn and side by side, on a small vocabulary; it checks the tokens agree.
  add_test(NAME "bench: dlm-bench-sampling times a step's draws on 1 and 2 threads and gets the same tokens"
           COMMAND dlm-bench-sampling --vocab 4096 --slots 32 --threads 1,2 --reps 1)
  set_tests_properties("bench: dlm-bench-sampling times a step's draws on 1 and 2 threads and gets the same tokens" PROPERTIES
                       LABELS bench PASS_REGULAR_EXPRESSION "greedy .* 2 thread\\(s\\): .*T 1 .* 2 thread\\(s\\): .*top-p 0.95 .* 2 thread\\(s\\): .* ms a step")
  # dlm-bench-tokenizer: 1 MiB texts through each default tokenizer, whole and bounded (docs/server.md's figures);
  # unsanitized: 64 encodes of 1 MiB, several times slower under asan (fuzz: tokenizer_* runs adversarial text there).
  add_test(NAME "bench: dlm-bench-tokenizer times 1 MiB of adversarial text, whole and bounded, with every kind of tokenizer"
           COMMAND dlm-bench-tokenizer --reps 1 --bound 64)
  set_tests_properties("bench: dlm-bench-tokenizer times 1 MiB of adversarial text, whole and bounded, with every kind of tokenizer" PROPERTIES
                       LABELS "bench;unsanitized" PASS_REGULAR_EXPRESSION "cdlm +one letter.*cdlm as llama-bpe +digits.*cdlm as gpt-2 +spaces.*diffusion_gemma_tiny.bf16.gguf +one emoji")
  # --amx-vector-side: the same products on the AMX kernels with no-op tile instructions (their vector
  # side alone), on any CPU with AVX-512 BF16; skipped, saying why, on one without.
  add_test(NAME "bench: dlm-bench-quant --amx-vector-side times the AMX kernels' vector side alone, every block type"
           COMMAND dlm-bench-quant --k 256 --n 48 --rows 1,17 --matrices 2 --reps 1 --no-peak --bandwidth-mib 16 --amx-vector-side)
  set_tests_properties("bench: dlm-bench-quant --amx-vector-side times the AMX kernels' vector side alone, every block type" PROPERTIES
                       LABELS bench SKIP_REGULAR_EXPRESSION "needs AVX-512 BF16"
                       PASS_REGULAR_EXPRESSION "Q8_0: .*17 rows: .*amx-int8 vector side alone [0-9.]+ ms.*Q4_0: .*Q4_K: .*Q5_K: .*Q6_K: .*17 rows: .*amx-int8 vector side alone [0-9.]+ ms")
  # dlm-bench-forward --amx-vector-side: every case once more on those kernels, bf16 weights (amx-bf16)
  # and Q4_K_M with a bf16 KV cache (amx-int8, and the attention's amx-bf16 rows).
  foreach(_vs "bf16;tiny;f32" "q4_k_m;tiny-k;bf16")
    list(GET _vs 0 _dt)
    list(GET _vs 1 _shape)
    list(GET _vs 2 _kv)
    set(_name "bench: dlm-bench-forward --amx-vector-side times every case's AMX vector side too, ${_dt} weights, ${_kv} KV cache")
    add_test(NAME "${_name}" COMMAND dlm-bench-forward --shape ${_shape} --dtype ${_dt} --kv ${_kv} --reps 1 --no-peak --canvas 24 --block 8
                                     --cache 16 --threads 1 --amx-vector-side)
    set_tests_properties("${_name}" PROPERTIES LABELS bench SKIP_REGULAR_EXPRESSION "needs AVX-512 BF16"
                         PASS_REGULAR_EXPRESSION "fill .*amx vector side alone: +[0-9.]+ ms.*block .*amx vector side alone: +[0-9.]+ ms.*full .*amx vector side alone: +[0-9.]+ ms")
  endforeach()
  # --amx-vector-side-only (a run to profile the vector side alone): no case timed on this CPU's kernels.
  set(_name "bench: dlm-bench-forward --amx-vector-side-only times the AMX vector side and no other forward")
  add_test(NAME "${_name}" COMMAND dlm-bench-forward --shape tiny --dtype bf16 --kv bf16 --reps 1 --no-peak --canvas 24 --block 8 --cache 16
                                   --threads 1 --amx-vector-side-only)
  set_tests_properties("${_name}" PROPERTIES LABELS bench SKIP_REGULAR_EXPRESSION "needs AVX-512 BF16" FAIL_REGULAR_EXPRESSION "GFLOP/s"
                       PASS_REGULAR_EXPRESSION "fill .*thread\\(s\\):[\r\n]+ +amx vector side alone: +[0-9.]+ ms.*full .*amx vector side alone: +[0-9.]+ ms")
  # A flag's value out of range is refused by name before any work (it used to wrap or abort).
  add_test(NAME "bench: dlm-make-checkpoint refuses a seed that is not a whole number, naming the flag"
           COMMAND dlm-make-checkpoint --shape tiny --out ${CMAKE_CURRENT_BINARY_DIR}/bench-never-written --seed abc)
  set_tests_properties("bench: dlm-make-checkpoint refuses a seed that is not a whole number, naming the flag" PROPERTIES
                       LABELS bench PASS_REGULAR_EXPRESSION "invalid parameter '--seed': expected an integer, got 'abc'")
  # A type whose blocks the shape's rows do not tile is the flags' fault (exit 2, naming --type), found before
  # the file is opened; written to a log (not a terminal), the output holds no "\r" progress line.
  add_test(NAME "bench: dlm-make-checkpoint: a GGUF type the shape's rows cannot hold exits 2 naming --type; a log gets no progress line"
           COMMAND bash -c [[
set -u; P=$0; O=$1; rm -rf "$O"; mkdir -p "$O"; cd "$O"
"$P" --shape tiny --format gguf --type q8_0 --out t.gguf 2> err.txt; s=$?
[ $s -eq 2 ] && grep -q "invalid parameter '--type': tiny's token_embd.weight: rows of 48 are not whole Q8_0 blocks of 32" err.txt && [ ! -e t.gguf ] ||
  { echo "exit $s:"; cat err.txt; exit 1; }
"$P" --shape tiny --format gguf --type f32 --out t.gguf 2> err.txt || { cat err.txt; exit 1; }
! grep -q $'\r' err.txt && grep -q "^dlm-make-checkpoint: wrote" err.txt || { echo "progress in a log:"; cat -A err.txt; exit 1; }
]] $<TARGET_FILE:dlm-make-checkpoint> ${CMAKE_CURRENT_BINARY_DIR}/bench-gguf-type)
  set_tests_properties("bench: dlm-make-checkpoint: a GGUF type the shape's rows cannot hold exits 2 naming --type; a log gets no progress line"
                       PROPERTIES LABELS "bench;unsanitized" TIMEOUT 60)
  # Label unsanitized: the asan workflow builds only the programs its cases need (dlm_test_programs),
  # and a flag check gains nothing from compiling this benchmark under the sanitizers.
  add_test(NAME "bench: dlm-bench-prompt-cache refuses a negative request count"
           COMMAND dlm-bench-prompt-cache --mode joined --requests -1)
  set_tests_properties("bench: dlm-bench-prompt-cache refuses a negative request count" PROPERTIES
                       LABELS "bench;unsanitized" PASS_REGULAR_EXPRESSION "invalid parameter '--requests': must be >= 2, got -1")
  add_test(NAME "bench: dlm-bench-prompt-cache refuses an unknown flag" COMMAND dlm-bench-prompt-cache --bogus)
  set_tests_properties("bench: dlm-bench-prompt-cache refuses an unknown flag" PROPERTIES
                       LABELS "bench;unsanitized" PASS_REGULAR_EXPRESSION "invalid parameter '--bogus': unknown flag")
  # A second run into one folder replaces the first one's checkpoint: a model.safetensors left beside
  # new shards would be the file a loader reads.
  set(_twice ${CMAKE_CURRENT_BINARY_DIR}/bench-twice)
  add_test(NAME "bench: dlm-make-checkpoint into a folder of an earlier run leaves only the new checkpoint"
           COMMAND sh -c "rm -rf '${_twice}' && '$<TARGET_FILE:dlm-make-checkpoint>' --shape tiny --out '${_twice}' --seed 1 && \
'$<TARGET_FILE:dlm-make-checkpoint>' --shape tiny --out '${_twice}' --seed 2 --shards 2 && test ! -e '${_twice}/model.safetensors' && \
test -e '${_twice}/model.safetensors.index.json' && '$<TARGET_FILE:dlm-make-checkpoint>' --shape tiny --out '${_twice}' --seed 3 && \
test ! -e '${_twice}/model.safetensors.index.json' && ! ls '${_twice}'/model-0000* 2>/dev/null && echo every-check-passed"
  )
  set_tests_properties("bench: dlm-make-checkpoint into a folder of an earlier run leaves only the new checkpoint" PROPERTIES LABELS bench
                       PASS_REGULAR_EXPRESSION "removed 1 checkpoint file\\(s\\) of an earlier run.*removed 3 checkpoint file\\(s\\).*every-check-passed")
  add_test(NAME "bench: dlm-dump-logits refuses an empty model path by name" COMMAND dlm-dump-logits -m "" --out x.bin)
  set_tests_properties("bench: dlm-dump-logits refuses an empty model path by name" PROPERTIES
                       LABELS "bench;unsanitized" PASS_REGULAR_EXPRESSION "invalid parameter '-m': expected a path, got an empty string")
  add_test(NAME "bench: dlm-bench-quant refuses a type it has no kernel for" COMMAND dlm-bench-quant --types q3_k --no-peak)
  set_tests_properties("bench: dlm-bench-quant refuses a type it has no kernel for" PROPERTIES
                       LABELS bench PASS_REGULAR_EXPRESSION "invalid parameter '--types': 'q3_k' is not one of")
  # bench/cpu_targets.py: issue 23's targets in one run, on shapes small enough for the suite (the
  # goals are the 8B's; what is checked here is that every case runs and is set against its goal).
  # Label unsanitized: its 544-row fills and peak probes take minutes under the sanitizers, and
  # time nothing there; the asan workflow leaves it out.
  find_package(Python3 COMPONENTS Interpreter QUIET)
  if(Python3_Interpreter_FOUND AND DLM_BUILD_EXAMPLES)
  add_test(NAME "bench: cpu_targets.py runs issue 23's cases and sets each against its goal"
           COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/bench/cpu_targets.py --small tiny --big tiny-k --threads 1 --reps 1 --gen 32
                   --tools ${PROJECT_BINARY_DIR} --out ${CMAKE_CURRENT_BINARY_DIR}/cpu-targets)
  set_tests_properties("bench: cpu_targets.py runs issue 23's cases and sets each against its goal" PROPERTIES LABELS "bench;unsanitized"
                       PASS_REGULAR_EXPRESSION "kernels: [a-z0-9-]+ .*tiny bf16 full 128 rows.*tiny-k bf16 block 32 rows.*floor x <= 1.3.*tiny-k q4_k_m block 32 rows.*tiny-k Q4_K_M cdlm decode.*<= 0.499 s  *(yes|no)")
  # --rows: docs/benchmarks.md's 8B rows (every type, every thread count, the whole decodes) in rows.md.
  add_test(NAME "bench: cpu_targets.py --rows writes every type's rows at every thread count and the whole decodes"
           COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/bench/cpu_targets.py --small tiny --big tiny-k --threads 1,2 --reps 1 --gen 32
                   --rows --skip-decode --tools ${PROJECT_BINARY_DIR} --out ${CMAKE_CURRENT_BINARY_DIR}/cpu-targets-rows)
  set_tests_properties("bench: cpu_targets.py --rows writes every type's rows at every thread count and the whole decodes" PROPERTIES
                       LABELS "bench;unsanitized"
                       PASS_REGULAR_EXPRESSION "[|] bf16 [|] 1 [|]  [|] [0-9.]+ ms, floor x [0-9.]+ [|].*[|] q8_0 [|] 2 [|] [0-9]+ ms, [0-9.]+ % of (AMX int8|vpdpbusd|[a-z0-9-]+) [|].*[|] q4_k_m [|] 2 [|].* m?s/forward [(][0-9]+[)] [|].*dlm-bench-forward --shape tiny-k --dtype q4_k_m .*--threads 1,2 .*--decode")
  endif()
  # scripts/build-llamacpp.sh (the llama.cpp the comparisons time; downloading and building it takes
  # minutes, so the suite checks only that bad arguments are refused, by name, before any of that).
  add_test(NAME "bench: build-llamacpp.sh refuses an unknown option and a --jobs that is not a count, naming them"
         COMMAND bash -c "! ${PROJECT_SOURCE_DIR}/scripts/build-llamacpp.sh --nope 2>&1 && ! ${PROJECT_SOURCE_DIR}/scripts/build-llamacpp.sh --jobs 0 --dest /nonexistent/x 2>&1")
  set_tests_properties("bench: build-llamacpp.sh refuses an unknown option and a --jobs that is not a count, naming them" PROPERTIES
                     LABELS bench PASS_REGULAR_EXPRESSION "unknown option '--nope'.*--jobs must be a number >= 1, not '0'")
endif()
