"""The middleware every model call goes through: named wrappers around one completion function.

A `Call` (one request, with its cache key and ledger labels) goes down the chain and a `Reply`
comes back. The order, outermost first, is stated once, in `ragtrial.llm.client.LLM`:

    metrics -> cache -> endpoint -> latency -> structured -> limit -> retries -> rate limit -> send

- metrics: one ledger row per call, hit or live, success or failure (so it sees what the cache
  answered as well);
- cache: a hit returns the stored reply; a live success is stored; a well-formed structured reply
  that failed validation is stored as a failure and re-validated on replay (the request, seed
  included, is its key, as for a success); transient failures are never stored;
- endpoint: resolves the base URL on a miss only (starting the embedded server lazily);
- latency: the clock of a live call starts after the endpoint is resolved (server start-up is
  not model latency) and covers waiting, retries and the repair round;
- structured: validates a structured reply against its schema and asks once for a repair;
- limit: at most `llm.concurrency` requests in flight;
- retries: exponential backoff on 5xx / timeouts / dropped connections / 200 responses without a
  usable reply (empty or malformed); a 429 waits its Retry-After, pausing every thread, without
  using up the retries;
- rate limit: each attempt waits for the run's requests- and tokens-per-minute budget (shared by
  all threads) and for a pause a 429 asked for.

Every wrapper is a function `Handler -> Handler`, testable alone with a scripted inner handler.
An `LLMError` carries what the failed call consumed (every attempt's tokens, the true attempt
count, latency), so the metrics layer can record it.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import openai
from pydantic import BaseModel, ValidationError

from ragtrial.config.llm import LLMSettings
from ragtrial.llm.cache import STATUS_OK, STATUS_PARSE_FAILURE, CachedReply, CacheError, ResponseCache
from ragtrial.llm.errors import BadReply, LLMError, StructuredOutputError
from ragtrial.llm.ledger import CallRecord, Ledger
from ragtrial.llm.rate_limit import RateLimiter
from ragtrial.llm.structured import parse_reply, short_error
from ragtrial.llm.tokens import count_tokens


@dataclass(frozen=True)
class Call:
    """One model call as the middleware sees it."""

    kind: str  # "completion" | "structured"
    request: dict[str, Any]  # the request body; with the prompt version and replicate it makes `key`
    key: str  # the cache key
    schema: type[BaseModel] | None
    stage: str
    method: str
    prompt: str  # prompt tag name@vN, "" without a prompt file
    replicate: int
    base_url: str = ""  # set by the endpoint middleware

    @property
    def what(self) -> str:
        """The endpoint and model, as error messages name them."""
        return f"{self.base_url} model {self.request['model']}"


@dataclass
class Reply:
    text: str
    prompt_tokens: int  # every attempt's, the repair round's included
    completion_tokens: int
    attempts: int = 0  # live HTTP attempts, retries included; 0 for a cache hit
    throttled: int = 0  # of those, the attempts the endpoint refused with a rate limit (429)
    cached: bool = False
    latency_s: float = 0.0
    served_model: str = ""  # the `model` the endpoint reported (stored with the cached reply)


# Set (to anything but "0") by `ragtrial run --retry-failures`: recorded failures are asked again.
# An environment variable, read at call time, so that it reaches papermill's kernels and changes
# neither the settings nor the run id. Its value names the invocation (`retry_round`).
RETRY_FAILURES_ENV = "RAGTRIAL_RETRY_FAILURES"


def retry_recorded_failures() -> bool:
    """Whether cached validation failures are asked again instead of replayed."""
    return retry_round() != ""


def retry_round() -> str:
    """The `ragtrial run --retry-failures` invocation under way ("" when none): what a saved index
    rebuilt for its failures records, so that the batch's later notebooks load it, not rebuild it.
    """
    value = os.environ.get(RETRY_FAILURES_ENV, "")
    return "" if value == "0" else value


def is_empty_reply(
    request: dict[str, Any], text: str | None, completion_tokens: int, finish_reason: Any = "stop"
) -> bool:
    """Whether a reply is empty (a failure): no text, or only whitespace. One blank reply is a
    reply: the request's stop sequence was the first thing the model wrote (it generated tokens and
    stopped on the stop sequence, which the server strips); the answer step asks again without it.
    """
    if text is not None and text.strip():
        return False
    stopped_first = bool(request.get("stop")) and completion_tokens > 0 and finish_reason == "stop"
    return text is None or not stopped_first


Handler = Callable[[Call], Reply]
Middleware = Callable[[Handler], Handler]


# How often a call waiting for another holder's claimed reply looks at the cache.
CLAIM_POLL_S = 0.2


class UnstoredReply(CacheError):
    """A live call's reply (or validation failure) that the cache could not store: the call was
    paid, so the metrics layer records what it consumed (failure "cache_write") before the run
    stops on the cache's error.
    """

    def __init__(self, err: CacheError, spent: Reply | LLMError):
        super().__init__(str(err))
        self.spent = spent


def with_metrics(ledger: Ledger, model: str) -> Middleware:
    """One ledger row per call with the reply's (or the failure's) tokens, attempts and latency."""

    def wrap(inner: Handler) -> Handler:
        def handle(call: Call) -> Reply:
            def record(
                cached: bool,
                p_tok: int,
                c_tok: int,
                latency: float,
                attempts: int,
                throttled: int,
                failure: str,
                served: str,
            ) -> None:
                ledger.record(
                    CallRecord(
                        run_id=ledger.run_id,
                        kind=call.kind,
                        stage=call.stage,
                        method=call.method,
                        model=model,
                        prompt=call.prompt,
                        replicate=call.replicate,
                        cached=cached,
                        prompt_tokens=p_tok,
                        completion_tokens=c_tok,
                        latency_s=latency,
                        attempts=attempts,
                        throttled=throttled,
                        failure=failure,
                        served_model=served,
                    )
                )

            try:
                reply = inner(call)
            except LLMError as err:
                record(
                    err.cached,
                    err.prompt_tokens,
                    err.completion_tokens,
                    err.latency_s,
                    err.attempts,
                    err.throttled,
                    err.kind,
                    err.served_model,
                )
                raise
            except UnstoredReply as err:
                paid = err.spent
                record(
                    False,
                    paid.prompt_tokens,
                    paid.completion_tokens,
                    paid.latency_s,
                    paid.attempts,
                    paid.throttled,
                    "cache_write",
                    paid.served_model,
                )
                raise
            record(
                reply.cached,
                reply.prompt_tokens,
                reply.completion_tokens,
                reply.latency_s,
                reply.attempts,
                reply.throttled,
                "",
                reply.served_model,
            )
            return reply

        return handle

    return wrap


def with_cache(cache: ResponseCache, model: str) -> Middleware:
    """Replay a stored reply; store a live success under the original request's key (so a replay
    skips a repair round too).

    A structured reply that arrived well-formed and still failed validation after the repair round
    is stored as a failure, and a replay re-validates it and raises the same StructuredOutputError
    (a cached failure in the ledger, paid for once) unless `retry_recorded_failures()`. At
    temperature 0 it is the same reply every time; above 0 the request carries its seed, and the
    cache replays a seeded draw whether it validated or not: redrawing only the failures would
    keep the draws that happened to validate, a silent bias toward success. Transient failures (HTTP errors,
    timeouts, empty or malformed bodies) are never stored, and a stored blank reply that is not a
    reply (`is_empty_reply`; older caches kept those) is asked again.

    Identical requests running at once (two pairs regenerating one answer to one length, AB and BA
    of two equal answers) are sent once: the later ones wait and replay what the first stored, as
    they would one after the other. Paid once, one reply, whatever the concurrency. Across
    processes and machines sharing the cache the same holds through a claim in the cache
    (`ResponseCache.claim`, a lease its holder renews): a call whose key another holder claimed
    polls until that reply is stored or the claim ends (released after a failure, or its holder
    died and the lease ran out), then replays the reply or claims the call itself.
    """
    one_at_a_time = KeyLocks()

    def wrap(inner: Handler) -> Handler:
        def handle(call: Call) -> Reply:
            with one_at_a_time.held(call.key):
                return cached_or_live(call)

        def stored(call: Call, started: float, waited: bool) -> tuple[CachedReply | None, Reply | None]:
            """What the cache holds for `call` and, when it is this call's reply, its replay."""
            hit = cache.get_completion(call.key)
            if hit is not None and hit.status == STATUS_OK:
                if not is_empty_reply(call.request, hit.text, hit.completion_tokens):
                    return hit, _replayed(hit, started)
            # what the claimer this call waited for stored is this call's reply, a failure too
            elif hit is not None and call.schema is not None and (waited or not retry_recorded_failures()):
                return hit, _replay_failure(call, hit, started)
            return hit, None

        def cached_or_live(call: Call) -> Reply:
            started = time.perf_counter()
            waited = False
            while True:
                seen, replay = stored(call, started, waited)
                if replay is not None:
                    return replay
                if cache.claim(call.key):
                    break
                waited = True  # another process (or machine) is asking: wait for its reply
                time.sleep(CLAIM_POLL_S)
            try:
                # A holder that stored and released between the read above and the claim would
                # otherwise be paid again: read once more; a reply new since then is its reply.
                _, replay = stored(call, started, waited or seen is None)
                return replay if replay is not None else live(call)
            finally:
                try:
                    cache.release(call.key)
                except CacheError:
                    pass  # the call's own error says what failed; the claim's lease runs out

        def live(call: Call) -> Reply:
            try:
                reply = inner(call)
            except StructuredOutputError as err:
                try:
                    cache.put_completion(
                        call.key,
                        model,
                        err.raw_text,
                        err.prompt_tokens,
                        err.completion_tokens,
                        STATUS_PARSE_FAILURE,
                        err.served_model,
                    )
                except CacheError as unstored:
                    raise UnstoredReply(unstored, err) from None
                raise
            try:
                cache.put_completion(
                    call.key,
                    model,
                    reply.text,
                    reply.prompt_tokens,
                    reply.completion_tokens,
                    served_model=reply.served_model,
                )
            except CacheError as unstored:
                raise UnstoredReply(unstored, reply) from None
            return reply

        return handle

    return wrap


class KeyLocks:
    """A lock per key, kept only while a holder or a waiter needs it."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, int]] = {}  # key -> (lock, holders and waiters)

    @contextmanager
    def held(self, key: str) -> Iterator[None]:
        with self._guard:
            lock, users = self._locks.get(key, (threading.Lock(), 0))
            self._locks[key] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._guard:
                lock, users = self._locks[key]
                if users == 1:
                    del self._locks[key]
                else:
                    self._locks[key] = (lock, users - 1)


def _replayed(hit: CachedReply, started: float) -> Reply:
    return Reply(
        hit.text,
        hit.prompt_tokens,
        hit.completion_tokens,
        cached=True,
        latency_s=time.perf_counter() - started,
        served_model=hit.served_model,
    )


def _replay_failure(call: Call, hit: CachedReply, started: float) -> Reply:
    """A stored validation failure, validated again (the schema or the parser may have changed)."""
    assert call.schema is not None  # only structured calls store failures
    try:
        parse_reply(call.schema, hit.text)
    except ValidationError as err:
        failure = StructuredOutputError(
            f"reply does not match {call.schema.__name__} after one repair round: {short_error(err)} "
            "(replayed from the cache; `ragtrial run --retry-failures` asks the model again)",
            hit.text,
        )
        failure.prompt_tokens, failure.completion_tokens = hit.prompt_tokens, hit.completion_tokens
        failure.cached, failure.served_model = True, hit.served_model
        failure.latency_s = time.perf_counter() - started
        raise failure from None
    return _replayed(hit, started)


def with_endpoint(resolve: Callable[[], str]) -> Middleware:
    """Resolve the endpoint on a live call only: a replay from the cache never starts a server."""

    def wrap(inner: Handler) -> Handler:
        return lambda call: inner(replace(call, base_url=resolve()))

    return wrap


def with_latency() -> Middleware:
    """The live call's latency: from here (after the endpoint is resolved) to the final reply."""

    def wrap(inner: Handler) -> Handler:
        def handle(call: Call) -> Reply:
            started = time.perf_counter()
            try:
                reply = inner(call)
            except LLMError as err:
                err.latency_s = time.perf_counter() - started
                raise
            reply.latency_s = time.perf_counter() - started
            return reply

        return handle

    return wrap


def with_repair() -> Middleware:
    """A structured reply that does not validate against its schema is shown its validation error
    and asked once more; a second invalid reply raises StructuredOutputError. The repair round's
    tokens and attempts are added to the first request's, whether it succeeds or fails.
    """

    def wrap(inner: Handler) -> Handler:
        def handle(call: Call) -> Reply:
            reply = inner(call)
            if call.schema is None:
                return reply
            try:
                parse_reply(call.schema, reply.text)
                return reply
            except ValidationError as err:
                first_error = err
            messages = [
                *call.request["messages"],
                {"role": "assistant", "content": reply.text},
                {
                    "role": "user",
                    "content": "That reply is not valid JSON for the required schema "
                    f"({short_error(first_error)}). Reply again with the corrected JSON object only.",
                },
            ]
            try:
                repaired = inner(replace(call, request={**call.request, "messages": messages}))
            except LLMError as err:
                raise _spent(err, reply) from None
            try:
                parse_reply(call.schema, repaired.text)
            except ValidationError as err:
                failure = StructuredOutputError(
                    f"reply does not match {call.schema.__name__} after one repair round: {short_error(err)}",
                    repaired.text,
                )
                failure.served_model = repaired.served_model
                raise _spent(failure, reply, repaired) from None
            return Reply(
                repaired.text,
                reply.prompt_tokens + repaired.prompt_tokens,
                reply.completion_tokens + repaired.completion_tokens,
                reply.attempts + repaired.attempts,
                reply.throttled + repaired.throttled,
                served_model=repaired.served_model,
            )

        return handle

    return wrap


def _spent(err: LLMError, *replies: Reply) -> LLMError:
    """`err` also reporting what the requests of `replies` consumed."""
    err.prompt_tokens += sum(r.prompt_tokens for r in replies)
    err.completion_tokens += sum(r.completion_tokens for r in replies)
    err.attempts += sum(r.attempts for r in replies)
    err.throttled += sum(r.throttled for r in replies)
    return err


def with_limit(concurrency: int) -> Middleware:
    """At most `concurrency` requests in flight (retries and their backoff hold the slot)."""
    slots = threading.BoundedSemaphore(concurrency)

    def wrap(inner: Handler) -> Handler:
        def handle(call: Call) -> Reply:
            with slots:
                return inner(call)

        return handle

    return wrap


def with_retries(settings: LLMSettings, limiter: RateLimiter | None = None) -> Middleware:
    """Retry transient failures with exponential backoff (`call_with_retries`; a 429 pauses every
    thread through `limiter`); the reply reports every attempt: their count, the throttled ones,
    and the tokens the failed ones consumed added to its own.
    """

    def wrap(inner: Handler) -> Handler:
        def handle(call: Call) -> Reply:
            done = call_with_retries(
                lambda: inner(call), settings, call.what, [settings.api_key_env], limiter
            )
            reply = done.result
            reply.attempts, reply.throttled = done.attempts, done.throttled
            reply.prompt_tokens += done.failed_prompt_tokens
            reply.completion_tokens += done.failed_completion_tokens
            return reply

        return handle

    return wrap


def request_tokens(request: dict[str, Any]) -> int:
    """What a request may use of a tokens-per-minute limit: its prompt (cl100k) and reply cap."""
    prompt = request.get("prompt") or "\n".join(m["content"] for m in request["messages"])
    return count_tokens(prompt) + int(request.get("max_tokens") or 0)


def with_rate_limit(limiter: RateLimiter) -> Middleware:
    """Every attempt waits for the run's requests- and tokens-per-minute budget and for any pause a
    429 asked for; a reply's reported usage settles its token reservation.
    """

    def wrap(inner: Handler) -> Handler:
        def handle(call: Call) -> Reply:
            reserved = request_tokens(call.request) if limiter.counts_tokens else 0
            limiter.acquire(reserved)
            try:
                reply = inner(call)
            except BadReply as err:
                limiter.settle(reserved, err.prompt_tokens + err.completion_tokens)
                raise
            except openai.RateLimitError:
                limiter.settle(reserved, 0)  # refused: it used nothing
                raise
            limiter.settle(reserved, reply.prompt_tokens + reply.completion_tokens)
            return reply

        return handle

    return wrap


def pipeline(send: Handler, layers: list[tuple[str, Middleware]]) -> Handler:
    """`send` wrapped in `layers`, the first named the outermost."""
    handler = send
    for _, wrap in reversed(layers):
        handler = wrap(handler)
    return handler


_RETRYABLE = {
    openai.RateLimitError: "rate_limit",
    openai.APITimeoutError: "timeout",
    openai.APIConnectionError: "connection",
    openai.InternalServerError: "server_error",
}


def _failure_kind(err: Exception) -> tuple[str, bool]:
    if isinstance(err, BadReply):
        return err.kind, True
    for cls, kind in _RETRYABLE.items():
        if isinstance(err, cls):
            return kind, True
    if isinstance(err, openai.APIStatusError):
        return ("server_error", True) if err.status_code >= 500 else (f"http_{err.status_code}", False)
    return type(err).__name__, False


@dataclass
class Attempted:
    """What `call_with_retries` got: the result, the attempts it took (the throttled ones among
    them), and what the failed attempts consumed (a 200 response without a usable reply still
    reports its usage).
    """

    result: Any
    attempts: int
    throttled: int
    failed_prompt_tokens: int
    failed_completion_tokens: int


def retry_after_s(err: Exception) -> float | None:
    """The wait a refused request's response asks for (`retry-after-ms` or `Retry-After` in
    seconds; an HTTP-date is not read), None when it asks for none.
    """
    headers = getattr(getattr(err, "response", None), "headers", None) or {}
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = str(headers.get(name) or "")
        if value.replace(".", "", 1).isdigit():
            return float(value) / scale
    return None


def call_with_retries(
    attempt: Callable[[], Any],
    settings: LLMSettings,
    what: str,
    key_envs: Sequence[str] = (),
    limiter: RateLimiter | None = None,
) -> Attempted:
    """Run `attempt` with exponential backoff on 5xx / timeouts / dropped connections / 200
    responses without a usable reply (`BadReply`), at most `max_retries` times.

    A 429 is the endpoint throttling the run, not a fault of the request: it does not use up
    `max_retries`. The call waits what the endpoint asks (`Retry-After`, else the backoff), through
    `limiter` when there is one so that every thread of the run waits with it, and fails as
    `rate_limit` only once its waits would pass `throttle_max_s`.

    Raises LLMError naming the endpoint once it gives up, carrying the attempts made, the throttled
    ones, and the tokens they consumed; its message is redacted (`key_envs`: the API key's variable).
    """
    failed_prompt_tokens = failed_completion_tokens = 0
    attempts = throttled = retries = 0
    throttled_s = 0.0
    while True:
        attempts += 1
        try:
            return Attempted(attempt(), attempts, throttled, failed_prompt_tokens, failed_completion_tokens)
        except Exception as err:  # noqa: BLE001 - classified below, never swallowed
            kind, retryable = _failure_kind(err)
            if isinstance(err, BadReply):
                failed_prompt_tokens += err.prompt_tokens
                failed_completion_tokens += err.completion_tokens
            asked = retry_after_s(err)
            if kind == "rate_limit":
                throttled += 1
                delay = asked if asked is not None else _backoff(settings, throttled)
                gives_up = throttled_s + delay > settings.throttle_max_s
            else:
                retries += 1
                delay = _backoff(settings, retries)
                if asked is not None:
                    delay = min(settings.backoff_max_s, max(delay, asked))
                gives_up = retries > settings.max_retries
            if not retryable or gives_up:
                waited = f", {throttled} throttled over {throttled_s:.0f} s" if throttled else ""
                # `from None`: the cause's own message (an endpoint's error body) is not redacted
                failure = LLMError(
                    kind, f"{what}: {kind} after {attempts} attempt(s){waited}: {err}", key_envs
                )
                failure.attempts, failure.throttled = attempts, throttled
                failure.prompt_tokens, failure.completion_tokens = (
                    failed_prompt_tokens,
                    failed_completion_tokens,
                )
                raise failure from None
            if kind == "rate_limit":
                throttled_s += delay
                if limiter is not None:
                    limiter.pause(delay)  # the next attempt, and every thread's, waits it out
                else:
                    time.sleep(delay)
            else:
                time.sleep(delay * (0.5 + random.random() / 2))


def _backoff(settings: LLMSettings, n: int) -> float:
    """The wait before the `n`-th retry: doubling from `backoff_initial_s`, at most `backoff_max_s`."""
    return min(settings.backoff_max_s, settings.backoff_initial_s * 2 ** (n - 1))
