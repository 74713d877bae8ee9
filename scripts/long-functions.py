#!/usr/bin/env python3
"""Lists the functions of dlm's headers longer than a limit (default 80 lines), longest first.

    scripts/long-functions.py [--limit N] [folder ...]      # default folder: include/dlm

A function is a brace block opened after a ')' that is not a control statement, a class, a
namespace or an initializer; lambdas and local classes count with the function holding them. A
heuristic for the project's "no function over ~80 lines" rule, not a parser: it reads comments and
string literals out first and follows braces.
"""
import argparse
import os
import re

CONTROL = re.compile(r'^\s*(if|for|while|switch|else|catch|do|try)\b')
NOT_A_FUNCTION = re.compile(r'\b(struct|class|namespace|enum|union)\b[^()]*$')


def functions(path, limit):
    found = []
    depth, start, start_depth, head, name = 0, None, None, '', ''
    for i, raw in enumerate(open(path, encoding='utf-8', errors='replace').read().split('\n')):
        line = re.sub(r'//.*', '', raw)
        line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
        line = re.sub(r"'(\\.|[^'\\])*'", "''", line)
        for j, ch in enumerate(line):
            if ch == '{':
                if start is None:
                    h = (head + ' ' + line[:j]).replace('{}', '').split(';')[-1].split('}')[-1].strip()
                    if ')' in h and not CONTROL.match(h) and not NOT_A_FUNCTION.search(h) and '=' not in h.split(')')[-1]:
                        start, start_depth, name = i, depth, ' '.join(h.split())[-100:]
                depth += 1
            elif ch == '}':
                depth -= 1
                if start is not None and depth == start_depth:
                    if i - start + 1 > limit:
                        found.append((i - start + 1, path, start + 1, name))
                    start = None
        if start is None:
            head = (head + ' ' + line)[-400:] if line.strip() else ''
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--limit', type=int, default=80)
    ap.add_argument('folders', nargs='*', default=['include/dlm'])
    args = ap.parse_args()
    found = []
    for folder in args.folders:
        for dirpath, _, files in os.walk(folder):
            for f in sorted(files):
                if f.endswith(('.hpp', '.cuh', '.inl', '.h', '.cpp', '.cu')):
                    found += functions(os.path.join(dirpath, f), args.limit)
    for n, path, line, name in sorted(found, reverse=True):
        print(f'{n:4d} lines  {path}:{line}  {name}')


if __name__ == '__main__':
    main()
