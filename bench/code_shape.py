#!/usr/bin/env python3
"""The shape of Eddy's code: lines per crate, long functions and files, `expect` calls.

Counts only code that ships (tests excluded: `tests.rs`, `*_tests.rs`, `integration-tests/`,
`tests/` folders and `#[cfg(test)] mod … { … }` blocks). Functions are measured from their
`fn` line to their closing brace; braces inside strings, character literals and comments are
ignored.

    python3 bench/code_shape.py [DIR]          # DIR defaults to the repository root
    python3 bench/code_shape.py --list [DIR]   # also lists the long functions and files
"""

import os
import re
import sys

FN = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+(\w+)")
TEST_MOD = re.compile(r"^\s*#\[cfg\(test\)\]\s*$")
LONG_FN, LONG_FILE = 80, 800


def is_test_file(path):
    name = os.path.basename(path)
    parts = path.split(os.sep)
    return (
        name == "tests.rs"
        or name.endswith("_tests.rs")
        or "integration-tests" in parts
        or "tests" in parts
        or "benches" in parts
    )


def strip(line, state):
    """The line's code with strings, characters and comments blanked; `state` carries an
    open block comment or string across lines."""
    out, i = [], 0
    while i < len(line):
        c = line[i]
        if state["block"]:
            if line.startswith("*/", i):
                state["block"] = False
                i += 2
            else:
                i += 1
            continue
        if state["string"]:
            if c == "\\":
                i += 2
                continue
            if c == '"':
                state["string"] = False
            i += 1
            continue
        if line.startswith("//", i):
            break
        if line.startswith("/*", i):
            state["block"] = True
            i += 2
            continue
        if c == '"':
            state["string"] = True
            i += 1
            continue
        if c == "'" and re.match(r"'(\\.|[^\\'])'", line[i:]):
            i += len(re.match(r"'(\\.|[^\\'])'", line[i:]).group(0))
            continue
        out.append(c)
        i += 1
    return "".join(out)


def shipped_lines(text):
    """The file's lines with `#[cfg(test)]` modules removed, each with its stripped code."""
    lines = text.split("\n")
    state = {"block": False, "string": False}
    code = [strip(line, state) for line in lines]
    keep, i = [], 0
    while i < len(lines):
        if TEST_MOD.match(lines[i]) and i + 1 < len(lines) and re.match(r"^\s*(pub\s+)?mod\s+\w+\s*\{", lines[i + 1]):
            depth, j = 0, i + 1
            while j < len(lines):
                depth += code[j].count("{") - code[j].count("}")
                if depth == 0 and "{" in "".join(code[i + 1 : j + 1]):
                    break
                j += 1
            i = j + 1
            continue
        keep.append((lines[i], code[i]))
        i += 1
    return keep


def functions(kept):
    """(name, first line, length) of each function with a body."""
    found = []
    for start, (line, _) in enumerate(kept):
        m = FN.match(line)
        if not m:
            continue
        depth, opened = 0, False
        for end in range(start, len(kept)):
            code = kept[end][1]
            if not opened and ";" in code and "{" not in code:
                break  # a declaration without a body
            depth += code.count("{") - code.count("}")
            opened = opened or "{" in code
            if opened and depth <= 0:
                found.append((m.group(6), start + 1, end - start + 1))
                break
    return found


def main():
    args = [a for a in sys.argv[1:] if a != "--list"]
    listing = "--list" in sys.argv
    root = args[0] if args else os.path.join(os.path.dirname(__file__), "..")
    crates, long_fns, long_files, expects = {}, [], [], 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in ("target", ".git", "node_modules")]
        for name in filenames:
            path = os.path.relpath(os.path.join(dirpath, name), root)
            if not name.endswith(".rs") or is_test_file(path):
                continue
            with open(os.path.join(root, path), encoding="utf-8") as f:
                kept = shipped_lines(f.read())
            crate = path.split(os.sep)[0] if os.sep in path else "."
            crate = "eddy (src)" if crate in ("src", ".") else crate
            crates[crate] = crates.get(crate, 0) + len(kept)
            if len(kept) > LONG_FILE:
                long_files.append((len(kept), path))
            expects += sum(code.count(".expect(") for _, code in kept)
            long_fns += [(n, path, line, name_) for name_, line, n in functions(kept) if n > LONG_FN]
    print("lines of shipped code per crate (tests excluded):")
    for crate, n in sorted(crates.items()):
        print(f"  {crate:<16} {n:>7}")
    print(f"  {'total':<16} {sum(crates.values()):>7}")
    print(f"functions over {LONG_FN} lines: {len(long_fns)}")
    print(f"files over {LONG_FILE} lines: {len(long_files)}")
    print(f"`.expect(` calls outside tests: {expects}")
    if listing:
        for n, path, line, name in sorted(long_fns, reverse=True):
            print(f"  fn {name:<40} {n:>4} lines  {path}:{line}")
        for n, path in sorted(long_files, reverse=True):
            print(f"  file {path:<60} {n:>5} lines")


if __name__ == "__main__":
    main()
