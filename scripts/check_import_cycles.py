"""Fail when modules of bench/ import each other in a cycle.

    python3 scripts/check_import_cycles.py

A cycle is two or more modules each reachable from the other through imports, counted where
they are written: at the top of a module or inside a function (a deferred import is still a
dependency; it only hides the cycle until run time). Each cycle is printed as its modules.
The graph is import-linter's (grimp, in the dev environment); `make lint` runs this.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

import grimp

PACKAGE = "bench"


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def main() -> int:
    g = grimp.build_graph(PACKAGE)
    graph = {m: set(g.find_modules_directly_imported_by(m)) for m in g.modules}
    cycles = strongly_connected(graph)
    for cycle in cycles:
        print("import cycle: " + " <-> ".join(cycle))
    if cycles:
        print(f"{len(cycles)} import cycle(s) in {PACKAGE}/ (scripts/check_import_cycles.py)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
