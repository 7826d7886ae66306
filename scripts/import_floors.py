#!/usr/bin/env python3
"""The floor map of ARCHITECTURE.md, checked: every import of a production file in src/ points
to a folder on a lower floor or onto the ground floor, and no two files of different folders
import each other, directly or round a circle. Lists each breach; exits 1 if there is any.

    python3 scripts/import_floors.py [SRC]      (default: src/ beside this script)

An import is a path outside comments and string literals, in a `use` tree (groups expanded) or
in code, from `crate::`, `super::`, `self::` or a child module named bare, resolved to the file
of the longest module prefix it names. Test code (`#[cfg(test)]` items and test-only files) is left
out, as scripts/src_lines.py leaves it out.
"""

import os
import re
import sys

import src_lines

# ARCHITECTURE.md's floors, top down; a folder imports only folders on a higher number, or any
# folder of the ground floor (which import each other, but never round a circle).
FLOORS = {
    "main.rs": 0, "lib.rs": 0,
    "cli": 1,
    "ab": 2, "gaps": 2,
    "calibrate": 3, "runs": 3,
    "harness": 4, "model": 4, "prep": 4,
    "gpu": 5, "report": 5,
}
GROUND = {"exit.rs", "results", "stats", "axes"}
GROUND_FLOOR = 6


def module_index(src):
    """{module path as a tuple: file relative to src}."""
    index = {}
    for root, _, files in os.walk(src):
        for f in files:
            if f.endswith(".rs"):
                rel = os.path.relpath(os.path.join(root, f), src)
                parts = rel[:-3].split(os.sep)
                if parts[-1] in ("mod", "lib", "main"):
                    parts = parts[:-1]
                index[tuple(parts)] = rel
    return index


def module_of(rel):
    parts = rel[:-3].split(os.sep)
    return tuple(parts[:-1]) if parts[-1] in ("mod", "lib", "main") else tuple(parts)


def production_text(path):
    """The file's lines outside `#[cfg(test)]` items (as scripts/src_lines.py counts them) and
    outside comments."""
    kept, _ = src_lines.split_file(path)
    return "\n".join(line for line in kept if not line.strip().startswith("//"))


STRING = re.compile(r'"(?:\\.|[^"\\])*"')
TRAILING_COMMENT = re.compile(r"//.*$", re.M)
USE = re.compile(r"^[ \t]*(?:pub(?:\([^)]*\))?[ \t]+)?use[ \t]+([^;]+);", re.S | re.M)
# A path written in code: from the crate, a parent, this module, or a child module by name.
INLINE = re.compile(r"(?<![:\w])((?:[A-Za-z_][A-Za-z0-9_]*)(?:::(?:[A-Za-z_][A-Za-z0-9_]*))+)")


def expand(tree):
    """`a::{b, c::{d, e}}` → [a::b, a::c::d, a::c::e]; `as` aliases and globs dropped."""
    tree = re.sub(r"\s+", " ", tree).strip()
    if "{" not in tree:
        path = tree.split(" as ")[0].strip()
        return [path[:-3] if path.endswith("::*") else path]
    prefix, rest = tree.split("{", 1)
    if "}" not in rest:
        return []
    body, depth, parts, start = rest[: rest.rindex("}")], 0, [], 0
    for i, ch in enumerate(body):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    parts.append(body[start:])
    prefix = prefix.strip().rstrip(":")
    out = []
    for part in (p.strip() for p in parts):
        if part in ("", "self"):
            out.extend([prefix] if part == "self" else [])
            continue
        out.extend(f"{prefix}::{sub}" if prefix else sub for sub in expand(part))
    return out


def resolve(here, segments, index):
    """The module a path names from module `here`, as a tuple; None for no module of ours."""
    first = segments[0]
    if first == "crate":
        base, segments = (), segments[1:]
    elif first in ("self", "super"):
        base = here
        while segments and segments[0] in ("self", "super"):
            base = base[:-1] if segments[0] == "super" else base
            segments = segments[1:]
    elif here + (first,) in index:  # a child module, by its name
        base = here
    else:
        return None  # another crate's (std::, anyhow::) or a type's associated item
    for k in range(len(segments), -1, -1):
        if base + tuple(segments[:k]) in index:
            return base + tuple(segments[:k])
    return None


def imports(rel, text, index):
    """The files `rel` imports: each `use` tree expanded and each path written in code, by the
    longest module prefix it names (`crate::`, `super::`, `self::`, or a child module)."""
    here = module_of(rel)
    paths = [p for tree in USE.findall(text) for p in expand(tree)]
    code = TRAILING_COMMENT.sub("", STRING.sub('""', USE.sub("", text)))
    paths += INLINE.findall(code)
    found = set()
    for path in paths:
        module = resolve(here, path.split("::"), index)
        # The crate root holds only the exported macros (`out!`), no floor.
        if module and index[module] != rel:
            found.add(index[module])
    return found


def folder(rel):
    return os.path.dirname(rel)


def top(rel):
    return rel.split(os.sep)[0]


def floor_of(name):
    return GROUND_FLOOR if name in GROUND else FLOORS.get(name)


def circles(edges):
    """Strongly connected groups of more than one file (Tarjan's, without recursion)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    out.append(sorted(group))
    return out


def breaches(src):
    production = src_lines.production_lines(src)
    index = module_index(src)
    problems, edges = [], {}
    for rel in sorted(production):
        targets = imports(rel, production_text(os.path.join(src, rel)), index)
        targets &= set(production)
        edges[rel] = targets
        here = floor_of(top(rel))
        if here is None:
            problems.append(f"{rel}: its folder is on no floor (add it to FLOORS and ARCHITECTURE.md)")
            continue
        for t in sorted(targets):
            there = floor_of(top(t))
            if top(t) == top(rel) or there is None:
                continue
            if there <= here and not (there == GROUND_FLOOR and here == GROUND_FLOOR):
                problems.append(f"{rel} imports {t}: an arrow up (floor {here} to {there})")
    for group in circles(edges):
        if len({folder(f) for f in group}) > 1:
            problems.append("a circle between folders: " + " ↔ ".join(group))
    return problems


def main(argv):
    src = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    problems = breaches(src)
    for p in problems:
        print(p)
    print("import floors: " + ("held" if not problems else f"{len(problems)} breaches"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
