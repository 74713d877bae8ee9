"""Scoring of dlm_gsm_synth.yaml: tools/score.py's extract_final, the rule dlm-eval scores with too."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from score import extract_final  # noqa: E402  (tools/score.py)


def process_results(doc, results):
    return {"acc": float(extract_final(results[0]) == str(doc["final"]))}
