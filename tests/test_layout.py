"""The library's layout shows the flow: each sub-package imports only from its own layer or below.

data -> index -> retrieval -> methods -> questions -> evaluation -> report -> runner, with llm,
prompts and config beneath and records, stats, text, registry, redact and locks at the bottom. Imports
under TYPE_CHECKING count too: a type that only a higher layer defines is a sign the seam is in the
wrong place.
"""

from __future__ import annotations

import ast

from conftest import PROJECT_ROOT

LAYERS = [
    {"records", "stats", "text", "registry", "redact", "locks"},
    {"config", "prompts"},
    {"llm"},
    {"data"},
    {"index"},
    {"retrieval"},
    {"methods"},
    {"questions"},
    {"evaluation"},
    {"report"},
    {"runner"},
    {"cli", "__main__"},
]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}
PACKAGE = PROJECT_ROOT / "lib" / "ragtrial"


def top_level(path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0].removesuffix(".py")


def imported_tops(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ragtrial"):
            parts = node.module.split(".")
            names = [a.name for a in node.names] if len(parts) == 1 else [parts[1]]
            found += [(node.lineno, name) for name in names]
        elif isinstance(node, ast.Import):
            found += [
                (node.lineno, a.name.split(".")[1]) for a in node.names if a.name.startswith("ragtrial.")
            ]
    return found


def test_every_module_belongs_to_a_layer():
    tops = {top_level(p) for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent != PACKAGE}
    assert tops <= set(RANK), f"modules outside the layer list: {sorted(tops - set(RANK))}"


def test_imports_point_down_the_flow():
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "__init__.py":
            continue
        own = RANK[top_level(path)]
        for line, name in imported_tops(ast.parse(path.read_text())):
            if RANK.get(name, 0) > own:
                upward.append(f"{path.relative_to(PACKAGE)}:{line} imports ragtrial.{name}")
    assert not upward, "imports against the flow:\n" + "\n".join(upward)


def test_tests_mirror_the_library_tree():
    sub_packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    test_folders = {
        p.name for p in (PROJECT_ROOT / "tests").iterdir() if p.is_dir() and any(p.glob("test_*.py"))
    }
    assert test_folders <= sub_packages, (
        f"test folders with no library sub-package: {test_folders - sub_packages}"
    )


def module_name(path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(tree: ast.AST, known: set[str]) -> set[str]:
    """The ragtrial modules a module imports anywhere (function bodies and TYPE_CHECKING included):
    `from a.b import c` names module `a.b.c` when that is a module, else `a.b`.
    """
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ragtrial"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                found.add(candidate if candidate in known else node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("ragtrial")}
    return found & known


def import_circles() -> list[list[str]]:
    """Strongly connected groups of more than one module in the import graph (Tarjan)."""
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {
        name: imported_modules(ast.parse(path.read_text()), set(paths)) - {name}
        for name, path in paths.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return circles


def test_no_module_imports_itself_through_others():
    """No circle anywhere, within a layer included (a lazy import inside a function counts too: it
    still ties the two modules together).
    """
    circles = import_circles()
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)
