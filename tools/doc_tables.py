"""The pieces tools/doc_reference.py and tools/doc_fields.py read the docs with: the repository's files,
Markdown tables under their headings, code spans, sections, and one line per check's result."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CODE_SPAN = re.compile(r"`([^`]+)`")


def read(path: str) -> str:
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def sources(tops: tuple[str, ...], exts: tuple[str, ...]) -> list[str]:
    """The files under `tops` whose names end in one of `exts`, relative to the root (test data left out)."""
    out = []
    for top in tops:
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, top)):
            dirnames[:] = sorted(d for d in dirnames if d not in ("data", "__pycache__"))
            out += [os.path.relpath(os.path.join(dirpath, f), ROOT) for f in sorted(filenames) if f.endswith(exts)]
    return out


def doc_paths() -> list[str]:
    return ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md"))


def line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def spans(cell: str) -> list[str]:
    return CODE_SPAN.findall(cell)


def cells(line: str) -> list[str]:
    """The cells of a Markdown table row (a `|` inside a code span, as in cpu\\|cuda, stays in its cell)."""
    body = line.strip()[1:-1]
    return [c.strip() for c in re.split(r"(?<!\\)\|", body)]


@dataclass
class Table:
    heading: str  # the ## heading or **bold** paragraph above it
    header: list[str]
    rows: list[tuple[int, list[str]]]  # (line, cells)


def tables(path: str) -> list[Table]:
    """Every Markdown table of a doc, with the heading above it."""
    out: list[Table] = []
    heading, prev, fenced, in_table = "", "", False, False
    for i, line in enumerate(read(path).split("\n"), 1):
        fenced ^= line.lstrip().startswith("```")
        if in_table and line.startswith("|"):
            out[-1].rows.append((i, cells(line)))
            continue
        in_table = not fenced and prev.startswith("|") and bool(re.match(r"^\|[-| :]+\|$", line))
        if in_table:
            out.append(Table(heading, [c.lower() for c in cells(prev)], []))
        elif not fenced and line.startswith("#"):
            heading = line.lstrip("#").strip()
        elif not fenced and line.startswith("**"):
            heading = line.split("**")[1]
        prev = line
    return out


def report(name: str, check, note=lambda: "") -> bool:
    """Runs a check and prints its line (and its problems); true if it found none."""
    try:
        problems = check()
    except LookupError as e:  # a doc no longer holds what the check reads
        problems = [str(e)]
    print(f"{name}: " + (f"ok{note()}" if not problems else "FAILED\n" + "\n".join("  " + p for p in problems)))
    return not problems


def section(path: str, title: str) -> tuple[str, int]:
    """The text of a doc's `## title` section, and the line it starts on."""
    text = read(path)
    m = re.search(r"^## " + re.escape(title) + r"\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    if not m:
        raise LookupError(f"{path} has no section '## {title}'")
    return m.group(1), line_of(text, m.start(1))
