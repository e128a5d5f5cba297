"""What a report's prose quotes of the run's own setup, saved so that a narrative words it from
tables alone: the names it quotes (the data set, the retriever, the requested model, the cost unit),
which no `findings` row can hold (a row's value is a number), as the `quoted_names` table.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

QUOTED_NAMES_TABLE = "quoted_names"


def quoted_names_table(names: Mapping[str, str]) -> pd.DataFrame:
    """One row per quoted name: `what` it names (a settings key or a plain label), and the `name`."""
    return pd.DataFrame({"what": list(names), "name": [str(name) for name in names.values()]})


def quoted_name(names: pd.DataFrame, what: str) -> str:
    """The name saved for `what`; an error names what is missing."""
    rows = names[names["what"] == what]
    if len(rows) != 1:
        raise KeyError(f"quoted_names table: {len(rows)} rows for {what!r} (1 needed)")
    return str(rows["name"].iloc[0])
