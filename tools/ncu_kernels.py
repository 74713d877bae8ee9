#!/usr/bin/env python3
"""Summarises an `ncu --csv --metrics gpu__time_duration.sum` capture per kernel and launch shape.

scripts/gpu-check.sh's `ncu` phase writes such a capture of `dlm-bench-cuda --profile` (the row kernels
and the attention of a prefill, the AR steps and the CDLM steps): this prints, in order of first launch,
one line per (kernel, grid, block) with the number of launches and their mean and least duration in µs.

    tools/ncu_kernels.py ncu.csv [--json OUT]

Lines before ncu's CSV header (its warnings) are skipped. Exits 1 with a sentence when the file holds no
capture (no header, or no gpu__time_duration.sum rows).
"""
import argparse
import csv
import json
import sys


def read_capture(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    start = next((i for i, r in enumerate(rows) if r and r[0] == "ID"), None)
    if start is None:
        raise ValueError(f"{path}: no ncu CSV header (a line starting with \"ID\"): was ncu run with --csv?")
    header = rows[start]
    need = {"ID", "Kernel Name", "Grid Size", "Block Size", "Metric Name", "Metric Value"}
    if not need <= set(header):
        raise ValueError(f"{path}: the CSV header lacks {sorted(need - set(header))}")
    launches = {}
    for r in rows[start + 1:]:
        if len(r) != len(header):
            continue
        d = dict(zip(header, r))
        if d["Metric Name"] != "gpu__time_duration.sum":
            continue
        value = float(d["Metric Value"].replace(",", ""))
        unit = d.get("Metric Unit", "ns")
        scale = {"ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}.get(unit, 1e-3)
        name = d["Kernel Name"].split("(")[0].strip()
        launches[int(d["ID"])] = (name, d["Grid Size"], d["Block Size"], value * scale)
    if not launches:
        raise ValueError(f"{path}: no gpu__time_duration.sum rows")
    return [launches[i] for i in sorted(launches)]


def summarise(launches):
    groups = {}
    for name, grid, block, us in launches:
        groups.setdefault((name, grid, block), []).append(us)
    return [{"kernel": k[0], "grid": k[1], "block": k[2], "launches": len(v), "mean_us": sum(v) / len(v), "min_us": min(v)}
            for k, v in groups.items()]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capture")
    ap.add_argument("--json", help="also write the summary as JSON")
    a = ap.parse_args()
    try:
        summary = summarise(read_capture(a.capture))
    except (OSError, ValueError) as e:
        print(f"ncu_kernels.py: {e}", file=sys.stderr)
        return 1
    width = max(len(s["kernel"]) for s in summary)
    print(f"{'kernel':<{width}}  {'grid':<16} {'block':<14} {'launches':>8} {'mean µs':>9} {'min µs':>9}")
    for s in summary:
        print(f"{s['kernel']:<{width}}  {s['grid']:<16} {s['block']:<14} {s['launches']:>8} {s['mean_us']:>9.2f} {s['min_us']:>9.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
