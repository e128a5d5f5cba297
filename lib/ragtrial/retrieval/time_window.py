"""A question's time window, and the filter that keeps graph context valid in it.

`question_window` reads the window a question asks about ("in 2005", "before 2010", "after 2001",
"between 2001 and 2005", "as of 2003", "since 2005", "until 2010"); `TimeFilter` is one query's
filter over relations (validity from the index's `valid_from` / `valid_to`) and claims (years of
`start_date` / `end_date`). An undated relation or claim is never dropped: nothing says it is out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

import numpy as np
import pandas as pd

Window = tuple[int | None, int | None]  # (first year, last year), None: unbounded on that side

_YEAR = r"((?:1[0-9]|20|21)\d\d)(?!\d)"
_WINDOWS: list[tuple[re.Pattern[str], Callable[..., Window]]] = [
    (re.compile(rf"\bbetween\s+{_YEAR}\s+and\s+{_YEAR}", re.I), lambda a, b: (int(a), int(b))),
    (
        re.compile(rf"\bfrom\s+{_YEAR}\s+(?:to|until|till|through)\s+{_YEAR}", re.I),
        lambda a, b: (int(a), int(b)),
    ),
    (re.compile(rf"\bbefore\s+{_YEAR}", re.I), lambda a: (None, int(a) - 1)),
    (re.compile(rf"\b(?:until|till|by|up\s+to)\s+{_YEAR}", re.I), lambda a: (None, int(a))),
    (re.compile(rf"\bafter\s+{_YEAR}", re.I), lambda a: (int(a) + 1, None)),
    (re.compile(rf"\bsince\s+{_YEAR}", re.I), lambda a: (int(a), None)),
    (re.compile(rf"\b(?:in|during|as\s+of|at\s+the\s+end\s+of)\s+{_YEAR}", re.I), lambda a: (int(a), int(a))),
]


def question_window(text: str) -> Window | None:
    """The years a question asks about, or None when it names no time ("Who founded X?")."""
    for pattern, window in _WINDOWS:
        found = pattern.search(text)
        if found:
            return window(*found.groups())
    return None


def bounds(valid_from: Iterable, valid_to: Iterable) -> tuple[np.ndarray, np.ndarray]:
    """Validity as float arrays (first, last year), a missing end unbounded: `overlaps`' input."""
    lo = np.array([-np.inf if pd.isna(v) else float(v) for v in valid_from], dtype=float)
    hi = np.array([np.inf if pd.isna(v) else float(v) for v in valid_to], dtype=float)
    return lo, hi


def overlaps(lo: np.ndarray, hi: np.ndarray, window: Window) -> np.ndarray:
    """Per validity (`bounds`), whether it overlaps `window`."""
    start = -np.inf if window[0] is None else window[0]
    end = np.inf if window[1] is None else window[1]
    return (lo <= end) & (hi >= start)


def date_year(text: object) -> int | None:
    """The year of a claim's date text ("2003-05-01", "2003"; GraphRAG writes "NONE" for none)."""
    found = re.search(_YEAR, text) if isinstance(text, str) else None
    return int(found.group(1)) if found else None


class TimeFilter:
    """One query's filter: `relations(rows)` / `claims(rows)` yield the rows whose validity overlaps
    the window (all rows when the filter is off or the question names no time) and count, each
    once, the rows passed over. Lazy, so a consumer that stops (a full token budget) counts only
    what it skipped on the way: `time_filtered` is the number of out-of-window relations and claims
    ranked above the last item taken.
    """

    def __init__(self, window: Window | None, relation_ok: np.ndarray | None, claim_ok: np.ndarray | None):
        self.window = window
        self.ok = {"relation": relation_ok, "claim": claim_ok}
        self.dropped: dict[str, set[int]] = {"relation": set(), "claim": set()}

    def _kept(self, kind: str, rows: Iterable[int]) -> Iterator[int]:
        ok = self.ok[kind]
        for row in rows:
            if ok is None or self.window is None or ok[row]:
                yield row
            else:
                self.dropped[kind].add(int(row))

    def depth(self, k: int) -> int:
        """How many ranked relations to read so that k in the window are among them."""
        ok = self.ok["relation"]
        return k if ok is None or self.window is None else k + int((~ok).sum())

    def relation_mask(self) -> np.ndarray | None:
        """Per relation, whether it may be used (in the window or undated); None when every relation
        may (the filter is off or the question names no time).
        """
        ok = self.ok["relation"]
        return None if ok is None or self.window is None else ok

    def relations(self, rows: Iterable[int]) -> Iterator[int]:
        return self._kept("relation", rows)

    def count_relations(self, rows: Iterable[int]) -> None:
        """Count the out-of-window relations among `rows` as dropped, for a consumer that filters
        by `relation_mask` instead of taking items (the graph walk).
        """
        for _ in self.relations(rows):
            pass

    def claims(self, rows: Iterable[int]) -> Iterator[int]:
        return self._kept("claim", rows)

    def notes(self) -> dict:
        """What a retrieval records: the window and the count dropped; nothing when the filter is off."""
        if self.ok["relation"] is None:
            return {}
        return {
            "time_window": None if self.window is None else list(self.window),
            "time_filtered": sum(len(d) for d in self.dropped.values()),
        }
