#!/usr/bin/env python3
"""Draws the roofline of dlm's CUDA backend from dlm-bench-cuda's JSON results.

    tools/roofline.py RESULTS.json [-o docs/img/roofline.png]

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


if __name__ == "__main__":
    sys.exit(main())
