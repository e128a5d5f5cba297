"""`docs/paper_conditions.md` is the test's data: every row names a paper's condition, the params
file and runs that realize it, the dotted setting and its value; this test resolves each paper params
file (its shared settings merged into each run, as a batch runs them) and checks every row. A row
without a setting must give the deviation's reason; every seed has a table and every paper params
file is covered by at least one row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

import pytest
import yaml
from conftest import PROJECT_ROOT

from ragtrial.config.batch import RunSpec, load_batch

TABLE = PROJECT_ROOT / "docs" / "paper_conditions.md"
SEEDS = ("000", "001", "002", "003", "004")
COLUMNS = [
    "condition (as the paper states it)",
    "params file",
    "runs",
    "setting",
    "value",
    "deviation and why",
]
NO_SETTING = "—"
ENDPOINT = {"llm": {"base_url": "http://127.0.0.1:1/v1"}}  # the paper batches take it from --set


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
                condition, params, runs, setting, value, deviation = cells
                found.append(
                    Row(seed, number, condition, _code(params), runs, _code(setting), _code(value), deviation)
                )
        else:
            header = None  # a table ends at its first line that is not a row
    return tuple(found)


@cache
def runs_of(params: str) -> tuple[RunSpec, ...]:
    return tuple(load_batch(PROJECT_ROOT / params, ENDPOINT, notebooks_dir=PROJECT_ROOT / "notebooks")[0])


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
