"""The cost ledger: one row per model call, live or replayed from the cache.

Rows are appended to `<run_dir>/ledger.csv` as they happen, so an interrupted run still shows
what it paid for. `Ledger.tally()` attributes calls to a unit of work (one answer, one index
stage): the open tallies live in a context variable, so calls made concurrently for other units,
in other threads or tasks, never land in this unit's tally. Work handed to a thread pool inside a
tally must carry the context with it (`contextvars.copy_context().run`).
"""

from __future__ import annotations

import csv
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import pandas as pd


@dataclass
class CallRecord:
    run_id: str
    kind: str  # "completion" | "structured" | "embedding"
    stage: str
    method: str
    model: str
    prompt: str  # prompt tag name@vN, "" when the caller used no prompt file
    replicate: int
    cached: bool
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    attempts: int  # live HTTP attempts, retries included; 0 for a cache hit
    failure: str  # "" on success, else the failure kind (rate_limit, server_error, timeout, parse, ...)
    # the `model` the endpoint reported for the reply (what actually answered); on a cache hit, the
    # one stored with the reply ("" for rows cached before it was recorded); "" when none answered
    served_model: str = ""
    throttled: int = 0  # of the attempts, those the endpoint refused with a rate limit (429)


LEDGER_COLUMNS = [f.name for f in fields(CallRecord)]


def calls_frame(rows: list[CallRecord]) -> pd.DataFrame:
    """Ledger rows as a DataFrame with the ledger's columns (empty input keeps them)."""
    return pd.DataFrame([asdict(r) for r in rows], columns=LEDGER_COLUMNS)


class Tally:
    """The calls a ledger recorded while this tally was open, in the context that opened it."""

    def __init__(self) -> None:
        self.rows: list[CallRecord] = []

    def frame(self) -> pd.DataFrame:
        return calls_frame(self.rows)

    def totals(self) -> dict[str, int]:
        """The model calls of this tally (embeddings not counted), those replayed from the cache,
        and their prompt and completion tokens: the cost of one unit of work.
        """
        calls = [r for r in self.rows if r.kind != "embedding"]
        return {
            "calls": len(calls),
            "cached_calls": sum(bool(r.cached) for r in calls),
            "prompt_tokens": sum(r.prompt_tokens for r in calls),
            "completion_tokens": sum(r.completion_tokens for r in calls),
        }


# (ledger, tally) pairs open in the current context, innermost last.
_OPEN_TALLIES: ContextVar[tuple[tuple[Ledger, Tally], ...]] = ContextVar("ragtrial_open_tallies", default=())


class Ledger:
    def __init__(self, run_id: str, path: Path | None = None):
        self.run_id = run_id
        self.path = path
        self._rows: list[CallRecord] = []
        self._lock = threading.Lock()

    def record(self, row: CallRecord) -> None:
        with self._lock:
            self._keep([row])
            if self.path is not None:
                new = not self.path.exists()
                with self.path.open("a", newline="") as fh:
                    writer = csv.writer(fh)
                    if new:
                        writer.writerow(LEDGER_COLUMNS)
                    # the fields in column order, as `DictWriter` would write `asdict(row)`: every
                    # field is a scalar, so no deep copy of the record (a tenth of a call's CPU)
                    writer.writerow([getattr(row, column) for column in LEDGER_COLUMNS])

    def start_file(self) -> None:
        """Write the file's header now if it has none, so other processes may append rows to it."""
        with self._lock:
            if self.path is not None and not self.path.exists():
                with self.path.open("a", newline="") as fh:
                    csv.DictWriter(fh, fieldnames=LEDGER_COLUMNS).writeheader()

    def extend(self, rows: list[CallRecord]) -> None:
        """Rows that another process wrote to this ledger's file as its calls happened (a Ray task's,
        `index.distribute`): kept and tallied here as `record` keeps them, not written again.
        """
        with self._lock:
            self._keep(rows)

    def _keep(self, rows: list[CallRecord]) -> None:
        self._rows += rows
        for ledger, tally in _OPEN_TALLIES.get():
            if ledger is self:
                tally.rows += rows

    def frame(self) -> pd.DataFrame:
        with self._lock:
            return calls_frame(self._rows)

    @contextmanager
    def tally(self) -> Iterator[Tally]:
        """Collect the rows of the calls made inside the block (nested tallies each get them)."""
        tally = Tally()
        token = _OPEN_TALLIES.set((*_OPEN_TALLIES.get(), (self, tally)))
        try:
            yield tally
        finally:
            _OPEN_TALLIES.reset(token)

    @contextmanager
    def tally_apart(self) -> Iterator[Tally]:
        """Collect the rows of the calls made inside the block in this tally alone: the tallies of
        this ledger open around it get none (work started ahead in a thread of its own, whose calls
        `adopt` tallies where its result is used).
        """
        tally = Tally()
        others = tuple(pair for pair in _OPEN_TALLIES.get() if pair[0] is not self)
        token = _OPEN_TALLIES.set((*others, (self, tally)))
        try:
            yield tally
        finally:
            _OPEN_TALLIES.reset(token)

    def adopt(self, tally: Tally) -> None:
        """Tally the rows of a `tally_apart` block in the tallies open here, as if its calls were made
        now (the ledger has kept them already).
        """
        with self._lock:
            for ledger, open_tally in _OPEN_TALLIES.get():
                if ledger is self:
                    open_tally.rows += tally.rows


def read_ledger(path: Path) -> pd.DataFrame:
    if not path.exists():
        return pd.DataFrame(columns=LEDGER_COLUMNS)
    frame = pd.read_csv(
        path,
        keep_default_na=False,
        dtype={"failure": str, "method": str, "prompt": str, "served_model": str},
    )
    # a ledger written before a column existed reads with that column's default
    for column, default in (("served_model", ""), ("throttled", 0)):
        if column not in frame.columns:
            frame[column] = default
    return frame


def summarize(ledger: pd.DataFrame) -> dict[str, int | float]:
    """Run-level totals: tokens include cache hits (what the work costs); `live_*` is what this run paid."""
    if ledger.empty:
        return {
            "llm_calls_live": 0,
            "llm_calls_cached": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "live_prompt_tokens": 0,
            "live_completion_tokens": 0,
            "failures": 0,
            "embedding_calls": 0,
            "model_seconds": 0.0,
        }
    # Failed calls still consumed tokens, so they count in the totals (and in live_* when live).
    # `failures` counts every failed call, embeddings included, cached (replayed) failures too.
    llm = ledger[ledger["kind"] != "embedding"]
    cached = llm["cached"].astype(bool)
    live = llm[~cached]
    return {
        "llm_calls_live": int(len(live)),
        "llm_calls_cached": int(cached.sum()),
        "prompt_tokens": int(llm["prompt_tokens"].sum()),
        "completion_tokens": int(llm["completion_tokens"].sum()),
        "live_prompt_tokens": int(live["prompt_tokens"].sum()),
        "live_completion_tokens": int(live["completion_tokens"].sum()),
        "failures": int((ledger["failure"] != "").sum()),
        "embedding_calls": int((ledger["kind"] == "embedding").sum()),
        "model_seconds": float(live["latency_s"].sum()),
    }


ANSWERED_BY_COLUMNS = ["source", "calls", "models", "failures"]


def answered_by_table(ledger: pd.DataFrame) -> pd.DataFrame:
    """What answered the LLM calls of `ledger`, one row per kind of source that answered any: `live`
    (the endpoint named its model), `unnamed` (live, to an endpoint that named no model), `replayed`
    (from the cache) and `unanswered` (no model answered); `calls` counts them, `models` names the
    models the endpoint reported (comma-separated), `failures` the failure kinds of unanswered calls.
    """
    llm = ledger[ledger["kind"] != "embedding"]
    cached = llm["cached"].astype(bool)
    named = llm["served_model"] != ""
    failed = llm["failure"] != ""
    sources = {
        "live": llm[~cached & named],
        "unnamed": llm[~cached & ~named & ~failed],  # answered by an endpoint that reports no model name
        "replayed": llm[cached],
        "unanswered": llm[~cached & ~named & failed],
    }
    rows = [
        (
            source,
            len(calls),
            ", ".join(sorted(set(calls["served_model"]) - {""})),  # plain text: reports escape it
            ", ".join(sorted(set(calls["failure"]) - {""})) if source == "unanswered" else "",
        )
        for source, calls in sources.items()
        if len(calls)
    ]
    return pd.DataFrame(rows, columns=ANSWERED_BY_COLUMNS).astype({"calls": int})


def answered_by_text(answered: pd.DataFrame) -> str:
    """`answered_by_table` as a provenance line: what answered, what was replayed, what failed."""
    if answered.empty:
        return "no model call yet in this run"
    rows = answered.set_index("source")
    parts = []
    if "live" in rows.index:
        parts.append(f"{rows.at['live', 'models']} ({_calls(rows.at['live', 'calls'])} live)")
    if "unnamed" in rows.index:
        parts.append(f"{_calls(rows.at['unnamed', 'calls'])} live to an endpoint that named no model")
    if "replayed" in rows.index:
        source = rows.at["replayed", "models"]
        parts.append(
            f"{_calls(rows.at['replayed', 'calls'])} replayed from the cache "
            + (f"(answered by {source})" if source else "(the model that answered was not recorded)")
        )
    if "unanswered" in rows.index:
        calls, kinds = _calls(rows.at["unanswered", "calls"]), rows.at["unanswered", "failures"]
        if not parts:
            return f"no model answered ({calls} failed: {kinds})"
        parts.append(f"{calls} answered by no model ({kinds})")
    return "; ".join(parts)


def answered_by(ledger: pd.DataFrame) -> str:
    """What actually answered the LLM calls of `ledger` (the `model` the endpoint reported), the
    calls replayed from the cache and the calls no model answered, as a provenance line.
    """
    return answered_by_text(answered_by_table(ledger))


def _calls(n: int) -> str:
    return f"{n} call" + ("" if n == 1 else "s")


def by_stage(ledger: pd.DataFrame, keys: tuple[str, ...] = ("stage", "method")) -> pd.DataFrame:
    """Calls, cache hits, failures, tokens and latency aggregated per stage/method."""
    if ledger.empty:
        return pd.DataFrame(
            columns=[*keys, "calls", "cached", "failures", "prompt_tokens", "completion_tokens", "latency_s"]
        )
    df = ledger.assign(cached=ledger["cached"].astype(bool), failed=ledger["failure"] != "")
    return (
        df.groupby(list(keys), dropna=False)
        .agg(
            calls=("kind", "size"),
            cached=("cached", "sum"),
            failures=("failed", "sum"),
            prompt_tokens=("prompt_tokens", "sum"),
            completion_tokens=("completion_tokens", "sum"),
            latency_s=("latency_s", "sum"),
        )
        .reset_index()
    )


def throughput_table(ledger: pd.DataFrame) -> pd.DataFrame:
    """Generated tokens/s and prompt+generated tokens/s over this run's live, successful LLM calls
    (`seconds`: their summed wall time), one row per kind of `tokens`. No row when no such call
    took any time (every call replayed from the cache, or none succeeded): nothing was measured.
    """
    live = ledger[
        (ledger["kind"] != "embedding") & ~ledger["cached"].astype(bool) & (ledger["failure"] == "")
    ]
    seconds = float(live["latency_s"].sum())
    rows = []
    if not live.empty and seconds > 0:
        generated = float(live["completion_tokens"].sum())
        rows = [
            ("generated", generated / seconds, seconds),
            ("prompt+generated", (float(live["prompt_tokens"].sum()) + generated) / seconds, seconds),
        ]
    return pd.DataFrame(rows, columns=["tokens", "tokens_per_s", "seconds"])
