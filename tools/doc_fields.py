"""The checks of tools/doc_reference.py that read JSON field names out of the code:

  request fields  the fields dlm-server's request parser reads (include/dlm/server/request.hpp: each
                  `key == "..."` (or `!=`) test, with the route an `&& kind == endpoint::...` beside it names, and the
                  neutral OpenAI fields' lists, by route) against the table under docs/server.md's
                  **Request fields.**, both ways, routes included; the keys read inside a field (`k != "..."`:
                  a message's role, a text part's type) are each named in that table; and the list the
                  "unknown field" refusal gives a client names every field but the neutral ones, and no other.
  dlm-eval --json the keys bench/dlm_eval.cpp writes into its --json object against the table under
                  docs/cli.md's **dlm-eval's --json**, both ways.
"""
from __future__ import annotations

import re

from doc_tables import Table, line_of, read, spans, tables

REQUEST_HEADER = "include/dlm/server/request.hpp"
EVAL_SOURCE = "bench/dlm_eval.cpp"
ROUTES = ("both", "completions", "chat")
# The prose around the field names in the "unknown field" refusal.
REFUSAL_WORDS = {"and", "dlm's"}


def table_under(path: str, heading: str) -> Table:
    for t in tables(path):
        if t.heading.rstrip(".") == heading:
            return t
    raise LookupError(f"{path}: no table under **{heading}**")


def first_column_names(t: Table) -> dict[str, tuple[int, list[str]]]:
    """The names of a table's first column (several to a cell, comma-separated code spans), each with its row."""
    out = {}
    for line, row in t.rows:
        for name in spans(row[0]):
            out[name] = (line, row)
    return out


def code_fields() -> dict[str, str]:
    """The top-level fields request.hpp reads, each with its route (both, completions, chat)."""
    text = read(REQUEST_HEADER)
    fields: dict[str, str] = {}
    for m in re.finditer(r'\bkey [=!]= "(\w+)"(?:\s*&&\s*kind == endpoint::(\w+))?', text):
        fields[m.group(1)] = m.group(2) or fields.get(m.group(1), "both")
    for m in re.finditer(r"static constexpr std::string_view (\w+)\[\] = \{([^}]*)\}", text):
        route = m.group(1)
        if route not in ROUTES:
            raise LookupError(f"{REQUEST_HEADER}:{line_of(text, m.start())}: a list of fields named {route}, no route ({', '.join(ROUTES)})")
        for name in re.findall(r'"(\w+)"', m.group(2)):
            fields[name] = route
    for m in re.finditer(r'\bkind == endpoint::(\w+)\s*&&\s*key == "(\w+)"', text):
        fields[m.group(2)] = m.group(1)
    if not fields:
        raise LookupError(f"{REQUEST_HEADER}: no `key == \"...\"` test found: has the parser changed its form?")
    return fields


def neutral_fields() -> set[str]:
    text = read(REQUEST_HEADER)
    body = re.search(r"is_neutral_openai_field\(.*?\n\}", text, re.S)
    if not body:
        raise LookupError(f"{REQUEST_HEADER}: no is_neutral_openai_field")
    return set(re.findall(r'"(\w+)"', body.group(0)))


def refusal_fields() -> tuple[set[str], int]:
    """The field names of the "unknown field" refusal's text, and its line."""
    text = read(REQUEST_HEADER)
    m = re.search(r'refuse\(key, ("unknown field.*?)\);', text, re.S)
    if not m:
        raise LookupError(f"{REQUEST_HEADER}: no refuse(key, \"unknown field ...\")")
    said = " ".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1)))
    said = said.split("reads", 1)[1] if "reads" in said else said
    return set(re.findall(r"[a-z][\w']*", said)) - REFUSAL_WORDS, line_of(text, m.start())


def check_request_fields() -> list[str]:
    code = code_fields()
    t = table_under("docs/server.md", "Request fields")
    documented = first_column_names(t)
    top: dict[str, tuple[int, str]] = {}
    problems = []
    for name, (line, row) in documented.items():
        parent, _, inner = name.partition(".")
        top[parent] = (line, row[1])
        if inner and not re.search(r'\b(?:k|key) != "' + re.escape(inner) + '"', read(REQUEST_HEADER)):
            problems.append(f"docs/server.md:{line}: the table lists {name}, but {parent} holds no field {inner} in {REQUEST_HEADER}")
    problems += [f"docs/server.md: the Request fields table leaves out {n} ({code[n]}), which {REQUEST_HEADER} reads"
                 for n in sorted(set(code) - set(top))]
    problems += [f"docs/server.md:{line}: the Request fields table lists {n}, which {REQUEST_HEADER} does not read"
                 for n, (line, _) in sorted(top.items()) if n not in code]
    problems += [f"docs/server.md:{line}: {n}'s route is {route}, but {REQUEST_HEADER} reads it on {code[n]}"
                 for n, (line, route) in sorted(top.items()) if n in code and route != code[n]]
    words = {w for _, row in t.rows for cell in row for span in spans(cell) for w in re.findall(r"\w+", span)}
    inner = set(re.findall(r'\bk != "(\w+)"', read(REQUEST_HEADER)))
    problems += [f"docs/server.md: the Request fields table does not name {n}, a key {REQUEST_HEADER} reads inside a field"
                 for n in sorted(inner - words)]
    said, line = refusal_fields()
    listed = set(code) - neutral_fields()
    problems += [f"{REQUEST_HEADER}:{line}: the unknown-field refusal does not list {n}" for n in sorted(listed - said)]
    problems += [f"{REQUEST_HEADER}:{line}: the unknown-field refusal lists {n}, no field the parser reads" for n in sorted(said - listed)]
    return problems


def eval_json_keys() -> set[str]:
    """The keys bench/dlm_eval.cpp writes into --json (not --predictions' lines, built in `line`)."""
    keys = set()
    for statement in re.split(r";\s*\n", read(EVAL_SOURCE)):
        if re.search(r"\bline\b", statement):
            continue
        keys |= set(re.findall(r'\{"(\w+)",', statement)) | set(re.findall(r'\bj\["(\w+)"\]\s*=', statement))
    if not keys:
        raise LookupError(f"{EVAL_SOURCE}: no JSON key found: has the report changed its form?")
    return keys


def check_eval_json() -> list[str]:
    code = eval_json_keys()
    documented = first_column_names(table_under("docs/cli.md", "dlm-eval's --json"))
    problems = [f"docs/cli.md: the dlm-eval --json table leaves out {k}, which {EVAL_SOURCE} writes" for k in sorted(code - set(documented))]
    problems += [f"docs/cli.md:{line}: the dlm-eval --json table lists {k}, which {EVAL_SOURCE} does not write"
                 for k, (line, _) in sorted(documented.items()) if k not in code]
    return problems
