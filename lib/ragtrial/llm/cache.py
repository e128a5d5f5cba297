"""Persistent response cache: one SQLite file in WAL mode, safe for several processes at once.

Rows keep the token counts of the call that produced them, so a replay still reports what the
work cost. Only successful, validated results are ever stored.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

_SCHEMA = """
CREATE TABLE IF NOT EXISTS completions (
    key TEXT PRIMARY KEY, model TEXT, text TEXT, prompt_tokens INTEGER, completion_tokens INTEGER,
    created_at REAL);
CREATE TABLE IF NOT EXISTS embeddings (
    key TEXT PRIMARY KEY, model TEXT, vector BLOB, n_tokens INTEGER, created_at REAL);
"""


def cache_key(payload: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of everything that changes the answer."""
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ResponseCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._connect() as conn:
            conn.executescript(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def get_completion(self, key: str) -> tuple[str, int, int] | None:
        row = (
            self._connect()
            .execute("SELECT text, prompt_tokens, completion_tokens FROM completions WHERE key=?", (key,))
            .fetchone()
        )
        return None if row is None else (row[0], int(row[1]), int(row[2]))

    def put_completion(
        self, key: str, model: str, text: str, prompt_tokens: int, completion_tokens: int
    ) -> None:
        self._connect().execute(
            "INSERT OR REPLACE INTO completions VALUES (?,?,?,?,?,?)",
            (key, model, text, prompt_tokens, completion_tokens, time.time()),
        )

    def get_embeddings(self, keys: list[str]) -> dict[str, tuple[np.ndarray, int]]:
        found: dict[str, tuple[np.ndarray, int]] = {}
        conn = self._connect()
        for start in range(0, len(keys), 500):  # stay below SQLite's bound-parameter limit
            part = keys[start : start + 500]
            marks = ",".join("?" * len(part))
            for key, blob, n_tokens in conn.execute(
                f"SELECT key, vector, n_tokens FROM embeddings WHERE key IN ({marks})", part
            ):
                found[key] = (np.frombuffer(blob, dtype=np.float32), int(n_tokens))
        return found

    def put_embeddings(self, model: str, rows: list[tuple[str, np.ndarray, int]]) -> None:
        now = time.time()
        conn = self._connect()
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT OR REPLACE INTO embeddings VALUES (?,?,?,?,?)",
            [(k, model, np.asarray(v, dtype=np.float32).tobytes(), n, now) for k, v, n in rows],
        )
        conn.execute("COMMIT")

    def counts(self) -> dict[str, int]:
        conn = self._connect()
        return {
            t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("completions", "embeddings")
        }
