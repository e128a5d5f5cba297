"""Every number a narrative states is a row of a saved table: the check the narrative tests share.

A number in the text is traced when some numeric cell of the given tables, written with as many
decimals as the text shows (times 100 for a percentage), is that number. Numbers that are part of a
name (ROUGE-2, C0, gemma3-270m, `code`) are not figures and are passed over.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import pandas as pd

# a figure stands alone: not glued to a letter, digit, dot, dash or underscore before it, nor to a
# letter or digit after it
NUMBER = re.compile(r"(?<![\w.\-+/])[-+−]?\d[\d,]*(?:\.\d+)?%?(?![\w])")
CODE = re.compile(r"`[^`]*`")


def numbers_in(text: str) -> list[str]:
    """The figures a text states, as written."""
    return NUMBER.findall(CODE.sub(" ", text))


def _value(token: str) -> tuple[float, int, bool]:
    """A figure's value, its decimals and whether it is a percentage."""
    percent = token.endswith("%")
    digits = token.rstrip("%").replace(",", "").replace("−", "-")
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    return float(digits), decimals, percent


def table_values(tables: Mapping[str, pd.DataFrame]) -> np.ndarray:
    """Every finite number the tables hold (its numeric and boolean cells)."""
    values = []
    for frame in tables.values():
        numeric = frame.select_dtypes(include=["number", "bool"])
        if not numeric.empty:
            values.append(numeric.to_numpy(dtype=float, na_value=np.nan).ravel())
    if not values:
        return np.array([])
    joined = np.concatenate(values)
    return joined[np.isfinite(joined)]


def untraced(text: str, tables: Mapping[str, pd.DataFrame]) -> list[str]:
    """The figures of `text` that no cell of `tables` gives. A signed figure (+0.12, -0.12) must match
    with its sign; an unsigned one may word a negative cell's size ("B wins by 0.12").
    """
    values = table_values(tables)
    missing = []
    for token in numbers_in(text):
        number, decimals, percent = _value(token)
        candidates = values * 100 if percent else values
        if token[0] not in "+-−":
            candidates = np.abs(candidates)
        tolerance = 0.5 * 10**-decimals + 1e-9
        if not (np.abs(candidates - number) <= tolerance).any():
            missing.append(token)
    return missing


def assert_traceable(text: str, tables: Mapping[str, pd.DataFrame]) -> None:
    missing = untraced(text, tables)
    assert not missing, f"figures stated but in no saved table: {missing}\n---\n{text}"
