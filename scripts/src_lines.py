#!/usr/bin/env python3
"""Production lines in src/: every line of a .rs file but its `#[cfg(test)]` items and the files
only a `#[cfg(test)] mod x;` brings in, a total and a line per top-level folder.

    python3 scripts/src_lines.py [SRC]      (default: src/ beside this script)

An item under `#[cfg(test)]` runs from the attribute to the first later line holding only `}`
at the item's indentation (rustfmt's layout), or to its own line where it ends in `;`.
"""

import os
import re
import sys
from collections import Counter

MOD_DECL = re.compile(r"^\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+([A-Za-z_][A-Za-z0-9_]*)\s*;")
PATH_ATTR = re.compile(r'^\s*#\[path\s*=\s*"([^"]+)"\]')


def indent(line):
    return len(line) - len(line.lstrip())


def module_file(declaring, name, path_attr):
    """The file a `mod name;` in `declaring` brings in."""
    if path_attr:
        return os.path.normpath(os.path.join(os.path.dirname(declaring), path_attr))
    here = os.path.dirname(declaring)
    if os.path.basename(declaring) not in ("mod.rs", "lib.rs", "main.rs"):
        here = declaring[:-3]  # a child of foo.rs lives in foo/
    for candidate in (os.path.join(here, name + ".rs"), os.path.join(here, name, "mod.rs")):
        if os.path.exists(candidate):
            return os.path.normpath(candidate)
    return None


def split_file(path):
    """(its lines outside `#[cfg(test)]` items, files its test-only `mod x;` lines bring in)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    kept, test_files, i = [], [], 0
    while i < len(lines):
        if lines[i].strip() != "#[cfg(test)]":
            kept.append(lines[i])
            i += 1
            continue
        j, path_attr = i + 1, None
        while j < len(lines) and lines[j].strip().startswith("#["):  # more attributes
            m = PATH_ATTR.match(lines[j])
            path_attr = m.group(1) if m else path_attr
            j += 1
        if j >= len(lines):
            break
        m = MOD_DECL.match(lines[j])
        if m:
            found = module_file(path, m.group(1), path_attr)
            if found:
                test_files.append(found)
        if lines[j].rstrip().endswith(";"):
            i = j + 1
            continue
        k = j + 1
        while k < len(lines) and not (lines[k].strip() == "}" and indent(lines[k]) == indent(lines[j])):
            k += 1
        i = k + 1
    return kept, test_files


def count_file(path):
    """(production lines, files its test-only `mod x;` lines bring in)."""
    kept, test_files = split_file(path)
    return len(kept), test_files


def production_lines(src):
    """{file relative to src: production lines} over every .rs file not test-only."""
    counts, test_only = {}, set()
    for root, _, files in os.walk(src):
        for f in files:
            if f.endswith(".rs"):
                path = os.path.normpath(os.path.join(root, f))
                counts[path], brought = count_file(path)
                test_only.update(brought)
    # A test-only file's own children (in its folder) are test-only too.
    homes = [os.path.dirname(t) if t.endswith("mod.rs") else t[:-3] for t in test_only]
    test_only.update(p for p in counts if any(p.startswith(h + os.sep) for h in homes))
    return {os.path.relpath(p, src): n for p, n in counts.items() if p not in test_only}


def main(argv):
    src = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    counts = production_lines(src)
    by_folder = Counter()
    for rel, n in counts.items():
        by_folder[rel.split(os.sep)[0]] += n
    print(f"production lines in src/: {sum(counts.values())}")
    for folder, n in by_folder.most_common():
        print(f"{n:8} {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
