"""Independent units of work (each making model calls) run concurrently, results in input order.

Every LLM-bound stage hands its independent units (a chunk to extract, a question to answer, a
judge trial) to `fan_out`. At most `concurrency` units run at once; the `limit` middleware still
bounds the requests in flight, so nested fan-outs (a map-reduce answer inside the answering stage)
never exceed `llm.concurrency`. Results come back in the order of `items` whatever the order the
units finished in, and each unit runs in a copy of the caller's context, so a ledger tally opened
around the stage (or inside a unit) sees exactly its own calls. A unit must not share mutable state
with the others: draw any random numbers before the fan-out, one seed per unit.

Units that make the same request (a chunk text that recurs, a question asked twice) race each
other live when they run together, and the one that loses no longer replays the cache as it does at
concurrency 1 (its failure says "replayed from the cache", its ledger row is cached). With `key`,
a unit whose key repeats an earlier unit's runs after every first unit has finished, so it replays
what that one cached, as at concurrency 1.

A unit that raises does not cancel the units already running (what they pay for lands in the
cache, so a rerun does not pay twice); the units not yet started are dropped, and the failure of
the earliest unit in input order is raised.
"""

from __future__ import annotations

import contextvars
import sys
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import TypeVar

from ragtrial.llm.ledger import Ledger, Tally
from ragtrial.llm.progress import ProgressBoard, board_for, in_batch

T = TypeVar("T")
R = TypeVar("R")

# A stage that runs longer than this shows progress lines (shorter ones stay silent in reports).
PROGRESS_AFTER_S = 15.0
PROGRESS_EVERY_S = 30.0


class Progress:
    """Units done / total, and the stage's calls so far: live, cached, failed. Shown on `board` (the
    run folder's progress file, which `ragtrial run` reads) and, outside `ragtrial run`, printed as
    one bar line at most every `PROGRESS_EVERY_S` once the stage has run `PROGRESS_AFTER_S`, and a
    closing line when any was printed.
    """

    def __init__(
        self, label: str, total: int, tally: Tally | None, out=None, board: ProgressBoard | None = None
    ):
        self.label, self.total, self.tally = label, total, tally
        # in a kernel of `ragtrial run` the lines would land in the report; the board shows them
        self.out = out if out is not None else (None if in_batch() else sys.stdout)
        self.board = board
        self.done = 0
        self.started = time.monotonic()
        self.started_at = time.time()
        self.printed_at: float | None = None
        self._lock = threading.Lock()
        if board is not None:
            board.open(self)

    def calls(self) -> dict[str, int]:
        rows = [r for r in (self.tally.rows if self.tally else []) if r.kind != "embedding"]
        return {
            "live": sum(not r.cached for r in rows),
            "cached": sum(r.cached for r in rows),
            "failed": sum(r.failure != "" for r in rows),
        }

    def state(self) -> dict[str, object]:
        """What the progress file records of this stage."""
        return {
            "label": self.label,
            "done": self.done,
            "total": self.total,
            **self.calls(),
            "started_at": self.started_at,
        }

    def line(self) -> str:
        width = 20
        filled = width * self.done // self.total if self.total else width
        c = self.calls()
        return (
            f"{self.label}: [{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} done; "
            f"calls {c['live']} live, {c['cached']} cached, {c['failed']} failed; "
            f"{time.monotonic() - self.started:.0f} s"
        )

    def advance(self) -> None:
        with self._lock:
            self.done += 1
            now = time.monotonic()
            due = now - self.started >= PROGRESS_AFTER_S and (
                self.printed_at is None or now - self.printed_at >= PROGRESS_EVERY_S
            )
            if due and self.done < self.total and self.out is not None:
                print(self.line(), file=self.out, flush=True)
                self.printed_at = now
        if self.board is not None:
            self.board.advanced()

    def close(self) -> None:
        if self.board is not None:
            self.board.close(self)
        if self.printed_at is not None:
            print(self.line(), file=self.out, flush=True)


def fan_out(
    work: Callable[[T], R],
    items: Iterable[T],
    *,
    concurrency: int,
    label: str = "",
    ledger: Ledger | None = None,
    key: Callable[[T], Hashable] | None = None,
) -> list[R]:
    """`[work(item) for item in items]`, with up to `concurrency` units running at once.

    With `ledger`, the stage's calls are tallied for its progress (`label` names the stage), which the
    progress file of the ledger's run folder shows (`ragtrial.llm.progress`).
    With `key`, the units whose key repeats an earlier one's run once all first ones are done.
    At concurrency 1 the units run inline, one after the other, in order.
    """
    items = list(items)
    if ledger is None:
        return _run(work, items, concurrency, Progress(label, len(items), None), key)
    with ledger.tally() as tally:
        return _run(
            work, items, concurrency, Progress(label, len(items), tally, board=board_for(ledger)), key
        )


def _run(
    work: Callable[[T], R],
    items: list[T],
    concurrency: int,
    progress: Progress,
    key: Callable[[T], Hashable] | None,
) -> list[R]:
    try:
        if concurrency <= 1 or len(items) <= 1:
            results = []
            for item in items:
                results.append(work(item))
                progress.advance()
            return results
        if key is None:
            return _run_pooled(work, items, concurrency, progress)
        first_of: dict[Hashable, int] = {}
        for i, item in enumerate(items):
            first_of.setdefault(key(item), i)
        first = sorted(first_of.values())
        repeats = sorted(set(range(len(items))) - set(first))
        results_at: dict[int, R] = {}
        for wave in (first, repeats):
            if wave:
                done = _run_pooled(work, [items[i] for i in wave], concurrency, progress)
                results_at.update(zip(wave, done, strict=True))
        return [results_at[i] for i in range(len(items))]
    finally:
        progress.close()


def _run_pooled(work: Callable[[T], R], items: list[T], concurrency: int, progress: Progress) -> list[R]:
    def unit(item: T) -> R:
        result = work(item)
        progress.advance()
        return result

    pool = ThreadPoolExecutor(max_workers=min(concurrency, len(items)), thread_name_prefix="ragtrial-fan-out")
    futures: list[Future[R]] = []
    try:
        # each unit in its own copy of this context: tallies open here see its calls, and a tally a
        # unit opens sees only that unit's
        futures = [pool.submit(contextvars.copy_context().run, unit, item) for item in items]
        wait(futures, return_when=FIRST_EXCEPTION)
    finally:
        # a failure or an interrupt: units not started are dropped, running ones finish (their
        # replies are cached), then the earliest failure in input order is raised
        for future in futures:
            future.cancel()
        pool.shutdown(wait=True)
    for future in futures:
        if not future.cancelled() and future.exception() is not None:
            raise future.exception()  # type: ignore[misc]
    return [future.result() for future in futures]
