#!/usr/bin/env python3
"""The grader's modules import each other in one direction: no circle.

A circle (grade imports drill, drill imports grade back, even inside a function) means
neither module can be read, tested or changed without the other. This reads every
module under grader/ with `ast`, top-level imports and imports inside functions alike,
and reports each set of modules that import each other round. `from package import
module` counts as an import of that module, not of the package's __init__.

    python3 grader/imports.py          prints the circles; exit 1 if there is one
    import imports; imports.circles(root) -> [[module, ...], ...]
"""

import ast
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def modules(root):
    """{dotted name: path} of the .py files under root (a package is its __init__)."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                name = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                out[name[:-len(".__init__")] if name.endswith(".__init__") else name] = path
    return out


def graph(root):
    """{module: the modules of root it imports}."""
    mods = modules(root)
    out = {}
    for name, path in mods.items():
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name in mods)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                subs = [f"{node.module}.{a.name}" for a in node.names
                        if f"{node.module}.{a.name}" in mods]
                deps.update(subs)
                if node.module in mods and len(subs) < len(node.names):
                    deps.add(node.module)
        out[name] = deps - {name}
    return out


def circles(root=HERE):
    """Every set of two or more modules that import each other round, each sorted."""
    g = graph(root)
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components, iteratively
        work = [(v, iter(sorted(g[v])))]
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(found)


def main():
    found = circles()
    for c in found:
        print("modules that import each other round: " + ", ".join(c))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
