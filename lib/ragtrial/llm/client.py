"""The LLM client: chat and structured output against one OpenAI-compatible endpoint.

A call goes through the middleware chain (`ragtrial.llm.middleware`) around one completion
function, and every call (hit or live, success or failure) leaves a row in the ledger.
API keys are read from the environment at call time and never stored.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
import ssl
import threading
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard, TypeVar

import httpx2
import openai
from pydantic import BaseModel

from ragtrial.config.llm import LLMSettings
from ragtrial.llm.cache import ResponseCache, cache_key
from ragtrial.llm.errors import BadReply
from ragtrial.llm.fanout import fan_out
from ragtrial.llm.ledger import Ledger
from ragtrial.llm.middleware import (
    Call,
    Reply,
    is_empty_reply,
    pipeline,
    with_cache,
    with_endpoint,
    with_latency,
    with_limit,
    with_metrics,
    with_rate_limit,
    with_repair,
    with_retries,
)
from ragtrial.llm.plan import PlannedRequest
from ragtrial.llm.rate_limit import RateLimiter
from ragtrial.llm.structured import T, parse_reply
from ragtrial.llm.tokens import count_tokens
from ragtrial.prompts import Prompt
from ragtrial.redact import redact, url_secrets

Messages = list[dict[str, str]]
U = TypeVar("U")
R = TypeVar("R")


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cached: bool
    latency_s: float
    attempts: int
    served_model: str = ""  # the model the endpoint reported ("" when it named none)


@functools.cache
def json_schema_of(schema: type[BaseModel]) -> dict[str, Any]:
    """A reply schema's JSON schema, built once per class (pydantic builds it anew on every call);
    shared by every request, so never mutated.
    """
    return schema.model_json_schema()


def fold_system_messages(messages: Messages) -> Messages:
    """Gemma's chat format drops system turns: prepend them to the first user turn instead."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    rest = [dict(m) for m in messages if m["role"] != "system"]
    if system and rest and rest[0]["role"] == "user":
        rest[0]["content"] = f"{system}\n\n{rest[0]['content']}"
    elif system:
        rest.insert(0, {"role": "user", "content": system})
    return rest


class LLM:
    """Chat completions and structured output against one OpenAI-compatible endpoint."""

    def __init__(
        self,
        settings: LLMSettings,
        cache: ResponseCache,
        ledger: Ledger,
        endpoint: Callable[[], str],
        transport: Callable[[Call], Reply] | None = None,
    ):
        """`transport` answers a call in place of the HTTP request (`send`), behind the whole middleware
        chain: ragtrial.evaluation.calibration's simulated judge is one.
        """
        self.settings = settings
        self.cache = cache
        self.ledger = ledger
        # The middleware, outermost first (see ragtrial.llm.middleware for what each does and why
        # this order). The endpoint is resolved lazily: the embedded server starts on the first live call.
        self.clients = SharedClients(settings.timeout_s)
        self.rate_limiter = RateLimiter(settings.requests_per_minute, settings.tokens_per_minute)
        self.middleware = [
            ("metrics", with_metrics(ledger, settings.model)),
            ("cache", with_cache(cache, settings.model)),
            ("endpoint", with_endpoint(endpoint)),
            ("latency", with_latency()),
            ("structured", with_repair()),
            ("limit", with_limit(settings.in_flight)),
            ("retries", with_retries(settings, self.rate_limiter)),
            ("rate limit", with_rate_limit(self.rate_limiter)),
        ]
        self.handle = pipeline(
            transport or (lambda call: send(call, settings, self.clients)), self.middleware
        )

    @property
    def model(self) -> str:
        return self.settings.model

    def fan_out(
        self,
        work: Callable[[U], R],
        items: Iterable[U],
        *,
        label: str,
        key: Callable[[U], Hashable] | None = None,
        after: Sequence[Iterable[int]] | None = None,
    ) -> list[R]:
        """`[work(item) for item in items]`, the units running concurrently up to the requests this
        endpoint takes in flight (`llm.concurrency`), results in input order (`ragtrial.llm.fanout`;
        `key`: units repeating an earlier one's request run after the first ones, from the cache;
        `after`: unit i starts once the units after[i] have finished).
        """
        return fan_out(
            work,
            items,
            concurrency=self.settings.in_flight,
            label=label,
            ledger=self.ledger,
            key=key,
            after=after,
        )

    def _response_format(self, schema: dict[str, Any] | None, name: str) -> dict[str, Any]:
        """The response format that asks for a JSON reply (matching `schema` when there is one) as the
        configured `json_mode` spells it (not prompt_only, which asks in the prompt instead).
        """
        if schema is None:
            return {"type": "json_object"}
        if self.settings.json_mode == "json_schema":
            return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
        return {"type": "json_object", "schema": schema}

    def _request(
        self, messages: Messages, schema: type[BaseModel] | None, replicate: int, overrides: dict[str, Any]
    ) -> dict[str, Any]:
        s = self.settings
        reply_schema, schema_name, json_reply = _json_reply(schema, overrides)
        plain_text = not json_reply and s.completions_api  # /completions: the turns as one prompt
        if s.fold_system or plain_text:
            messages = fold_system_messages(messages)
        if json_reply and s.json_mode == "prompt_only":
            ask = "Reply with one JSON object only" + (
                "." if reply_schema is None else ", matching this JSON schema:\n" + json.dumps(reply_schema)
            )
            messages = [*messages[:-1], {"role": "user", "content": messages[-1]["content"] + "\n\n" + ask}]
        # the cache key of a plain-text request differs from the chat request's
        text = (
            {"prompt": "\n\n".join(m["content"] for m in messages)} if plain_text else {"messages": messages}
        )
        request = {
            "model": s.model,
            **text,
            "temperature": overrides.get("temperature", s.temperature),
            "top_p": overrides.get("top_p", s.top_p),
            # each replicate is its own sample: distinct seed and distinct cache key
            "seed": overrides.get("seed", s.seed) + replicate,
            "max_tokens": overrides.get("max_tokens", s.max_tokens),
        }
        if overrides.get("stop"):
            request["stop"] = list(overrides["stop"])
        if json_reply and s.json_mode != "prompt_only":
            request["response_format"] = self._response_format(reply_schema, schema_name)
        return request

    def complete(
        self,
        messages: Messages | str,
        *,
        stage: str,
        method: str = "",
        prompt: Prompt | None = None,
        replicate: int = 0,
        **overrides: Any,
    ) -> Completion:
        """Free text (see `text_api`); `overrides` may set temperature, top_p, seed, max_tokens, stop,
        and ask for a JSON reply the caller parses itself (no repair round): `json_schema` (a raw JSON
        schema the reply must match) or `json_object=True` (any JSON object), sent as `json_mode` says.
        """
        reply = self.handle(
            self._call("completion", messages, None, stage, method, prompt, replicate, overrides)
        )
        return Completion(
            reply.text,
            reply.prompt_tokens,
            reply.completion_tokens,
            reply.cached,
            reply.latency_s,
            reply.attempts,
            reply.served_model,
        )

    def structured(
        self,
        messages: Messages | str,
        schema: type[T],
        *,
        stage: str,
        method: str = "",
        prompt: Prompt | None = None,
        replicate: int = 0,
        **overrides: Any,
    ) -> T:
        """A reply validated against `schema`; one repair round, then StructuredOutputError."""
        reply = self.handle(
            self._call("structured", messages, schema, stage, method, prompt, replicate, overrides)
        )
        return parse_reply(schema, reply.text)

    def request_key(
        self,
        messages: Messages | str,
        schema: type[BaseModel] | None = None,
        *,
        prompt: Prompt | None = None,
        replicate: int = 0,
        **overrides: Any,
    ) -> str:
        """The cache key of this request, exactly as `complete` (no schema) or `structured` would
        build it; nothing is sent.
        """
        return self._call(_kind(schema), messages, schema, "", "", prompt, replicate, overrides).key

    def plan(
        self,
        messages: Messages | str,
        schema: type[BaseModel] | None = None,
        *,
        stage: str,
        prompt: Prompt | None = None,
        replicate: int = 0,
        **overrides: Any,
    ) -> PlannedRequest:
        """What this request would cost, without sending it: its cl100k prompt tokens (of the text
        the endpoint would receive), its completion cap, and whether the cache already holds it.
        """
        call = self._call(_kind(schema), messages, schema, stage, "", prompt, replicate, overrides)
        request = call.request
        text = request.get("prompt") or "\n".join(m["content"] for m in request["messages"])
        return PlannedRequest(
            stage=stage,
            key=call.key,
            prompt_tokens=count_tokens(text),
            max_tokens=int(request["max_tokens"]),
            output="text" if schema is None else "json",
            cached=self.cache.get_completion(call.key) is not None,
        )

    def _call(
        self,
        kind: str,
        messages: Messages | str,
        schema: type[BaseModel] | None,
        stage: str,
        method: str,
        prompt: Prompt | None,
        replicate: int,
        overrides: dict[str, Any],
    ) -> Call:
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        tag = prompt.tag if prompt else ""
        request = self._request(messages, schema, replicate, overrides)
        key = cache_key({**request, "prompt_version": tag, "replicate": replicate})
        return Call(kind, request, key, schema, stage, method, tag, replicate)


def _json_reply(
    schema: type[BaseModel] | None, overrides: dict[str, Any]
) -> tuple[dict[str, Any] | None, str, bool]:
    """The JSON schema a reply must match (None: any JSON, or not JSON), its name, and whether the
    reply is JSON at all: a structured call's schema, or a free-text call's `json_schema` /
    `json_object` override.
    """
    raw_schema = overrides.get("json_schema")
    if schema is not None:
        if raw_schema is not None or overrides.get("json_object"):
            raise ValueError(
                "json_schema and json_object are for free-text calls; a structured call has its schema"
            )
        return json_schema_of(schema), schema.__name__, True
    if raw_schema is not None:
        title = raw_schema.get("title")
        # OpenAI's structured outputs take a name of letters, digits, _ and - only
        valid_name = isinstance(title, str) and re.fullmatch(r"[A-Za-z0-9_-]{1,64}", title)
        return raw_schema, title if valid_name else "reply", True
    return None, "", bool(overrides.get("json_object"))


def _kind(schema: type[BaseModel] | None) -> str:
    return "completion" if schema is None else "structured"


class JsonEndpoint:
    """JSON over HTTP to one OpenAI-compatible base URL, through `httpx2` connection pools shared by
    every thread of the run (the HTTP library of the `openai` SDK, with its connection limits and
    the proxies of the environment). A failure raises the SDK's own errors (a status error by
    status, a timeout, a connection error), which the retry policy classifies. The SDK's request
    machinery (typed options copied twice per request, header merging, an idempotency key, the
    response cast) cost about as much CPU per call as the rest of the kit: it is not used. A pool
    looks at each of its connections for every request, so with a hundred requests in flight one
    pool cost more CPU than the request itself: the threads share `POOLS` pools, taken in turn.
    """

    POOLS = 16

    def __init__(self, base_url: str, timeout_s: float):
        self.base_url = base_url.rstrip("/")
        self.pools = [
            httpx2.Client(
                verify=tls_context(),
                timeout=timeout_s,
                limits=httpx2.Limits(max_connections=1000, max_keepalive_connections=100),  # the SDK's
                follow_redirects=True,
            )
            for _ in range(self.POOLS)
        ]
        self._turn = itertools.count()
        self._pool_of_thread = threading.local()

    def pool(self) -> httpx2.Client:
        """This thread's pool (the next one in turn on its first request)."""
        local = self._pool_of_thread
        if not hasattr(local, "pool"):
            local.pool = self.pools[next(self._turn) % self.POOLS]
        return local.pool

    def request(self, method: str, path: str, api_key_env: str, body: dict[str, Any] | None = None) -> str:
        """The text of the 2xx response to `method` `path` (with `body` as JSON)."""
        headers = {"Accept": "application/json", **auth_header(api_key_env)}
        content = None
        if body is not None:
            headers["Content-Type"] = "application/json"
            content = json.dumps(body, ensure_ascii=False).encode()
        url = self.base_url + path
        try:
            response = self.pool().request(method, url, content=content, headers=headers)
        except httpx2.TimeoutException as err:
            raise openai.APITimeoutError(request=err.request) from err
        except httpx2.HTTPError as err:
            raise openai.APIConnectionError(request=httpx2.Request(method, url)) from err
        if not response.is_success:
            raise status_error(response)
        return response.text


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS context every pool verifies servers with: the one `httpx2` makes by default (the
    environment's certificate settings included), made once per process, not once per pool (tens
    of milliseconds of CPU each).
    """
    return httpx2.create_ssl_context()


def status_error(response: httpx2.Response) -> openai.APIStatusError:
    """The SDK's error for an error status, with the message and body the SDK gives it (the SDK maps
    statuses to its public error classes in a private client method, so the mapping is stated here:
    the middleware's retry and failure kinds read these classes).
    """
    text = response.text.strip()
    message, body = f"Error code: {response.status_code}", None if not text else text
    try:
        body = json.loads(text)
    except ValueError:
        pass
    else:
        error = body.get("error", body) if isinstance(body, dict) else None
        detail = error.get("message") if isinstance(error, dict) else None
        if isinstance(detail, str) and detail:
            message += f" - {detail}"
    data = body.get("error", body) if isinstance(body, dict) else body
    by_status: dict[int, type[openai.APIStatusError]] = {
        400: openai.BadRequestError,
        401: openai.AuthenticationError,
        403: openai.PermissionDeniedError,
        404: openai.NotFoundError,
        409: openai.ConflictError,
        422: openai.UnprocessableEntityError,
        429: openai.RateLimitError,
    }
    kind = openai.InternalServerError if response.status_code >= 500 else by_status.get(response.status_code)
    return (kind or openai.APIStatusError)(message, response=response, body=data)


class SharedClients:
    """One `JsonEndpoint` per base URL, shared by every thread of the run: its HTTP pool keeps
    connections alive between calls (a client per call paid a new connection and ~30 ms each, and
    capped what was in flight). Retries are the middleware's, so the client makes none. The client
    holds no API key: each request carries the key read from the environment at call time.
    """

    def __init__(self, timeout_s: float):
        self.timeout_s = timeout_s
        self._clients: dict[str, JsonEndpoint] = {}
        self._lock = threading.Lock()

    def get(self, base_url: str) -> JsonEndpoint:
        with self._lock:
            if base_url not in self._clients:
                self._clients[base_url] = JsonEndpoint(base_url, self.timeout_s)
            return self._clients[base_url]


def auth_header(api_key_env: str) -> dict[str, str]:
    """The Authorization header of one request, the key read from the environment now."""
    return {"Authorization": f"Bearer {os.environ.get(api_key_env) or 'not-needed'}"}


def send(call: Call, settings: LLMSettings, clients: SharedClients) -> Reply:
    """The one completion function: a single HTTP request, /completions for a plain-text request
    (it has a `prompt`), /chat/completions otherwise. A 200 response that carries no usable reply
    raises BadReply (`malformed_response` or `empty_reply`), which the retry policy retries.
    """
    request = call.request
    plain_text = "prompt" in request
    path = "/completions" if plain_text else "/chat/completions"
    body = post_json(clients.get(call.base_url), path, request, settings.api_key_env)
    text, finish_reason = choice_text(body, plain_text)
    usage = body.get("usage")
    if isinstance(usage, dict) and all(
        is_token_count(usage.get(k)) for k in ("prompt_tokens", "completion_tokens")
    ):
        prompt_tokens, completion_tokens = int(usage["prompt_tokens"]), int(usage["completion_tokens"])
    else:
        # Servers that omit usage: count with cl100k so cost is estimated rather than missing.
        prompt_text = request.get("prompt") or "\n".join(m["content"] for m in request["messages"])
        prompt_tokens, completion_tokens = count_tokens(prompt_text), count_tokens(text or "")
    if is_empty_reply(request, text, completion_tokens, finish_reason):
        raise BadReply(
            "empty_reply",
            f"the reply has no text ({completion_tokens} completion tokens, finish_reason {finish_reason!r})",
            prompt_tokens,
            completion_tokens,
        )
    served = body.get("model")
    # A 200 reply may quote the request's credentials back (an echoing proxy or model): they are
    # masked here, where replies enter the kit, so no cache row, table, report or printout holds them.
    safe_text = redact(text or "", [settings.api_key_env], url_secrets(call.base_url))
    return Reply(
        safe_text, prompt_tokens, completion_tokens, served_model=served if isinstance(served, str) else ""
    )


def post_json(client: JsonEndpoint, path: str, body: dict[str, Any], api_key_env: str) -> dict[str, Any]:
    """POST `body` to `path` of the client's endpoint and return the JSON object of the 200 response
    (BadReply when it is not one; an error status raises the SDK's status errors, which the retry
    policy classifies). The body goes as built: the SDK's typed `create` walks every request's
    messages and schema again, about as much CPU as the rest of a call, which caps what a run keeps
    in flight. The key is read from the environment for this request only.
    """
    content = client.request("POST", path, api_key_env, body)
    try:
        body = json.loads(content)
    except ValueError:
        raise BadReply("malformed_response", f"the body is not JSON: {content[:120]!r}") from None
    if not isinstance(body, dict):
        raise BadReply("malformed_response", f"the body is not a JSON object: {content[:120]!r}")
    return body


def is_token_count(value: Any) -> TypeGuard[int]:
    """Whether a usage field is a token count (a non-negative int; JSON `true` is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def choice_text(body: dict[str, Any], plain_text: bool) -> tuple[str | None, Any]:
    """The first choice's text (None when the server sent none) and finish reason."""
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise BadReply("malformed_response", f"the body has no choices: {json.dumps(body)[:200]}")
    choice = choices[0]
    if plain_text:
        text = choice.get("text")
    else:
        message = choice.get("message")
        if not isinstance(message, dict):
            raise BadReply("malformed_response", f"the choice has no message: {json.dumps(choice)[:200]}")
        text = message.get("content")
    if text is not None and not isinstance(text, str):
        raise BadReply("malformed_response", f"the reply text is not a string: {json.dumps(choice)[:200]}")
    return text, choice.get("finish_reason")
