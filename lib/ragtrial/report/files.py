"""Atomic writes: a temp file in the same folder, then rename, so an interrupted run never
leaves a half-written result that looks complete. Every file the kit writes gets the permissions
the user's umask gives a new file (0666 & ~umask), like the ledger and the executed notebook.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd


def atomic_write(path: Path, write: Callable[[Path], object]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _new_file(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _new_file(path: Path) -> Path:
    """An empty, uniquely named sibling of `path`, created with mode 0666 so the umask decides its
    permissions (`tempfile.mkstemp` would make it 0600 whatever the umask); the writer fills it in place.
    """
    while True:
        tmp = path.parent / f".{path.name}.{uuid.uuid4().hex[:12]}.tmp"
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return tmp


def write_text(path: Path, text: str) -> Path:
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_json(path: Path, data: Any) -> Path:
    return write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


# A spreadsheet runs a cell starting with one of these as a formula (`=HYPERLINK(...)`, `+cmd|...`):
# text from a model or an imported file must not become one (OWASP's CSV injection advice).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with every text cell that a spreadsheet would run as a formula prefixed with `'`
    (shown as text); numbers and other cells are left as they are.
    """

    def cell(value: Any) -> Any:
        return f"'{value}" if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value

    text_columns = [name for name in frame.columns if pd.api.types.is_string_dtype(frame[name].dtype)]
    return (
        frame.assign(**{str(name): frame[name].map(cell) for name in text_columns}) if text_columns else frame
    )


# Rows a CSV is written in at a time: pandas converts the rows it writes (and `spreadsheet_safe` the
# text) in one piece, which for 07's 15,000 answers at paper size (781 MB of context text) took
# 1.4 GB beside the table (issue 36); a piece of this many rows holds a few tens of MB.
CSV_ROWS = 1000


def write_table(path: Path, frame: pd.DataFrame) -> Path:
    """Parquet for `.parquet` paths (the text as it is), CSV otherwise (formula text neutralised:
    `spreadsheet_safe`), written `CSV_ROWS` rows at a time.
    """
    if Path(path).suffix == ".parquet":
        return atomic_write(path, lambda tmp: frame.to_parquet(tmp, index=False))

    def write_csv(tmp: Path) -> None:
        with tmp.open("w", encoding="utf-8", newline="") as out:
            for start in range(0, max(len(frame), 1), CSV_ROWS):
                part = spreadsheet_safe(frame.iloc[start : start + CSV_ROWS])
                part.to_csv(out, index=False, header=start == 0)

    return atomic_write(path, write_csv)


def saved_table_path(run_dir: Path, name: str) -> Path:
    """Where a run saves its table `name` (Parquet; the CSV beside it is for quick reading)."""
    return Path(run_dir) / "tables" / f"{name}.parquet"


def read_saved_table(run_dir: Path, name: str) -> pd.DataFrame | None:
    """The run's saved table `name`, or None when the run did not save it."""
    path = saved_table_path(run_dir, name)
    return pd.read_parquet(path) if path.is_file() else None


def read_saved_tables(run_dir: Path) -> dict[str, pd.DataFrame]:
    """Every table the run saved, by name: what its narrative words."""
    return {path.stem: pd.read_parquet(path) for path in sorted((Path(run_dir) / "tables").glob("*.parquet"))}
