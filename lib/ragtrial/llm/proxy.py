"""The kit's model proxy: an OpenAI-compatible HTTP endpoint on loopback in front of the kit's LLM
layer, for upstream systems (GraphRAG, LightRAG, fast-graphrag) that run in their own processes.

An upstream system is given `proxy.base_url(method, stage)` (`http://127.0.0.1:PORT/<method>/<stage>/v1`)
and any API key. Its chat completions and embeddings then go through `LLM.complete` and the run's
embedder, so they are cached (a rerun makes no live call), recorded in the ledger under that method
and stage, and held to the run: the configured model answers whatever `model` a request names, and
temperature, top_p and seed are the run's; a request's `max_tokens` and `stop` are honoured.
A reply is a function of its request (its `id` a hash of request and reply, `created` 0), so a
system that quotes a reply in a later prompt sends that prompt again on a replay.
`with proxy.bound(method):` attributes the method's calls to the caller's ledger tallies.

Served: `POST .../v1/chat/completions` (also `stream: true`, as server-sent events),
`POST .../v1/embeddings` (float or base64 vectors) and `GET .../v1/models`. What the kit cannot hold
to the run (several choices, tool calls, log-probabilities, token-id inputs) is a 400 that says why.
"""

from __future__ import annotations

import base64
import contextvars
import hashlib
import ipaddress
import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import urlsplit

import numpy as np

from ragtrial.llm.client import LLM, Completion, Messages
from ragtrial.llm.errors import LLMError
from ragtrial.llm.tokens import count_tokens
from ragtrial.redact import redact

NAME = re.compile(r"[A-Za-z0-9_:.-]+")
ROUTE = re.compile(
    r"/(?P<method>[A-Za-z0-9_:.-]+)/(?P<stage>[A-Za-z0-9_:.-]+)/v1/(?P<endpoint>chat/completions|embeddings|models)/?"
)
PATH_SHAPE = (
    "/<method>/<stage>/v1/chat/completions, /<method>/<stage>/v1/embeddings or /<method>/<stage>/v1/models "
    "(method and stage of letters, digits and _ : . -)"
)
# "developer" is OpenAI's newer name for the system turn; the kit's models know only "system"
ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


class TextEmbedder(Protocol):
    """What the proxy needs of an embedder (`ragtrial.llm.embedder.Embedder`, `HashingEmbedder`)."""

    @property
    def model_name(self) -> str: ...

    def embed(self, texts: list[str], *, stage: str, method: str = "") -> np.ndarray: ...


class ProxyError(Exception):
    """A request the proxy refuses, answered with an OpenAI-style error body."""

    def __init__(
        self, status: int, message: str, param: str | None = None, kind: str = "invalid_request_error"
    ):
        super().__init__(message)
        self.status = status
        self.param = param
        self.kind = kind


@dataclass
class Response:
    """One HTTP response: its status, content type and body."""

    status: int
    content_type: str
    body: bytes


def check_name(what: str, value: str) -> str:
    """`value` if it can be a method or stage in a proxy path, else ValueError naming `what`."""
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise ValueError(f"{what} {value!r} cannot be part of a proxy path: use letters, digits and _ : . -")
    return value


class ModelProxy:
    """An OpenAI-compatible server on a free loopback port in front of `llm` and `embedder`
    (a context manager; also `start()` / `stop()`).
    """

    def __init__(self, llm: LLM, embedder: TextEmbedder, host: str = "127.0.0.1"):
        try:
            loopback = ipaddress.IPv4Address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            # it accepts any key, so nothing but this machine may reach it
            raise ValueError(
                f"the model proxy listens on an IPv4 loopback address only (127.0.0.0/8), not {host!r}"
            )
        self.llm = llm
        self.embedder = embedder
        self.host = host
        self._bound: dict[str, contextvars.Context] = {}
        self._lock = threading.Lock()
        self._server: ProxyServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> ModelProxy:
        """Listen on a free port, serving from a daemon thread."""
        if self._server is not None:
            raise RuntimeError("the model proxy is already started")
        self._server = ProxyServer((self.host, 0), ProxyHandler, self.respond)
        # a short poll: stop() waits for the loop to notice (the default half second, per proxy)
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="ragtrial-proxy", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the port (requests in flight finish in their own threads)."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server, self._thread = None, None

    def __enter__(self) -> ModelProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The port the proxy listens on (chosen free at start)."""
        if self._server is None:
            raise RuntimeError("the model proxy is not started: use `with ModelProxy(...)` or start()")
        return int(self._server.server_address[1])

    def base_url(self, method: str, stage: str) -> str:
        """The OpenAI base URL whose calls are recorded under `method` and `stage`."""
        return (
            f"http://{self.host}:{self.port}/{check_name('method', method)}/{check_name('stage', stage)}/v1"
        )

    @contextmanager
    def bound(self, method: str) -> Iterator[None]:
        """While the block runs, `method`'s calls run in a copy of the caller's context as it is at
        entry, so the caller's `ledger.tally()` blocks see them (other threads' and other methods'
        calls stay out). One binding per method at a time: two would not know whose a call is.
        """
        check_name("method", method)
        with self._lock:
            if method in self._bound:
                raise RuntimeError(
                    f"method {method!r} is already bound to another caller; its calls could not be "
                    "attributed to one of them (bind one unit of work per method at a time)"
                )
            self._bound[method] = contextvars.copy_context()
        try:
            yield
        finally:
            with self._lock:
                del self._bound[method]

    def respond(self, verb: str, path: str, raw: bytes) -> Response:
        """The response to one HTTP request (the server's handler threads call this)."""
        try:
            route = ROUTE.fullmatch(urlsplit(path).path)
            if route is None:
                raise ProxyError(404, f"no such path {urlsplit(path).path!r}: the proxy serves {PATH_SHAPE}")
            method, stage, endpoint = route["method"], route["stage"], route["endpoint"]
            wanted = "GET" if endpoint == "models" else "POST"
            if verb != wanted:
                raise ProxyError(405, f"/v1/{endpoint} takes {wanted}, not {verb}")
            if endpoint == "models":
                return json_response(200, self._models())
            body = request_body(raw)
            serve = self._chat if endpoint == "chat/completions" else self._embeddings
            with self._lock:
                captured = self._bound.get(method)
            # a copy per request: one Context cannot be entered by two threads at once
            return captured.copy().run(serve, method, stage, body) if captured else serve(method, stage, body)
        except ProxyError as err:
            return error_response(err.status, str(err), err.kind, err.param)
        except LLMError as err:
            # Not a 5xx: OpenAI-style clients retry those, and the kit has already retried this call
            # as its settings say; another round would repeat the whole retry budget and ledger it
            # again. Clients do not retry a 400. The message is redacted by LLMError.
            return error_response(
                400, f"the kit's model call failed ({err.kind}): {err}", "ragtrial_llm_error"
            )
        except Exception as err:  # a fault of the proxy itself: the client still gets an answer
            message = redact(f"{type(err).__name__}: {err}", [self.llm.settings.api_key_env])
            return error_response(500, message, "ragtrial_proxy_error")

    def _models(self) -> dict[str, Any]:
        models = dict.fromkeys([self.llm.model, self.embedder.model_name])
        return {
            "object": "list",
            "data": [
                {"id": name, "object": "model", "created": 0, "owned_by": "ragtrial"} for name in models
            ],
        }

    def _chat(self, method: str, stage: str, body: dict[str, Any]) -> Response:
        messages = chat_messages(body)
        options = chat_options(body)
        stream = body.get("stream") or False
        stream_options = body.get("stream_options") or {}
        if not isinstance(stream, bool):
            raise ProxyError(400, "`stream` must be true or false", "stream")
        if not isinstance(stream_options, dict):
            raise ProxyError(400, "`stream_options` must be an object", "stream_options")
        done = self.llm.complete(messages, stage=stage, method=method, **options)
        cap = options.get("max_tokens", self.llm.settings.max_tokens)
        reply = chat_completion(done, done.served_model or self.llm.model, cap, body)
        if not stream:
            return json_response(200, reply)
        return Response(
            200, "text/event-stream", event_stream(reply, bool(stream_options.get("include_usage")))
        )

    def _embeddings(self, method: str, stage: str, body: dict[str, Any]) -> Response:
        texts = embedding_inputs(body)
        encoding = body.get("encoding_format") or "float"
        if encoding not in ("float", "base64"):
            raise ProxyError(
                400, f"`encoding_format` {encoding!r}: the proxy sends float or base64", "encoding_format"
            )
        with self.llm.ledger.tally() as tally:
            vectors = self.embedder.embed(texts, stage=stage, method=method)
        width = int(vectors.shape[1])
        if body.get("dimensions") not in (None, width):
            raise ProxyError(
                400,
                f"`dimensions` {body['dimensions']!r}: the run's embedding model gives {width}",
                "dimensions",
            )
        counted = [r.prompt_tokens for r in tally.rows if r.kind == "embedding"]
        # an embedder that keeps no ledger (the hashing one) reports no tokens: count them with cl100k
        tokens = sum(counted) if counted else sum(count_tokens(t) for t in texts)
        return json_response(
            200,
            {
                "object": "list",
                "data": [
                    {"object": "embedding", "index": i, "embedding": encode_vector(v, encoding)}
                    for i, v in enumerate(vectors)
                ],
                "model": self.embedder.model_name,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )


class ProxyServer(ThreadingHTTPServer):
    """The HTTP server of one proxy: every request is answered by `respond(verb, path, body)`."""

    daemon_threads = True  # an idle keep-alive connection of a client never holds up stop()
    # socketserver's default backlog is 5: a system opening dozens of connections at once (one per
    # concurrent call) overflows it, and a connection it drops fails that call on the system's side
    request_queue_size = 1024

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        respond: Callable[[str, str, bytes], Response],
    ):
        super().__init__(address, handler)
        self.respond = respond


class ProxyHandler(BaseHTTPRequestHandler):
    """Reads one request (its body by Content-Length) and writes what the proxy responds."""

    protocol_version = "HTTP/1.1"  # keep-alive: clients pool their connections
    disable_nagle_algorithm = True  # headers and body go in two writes: no delayed-ACK stall between
    server: ProxyServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the ledger records every call; no request line (nor any header) goes to stderr

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:
        self._answer("POST")

    def _answer(self, verb: str) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self.close_connection = True  # the body's end is unknown: this connection cannot go on
            response = error_response(400, "the Content-Length header is not a number")
        else:
            response = self.server.respond(verb, self.path, self.rfile.read(length) if length > 0 else b"")
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        self.wfile.write(response.body)


def request_body(raw: bytes) -> dict[str, Any]:
    """The request's JSON object, or a 400 saying what is wrong with it."""
    try:
        body = json.loads(raw)
    except ValueError as err:
        raise ProxyError(400, f"the request body is not JSON ({err})") from None
    if not isinstance(body, dict):
        raise ProxyError(400, "the request body is not a JSON object")
    return body


def chat_messages(body: dict[str, Any]) -> Messages:
    """The request's turns as the LLM layer takes them: role and text only (text parts joined)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ProxyError(400, "`messages` must be a non-empty list of chat turns", "messages")
    turns = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise ProxyError(400, f"{where} is not an object", where)
        role = message.get("role")
        if role not in ROLES:
            raise ProxyError(
                400,
                f"{where}.role is {role!r}: the proxy takes system, developer, user and assistant turns "
                "(tool turns would need tool calling, which the kit's model does not do)",
                f"{where}.role",
            )
        turns.append({"role": ROLES[role], "content": turn_text(message.get("content"), f"{where}.content")})
    return turns


def turn_text(content: Any, where: str) -> str:
    """A turn's content as text: a string, or a list of text parts joined by newlines."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ProxyError(400, f"{where} must be a string or a list of text parts", where)
    texts = []
    for i, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind != "text" or not isinstance(part.get("text"), str):
            raise ProxyError(
                400,
                f"{where}[{i}] is a {kind or type(part).__name__!r} part: the kit's model takes text only",
                f"{where}[{i}]",
            )
        texts.append(part["text"])
    return "\n".join(texts)


def chat_options(body: dict[str, Any]) -> dict[str, Any]:
    """What `LLM.complete` takes from the request: its reply cap, stop sequences and JSON reply.
    Sampling (temperature, top_p, seed) stays the run's; what the kit cannot hold to the run is a 400.
    """
    if body.get("n") not in (None, 1):
        raise ProxyError(
            400, "`n` must be 1: the kit draws one reply per request, with the run's seed (cached by it)", "n"
        )
    for field in ("tools", "functions", "function_call"):
        if body.get(field):
            raise ProxyError(
                400, f"`{field}`: tool calling is not supported (the kit's model answers text)", field
            )
    if body.get("tool_choice") not in (None, "none"):
        raise ProxyError(
            400, "`tool_choice`: tool calling is not supported (the kit's model answers text)", "tool_choice"
        )
    if body.get("logprobs") or body.get("top_logprobs") is not None:
        raise ProxyError(
            400,
            "`logprobs` are not supported: the kit's cache keeps reply text only, so a replay has none",
            "logprobs",
        )
    options: dict[str, Any] = {}
    cap_field = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    cap = body.get(cap_field)
    if cap is not None:
        if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1:
            raise ProxyError(400, f"`{cap_field}` must be a positive integer, not {cap!r}", cap_field)
        options["max_tokens"] = cap
    stop = body.get("stop")
    stops = [stop] if isinstance(stop, str) else stop
    if stops is not None:
        if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
            raise ProxyError(400, "`stop` must be a string or a list of non-empty strings", "stop")
        if stops:
            options["stop"] = stops
    options.update(json_reply(body.get("response_format")))
    return options


def json_reply(response_format: Any) -> dict[str, Any]:
    """The `LLM.complete` overrides of a response format: none for text, `json_object` for any JSON
    object, `json_schema` for a reply schema (the LLM layer spells it as `llm.json_mode` says).
    """
    if response_format is None:
        return {}
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind == "text":
        return {}
    if kind == "json_object":
        return {"json_object": True}
    if kind == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
        if not isinstance(schema, dict):
            raise ProxyError(
                400, "`response_format.json_schema.schema` must be a JSON schema object", "response_format"
            )
        return {"json_schema": schema}
    raise ProxyError(
        400,
        "`response_format.type` must be text, json_object or json_schema, not " + repr(kind),
        "response_format",
    )


def chat_completion(done: Completion, model: str, cap: int, request: dict[str, Any]) -> dict[str, Any]:
    """The chat.completion body of a kit reply to `request`; `finish_reason` is "length" when the
    reply used its whole token cap (the LLM layer keeps no finish reason, and a cached reply has none).
    Its `id` and `created` are functions of the request and the reply, not of the moment: a system
    may quote the whole reply in its next prompt (instructor's retry prompt quotes a failed one), and
    a replay must send that prompt again as it was.
    """
    identity = json.dumps([request, done.text], sort_keys=True, default=str)
    return {
        "id": f"chatcmpl-{hashlib.sha256(identity.encode()).hexdigest()[:32]}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": done.text},
                "finish_reason": "length" if done.completion_tokens >= cap else "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": done.prompt_tokens,
            "completion_tokens": done.completion_tokens,
            "total_tokens": done.prompt_tokens + done.completion_tokens,
        },
    }


def event_stream(reply: dict[str, Any], include_usage: bool) -> bytes:
    """A chat.completion as OpenAI streams it: one chunk with the whole text, one with the finish
    reason, with `include_usage` a chunk with no choices and the usage, then `[DONE]`.
    """
    head = {key: reply[key] for key in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    choice = reply["choices"][0]
    chunks = [
        head
        | {"choices": [{"index": 0, "delta": choice["message"], "finish_reason": None, "logprobs": None}]},
        head
        | {
            "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"], "logprobs": None}]
        },
    ]
    if include_usage:
        chunks.append(head | {"choices": [], "usage": reply["usage"]})
    return b"".join(f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks) + b"data: [DONE]\n\n"


def embedding_inputs(body: dict[str, Any]) -> list[str]:
    """The texts of an embeddings request (`input`: a string or a list of strings)."""
    inputs = body.get("input")
    if isinstance(inputs, str):
        return [inputs]
    if not isinstance(inputs, list) or not inputs:
        raise ProxyError(400, "`input` must be a string or a non-empty list of strings", "input")
    for i, text in enumerate(inputs):
        if isinstance(text, int | list):
            raise ProxyError(
                400,
                "`input` holds token ids: not supported, the kit's embedder takes text (send strings)",
                "input",
            )
        if not isinstance(text, str):
            raise ProxyError(400, f"input[{i}] is not a string", f"input[{i}]")
    return inputs


def encode_vector(vector: np.ndarray, encoding: str) -> list[float] | str:
    """A vector as floats, or as base64 of its little-endian float32 bytes (what the openai client
    asks for by default and decodes).
    """
    if encoding == "base64":
        return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    return vector.astype(np.float32).tolist()


def json_response(status: int, payload: dict[str, Any]) -> Response:
    """A JSON response with this status."""
    return Response(status, "application/json", json.dumps(payload).encode())


def error_response(
    status: int, message: str, kind: str = "invalid_request_error", param: str | None = None
) -> Response:
    """An OpenAI-style error body (what clients parse into their status errors)."""
    return json_response(status, {"error": {"message": message, "type": kind, "param": param, "code": None}})
