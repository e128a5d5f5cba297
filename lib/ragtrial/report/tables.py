"""The kit's one table style: every DataFrame a report shows, formatted for a reader (first version:
the full table without the pandas index; `show_table` says how many rows are shown and where the
full table is).
"""

from __future__ import annotations

import html

import pandas as pd


def format_table(frame: pd.DataFrame) -> str:
    """`frame` as the kit's HTML table."""
    return frame.to_html(index=not isinstance(frame.index, pd.RangeIndex), na_rep="", border=0)


def show_table(frame: pd.DataFrame, *, rows: int | None = None, saved_as: str | None = None):
    """`frame` (its first `rows` rows) for a report, with a line saying how many rows are shown and
    where the full table is (`saved_as`: the table's name under the run's `tables/`).
    """
    from IPython.display import HTML

    shown = frame if rows is None else frame.head(rows)
    note = ""
    if len(shown) < len(frame):
        where = f"; the full table is tables/{saved_as}.csv" if saved_as else ""
        note = f"<p>{len(shown)} of {len(frame)} rows{html.escape(where)}.</p>"
    return HTML(note + format_table(shown))
