#!/usr/bin/python3
"""Check that every ```cpp block of README.md and docs/*.md compiles against dlm's headers.

    /usr/bin/python3 tools/doc_snippets.py [--build build/default] [--jobs 1] [--nvcc PATH | --no-cuda] [FILE.md ...]

Prints one line per block (file:line, ok / failed / skipped, seconds of the compiler run that checked
it), the compiler's first error lines for a block that fails, and exits 1 if any block fails.

How a block becomes a translation unit
  * A block with its own `int main` is a whole program: it compiles as written, alone.
  * Otherwise its top-level pieces are sorted: `#include` lines go to the top of the file;
    namespace-level definitions (struct, class, enum, template, using, namespace, concept,
    static_assert, constexpr / inline variables, function definitions) stay at namespace scope; the
    remaining statements become the body of a function. A block that names no header gets
    <dlm/dlm.hpp>, the umbrella header the docs assume.
  * The statements may use the docs' three conventional free names, which the body receives:
    `Model` (a model type), `model` (a Model&) and `prompts` (a std::vector<std::vector<dlm::token_id>>).
    The body is a function template over them, explicitly instantiated with
    dlm::testing::scripted_model, so that every call is checked as for a real model (that header is
    included after the block, so it cannot supply a name the block forgot to include). A block may
    declare its own `model` or `prompts`; those shadow the parameters.
  * Each block's code sits in a namespace of its own (doc_snippet_<n>), so blocks sharing a file do
    not clash, and #line directives make every diagnostic name the Markdown file and line.
  * Blocks whose set of #include lines is the same are compiled together, in one run of the compiler,
    so no block sees a header only another block included. If such a run fails, each of its blocks is
    compiled alone to say which failed.

Markers (an HTML comment on the line just before the fence; keep them rare, prefer real code):
    <!-- snippet: fragment -->        not compiled (e.g. a signature shown with `...`)
    <!-- snippet: prelude NAME -->    this block's declarations are the prelude NAME
    <!-- snippet: uses NAME -->       a later block that needs the prelude NAME's declarations

Compiler and flags
    g++ -std=c++20 -fsyntax-only, with the -I, -isystem and -D flags and -fopenmp that
    build/<preset>/compile_commands.json gives the examples' programs (the targets a user's program
    resembles: dlm::cpu_kernels, nlohmann_json, OpenMP); without that file, -I include alone.
    CUDA blocks (those that include a .cuh header, or name __global__ or dlm::cuda) need nvcc: the
    headers under include/dlm/cuda hold kernels and are compiled, in the project's CMake, only as CUDA
    sources (DLM_CUDA_COMPILER, tests/cuda.cmake), never by the host compiler. They are checked by
    `nvcc -std=c++20 -x cu -arch=sm_90 -cuda`: the device side is compiled in full (front end, cicc,
    ptxas, as the build does for sm_90), the host side only to nvcc's preprocessed host file, so the
    host compiler's code generation (most of a .cu file's time at -O3) is left out; about 20 s for
    docs/cuda.md's block. Without nvcc (--no-cuda, or none at --nvcc) the CUDA blocks are reported as
    skipped; tests/tools.cmake passes --no-cuda where the build has no CUDA compiler (DLM_CUDA_COMPILER).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARKER = re.compile(r"^\s*<!--\s*snippet:\s*(fragment|prelude|uses)\s*([\w-]*)\s*-->\s*$")
INCLUDE = re.compile(r"^\s*#\s*include\s*[<\"]([^>\"]+)[>\"]")
MAIN = re.compile(r"\bint\s+main\s*\(")
CUDA = re.compile(r"\.cuh\b|__global__|__device__|\bdlm::cuda\b")
DECL_WORDS = {"struct", "class", "union", "enum", "template", "namespace", "using", "typedef", "concept",
              "static_assert", "constexpr", "inline", "extern", "consteval"}
STMT_WORDS = {"for", "while", "if", "else", "switch", "do", "try", "return", "catch"}
DEFAULT_INCLUDE = "dlm/dlm.hpp"
TESTING_MODEL = "dlm::testing::scripted_model"
TESTING_HEADER = "dlm/testing/scripted_model.hpp"


@dataclass
class Snippet:
    path: str  # relative to the root
    line: int  # the fence's line (1-based); the code starts on the next line
    code: list[str]
    marker: str = ""
    marker_name: str = ""
    index: int = 0
    includes: list[str] = field(default_factory=list)
    decls: list[tuple[int, str]] = field(default_factory=list)  # (first line, text)
    stmts: list[tuple[int, str]] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def text(self) -> str:
        return "\n".join(self.code)

    @property
    def is_cuda(self) -> bool:
        return bool(CUDA.search(self.text))

    @property
    def has_main(self) -> bool:
        return bool(MAIN.search(self.text))


def extract(path: str) -> list[Snippet]:
    lines = open(os.path.join(ROOT, path), encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        if lines[i].strip() == "```cpp":
            j = i + 1
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            s = Snippet(path, i + 1, lines[i + 1:j])
            m = MARKER.match(lines[i - 1]) if i > 0 else None
            if m:
                s.marker, s.marker_name = m.group(1), m.group(2)
                if s.marker != "fragment" and not s.marker_name:
                    raise SystemExit(f"{s.where}: `snippet: {s.marker}` needs a name")
            out.append(s)
            i = j
        i += 1
    return out


def _chunks(code: list[str], first_line: int) -> list[tuple[int, str]]:
    """Splits code into top-level pieces: each ends at a `;` outside brackets, or at a `}` that closes a
    top-level brace and is not followed by `;`, `,`, `)`, `(`, `.` or `-` (a definition or a compound
    statement). Strings, characters and comments are skipped. Returns (line of the piece, text)."""
    text = "\n".join(code)
    pieces, depth, start, i, n = [], 0, 0, 0, len(text)

    def cut(end: int) -> None:
        nonlocal start
        piece = text[start:end]
        if piece.strip():
            lead = len(piece) - len(piece.lstrip())
            pieces.append((first_line + text.count("\n", 0, start + lead), piece.strip("\n")))
        start = end

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
            continue
        if text.startswith("/*", i):
            i = text.find("*/", i) + 2
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if c == "#" and depth == 0 and text[start:i].strip() == "":
            cut(i)
            i = text.find("\n", i)
            i = n if i < 0 else i
            cut(i)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if c == "}" and depth == 0:
                rest = re.sub(r"^(\s|//[^\n]*)*", "", text[i + 1:])
                if not rest or rest[0] not in ";,)(.-":
                    cut(i + 1)
        elif c == ";" and depth == 0:
            cut(i + 1)
        i += 1
    cut(n)
    return pieces


def _first_word(piece: str) -> str:
    body = re.sub(r"^(\s|//[^\n]*|/\*.*?\*/)*", "", piece, flags=re.S)
    m = re.match(r"[A-Za-z_]\w*|\S", body)
    return m.group(0) if m else ""


def _is_function_definition(piece: str) -> bool:
    body = re.sub(r"//[^\n]*", "", piece).strip()
    return (body.endswith("}") and _first_word(piece) not in STMT_WORDS and _first_word(piece) != "{"
            and re.match(r"[^=;{]*\)[^=;{()]*\{", body, re.S) is not None)


def classify(s: Snippet) -> None:
    for line, piece in _chunks(s.code, s.line + 1):
        m = INCLUDE.match(piece)
        if m:
            s.includes.append(m.group(1))
        elif piece.lstrip().startswith("#"):
            s.decls.append((line, piece))
        elif _first_word(piece) in DECL_WORDS or _is_function_definition(piece):
            s.decls.append((line, piece))
        else:
            s.stmts.append((line, piece))
    if not s.includes:
        s.includes.append(DEFAULT_INCLUDE)


def _line(n: int, path: str) -> str:
    return f'#line {n} "{path}"'


def _body(s: Snippet, preludes: dict[str, Snippet]) -> tuple[list[str], list[str]]:
    """The snippet's namespace (its code) and the explicit instantiation that goes after the model's
    header, both as lines."""
    ns = f"doc_snippet_{s.index}"
    out = [f"namespace {ns} {{  // {s.where}"]
    if s.marker == "uses":
        if s.marker_name not in preludes:
            raise SystemExit(f"{s.where}: no block before it is `snippet: prelude {s.marker_name}`")
        p = preludes[s.marker_name]
        out.append(f"using namespace doc_snippet_{p.index};")
    for line, piece in s.decls:
        out += [_line(line, s.path), piece]
    inst = []
    if s.stmts:
        out += ["template <class Model, class Prompts>",
                "[[maybe_unused]] void body([[maybe_unused]] Model& model, [[maybe_unused]] const Prompts& prompts) {", "{"]
        for line, piece in s.stmts:
            out += [_line(line, s.path), piece]
        out += ["}", "}"]
        inst = [f"template void {ns}::body<{TESTING_MODEL}, std::vector<std::vector<dlm::token_id>>>(",
                f"    {TESTING_MODEL}&, const std::vector<std::vector<dlm::token_id>>&);"]
    out.append(f"}}  // namespace {ns}")
    return out, inst


def translation_unit(group: list[Snippet], preludes: dict[str, Snippet]) -> str:
    if len(group) == 1 and group[0].has_main:
        s = group[0]
        return "\n".join([_line(s.line + 1, s.path)] + s.code) + "\n"
    lines, insts = [], []
    needed = []  # preludes first, in order, once
    for s in group:
        if s.marker == "uses" and preludes.get(s.marker_name) not in needed + group:
            needed.append(preludes[s.marker_name])
    for inc in dict.fromkeys(inc for s in needed + group for inc in s.includes):
        lines.append(f"#include <{inc}>")
    for s in needed + group:
        body, inst = _body(s, preludes)
        lines += body
        if s in group:
            insts += inst
    if insts:
        lines += ["#line 1 \"<doc_snippets.py>\"", f"#include <{TESTING_HEADER}>", "#include <vector>"] + insts
    return "\n".join(lines) + "\n"


@dataclass
class Compiler:
    cxx: list[str]
    nvcc: list[str] | None

    def command(self, cuda: bool, source: str) -> list[str]:
        return (self.nvcc + [source, "-o", source + ".ii"]) if cuda else (self.cxx + [source])


def flags_from_build(build: str) -> list[str]:
    """-I, -isystem, -D and -fopenmp of the examples' compile commands (else of every C++ file)."""
    path = os.path.join(build, "compile_commands.json")
    if not os.path.exists(path):
        return [f"-I{os.path.join(ROOT, 'include')}"]
    entries = [e for e in json.load(open(path)) if not e["file"].endswith(".cu")]
    examples = [e for e in entries if os.sep + "examples" + os.sep in e["file"]] or entries
    flags: list[str] = []
    for e in examples:
        args = e.get("arguments") or shlex.split(e["command"])
        k = 0
        while k < len(args):
            a = args[k]
            if a in ("-I", "-isystem", "-D"):
                flags += [a, args[k + 1]]
                k += 1
            elif a.startswith(("-I", "-isystem", "-D")) or a == "-fopenmp":
                flags.append(a)
            k += 1
    unique: list[str] = []
    for f in flags:
        if f not in unique or f in ("-isystem", "-I", "-D"):
            unique.append(f)
    return unique


def run(cmd: list[str], src: str, text: str) -> tuple[bool, float, str]:
    with open(src, "w") as f:
        f.write(text)
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode == 0, time.monotonic() - t0, p.stdout


def first_errors(output: str, limit: int = 12) -> list[str]:
    lines = output.splitlines()
    at = next((k for k, l in enumerate(lines) if "error" in l), 0)
    start = at
    while start > 0 and lines[start - 1].startswith(("In file included", "                 from", "In instantiation")):
        start -= 1
    return lines[max(0, start - 2):at + limit]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*", help="Markdown files (default: README.md and docs/*.md)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "default"),
                    help="build directory whose compile_commands.json gives the include flags")
    ap.add_argument("--cxx", default="g++")
    ap.add_argument("--nvcc", default="/usr/local/cuda/bin/nvcc")
    ap.add_argument("--no-cuda", action="store_true", help="report the CUDA blocks as skipped")
    ap.add_argument("--jobs", type=int, default=1, help="compiler processes at a time")
    ap.add_argument("--keep", help="write the translation units into this directory and keep them")
    args = ap.parse_args()

    files = args.files or ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
    snippets = [s for f in files for s in extract(os.path.relpath(os.path.abspath(f), ROOT))]
    for k, s in enumerate(snippets):
        s.index = k
        if s.marker != "fragment" and not s.has_main:
            classify(s)
    preludes = {s.marker_name: s for s in snippets if s.marker == "prelude"}

    flags = flags_from_build(args.build)
    nvcc = None
    if not args.no_cuda and shutil.which(args.nvcc):
        nvcc = [args.nvcc, "-std=c++20", "-x", "cu", "-arch=sm_90", "-cuda", "-diag-suppress=1675",
                f"-I{os.path.join(ROOT, 'include')}", "-Xcompiler=-fopenmp"]
    comp = Compiler([args.cxx, "-std=c++20", "-fsyntax-only"] + flags, nvcc)

    # Groups: a program alone; else by (CUDA, the same includes, the same prelude).
    groups: dict[tuple, list[Snippet]] = {}
    results: dict[int, tuple[str, str, list[str]]] = {}  # status, note, error lines
    for s in snippets:
        if s.marker == "fragment":
            results[s.index] = ("skipped", "marked as a fragment", [])
        elif s.is_cuda and comp.nvcc is None:
            results[s.index] = ("skipped", "a CUDA block, and no nvcc", [])
        elif s.has_main:
            groups[("main", s.index)] = [s]
        else:
            groups.setdefault((s.is_cuda, tuple(sorted(s.includes)), s.marker_name if s.marker == "uses" else ""), []).append(s)

    tmp = args.keep or tempfile.mkdtemp(prefix="dlm-doc-snippets-")
    os.makedirs(tmp, exist_ok=True)

    def check(group: list[Snippet]) -> list[tuple[Snippet, str, float, list[str]]]:
        cuda = group[0].is_cuda
        src = os.path.join(tmp, f"snippet_{group[0].index}{'_' + str(len(group)) if len(group) > 1 else ''}.{'cu' if cuda else 'cpp'}")
        ok, secs, out = run(comp.command(cuda, src), src, translation_unit(group, preludes))
        if ok:
            note = f", one compiler run for {len(group)} blocks" if len(group) > 1 else ""
            return [(s, "ok", f"{secs:.1f} s{note}", []) for s in group]
        if len(group) == 1:
            return [(group[0], "FAILED", f"{secs:.1f} s", first_errors(out))]
        return [r for s in group for r in check([s])]

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for done in pool.map(check, groups.values()):
            for s, status, note, errors in done:
                results[s.index] = (status, note, errors)
    failed = 0
    for s in snippets:
        status, note, errors = results[s.index]
        print(f"{s.where}: {status} ({note})")
        for e in errors:
            print(f"    {e}")
        failed += status == "FAILED"
    print(f"{len(snippets)} blocks, {failed} failed, {sum(1 for r in results.values() if r[0] == 'skipped')} skipped, "
          f"{len(groups)} compiler runs, {time.monotonic() - t0:.1f} s")
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
