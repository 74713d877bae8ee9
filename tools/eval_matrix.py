#!/usr/bin/env python3
"""Runs dlm-eval over the whole evaluation matrix of dlm's shipped models and writes docs/results.md
and the accuracy-against-latency plot.

    tools/eval_matrix.py                       # every row, 500 test problems, 1 thread, batch 1
    tools/eval_matrix.py --limit 50 --out /tmp/results.md --plot /tmp/results.png   # a quick look
    tools/eval_matrix.py --only baseline,cdlm  # some rows (the others are read from --work if there)
    tools/eval_matrix.py --data tools/data/val.jsonl --data2 '' --out /tmp/val.md   # design choices: validation only

Every row runs on --data (default tools/data/test.jsonl; latency, forwards and accuracy) and again on
--data2 (default tools/data/test2.jsonl, the second test split; accuracy), and the document breaks
both splits' accuracy down by the number of operations a problem needs (tools/score.py --by-ops).

Each row is one `dlm-eval` run (C++): build/native/bench/dlm-eval when it exists (the shipped
results: `cmake --preset default -B build/native -DDLM_NATIVE=ON && cmake --build build/native
--target dlm-eval`), else build/default's or build/dev's, or --eval PATH. Its JSON
and its completions (ROW.predictions.jsonl) go to --work (default /tmp/dlm-eval-matrix); a row whose JSON was made by the same command is
reused unless --fresh, so an interrupted run resumes where it stopped. The document is regenerated
from the JSONs; the text below the line `<!-- hand-written notes below -->` of an existing --out is
kept. Exit status: 0 done, 1 a row failed, 2 bad arguments or a missing tool.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

import score

REPO = Path(__file__).resolve().parent.parent
NOTES_MARK = "<!-- hand-written notes below -->"

# id, model folder, preset, extra dlm-eval flags, what the row shows
ROWS = [
    ("baseline", "teacher", "llada", ["--steps", "48"], "the baseline: full diffusion, one token per forward (steps = gen length)"),
    ("teacher-llada-24", "teacher", "llada", ["--steps", "24"], "naive step reduction: half the steps, two tokens per forward"),
    ("teacher-llada-12", "teacher", "llada", ["--steps", "12"], "naive step reduction: a quarter of the steps"),
    ("teacher-dream", "teacher", "dream", [], "Dream's sampler (origin), steps = gen length, one canvas-wide block"),
    ("teacher-fast-dllm", "teacher", "fast-dllm", [], "Fast-dLLM: threshold 0.9 in blocks, approximate prefix cache"),
    ("teacher-fast-dllm-dual", "teacher", "fast-dllm-dual", [], "Fast-dLLM: threshold 0.9, dual cache"),
    ("teacher-cdlm", "teacher", "cdlm", [], "ablation: CDLM's decoder (block-causal, exact cache, threshold 0.9) on the undistilled teacher"),
    ("teacher-cd4lm", "teacher", "cd4lm", [], "ablation: CD4LM's confidence-adaptive decoder on the undistilled teacher"),
    ("cdlm", "cdlm", "cdlm", [], "CDLM student, CDLM decoder (the default model and preset)"),
    ("cdlm-llada", "cdlm", "llada", ["--steps", "48"], "ablation: CDLM student under the baseline decoder"),
    ("cdlm-llada-12", "cdlm", "llada", ["--steps", "12"], "CDLM student, a quarter of the steps (vs teacher-llada-12)"),
    ("cd4lm", "cd4lm", "cd4lm", [], "CD4LM student, confidence-adaptive decoder"),
    ("cd4lm-llada-12", "cd4lm", "llada", ["--steps", "12"], "CD4LM student, a quarter of the steps (vs teacher-llada-12)"),
    ("ar", "ar", "autoregressive", [], "autoregressive baseline, same size, KV cache"),
]


def find_eval(arg: str | None) -> Path:
    candidates = [Path(arg)] if arg else [REPO / f"build/{d}/bench/dlm-eval" for d in ("native", "default", "dev")]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    raise SystemExit(f"eval_matrix.py: no dlm-eval at {', '.join(map(str, candidates))}; build it first "
                     "(cmake --workflow --preset default) or pass --eval PATH")


def files_of(work: Path, rid: str, tag: str) -> tuple[Path, Path]:
    """A row's JSON and predictions in --work; tag "" for --data, ".<stem>" for --data2."""
    return work / f"{rid}{tag}.json", work / f"{rid}{tag}.predictions.jsonl"


def run_row(exe: Path, row, args, work: Path, data: Path, tag: str = "") -> dict:
    rid, model, preset, extra, _ = row
    out, preds = files_of(work, rid, tag)
    cmd = [str(exe), "-m", str(args.models / model), "--preset", preset, *extra, "--data", str(data), "--batch", "1",
           "--threads", str(args.threads), "--json", str(out), "--predictions", str(preds), "--no-progress"]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    key = shlex.join(cmd)
    if not args.fresh and out.is_file():
        old = json.loads(out.read_text())
        if old.get("command") == key:
            print(f"  {rid}{tag}: reused {out}", flush=True)
            return old
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stdout + p.stderr)
        raise RuntimeError(f"row {rid}{tag} failed (exit {p.returncode}): {key}")
    r = json.loads(out.read_text())
    r["command"] = key
    r["commit"] = git_head()  # the tree the row ran from: build dlm-eval from it before the run
    out.write_text(json.dumps(r, indent=2) + "\n")
    print(f"  {rid}{tag}: accuracy {100 * r['accuracy']:.1f} %, {r['mean_forwards']:.2f} forwards, "
          f"latency {1e3 * r['latency_mean_s']:.2f} ms ({time.time() - t0:.0f} s)", flush=True)
    return r


def ms(s: float) -> str:
    return f"{1e3 * s:.2f}"


def build_of(exe: Path) -> str:
    """How the dlm-eval binary was built, from the CMakeCache.txt of its build folder."""
    cache = exe.resolve().parent.parent / "CMakeCache.txt"
    found = {}
    try:
        for line in cache.read_text().splitlines():
            for key in ("CMAKE_BUILD_TYPE", "DLM_NATIVE", "CMAKE_CXX_COMPILER"):
                if line.startswith(key + ":"):
                    found[key] = line.split("=", 1)[1]
    except OSError:
        return "an unknown build"
    native = found.get("DLM_NATIVE", "OFF").upper() in ("ON", "TRUE", "1")
    return (f"a {found.get('CMAKE_BUILD_TYPE') or 'default'} build with {Path(found.get('CMAKE_CXX_COMPILER', 'c++')).name}"
            + (", `-DDLM_NATIVE=ON` (-O3 -march=native)" if native else ", portable flags (no -march=native)"))


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} logical cores"


def git_head() -> str:
    """The commit, and how many files of the C++ sources differed from it (the binary was built from them)."""
    def git(*a):
        return subprocess.run(["git", "-C", str(REPO), *a], capture_output=True, text=True, check=True).stdout.strip()
    try:
        head = git("rev-parse", "--short", "HEAD")
        dirty = git("diff", "--name-only", "HEAD", "--", "include", "bench", "examples", "CMakeLists.txt").splitlines()
    except (OSError, subprocess.CalledProcessError):
        return "`unknown`"
    return f"`{head}`" + (f" plus uncommitted edits to {len(dirty)} source files ({', '.join(dirty[:4])}"
                          f"{', ...' if len(dirty) > 4 else ''})" if dirty else "")


def bar_lines(res: dict) -> list[str]:
    b = res.get("baseline")
    lines = []
    if not b:
        return ["The baseline row was not run, so the bar cannot be checked."]

    def check(rid, what, need_fwd, need_lat, max_drop):
        r = res.get(rid)
        if not r:
            lines.append(f"- {what}: row `{rid}` not run.")
            return
        fwd = b["mean_forwards"] / r["mean_forwards"]
        lat = b["latency_mean_s"] / r["latency_mean_s"]
        drop = 100 * (b["accuracy"] - r["accuracy"])
        parts, ok = [], True
        if need_fwd:
            parts.append(f"{fwd:.2f}x fewer forwards (needs {need_fwd}x)")
            ok &= fwd >= need_fwd
        parts.append(f"{lat:.2f}x lower mean latency (needs {need_lat}x)")
        ok &= lat >= need_lat
        parts.append(f"accuracy {100 * r['accuracy']:.1f} % vs {100 * b['accuracy']:.1f} % "
                     f"({-drop:+.1f} points; allowed {'-' + str(max_drop) if max_drop else '0'})")
        ok &= drop <= max_drop + 1e-9
        lines.append(f"- {what}: {'**met**' if ok else '**not met**'}: " + "; ".join(parts) + ".")

    check("cdlm", "CDLM student with cdlm", 4, 5, 2)
    check("cd4lm", "CD4LM student with cd4lm", None, 3, 0)
    lines.append(f"- Teacher baseline accuracy: {100 * b['accuracy']:.1f} % (aim: above 80 %).")
    return lines


def rel(path: Path) -> str:
    return str(path.resolve().relative_to(REPO)) if path.resolve().is_relative_to(REPO) else str(path)


def splits_of(args) -> list[tuple[Path, str]]:
    """(data file, file tag) of each split the rows run on: --data, then --data2 if given."""
    return [(args.data, "")] + ([(args.data2, f".{args.data2.stem}")] if args.data2 else [])


def by_ops(args, rid: str) -> list[dict[int, tuple[int, int]] | None]:
    """Per split: {operation count: (correct, problems)} from the row's predictions, None if not run."""
    out = []
    for data, tag in splits_of(args):
        preds_file = files_of(args.work, rid, tag)[1]
        if not preds_file.is_file():
            out.append(None)
            continue
        preds = [score.completion_of(json.loads(l)) for l in preds_file.read_text().splitlines() if l.strip()]
        refs = score.read_refs(data)[:len(preds)]
        out.append(score.by_ops(refs, preds))
    return out


def ops_lines(args) -> list[str]:
    """The section that reports every split, overall and per operation count."""
    splits = splits_of(args)
    sizes = []  # per split: {operation count: problems}
    for data, _ in splits:
        refs = score.read_refs(data)[:args.limit or None]
        sizes.append({k: sum(1 for r in refs if score.ops_of(r) == k) for k in sorted({score.ops_of(r) for r in refs})})
    names = [f"`{data.stem}`" for data, _ in splits]
    head, rule = "| row |", "|---|"
    for name, size in zip(names, sizes):
        head += f" {name} all |" + "".join(f" {k} op{'s' if k != 1 else ''} |" for k in size)
        rule += "---:|" * (1 + len(size))
    described = [f"{name} (`{rel(data)}`, {sum(size.values())} problems: "
                 + ", ".join(f"{n} with {k} operation{'s' if k != 1 else ''}" for k, n in size.items()) + ")"
                 for name, (data, _), size in zip(names, splits, sizes)]
    out = ["", "## Both test splits, by operations per problem", "",
           "Exact-match accuracy of every row on " + " and on ".join(described) + ", each split decoded with the row's "
           "command and its own `--data`. A problem needs one operation per working line of its reference answer "
           "(`tools/score.py --by-ops`).", "", head, rule]
    for rid, *_ in ROWS:
        per = by_ops(args, rid)
        if all(x is None for x in per):
            continue
        cells = []
        for size, x in zip(sizes, per):
            if x is None:
                cells += ["-"] * (1 + len(size))
                continue
            cells.append(f"{100 * sum(c for c, _ in x.values()) / sum(n for _, n in x.values()):.1f} %")
            cells += [f"{100 * x[k][0] / x[k][1]:.1f} %" if k in x else "-" for k in size]
        out.append(f"| `{rid}` | " + " | ".join(cells) + " |")
    return out


def write_doc(args, res: dict, plot_rel: str | None, exe: Path) -> None:
    b = res.get("baseline")
    old_notes = ""
    if args.out.is_file():
        text = args.out.read_text()
        if NOTES_MARK in text:
            old_notes = text.split(NOTES_MARK, 1)[1].lstrip("\n")
    any_r = next(iter(res.values()))
    cmdline = "tools/eval_matrix.py" + "".join(f" {a}" for a in sys.argv[1:])
    out = [
        "# Results: dlm's small models on the synthetic math task",
        "",
        "<!-- Generated by tools/eval_matrix.py from dlm-eval's JSON output; edit only below the notes mark. -->",
        "",
        f"Measured {datetime.date.today().isoformat()} at commit {' and '.join(sorted({r.get('commit', '`unknown`') for r in res.values()}))} "
        f"on {machine()}, with",
        "",
        "```sh",
        cmdline,
        "```",
        "",
        f"which runs `{rel(exe)}` ({build_of(exe)}) once per row on `{rel(args.data)}` "
        f"({any_r['problems']} problems), one problem at a time (`--batch 1`), {args.threads} CPU thread(s), greedy, "
        f"seed 0, {any_r['gen_length']} generation slots. The models are in `models/` (docs/models.md, "
        "tools/train/README.md). Latency is the wall time of one problem's decode (tokenizing excluded); "
        "forwards are the model calls per problem; tokens/forward counts committed slots, EOS padding included.",
        "",
        "| row | model | preset | accuracy | forwards / problem | tokens / forward | latency mean / p50 / p95 (ms) | answer tokens/s | fewer forwards | lower latency |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for rid, model, preset, extra, _ in ROWS:
        r = res.get(rid)
        if not r:
            continue
        fwd = f"{b['mean_forwards'] / r['mean_forwards']:.2f}x" if b else "-"
        lat = f"{b['latency_mean_s'] / r['latency_mean_s']:.2f}x" if b else "-"
        out.append(f"| `{rid}` | {model} | {preset}{(' ' + ' '.join(extra)) if extra else ''} | {100 * r['accuracy']:.1f} % | "
                   f"{r['mean_forwards']:.2f} | {r['tokens_per_forward']:.2f} | {ms(r['latency_mean_s'])} / {ms(r['latency_p50_s'])} / "
                   f"{ms(r['latency_p95_s'])} | {r['tokens_per_second']:.0f} | {fwd} | {lat} |")
    out += ["", "Ratios are against `baseline` (teacher, llada, 48 steps) from the same run.", "", "What each row shows:", ""]
    for rid, model, preset, extra, what in ROWS:
        if rid in res:
            out.append(f"- `{rid}`: {what}; settings `{res[rid]['settings']}`.")
    out += ops_lines(args)
    out += ["", "## The bar (CDLM's and CD4LM's full-scale claims)", ""] + bar_lines(res)
    if plot_rel:
        out += ["", "## Accuracy against latency", "", f"![accuracy against mean latency per problem, one point per row]({plot_rel})"]
    out += ["", NOTES_MARK, "", old_notes.rstrip() if old_notes else "", ""]
    args.out.write_text("\n".join(out).rstrip() + "\n")


def plot(res: dict, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("eval_matrix.py: matplotlib is not installed (apt-get install python3-matplotlib); no plot drawn", file=sys.stderr)
        return False
    colours = {"teacher": "#1f77b4", "cdlm": "#d62728", "cd4lm": "#2ca02c", "ar": "#7f7f7f"}
    fig, ax = plt.subplots(figsize=(9, 6), dpi=110)
    points = []
    for rid, model, preset, extra, _ in ROWS:
        r = res.get(rid)
        if not r:
            continue
        x, y = 1e3 * r["latency_mean_s"], 100 * r["accuracy"]
        ax.scatter([x], [y], s=46, color=colours[model], edgecolor="black" if rid in ("baseline", "cdlm", "cd4lm") else "none",
                   zorder=3, label=model)
        points.append((rid, x, y))
    ax.set_xscale("log")
    ys = [p[2] for p in points]
    ax.set_ylim(max(0.0, min(ys) - 8), min(100.0, max(ys) + 8) if max(ys) > 0 else 10)
    fig.canvas.draw()
    # labels: the first offset (points) whose box overlaps no label placed before
    placed = []
    offsets = [(5, 4), (5, -11), (5, 15), (5, -22), (5, 26), (-8, 4), (5, -33), (5, 37)]
    for rid, x, y in sorted(points, key=lambda p: (p[1], p[2])):
        px, py = ax.transData.transform((x, y)) * 72 / fig.dpi
        w, h = 4.3 * len(rid), 9
        for dx, dy in offsets:
            bx = px + dx - (w if dx < 0 else 0)
            box = (bx, py + dy, bx + w, py + dy + h)
            if not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in placed):
                break
        placed.append(box)
        ax.annotate(rid, (x, y), textcoords="offset points", xytext=(dx, dy), fontsize=7.5,
                    ha="right" if dx < 0 else "left", arrowprops=None if abs(dy) < 10 else {"arrowstyle": "-", "lw": 0.4, "color": "0.5"})
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    ax.legend(uniq.values(), [f"{k} model" for k in uniq], loc="best", fontsize=8)
    ax.set_xlabel("mean latency per problem (ms, log scale, batch 1)")
    ax.set_ylabel("exact-match accuracy (%)")
    ax.set_title("dlm's small models: accuracy against latency (tools/eval_matrix.py)", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--eval", help="dlm-eval binary (default: build/default/bench/dlm-eval, else build/dev/...)")
    ap.add_argument("--models", type=Path, default=REPO / "models")
    ap.add_argument("--data", type=Path, default=REPO / "tools/data/test.jsonl",
                    help="the split of the main table (latency, forwards, accuracy)")
    ap.add_argument("--data2", type=lambda a: Path(a) if a else None, default=REPO / "tools/data/test2.jsonl",
                    help="a second split, accuracy only ('' for none; default: tools/data/test2.jsonl)")
    ap.add_argument("--limit", type=int, default=0, help="first N problems only (default: all)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--only", default="", help="comma-separated row ids to run (default: all)")
    ap.add_argument("--fresh", action="store_true", help="rerun rows whose JSON exists")
    ap.add_argument("--work", type=Path, default=Path("/tmp/dlm-eval-matrix"))
    ap.add_argument("--out", type=Path, default=REPO / "docs/results.md")
    ap.add_argument("--plot", type=Path, default=REPO / "docs/img/results.png")
    args = ap.parse_args()
    ids = [r[0] for r in ROWS]
    only = [s for s in args.only.split(",") if s]
    bad = [s for s in only if s not in ids]
    if bad:
        print(f"eval_matrix.py: --only: unknown row(s) {', '.join(bad)}; rows: {', '.join(ids)}", file=sys.stderr)
        return 2
    for m in sorted({r[1] for r in ROWS if not only or r[0] in only}):
        if not (args.models / m / "config.json").is_file():
            print(f"eval_matrix.py: {args.models / m} holds no config.json; train it (tools/train/README.md)", file=sys.stderr)
            return 2
    exe = find_eval(args.eval)
    args.work.mkdir(parents=True, exist_ok=True)
    res = {}
    t0 = time.time()
    todo = [r for r in ROWS if not only or r[0] in only]
    try:
        for i, row in enumerate(todo, 1):
            print(f"[{i}/{len(todo)}] {row[0]}: {row[1]} with {row[2]} {' '.join(row[3])} (elapsed {time.time() - t0:.0f} s)", flush=True)
            res[row[0]] = run_row(exe, row, args, args.work, args.data)
            for data, tag in splits_of(args)[1:]:
                run_row(exe, row, args, args.work, data, tag)
    except RuntimeError as e:
        print(f"eval_matrix.py: {e}", file=sys.stderr)
        return 1
    for row in ROWS:  # rows not run this time but measured before with the same data
        f = args.work / f"{row[0]}.json"
        if row[0] not in res and f.is_file():
            res[row[0]] = json.loads(f.read_text())
    plot_rel = None
    if plot(res, args.plot):
        plot_rel = os.path.relpath(args.plot, args.out.parent)
        print(f"wrote {args.plot}")
    write_doc(args, res, plot_rel, exe)
    print(f"wrote {args.out} ({len(res)} rows, {time.time() - t0:.0f} s)")
    for line in bar_lines(res):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
