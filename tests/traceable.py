"""Every number a narrative states is a row of a saved table: `untraced_numbers` lists the numbers in
a report's prose that no cell of the run's saved tables gives, at the precision the prose shows it
(as a share, a percentage of one, or a count with thousands separators).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path

import nbformat
import pandas as pd

from ragtrial.config.notebooks import narrative_of
from ragtrial.report.files import read_saved_tables
from ragtrial.report.narrative.common import EMBEDDED_MODEL

# A number standing alone: not part of a name (gpt-4o, ROUGE-2, C0, 270M, answer_v2, 04_rag_vs_graphrag).
# Scientific notation (a `:g` format of a tiny difference) is one number.
_NUMBER = re.compile(r"(?<![\w.\-/])[-−+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?(?![\w\-/])(?:\s?%)?")
_CODE = re.compile(r"`[^`]*`")


def _cells(tables: Mapping[str, pd.DataFrame]) -> list[float]:
    values: list[float] = []
    for frame in tables.values():
        for column in frame.columns:
            series = frame[column]
            if pd.api.types.is_bool_dtype(series):
                continue
            numbers = pd.to_numeric(series, errors="coerce").dropna()
            values.extend(float(v) for v in numbers if math.isfinite(float(v)))
    return values


def _shown(text: str) -> tuple[float, float, bool]:
    """The number as written, half its last shown digit (what rounding may hide), and whether it is
    a percentage.
    """
    percent = text.rstrip().endswith("%")
    digits = text.rstrip("% ").replace(",", "").replace("−", "-")
    mantissa, _, exponent = digits.partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return float(digits), 0.5 * 10 ** (int(exponent or 0) - decimals), percent


def untraced_numbers(text: str, tables: Mapping[str, pd.DataFrame]) -> list[str]:
    """The numbers in `text` (code spans aside: names, keys, prompt versions) that no saved cell
    rounds to. A percentage matches a cell that is its share (0.45 for 45%) or the percentage itself.
    """
    cells = _cells(tables)
    untraced = []
    prose = _CODE.sub(" ", text.replace(EMBEDDED_MODEL, " "))
    for match in _NUMBER.finditer(prose):
        value, half_digit, percent = _shown(match.group())
        candidates = [c * 100 for c in cells] + cells if percent else cells
        if not any(abs(abs(c) - abs(value)) <= half_digit * (1 + 1e-9) for c in candidates):
            untraced.append(match.group())
    return untraced


def report_prose(run_dir: Path) -> list[str]:
    """The Markdown the executed notebook displayed (its narrative), table rows aside."""
    executed = nbformat.read(Path(run_dir) / "notebook.ipynb", as_version=4)
    shown = [
        output.get("data", {}).get("text/markdown", "")
        for cell in executed.cells
        for output in cell.get("outputs", [])
    ]
    return [
        "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("|"))
        for text in shown
        if text
    ]


def assert_narrated_from_saved_tables(run_dir: Path) -> None:
    """The run's narrative, given the tables the run saved and nothing else, words the report's
    headline and findings as the report shows them; no number in any Markdown the report displayed
    is missing from the saved tables.
    """
    notebook = json.loads((Path(run_dir) / "run.json").read_text())["notebook"]
    tables = read_saved_tables(run_dir)
    narration = narrative_of(notebook)(tables)
    prose = report_prose(run_dir)
    assert narration.findings in prose, f"{notebook}: the report's findings are not its narrative's"
    headline = (Path(run_dir) / "headline.txt").read_text().strip()
    untraced = {text[:80]: untraced_numbers(text, tables) for text in [narration.headline, *prose]}
    assert headline, notebook
    missing = {k: v for k, v in untraced.items() if v}
    assert not missing, f"{notebook}: numbers no saved table holds: {missing}"
