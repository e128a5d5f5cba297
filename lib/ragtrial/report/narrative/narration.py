"""What a notebook's narrative gives: its headline (one sentence for run.json and the index page)
and its findings (the report's closing Markdown), worded from the run's saved tables alone (a
mapping of table name to frame, as `report.files.read_saved_tables` reads them). Each notebook's
registry entry (`config.notebooks`) names its narrative as "module:attribute".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pandas as pd

SavedTables = Mapping[str, pd.DataFrame]


@dataclass(frozen=True)
class Narration:
    headline: str
    findings: str


Narrative = Callable[[SavedTables], Narration]


def saved(tables: SavedTables, name: str) -> pd.DataFrame:
    """The saved table `name`; an error names the table the narrative needs and the ones it has."""
    if name not in tables:
        raise KeyError(f"the run saved no {name} table (saved: {', '.join(sorted(tables)) or 'none'})")
    return tables[name]
