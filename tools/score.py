#!/usr/bin/python3
"""Score answers to gsm_synth problems: exact match of the final number after the last "####".

    /usr/bin/python3 tools/score.py --ref tools/data/test.jsonl --pred predictions.jsonl

predictions.jsonl has one JSON object per line, in the order of the reference file, with the model's
completion under "answer" (or "output", "completion", "text"). A line may instead be a bare JSON
string. Prints accuracy; --verbose lists the misses; --errors sorts the misses by their first fault
(see classify); --by-ops breaks the accuracy down by the number of operations (working lines) of
the reference answer.
"""
from __future__ import annotations

import argparse
import json
import re
import sys

_FINAL = re.compile(r"####\s*(-?[\d,]*\.?\d+)")
_KEYS = ("answer", "output", "completion", "text")


def normalize(number: str) -> str | None:
    """A number's canonical form (no commas, no leading zeros, no trailing ".0"), or None."""
    try:
        value = float(number.replace(",", ""))
    except ValueError:
        return None
    if value != value or value in (float("inf"), float("-inf")):
        return None
    return str(int(value)) if value == int(value) else str(value)


def extract_final(text: str) -> str | None:
    """The number after the last "####", normalized, or None."""
    found = _FINAL.findall(text)
    return normalize(found[-1]) if found else None


def final_of(ref: dict) -> str:
    """A problem's reference "final" as answers are compared with it: a string as written, a JSON
    number in its canonical form (40 and 40.0 are "40"), as dlm-eval reads it (cli/score.hpp)."""
    final = ref["final"]
    if isinstance(final, (int, float)) and not isinstance(final, bool):
        return normalize(json.dumps(final)) or json.dumps(final)
    return final


def completion_of(record) -> str:
    if isinstance(record, str):
        return record
    for k in _KEYS:
        if k in record:
            return record[k]
    raise ValueError(f"prediction has none of the keys {_KEYS}: {record}")


def score(refs: list[dict], preds: list[str]) -> tuple[int, list[int]]:
    if len(refs) != len(preds):
        raise ValueError(f"{len(preds)} predictions for {len(refs)} problems")
    misses = [i for i, (r, p) in enumerate(zip(refs, preds)) if extract_final(p) != final_of(r)]
    return len(refs) - len(misses), misses


def read_refs(path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def ops_of(ref: dict) -> int:
    """The number of arithmetic operations a problem needs: its reference answer's working lines."""
    return sum(1 for l in ref["answer"].split("\n") if l.strip() and "####" not in l)


def by_ops(refs: list[dict], preds: list[str]) -> dict[int, tuple[int, int]]:
    """{operation count: (correct, problems)}, in increasing operation count."""
    _, misses = score(refs, preds)
    missed, out = set(misses), {}
    for i, r in enumerate(refs):
        right, n = out.get(ops_of(r), (0, 0))
        out[ops_of(r)] = (right + (i not in missed), n + 1)
    return dict(sorted(out.items()))


_LINE = re.compile(r"^\s*(\d+)\s*([+x-])\s*(\d+)\s*=\s*(\d+)\s*$")
FAULTS = ("no final line", "malformed line", "arithmetic", "wrong operand", "too many steps", "too few steps", "wrong final")


def classify(ref: dict, pred: str) -> str:
    """The first fault of a wrong answer, in order: no "####" line; a working line that is not
    "a op b = c"; a line whose result is wrong for its own operands; a line whose operands differ from
    the reference's same line (an operand copied or carried wrongly); more or fewer lines than the
    reference; else a "####" number that is not the last line's result."""
    if extract_final(pred) is None:
        return "no final line"
    work = [l for l in pred.split("\n") if l.strip() and "####" not in l]
    want = [l for l in ref["answer"].split("\n") if l.strip() and "####" not in l]
    for i, line in enumerate(work):
        m = _LINE.match(line)
        if not m:
            return "malformed line"
        a, op, b, c = int(m[1]), m[2], int(m[3]), int(m[4])
        if c != {"+": a + b, "-": a - b, "x": a * b}[op]:
            return "arithmetic"
        if i < len(want):
            w = _LINE.match(want[i])
            if w and (int(w[1]), w[2], int(w[3])) != (a, op, b):
                return "wrong operand"
    if len(work) > len(want):
        return "too many steps"
    if len(work) < len(want):
        return "too few steps"
    return "wrong final"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", required=True)
    ap.add_argument("--pred", required=True)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--errors", action="store_true", help="count the misses by their first fault")
    ap.add_argument("--by-ops", action="store_true", help="accuracy per number of operations the problem needs")
    args = ap.parse_args(argv)
    refs = read_refs(args.ref)
    with open(args.pred, encoding="utf-8") as f:
        preds = [completion_of(json.loads(line)) for line in f if line.strip()]
    correct, misses = score(refs, preds)
    print(f"exact match: {correct}/{len(refs)} = {100.0 * correct / max(1, len(refs)):.2f} %")
    if args.verbose:
        for i in misses:
            print(f"  #{i}: want {final_of(refs[i])}, got {extract_final(preds[i])!r}: {preds[i]!r}")
    if args.by_ops:
        for ops, (right, n) in by_ops(refs, preds).items():
            print(f"  {ops} operation{'s' if ops != 1 else ''}: {right}/{n} = {100.0 * right / n:.2f} %")
    if args.errors:
        kinds = [classify(refs[i], preds[i]) for i in misses]
        for k in FAULTS:
            n = kinds.count(k)
            if n:
                print(f"  {k}: {n} ({100.0 * n / max(1, len(refs)):.1f} % of the problems)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
