#!/usr/bin/env python3
"""Checks the workspace's layout rules, and exits 1 when one is broken:

1. no two source files import each other, directly or through a circle (per crate root:
   `src/lib.rs`, `src/main.rs`, `src/bin/*.rs`, bench and example roots; test modules and
   `tests/` aside);
2. no Rust source file is over 700 lines outside its `#[cfg(test)]` module, unless its opening
   note says why ("longer than 700 lines because ...");
3. every Rust source file opens with a `//!` note that says its job.

A folder module (`train/`) counts once more as a whole: a file outside it that imports from
it, while one of its files imports that file back, is a cycle too (`events.rs` using
`train::TrainRequest` while `train/cpu.rs` uses `events::PROGRESS_EVERY`).

An import is a `use` or a path (`crate::a::B`, `super::c`, `child::d`) that names an item of
another file of the same crate; `pub use` re-exports are followed to the file that defines the
item, so a facade (`lib.rs`, `mod.rs` re-exporting its children) is not itself an edge.

    python3 tools/check_structure.py [ROOT]     # ROOT: the workspace (default: this checkout)
"""
import os
import re
import sys

MAX_LINES = 700
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip(text):
    """Source without comments, string and char literals (newlines kept, so lines still count)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    out.append("\n" if text[i] == "\n" else "")
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not re.match(r"\w", text[i - 1])):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            end = n if end < 0 else end + 1 + len(hashes)
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'|'\\u\{[0-9a-fA-F]+\}'|'\\x..'", text[i:i + 12]):
            m = re.match(r"'(\\.|[^\\'])'|'\\u\{[0-9a-fA-F]+\}'|'\\x..'", text[i:i + 12])
            out.append("' '")
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def test_spans(code):
    """(start, end) offsets of `#[cfg(test)]` items (modules or functions) in stripped code."""
    spans = []
    for m in re.finditer(r"#\[cfg\(test\)\]", code):
        j = m.end()
        semi, brace = code.find(";", j), code.find("{", j)
        if brace < 0 or (0 <= semi < brace):
            spans.append((m.start(), semi + 1))
            continue
        depth, k = 0, brace
        while k < len(code):
            if code[k] == "{":
                depth += 1
            elif code[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        spans.append((m.start(), k + 1))
    return spans


def without(code, spans):
    parts, last = [], 0
    for a, b in sorted(spans):
        if a < last:
            continue
        parts.append(code[last:a])
        parts.append("\n" * code.count("\n", a, b))
        last = b
    parts.append(code[last:])
    return "".join(parts)


def parse_use_tree(s):
    """`a::{b, c::{d as e}, self}` -> [(["a","b"], "b"), (["a","c","d"], "e"), (["a"], "a")]."""
    s = re.sub(r"\s+", "", s)
    pos = 0

    def tree(prefix):
        nonlocal pos
        out = []
        path = list(prefix)
        while pos < len(s):
            if s[pos] == "{":
                pos += 1
                while True:
                    out += tree(path)
                    if pos < len(s) and s[pos] == ",":
                        pos += 1
                        if pos < len(s) and s[pos] == "}":
                            pos += 1
                            return out
                        continue
                    if pos < len(s) and s[pos] == "}":
                        pos += 1
                    return out
            m = re.match(r"(\*|" + IDENT + r")(::)?", s[pos:])
            if not m:
                return out
            pos += len(m.group(0))
            seg = m.group(1)
            if m.group(2):
                path.append(seg)
                continue
            alias = seg
            am = re.match(r"as(" + IDENT + ")", s[pos:])
            if am:
                alias, pos = am.group(1), pos + len(am.group(0))
            if seg == "self":
                out.append((path, alias if am else (path[-1] if path else "self")))
            else:
                out.append((path + [seg], alias))
            return out
        return out

    return tree([])


class Module:
    def __init__(self, path, file, parent):
        self.path, self.file, self.parent = path, file, parent
        self.children = {}
        self.reexports = {}  # name -> module-relative path
        self.globs = []
        self.code = ""


def load_crate(root_file):
    """The module tree of one crate root: {module path tuple: Module}."""
    modules = {}

    def load(path, file, parent, dir_for_children):
        mod = Module(path, file, parent)
        modules[path] = mod
        code = strip(open(file, encoding="utf-8").read())
        code = without(code, test_spans(code))
        mod.code = code
        for m in re.finditer(r"(?m)^\s*(?:#\[path\s*=\s*\"([^\"]+)\"\]\s*)?(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*;", code):
            name = m.group(2)
            cands = [os.path.join(dir_for_children, name + ".rs"), os.path.join(dir_for_children, name, "mod.rs")]
            child = next((c for c in cands if os.path.exists(c)), None)
            if child:
                sub = os.path.join(dir_for_children, name)
                mod.children[name] = load(path + (name,), child, mod, sub)
        for m in re.finditer(r"(?m)^\s*pub(?:\([^)]*\))?\s+use\s+([^;]+);", code):
            for p, alias in parse_use_tree(m.group(1)):
                if p and p[-1] == "*":
                    mod.globs.append(p[:-1])
                else:
                    mod.reexports[alias] = p
        return mod

    base = os.path.dirname(root_file)
    stem = os.path.splitext(os.path.basename(root_file))[0]
    child_dir = base if stem in ("lib", "main", "mod") else os.path.join(base, stem)
    load((), root_file, None, child_dir)
    return modules


def resolve(modules, here, segs, depth=0):
    """The file defining the item `segs` names from module `here`, or None (outside the crate)."""
    if depth > 20 or not segs:
        return None
    mod = here
    first = segs[0]
    if first == "crate":
        mod, segs = modules[()], segs[1:]
    elif first in ("super", "self"):
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                mod = mod.parent
                if mod is None:
                    return None
            segs = segs[1:]
    elif first not in mod.children and first not in mod.reexports:
        return None
    for i, seg in enumerate(segs):
        if seg in mod.children:
            mod = mod.children[seg]
            continue
        if seg in mod.reexports:
            return resolve(modules, mod, mod.reexports[seg] + segs[i + 1:], depth + 1)
        for g in mod.globs:
            target = resolve(modules, mod, g + [seg], depth + 1)
            if target:
                return target
        return mod.file
    return mod.file


def edges_of(modules):
    edges = {}
    for mod in modules.values():
        out = edges.setdefault(mod.file, set())
        code = re.sub(r"(?m)^\s*pub(?:\([^)]*\))?\s+use\s+[^;]+;", "", mod.code)
        paths = []
        for m in re.finditer(r"(?m)^\s*use\s+([^;]+);", code):
            paths += [p for p, _ in parse_use_tree(m.group(1))]
        code_no_use = re.sub(r"(?m)^\s*use\s+[^;]+;", "", code)
        for m in re.finditer(r"(?<![\w:])((?:" + IDENT + r")(?:::" + IDENT + r")+)", code_no_use):
            paths.append(m.group(1).split("::"))
        for p in paths:
            if p and p[-1] == "*":
                p = p[:-1]
            if not p:
                continue
            if p[0] not in ("crate", "super", "self") and p[0] not in mod.children:
                continue
            target = resolve(modules, mod, p)
            if target and target != mod.file:
                out.add(target)
    return edges


def folder_edges(modules, edges):
    """The same edges between units, where a unit is a top-level file of the crate root or a
    whole folder module under it (named by the folder)."""
    root_dir = os.path.dirname(modules[()].file)

    def unit(f):
        rel = os.path.relpath(f, root_dir)
        first = rel.split(os.sep)[0]
        return os.path.join(root_dir, first) if os.sep in rel else f

    out = {}
    for a, targets in edges.items():
        for b in targets:
            ua, ub = unit(a), unit(b)
            if ua != ub:
                out.setdefault(ua, set()).add(ub)
    return out


def cycles(edges):
    """Strongly connected components with more than one file (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(edges):
        if v not in index:
            visit(v)
    return out


def crate_roots(crate_dir):
    roots = []
    for rel in ("src/lib.rs", "src/main.rs"):
        p = os.path.join(crate_dir, rel)
        if os.path.exists(p):
            roots.append(p)
    for sub in ("src/bin", "examples", "benches"):
        d = os.path.join(crate_dir, sub)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            p = os.path.join(d, name)
            if name.endswith(".rs"):
                roots.append(p)
            elif os.path.exists(os.path.join(p, "main.rs")):
                roots.append(os.path.join(p, "main.rs"))
    return roots


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    problems = []
    crates = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in ("target", ".git", "node_modules", "tests") and not d.startswith(".")]
        if "Cargo.toml" in filenames and os.path.isdir(os.path.join(dirpath, "src")):
            crates.append(dirpath)
    for crate in sorted(crates):
        for r in crate_roots(crate):
            modules = load_crate(r)
            edges = edges_of(modules)
            for comp in cycles(edges):
                rels = [os.path.relpath(f, root) for f in comp]
                problems.append("import cycle: " + " <-> ".join(rels))
            for comp in cycles(folder_edges(modules, edges)):
                rels = [os.path.relpath(f, root) for f in comp]
                problems.append("import cycle between modules: " + " <-> ".join(rels))
        for sub in ("src", "examples", "benches"):
            for dirpath, dirnames, filenames in os.walk(os.path.join(crate, sub)):
                dirnames[:] = [d for d in dirnames if d not in ("target", "node_modules")]
                for name in filenames:
                    if not name.endswith(".rs"):
                        continue
                    path = os.path.join(dirpath, name)
                    rel = os.path.relpath(path, root)
                    text = open(path, encoding="utf-8").read()
                    first = next((l for l in text.splitlines() if l.strip()), "")
                    if not first.startswith("//!"):
                        problems.append(f"{rel}: does not open with a `//!` note saying its job")
                    note = "\n".join(l for l in text.splitlines()[:40] if l.startswith("//!"))
                    code = strip(text)
                    lines = without(code, test_spans(code)).count("\n")
                    tests = sum(b - a for a, b in [(code.count("\n", 0, a), code.count("\n", 0, b)) for a, b in test_spans(code)])
                    body = text.count("\n") - tests
                    if body > MAX_LINES and "longer than 700 lines" not in note.lower():
                        problems.append(f"{rel}: {body} lines outside tests (at most {MAX_LINES})")
                    del lines
    seen = set()
    for p in problems:
        if p not in seen:
            seen.add(p)
            print(p)
    if problems:
        print(f"check_structure: {len(seen)} problem(s)", file=sys.stderr)
        return 1
    print("check_structure: no import cycles, no file over 700 lines, every file opens with its note")
    return 0


if __name__ == "__main__":
    sys.exit(main())
