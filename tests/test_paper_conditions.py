"""`docs/paper_conditions.md` is the test's data: every row names a paper's condition, the params
file and runs that realize it, the dotted setting and its value; this test resolves each paper params
file (its shared settings merged into each run, as a batch runs them) and checks every row. A row
without a setting must give the deviation's reason; every seed has a table and every paper params
file is covered by at least one row. Each row also names the behaviour tests that run its step and
assert what happened (`tests/x.py::test_y`, comma-separated), or says `untested: <why>`; a named test
must exist in its file.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import PROJECT_ROOT, batch_runs

from ragtrial.config.batch import RunSpec

TABLE = PROJECT_ROOT / "docs" / "paper_conditions.md"
SEEDS = ("000", "001", "002", "003", "004")
COLUMNS = [
    "condition (as the paper states it)",
    "params file",
    "runs",
    "setting",
    "value",
    "deviation and why",
    "behaviour test",
]
UNTESTED = "untested:"
NO_SETTING = "—"


@dataclass(frozen=True)
class Row:
    seed: str
    line: int
    condition: str
    params: str
    runs: str
    setting: str
    value: str
    deviation: str
    behaviour: str

    def __str__(self) -> str:
        return f"{TABLE.name}:{self.line} (seed {self.seed}: {self.condition})"


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _code(cell: str) -> str:
    return cell[1:-1] if cell.startswith("`") and cell.endswith("`") else cell


@cache
def rows() -> tuple[Row, ...]:
    found, seed, header = [], None, None
    for number, line in enumerate(TABLE.read_text(encoding="utf-8").splitlines(), start=1):
        if heading := re.match(r"^## Seed (\d{3})\b", line):
            seed, header = heading.group(1), None
        elif line.startswith("|") and seed:
            cells = _cells(line)
            if header is None:
                header = cells
                assert header == COLUMNS, f"{TABLE.name}:{number}: columns {header}, expected {COLUMNS}"
            elif not set("".join(cells)) <= set("-: "):
                assert len(cells) == len(COLUMNS), f"{TABLE.name}:{number}: {len(cells)} cells"
                condition, params, runs, setting, value, deviation, behaviour = cells
                found.append(
                    Row(
                        seed,
                        number,
                        condition,
                        _code(params),
                        runs,
                        _code(setting),
                        _code(value),
                        deviation,
                        behaviour,
                    )
                )
        else:
            header = None  # a table ends at its first line that is not a row
    return tuple(found)


@cache
def runs_of(params: str) -> tuple[RunSpec, ...]:
    return tuple(batch_runs(params))


def _selected(row: Row) -> list[RunSpec]:
    specs = runs_of(row.params)
    if row.runs == "all":
        return list(specs)
    chosen = [s for s in specs if row.runs in (s.label, s.notebook)]
    assert chosen, f"{row}: no run labelled or of notebook {row.runs!r} in {row.params}"
    return chosen


def _setting(spec: RunSpec, dotted: str) -> Any:
    value: Any = spec.settings.model_dump(mode="json")
    for part in dotted.split("."):
        assert isinstance(value, dict) and part in value, f"no setting {dotted!r}"
        value = value[part]
    return value


def test_every_seed_has_a_table_and_every_paper_params_file_a_row() -> None:
    assert {r.seed for r in rows()} == set(SEEDS)
    covered = {r.params for r in rows() if r.params != NO_SETTING}
    paper_files = {f"params/{p.name}" for p in (PROJECT_ROOT / "params").glob("paper_*.yaml")}
    assert paper_files <= covered, f"paper params files without a row: {sorted(paper_files - covered)}"


@pytest.mark.parametrize("row", rows(), ids=str)
def test_each_condition_is_realized_or_a_stated_deviation(row: Row) -> None:
    if row.setting == NO_SETTING:
        assert len(row.deviation) > 20 and row.deviation != NO_SETTING, f"{row}: a deviation needs its reason"
        return
    expected = yaml.safe_load(row.value)
    for spec in _selected(row):
        actual = _setting(spec, row.setting)
        assert actual == expected, (
            f"{row}: {row.params} run {spec.label or spec.notebook}: {row.setting} = {actual!r}"
        )


def defined_tests(tree: ast.Module) -> set[str]:
    """The test functions a module defines at its top level or in its classes."""
    names = set()
    for node in tree.body:
        bodies = node.body if isinstance(node, ast.ClassDef) else [node]
        names |= {n.name for n in bodies if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    return {n for n in names if n.startswith("test_")}


def behaviour_problems(cell: str, root: Path) -> list[str]:
    """What is wrong with a row's behaviour-test cell: empty, an `untested:` without a reason of a few
    words, or a node id whose file or test function does not exist (`test_x[case]` names `test_x`).
    """
    if not cell:
        return ["no behaviour test and no 'untested: <why>'"]
    if cell.startswith(UNTESTED):
        reason = cell.removeprefix(UNTESTED).strip()
        return [] if len(reason.split()) >= 4 else [f"'untested' needs its reason: {cell!r}"]
    problems = []
    for node_id in (_code(part.strip()) for part in cell.split(",")):
        path, _, name = node_id.partition("::")
        name = name.split("[")[0]
        file = root / path
        if not (path.startswith("tests/") and path.endswith(".py") and name):
            problems.append(f"{node_id!r} is not a node id tests/x.py::test_y")
        elif not file.is_file():
            problems.append(f"{node_id!r}: no file {path}")
        elif name not in defined_tests(ast.parse(file.read_text(encoding="utf-8"))):
            problems.append(f"{node_id!r}: {path} defines no {name}")
    return problems


@pytest.mark.parametrize("row", rows(), ids=str)
def test_each_condition_names_its_behaviour_test_or_why_it_has_none(row: Row) -> None:
    assert not behaviour_problems(row.behaviour, PROJECT_ROOT), (
        f"{row}: {behaviour_problems(row.behaviour, PROJECT_ROOT)}"
    )


def test_the_checker_refuses_a_missing_test_a_missing_file_and_a_bare_untested(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        "def test_there():\n    pass\n\nclass TestGroup:\n    def test_in_class(self):\n        pass\n"
    )
    assert (
        behaviour_problems("`tests/test_x.py::test_there`, `tests/test_x.py::test_in_class[a-b]`", tmp_path)
        == []
    )
    assert behaviour_problems("untested: the model is the user's choice", tmp_path) == []
    assert behaviour_problems("`tests/test_x.py::test_gone`", tmp_path) == [
        "'tests/test_x.py::test_gone': tests/test_x.py defines no test_gone"
    ]
    assert behaviour_problems("`tests/test_y.py::test_there`", tmp_path) == [
        "'tests/test_y.py::test_there': no file tests/test_y.py"
    ]
    assert behaviour_problems("untested: why", tmp_path) and behaviour_problems("", tmp_path)
    assert behaviour_problems("test_there", tmp_path)
