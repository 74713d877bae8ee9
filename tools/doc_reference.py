#!/usr/bin/python3
"""Check that the reference tables of the docs name what the code has, and the code nothing they leave out.

    /usr/bin/python3 tools/doc_reference.py [--generate EXE] [--eval EXE] [--server EXE]

Prints one line per check, ok or FAILED with each mismatch on a line of its own (the doc's file:line, or
the code's file), and exits 1 if any check fails. No network, no model; about a second.

  flags        each program's --help (the one flag table, cli/options.hpp) against docs/cli.md's flag
               tables, both ways: the same flags, names (a flag and its aliases) and kind (a switch, or a
               flag that takes a value). A table headed by a program's name (**dlm-eval**, **dlm-generate's
               output**) applies to it; the others to all three but the flags cli.md's two sentences on
               it leave out. A program whose executable is not given is skipped, saying so.
  commands     every flag of a command line in README.md and docs/*.md (code blocks, `$ ` captures, code
               spans) is one its program accepts: dlm's three programs (their --help), the programs of
               bench/CMakeLists.txt (their `a.is("--flag")` tests), the Python scripts (add_argument; one
               that passes unknown flags on, bench/bench_server.py, may pass the programs'); so is every
               flag of the flag column of docs/server.md's limits table.
  metrics      the metrics include/dlm/server/metrics.hpp renders, with their types, against the table of
               docs/server.md's Metrics section, both ways; every dlm_ or vllm: name in that section and
               every vllm: name in any doc is an exported metric, and every other dlm_ name of
               docs/server.md one too, or a word of the code (dlm_gen_length).
  errors       the classes derived from dlm::error (include/, server/, cli/) against docs/errors.md's table
               of types, both ways, under their qualified names, with their accessors (its own all listed,
               inherited ones allowed); every `*_error` the page names is a dlm class, a std:: one, or an
               error type dlm-server sends (a string of server/ or include/dlm/server/).
  python       the exceptions of python/dlm/errors.py against docs/python.md's table: classes, the Python
               base each is "also a", attributes.
  environment  every DLM_* variable the code reads (getenv, os.environ) is named in README.md or docs/*.md,
               and every DLM_* name there is a word of the code (a variable, a CMake option, a macro).
  presets      the registry's presets (include/dlm/registry/table.hpp) against docs/cli.md's --preset row
               (the command-line names) and docs/policies.md's Presets table (dlm::presets' aliases).
  fields       dlm-server's request fields and dlm-eval's --json keys against their tables in docs/server.md
               and docs/cli.md, both ways (tools/doc_fields.py says how).
"""
from __future__ import annotations

import argparse
import functools
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field

from doc_fields import check_eval_json, check_request_fields
from doc_tables import CODE_SPAN, ROOT, Table, cells, doc_paths, line_of, read, report, section, sources, spans, tables

PROGRAMS = ("dlm-generate", "dlm-eval", "dlm-server")


# --- flags -------------------------------------------------------------------------------------------------------

@dataclass
class Flag:
    names: frozenset[str]
    takes_value: bool
    where: str = ""

    def show(self) -> str:
        return ", ".join(sorted(self.names, key=lambda n: (n.startswith("--"), n)))


def help_flags(exe: str) -> list[Flag]:
    """The flags a program's --help lists: a head `  -m, --model PATH` (two spaces in), then its help."""
    try:
        text = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise SystemExit(f"cannot read {exe} --help ({e}): build it first, or leave its flag out to skip it")
    out = []
    for line in text.split("\n"):
        m = re.match(r"^  (-\S.*?)(?:\s{2,}|$)", line)
        if not m:
            continue
        *names, last = m.group(1).split(", ")
        name, _, metavar = last.partition(" ")
        out.append(Flag(frozenset(names + [name]), bool(metavar), f"{os.path.basename(exe)} --help"))
    if not out:
        raise SystemExit(f"{exe} --help lists no flag: is it one of dlm's programs?")
    return out


def sentence_flags(text: str, start: str, end: str) -> set[str]:
    """The flags in code spans of cli.md's sentence from `start` to `end` (which flags a program leaves out)."""
    m = re.search(re.escape(start) + r"(.*?)" + re.escape(end), re.sub(r"\s+", " ", text))
    if not m:
        raise LookupError(f"docs/cli.md no longer says \"{start} ... {end}\"; tell tools/doc_reference.py "
                          "which shared flags each program leaves out")
    return {s for s in spans(m.group(1)) if s.startswith("-")}


@functools.cache
def doc_flags() -> dict[str, list[Flag]]:
    """The flags docs/cli.md's tables list, by program."""
    text = read("docs/cli.md")
    left_out = {"dlm-generate": set(),
                "dlm-eval": sentence_flags(text, "every flag of the first three tables but", "dlm-generate's alone"),
                "dlm-server": sentence_flags(text, "dlm-server takes the model, decoding and sampling flags below", "adds its own")}
    out: dict[str, list[Flag]] = {p: [] for p in PROGRAMS}
    for t in tables("docs/cli.md"):
        if not t.header or t.header[0] != "flag":
            continue
        named = [p for p in PROGRAMS if t.heading.startswith(p)]
        alias = t.header.index("alias") if "alias" in t.header else None
        value = t.header.index("value")
        for line, row in t.rows:
            names = {s for s in spans(row[0]) if s.startswith("-")}
            if alias is not None:
                names |= {s for s in spans(row[alias]) if s.startswith("-")}
            f = Flag(frozenset(names), row[value] != "", f"docs/cli.md:{line}")
            for p in named or [p for p in PROGRAMS if not names & left_out[p]]:
                out[p].append(f)
    return out


def compare_flags(program: str, accepted: list[Flag], documented: list[Flag]) -> list[str]:
    problems = []
    for f in accepted:
        rows = [d for d in documented if d.names & f.names]
        if not rows:
            problems.append(f"{program} accepts {f.show()} ({f.where}), which no table of docs/cli.md lists for it")
        for d in rows:
            if d.names != f.names:
                problems.append(f"{d.where}: names {d.show()}; {program} --help names the flag {f.show()}")
            if d.takes_value != f.takes_value:
                kind = "takes a value" if f.takes_value else "is a switch"
                problems.append(f"{d.where}: {d.show()} {kind} in {program} --help, not in the doc's value column")
    known = set().union(*(f.names for f in accepted))
    for d in documented:
        for n in sorted(d.names - known):
            problems.append(f"{d.where}: lists {n} for {program}, which does not accept it (see {program} --help)")
    return problems


# --- command lines in the docs -----------------------------------------------------------------------------------

@dataclass
class Command:
    """A program the docs run: its flags (name -> takes a value), and whether it passes flags it does not know on."""
    flags: dict[str, bool]
    where: str
    passes_on: bool = False


def branch_flags(text: str, head: str, takes_value) -> dict[str, bool]:
    """The flags `head`'s matches name (its group 1), each taking a value when takes_value(its branch: the text up to
    the next match) says so."""
    heads = list(re.finditer(head, text))
    out = {"-h": False, "--help": False}
    for i, m in enumerate(heads):
        branch = text[m.end():heads[i + 1].start() if i + 1 < len(heads) else m.end() + 400]
        out |= {n: bool(takes_value(branch)) for n in re.findall(r"[\"'](-[\w-]+)[\"']", m.group(1))}
    return out if heads else {}


def bench_commands() -> dict[str, Command]:
    """The programs of bench/CMakeLists.txt, their flags read from their sources: `a.is("--reps", "-r")`
    (bench/args.hpp) or `a == "--json"`, a value when the branch reads one (a.value(), a.integer(...), next())."""
    out = {}
    for name, src in re.findall(r"add_executable\((dlm-[\w-]+) (\w+\.(?:cpp|cu))\)", read("bench/CMakeLists.txt")):
        flags = branch_flags(read(f"bench/{src}"), r"\ba\s*(?:\.is\(|==\s*)((?:\"-[\w-]+\"(?:,\s*)?)+)",
                             lambda b: re.search(r"\ba\.(?!is\b|flag\b|unknown\b)\w+(?:<[^>]*>)?\(|\bnext\(\)", b))
        if flags:
            out[name] = Command(flags, f"bench/{src}")
    return out


def script_commands() -> dict[str, Command]:
    """The Python scripts of tools/, bench/, scripts/ and tests/server/, their flags read from add_argument."""
    out = {}
    for path in sources(("tools", "bench", "scripts", "tests/server"), (".py",)):
        text = read(path)
        flags = branch_flags(text, r"add_argument\(\s*((?:[\"'][^\"']+[\"']\s*,\s*)*[\"'][^\"']+[\"'])",
                             lambda b: not re.search(r"action\s*=\s*[\"'](?:store_true|store_false|store_const|count|help|version)", b))
        if flags:
            out[path] = Command(flags, path, bool(re.search(r"\.parse_known_args\(", text)))
    return out


def command_lines(path: str, names: list[str]):
    """(line, program, arguments) of each command of a known program written in a doc: in code blocks and code
    spans, where the program starts a command (not where it is a flag's value: --server build/.../dlm-server)."""
    invocation = re.compile(r"(?:^|[\s(])(?:[\w.-]*/)*?(" + "|".join(re.escape(n) for n in names) + r")[ \t]+(.*)$")
    fenced = False
    lines = read(path).split("\n")
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        for c in [line] if fenced else spans(line):
            m = invocation.search(c)
            while m:
                before = re.sub(r"[\w./-]*$", "", c[:m.start(1)]).split()  # the words before the program's path
                if not before or not before[-1].startswith("-"):
                    args, j = m.group(2), i
                    while fenced and args.endswith("\\") and j + 1 < len(lines):
                        j += 1
                        args = args[:-1] + " " + lines[j]
                    yield i + 1, m.group(1), args
                m = invocation.search(c, m.end(1))


def unknown_flags(command: Command, words: list[str], passed_on: set[str] | None) -> list[str]:
    out, i = [], 0
    while i < len(words):
        w = words[i]
        if re.match(r"^[|&;<>()]", w):
            break
        name = w.split("=", 1)[0]
        if w.startswith("-") and len(w) > 1 and not re.match(r"^-[\d.]", w):
            if name in command.flags:
                i += 1 if command.flags[name] and "=" not in w else 0  # its value
            elif not (command.passes_on and (passed_on is None or name in passed_on)):
                out.append(name)
        i += 1
    return out


def check_commands(accepted: dict[str, list[Flag]], checked: list[str]) -> list[str]:
    commands = {p: Command({n: f.takes_value for f in flags for n in f.names}, f"{p} --help") for p, flags in accepted.items()}
    commands |= bench_commands() | script_commands()
    # What a script passes on is one of dlm's programs' flags (unchecked where their --help is not read).
    passed_on = {n for p in PROGRAMS if p in commands for n in commands[p].flags} if len(accepted) == 3 else None
    names = sorted(commands, key=len, reverse=True)
    problems = []
    for path in doc_paths():
        for line, program, args in command_lines(path, names):
            lexer = shlex.shlex(args, posix=True, punctuation_chars=True)  # `a; b`, `a|b` and `a>f` end the command
            lexer.whitespace_split = True
            try:
                words = list(lexer)
                checked.append(f"{path}:{line}")
            except ValueError:
                continue  # prose that only looks like a command (an unpaired quote)
            for n in unknown_flags(commands[program], words, passed_on):
                problems.append(f"{path}:{line}: {program} {n}: {program} accepts no such flag ({commands[program].where})")
    for page in ("README.md", "docs/cli.md", "docs/server.md"):  # a parse that finds no command checks nothing
        if not any(c.startswith(page + ":") for c in checked):
            problems.append(f"{page}: no command line of dlm's programs found (has the way the docs write them changed?)")
    if "dlm-server" in commands:
        limits = [t for t in tables("docs/server.md") if t.header[:2] == ["limit", "flag"]]
        if not limits:
            raise LookupError("docs/server.md has no table headed | limit | flag |: its flags could not be checked")
        for t in limits:
            for line, row in t.rows:
                for s in spans(row[1]):
                    for w in re.findall(r"(?:^|\s|\()(-{1,2}[a-z][\w-]*)", s):
                        if w not in commands["dlm-server"].flags:
                            problems.append(f"docs/server.md:{line}: the limits table names {w}, which dlm-server does not accept")
    return problems


# --- metrics -----------------------------------------------------------------------------------------------------

METRIC_NAME = r"((?:dlm_|vllm:)[a-z0-9_]+)"
METRIC_FORMS = [
    (re.compile(r"\bcounter\(\s*\"" + METRIC_NAME + "\""), "counter"),
    (re.compile(r"\bgauge\(\s*\"" + METRIC_NAME + "\""), "gauge"),
    (re.compile(r"\.render\(\s*\"" + METRIC_NAME + "\""), "histogram"),
    # head(name, help, type) and plain(name, help, type, value): the type is the string after the help's pieces.
    (re.compile(r"\b(?:head|plain)\(\s*\"" + METRIC_NAME + r"\",\s*(?:\"(?:[^\"\\]|\\.)*\"\s*)+,\s*\"(\w+)\""), None),
    (re.compile(r"# TYPE " + METRIC_NAME + r" (\w+)"), None),
]
METRICS_HEADER = "include/dlm/server/metrics.hpp"


def exported_metrics() -> tuple[dict[str, str], list[str]]:
    """The metrics metrics.hpp renders, by name, with their type; and the names whose type it gives in no known form."""
    text = read(METRICS_HEADER)
    types: dict[str, str] = {}
    for pattern, kind in METRIC_FORMS:
        for m in pattern.finditer(text):
            types[m.group(1)] = kind or m.group(2)
    untyped = [f"{METRICS_HEADER}:{line_of(text, m.start())}: renders {m.group(1)} in a form this checker reads no type from"
               for m in re.finditer(r"\"(?:# (?:HELP|TYPE) )?" + METRIC_NAME, text) if m.group(1) not in types]
    return types, untyped


def code_words() -> set[str]:
    """Every identifier-like word of the code, the build and the scripts (not the docs)."""
    exts = (".hpp", ".cpp", ".cu", ".cuh", ".h", ".py", ".cmake", ".sh", ".toml", ".in", ".txt", ".json", ".yaml", ".yml", "Dockerfile")
    paths = sources(("include", "server", "cli", "examples", "bench", "python", "tools", "scripts", "tests", "cmake"), exts)
    words: set[str] = set()
    for path in [p for p in paths if p != "tools/doc_reference.py"] + ["CMakeLists.txt", "CMakePresets.json", "pyproject.toml"]:  # not the names this file checks
        with open(os.path.join(ROOT, path), encoding="utf-8", errors="replace") as f:
            words.update(re.findall(r"[A-Za-z_][\w:]*", f.read()))
    return words


def check_metrics(words: set[str]) -> list[str]:
    exported, problems = exported_metrics()
    documented: dict[str, tuple[str, int]] = {}
    for t in tables("docs/server.md"):
        if t.header[:2] == ["metric", "type"]:
            for line, row in t.rows:
                documented |= {re.sub(r"\{.*\}$", "", s): (row[1], line) for s in spans(row[0])}
    for name, kind in sorted(exported.items()):
        if name not in documented:
            problems.append(f"{METRICS_HEADER}: /metrics exports {name} ({kind}), which docs/server.md's Metrics table does not list")
        elif documented[name][0] != kind:
            problems.append(f"docs/server.md:{documented[name][1]}: {name} is a {documented[name][0]}; metrics.hpp renders a {kind}")
    # Any other name: in the Metrics section (its table's rows included), or a vllm: one anywhere, is a metric's;
    # a dlm_ one elsewhere in docs/server.md is a metric's or a word of the code (dlm_gen_length, dlm_server).
    text, first = section("docs/server.md", "Metrics")
    in_section = range(first, first + text.count("\n"))
    for path in doc_paths():
        doc, seen = read(path), set()
        for m in re.finditer(r"\b(vllm:[a-z0-9_]+)|\b(dlm_[a-z0-9_]+)", doc):
            name, line = m.group(1) or m.group(2), line_of(doc, m.start())
            metric = m.group(1) or path == "docs/server.md" and line in in_section
            if name in exported or name + "_total" in exported or (name, line) in seen:  # vLLM names its counters without _total
                continue
            seen.add((name, line))
            if metric:
                problems.append(f"{path}:{line}: names the metric {name}, which /metrics does not export")
            elif path == "docs/server.md" and name not in words:
                problems.append(f"{path}:{line}: names {name}, neither a metric /metrics exports nor a word of the code")
    return problems


# --- errors ------------------------------------------------------------------------------------------------------

@dataclass
class ErrorClass:
    name: str  # qualified: dlm::server::request_error
    base: str  # as written: invalid_parameter, std::runtime_error
    where: str
    accessors: set[str] = field(default_factory=set)


CLASS = re.compile(r"^\s*(?:class|struct)\s+(\w+)(?:\s+final)?\s*:\s*public\s+((?:\w+::)*\w+)\s*\{", re.M)
NAMESPACE = re.compile(r"^namespace\s+([\w:]+)\s*\{|^\}\s*//\s*namespace\s+([\w:]+)", re.M)


def class_body(text: str, start: int) -> str:
    """The public part of a class body that starts at the `{` at `start`: up to `private:`/`protected:` or its end."""
    depth, i = 0, start
    while i < len(text):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            break
        i += 1
    body = text[start:i]
    return re.split(r"^\s*(?:private|protected):", body, flags=re.M)[0]


def declared_classes() -> dict[str, ErrorClass]:
    out: dict[str, ErrorClass] = {}
    for path in sources(("include", "server", "cli"), (".hpp", ".cuh", ".cpp", ".cu")):
        text = read(path)
        marks = [(m.start(), m.group(1)) for m in NAMESPACE.finditer(text)]  # (where, the namespace opened or None)
        for m in CLASS.finditer(text):
            stack: list[str] = []
            for pos, opened in marks:
                if pos > m.start():
                    break
                if opened:
                    stack.append(opened)
                elif stack:
                    stack.pop()
            name = "::".join(stack + [m.group(1)])
            accessors = set(re.findall(r"\[\[nodiscard\]\]\s+(?!static\b)[^;{}()]*?\b(\w+)\(\)\s*const", class_body(text, m.end() - 1)))
            out[name] = ErrorClass(name, m.group(2), f"{path}:{line_of(text, m.start())}", accessors)
    return out


def error_classes() -> dict[str, ErrorClass]:
    """The classes derived from dlm::error, directly or not (dlm::error itself left out)."""
    declared = declared_classes()
    short = {c.name.rsplit("::", 1)[1]: c for c in declared.values() if c.name.startswith("dlm::")}
    chosen: dict[str, ErrorClass] = {}
    for c in declared.values():
        b, seen = c, set()
        while b.base.rsplit("::", 1)[-1] in short and b.name not in seen:
            seen.add(b.name)
            b = short[b.base.rsplit("::", 1)[-1]]
            if b.name == "dlm::error":
                chosen[c.name] = c
                break
    return chosen


def inherited(c: ErrorClass, classes: dict[str, ErrorClass]) -> set[str]:
    short = {k.rsplit("::", 1)[1]: v for k, v in classes.items()}
    out, b = set(), short.get(c.base.rsplit("::", 1)[-1])
    while b:
        out |= b.accessors
        b = short.get(b.base.rsplit("::", 1)[-1])
    return out


def check_errors() -> list[str]:
    classes, problems = error_classes(), []
    rows: dict[str, tuple[set[str], int]] = {}
    for t in tables("docs/errors.md"):
        if t.header[:1] == ["type"] and "accessors" in t.header:
            for line, row in t.rows:
                name = spans(row[0])[0] if spans(row[0]) else row[0]
                got = {a[:-2] for a in spans(row[t.header.index("accessors")]) if re.match(r"^\w+\(\)$", a)}
                rows[name] = (got, line)
    for name, c in sorted(classes.items()):
        if name not in rows:
            problems.append(f"{c.where}: {name} (derived from {c.base}) has no row in docs/errors.md's table of error types")
            continue
        listed, line = rows[name]
        for a in sorted(c.accessors - listed):
            problems.append(f"docs/errors.md:{line}: {name}'s row leaves out its accessor {a}() ({c.where})")
        for a in sorted(listed - c.accessors - inherited(c, classes)):
            problems.append(f"docs/errors.md:{line}: {name}'s row lists {a}(), which the class has not ({c.where})")
    for name, (_, line) in sorted(rows.items()):
        if name not in classes and not name.startswith("std::"):
            problems.append(f"docs/errors.md:{line}: the table names {name}, no class derived from dlm::error")
    sent = set()
    for top in ("server", "include/dlm/server"):
        for f in os.listdir(os.path.join(ROOT, top)):
            if f.endswith((".hpp", ".cpp")):
                sent |= set(re.findall(r"\"(\w+_error)\"", read(f"{top}/{f}")))
    doc = read("docs/errors.md")
    for m in CODE_SPAN.finditer(doc):
        n = m.group(1)
        if not re.match(r"^(?:\w+::)*(?:\w+_error|invalid_parameter)$", n) or n.startswith("std::") or n in sent:
            continue
        if not any(c == n or c.endswith("::" + n) for c in list(classes) + ["dlm::error"]):
            problems.append(f"docs/errors.md:{line_of(doc, m.start())}: names {n}: no such class derived from dlm::error, "
                            "nor an error type dlm-server sends")
    return problems


def check_python_errors() -> list[str]:
    src, problems = read("python/dlm/errors.py"), []
    code: dict[str, tuple[set[str], set[str]]] = {}  # class -> (Python bases but dlm.Error, attributes with inherited ones)
    for m in re.finditer(r"^class (\w+)\(([^)]*)\):\n((?:[ \t]+.*\n|\n)*)", src, re.M):
        bases = {b.strip() for b in m.group(2).split(",")} - {"Error"}  # every class is a dlm.Error: the doc says so once
        bases = {"dlm." + b if "dlm." + b in code else b for b in bases}
        code["dlm." + m.group(1)] = (bases, set(re.findall(r"self\.(\w+) =", m.group(3))).union(*(code[b][1] for b in bases if b in code)))
    documented = {spans(row[0])[0]: (set(spans(row[1])), {a for a in spans(row[2]) if re.match(r"^\w+$", a)}, line)
                  for t in tables("docs/python.md") if t.header[:2] == ["class", "also a"] for line, row in t.rows}
    for name, (bases, attrs) in sorted(code.items()):
        if name not in documented:
            problems += [] if name == "dlm.Error" else [f"python/dlm/errors.py: {name} has no row in docs/python.md's error table"]
            continue
        for what, doc, got in (("is also a", documented[name][0], bases), ("has the attributes", documented[name][1], attrs)):
            if doc != got:
                problems.append(f"docs/python.md:{documented[name][2]}: {name} {what} {', '.join(sorted(doc)) or 'nothing'} in the doc, "
                                f"{', '.join(sorted(got)) or 'nothing'} in python/dlm/errors.py")
    problems += [f"docs/python.md:{line}: the error table names {n}, which python/dlm/errors.py does not define"
                 for n, (_, _, line) in sorted(documented.items()) if n not in code]
    return problems


# --- environment variables ---------------------------------------------------------------------------------------

def read_variables() -> dict[str, str]:
    """The DLM_* environment variables the library, the programs and the Python package read, with where."""
    out: dict[str, str] = {}
    cxx = re.compile(r"\"(DLM_[A-Z0-9_]+)\"")  # every DLM_ string of C++ code is a variable's name (getenv's, a message's)
    py = re.compile(r"(?:environ(?:\.get)?\s*[\[(]|getenv\s*\()\s*[\"'](DLM_[A-Z0-9_]+)")
    tops = ("include", "server", "cli", "examples", "bench", "python/dlm", "python/src", "tools", "tests/server")
    for path in sources(tops, (".py", ".hpp", ".cpp", ".cu", ".cuh")):
        for m in (py if path.endswith(".py") else cxx).finditer(read(path)):
            out.setdefault(m.group(1), path)
    return out


def check_environment(words: set[str]) -> list[str]:
    named: dict[str, str] = {}
    for path in doc_paths():
        doc = read(path)
        for m in re.finditer(r"\b(DLM_[A-Z0-9_]+)\b", doc):
            named.setdefault(m.group(1), f"{path}:{line_of(doc, m.start())}")
    problems = [f"{where}: reads the environment variable {v}, which no doc (README.md, docs/*.md) names"
                for v, where in sorted(read_variables().items()) if v not in named]
    problems += [f"{where}: names {v}, which is no word of the code (no variable read, CMake option or macro)"
                 for v, where in sorted(named.items()) if v not in words]
    return problems


# --- presets -----------------------------------------------------------------------------------------------------

def check_presets() -> list[str]:
    src = read("include/dlm/registry/table.hpp")
    registry = dict(re.findall(r"preset<presets::(\w+)>\{\"([\w-]+)\"", src))  # alias template -> command-line name
    problems = []
    if not registry:
        raise LookupError("include/dlm/registry/table.hpp: no preset<presets::...>{\"name\", ...} row found")
    preset_rows = [(line, row[-1]) for t in tables("docs/cli.md") for line, row in t.rows if spans(row[0]) == ["--preset"]]
    if len(preset_rows) != 1 or "One of" not in preset_rows[0][1]:
        raise LookupError("docs/cli.md: no one --preset row that lists the presets after \"One of\"")
    line, cell = preset_rows[0]
    listed, names = {s for s in spans(cell.split("One of", 1)[1]) if re.match(r"^[a-z][\w-]*$", s)}, set(registry.values())
    problems += [f"docs/cli.md:{line}: the --preset row leaves out the preset {n}" for n in sorted(names - listed)]
    problems += [f"docs/cli.md:{line}: the --preset row lists {n}, no preset of the registry" for n in sorted(listed - names)]
    rows = {}
    for t in tables("docs/policies.md"):
        if t.heading == "Presets" and t.header[:1] == ["preset"]:
            rows = {spans(row[0])[0]: line for line, row in t.rows if spans(row[0])}
    if not rows:
        raise LookupError("docs/policies.md: no table under \"## Presets\" whose first column is preset")
    problems += [f"docs/policies.md: the Presets table leaves out dlm::presets::{n} ({registry[n]})" for n in sorted(set(registry) - set(rows))]
    problems += [f"docs/policies.md:{line}: the Presets table lists {n}, no preset of the registry" for n, line in sorted(rows.items()) if n not in registry]
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for p in PROGRAMS:
        ap.add_argument("--" + p.split("-")[1], metavar="EXE", help=f"the {p} to read --help from")
    args = ap.parse_args()
    accepted = {p: help_flags(getattr(args, p.split("-")[1])) for p in PROGRAMS if getattr(args, p.split("-")[1])}
    ok = True
    for p in PROGRAMS:
        if p in accepted:
            ok &= report(f"flags of {p} against docs/cli.md", lambda: compare_flags(p, accepted[p], doc_flags()[p]))
        else:
            print(f"flags of {p} against docs/cli.md: skipped (no --{p.split('-')[1]} EXE)")
    checked = []
    unread = [p for p in PROGRAMS if p not in accepted]
    ok &= report("flags on the docs' command lines", lambda: check_commands(accepted, checked), lambda: f" ({len(checked)} commands" +
                 (f"; those of {', '.join(unread)} skipped, with what scripts pass on" if unread else "") + ")")
    words = code_words()
    ok &= report("metrics of /metrics against docs/server.md", lambda: check_metrics(words))
    ok &= report("error classes against docs/errors.md", check_errors)
    ok &= report("Python exceptions against docs/python.md", check_python_errors)
    ok &= report("DLM_* environment variables against the docs", lambda: check_environment(words))
    ok &= report("presets of the registry against docs/cli.md and docs/policies.md", check_presets)
    ok &= report("dlm-server's request fields against docs/server.md", check_request_fields)
    ok &= report("dlm-eval's --json keys against docs/cli.md", check_eval_json)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
