#!/usr/bin/env bash
# The GPU check of dlm's CUDA backend, in one command (docs/cuda.md):
#
#   scripts/gpu-check.sh               configure the cuda preset, build test_cuda and dlm-bench-cuda, run
#                                      the CUDA tests (ctest -L cuda) and the benchmark, draw the roofline
#   scripts/gpu-check.sh --pack-prebuilt  build the CUDA test and benchmarks here (sm_90) and pack them into
#                                      build/gpu-carry for a GPU machine (run there with GPU_CHECK_PREBUILT=1)
#   scripts/gpu-check.sh --pack-deps   (on a machine with the Debian packages) pack the header-only
#                                      dependencies into build/gpu-deps.tar.gz, for a GPU machine that
#                                      has the CUDA toolkit but not nlohmann_json or doctest
#
# Results go to build/gpu-check/ (with $OUT set, the device machine's return folder, results.md and
# gpu-check.tar.gz of them all are copied there at the end):
#   results.md    date, GPU, toolchain, test summary, benchmark output, phase times and time-outs
#   bench.json    dlm-bench-cuda --json (ceilings, forwards, decoding, roofline series)
#   quick.json    dlm-bench-cuda --quick --json (a small model: every code path, in seconds)
#   gemm-sweep.json  dlm-bench-cuda --gemm-sweep --json (every GEMM path on Dream-7B's linear layers)
#   profile-PATH.json  dlm-bench-cuda --profile --json with DLM_CUDA_GEMM=PATH (cublas, skinny, lt, tc): the
#                 phases of an AR and a CDLM forward
#   ncu.csv       ncu's per-kernel times of one --profile run (row kernels, attention), summarised in results.md
#   roofline.png  tools/roofline.py's plot of bench.json (also copied to docs/img/ when $OUT is unset)
#   build.log, ctest.log, bench-quick.log, bench-gemm-sweep.log, bench-profile-PATH.log, bench.log
# Each phase is bounded (seconds; environment variables): GPU_CHECK_BUILD_S (default 600),
# GPU_CHECK_TEST_S (300), GPU_CHECK_QUICK_S (60), GPU_CHECK_SWEEP_S (120), GPU_CHECK_PROFILE_S (120, each
# of the three), GPU_CHECK_BENCH_S (300), GPU_CHECK_NCU_S (90, each of its two captures). A phase that runs out is
# recorded as timed out (with what its log holds so far) and the check goes on to the next one.
# Other knobs: GPU_CHECK_PREBUILT=1 skips configure and build and runs what build/cuda holds (binaries built
# elsewhere for sm_90 and carried: their tests name the build machine's source folder, which must then
# exist here too, e.g. as a link); GPU_CHECK_PHASES (default "tests quick sweep profile bench kv ncu") runs only
# the phases named (also "ncu-detail", not in the default: Nsight Compute's sections for one launch of the
# tensor-core attention and GEMM); GPU_CHECK_PROFILE_PATHS (default "cublas skinny lt tc") the GEMM paths profiled, each with
# every attention path of GPU_CHECK_ATTENTION_PATHS (default "auto simt": DLM_CUDA_ATTENTION);
# GPU_CHECK_CTEST_ARGS extra ctest arguments (say "-j 4 -E compile_fail": those need nvcc, not a GPU);
# GPU_CHECK_BASELINE a folder with another build's bench/dlm-bench-cuda whose profiles run beside these.
# Needs: nvcc (CUDA 12 or 13, /usr/local/cuda/bin or $NVCC or on PATH), cuBLAS, cmake >= 3.25, a C++20
# host compiler, make or ninja, python3 with matplotlib for the plot (skipped without it). Exits 1 when
# the build, a test or the benchmark fails, 77 when no GPU was usable (tests skipped), else 0.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
deps_tar=build/gpu-deps.tar.gz

if [[ "${1:-}" == "--pack-deps" ]]; then
    set -e
    stage=$(mktemp -d)
    mkdir -p "$stage/include" "$stage/share/cmake" "$stage/lib/cmake"
    cp -r /usr/include/nlohmann /usr/include/doctest "$stage/include/"
    cp -r /usr/share/cmake/nlohmann_json "$stage/share/cmake/"
    cp -r /usr/lib/cmake/doctest "$stage/lib/cmake/"
    # doctest's exported targets name /usr; make them relative to where the folder is unpacked.
    sed -i 's|^set(_IMPORT_PREFIX "/usr")|get_filename_component(_IMPORT_PREFIX "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)|' \
        "$stage/lib/cmake/doctest/doctestTargets.cmake"
    mkdir -p build
    tar -C "$stage" -czf "$deps_tar" .
    rm -rf "$stage"
    echo "gpu-check.sh: wrote $deps_tar ($(du -h "$deps_tar" | cut -f1)); carry it to the GPU machine"
    exit 0
fi

if [[ "${1:-}" == "--pack-prebuilt" ]]; then
    # Build the CUDA test and benchmarks here for sm_90 and pack what a GPU machine needs to run them into
    # build/gpu-carry (17 MB stripped): the binaries and the ctest files that name them.
    set -e
    cmake --preset cuda >/dev/null
    cmake --build build/cuda --target test_cuda dlm-bench-cuda -j "$(nproc 2>/dev/null || echo 2)"
    rm -rf build/gpu-carry
    (cd build/cuda && find . -path '*/CMakeFiles' -prune -o \( -name CTestTestfile.cmake -o -name '*_include.cmake' \) -print) |
        while read -r f; do
            mkdir -p "build/gpu-carry/$(dirname "$f")"
            cp "build/cuda/$f" "build/gpu-carry/$f"
        done
    mkdir -p build/gpu-carry/tests build/gpu-carry/bench
    cp build/cuda/tests/test_cuda build/gpu-carry/tests/
    cp build/cuda/bench/dlm-bench-cuda build/gpu-carry/bench/
    strip build/gpu-carry/tests/test_cuda build/gpu-carry/bench/dlm-bench-cuda*
    echo "gpu-check.sh: packed build/gpu-carry ($(du -sh build/gpu-carry | cut -f1)). On the GPU machine, in the checkout:"
    echo "  [ -e $repo ] || ln -s \"\$PWD\" $repo; rm -rf build/cuda; mv build/gpu-carry build/cuda; GPU_CHECK_PREBUILT=1 scripts/gpu-check.sh"
    exit 0
fi

# Results are written to build/gpu-check/. With $OUT set (a device machine's return folder, which brings
# back only a few files), results.md and gpu-check.tar.gz (every file of the check) are copied there when
# the check ends, however it ends.
out=$repo/build/gpu-check
rm -rf "$out"
mkdir -p "$out"
if [[ -n "${OUT:-}" ]]; then
    trap 'cp "$out/results.md" "$OUT/" 2>/dev/null; tar -C "$repo/build" -czf "$OUT/gpu-check.tar.gz" gpu-check' EXIT
fi
results="$out/results.md"
t_start=$(date +%s)
phase_times=()
phase() { phase_times+=("$1: $(($(date +%s) - t_phase)) s"); }
fail=0
skipped=0
build_s=${GPU_CHECK_BUILD_S:-600}
test_s=${GPU_CHECK_TEST_S:-300}
quick_s=${GPU_CHECK_QUICK_S:-60}
bench_s=${GPU_CHECK_BENCH_S:-300}
sweep_s=${GPU_CHECK_SWEEP_S:-120}
profile_s=${GPU_CHECK_PROFILE_S:-120}
ncu_s=${GPU_CHECK_NCU_S:-90}
# Runs "$@" for at most $1 seconds; 124 when it ran out.
bounded() {
    local limit=$1
    shift
    timeout --kill-after=10 "$limit" "$@"
}
timed_out() { echo "gpu-check.sh: $1 timed out after $2 s (see its log for how far it got)" | tee -a "$results"; }

nvcc=${NVCC:-}
[[ -z "$nvcc" && -x /usr/local/cuda/bin/nvcc ]] && nvcc=/usr/local/cuda/bin/nvcc
[[ -z "$nvcc" ]] && nvcc=$(command -v nvcc || true)
if [[ -z "$nvcc" ]]; then
    echo "gpu-check.sh: no nvcc (looked at \$NVCC, /usr/local/cuda/bin, PATH)" | tee "$results"
    exit 1
fi
configure_args=(-DCMAKE_CUDA_COMPILER="$nvcc")
if ! command -v make >/dev/null && command -v ninja >/dev/null; then
    configure_args+=(-G Ninja)
fi
if [[ -f "$deps_tar" ]]; then
    mkdir -p build/gpu-deps && tar -C build/gpu-deps -xzf "$deps_tar"
    configure_args+=(-DCMAKE_PREFIX_PATH="$repo/build/gpu-deps")
fi
jobs=$(nproc 2>/dev/null || echo 4)

{
    echo "# dlm GPU check"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- commit: $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$repo" diff --quiet 2>/dev/null || echo ' (with local changes)')"
    echo "- GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo 'nvidia-smi not available')"
    echo "- nvcc: $("$nvcc" --version | tail -2 | head -1)"
    echo "- host compiler: $(c++ --version 2>/dev/null | head -1)"
    echo "- cmake: $(cmake --version | head -1)"
    echo
} >"$results"

phases=" ${GPU_CHECK_PHASES:-tests quick sweep profile bench kv ncu} "
wants() { [[ "$phases" == *" $1 "* ]]; }

# 1. Configure and build only what the check runs (or take the carried build).
t_phase=$(date +%s)
if [[ -n "${GPU_CHECK_PREBUILT:-}" ]]; then
    if [[ ! -x build/cuda/tests/test_cuda || ! -x build/cuda/bench/dlm-bench-cuda ]]; then
        echo "gpu-check.sh: GPU_CHECK_PREBUILT is set but build/cuda holds no test_cuda and dlm-bench-cuda" | tee -a "$results"
        exit 1
    fi
    echo "- build: prebuilt (GPU_CHECK_PREBUILT), not rebuilt here" >>"$results"
    phase build
elif rm -f build/cuda/CMakeCache.txt && cmake --preset cuda "${configure_args[@]}" >"$out/build.log" 2>&1 &&
    bounded "$build_s" cmake --build build/cuda --target test_cuda dlm-bench-cuda -j "$jobs" >>"$out/build.log" 2>&1; then
    phase build
else
    rc=$?
    phase build
    ((rc == 124)) && timed_out build "$build_s"
    echo "gpu-check.sh: the build failed; see build.log" | tee -a "$results"
    if grep -qE "dlm::cpu \(loaders, CPU model\) is not available|Could not find a package configuration file provided by \"doctest\"" "$out/build.log"; then
        echo "gpu-check.sh: nlohmann_json or doctest is missing here: run 'scripts/gpu-check.sh --pack-deps' where they are" \
            "installed and bring $deps_tar along" | tee -a "$results"
    fi
    tail -40 "$out/build.log" >>"$results"
    exit 1
fi

# 2. The CUDA tests (label cuda: the GPU suites and the nvcc compile-fail cases).
if wants tests; then
t_phase=$(date +%s)
# shellcheck disable=SC2086  # GPU_CHECK_CTEST_ARGS is a list of arguments
bounded "$test_s" ctest --test-dir build/cuda -L cuda --output-on-failure --timeout 120 ${GPU_CHECK_CTEST_ARGS:-} >"$out/ctest.log" 2>&1
rc=$?
((rc != 0)) && fail=1
phase tests
((rc == 124)) && timed_out tests "$test_s"
{
    echo "## Tests (ctest -L cuda)"
    echo
    echo '```'
    grep -E "tests passed|tests failed|Test +#|\*\*\*" "$out/ctest.log" | tail -30
    echo '```'
    echo
} >>"$results"
if grep -q "Skipped" "$out/ctest.log"; then
    echo "gpu-check.sh: tests were skipped (no usable GPU?)" | tee -a "$results"
    skipped=1
fi
fi

# 3. The benchmark: first the small model (every code path, seconds), then the Dream-7B shape.
bench() {  # name, limit, log, arguments... (the binary: $bench_bin, default build/cuda's)
    local name=$1 limit=$2 log=$3
    shift 3
    t_phase=$(date +%s)
    bounded "$limit" stdbuf -oL "${bench_bin:-build/cuda/bench/dlm-bench-cuda}" "$@" >"$out/$log" 2>&1  # lines kept if cut off
    local rc=$?
    if ((rc == 77)); then
        echo "gpu-check.sh: dlm-bench-cuda found no CUDA device: skipped" | tee -a "$results"
        skipped=1
    elif ((rc == 124)); then
        timed_out "$name" "$limit"
        fail=1
    elif ((rc != 0)); then
        echo "gpu-check.sh: $name failed (exit $rc); see $log" | tee -a "$results"
        fail=1
    fi
    phase "$name"
    {
        echo "## $name (dlm-bench-cuda $*)"
        echo
        echo '```'
        cat "$out/$log"
        echo '```'
        echo
    } >>"$results"
}
wants quick && bench "quick benchmark" "$quick_s" bench-quick.log --quick --json "$out/quick.json"
# The GEMM paths (docs/cuda.md, "GEMM paths"): each on the Dream-7B linear layers, then where a forward's
# time goes with each.
wants sweep && bench "GEMM sweep" "$sweep_s" bench-gemm-sweep.log --gemm-sweep --json "$out/gemm-sweep.json"
# With GPU_CHECK_BASELINE (a folder holding another build's bench/dlm-bench-cuda, say another commit's
# gpu-carry), each path's profile runs on the baseline right after this build's, on the same GPU in the
# same lease: a change's before and after (profile-base-PATH.json).
baseline=${GPU_CHECK_BASELINE:-}
if [[ -n "$baseline" && ! -x "$baseline/bench/dlm-bench-cuda" ]]; then
    echo "gpu-check.sh: GPU_CHECK_BASELINE=$baseline holds no bench/dlm-bench-cuda: no baseline profiles" | tee -a "$results"
    baseline=
fi
if wants profile; then
    for gemm in ${GPU_CHECK_PROFILE_PATHS:-cublas skinny lt tc}; do
        for att in ${GPU_CHECK_ATTENTION_PATHS:-auto simt}; do
            tag=$gemm
            [[ "$att" != auto ]] && tag=$gemm-attention-$att
            DLM_CUDA_GEMM=$gemm DLM_CUDA_ATTENTION=$att bench "profile (DLM_CUDA_GEMM=$gemm, DLM_CUDA_ATTENTION=$att)" "$profile_s" \
                "bench-profile-$tag.log" --profile --json "$out/profile-$tag.json"
        done
        [[ -n "$baseline" ]] && DLM_CUDA_GEMM=$gemm bench_bin="$baseline/bench/dlm-bench-cuda" \
            bench "baseline profile (DLM_CUDA_GEMM=$gemm)" "$profile_s" "bench-profile-base-$gemm.log" --profile --json "$out/profile-base-$gemm.json"
    done
fi
# The host decoder is timed at batch 1 only: at batch 8 it samples 152k-entry rows on one CPU core and
# took the 2026-11-30 run past its 150 s; the Dream-7B run with these lists took under 112 s on an H200.
wants bench && bench "benchmark" "$bench_s" bench.log --host-batches 1 --json "$out/bench.json"
# The same profile with a bf16 KV cache (its attention reads half the bytes): dlm-bench-cuda --kv bf16.
wants kv && bench "profile (bf16 KV cache)" "$profile_s" bench-profile-kv-bf16.log --kv bf16 --profile --json "$out/profile-kv-bf16.json"

# Per-kernel times of the row kernels and the attention (the phases the profile cannot split: a
# prefill, the AR steps and the CDLM steps of one --profile run), by Nsight Compute where it is installed.
if wants ncu; then
    t_phase=$(date +%s)
    ncu_bin=${NCU:-$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)}
    if [[ -z "$ncu_bin" ]]; then
        echo "gpu-check.sh: no ncu here (\$NCU, PATH, /usr/local/cuda/bin): the ncu phase is skipped" | tee -a "$results"
    else
        # One capture per step (--profile-only): each begins with the prefill that fills the step's cache
        # (its launches have the whole canvas's grid), then the step's own forwards.
        for step in ar cdlm; do
            bounded "$ncu_s" "$ncu_bin" --clock-control none --metrics gpu__time_duration.sum --csv \
                -k 'regex:attention|rms_norm|qkv_epilogue|silu_gate' --launch-count 600 build/cuda/bench/dlm-bench-cuda --profile-only "$step" \
                >"$out/ncu-$step.csv" 2>"$out/ncu-$step.log"
            rc=$?
            ((rc == 124)) && timed_out "ncu ($step)" "$ncu_s"
            {
                echo "## Kernels of the $step step's run (ncu, tools/ncu_kernels.py)"
                echo
                echo '```'
                python3 tools/ncu_kernels.py "$out/ncu-$step.csv" 2>&1
                echo '```'
                echo
            } >>"$results"
        done
    fi
    phase ncu
fi

# Nsight Compute's sections (speed of light, memory, warp states, scheduler, occupancy, launch, source
# counters) for one launch of each kernel the next work is on: the CDLM step's tensor-core attention and
# the tensor-core GEMM on gate/up and on q/k/v at 33 rows (not in the default phases: ask for
# "ncu-detail"). Each capture's text goes to ncu-detail-NAME.txt; results.md gets its headline figures.
if wants ncu-detail; then
    t_phase=$(date +%s)
    ncu_bin=${NCU:-$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)}
    if [[ -z "$ncu_bin" ]]; then
        echo "gpu-check.sh: no ncu here (\$NCU, PATH, /usr/local/cuda/bin): the ncu-detail phase is skipped" | tee -a "$results"
    else
        sections=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats
                  --section Occupancy --section LaunchStats --section SourceCounters)
        bench_bin=build/cuda/bench/dlm-bench-cuda
        # The CDLM step's run starts with its prefill's 28 attention launches: skip 40 to take a step's.
        bounded "$ncu_s" "$ncu_bin" "${sections[@]}" -k regex:attention_tc --launch-skip 40 --launch-count 1 "$bench_bin" --profile-only cdlm \
            >"$out/ncu-detail-attention.txt" 2>&1
        for shape in gate/up q/k/v; do
            bounded "$ncu_s" "$ncu_bin" "${sections[@]}" -k regex:tc_gemm --launch-count 1 "$bench_bin" --gemm-sweep --sweep-rows 33 \
                --sweep-shapes "$shape" >"$out/ncu-detail-tc-gemm-${shape//\//}.txt" 2>&1
        done
        {
            echo "## Kernel details (ncu sections; the whole text in ncu-detail-*.txt)"
            echo
            echo '```'
            grep -HE "^  void |Duration|DRAM Throughput|Registers Per Thread|Achieved Active Warps|Warp Cycles Per Issued" \
                "$out"/ncu-detail-*.txt 2>&1 | sed "s|$out/||"
            echo '```'
            echo
        } >>"$results"
    fi
    phase ncu-detail
fi

# 4. The roofline.
if [[ -f "$out/bench.json" ]]; then
    py=python3
    command -v "$py" >/dev/null || py=/usr/bin/python3
    if "$py" tools/roofline.py "$out/bench.json" -o "$out/roofline.png" >>"$out/bench.log" 2>&1; then
        [[ -z "${OUT:-}" ]] && mkdir -p docs/img && cp "$out/roofline.png" docs/img/roofline.png
        echo "Roofline: roofline.png" >>"$results"
    else
        echo "gpu-check.sh: no roofline drawn (see bench.log)" | tee -a "$results"
    fi
fi

{
    echo
    echo "## Phases"
    echo
    for p in "${phase_times[@]}"; do echo "- $p"; done
    echo "- total: $(($(date +%s) - t_start)) s"
} >>"$results"
if ((fail)); then
    echo "gpu-check.sh: results in $out: FAILED"
    exit 1
elif ((skipped)); then
    echo "gpu-check.sh: results in $out: nothing ran on a GPU (exit 77)"
    exit 77
fi
echo "gpu-check.sh: results in $out: passed"
