#!/usr/bin/env python3
"""Draws the roofline of dlm's CUDA backend (dlm-bench-cuda --json) or CPU (dlm-bench-forward --roofline --json).

    tools/roofline.py RESULTS.json [-o docs/img/roofline.png]
    tools/roofline.py CPU.json -o docs/img/roofline-cpu.svg

CPU results ("backend": "cpu"): the roof is min(compute peak, intensity x read bandwidth) with the
ceilings dlm-bench-forward measured in the same run at the roofline's thread count: AMX bf16,
AMX int8 and f32 FMA lines where measured (the roof uses the peak of the weights' product form),
the analytic series (AR, CDLM blocks 4-64, full diffusion; batches 1-64) on the roof, and the
measured forwards as black-edged markers at their intensity (FLOP per weight byte) and achieved rate.
The output's extension picks PNG or SVG.

The roof is the measured one: min(f16 matrix rate, intensity x copy bandwidth), both measured by
dlm-bench-cuda on the same GPU. On it, the analytic steps of a Dream-7B-shaped model (the bench's
FLOP and byte counts: weights plus KV reads): autoregressive (one row per sequence), full diffusion
(the whole canvas per step, LLaDA / Dream without a cache) and CDLM (one block over an exact KV cache)
for blocks of 4, 16 and 32 and batches 1 to 128; and the measured forwards (black-edged markers) at
their intensity and achieved rate. Needs matplotlib; exits 2 with a message without it.
"""
import argparse
import json
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", help="dlm-bench-cuda --json output")
    parser.add_argument("-o", "--output", default="docs/img/roofline.png", help="PNG to write")
    args = parser.parse_args()
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("roofline.py: matplotlib is not installed; no plot drawn", file=sys.stderr)
        return 2

    with open(args.results) as f:
        r = json.load(f)
    if r.get("backend") == "cpu":
        return draw_cpu(r, plt, args.output)
    bw = r["ceilings"]["copy_gbs"] * 1e9  # bytes/s
    peak = r["ceilings"]["f16_tflops"] * 1e12  # FLOP/s
    bf16 = r["ceilings"]["bf16_tflops"] * 1e12

    def roof(ai):
        return min(peak, ai * bw)

    fig, ax = plt.subplots(figsize=(10, 6.5), dpi=130)
    xs = [10 ** (i / 20) for i in range(-20, 100)]
    ax.plot(xs, [roof(x) / 1e12 for x in xs], color="black", lw=2,
            label=f"roof: f16 GEMM {peak / 1e12:.0f} TFLOP/s, copy {bw / 1e9:.0f} GB/s")
    ax.axhline(bf16 / 1e12, color="gray", ls=":", lw=1, label=f"bf16 GEMM {bf16 / 1e12:.0f} TFLOP/s")
    ax.axvline(peak / bw, color="gray", ls="--", lw=0.8)
    ax.text(peak / bw * 1.05, peak / 1e12 * 0.02, f"ridge {peak / bw:.0f} FLOP/B", color="gray", fontsize=8)

    colors = {"ar": "tab:red", "full": "tab:blue", "cdlm": "tab:green"}
    names = {"ar": "AR", "full": "full diffusion", "cdlm": "CDLM"}
    markers = {1: "o", 4: "v", 16: "s", 32: "D"}
    for s in r["roofline"]:
        pts = s["points"]
        x = [p["intensity"] for p in pts]
        y = [roof(p["intensity"]) / 1e12 for p in pts]
        label = names[s["kind"]] + ("" if s["kind"] == "ar" else f", B={s['block']}") + ", batch 1-128"
        ax.plot(x, y, color=colors[s["kind"]], marker=markers.get(s["block"], "o"), ms=4, lw=0.8, alpha=0.6, label=label)
        ax.annotate(f"b{pts[0]['batch']}", (x[0], y[0]), fontsize=6, color=colors[s["kind"]], xytext=(2, -8),
                    textcoords="offset points")
        ax.annotate(f"b{pts[-1]['batch']}", (x[-1], y[-1]), fontsize=6, color=colors[s["kind"]], xytext=(2, 3),
                    textcoords="offset points")

    for f in r.get("forward", []):
        ax.scatter(f["intensity"], f["tflops"], s=60, color=colors.get(f["kind"], "gray"), edgecolors="black", zorder=5)
        ax.annotate(f"{names.get(f['kind'], f['kind'])} b{f['batch']}: {f['ms']:.1f} ms", (f["intensity"], f["tflops"]),
                    fontsize=7, xytext=(5, -10), textcoords="offset points")
    ax.scatter([], [], s=60, color="white", edgecolors="black", label="measured forwards (B=%d)" % r["shape"]["block"])

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte of weights and KV read)")
    ax.set_ylabel("TFLOP/s")
    m = r["model"]
    ax.set_title(f"{r['device']['name']}: Dream-7B shape ({m['layers']} layers, bf16), prompt {r['shape']['prompt']}, "
                 f"gen {r['shape']['gen']}", fontsize=10)
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(args.output)
    print(f"wrote {args.output}")
    return 0


def draw_cpu(r, plt, output) -> int:
    """The CPU roofline of one dlm-bench-forward --roofline --json run."""
    rl = r.get("roofline")
    if not rl:
        print("roofline.py: the CPU results have no roofline (run dlm-bench-forward --roofline --json)", file=sys.stderr)
        return 2
    threads = rl["threads"]
    ceil = next((c for c in r["ceilings"] if c["threads"] == threads), None)
    if ceil is None or ceil["read_bytes_per_s"] <= 0 or rl["peak_rate"] <= 0:
        print("roofline.py: no measured ceilings at %d thread(s) (was --no-peak given?)" % threads, file=sys.stderr)
        return 2
    bw, peak = ceil["read_bytes_per_s"], rl["peak_rate"]

    def roof(ai):
        return min(peak, ai * bw)

    fig, ax = plt.subplots(figsize=(10, 6.5), dpi=130)
    top = max([peak / bw] + [p["intensity"] for s in rl["series"] for p in s["points"]]) * 3
    lo = min(p["intensity"] for s in rl["series"] for p in s["points"]) / 2
    xs = [lo * (top / lo) ** (i / 100) for i in range(101)]
    ax.plot(xs, [roof(x) / 1e9 for x in xs], color="black", lw=2,
            label=f"roof: {rl['peak']} {peak / 1e12:.2f} T/s, read {bw / 1e9:.1f} GB/s")
    for key, name, ls in (("amx_bf16_flops", "AMX bf16", "--"), ("amx_int8_ops", "AMX int8 (OP/s)", "-."),
                          ("f32_fma_flops", "f32 FMA", ":"), ("bf16_dot_flops", "vdpbf16ps", (0, (1, 3))),
                          ("int8_dot_ops", "vpdpbusd (OP/s)", (0, (3, 1, 1, 1)))):
        v = ceil.get(key, 0)
        if v > 0:
            ax.plot(xs, [min(v, x * bw) / 1e9 for x in xs], color="gray", ls=ls, lw=1, label=f"{name} {v / 1e9:.0f} G/s")
    ax.axvline(peak / bw, color="gray", ls="--", lw=0.6)
    ax.text(peak / bw * 1.05, peak / 1e9 * 0.02, f"ridge {peak / bw:.0f} FLOP/B", color="gray", fontsize=8)

    colors = {"ar": "tab:red", "full": "tab:blue", "cdlm": "tab:green"}
    shades = {4: 0.35, 8: 0.5, 16: 0.65, 32: 0.8, 64: 1.0}
    for s in rl["series"]:
        pts = s["points"]
        kind = s["kind"]
        label = {"ar": "AR", "full": f"full diffusion, {s['block']} rows", "cdlm": f"CDLM, block {s['block']}"}[kind] + ", batch 1-64"
        alpha = shades.get(s["block"], 1.0) if kind == "cdlm" else 1.0
        x = [p["intensity"] for p in pts]
        ax.plot(x, [roof(v) / 1e9 for v in x], color=colors[kind], lw=0.8, alpha=alpha * 0.7, marker=".", ms=3, label=label)
        measured = [p for p in pts if p.get("measured")]
        ax.scatter([p["intensity"] for p in measured], [p["flops"] / 1e9 for p in measured], s=28, color=colors[kind],
                   alpha=alpha, edgecolors="black", linewidths=0.6, zorder=5)
    ax.scatter([], [], s=28, color="white", edgecolors="black", label="measured forwards")

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per weight byte streamed)")
    ax.set_ylabel("GFLOP/s (GOP/s for int8)")
    m = r["model"]
    ax.set_title(f"dlm CPU ({r['kernels']} kernels, {threads} thread(s)): {m['what']}, {m['weight_type']} ({m['product']}), "
                 f"context {rl['context']}", fontsize=9)
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(output)
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
