"""The middleware every model call goes through: named wrappers around one completion function.

A `Call` (one request, with its cache key and ledger labels) goes down the chain and a `Reply`
comes back. The order, outermost first, is stated once, in `ragtrial.llm.client.LLM`:

    metrics -> cache -> endpoint -> latency -> structured -> limit -> retries -> send

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
- retries: exponential backoff on 429 / 5xx / timeouts / dropped connections / 200 responses
  without a usable reply (empty or malformed).

Every wrapper is a function `Handler -> Handler`, testable alone with a scripted inner handler.
An `LLMError` carries what the failed call consumed (every attempt's tokens, the true attempt
count, latency), so the metrics layer can record it.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import openai
from pydantic import BaseModel, ValidationError

from ragtrial.config.llm import LLMSettings
from ragtrial.llm.cache import STATUS_OK, STATUS_PARSE_FAILURE, CachedReply, ResponseCache
from ragtrial.llm.errors import BadReply, LLMError, StructuredOutputError
from ragtrial.llm.ledger import CallRecord, Ledger
from ragtrial.llm.structured import parse_reply, short_error


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
    cached: bool = False
    latency_s: float = 0.0
    served_model: str = ""  # the `model` the endpoint reported (stored with the cached reply)


# Set (to anything but "0") by `ragtrial run --retry-failures`: recorded failures are asked again.
# An environment variable, read at call time, so that it reaches papermill's kernels and changes
# neither the settings nor the run id.
RETRY_FAILURES_ENV = "RAGTRIAL_RETRY_FAILURES"


def retry_recorded_failures() -> bool:
    """Whether cached validation failures are asked again instead of replayed."""
    return os.environ.get(RETRY_FAILURES_ENV, "") not in ("", "0")


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


def with_metrics(ledger: Ledger, model: str) -> Middleware:
    """One ledger row per call with the reply's (or the failure's) tokens, attempts and latency."""

    def wrap(inner: Handler) -> Handler:
        def handle(call: Call) -> Reply:
            def record(
                cached: bool, p_tok: int, c_tok: int, latency: float, attempts: int, failure: str, served: str
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
                    err.kind,
                    err.served_model,
                )
                raise
            record(
                reply.cached,
                reply.prompt_tokens,
                reply.completion_tokens,
                reply.latency_s,
                reply.attempts,
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
    """

    def wrap(inner: Handler) -> Handler:
        def handle(call: Call) -> Reply:
            started = time.perf_counter()
            hit = cache.get_completion(call.key)
            if hit is not None and hit.status == STATUS_OK:
                if not is_empty_reply(call.request, hit.text, hit.completion_tokens):
                    return _replayed(hit, started)
            elif hit is not None and call.schema is not None and not retry_recorded_failures():
                return _replay_failure(call, hit, started)
            try:
                reply = inner(call)
            except StructuredOutputError as err:
                cache.put_completion(
                    call.key,
                    model,
                    err.raw_text,
                    err.prompt_tokens,
                    err.completion_tokens,
                    STATUS_PARSE_FAILURE,
                    err.served_model,
                )
                raise
            cache.put_completion(
                call.key,
                model,
                reply.text,
                reply.prompt_tokens,
                reply.completion_tokens,
                served_model=reply.served_model,
            )
            return reply

        return handle

    return wrap


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
                served_model=repaired.served_model,
            )

        return handle

    return wrap


def _spent(err: LLMError, *replies: Reply) -> LLMError:
    """`err` also reporting what the requests of `replies` consumed."""
    err.prompt_tokens += sum(r.prompt_tokens for r in replies)
    err.completion_tokens += sum(r.completion_tokens for r in replies)
    err.attempts += sum(r.attempts for r in replies)
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


def with_retries(settings: LLMSettings) -> Middleware:
    """Retry transient failures with exponential backoff (`call_with_retries`); the reply reports
    every attempt: their count, and the tokens the failed ones consumed added to its own.
    """

    def wrap(inner: Handler) -> Handler:
        def handle(call: Call) -> Reply:
            done = call_with_retries(lambda: inner(call), settings, call.what, [settings.api_key_env])
            reply = done.result
            reply.attempts = done.attempts
            reply.prompt_tokens += done.failed_prompt_tokens
            reply.completion_tokens += done.failed_completion_tokens
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
    """What `call_with_retries` got: the result, the attempts it took, and what the failed
    attempts consumed (a 200 response without a usable reply still reports its usage).
    """

    result: Any
    attempts: int
    failed_prompt_tokens: int
    failed_completion_tokens: int


def call_with_retries(
    attempt: Callable[[], Any], settings: LLMSettings, what: str, key_envs: Sequence[str] = ()
) -> Attempted:
    """Run `attempt` with exponential backoff on 429 / 5xx / timeouts / dropped connections /
    200 responses without a usable reply (`BadReply`).

    Raises LLMError naming the endpoint once retries are exhausted, carrying the attempts made and
    the tokens they consumed; its message is redacted (`key_envs`: the API key's variable).
    """
    failed_prompt_tokens = failed_completion_tokens = 0
    for attempt_no in range(1, settings.max_retries + 2):
        try:
            return Attempted(attempt(), attempt_no, failed_prompt_tokens, failed_completion_tokens)
        except Exception as err:  # noqa: BLE001 - classified below, never swallowed
            kind, retryable = _failure_kind(err)
            if isinstance(err, BadReply):
                failed_prompt_tokens += err.prompt_tokens
                failed_completion_tokens += err.completion_tokens
            if not retryable or attempt_no > settings.max_retries:
                # `from None`: the cause's own message (an endpoint's error body) is not redacted
                failure = LLMError(kind, f"{what}: {kind} after {attempt_no} attempt(s): {err}", key_envs)
                failure.attempts = attempt_no
                failure.prompt_tokens, failure.completion_tokens = (
                    failed_prompt_tokens,
                    failed_completion_tokens,
                )
                raise failure from None
            delay = min(settings.backoff_max_s, settings.backoff_initial_s * 2 ** (attempt_no - 1))
            retry_after = getattr(getattr(err, "response", None), "headers", {}).get("retry-after")
            if retry_after and retry_after.replace(".", "", 1).isdigit():
                delay = min(settings.backoff_max_s, max(delay, float(retry_after)))
            time.sleep(delay * (0.5 + random.random() / 2))
    raise AssertionError("unreachable")
