"""A scripted OpenAI-compatible HTTP server on 127.0.0.1, for tests only.

Each request pops the next scripted step; when the script is empty the default reply echoes the
last user message. Steps:
  ("status", code)            reply with that HTTP status and an OpenAI-style error body
  ("echo_key", code)          that status, the error body echoing the request's Authorization header
  ("sleep", seconds)          hold the request longer than the client's timeout
  ("drop",)                   close the connection without replying
  ("text", content)           a successful chat completion with this content
  ("body", status, payload)   reply with this JSON payload as it is (malformed 200s, odd bodies)
  ("raw", status, bytes)      reply with these bytes as the body (truncated or non-JSON bodies)
  ("vectors", vectors)        an embeddings reply carrying exactly these vectors (ragged, NaN, ...)
A chat request with "stream": true gets its completion as server-sent events (one content chunk,
then the finishing chunk with the usage, then [DONE]), as OpenAI streams it.
A default reply of None closes the connection without replying, as ("drop",) does.
Every request's path, JSON body (None for a GET) and Authorization header are kept in `requests`.
`echo_authorization` makes every successful completion quote the request's Authorization header and
its bare credential (as an echoing proxy or model would, in a 200 reply).
`required_key` makes it an endpoint that wants that API key: a request without it gets a 401.
`rate_limit = (n, window_s, retry_after)` makes it an endpoint that allows n requests per window:
one above that gets a 429 with that Retry-After (counted in `refused`).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _completion(content: str, prompt_tokens: int, model: str, chat: bool) -> dict[str, Any]:
    choice = {"message": {"role": "assistant", "content": content}} if chat else {"text": content}
    return {
        "id": "cmpl-test",
        "object": "chat.completion" if chat else "text_completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "finish_reason": "stop", **choice}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(content.split()),
            "total_tokens": prompt_tokens + len(content.split()),
        },
    }


def _prompt_text(body: dict[str, Any]) -> list[str]:
    """The request's text: the chat turns' contents, or the one /completions prompt."""
    return [body["prompt"]] if "prompt" in body else [m["content"] for m in body["messages"]]


class ScriptedServer:
    def __init__(self) -> None:
        self.script: deque[tuple] = deque()
        # the step for a request from the request itself ({"path", "body"}), before the script: a
        # rule for every request that holds when several clients send at once
        self.step_for: Callable[[dict[str, Any]], tuple] | None = None
        self.requests: list[dict[str, Any]] = []
        self.default_reply = lambda body: "echo: " + _prompt_text(body)[-1][:40]
        self.rate_limit: tuple[int, float, float] | None = None
        self.required_key: str | None = None
        self.echo_authorization = False
        self.refused = 0
        self._admitted: deque[float] = deque()
        self._rate_lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server.requests.append(
                    {"path": self.path, "body": None, "authorization": self.headers.get("Authorization", "")}
                )
                if not self._key_refused():
                    self._send(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})

            def _key_refused(self) -> bool:
                """A 401 sent, when the server wants a key the request does not carry."""
                if server.required_key is None:
                    return False
                if self.headers.get("Authorization", "") == f"Bearer {server.required_key}":
                    return False
                said = {"message": "Incorrect API key provided", "type": "invalid_request_error"}
                self._send(401, {"error": said})
                return True

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
                authorization = self.headers.get("Authorization", "")
                request = {"path": self.path, "body": body, "authorization": authorization}
                server.requests.append(request)
                if self._key_refused():
                    return
                if server.over_rate_limit():
                    self.send_response(429)
                    self.send_header("Retry-After", str(server.rate_limit[2]))
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"{}")
                    return
                if server.step_for is not None:
                    step = server.step_for(request)
                else:
                    step = server.script.popleft() if server.script else ("default",)
                if step[0] == "drop":
                    self.close_connection = True
                    self.connection.close()
                    return
                if step[0] == "sleep":
                    time.sleep(step[1])
                    step = ("default",)
                if step[0] == "echo_key":  # as endpoints do that quote the key they refused
                    said = f"Incorrect API key provided: {self.headers.get('Authorization', '')}"
                    self._send(step[1], {"error": {"message": said, "type": "invalid_request_error"}})
                    return
                if step[0] == "status":
                    self._send(step[1], {"error": {"message": f"scripted {step[1]}", "type": "scripted"}})
                    return
                if step[0] == "body":
                    self._send(step[1], step[2])
                    return
                if step[0] == "raw":
                    self._send_bytes(step[1], step[2])
                    return
                if step[0] == "vectors":
                    data = [
                        {"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(step[1])
                    ]
                    self._send(200, {"object": "list", "data": data, "model": body.get("model", "scripted")})
                    return
                if self.path.endswith("/embeddings"):
                    inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
                    data = [
                        {"object": "embedding", "index": i, "embedding": [float(len(t)), 1.0, float(i + 1)]}
                        for i, t in enumerate(inputs)
                    ]
                    self._send(
                        200,
                        {
                            "object": "list",
                            "data": data,
                            "model": body["model"],
                            "usage": {"prompt_tokens": 3 * len(inputs), "total_tokens": 3 * len(inputs)},
                        },
                    )
                    return
                content = step[1] if step[0] == "text" else server.default_reply(body)
                if content is None:
                    self.close_connection = True
                    self.connection.close()
                    return
                if server.echo_authorization:
                    sent = self.headers.get("Authorization", "")
                    content = f"{content} (header {sent}; credential {sent.split()[-1]})"
                prompt_tokens = sum(len(text.split()) for text in _prompt_text(body))
                completion = _completion(
                    content,
                    prompt_tokens,
                    body.get("model", "scripted"),
                    chat=self.path.endswith("/chat/completions"),
                )
                if body.get("stream") and self.path.endswith("/chat/completions"):
                    self._stream(completion)
                    return
                self._send(200, completion)

            def _stream(self, completion: dict[str, Any]) -> None:
                chunk = {key: completion[key] for key in ("id", "created", "model")}
                chunk["object"] = "chat.completion.chunk"
                message = completion["choices"][0]["message"]
                events = [
                    {**chunk, "choices": [{"index": 0, "delta": message, "finish_reason": None}]},
                    {
                        **chunk,
                        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                        "usage": completion["usage"],
                    },
                ]
                data = b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _send(self, status: int, payload: Any) -> None:
                self._send_bytes(status, json.dumps(payload).encode())

            def _send_bytes(self, status: int, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def over_rate_limit(self) -> bool:
        """Whether this request is one above `rate_limit` (then counted as refused)."""
        if self.rate_limit is None:
            return False
        n, window, _ = self.rate_limit
        with self._rate_lock:
            now = time.monotonic()
            while self._admitted and now - self._admitted[0] > window:
                self._admitted.popleft()
            if len(self._admitted) >= n:
                self.refused += 1
                return True
            self._admitted.append(now)
            return False

    def __enter__(self) -> ScriptedServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def chat_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["path"].endswith("/chat/completions")]

    def text_requests(self) -> list[dict[str, Any]]:
        """Requests to /completions (prompt as plain text)."""
        return [r for r in self.requests if r["path"].endswith("/v1/completions")]


class InFlight:
    """A reply function wrapped to hold each request `hold_s` and keep, per kind of request
    (`kind_of(body)`: a stage, a schema title), the most requests the server held at once in `most`,
    and in `together` each pair of kinds that were held at the same moment.
    A behaviour check that calls really run concurrently, not a timing.
    """

    def __init__(self, reply: Callable[[dict], str], hold_s: float, kind_of: Callable[[dict], str]):
        self.reply, self.hold_s, self.kind_of = reply, hold_s, kind_of
        self.now: Counter[str] = Counter()
        self.most: Counter[str] = Counter()
        self.together: set[frozenset[str]] = set()
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> str:
        kind = self.kind_of(body)
        with self.lock:
            self.now[kind] += 1
            self.most[kind] = max(self.most[kind], self.now[kind])
            held = [other for other, n in self.now.items() if n and other != kind]
            self.together |= {frozenset((kind, other)) for other in held}
        time.sleep(self.hold_s)
        with self.lock:
            self.now[kind] -= 1
        return self.reply(body)
