"""The endpoint's rate limits, honoured across every thread of a run.

Two token buckets (requests and tokens per minute, each full at the start and refilled evenly)
and a pause: when the endpoint answers 429, every thread holds its next request until the pause
ends (the `Retry-After` the endpoint asked for), so a throttled run slows down as a whole instead
of each thread hammering the endpoint on its own backoff.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Bucket:
    """`per_minute` units refilled evenly, holding one second's worth (at least one unit): endpoints
    meter their per-minute limits over short intervals, so a burst of a whole minute's budget would
    be refused. A draw larger than the bucket waits for a full bucket and leaves it in debt.
    """

    def __init__(self, per_minute: int, now: float):
        self.rate = per_minute / 60.0  # units per second
        self.capacity = max(1.0, self.rate)
        self.level = self.capacity
        self.updated = now

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.updated) * self.rate)
        self.updated = now

    def wait_for(self, units: float) -> float:
        """Seconds until `units` (at most a full bucket) are there."""
        return max(0.0, (min(units, self.capacity) - self.level) / self.rate)


class RateLimiter:
    def __init__(
        self,
        requests_per_minute: int | None,
        tokens_per_minute: int | None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._clock = clock
        now = clock()
        self.requests = Bucket(requests_per_minute, now) if requests_per_minute else None
        self.tokens = Bucket(tokens_per_minute, now) if tokens_per_minute else None
        self._paused_until = 0.0
        self._cond = threading.Condition()

    @property
    def counts_tokens(self) -> bool:
        return self.tokens is not None

    def acquire(self, tokens: int = 0) -> float:
        """Wait for the pause to end and for one request and `tokens` to be available, take them,
        and return the seconds waited.
        """
        started = self._clock()
        with self._cond:
            while True:
                now = self._clock()
                wait = self._paused_until - now
                for bucket, units in ((self.requests, 1), (self.tokens, tokens)):
                    if bucket is not None:
                        bucket.refill(now)
                        wait = max(wait, bucket.wait_for(units))
                if wait <= 0:
                    if self.requests is not None:
                        self.requests.level -= 1
                    if self.tokens is not None:
                        self.tokens.level -= tokens
                    return self._clock() - started
                self._cond.wait(wait)

    def settle(self, reserved: int, used: int) -> None:
        """Correct a request's token reservation to what it used (a refund when it used less)."""
        if self.tokens is not None:
            with self._cond:
                self.tokens.level += reserved - used
                self._cond.notify_all()

    def pause(self, seconds: float) -> None:
        """Hold every thread's next request for `seconds` from now (a pause already longer stays)."""
        with self._cond:
            self._paused_until = max(self._paused_until, self._clock() + seconds)
