"""The middleware every model call goes through: named wrappers around one completion function.

A `Call` (one request, with its cache key and ledger labels) goes down the chain and a `Reply`
comes back. The order, outermost first, is stated once, in `ragtrial.llm.client.LLM`:

    metrics -> cache -> endpoint -> latency -> structured -> limit -> retries -> send

- metrics: one ledger row per call, hit or live, success or failure (so it sees what the cache
  answered as well);
- cache: a hit returns the stored reply; a live success is stored (failures never are);
- endpoint: resolves the base URL on a miss only (starting the embedded server lazily);
- latency: the clock of a live call starts after the endpoint is resolved (server start-up is
  not model latency) and covers waiting, retries and the repair round;
- structured: validates a structured reply against its schema and asks once for a repair;
- limit: at most `llm.concurrency` requests in flight;
- retries: exponential backoff on 429 / 5xx / timeouts / dropped connections.

Every wrapper is a function `Handler -> Handler`, testable alone with a scripted inner handler.
An `LLMError` carries what the failed call consumed (tokens, attempts, latency), so the metrics
layer can record it.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import openai
from pydantic import BaseModel, ValidationError

from ragtrial.config.llm import LLMSettings
from ragtrial.llm.cache import ResponseCache
from ragtrial.llm.errors import LLMError, StructuredOutputError
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
    prompt_tokens: int
    completion_tokens: int
    attempts: int = 0  # live HTTP attempts, retries included; 0 for a cache hit
    cached: bool = False
    latency_s: float = 0.0


Handler = Callable[[Call], Reply]
Middleware = Callable[[Handler], Handler]


def with_metrics(ledger: Ledger, model: str) -> Middleware:
    """One ledger row per call with the reply's (or the failure's) tokens, attempts and latency."""

    def wrap(inner: Handler) -> Handler:
        def handle(call: Call) -> Reply:
            def record(
                cached: bool, p_tok: int, c_tok: int, latency: float, attempts: int, failure: str
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
                    )
                )

            try:
                reply = inner(call)
            except LLMError as err:
                record(False, err.prompt_tokens, err.completion_tokens, err.latency_s, err.attempts, err.kind)
                raise
            record(
                reply.cached,
                reply.prompt_tokens,
                reply.completion_tokens,
                reply.latency_s,
                reply.attempts,
                "",
            )
            return reply

        return handle

    return wrap


def with_cache(cache: ResponseCache, model: str) -> Middleware:
    """Replay a stored reply; store a live success under the original request's key (so a replay
    skips a repair round too).
    """

    def wrap(inner: Handler) -> Handler:
        def handle(call: Call) -> Reply:
            started = time.perf_counter()
            hit = cache.get_completion(call.key)
            if hit is not None:
                text, p_tok, c_tok = hit
                return Reply(text, p_tok, c_tok, cached=True, latency_s=time.perf_counter() - started)
            reply = inner(call)
            cache.put_completion(call.key, model, reply.text, reply.prompt_tokens, reply.completion_tokens)
            return reply

        return handle

    return wrap


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
    and asked once more; a second invalid reply raises StructuredOutputError. The tokens of a
    successful repair round are added to the reply's; a failed round reports the first request's.
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
                parse_reply(call.schema, repaired.text)
            except LLMError as err:
                raise _spent(err, reply) from None
            except ValidationError as err:
                raise _spent(
                    StructuredOutputError(
                        f"reply does not match {call.schema.__name__} after one repair round: "
                        f"{short_error(err)}",
                        repaired.text,
                    ),
                    reply,
                ) from None
            return Reply(
                repaired.text,
                reply.prompt_tokens + repaired.prompt_tokens,
                reply.completion_tokens + repaired.completion_tokens,
                reply.attempts + repaired.attempts,
            )

        return handle

    return wrap


def _spent(err: LLMError, reply: Reply) -> LLMError:
    """`err` reporting what `reply`'s request consumed."""
    err.prompt_tokens, err.completion_tokens, err.attempts = (
        reply.prompt_tokens,
        reply.completion_tokens,
        reply.attempts,
    )
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
    """Retry transient failures with exponential backoff (`call_with_retries`)."""

    def wrap(inner: Handler) -> Handler:
        def handle(call: Call) -> Reply:
            reply, attempts = call_with_retries(lambda: inner(call), settings, call.what)
            reply.attempts = attempts
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
    for cls, kind in _RETRYABLE.items():
        if isinstance(err, cls):
            return kind, True
    if isinstance(err, openai.APIStatusError):
        return ("server_error", True) if err.status_code >= 500 else (f"http_{err.status_code}", False)
    return type(err).__name__, False


def call_with_retries(attempt: Callable[[], Any], settings: LLMSettings, what: str) -> tuple[Any, int]:
    """Run `attempt` with exponential backoff on 429 / 5xx / timeouts / dropped connections.

    Returns (result, attempts). Raises LLMError naming the endpoint once retries are exhausted.
    """
    for attempt_no in range(1, settings.max_retries + 2):
        try:
            return attempt(), attempt_no
        except Exception as err:  # noqa: BLE001 - classified below, never swallowed
            kind, retryable = _failure_kind(err)
            if not retryable or attempt_no > settings.max_retries:
                raise LLMError(kind, f"{what}: {kind} after {attempt_no} attempt(s): {err}") from err
            delay = min(settings.backoff_max_s, settings.backoff_initial_s * 2 ** (attempt_no - 1))
            retry_after = getattr(getattr(err, "response", None), "headers", {}).get("retry-after")
            if retry_after and retry_after.replace(".", "", 1).isdigit():
                delay = min(settings.backoff_max_s, max(delay, float(retry_after)))
            time.sleep(delay * (0.5 + random.random() / 2))
    raise AssertionError("unreachable")
