"""A latency-simulating OpenAI-compatible HTTP server on 127.0.0.1, for the concurrency benchmark.

Every request waits a fixed `latency_s` (what a remote endpoint costs per call), up to `slots`
requests at once, then gets a reply that depends only on its JSON body, so a run is identical at
any concurrency:
  /v1/chat/completions  with a `response_format` carrying a JSON schema (json_object + schema, or
                        json_schema): a JSON instance of that schema (`schema_instance`), strings
                        drawn from the words of the prompt (names from its capitalized words, so an
                        extraction names things its chunk mentions); otherwise free text
  /v1/completions       free text: words of the prompt, about 3/4 of `max_tokens` at most
  /v1/embeddings        feature-hashing vectors (`HashingEmbedder`), without the latency: the
                        benchmark measures model calls, and the local model would only add CPU time
  GET /v1/models        the one model
Every reply reports `usage`. HTTP/1.1 keep-alive, so a shared client reuses its connections. The
server counts the requests it served and the most it held in flight at once.

Test-side code beside `scripted_server.py`: `make bench` runs every script in bench/, so a helper
module cannot live there, and tests import the modules of tests/ as plain modules.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ragtrial.llm.hashing_embedder import HashingEmbedder

MODEL = "latency-sim"
# Field names whose strings are names of things: drawn from one small pool of the prompt's
# capitalized words, so a relation's source and target name entities of the same reply.
NAME_FIELDS = {"name", "source", "target", "subject", "object", "entity", "title"}
# Template words that are capitalized but name nothing.
NOT_NAMES = {"Output", "Text", "Reply", "Question", "Answer", "Context", "Goal", "Steps", "Example", "JSON"}
NOT_NAMES |= {"The", "This", "That", "These", "Its", "His", "Her", "Their", "In", "On", "At", "After", "When"}
NAME = r"\b[A-Z][a-z]{2,}(?:[ ][A-Z][a-z]{2,})*"  # a run of capitalized words: "Orbital Dynamics"
POOL_SIZE = 6
WORDS_PER_TOKEN = 0.75


class Draw:
    """Deterministic choices for one request: each draw hashes the request body with where in the
    reply it is made, so a reply depends on nothing but its request.
    """

    def __init__(self, body: dict[str, Any]):
        self.seed = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        text = " ".join(prompt_texts(body))
        tail = text[-2000:]  # prompts end with their material (the chunk, the answers); instructions first
        self.words = re.findall(r"[A-Za-z][A-Za-z'-]{2,}", tail) or ["text"]
        runs = (" ".join(w for w in run.split() if w not in NOT_NAMES) for run in re.findall(NAME, tail))
        names = [name for name in dict.fromkeys(runs) if name]
        self.names = names[:POOL_SIZE] or self.words[:POOL_SIZE]

    def number(self, where: str, low: int, high: int) -> int:
        """An integer in [low, high], fixed by the request and `where`."""
        digest = hashlib.sha256(f"{self.seed}/{where}".encode()).digest()
        return low + int.from_bytes(digest[:8], "big") % (high - low + 1)

    def phrase(self, where: str, n_words: int) -> str:
        start = self.number(where, 0, len(self.words) - 1)
        return " ".join(self.words[(start + i) % len(self.words)] for i in range(n_words))


def prompt_texts(body: dict[str, Any]) -> list[str]:
    """The request's text: the chat turns' contents, or the one /completions prompt."""
    if "prompt" in body:
        return [str(body["prompt"])]
    return [str(m.get("content", "")) for m in body.get("messages", [])]


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        path = schema["$ref"].removeprefix("#/").split("/")
        target: Any = root
        for part in path:
            target = target[part]
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def _string(schema: dict[str, Any], where: str, field: str, draw: Draw) -> str:
    low, high = schema.get("minLength", 0), schema.get("maxLength")
    if field in NAME_FIELDS:
        text = draw.names[draw.number(where, 0, len(draw.names) - 1)]
    else:
        text = draw.phrase(where, draw.number(where + "#n", 3, 12))
    if high is not None:
        text = text[:high].rstrip() or text[:high]
    while len(text) < low:
        text += "x"
    return text


def schema_instance(
    schema: dict[str, Any],
    draw: Draw,
    *,
    root: dict[str, Any] | None = None,
    where: str = "",
    field: str = "",
) -> Any:
    """A JSON value satisfying `schema` (the subset pydantic emits: object with properties and
    required, array with min/maxItems, string with min/maxLength, integer and number with bounds,
    enum, const, boolean, null, $ref into $defs, anyOf/oneOf), its content chosen by `draw`.
    Optional properties are filled too: a plausible reply says what it can.
    """
    root = schema if root is None else root
    schema = _resolve(schema, root)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][draw.number(where, 0, len(schema["enum"]) - 1)]
    for combinator in ("anyOf", "oneOf"):
        if combinator in schema:
            options = [o for o in schema[combinator] if _resolve(o, root).get("type") != "null"]
            options = options or schema[combinator]
            chosen = options[draw.number(where + "|", 0, len(options) - 1)]
            return schema_instance(chosen, draw, root=root, where=where, field=field)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        return {
            name: schema_instance(sub, draw, root=root, where=f"{where}.{name}", field=name)
            for name, sub in schema.get("properties", {}).items()
        }
    if kind == "array":
        low = schema.get("minItems", 0)
        high = schema.get("maxItems", low + 3)
        n = draw.number(where + "#len", max(low, min(1, high)), high)
        item = schema.get("items", {})
        return [schema_instance(item, draw, root=root, where=f"{where}[{i}]", field=field) for i in range(n)]
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", -1) + 1)
        high = schema.get("maximum", schema.get("exclusiveMaximum", low + 11) - 1)
        value = draw.number(where, int(low), int(high))
        return value if kind == "integer" else float(value)
    if kind == "boolean":
        return bool(draw.number(where, 0, 1))
    if kind == "null":
        return None
    return _string(schema, where, field, draw)


def reply_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema a request asks its reply to satisfy, if any."""
    response_format = body.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        return response_format.get("json_schema", {}).get("schema")
    return response_format.get("schema")


def free_text(body: dict[str, Any], draw: Draw) -> str:
    """Words of the prompt, between a third and three quarters of `max_tokens` of them."""
    cap = max(1, int(int(body.get("max_tokens") or 256) * WORDS_PER_TOKEN))
    sentence = draw.phrase("text", draw.number("text#n", max(1, cap // 3), cap))
    return sentence[:1].upper() + sentence[1:] + "."


def schema_reply(body: dict[str, Any]) -> str:
    """A JSON instance of whatever schema the request carries (names from the prompt), else its words."""
    draw = Draw(body)
    schema = reply_schema(body)
    return json.dumps(schema_instance(schema, draw)) if schema else free_text(body, draw)


def count_tokens(text: str) -> int:
    return max(1, round(len(text.split()) / WORDS_PER_TOKEN))


class LatencyServer:
    """The server; `with LatencyServer(0.3) as server:` serves on `server.base_url` until the block ends."""

    def __init__(self, latency_s: float = 0.3, slots: int = 256):
        self.latency_s = latency_s
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._slots = threading.BoundedSemaphore(slots)
        self._lock = threading.Lock()
        self._embedder = HashingEmbedder(n_features=64)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: the client's pool reuses the connection
            # headers and body go out in two writes: with Nagle's algorithm the body waits for the
            # client's delayed ACK (~40 ms a request on a kept-alive connection)
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.endswith("/stats"):  # the counts, for a server in another process
                    self._send(200, server.stats())
                    return
                self._send(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if self.path.endswith("/reset"):
                    server.reset_counts()
                    self._send(200, {})
                    return
                if self.path.endswith("/embeddings"):
                    self._send(200, server.embeddings(body))
                    return
                retry_after = server.refusal(body)
                if retry_after is not None:  # over the rate limit: refused before taking a slot
                    self._send(
                        429, {"error": {"message": "rate limited"}}, {"Retry-After": f"{retry_after:g}"}
                    )
                    return
                self._send(200, server.serve(body, chat=self.path.endswith("/chat/completions")))

            def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 1024  # listen backlog: hundreds of connections may open at once

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> LatencyServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def refusal(self, body: dict[str, Any]) -> float | None:
        """The Retry-After (seconds) of a request refused for the rate limit; this server refuses none."""
        return None

    def latency_of(self, body: dict[str, Any], reply: dict[str, Any]) -> float:
        """How long `body`'s reply takes: here the one fixed latency."""
        return self.latency_s

    def serve(self, body: dict[str, Any], chat: bool) -> dict[str, Any]:
        """One completion after its latency, in one of the slots (counted while it holds it)."""
        with self._slots:
            with self._lock:
                self.requests += 1
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                reply = self.completion(body, chat)
                time.sleep(self.latency_of(body, reply))
                return reply
            finally:
                with self._lock:
                    self.in_flight -= 1

    def stats(self) -> dict[str, float]:
        with self._lock:
            return {"requests": self.requests, "max_in_flight": self.max_in_flight}

    def reset_counts(self) -> None:
        with self._lock:
            self.requests = self.max_in_flight = 0

    def completion(self, body: dict[str, Any], chat: bool) -> dict[str, Any]:
        draw = Draw(body)
        schema = reply_schema(body) if chat else None
        content = json.dumps(schema_instance(schema, draw)) if schema else free_text(body, draw)
        prompt_tokens = sum(count_tokens(t) for t in prompt_texts(body))
        completion_tokens = count_tokens(content)
        choice = {"message": {"role": "assistant", "content": content}} if chat else {"text": content}
        return {
            "id": "cmpl-" + draw.seed[:12],
            "object": "chat.completion" if chat else "text_completion",
            "created": 0,
            "model": body.get("model", MODEL),
            "choices": [{"index": 0, "finish_reason": "stop", **choice}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    def embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        vectors = self._embedder.embed([str(t) for t in inputs])
        n_tokens = sum(count_tokens(str(t)) for t in inputs)
        return {
            "object": "list",
            "data": [
                {"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)
            ],
            "model": body.get("model", MODEL),
            "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens},
        }


class LatencyServerProcess:
    """The server in a process of its own, as a real endpoint is: its threads do not compete with
    the kit's for the interpreter lock. Same `base_url`, `reset_counts()` and `max_in_flight`.
    """

    def __init__(self, latency_s: float = 0.3, slots: int = 256):
        self.latency_s, self.slots = latency_s, slots

    def command(self) -> list[str]:
        """The command line that serves and prints its URL."""
        return [sys.executable, __file__, str(self.latency_s), str(self.slots)]

    def __enter__(self) -> LatencyServerProcess:
        self.process = subprocess.Popen(
            self.command(),
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        self.base_url = self.process.stdout.readline().strip()
        if not self.base_url.startswith("http://127.0.0.1:"):
            self.process.kill()
            raise RuntimeError(f"the latency server did not start (it said {self.base_url!r})")
        return self

    def __exit__(self, *exc: Any) -> None:
        self.process.terminate()
        self.process.wait(10)

    def _ask(self, method: str, path: str) -> dict[str, Any]:
        request = urllib.request.Request(self.base_url + path, data=b"{}" if method == "POST" else None)
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def reset_counts(self) -> None:
        self._ask("POST", "/reset")

    def stats(self) -> dict[str, float]:
        return self._ask("GET", "/stats")

    @property
    def max_in_flight(self) -> int:
        return int(self._ask("GET", "/stats")["max_in_flight"])


if __name__ == "__main__":  # python latency_server.py LATENCY_S SLOTS: serve, print the URL, run until killed
    with LatencyServer(float(sys.argv[1]), int(sys.argv[2])) as served:
        print(served.base_url, flush=True)
        threading.Event().wait()
