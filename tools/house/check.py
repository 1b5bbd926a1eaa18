#!/usr/bin/env python3
"""The house's promises, checked: no library source file over 600 lines, no module cycle, and
every library file named in doc/design.md's source tree (so a newcomer's map stays true).

A module cycle is a circle of modules that reach each other's items (through `crate::` or
`super::` paths), leaving out a module's reach into its own ancestors and descendants (a
parent and its children are one room), and a file's own `#[cfg(test)] mod tests` block. Tests
(`tests.rs`, the `cfg(test)` model) count for the size limit like any file.

Usage: tools/house/check.py [crate source dir ...]   (default: crates/distlock/src)
       tools/house/check.py --self-test                 (the check fails where it should)
Exit status 1, with each breach listed, when a promise is broken.
"""
import pathlib
import re
import sys

LIMIT = 600


def module_of(root: pathlib.Path, path: pathlib.Path) -> tuple:
    """The module path of a source file: `lock/mod.rs` and `lock.rs` are `("lock",)`."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] in ("mod", "lib"):
        parts.pop()
    return tuple(parts)


def paths_in(text: str):
    """Every `crate::a::b` or `super::a` path the text names, as written (`use` trees
    expanded one level: `use crate::a::{b, c::d}` names `a::b` and `a::c::d`)."""
    text = re.sub(r"//[^\n]*", "", text)
    # A file's own tests (`#[cfg(test)] mod tests { … }`, last in the file) are no part of
    # the structure.
    text = re.split(r"#\[cfg\(test\)\]\s*mod tests \{", text)[0]
    for m in re.finditer(r"\b((?:crate|super|self)(?:::(?:super|[A-Za-z_][A-Za-z0-9_]*))*)(::\{([^;]*?)\})?", text):
        head = m.group(1)
        if m.group(3) is None:
            yield head
            continue
        for item in re.split(r"[,{}]", m.group(3)):
            item = item.strip().split(" as ")[0].strip()
            if item:
                yield head + "::" + item


def resolve(current: tuple, path: str, modules: set):
    parts = path.split("::")
    if parts[0] == "crate":
        base, rest = (), parts[1:]
    else:
        base = list(current)
        rest = parts
        while rest and rest[0] in ("super", "self"):
            if rest[0] == "super":
                base = base[:-1]
            rest = rest[1:]
        base = tuple(base)
    best = None
    cand = base
    if cand in modules:
        best = cand
    for part in rest:
        cand = cand + (part,)
        if cand in modules:
            best = cand
        else:
            break
    return best


def related(a: tuple, b: tuple) -> bool:
    return a[: len(b)] == b or b[: len(a)] == a


def cycles(graph: dict):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
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
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def check(root: pathlib.Path) -> list:
    breaches = []
    files = sorted(root.rglob("*.rs"))
    modules = {module_of(root, f) for f in files}
    graph = {}
    for f in files:
        text = f.read_text()
        lines = text.count("\n")
        if lines > LIMIT:
            breaches.append(f"{f}: {lines} lines (the limit is {LIMIT})")
        me = module_of(root, f)
        for p in paths_in(text):
            target = resolve(me, p, modules)
            if target is not None and not related(me, target):
                graph.setdefault(me, set()).add(target)
    for comp in cycles(graph):
        names = ", ".join("::".join(m) or "crate" for m in comp)
        edges = [
            f"{'::'.join(a)} -> {'::'.join(b)}"
            for a in comp
            for b in sorted(graph.get(a, ()))
            if b in comp
        ]
        breaches.append(f"{root}: module cycle among {names} ({'; '.join(edges)})")
    return breaches


TREE_HEADING = "The source tree (`crates/distlock/src/`):"


def tree_text(design: pathlib.Path) -> str:
    """The text block after the design doc's source-tree heading."""
    text = design.read_text()
    start = text.index("```text\n", text.index(TREE_HEADING)) + len("```text\n")
    return text[start:text.index("```", start)]


def unmapped(root: pathlib.Path, tree: str) -> list:
    """The library files the tree does not name: a file is named by its path (as an entry or
    anywhere in the text, e.g. `keys/tests.rs`) or by an entry for a directory above it
    (`blocking/`: the entry describes its files)."""
    dirs = [l.split()[0] for l in tree.splitlines() if l[:1].strip() and l.split()[0].endswith("/")]
    missing = []
    for f in sorted(root.rglob("*.rs")):
        rel = f.relative_to(root).as_posix()
        named = re.search(r"(?<![\w/.])" + re.escape(rel) + r"(?![\w/])", tree)
        if named or any(rel.startswith(d) for d in dirs):
            continue
        missing.append(f"{rel} is not in doc/design.md's source tree")
    return missing


def self_test():
    """The check fails where it should: a file of 601 lines, a circle of two siblings (and
    not a parent with its child, nor a test block)."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        root = pathlib.Path(d)
        (root / "a").mkdir()
        (root / "lib.rs").write_text("mod a;\nmod b;\n")
        (root / "a" / "mod.rs").write_text("mod c;\nuse crate::b::X;\nuse c::Y;\n")
        (root / "a" / "c.rs").write_text("use super::Z;\n")
        (root / "b.rs").write_text("use crate::a::{c::Y, W};\n" + "//\n" * 600)
        (root / "d.rs").write_text("pub struct D;\n#[cfg(test)]\nmod tests {\n use crate::b::X;\n}\n")
        found = check(root)
        assert any("b.rs: 601 lines" in b for b in found), found
        assert any("module cycle among a, b" in b for b in found), found
        assert len(found) == 2, found
        tree = "lib.rs   the root\nb.rs     b\na/       mod.rs and c.rs\n"
        assert unmapped(root, tree) == ["d.rs is not in doc/design.md's source tree"], unmapped(root, tree)


def main(argv):
    if argv[1:] == ["--self-test"]:
        self_test()
        return 0
    roots = [pathlib.Path(a) for a in argv[1:]] or [pathlib.Path("crates/distlock/src")]
    breaches = [b for r in roots for b in check(r)]
    if not argv[1:]:
        design = pathlib.Path("doc/design.md")
        breaches += unmapped(roots[0], tree_text(design))
    for b in breaches:
        print(b)
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
