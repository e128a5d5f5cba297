"""The kit's one table style: every DataFrame a report shows, formatted for a reader as a paper's
table is. Every column is shown and every row up to `SHOWN_ROWS` (a wide table scrolls, a long one
scrolls under its header; a longer one shows its first rows and says how many it has: a paper-size
run's answers, 15,000 rows, made a 20 MB report);
each column gets the decimals its values need (counts as integers, seconds with two decimals, rates
with three); a missing value is a dash, not NaN; text keeps its line breaks and wraps; a row index
only shows when it means something. `install_table_formatter` makes it the HTML of every DataFrame a
notebook displays; the CSS of the `rt-` classes is in the report template (templates/ragtrial).
Every value is escaped: model text in a table stays text.
"""

from __future__ import annotations

import html
import math
import numbers
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

MISSING = '<span class="rt-missing" title="no value">—</span>'
# more rows than this and the table scrolls under a header that stays in view
TALL_ROWS = 40
# more rows than this in a displayed table and it shows these first (`show_table` picks its own)
SHOWN_ROWS = 500
# text longer than this wraps inside a column of bounded width
LONG_TEXT = 48
SIGNIFICANT = 3
MAX_DECIMALS = 6
# a column of seconds by its name: latency_s, duration_s, seconds, wall_time, elapsed ...
_SECONDS = re.compile(r"(^|_)(s|sec|secs|seconds|latency|duration|elapsed|wall|time)(_|$)", re.I)
# identifiers and years read as written, without thousands separators
_IDENTIFIER = re.compile(r"(^|_)(id|ids|seed|year|index|rank|level|trial|attempt|version)(_|$)", re.I)
# a column of fractions by its name (rates, shares, p-values, means and their intervals, scores): even
# when every value is whole (0 or 1 on a small run) it reads 0.00, as a paper writes it; unless the
# name says it counts (em_n, wins, tokens_per_question)
_FRACTION = re.compile(
    r"(^|_)(rate|share|ratio|p|pvalue|holm|mean|diff|low|high|ci|accuracy|recall|precision|f1|em|"
    r"rouge\w*|score|kappa|alpha)(_|$)",
    re.I,
)
_COUNT = re.compile(
    r"(^|_)(n|count|calls|questions|tokens|wins|losses|ties|failures|fallbacks|size)(_|$)", re.I
)

Cell = tuple[str, str]  # (inner HTML, CSS class)


def format_table(frame: pd.DataFrame | pd.Series) -> str:
    """`frame` as the kit's HTML table (a Series as a one-column table), every row and column of it."""
    frame = _as_frame(frame)
    show_index = _meaningful_index(frame.index)
    index_columns = _index_formatters(frame.index) if show_index else []
    columns = _data_formatters(frame)
    head = _header_rows(frame, show_index)
    body = _body_rows(frame, index_columns, columns, show_index)
    tall = " rt-tall" if len(frame) > TALL_ROWS else ""
    return (
        f'<div class="rt-table{tall}"><table class="rt">'
        f"<thead>{''.join(head)}</thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def table_note(shown: int, total: int, saved_as: str | None = None) -> str:
    """The line under a table shown in part: how many rows, and a link to the whole table (the
    report sits beside the run's `tables/`).
    """
    if not saved_as:
        return f'<p class="rt-note">{shown:,} of {total:,} rows.</p>'
    path = html.escape(f"tables/{saved_as}.csv")
    return (
        f'<p class="rt-note">{shown:,} of {total:,} rows; the full table is <a href="{path}">{path}</a>.</p>'
    )


def format_part(frame: pd.DataFrame | pd.Series, rows: int | None, saved_as: str | None = None) -> str:
    """`format_table` of the first `rows` rows (all when None); shown in part, the line saying how
    many rows are shown and where the full table is (`saved_as`: its name under the run's `tables/`).
    """
    shown = frame if rows is None else frame.head(rows)
    note = table_note(len(shown), len(frame), saved_as) if len(shown) < len(frame) else ""
    return format_table(shown) + note


def show_table(frame: pd.DataFrame, *, rows: int | None = None, saved_as: str | None = None):
    """`frame` (its first `rows` rows) for a report, as `format_part` writes it."""
    from IPython.display import HTML

    return HTML(format_part(frame, rows, saved_as))


def format_displayed(frame: pd.DataFrame | pd.Series) -> str:
    """A displayed table: its first `SHOWN_ROWS` rows, with the line saying so when there are more."""
    return format_part(frame, SHOWN_ROWS)


def install_table_formatter() -> bool:
    """Make `format_displayed` the HTML of every DataFrame and Series the running IPython shell
    displays (`display(df)` and a cell's last expression alike; `format_table` of a Styler), and let
    the plain-text fallback show every row and column too. False outside IPython (nothing to install into).
    """
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    pd.set_option("display.max_rows", None, "display.max_columns", None, "display.max_colwidth", None)
    formatter = shell.display_formatter.formatters["text/html"]
    formatter.for_type(pd.DataFrame, format_displayed)
    formatter.for_type(pd.Series, format_displayed)
    formatter.for_type_by_name("pandas.io.formats.style", "Styler", format_table)
    return True


def _as_frame(table: Any) -> pd.DataFrame:
    """A DataFrame of a Series (its name, else "value", as the column) or a Styler (its data)."""
    if isinstance(table, pd.Series):
        return table.to_frame(table.name if table.name is not None else "value")
    if not isinstance(table, pd.DataFrame):
        table = table.data  # a pandas Styler: the kit's style replaces its own
    return table


def _meaningful_index(index: pd.Index) -> bool:
    """A row index shows unless it is pandas' numbering (unnamed integers, RangeIndex or filtered)."""
    return not (
        isinstance(index, pd.RangeIndex)
        or (
            index.nlevels == 1
            and index.name is None
            and pd.api.types.is_integer_dtype(index.dtype)
            and not pd.api.types.is_bool_dtype(index.dtype)
        )
    )


def _label(name: Any) -> str:
    return " / ".join(str(part) for part in name) if isinstance(name, tuple) else str(name)


def _header_text(name: Any) -> str:
    """A column or index name, escaped, breakable after its underscores (long names wrap)."""
    return html.escape("" if name is None else str(name)).replace("_", "_<wbr>")


def _header_rows(frame: pd.DataFrame, show_index: bool) -> list[str]:
    """One row per column level, a group's label spanning its columns; the index names above the
    row labels (in a row of their own when the last column level is named too).
    """
    levels = frame.columns.nlevels
    index_names = list(frame.index.names) if show_index else []
    named_index = any(name is not None for name in index_names)
    names_own_row = named_index and frame.columns.names[-1] is not None
    numeric = [_is_numeric(frame.iloc[:, i]) for i in range(frame.shape[1])]
    rows = []
    for level in range(levels):
        keys = [tuple(c[: level + 1]) if levels > 1 else (c,) for c in frame.columns]
        cells = []
        if show_index:
            if level == levels - 1 and named_index and not names_own_row:
                cells += [f'<th class="rt-corner">{_header_text(n)}</th>' for n in index_names]
            else:
                cells.append(
                    f'<th class="rt-corner" colspan="{len(index_names)}">'
                    f"{_header_text(frame.columns.names[level])}</th>"
                )
        start = 0
        while start < len(keys):
            end = start + 1
            while level < levels - 1 and end < len(keys) and keys[end] == keys[start]:
                end += 1
            if level == levels - 1:
                kind = "rt-num" if numeric[start] else "rt-col"
            else:
                kind = "rt-group" if end - start > 1 else "rt-col"
            span = f' colspan="{end - start}"' if end - start > 1 else ""
            cells.append(f'<th class="{kind}"{span}>{_header_text(keys[start][-1])}</th>')
            start = end
        rows.append(f"<tr>{''.join(cells)}</tr>")
    if names_own_row:
        blanks = '<th class="rt-blank"></th>' * frame.shape[1]
        names = "".join(f'<th class="rt-corner">{_header_text(n)}</th>' for n in index_names)
        rows.append(f"<tr>{names}{blanks}</tr>")
    return rows


def _body_rows(
    frame: pd.DataFrame,
    index_columns: list[Callable[[Any], Cell]],
    columns: list[Callable[[Any], Cell]],
    show_index: bool,
) -> list[str]:
    if frame.shape[1] == 0 and not show_index:
        return [f'<tr><td class="rt-empty">{len(frame):,} rows, no column</td></tr>']
    if frame.empty and len(frame) == 0:
        width = frame.shape[1] + (frame.index.nlevels if show_index else 0)
        return [f'<tr><td class="rt-empty" colspan="{width}">no rows</td></tr>']
    labels = [key if isinstance(key, tuple) else (key,) for key in frame.index]
    values = frame.to_numpy(dtype=object)
    rows = []
    for i, row in enumerate(values):
        cells = []
        if show_index:
            for level, format_cell in enumerate(index_columns):
                span = _row_span(labels, i, level)
                if span == 0:
                    continue  # under the label of the row above, which spans it
                text, kind = format_cell(labels[i][level])
                rowspan = f' rowspan="{span}"' if span > 1 else ""
                cells.append(f'<th class="{" ".join(["rt-row", kind]).strip()}"{rowspan}>{text}</th>')
        for value, format_cell in zip(row, columns, strict=True):
            text, kind = format_cell(value)
            cells.append(f'<td class="{kind}">{text}</td>' if kind else f"<td>{text}</td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return rows


def _row_span(labels: Sequence[tuple], i: int, level: int) -> int:
    """Rows the label at (`i`, `level`) spans: an outer level's label is written once per run of
    equal labels (0: the row above's label spans this one); the innermost level is always written.
    """
    if level == len(labels[i]) - 1:
        return 1
    key = labels[i][: level + 1]
    if i > 0 and labels[i - 1][: level + 1] == key:
        return 0
    end = i + 1
    while end < len(labels) and labels[end][: level + 1] == key:
        end += 1
    return end - i


def _index_formatters(index: pd.Index) -> list[Callable[[Any], Cell]]:
    return [
        _column_formatter(str(index.names[level] or ""), list(index.get_level_values(level)))
        for level in range(index.nlevels)
    ]


def _data_formatters(frame: pd.DataFrame) -> list[Callable[[Any], Cell]]:
    """A formatter per column; a pivot's columns (named: the values of one variable) share one per
    measure, so one measure is written with one number of decimals across them.
    """
    if frame.columns.names[-1] is None:
        return [
            _column_formatter(_label(name), list(frame.iloc[:, i])) for i, name in enumerate(frame.columns)
        ]
    groups = [name[:-1] if isinstance(name, tuple) else () for name in frame.columns]
    shared = {}
    for group in dict.fromkeys(groups):
        values = [v for i, g in enumerate(groups) if g == group for v in frame.iloc[:, i]]
        shared[group] = _column_formatter(_label(group) if group else str(frame.columns.names[-1]), values)
    return [shared[group] for group in groups]


def _is_missing(value: Any) -> bool:
    return pd.api.types.is_scalar(value) and bool(pd.isna(value))


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, bool | np.bool_)


def _is_numeric(column: pd.Series) -> bool:
    present = [v for v in column if not _is_missing(v)]
    return bool(present) and all(_is_number(v) for v in present)


def _column_formatter(name: str, values: Sequence[Any]) -> Callable[[Any], Cell]:
    """The cell formatter of a column of `values`: its numbers share decimals, its text wraps if long."""
    present = [v for v in values if not _is_missing(v)]
    numbers_in = np.array([float(v.real) for v in present if _is_number(v)], dtype=float)
    fractions = any(isinstance(v, float | np.floating) for v in present) and _is_fraction(name)
    format_number = _number_formatter(name, numbers_in, fractions)
    texts = [v for v in present if isinstance(v, str)]
    long_text = any(len(t) > LONG_TEXT for t in texts)

    def format_cell(value: Any) -> Cell:
        if _is_missing(value):
            return MISSING, "rt-na"
        if isinstance(value, bool | np.bool_):
            return ("yes" if value else "no"), ""
        if _is_number(value):
            return format_number(float(value.real)), "rt-num"
        if isinstance(value, str):
            return _text(value), "rt-text" if long_text else ""
        if isinstance(value, pd.Timestamp):
            return html.escape(value.isoformat(sep=" ", timespec="seconds")), ""
        return _text(_plain(value)), "rt-text" if len(_plain(value)) > LONG_TEXT else ""

    return format_cell


def _plain(value: Any) -> str:
    """A list, dict or other object as a reader would write it (items joined, no brackets)."""
    if isinstance(value, list | tuple | set | frozenset | np.ndarray | pd.Series):
        return ", ".join(_plain(item) for item in value)
    if isinstance(value, dict):
        return "; ".join(f"{key}: {_plain(item)}" for key, item in value.items())
    return str(value)


def _text(text: str) -> str:
    """Escaped text keeping its line breaks."""
    lines = html.escape(text).replace("\t", " ").splitlines()
    return "<br>".join(lines)


def _is_fraction(name: str) -> bool:
    return bool(_FRACTION.search(name)) and not _COUNT.search(name)


def _number_formatter(name: str, values: np.ndarray, fractions: bool = False) -> Callable[[float], str]:
    """Decimals for a column of numbers: integers when every value is one (a count stored as a
    float included; `fractions` of whole values, a rate of 0 or 1, get two decimals), seconds with
    two decimals, values within ±1 (rates, shares, differences) with three, larger ones with the
    decimals that keep three significant digits; never more decimals than the values have (a column
    rounded to 2 decimals shows 2). A non-zero value those decimals would show as 0 gets three
    significant digits of its own.
    """
    separator = "" if _IDENTIFIER.search(name) else ","
    finite = values[np.isfinite(values)]
    largest = float(np.abs(finite).max()) if finite.size else 0.0
    if fractions and (largest == 0 or _decimals_of(finite) == 0):
        return lambda value: _fixed(value, 2, separator)  # whole fractions: 0.00 and 1.00
    if largest == 0 or _decimals_of(finite) == 0:
        decimals = 0
    elif _SECONDS.search(name):
        decimals = 2 if largest < 1000 else 1
    elif largest <= 1:
        decimals = SIGNIFICANT
    else:
        decimals = min(2, max(0, SIGNIFICANT - 1 - math.floor(math.log10(largest))))
    decimals = min(decimals, _decimals_of(finite)) if finite.size else 0
    # below this a value is rounding noise of the column's arithmetic (shown as 0), not a small value
    noise = 1e-9 * largest

    def format_number(value: float) -> str:
        if decimals and noise < abs(value) < 0.5 * 10**-decimals:
            return _significant(value, separator)
        return _fixed(value, decimals, separator)

    return format_number


def _decimals_of(values: np.ndarray) -> int:
    """The fewest decimals that write every value exactly (at most MAX_DECIMALS)."""
    for decimals in range(MAX_DECIMALS):
        scaled = values * 10**decimals
        if np.all(np.abs(scaled - np.round(scaled)) <= 1e-7 * np.maximum(1, np.abs(scaled))):
            return decimals
    return MAX_DECIMALS


def _fixed(value: float, decimals: int, separator: str) -> str:
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    text = f"{value:{separator}.{decimals}f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.,") else text  # no -0.00


def _significant(value: float, separator: str) -> str:
    """`value` with three significant digits (scientific below 10^-6)."""
    if value == 0 or math.isinf(value):
        return _fixed(value, 0, separator)
    magnitude = math.floor(math.log10(abs(value)))
    if magnitude < -MAX_DECIMALS:
        return f"{value:.{SIGNIFICANT - 1}e}"
    decimals = max(0, SIGNIFICANT - 1 - magnitude)
    return _fixed(value, min(decimals, _decimals_of(np.array([value]))), separator)
