"""The process boundary between the kit and an upstream system's worker (standard library only: this
module runs in the system's own environment, where the kit is not installed).

A worker is started as `<system python> <workers>/<system>_worker.py`, its working directory the
system's work folder. It reads one JSON object per line on stdin and writes one per line on stdout:

    request:  {"id": 7, "op": "query", ...payload}
    success:  {"id": 7, "ok": true, "result": {...}}
    failure:  {"id": 7, "ok": false, "error": {"type": "ValueError", "message": "...", "traceback": "..."}}

Everything else a library prints goes to stderr (the kit keeps it in the run folder's log): `serve`
moves `sys.stdout` onto stderr before any handler runs, so a stray print cannot break a reply.

Operations (payload fields; every model call goes to `base_url`, the kit's proxy, whose key is a
placeholder: the real key never leaves the kit):
- `hello` {} -> {"system", "version", "python"}
- `index` {"base_url", "model", "embedding_model", "workdir", "documents": [{"id", "title", "text"}]
  | null, "graph": {"chunks", "entities", "relations"} | null, "output": path | null, "options": {}}
  -> {"counts": {name: n}, "seconds": s, "usage": {"calls", "prompt_tokens", "completion_tokens"} | null}
- `query` {"base_url", "model", "embedding_model", "workdir", "question_id", "question", "mode",
  "options": {}} -> {"answer": str, "context": [item], "usage": {...} | null, "seconds": s}
  where an item is {"kind": chunk | entity | relation | community_report | claim, "text": str,
  "id": the system's own id or "", and where known "name" (entity), "source" / "target"
  (relation, entity names), "chunk_ids", "entity_ids", "relation_ids", "community_ids" (system ids)}
- `shutdown` {} -> {} and the worker exits.
"""

from __future__ import annotations

import json
import platform
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

Handler = Callable[[dict[str, Any]], dict[str, Any]]


def hello(system: str, distribution: str) -> Handler:
    """The `hello` handler: the system's name and installed version, and this Python's."""
    from importlib.metadata import version

    return lambda payload: {
        "system": system,
        "version": version(distribution),
        "python": platform.python_version(),
    }


def serve(handlers: dict[str, Handler]) -> None:
    """Answer requests from stdin until `shutdown` or end of input."""
    out = sys.stdout
    sys.stdout = sys.stderr
    for line in sys.stdin:
        if not line.strip():
            continue
        request_id = None
        try:
            request = json.loads(line)
            request_id = request.get("id")
            op = request.get("op")
            if op == "shutdown":
                _write(out, {"id": request_id, "ok": True, "result": {}})
                return
            if op not in handlers:
                raise ValueError(f"unknown op {op!r}; known: {', '.join(sorted(handlers))}, shutdown")
            started = time.perf_counter()
            result = handlers[op](request)
            result.setdefault("seconds", time.perf_counter() - started)
            _write(out, {"id": request_id, "ok": True, "result": result})
        except Exception as err:  # every failure goes back to the kit, which records it
            _write(
                out,
                {
                    "id": request_id,
                    "ok": False,
                    "error": {
                        "type": type(err).__name__,
                        "message": str(err),
                        "traceback": traceback.format_exc(),
                    },
                },
            )


def _write(out: Any, message: dict[str, Any]) -> None:
    out.write(json.dumps(message, default=str) + "\n")
    out.flush()
