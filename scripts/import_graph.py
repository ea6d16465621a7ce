"""Count the project's import graph from the source alone (``ast``, nothing imported).

Prints the files in each app's top folder, the largest modules, the arrows between
top-level packages, and the import circles between files (strongly connected
components of the file graph). ``--all`` also counts imports made inside functions;
by default only module-level imports count, as those are the ones that can fail at
import time.

    python scripts/import_graph.py [--all]
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = (
    "common",
    "metrics",
    "benchmarks",
    "accounts",
    "studies",
    "modeling",
    "annotation",
    "reports",
    "demo",
    "config",
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files() -> dict[str, Path]:
    files = {}
    for app in APPS:
        base = ROOT / app
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*.py")):
            if "migrations" in path.parts:
                continue
            files[module_name(path)] = path
    return files


def imported_modules(path: Path, module: str, is_package: bool, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    nodes: list[ast.AST]
    if top_level_only:
        # Module level, including `if TYPE_CHECKING:` blocks' siblings but not function bodies.
        nodes = []
        stack: list[ast.AST] = list(tree.body)
        while stack:
            node = stack.pop()
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                continue
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                continue
            nodes.append(node)
            stack.extend(ast.iter_child_nodes(node))
    else:
        nodes = list(ast.walk(tree))
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts)
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def file_graph(top_level_only: bool) -> dict[str, set[str]]:
    files = source_files()
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        targets = set()
        for name in imported_modules(path, module, path.name == "__init__.py", top_level_only):
            # Resolve `from pkg import name` to the module `pkg.name` when it is a file.
            while name and name not in files:
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
        graph[module] = targets
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; components of more than one file, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    result: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    item = stack.pop()
                    on_stack.discard(item)
                    component.append(item)
                    if item == node:
                        break
                if len(component) > 1:
                    result.append(sorted(component))
    return sorted(result)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="count imports inside functions too")
    args = parser.parse_args()
    files = source_files()

    print("Files in each app's top folder (.py files and subpackages):")
    for app in APPS:
        base = ROOT / app
        if base.is_dir():
            entries = [
                p
                for p in base.iterdir()
                if (p.suffix == ".py") or (p.is_dir() and (p / "__init__.py").exists())
            ]
            print(f"  {app:<11} {len(entries)}")

    sizes = sorted(
        ((len(path.read_text().splitlines()), module) for module, path in files.items()),
        reverse=True,
    )
    print("Largest modules (lines):")
    for lines, module in sizes[:5]:
        print(f"  {lines:>5}  {module}")

    graph = file_graph(top_level_only=not args.all)
    arrows: Counter[tuple[str, str]] = Counter()
    for module, targets in graph.items():
        for target in targets:
            a, b = module.split(".")[0], target.split(".")[0]
            if a != b:
                arrows[(a, b)] += 1
    rank = {app: i for i, app in enumerate(APPS)}
    upward = [
        (a, b) for (a, b) in arrows if rank[b] > rank[a] and (a, b) != ("studies", "modeling")
    ]
    sideways = [(a, b) for (a, b) in arrows if {a, b} == {"studies", "modeling"}]
    print(
        f"Arrows between apps: {len(arrows)}; upward: {len(upward)}; "
        f"studies<->modeling: {len(sideways)}"
    )
    for a, b in sorted(upward + sideways):
        print(f"  {a} -> {b}  ({arrows[(a, b)]} import(s))")

    cycles = strongly_connected(graph)
    kind = "all imports" if args.all else "module-level imports"
    print(f"Import circles between files ({kind}): {len(cycles)}")
    for component in cycles:
        print("  " + " <-> ".join(component))
    return 0


if __name__ == "__main__":
    sys.exit(main())
