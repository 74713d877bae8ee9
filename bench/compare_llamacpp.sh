#!/usr/bin/env bash
# dlm against llama.cpp on the same GGUF files (issue 23's llama.cpp target): per type, one
# 128-row forward of a random-weight model of dlm's 168M shape in llama-bench and in dlm-bench-forward.
#
#   bench/compare_llamacpp.sh LLAMA_BUILD_DIR [--threads N] [--rows N] [--reps N] [--types "f32 bf16 ..."]
#                             [--dlm-bench PATH] [--make-checkpoint PATH] [--work DIR] [--shape NAME] [--seed N]
#
# LLAMA_BUILD_DIR is a llama.cpp CMake build (built from its source outside this repository; nothing of
# it is part of dlm) with bin/llama-bench, and optionally bin/llama-quantize. Files:
#   f32 f16 bf16 q8_0 q4_k_m  written by dlm-make-checkpoint --format gguf (the same random weights)
#   q4_0 q5_k_m q6_k          llama-quantize's of the f32 file (only where bin/llama-quantize exists)
# Default --types: every one of them that can be made; --work (default build/compare) keeps the files,
# so a second run reuses them.
#
# llama.cpp: llama-bench -m FILE -p ROWS -n 0 -t N -r REPS -fa off,on (the better flash-attention
# setting): a prompt of ROWS tokens in one ubatch is one ROWS-row forward. Its LLaDA graph
# (src/models/llada.cpp) attends bidirectionally and the context has no KV cache, so llama_decode runs
# llama_context::encode, which outputs every row: the LM head runs on all ROWS rows. That is the work
# of dlm's "full" case (bidirectional, logits of every row), not the causal prompt of an AR model.
# dlm: dlm-bench-forward -m FILE --canvas ROWS --threads N --reps REPS (its "full" line, best of REPS).
# DLM_ISA in the environment reaches dlm-bench-forward; the kernel path it ran is printed.
set -euo pipefail

name=$(basename "$0")
root=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "$name: $*" >&2; exit 1; }
usage() { sed -n '5,6p' "$0" | sed 's/^# \{0,3\}//' >&2; exit 2; }

(($# >= 1)) || usage
[[ $1 == -h || $1 == --help ]] && usage
llama=$(cd "$1" 2>/dev/null && pwd) || die "no llama.cpp build directory '$1'"
shift
threads=1 rows=128 reps=5 types="" shape=168M seed=1 work=$root/build/compare
dlm_bench=$root/build/default/bench/dlm-bench-forward
make_ckpt=$root/build/default/bench/dlm-make-checkpoint
while (($#)); do
    (($# >= 2)) || die "$1 needs a value"
    case $1 in
        --threads) threads=$2 ;;
        --rows) rows=$2 ;;
        --reps) reps=$2 ;;
        --types) types=$2 ;;
        --dlm-bench) dlm_bench=$2 ;;
        --make-checkpoint) make_ckpt=$2 ;;
        --work) work=$2 ;;
        --shape) shape=$2 ;;
        --seed) seed=$2 ;;
        *) die "unknown option '$1'" ;;
    esac
    shift 2
done
for v in threads rows reps seed; do [[ ${!v} =~ ^[0-9]+$ ]] || die "--$v must be a number, not '${!v}'"; done
((threads >= 1 && rows >= 1 && reps >= 1)) || die "--threads, --rows and --reps must be >= 1"
bench=$llama/bin/llama-bench
quantize=$llama/bin/llama-quantize
[[ -x $bench ]] || die "no $bench (build llama.cpp's llama-bench target)"
[[ -x $dlm_bench ]] || die "no $dlm_bench (cmake --build build/default --target dlm-bench-forward)"
[[ -x $make_ckpt ]] || die "no $make_ckpt (cmake --build build/default --target dlm-make-checkpoint)"
written="f32 f16 bf16 q8_0 q4_k_m"
quantized="q4_0 q5_k_m q6_k"
if [[ -z $types ]]; then
    types=$written
    [[ -x $quantize ]] && types="$types $quantized"
fi
mkdir -p "$work"

# file TYPE: the GGUF of that type, written (or quantized from the f32 one) when absent.
file() {
    local t=$1 f=$work/$shape-seed$seed-$1.gguf
    if [[ ! -s $f ]]; then
        if [[ " $written " == *" $t "* ]]; then
            "$make_ckpt" --shape "$shape" --format gguf --type "$t" --seed "$seed" --out "$f.part" 2>/dev/null ||
                die "dlm-make-checkpoint cannot write $t"
        elif [[ " $quantized " == *" $t "* ]]; then
            [[ -x $quantize ]] || die "type $t needs $quantize"
            "$quantize" "$(file f32)" "$f.part" "${t^^}" 1 >"$work/quantize-$t.log" 2>&1 ||
                die "llama-quantize cannot make $t (see $work/quantize-$t.log)"
        else
            die "unknown type '$t' (dlm-make-checkpoint: $written; llama-quantize: $quantized)"
        fi
        mv "$f.part" "$f"
    fi
    echo "$f"
}

# llama_ms FILE [ARGS...]: "BEST_MS FA" from llama-bench's JSON (the best sample over both flash-attention
# settings); exit status that of llama-bench.
llama_ms() {
    local f=$1 json
    shift
    json=$("$bench" -m "$f" -p "$rows" -n 0 -t "$threads" -r "$reps" -fa off,on "$@" -o json 2>"$work/llama-bench.err") || return
    python3 -c '
import json, sys
runs = json.loads(sys.stdin.read())
ms, fa = min((min(r["samples_ns"]) / 1e6, "fa-" + ("on" if r["flash_attn"] in (1, True, "on") else "off")) for r in runs)
print(f"{ms:.2f}", fa)
print(runs[0]["build_commit"], runs[0]["build_number"], runs[0]["cpu_info"].replace(" ", "_"), runs[0]["backends"], file=sys.stderr)
' <<<"$json" 2>"$work/llama-build-info"
}

# amx_note FILE: the AMX buffer llama.cpp's loader reports for FILE (a short verbose run), or none.
amx_note() {
    local line
    line=$("$bench" -m "$1" -p 16 -n 0 -t "$threads" -r 1 --no-warmup -v -o csv 2>&1 | grep -m1 -E "AMX.*buffer size" || true)
    if [[ -n $line ]]; then echo "${line##*: }" | sed 's/^ *//'; else echo "no AMX buffer"; fi
}

# dlm_ms FILE: sets dlm_time (ms of the full case) and dlm_kernels (the path it ran).
dlm_ms() {
    local out
    out=$("$dlm_bench" -m "$1" --canvas "$rows" --threads "$threads" --reps "$reps" --block 1 --cache 0 --no-peak 2>&1) ||
        { echo "$out" | tail -n 5 >&2; die "dlm-bench-forward failed on $1"; }
    dlm_kernels=$(sed -n 's/.*kernels \([^ ]*\).*/\1/p' <<<"$out" | head -n 1)
    dlm_time=$(sed -n 's/.*full .* thread(s): *\([0-9.]*\) ms.*/\1/p' <<<"$out" | head -n 1)
    [[ -n $dlm_time ]] || die "no 'full' line from dlm-bench-forward on $1"
}

echo "dlm vs llama.cpp: $shape random weights (seed $seed), one $rows-row forward, $threads thread(s), best of $reps"
echo "llama.cpp: $bench; dlm: $dlm_bench"
echo "The same work in both: llama.cpp's llada graph attends bidirectionally, and with no KV cache its"
echo "llama_decode runs encode(), which puts every row through the LM head, as dlm's full case does."
echo "llama.cpp ms: llama-bench pp$rows, the better of flash attention off/on (fa); ratio = llama.cpp / dlm."
fmt='%-7s %8s  %-12s %9s  %12s %-6s  %6s  %s\n'
printf "$fmt" type "MB" "dlm kernels" "dlm ms" "llama.cpp ms" "" ratio "llama.cpp's AMX buffer"
for t in $types; do
    f=$(file "$t")
    size=$(($(stat -c %s "$f") / 1000000))
    if res=$(llama_ms "$f"); then
        note=$(amx_note "$f")
    else
        # llama.cpp's AMX kernels fault in ldtilecfg when gcc 12 drops the stores that fill the tile
        # configuration (the trap in issue 23); without its extra buffers it runs, without AMX.
        rc=$?
        res=$(llama_ms "$f" --repack 0) || { tail -n 5 "$work/llama-bench.err" >&2; die "llama-bench failed on $f, with and without --repack 0"; }
        note="CRASHED (exit $rc) with its AMX/repacked buffers: timed with --repack 0 (no AMX)"
    fi
    read -r llama_time fa <<<"$res"
    dlm_ms "$f"
    ratio=$(python3 -c "print(f'{$llama_time / $dlm_time:.2f}x')")
    printf "$fmt" "$t" "$size" "$dlm_kernels" "$dlm_time" "$llama_time" "$fa" "$ratio" "$note"
done
echo "llama.cpp build (commit, number, CPU, backends): $(cat "$work/llama-build-info")"
echo "issue 23's target: ratio >= 3x in every type"
