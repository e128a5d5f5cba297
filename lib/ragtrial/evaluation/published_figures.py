"""Published figures the kit sets beside its own, read from the data files of
`evaluation/published/` (one CSV per kind of figure; every row names its paper, source, table or
section, and row, so no published number lives in code).
"""

from __future__ import annotations

import io
from importlib import resources

import pandas as pd

SCALES = {"percent": 100.0, "share": 1.0, "count": 1.0}


def read_published(file_name: str) -> pd.DataFrame:
    """The rows of `evaluation/published/<file_name>`, with `published` (the value as a share, or
    as is for scale `count`) and `decimals` (the value's printed precision, for a "rounds to"
    comparison).
    """
    path = f"published/{file_name}"
    text = resources.files("ragtrial.evaluation").joinpath(path).read_text(encoding="utf-8")
    table = pd.read_csv(io.StringIO(text), dtype={"value": str}, keep_default_na=False)
    table["decimals"] = [len(v.split(".")[1]) if "." in v else 0 for v in table["value"]]
    scale = table["scale"].map(SCALES)
    if scale.isna().any():
        raise ValueError(f"{path}: scale must be one of {sorted(SCALES)}, got {set(table['scale'])}")
    table["published"] = table["value"].astype(float) / scale
    return table
