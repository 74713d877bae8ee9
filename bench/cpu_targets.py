#!/usr/bin/env python3
"""Issue 23's CPU targets, measured in one run and checked against their goals.

Runs, on this machine and in this order (each ratio from a run that measures its own peaks and
read bandwidth, never a timed test):
  small   dlm-bench-forward --shape 168M --dtype bf16 --canvas 128 --threads 1: the 128-row full
          forward's % of the one-core peak of its product form (goal: >= 40 % of AMX bf16)
  big     dlm-bench-forward --shape llada-8b --dtype bf16|q8_0|q4_k_m --canvas 256 --block 32
          --cache 512 --threads T (2): `block` (32 rows over a 512-position cache) against the
          weight-streaming floor (goals: bf16 <= 1.3x, Q8_0 <= 1.5x, Q4_K_M <= 2x) and bf16's
          256-row `full` (goal: >= 40 % of the AMX bf16 peak, or within 1.5x of the floor if
          that is the larger time); `fill` (544 rows) is printed, it has no goal
  decode  dlm-make-checkpoint --shape llada-8b --format gguf --type q4_k_m (kept in --out and
          reused), then dlm-generate --preset cdlm on it: seconds per forward (goal: <= 0.499 s,
          10x fewer than the 4.99 s issue 23 started from)
  torch   with --torch PYTHON (a venv's python with torch: scripts/setup-torch-venv.sh):
          bench/compare_torch.py --threads 1 (goal: dlm >= 2x PyTorch's bf16 forward)
  llama   with --llama DIR (a llama.cpp build made outside dlm's sources: scripts/build-llamacpp.sh
          makes the one docs/benchmarks.md measured, with its AMX kernels where the CPU has tiles,
          and prints DIR): bench/compare_llamacpp.sh DIR --threads 1 (goal: dlm >= 3x llama.cpp in
          every type)

Prints a table of target, measured, goal and whether it is met, and writes every figure to
OUT/summary.json beside the runs' own JSON and logs (OUT: build/cpu-targets).

With --rows the big runs also take every count of --threads (e.g. 1,2; the goals are checked at
the largest) and one whole cdlm decode each (dlm-bench-forward --decode), and OUT/rows.md gets the
rows issue 23's "done when" asks docs/benchmarks.md for: the 8B shape in bf16, Q8_0 and Q4_K_M,
fill, block and full at each thread count, and the whole decodes, with the commands that ran. A goal stated
against the AMX peaks reads "no AMX" where the kernels are not amx (the % is then of the peak of
the form that ran). Memory: the bf16 8B shape holds 16 GB; --skip-big leaves the 8B cases out.

    python3 bench/cpu_targets.py                       # everything but the peers (about 15 min on 2 cores)
    python3 bench/cpu_targets.py --skip-big --skip-decode --small 168M
    python3 bench/cpu_targets.py --torch build/venv-torch/bin/python --llama "$(scripts/build-llamacpp.sh)"
    python3 bench/cpu_targets.py --rows --threads 1,2  # and docs/benchmarks.md's 8B rows in OUT/rows.md

Other options: --threads T or a list (2), --reps N (2), --gen N (64: decode slots, a multiple of 32), --tools DIR (the
dlm binaries: build/default), --big SHAPE, --small SHAPE (shapes the tests use to keep it short).
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROMPT = "Kim fills 5 boxes with 3 muffins each. She bakes 18 more. How many muffins does Kim have now?"
BLOCK_GOALS = {"bf16": 1.3, "q8_0": 1.5, "q4_k_m": 2.0}
DECODE_GOAL = 4.99 / 10


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.path.join(ROOT, "build", "cpu-targets"))
    p.add_argument("--tools", default=os.path.join(ROOT, "build", "default"))
    p.add_argument("--threads", default="2", help="a count, or a list such as 1,2 (goals at the largest)")
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--gen", type=int, default=64)
    p.add_argument("--big", default="llada-8b")
    p.add_argument("--small", default="168M")
    p.add_argument("--skip-big", action="store_true")
    p.add_argument("--skip-decode", action="store_true")
    p.add_argument("--torch", metavar="PYTHON")
    p.add_argument("--llama", metavar="DIR")
    p.add_argument("--rows", action="store_true", help="every --threads count and the whole decodes in the big runs; OUT/rows.md")
    a = p.parse_args()
    try:
        a.thread_list = sorted({int(x) for x in a.threads.split(",")})
    except ValueError:
        p.error(f"--threads takes a count or a list of counts such as 1,2, not '{a.threads}'")
    if a.thread_list[0] < 1 or a.reps < 1:
        p.error("--threads and --reps must be >= 1")
    if len(a.thread_list) > 1 and not a.rows:
        p.error("a list of --threads is for --rows (the goals take one count)")
    a.threads = a.thread_list[-1]
    if a.gen < 32 or a.gen % 32 != 0:
        p.error(f"--gen must be a multiple of the decode's 32-slot blocks, not {a.gen}")
    return a


def run(cmd, log, env=None):
    """Runs cmd, its output into log; returns the output, or exits naming the log."""
    print("  $ " + shlex.join(cmd), flush=True)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    with open(log, "w") as f:
        f.write(r.stdout)
    if r.returncode != 0:
        sys.exit(f"cpu_targets: {cmd[0]} exited with {r.returncode}; its output is in {log}:\n" + r.stdout[-2000:])
    return r.stdout


def bench_forward(a, name, args):
    path = os.path.join(a.out, name + ".json")
    run([os.path.join(a.tools, "bench", "dlm-bench-forward"), *args, "--json", path], os.path.join(a.out, name + ".log"))
    with open(path) as f:
        return json.load(f)


def case(j, label, threads):
    for c in j["cases"]:
        if c["case"] == label and c["threads"] == threads:
            return c
    sys.exit(f"cpu_targets: no '{label}' case at {threads} thread(s) in the run's JSON")


class Table:
    def __init__(self):
        self.rows = []

    def add(self, target, measured, goal, met, **figures):
        self.rows.append({"target": target, "measured": measured, "goal": goal, "met": met, **figures})

    def print(self):
        w = {k: max(len(k), *(len(r[k]) for r in self.rows)) for k in ("target", "measured", "goal")}
        print("\n" + "  ".join(f"{k:<{w[k]}}" for k in w) + "  met")
        for r in self.rows:
            met = {True: "yes", False: "no", None: "n/a"}[r["met"]]
            print("  ".join(f"{r[k]:<{w[k]}}" for k in w) + f"  {met}")


def amx_goal(c, kernels):
    """(met, note) for a goal of >= 40 % of an AMX peak: n/a where the kernels are not amx."""
    if kernels != "amx":
        return None, f"no AMX: {c['percent_of_peak']:.1f} % of {c['peak']}"
    return c["percent_of_peak"] >= 40.0, f"{c['percent_of_peak']:.1f} % of {c['peak']}"


def small_case(a, t):
    j = bench_forward(a, f"{a.small}-bf16", ["--shape", a.small, "--dtype", "bf16", "--canvas", "128", "--threads", "1", "--reps", str(a.reps + 3)])
    c = case(j, "full", 1)
    met, note = amx_goal(c, j["kernels"])
    t.add(f"{a.small} bf16 full 128 rows, 1 thread", f"{c['ms']:.2f} ms, {note}", ">= 40 % of AMX bf16 (1 core)", met, **{"case": c})
    return j["kernels"]


def big_args(a, dtype):
    args = ["--shape", a.big, "--dtype", dtype, "--canvas", "256", "--block", "32", "--cache", "512",
            "--threads", ",".join(map(str, a.thread_list)), "--reps", str(a.reps)]
    return args + ["--decode", "--gen", str(a.gen)] if a.rows else args


def big_cases(a, t, kernels, runs):
    for dtype, goal in BLOCK_GOALS.items():
        j = bench_forward(a, f"{a.big}-{dtype}", big_args(a, dtype))
        runs[dtype] = j
        b = case(j, "block", a.threads)
        t.add(f"{a.big} {dtype} block 32 rows, {a.threads} thread(s)", f"{b['ms']:.1f} ms, floor x {b['floor_ratio']:.2f}", f"floor x <= {goal}",
              b["floor_ratio"] <= goal, case=b)
        fill = case(j, "fill", a.threads)
        t.add(f"{a.big} {dtype} fill 544 rows, {a.threads} thread(s)", f"{fill['ms']:.0f} ms, {fill['percent_of_peak']:.1f} % of {fill['peak']}",
              "(no goal)", None, case=fill)
        if dtype != "bf16":
            continue
        f = case(j, "full", a.threads)
        # ">= 40 % of the peak, or within 1.5x of the floor if that is the larger time": the goal's time.
        goal_ms = max(f["flop"] / (0.4 * f["peak_rate"]) * 1e3 if f["peak_rate"] > 0 else 0.0, 1.5 * f["floor_ms"])
        amx = kernels == "amx"
        t.add(f"{a.big} bf16 full 256 rows, {a.threads} thread(s)", f"{f['ms']:.0f} ms, {f['percent_of_peak']:.1f} % of {f['peak']}",
              f"<= {goal_ms:.0f} ms (40 % of AMX bf16 or 1.5x floor)" if amx else ">= 40 % of AMX bf16, or 1.5x floor", f["ms"] <= goal_ms if amx else None,
              case=f, goal_ms=goal_ms if amx else None)


def decode_case(a, t):
    gguf = os.path.join(a.out, f"{a.big}-q4_k_m.gguf")
    if not os.path.exists(gguf):
        run([os.path.join(a.tools, "bench", "dlm-make-checkpoint"), "--shape", a.big, "--format", "gguf", "--type", "q4_k_m", "--out", gguf + ".part"],
            os.path.join(a.out, "make-checkpoint.log"))
        os.replace(gguf + ".part", gguf)
    cmd = [os.path.join(a.tools, "examples", "dlm-generate"), "-m", gguf, "--preset", "cdlm", "-n", str(a.gen), "--block-length", "32",
           "-t", str(a.threads), "--stats", "-p", PROMPT]
    out = run(cmd, os.path.join(a.out, "decode.log"))
    m = re.search(r"cdlm: (\d+) forwards.*latency ([0-9.]+) (us|ms|s)\b", out)
    if not m:
        sys.exit("cpu_targets: dlm-generate printed no 'cdlm: N forwards ... latency' line (decode.log)")
    forwards = int(m.group(1))
    per = float(m.group(2)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[m.group(3)] / forwards  # cli/stats.hpp's format_seconds
    t.add(f"{a.big} Q4_K_M cdlm decode, {a.threads} thread(s)", f"{per:.3f} s a forward ({forwards} forwards)", f"<= {DECODE_GOAL:.3f} s",
          per <= DECODE_GOAL, seconds_per_forward=per, forwards=forwards)
    return {"seconds_per_forward": per, "forwards": forwards, "command": [in_root(x) for x in cmd]}


def in_root(path):
    """A path under the repository as the README's commands write it (relative); others as they are."""
    rel = os.path.relpath(path, ROOT) if os.path.isabs(path) else path
    return path if rel.startswith("..") else rel


def seconds(s):
    return f"{s:.3f} s" if s >= 0.1 else f"{s * 1e3:.2f} ms"


def rows_table(a, kernels, runs, decode):
    """docs/benchmarks.md's rows for issue 23's "done when": OUT/rows.md, and printed."""
    bench = in_root(os.path.join(a.tools, "bench", "dlm-bench-forward"))
    out = [f"Kernels: {kernels}. Each run's ceilings are in its JSON (`ceilings`) in {a.out}; `fill` runs once, at the largest thread count,",
           "and the cdlm decode (dlm-bench-forward --decode: a 64-token prompt, random weights) too.", "",
           "| weights | threads | fill 544 rows | block 32 rows | full 256 rows | cdlm decode |",
           "|---|---:|---:|---:|---:|---:|"]
    for dtype, j in runs.items():
        d = j.get("decode")
        for th in a.thread_list:
            c = {k: case(j, k, th) for k in ("block", "full")}
            dec = f"{seconds(d['seconds_per_forward'])}/forward ({d['forwards']})" if d and d["threads"] == th else ""
            fill = f"{case(j, 'fill', th)['ms']:.0f} ms, {case(j, 'fill', th)['percent_of_peak']:.1f} % of {case(j, 'fill', th)['peak']}" if th == a.threads else ""
            out.append(f"| {dtype} | {th} | {fill} | "
                       f"{c['block']['ms']:.1f} ms, floor x {c['block']['floor_ratio']:.2f} | "
                       f"{c['full']['ms']:.0f} ms, {c['full']['percent_of_peak']:.1f} % of {c['full']['peak']}, floor x {c['full']['floor_ratio']:.2f} | {dec} |")
    if decode:
        out.append(f"| Q4_K_M file, dlm-generate | {a.threads} | | | | {seconds(decode['seconds_per_forward'])}/forward ({decode['forwards']}) |")
    out += ["", "Commands:", "", "```sh"] + [shlex.join([bench, *big_args(a, dtype)]) for dtype in runs]
    if decode:
        out.append(shlex.join(decode["command"]))
    out.append("```")
    with open(os.path.join(a.out, "rows.md"), "w") as f:
        f.write("\n".join(out) + "\n")
    print("\n" + "\n".join(out))


def peer_cases(a, t):
    if a.torch:
        out = run([a.torch, os.path.join(ROOT, "bench", "compare_torch.py"), "--threads", "1"], os.path.join(a.out, "torch.log"))
        m = re.search(r"dlm is ([0-9.]+)x PyTorch", out)
        if m:
            t.add("168M bf16 full vs PyTorch, 1 thread", f"{m.group(1)}x", ">= 2x", float(m.group(1)) >= 2.0, ratio=float(m.group(1)))
    if a.llama:
        out = run([os.path.join(ROOT, "bench", "compare_llamacpp.sh"), a.llama, "--threads", "1"], os.path.join(a.out, "llama.log"))
        for line in out.splitlines():
            m = re.match(r"(\S+)\s+\d+\s.*\s([0-9.]+)x\s*(.*)$", line)
            if m:
                t.add(f"168M {m.group(1)} full vs llama.cpp, 1 thread", f"{m.group(2)}x {m.group(3)}".strip(), ">= 3x", float(m.group(2)) >= 3.0,
                      ratio=float(m.group(2)))


def main():
    a = parse_args()
    os.makedirs(a.out, exist_ok=True)
    t = Table()
    print(f"issue 23's CPU targets: runs and logs in {a.out}")
    kernels = small_case(a, t)
    runs, decode = {}, None
    if not a.skip_big:
        big_cases(a, t, kernels, runs)
    if not a.skip_decode:
        decode = decode_case(a, t)
    peer_cases(a, t)
    if a.rows and runs:
        rows_table(a, kernels, runs, decode)
    print(f"\nkernels: {kernels} (the default build's choice on this machine; issue 23 is done when it is amx)")
    t.print()
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump({"kernels": kernels, "targets": t.rows}, f, indent=1)
    print(f"\nfigures: {os.path.join(a.out, 'summary.json')}")


if __name__ == "__main__":
    main()
