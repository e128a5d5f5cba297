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
