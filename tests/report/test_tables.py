"""The kit's table style: every row and column shown, decimals per column, no NaN, no -0, no pandas
numbering, text escaped and keeping its line breaks, grouped headers for pivots.
"""

from __future__ import annotations

import html.parser
import re

import numpy as np
import pandas as pd
from hostile import INJECTION, INJECTIONS, live_elements

from ragtrial.report.tables import SHOWN_ROWS, TALL_ROWS, format_displayed, format_table, show_table


class Cells(html.parser.HTMLParser):
    """The text of every header and body cell, row by row."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "br" and self._cell is not None:
            self._cell.append("\n")

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def cells(frame) -> list[list[str]]:
    parser = Cells()
    parser.feed(format_table(frame))
    return parser.rows


def column(frame: pd.DataFrame, name: str) -> list[str]:
    rows = cells(frame)
    position = rows[0].index(name)
    return [row[position] for row in rows[1:]]


def test_each_column_gets_the_decimals_its_values_need():
    frame = pd.DataFrame(
        {
            "calls": [575.0, 1234.0, 3.0],  # counts stored as floats (a merge or a NaN made them so)
            "latency_s": [0.123456, 12.5, 3.0],
            "accuracy": [0.5, 1 / 3, 0.0],
            "mean_diff": [-1e-17, 0.25, -0.125],  # rounding noise around 0
            "tokens_per_question": [1234.567, 99.1, 5.0],
            "score": [3.456, 4.0, 2.5],
            "cost_usd": [0.0003, 5.2, 1.0],
            "rounded": [0.12, 0.5, 0.25],  # a column the notebook rounded to 2 decimals
            "seed": [2024, 1, 7],
            "tokens": [1_234_567, 12, 0],
            "p_holm": [1.0, 1.0, 0.0],  # a fraction whose values happen to be whole
            "em_n": [8.0, 8.0, 7.0],  # ... and a count named after the measure it counts
        }
    )
    assert column(frame, "calls") == ["575", "1,234", "3"]
    assert column(frame, "latency_s") == ["0.12", "12.50", "3.00"]
    assert column(frame, "accuracy") == ["0.500", "0.333", "0.000"]
    assert column(frame, "mean_diff") == ["0.000", "0.250", "-0.125"]  # never -0.000
    assert column(frame, "tokens_per_question") == ["1,235", "99", "5"]
    assert column(frame, "score") == ["3.46", "4.00", "2.50"]
    assert column(frame, "cost_usd") == ["0.0003", "5.20", "1.00"]  # a small value keeps its digits
    assert column(frame, "rounded") == ["0.12", "0.50", "0.25"]  # no precision the values do not have
    assert column(frame, "seed") == ["2024", "1", "7"]  # identifiers and years without separators
    assert column(frame, "tokens") == ["1,234,567", "12", "0"]
    assert column(frame, "p_holm") == ["1.00", "1.00", "0.00"] and column(frame, "em_n") == ["8", "8", "7"]


def test_missing_values_booleans_lists_and_infinities_read_as_words_not_python():
    frame = pd.DataFrame(
        {
            "failure": [None, np.nan, "timeout"],
            "calls": [np.nan, 2.0, 3.0],
            "pareto": [True, False, True],
            "entity_ids": [["e1", "e2"], [], ("e3",)],
            "ratio": [np.inf, -np.inf, 0.5],
            "started": pd.to_datetime(["2024-05-01 10:00:00", None, "2024-05-02 11:30:05"]),
        }
    )
    assert column(frame, "failure") == ["—", "—", "timeout"]
    assert column(frame, "calls") == ["—", "2", "3"]
    assert column(frame, "pareto") == ["yes", "no", "yes"]
    assert column(frame, "entity_ids") == ["e1, e2", "", "e3"]
    assert column(frame, "ratio") == ["∞", "−∞", "0.5"]
    assert column(frame, "started") == ["2024-05-01 10:00:00", "—", "2024-05-02 11:30:05"]
    rendered = format_table(frame)
    assert not re.search(r">\s*(nan|NaN|None|NaT|True|False|inf)\s*<", rendered)


def test_every_row_and_column_is_shown_and_pandas_numbering_is_not():
    wide = pd.DataFrame(np.ones((TALL_ROWS + 60, 30)), columns=[f"m{i}" for i in range(30)])
    rows = cells(wide)
    assert len(rows) == 1 + TALL_ROWS + 60 and all(len(r) == 30 for r in rows)
    assert rows[0] == [f"m{i}" for i in range(30)]  # no index column
    rendered = format_table(wide)
    assert "rt-tall" in rendered and "<th></th>" not in rendered and "×" not in rendered
    filtered = wide.iloc[[3, 7]]  # a filtered frame keeps integer labels that mean nothing
    assert cells(filtered)[0] == [f"m{i}" for i in range(30)]
    named = pd.DataFrame({"share": [0.5]}, index=pd.Index(["graph"], name="method"))
    assert cells(named) == [["method", "share"], ["graph", "0.5"]]


def test_a_pivot_and_a_multiindex_read_as_grouped_headers():
    long = pd.DataFrame({"threshold": [0.5, 0.5, 0.8], "method": ["a", "b", "a"], "mean": [1.0, 2.5, np.nan]})
    pivot = long.pivot(index="threshold", columns="method", values="mean")
    assert cells(pivot) == [
        ["method", "a", "b"],
        ["threshold", "", ""],
        ["0.5", "1.0", "2.5"],
        ["0.8", "—", "—"],
    ]
    grouped = pd.DataFrame(
        [[1, 2, 3]],
        columns=pd.MultiIndex.from_tuples([("accuracy", "mean"), ("accuracy", "low"), ("tokens", "mean")]),
        index=pd.Index(["graph"], name="method"),
    )
    rendered = format_table(grouped)
    assert '<th class="rt-group" colspan="2">accuracy</th>' in rendered
    assert cells(grouped) == [
        ["", "accuracy", "tokens"],
        ["method", "mean", "low", "mean"],
        ["graph", "1", "2", "3"],
    ]
    rows = pd.DataFrame(
        {"n": [1, 2, 3]},
        index=pd.MultiIndex.from_tuples([("x", "a"), ("x", "b"), ("y", "a")], names=["g", "k"]),
    )
    assert '<th class="rt-row" rowspan="2">x</th>' in format_table(rows)
    assert cells(rows) == [["g", "k", "n"], ["x", "a", "1"], ["b", "2"], ["y", "a", "3"]]


def test_model_text_stays_text_keeps_its_line_breaks_and_is_never_cut():
    verdict = "The graph wins.\nOnly on global questions. " * 20
    frame = pd.DataFrame({"verdict": [verdict], INJECTION: [INJECTION]})
    rendered = format_table(frame)
    assert live_elements(rendered) == [] and "<img" not in rendered and "<script" not in rendered
    assert cells(frame)[1] == [verdict.rstrip("\n").replace("\r", ""), INJECTION]
    assert cells(frame)[0] == ["verdict", INJECTION] and all(t in cells(frame)[1][1] for t in INJECTIONS)
    assert 'class="rt-text"' in rendered  # long text wraps in a bounded column


def test_a_series_and_an_empty_frame_are_tables_too():
    assert cells(pd.Series({"precision": 0.5, "recall": 0.25}, name="BERTScore")) == [
        ["", "BERTScore"],
        ["precision", "0.50"],
        ["recall", "0.25"],
    ]
    assert cells(pd.Series([1.0, 2.0])) == [["value"], ["1"], ["2"]]
    assert cells(pd.DataFrame(columns=["a", "b"])) == [["a", "b"], ["no rows"]]


def test_show_table_says_how_many_rows_it_shows_and_where_the_rest_is():
    frame = pd.DataFrame({"question_id": range(1500)})
    part = show_table(frame, rows=20, saved_as="answers").data
    assert '20 of 1,500 rows; the full table is <a href="tables/answers.csv">tables/answers.csv</a>.' in part
    assert part.count("<tr>") == 21
    whole = show_table(frame.head(5), rows=20, saved_as="answers").data
    assert "rows" not in whole.split("</table>")[-1] and whole.count("<tr>") == 6


def test_a_displayed_table_longer_than_the_report_can_carry_shows_its_first_rows_and_says_so():
    # a paper-size judge run's answers (15,000 rows) made a 20 MB report when shown whole
    long = pd.DataFrame({"question_id": range(SHOWN_ROWS * 30), "text": "an answer " * 20})
    shown = format_displayed(long)
    assert shown.count("<tr>") == SHOWN_ROWS + 1 and f"{SHOWN_ROWS:,} of {len(long):,} rows." in shown
    assert format_displayed(long.head(SHOWN_ROWS)) == format_table(long.head(SHOWN_ROWS))
