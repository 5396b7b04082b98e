"""The import graph of a source tree, read with `ast`: every import counts, lazy ones inside
functions and `TYPE_CHECKING` ones included, so a cycle hidden behind either is still a cycle.

`import_graph(root, packages)` maps each module (dotted name; a package's `__init__` is the
package's own name) to the modules of those packages it imports, and lists every external
top-level name it imports. `cycles(graph)` returns the strongly connected components of more
than one module (or a module importing itself).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class ImportGraph:
    """Edges between the tree's own modules, and the outside top-level packages each imports."""

    edges: dict[str, set[str]] = field(default_factory=dict)
    external: dict[str, set[str]] = field(default_factory=dict)


def module_names(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under the packages."""
    names: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            names[name] = path
    return names


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a `from ... import` names (relative levels resolved)."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _targets(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """What an import statement imports: `from p import n` imports p (its __init__ runs) and
    p.n when n is a module."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = _resolve(module, is_package, node)
        return [base] + [f"{base}.{alias.name}" for alias in node.names]
    return []


def import_graph(root: Path, packages: tuple[str, ...]) -> ImportGraph:
    """The graph of every import statement anywhere in the packages' files."""
    names = module_names(root, packages)
    graph = ImportGraph()
    for module, path in names.items():
        is_package = path.name == "__init__.py"
        edges, external = set(), set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = _targets(node, module, is_package)
            for target in targets:
                if target.split(".")[0] not in packages:
                    external.add(target.split(".")[0])
                elif target in names and target != module:
                    edges.add(target)
        graph.edges[module] = edges
        graph.external[module] = external
    return graph


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with a cycle (Tarjan, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
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
                if len(component) > 1 or node in edges.get(node, ()):
                    found.append(sorted(component))
    return found


def plant_tree(root: Path, files: dict[str, str]) -> Path:
    """Write a planted source tree (relative path -> text) under `root`, for a house check to
    read as it reads the real one."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root
