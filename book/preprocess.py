#!/usr/bin/env python3
"""mdBook preprocessor for this book (book.toml runs it before mdBook's own includes).

Each stage's chapter is its folder's README.md, so it reads the same on a forge; a book page
pulls it in with one line, `{{#include ../../03-gpu-matmul/README.md}}`. Links in a README are
written relative to the README, which is not where the page lands. For every markdown file a
page includes (recursively), this preprocessor

- inlines it, rewriting its relative `{{#include}}` paths for the page;
- rewrites a relative link to another included chapter into a link to that chapter's page;
- turns a link to the in-browser trainer's page (`05-mnist/web/index.html`) into a link to the
  trainer built beside the book;
- turns a link to any other file of the repository (source, results) into a link to the
  file's copy in the site (`repo/PATH`, copied by book/build.sh from the list this writes to
  target/book-repo-files.txt);
- fails the build (exit 1) on a link, image or include that points at no file, or an include
  anchor that its file does not define.

    python3 book/preprocess.py supports html     # mdBook asks first
    mdbook build book                           # runs it with the book as JSON on stdin
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SRC = os.path.join(HERE, "src")
INCLUDE = re.compile(r"\{\{#(include|rustdoc_include)\s+([^}\s]+?)(:[^}\s]*)?\s*\}\}")
LINK = re.compile(r"(!?)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^()\s]+)((?:\s+\"[^\"]*\")?)\)")
TRAINER = os.path.join(REPO, "05-mnist", "web", "index.html")
REF_DEF = re.compile(r"(?m)^(\s{0,3}\[[^\]]+\]:\s+)(\S+)(.*)$")
errors = []
repo_files = set()


def rel(path, start):
    return os.path.relpath(path, start).replace(os.sep, "/")


def is_external(target):
    return bool(re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target)) or target.startswith("//")


def whole_md_include(text):
    """The path of a page that is only `{{#include X.md}}`, or None."""
    m = INCLUDE.fullmatch(text.strip())
    if m and m.group(2).endswith(".md") and not m.group(3):
        return m.group(2)
    return None


def split_code(text):
    """(is_code, chunk) pieces: fenced blocks are code (a link's label may hold an inline code
    span, so those stay in the text)."""
    out, pos = [], 0
    pattern = re.compile(r"(?ms)^(\s*)(```|~~~).*?^\s*\2[^\n]*$")
    for m in pattern.finditer(text):
        out.append((False, text[pos:m.start()]))
        out.append((True, m.group(0)))
        pos = m.end()
    out.append((False, text[pos:]))
    return out


def anchors_of(path):
    try:
        text = open(path, encoding="utf-8").read()
    except (OSError, UnicodeDecodeError):
        return set()
    return set(re.findall(r"ANCHOR:\s*(\S+)", text))


def rewrite(text, base_dir, page_dir, pages, where, depth=0):
    """`text` (from a file in `base_dir`) as it must read on a page whose file is in `page_dir`."""
    if depth > 8:
        errors.append(f"{where}: includes nested more than 8 deep")
        return text

    def include(m):
        kind, path, anchor = m.group(1), m.group(2), m.group(3) or ""
        target = os.path.normpath(os.path.join(base_dir, path))
        if not os.path.isfile(target):
            errors.append(f"{where}: include of {path}: no such file ({rel(target, REPO)})")
            return m.group(0)
        name = anchor[1:]
        if name and not re.fullmatch(r"[0-9:]*", name) and name not in anchors_of(target):
            errors.append(f"{where}: include of {path}: the file has no `ANCHOR: {name}`")
        if target.endswith(".md") and not anchor:
            inner = open(target, encoding="utf-8").read()
            return rewrite(inner, os.path.dirname(target), page_dir, pages, rel(target, REPO), depth + 1)
        return "{{#%s %s%s}}" % (kind, rel(target, page_dir), anchor)

    def link_target(target, image):
        if is_external(target) or target.startswith("#"):
            return target
        path, _, frag = target.partition("#")
        frag = "#" + frag if frag else ""
        resolved = os.path.normpath(os.path.join(base_dir, path))
        if resolved == TRAINER:
            # The trainer's page: in the site it is built beside the book (book/build.sh puts
            # the book in book/ and the trainer at the site's root).
            return rel(os.path.join(HERE, "index.html"), page_dir) + frag
        if not os.path.exists(resolved):
            errors.append(f"{where}: link to {target}: no such file ({rel(resolved, REPO)})")
            return target
        if resolved in pages:
            return rel(os.path.join(SRC, pages[resolved]), page_dir) + frag
        if resolved.startswith(SRC + os.sep):
            return rel(resolved, page_dir) + frag
        if os.path.isdir(resolved):
            # A folder: the site has no listing, so the nearest README.md that describes it (its
            # own, or its parent's: a results folder's README names every file in it).
            folder = resolved
            while folder.startswith(REPO) and not os.path.isfile(os.path.join(folder, "README.md")):
                folder = os.path.dirname(folder)
            readme = os.path.join(folder, "README.md")
            if readme in pages:
                return rel(os.path.join(SRC, pages[readme]), page_dir)
            repo_files.add(rel(readme, REPO))
            return rel(os.path.join(SRC, "repo", rel(readme, REPO)), page_dir)
        repo_files.add(rel(resolved, REPO))
        return rel(os.path.join(SRC, "repo", rel(resolved, REPO)), page_dir) + frag

    def link(m):
        bang, label, target, title = m.groups()
        return f"{bang}[{label}]({link_target(target, bool(bang))}{title})"

    def ref_def(m):
        return m.group(1) + link_target(m.group(2), False) + m.group(3)

    pieces = []
    for code, chunk in split_code(text):
        if not code:
            chunk = LINK.sub(link, chunk)
            chunk = REF_DEF.sub(ref_def, chunk)
        pieces.append(chunk)
    # Links first, then includes: an inlined file arrives with its own links already rewritten.
    return INCLUDE.sub(include, "".join(pieces))


def chapters(items):
    for item in items:
        if isinstance(item, dict) and "Chapter" in item:
            ch = item["Chapter"]
            yield ch
            yield from chapters(ch.get("sub_items", []))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "supports":
        return 0
    context, book = json.load(sys.stdin)
    items = book.get("items", book.get("sections", []))
    # Which repository file each page stands for: the target of a one-line include.
    pages = {}
    for ch in chapters(items):
        source = ch.get("source_path") or ch.get("path")
        if not source:
            continue
        pages[os.path.normpath(os.path.join(SRC, source))] = source
        inner = whole_md_include(ch.get("content", ""))
        if inner:
            pages[os.path.normpath(os.path.join(SRC, os.path.dirname(source), inner))] = source
    for ch in chapters(items):
        source = ch.get("source_path") or ch.get("path")
        if not source or ch.get("content") is None:
            continue
        page_dir = os.path.dirname(os.path.join(SRC, source))
        ch["content"] = rewrite(ch["content"], page_dir, page_dir, pages, "book/src/" + source)
    if errors:
        for e in errors:
            print("book: " + e, file=sys.stderr)
        print(f"book: {len(errors)} broken link(s) or include(s)", file=sys.stderr)
        return 1
    os.makedirs(os.path.join(REPO, "target"), exist_ok=True)
    with open(os.path.join(REPO, "target", "book-repo-files.txt"), "w", encoding="utf-8") as f:
        f.write("".join(p + "\n" for p in sorted(repo_files)))
    json.dump(book, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
