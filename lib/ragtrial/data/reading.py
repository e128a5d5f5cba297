"""Reading input files and fields so that every error names file, record and field (`FieldReader`).

A flaw of the published data that a loader keeps as published (ODSum's empty Bro024.txt) is not an
error but a data warning (`FieldReader.warn`, `data_warning`): warned, and collected into the loaded
`Dataset.warnings` (`collect_warnings`) so that a notebook can report them and their count.
Also the small value helpers the loaders share. Leading-underscore names are private to `ragtrial.data`.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragtrial.records import DataError


@dataclass(frozen=True)
class FieldReader:
    """One input value and where it sits, so that every error names file, record and field."""

    path: Path
    record: str | int | None
    value: Any
    prefix: str = ""  # field path of `value` inside the record, e.g. "evidence_list[2]."

    def error(self, field: str | None, problem: str) -> DataError:
        where = self.prefix + field if field is not None else self.prefix.rstrip(".") or None
        return DataError(str(self.path), self.record, where, problem)

    def warn(self, field: str | None, problem: str) -> None:
        """Report a flaw of the published data that is kept as published (see `data_warning`)."""
        data_warning(self.error(field, problem))

    def get(self, key: str, kind: type | tuple[type, ...] = str) -> Any:
        if not isinstance(self.value, dict):
            raise self.error(None, f"expected an object, got {type_name(self.value)}")
        if key not in self.value:
            raise self.error(key, "missing")
        value = self.value[key]
        if not is_kind(value, kind):
            raise self.error(key, f"expected {_kind_name(kind)}, got {type_name(value)}")
        return value

    def text(self, key: str) -> str:
        """A required string that must not be blank (question text, document text, answers)."""
        value = self.get(key, str)
        if not _has_text(value):
            raise self.error(key, "empty")
        return value

    def one_of(self, key: str, allowed: Iterable[str], what: str) -> str:
        """A required string that must be one of `allowed` (a data set's fixed question types)."""
        value = self.text(key)
        if value not in allowed:
            raise self.error(key, f"unknown {what} {value!r}; expected one of {list(allowed)}")
        return value

    def strings(self, key: str) -> list[str]:
        values = self.get(key, list)
        for i, value in enumerate(values):
            if not isinstance(value, str):
                raise self.error(f"{key}[{i}]", f"expected a string, got {type_name(value)}")
        return values

    def items(self, key: str) -> list[FieldReader]:
        """The elements of list field `key`, each as a record located at `key[i]`."""
        return [self.at(f"{key}[{i}]", v) for i, v in enumerate(self.get(key, list))]

    def at(self, field: str, value: Any) -> FieldReader:
        return FieldReader(self.path, self.record, value, f"{self.prefix}{field}.")


_WARNINGS: ContextVar[list[str] | None] = ContextVar("data_warnings", default=None)


def data_warning(flaw: DataError) -> None:
    """Warn of `flaw`, kept as published, and add it to the warnings being collected, if any."""
    collected = _WARNINGS.get()
    if collected is not None:
        collected.append(str(flaw))
    warnings.warn(str(flaw), stacklevel=3)


@contextmanager
def collect_warnings() -> Iterator[list[str]]:
    """The data warnings of the loading done inside the block (in this context only)."""
    collected: list[str] = []
    token = _WARNINGS.set(collected)
    try:
        yield collected
    finally:
        _WARNINGS.reset(token)


def _has_text(text: str) -> bool:
    # NUL is not whitespace to str.strip, yet a string of NULs holds no text.
    return bool(text.replace("\x00", "").strip())


def type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


def is_kind(value: Any, kind: type | tuple[type, ...]) -> bool:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    # bool is a subclass of int in Python, but `true` is not a valid paragraph index.
    if isinstance(value, bool) and bool not in kinds:
        return False
    return isinstance(value, kinds)


def _is_strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _require_file(path: Path, hint: str = "") -> Path:
    if not path.is_file():
        raise DataError(str(path), None, None, "file not found" + (f"; {hint}" if hint else ""))
    return path


def read_text(path: Path) -> str:
    # utf-8-sig drops a BOM (Gutenberg text, Microsoft CSVs); universal newlines turn CRLF into LF.
    try:
        text = _require_file(path).read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise DataError(str(path), None, None, f"not UTF-8 text ({err.reason} at byte {err.start})") from None
    # UTF-8 decodes NUL bytes, but no text file of any data set holds one: a file that does is
    # binary or corrupt (zero-filled), not text.
    nul = text.find("\x00")
    if nul >= 0:
        raise DataError(str(path), None, None, f"not a text file: NUL byte at character {nul}")
    return text


class _RepeatedKey(ValueError):
    """A key twice in one JSON object, which json.loads would silently resolve to the last value."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _RepeatedKey(key)
        found[key] = value
    return found


def _parse_json(text: str, path: Path, line: int | None = None) -> Any:
    """One JSON document: the whole file, or (`line` given) one line of a JSON Lines file."""
    record = None if line is None else f"line {line}"
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except _RepeatedKey as err:
        problem = f"key {err.args[0]!r} twice in one object (JSON would keep only the last)"
        raise DataError(str(path), record, None, problem) from None
    except json.JSONDecodeError as err:
        at = f"column {err.colno}" if line is not None else f"line {err.lineno}, column {err.colno}"
        raise DataError(str(path), record, None, f"invalid JSON: {err.msg} ({at})") from None
    except RecursionError:  # json's C parser recurses once per nesting level
        raise DataError(str(path), record, None, "invalid JSON: nested too deeply to read") from None


def _read_json(path: Path) -> Any:
    return _parse_json(read_text(path), path)


def _some(path: Path, records: list[FieldReader]) -> list[FieldReader]:
    """`records`, when there are any: a data file without a record leaves nothing to evaluate, and
    would load as 0 documents or 0 questions, a run that measures nothing.
    """
    if not records:
        raise DataError(str(path), None, None, "no records (an empty data file leaves nothing to evaluate)")
    return records


def json_array(path: Path) -> list[FieldReader]:
    data = _read_json(path)
    if not isinstance(data, list):
        raise DataError(str(path), None, None, f"expected a JSON array at top level, got {type_name(data)}")
    return _some(path, [FieldReader(path, i, value) for i, value in enumerate(data)])


def json_object(path: Path) -> list[FieldReader]:
    data = _read_json(path)
    if not isinstance(data, dict):
        raise DataError(str(path), None, None, f"expected a JSON object at top level, got {type_name(data)}")
    return _some(path, [FieldReader(path, key, value) for key, value in data.items()])


def json_lines(path: Path) -> list[FieldReader]:
    records = []
    # JSON Lines separates records by "\n" alone: U+2028, U+2029, \x85 or \x0c inside a JSON string
    # are valid text (str.splitlines would cut the record there)
    for number, line in enumerate(read_text(path).split("\n"), start=1):
        if not line.strip():
            continue  # a trailing or separating blank line holds no record
        records.append(FieldReader(path, f"line {number}", _parse_json(line, path, number)))
    return _some(path, records)


def csv_rows(path: Path, columns: Sequence[str]) -> list[FieldReader]:
    """The rows of a CSV file as the csv module reads them (a quoted cell may span lines); a record
    is named by the line it starts on. An unterminated quote, or a row with more or fewer cells than
    the header, is an error naming that record: either is a quote that swallowed what followed it.
    """
    reader = csv.DictReader(io.StringIO(read_text(path), newline=""), strict=True)
    rows = []
    start = 1
    try:
        header = reader.fieldnames or []  # reads the header row
        for column in columns:
            if column not in header:
                raise DataError(str(path), None, column, f"missing CSV column (header: {reader.fieldnames})")
        start = reader.line_num + 1
        for row in reader:
            record = f"line {start}"
            if None in row or None in row.values():
                extra = row.pop(None, None) or []  # type: ignore[call-overload]
                cells = sum(value is not None for value in row.values()) + len(extra)
                problem = f"{cells} cells where the header has {len(header)} (a stray quote?)"
                raise DataError(str(path), record, None, problem)
            rows.append(FieldReader(path, record, row))
            start = reader.line_num + 1
        _some(path, rows)
    except csv.Error as err:
        raise DataError(
            str(path), f"line {start}", None, f"unreadable CSV: {err} (an unterminated quote?)"
        ) from None
    return rows


def _stable_hash(text: str, length: int = 12) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:length]


def _answers(answer: str, aliases: Iterable[str] = ()) -> list[str]:
    """Gold answer first, then the aliases that differ from it (order kept, no repeats)."""
    return list(dict.fromkeys([answer, *aliases]))


def dedupe(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def choose(option: str, value: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise ValueError(f"{option} must be one of {', '.join(map(repr, allowed))}, got {value!r}")
    return value
