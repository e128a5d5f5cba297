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

With `after`, a unit waits for the units it comes after (earlier ones in input order) and starts as
soon as they have finished and a slot is free, whatever else is still running: a community report
waits for its own children's reports, not for their whole level. Of the units ready to start, the
earliest in input order goes first, so the caller's order is its priority (e.g. the longest chain of
work waiting on a unit first). Such a unit may read what the units it came after wrote.
"""

from __future__ import annotations

import contextvars
import heapq
import sys
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
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
    after: Sequence[Iterable[int]] | None = None,
) -> list[R]:
    """`[work(item) for item in items]`, with up to `concurrency` units running at once.

    With `ledger`, the stage's calls are tallied for its progress (`label` names the stage), which the
    progress file of the ledger's run folder shows (`ragtrial.llm.progress`).
    With `key`, the units whose key repeats an earlier one's run once all first ones are done.
    With `after`, unit i starts once the units `after[i]` (indices below i) have finished.
    At concurrency 1 the units run inline, one after the other, in order.
    """
    items = list(items)
    prerequisites = _prerequisites(after, len(items))
    if prerequisites and key is not None:
        raise ValueError("fan_out takes `key` or `after`, not both")
    if ledger is None:
        return _run(work, items, concurrency, Progress(label, len(items), None), key, prerequisites)
    with ledger.tally() as tally:
        progress = Progress(label, len(items), tally, board=board_for(ledger))
        return _run(work, items, concurrency, progress, key, prerequisites)


def _prerequisites(after: Sequence[Iterable[int]] | None, n: int) -> list[set[int]] | None:
    """`after` as sets, checked: one per unit, each naming earlier units only (so input order runs
    every unit after its prerequisites, as concurrency 1 does). None when no unit waits.
    """
    if after is None:
        return None
    if len(after) != n:
        raise ValueError(f"`after` names the prerequisites of {len(after)} units, there are {n}")
    sets = [set(before) for before in after]
    for i, before in enumerate(sets):
        if any(not 0 <= j < i for j in before):
            raise ValueError(f"unit {i} comes after {sorted(before)}: only earlier units can come first")
    return sets if any(sets) else None


def _run(
    work: Callable[[T], R],
    items: list[T],
    concurrency: int,
    progress: Progress,
    key: Callable[[T], Hashable] | None,
    prerequisites: list[set[int]] | None = None,
) -> list[R]:
    try:
        if concurrency <= 1 or len(items) <= 1:
            results = []
            for item in items:
                results.append(work(item))
                progress.advance()
            return results
        if prerequisites is not None:
            return _run_scheduled(work, items, concurrency, progress, prerequisites)
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


def _counted(work: Callable[[T], R], progress: Progress) -> Callable[[T], R]:
    def unit(item: T) -> R:
        result = work(item)
        progress.advance()
        return result

    return unit


def _results(futures: list[Future[R]]) -> list[R]:
    """The results in input order, or the failure of the earliest failed unit in input order."""
    for future in futures:
        if not future.cancelled() and future.exception() is not None:
            raise future.exception()  # type: ignore[misc]
    return [future.result() for future in futures]


def _run_pooled(work: Callable[[T], R], items: list[T], concurrency: int, progress: Progress) -> list[R]:
    unit = _counted(work, progress)
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
    return _results(futures)


def _run_scheduled(
    work: Callable[[T], R],
    items: list[T],
    concurrency: int,
    progress: Progress,
    prerequisites: list[set[int]],
) -> list[R]:
    """`_run_pooled` where a unit starts once its prerequisites have finished: at most `concurrency`
    units are handed to the pool at a time, the ready unit earliest in input order first (so the
    caller's order is the priority). A failure stops the starting; the units running finish, then it
    is raised.
    """
    unit = _counted(work, progress)
    waiting = [set(before) for before in prerequisites]
    dependents: dict[int, list[int]] = {}
    for i, before in enumerate(waiting):
        for j in before:
            dependents.setdefault(j, []).append(i)
    ready = [i for i, before in enumerate(waiting) if not before]  # a heap of indices
    pool = ThreadPoolExecutor(max_workers=min(concurrency, len(items)), thread_name_prefix="ragtrial-fan-out")
    futures: dict[int, Future[R]] = {}
    index_of: dict[Future[R], int] = {}
    running: set[Future[R]] = set()
    try:
        while ready or running:
            while ready and len(running) < concurrency:
                i = heapq.heappop(ready)
                futures[i] = pool.submit(contextvars.copy_context().run, unit, items[i])
                index_of[futures[i]] = i
                running.add(futures[i])
            done, running = wait(running, return_when=FIRST_COMPLETED)
            if any(future.exception() is not None for future in done):
                break
            for future in done:
                for k in dependents.get(index_of[future], []):
                    waiting[k].discard(index_of[future])
                    if not waiting[k]:
                        heapq.heappush(ready, k)
    finally:
        for future in futures.values():
            future.cancel()
        pool.shutdown(wait=True)
    if len(futures) < len(items):  # a failure stopped the starting
        _results([futures[i] for i in sorted(futures)])
    return _results([futures[i] for i in range(len(items))])
