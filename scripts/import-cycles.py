#!/usr/bin/env python3
"""Fails when source files of a crate import each other, directly or round a loop (issue 44).

Reads every crate's `src/` (and `src-tauri/src/`): a file imports another when it names a path
into it (`crate::a::b`, `super::x`, or a child module's `name::`), in code outside its
`#[cfg(test)]` module. A `pub use` that re-exports an item (a facade) and `mod` lines are not
imports. Prints each loop as its files in order and exits 1 when there is one.

    scripts/import-cycles.py [ROOT]
"""
import re
import sys
from pathlib import Path

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z_0-9]*)+)")
GROUP = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z_0-9]*)*)::\{([^;]*?)\}", re.S)


def modules(src):
    """Module path (a tuple) to file, for one crate."""
    found = {}
    for path in src.rglob("*.rs"):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "mod" or (len(parts) == 1 and parts[0] in ("lib", "main")):
            parts = parts[:-1]
        found[tuple(parts)] = path
    return found


def code_of(path):
    """The module's code outside its tests, without comments, and the re-exports it makes."""
    text = path.read_text(encoding="utf-8")
    cut = re.search(r"#\[cfg\(test\)\]\s*mod tests\s*\{", text)
    text = text[: cut.start()] if cut else text
    text = re.sub(r"//[^\n]*", "", text)
    reexports = re.findall(r"pub(?:\([a-z]+\))?\s+use\s([^;]*);", text)
    return re.sub(r"pub(\([a-z]+\))?\s+use\s[^;]*;", "", text), reexports


def reexported_uses(text, reexports):
    """A re-export is a facade, not a read, until the module's own code names what it re-exports:
    then the module reads the file that item lives in. As paths, like `child::Item`."""
    paths = []
    for line in reexports:
        line = " ".join(line.split())
        m = re.match(r"([\w:]+)::\{(.*)\}$", line)
        items = [(m.group(1), i.strip()) for i in m.group(2).split(",")] if m else [
            tuple(line.rsplit("::", 1))]
        for base, item in items:
            name = item.split(" as ")[-1].strip()
            if name and re.search(rf"\b{name}\b", text):
                paths.append(base + "::" + item.split(" as ")[0].strip())
    return " ".join(paths)


def targets(module, text, mods):
    """Modules `module`'s code names, resolved to the longest module that exists."""
    paths = []
    for m in GROUP.finditer(text):
        for item in re.split(r",", m.group(3)):
            item = item.strip().split(" as ")[0].strip()
            if item:
                paths.append((m.group(1), m.group(2) + "::" + item.replace("{", "").strip()))
    paths += [(m.group(1), m.group(2)) for m in PATH.finditer(text)]
    # A child module named directly (`model::loading_state`).
    for child in {k[-1] for k in mods if k[:-1] == module and k}:
        if re.search(rf"(?<![:\w]){child}::", text):
            paths.append(("self", "::" + child))
    found = set()
    for anchor, rest in paths:
        parts = [p for p in rest.split("::") if p]
        base = () if anchor == "crate" else (module[:-1] if anchor == "super" else module)
        full = base + tuple(parts)
        while full and full not in mods:
            full = full[:-1]
        if full != module and (full or anchor != "crate"):
            found.add(full)
    return found


def cycles(graph):
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
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def main():
    loops = []
    sources = [p / "src" for p in sorted((ROOT / "crates").iterdir())] + [ROOT / "src-tauri/src"]
    for src in sources:
        if not src.is_dir():
            continue
        mods = modules(src)
        graph = {}
        for module, path in mods.items():
            text, reexports = code_of(path)
            uses = reexported_uses(text, reexports)
            # `child::Item` re-exported from a child reads as `self::child::Item`.
            uses = " ".join(u if u.split("::")[0] in ("crate", "super", "self") else "self::" + u
                            for u in uses.split())
            graph[module] = targets(module, text + "\n" + uses, mods)
        for loop in cycles(graph):
            loops.append([str(mods[m].relative_to(ROOT)) for m in loop])
    for loop in loops:
        print("import loop: " + " -> ".join(loop))
    sys.exit(1 if loops else 0)


if __name__ == "__main__":
    main()
