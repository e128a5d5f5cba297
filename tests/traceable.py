"""Every number a narrative states is a row of a saved table: `untraced_numbers` lists the numbers in
a report's prose that no cell of the run's saved tables gives, at the precision the prose shows it
(as a share, a percentage of one, or a count with thousands separators).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

import pandas as pd

# A number standing alone: not part of a name (gpt-4o, ROUGE-2, C0, 270M, answer_v2, 04_rag_vs_graphrag).
_NUMBER = re.compile(r"(?<![\w.\-/])[-−]?\d[\d,]*(?:\.\d+)?(?![\w\-/])(?:\s?%)?")
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


def _shown(text: str) -> tuple[float, int, bool]:
    """The number as written, its decimals, and whether it is a percentage."""
    percent = text.rstrip().endswith("%")
    digits = text.rstrip("% ").replace(",", "").replace("−", "-")
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    return float(digits), decimals, percent


def untraced_numbers(text: str, tables: Mapping[str, pd.DataFrame]) -> list[str]:
    """The numbers in `text` (code spans aside: names, keys, prompt versions) that no saved cell
    rounds to. A percentage matches a cell that is its share (0.45 for 45%) or the percentage itself.
    """
    cells = _cells(tables)
    untraced = []
    for match in _NUMBER.finditer(_CODE.sub(" ", text)):
        value, decimals, percent = _shown(match.group())
        candidates = [c * 100 for c in cells] + cells if percent else cells
        if not any(round(abs(c), decimals) == round(abs(value), decimals) for c in candidates):
            untraced.append(match.group())
    return untraced
