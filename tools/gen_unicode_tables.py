#!/usr/bin/python3
"""Generates include/dlm/io/unicode_data.hpp: the Unicode tables dlm's tokenizer needs.

  * letter / number ranges: general categories L* and N*, as \\p{L} and \\p{N} match them in the
    pre-tokenizer regexes of tokenizer.json files (the HF tokenizers library uses Oniguruma, whose
    classes equal Python's unicodedata here: checked code point by code point when this script runs);
  * the canonical decompositions, composition pairs and canonical combining classes NFC needs;
  * into a second file, cli/python_unicode.hpp: Python's decimal digits (str.isdecimal, each run the
    ten digits 0-9, given by its zero) and whitespace (str.isspace), what tools/score.py's regex \\d
    and \\s match and its float() reads, so that dlm-eval extracts an answer's number as score.py does
    (cli/score.hpp).

The HF tokenizers library normalizes with a Unicode version older than Python's. So that dlm's NFC
gives the same bytes as the reference, the NFC tables are calibrated against the installed
`tokenizers` package: a combining mark that it treats as a starter gets class 0 here, and a
decomposition it does not know is left out. Run in a venv of Debian 12's Python 3.11 holding the
tokenizers the tables were calibrated with (a newer one's \p{L} follows a newer Unicode, and the script
refuses it); these two commands write the committed header byte for byte (checked 2026-12-04):

    PYTHON=/usr/bin/python3 scripts/setup-venv.sh build/venv-tokenizers tokenizers==0.19.1
    build/venv-tokenizers/bin/python tools/gen_unicode_tables.py include/dlm/io/unicode_data.hpp cli/python_unicode.hpp
"""
import sys
import unicodedata

import tokenizers
from tokenizers import Regex, normalizers, pre_tokenizers

ALL = [cp for cp in range(0x110000) if not 0xD800 <= cp < 0xE000]


def ranges(pred):
    out, start, prev = [], None, None
    for cp in ALL:
        if pred(cp):
            if start is None:
                start = cp
            elif cp != prev + 1:
                out.append((start, prev))
                start = cp
            prev = cp
        elif start is not None:
            out.append((start, prev))
            start = None
    if start is not None:
        out.append((start, prev))
    return out


def regex_members(pattern):
    """The code points a one-character pattern matches, as the reference's regex engine says."""
    split = pre_tokenizers.Split(Regex(pattern), behavior="removed", invert=False)
    members = set()
    for i in range(0, len(ALL), 20000):
        chunk = ALL[i:i + 20000]
        kept = set()
        for piece, _ in split.pre_tokenize_str("".join(map(chr, chunk))):
            kept.update(map(ord, piece))
        members.update(c for c in chunk if c not in kept)
    return members


def category_tables():
    is_letter = lambda cp: unicodedata.category(chr(cp)).startswith("L")
    is_number = lambda cp: unicodedata.category(chr(cp)).startswith("N")
    for name, pred, pattern in (("letter", is_letter, r"\p{L}"), ("number", is_number, r"\p{N}")):
        ours = {cp for cp in ALL if pred(cp)}
        theirs = regex_members(pattern)
        if ours != theirs:
            sys.exit(f"{pattern}: unicodedata and the reference differ on {len(ours ^ theirs)} code points")
    return ranges(is_letter), ranges(is_number)


def nfc_tables():
    nfc, nfd = normalizers.NFC(), normalizers.NFD()
    # Combining classes, as the reference orders marks: a mark it does not know is a starter there.
    base, low, high = "\u2200", "\u0334", "\u0301"  # a base without compositions; classes 1 and 230
    ccc = {}
    for cp in ALL:
        c = unicodedata.combining(chr(cp))
        if c == 0:
            continue
        probe = base + chr(cp) + low if c > 1 else base + high + chr(cp)
        if unicodedata.normalize("NFC", probe) == probe:
            sys.exit(f"the probe cannot tell the combining class of U+{cp:04X}")
        if nfc.normalize_str(probe) != probe:  # the reference reorders it: it knows the class
            ccc[cp] = c
    ccc_ranges, start, prev = [], None, None
    for cp in sorted(ccc):
        if start is not None and cp == prev + 1 and ccc[cp] == ccc[start]:
            prev = cp
            continue
        if start is not None:
            ccc_ranges.append((start, prev, ccc[start]))
        start = prev = cp
    if start is not None:
        ccc_ranges.append((start, prev, ccc[start]))

    # Canonical decompositions (one level; the decoder recurses), flagged when the pair composes.
    decomp = []
    for cp in ALL:
        if 0xAC00 <= cp <= 0xD7A3:
            continue  # Hangul syllables: algorithmic
        d = unicodedata.decomposition(chr(cp))
        if not d or d.startswith("<"):
            continue
        parts = [int(x, 16) for x in d.split()]
        full = unicodedata.normalize("NFD", chr(cp))
        if nfd.normalize_str(chr(cp)) != full:
            continue  # the reference's Unicode version has no decomposition for it
        composes = len(parts) == 2 and unicodedata.normalize("NFC", full) == chr(cp)
        if composes and nfc.normalize_str(chr(parts[0]) + chr(parts[1])) != chr(cp):
            composes = False
        decomp.append((cp, parts[0], parts[1] if len(parts) == 2 else 0, composes))
    return ccc_ranges, decomp


def python_tables():
    """The zeros of Python's decimal-digit runs (checked: each run is the ten digits 0-9 in order) and the
    code points str.isspace() is true for."""
    zeros = [cp for cp in ALL if chr(cp).isdecimal() and unicodedata.decimal(chr(cp)) == 0]
    for z in zeros:
        assert all(unicodedata.decimal(chr(z + d), -1) == d for d in range(10)), hex(z)
    assert sum(chr(cp).isdecimal() for cp in ALL) == 10 * len(zeros)
    return zeros, [cp for cp in ALL if chr(cp).isspace()]


def emit_list(out, name, values, per_line):
    out.append(f"inline constexpr std::uint32_t {name}[] = {{")
    for i in range(0, len(values), per_line):
        out.append("    " + " ".join(f"0x{v:X}," for v in values[i:i + per_line]))
    out.append("};")


def emit(out, name, rows, width, per_line):
    out.append(f"inline constexpr std::uint32_t {name}[][{width}] = {{")
    for i in range(0, len(rows), per_line):
        out.append("    " + " ".join("{" + ",".join(f"0x{v:X}" for v in row) + "}," for row in rows[i:i + per_line]))
    out.append("};")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    letters, numbers = category_tables()
    ccc_ranges, decomp = nfc_tables()
    out = [
        "// dlm/io/unicode_data.hpp — GENERATED by tools/gen_unicode_tables.py; do not edit.",
        f"// Python {sys.version.split()[0]} unicodedata (Unicode {unicodedata.unidata_version}); NFC data calibrated",
        f"// against HF tokenizers {tokenizers.__version__} (see the script).",
        "#pragma once",
        "",
        "#include <cstdint>",
        "",
        "namespace dlm::io::detail::ucd {",
        "",
        "// Inclusive ranges {first, last} of general category L* (letters) and N* (numbers).",
    ]
    emit(out, "letter_ranges", letters, 2, 10)
    emit(out, "number_ranges", numbers, 2, 10)
    out.append("// Inclusive ranges {first, last, class} of non-zero canonical combining class.")
    emit(out, "combining_class_ranges", ccc_ranges, 3, 6)
    out.append("// {code point, first, second or 0, 1 if first+second compose back to it}: canonical")
    out.append("// decompositions, one level deep, sorted by code point. Hangul syllables are algorithmic.")
    emit(out, "canonical_decompositions", [(a, b, c, int(d)) for a, b, c, d in decomp], 4, 6)
    out += ["", "}  // namespace dlm::io::detail::ucd", ""]
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        f.write("\n".join(out))
    zeros, spaces = python_tables()
    py = [
        "// cli/python_unicode.hpp — GENERATED by tools/gen_unicode_tables.py; do not edit.",
        f"// Python {sys.version.split()[0]} (Unicode {unicodedata.unidata_version}): what tools/score.py's regex and float() read.",
        "#pragma once",
        "",
        "#include <cstdint>",
        "",
        "namespace dlm::cli::python_unicode {",
        "",
        "// str.isdecimal: runs of the ten digits 0-9, each given by its zero, ascending.",
    ]
    emit_list(py, "decimal_zeros", zeros, 10)
    py.append("// str.isspace, ascending: what the re module's \\s matches in a str.")
    emit_list(py, "spaces", spaces, 10)
    py += ["", "}  // namespace dlm::cli::python_unicode", ""]
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        f.write("\n".join(py))
    print(f"{sys.argv[1]}: {len(letters)} letter ranges, {len(numbers)} number ranges, "
          f"{len(ccc_ranges)} combining-class ranges, {len(decomp)} decompositions, "
          f"{len(zeros)} decimal-digit runs, {len(spaces)} spaces")


if __name__ == "__main__":
    main()
