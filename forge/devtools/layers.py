"""Forge's import graph, read from the source, and the layer rules it must obey.

The layers, bottom to top (an arrow may only point down, never sideways into another
package of the same level; there are no exceptions):

    forge.cli, forge.commands                     commands; imported by nothing else
    forge.tools                                   forge-opt, the -t python plan printer,
                                                  fuzz-ir (commands drive them in-process)
    forge.tuning, forge.devtools                  cost/ablate/autotune; numerics/fuzz/bench
    forge (its __init__)                          the Python API, loaded lazily from runtime
    forge.runtime                                 executor, compile entry points
    forge.conversion                              lowerings to NNFactory graphs, run-time glue
    forge.transforms                              passes and the one pipeline
    forge.frontend                                capture, importer, models, loading
                                                  (transforms and conversion never import it)
    forge.target                                  what the target runs: the capability
                                                  table, the dialect's CPU semantics
    forge.dialects                                npu ops, shapes, dtypes, context
    forge.support                                 diagnostics, atomic files, campaigns,
                                                  flags, xDSL fixes, host facts

`test/python/devtools/test_layering.py` enforces it; `python -m forge.devtools.layers` prints
the figures (modules, arrows, cycles, upward arrows, function-local imports).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from forge.support.host import PACKAGE_DIRS, SOURCE_ROOT

LAYERS: dict[str, int] = {
    "forge.support": 0,
    "forge.dialects": 1,
    "forge.target": 2,
    "forge.frontend": 3,
    "forge.transforms": 4,
    "forge.conversion": 5,
    "forge.runtime": 6,
    "forge": 7,  # only forge/__init__.py: re-exports forge.runtime.api (forge.compile)
    "forge.tuning": 7,
    "forge.devtools": 7,
    "forge.tools": 8,
    "forge.commands": 9,
    "forge.cli": 9,
}
"""Package -> level. A module may import modules of a lower level and of its own package."""

FORBIDDEN: dict[str, frozenset[str]] = {
    # The frontend is a side branch: passes and lowerings work on IR, never on models.
    "forge.transforms": frozenset({"forge.frontend"}),
    "forge.conversion": frozenset({"forge.frontend"}),
}
"""Package -> lower packages it must not import all the same."""

TOP = ("forge.cli", "forge.commands")
"""Imported by nothing outside themselves (forge.cli imports forge.commands)."""


@dataclass
class Graph:
    modules: dict[str, Path]
    imports: dict[str, set[str]] = field(default_factory=dict)
    local_imports: list[tuple[str, int, str]] = field(default_factory=list)
    """(module, line, imported forge module) for imports inside a function."""


def module_name(path: Path) -> str | None:
    for name, folder in PACKAGE_DIRS.items():
        base = SOURCE_ROOT / folder
        if base in path.parents:
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            return ".".join([name, *parts])
    return None


def discover() -> dict[str, Path]:
    modules = {}
    for folder in PACKAGE_DIRS.values():
        for path in sorted((SOURCE_ROOT / folder).rglob("*.py")):
            name = module_name(path)
            if name is not None:
                modules[name] = path
    return modules


def _targets(node: ast.AST, modules: dict[str, Path]) -> Iterator[str]:
    names: list[str] = []
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
    elif isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    for name in names:
        # `from forge.x import y`: y is a module or a name in forge.x
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name:
            yield name


def build(modules: dict[str, Path] | None = None) -> Graph:
    graph = Graph(modules or discover())
    for name, path in graph.modules.items():
        tree = ast.parse(path.read_text(), str(path))
        edges = graph.imports.setdefault(name, set())
        in_function: set[int] = set()
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                in_function.update(id(n) for n in ast.walk(fn) if n is not fn)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            targets = {
                target
                for target in _targets(node, graph.modules)
                # not a package's own __init__ while importing one of its submodules
                if target != name and not name.startswith(target + ".")
            }
            edges.update(targets)
            if targets and id(node) in in_function:
                graph.local_imports.append((name, node.lineno, min(targets)))
    return graph


def package_of(module: str) -> str:
    """The longest prefix of `module` that `LAYERS` names."""
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        prefix = ".".join(parts[:i])
        if prefix in LAYERS:
            return prefix
    raise KeyError(f"{module} is in no layer of forge.devtools.layers.LAYERS")


def cycles(graph: Graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph.modules:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.imports.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.imports.get(child, ())))))
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
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def violations(graph: Graph) -> list[str]:
    """Every import that points up the stack or sideways into another package of the
    same level, and every import of a top-level module from below it."""
    found = []
    for module, targets in sorted(graph.imports.items()):
        package = package_of(module)
        for target in sorted(targets):
            target_package = package_of(target)
            if target_package == package or package == "forge.cli":
                continue
            if target_package in TOP and package not in TOP:
                found.append(f"{module} -> {target} (nothing imports the CLI)")
            elif target_package in FORBIDDEN.get(package, ()):
                found.append(f"{module} -> {target} ({package} never imports {target_package})")
            elif LAYERS[target_package] >= LAYERS[package]:
                found.append(
                    f"{module} -> {target} ({package} is level {LAYERS[package]}, "
                    f"{target_package} level {LAYERS[target_package]})"
                )
    return found


def line_counts(graph: Graph) -> dict[str, int]:
    counts: dict[str, int] = {}
    for module, path in graph.modules.items():
        package = package_of(module)
        counts[package] = counts.get(package, 0) + len(path.read_text().splitlines())
    return counts


def main() -> int:
    graph = build()
    arrows = sum(len(t) for t in graph.imports.values())
    print(f"{len(graph.modules)} modules, {arrows} import arrows")
    found_cycles = cycles(graph)
    print(f"cycles: {len(found_cycles)}")
    for cycle in found_cycles:
        print("  " + " <-> ".join(cycle))
    bad = violations(graph)
    print(f"upward or sideways arrows: {len(bad)}")
    for line in bad:
        print("  " + line)
    print(f"function-local imports of forge modules: {len(graph.local_imports)}")
    print("lines per package:")
    for package, lines in sorted(line_counts(graph).items(), key=lambda kv: LAYERS[kv[0]]):
        print(f"  {package:<22}{lines:>7}")
    return 1 if found_cycles or bad else 0


if __name__ == "__main__":
    sys.exit(main())
