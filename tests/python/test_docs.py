"""docs/python.md's examples run: every ```python block of the tour, in order, in one namespace, from
the repository root (where its paths point), with the shipped model."""

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "python.md"


def blocks():
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_the_tour_has_examples_of_each_part():
    text = "\n".join(blocks())
    for piece in ("dlm.policies()", 'mask="block_causal"', "llm.stream(prompts", "eng.add(q, block_length=16", "schedule=threshold",
                  "llm.chat(conversation"):
        assert piece in text, piece


def test_every_python_example_of_the_tour_runs(models, monkeypatch, capsys):
    if not (ROOT / "models" / "cdlm").is_dir() or Path(models).resolve() != (ROOT / "models").resolve():
        pytest.skip("the tour's examples load models/cdlm from the repository root")
    monkeypatch.chdir(ROOT)
    namespace: dict = {}
    for i, code in enumerate(blocks()):
        try:
            exec(compile(code, f"{DOC.name}, python block {i + 1}", "exec"), namespace)
        except Exception as e:  # name the block that failed
            raise AssertionError(f"python block {i + 1} of docs/python.md failed: {e!r}\n{code}") from e
    out = capsys.readouterr().out
    assert "#### 40" in out  # the tour's question, answered
