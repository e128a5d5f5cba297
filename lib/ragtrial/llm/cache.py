"""Persistent response cache: one SQLite file in WAL mode, safe for several processes at once.

Rows keep the token counts of the call that produced them, so a replay still reports what the
work cost, and the model that served them. A row's `status` is `ok` (a usable reply) or `parse`
(a well-formed structured reply that failed validation, kept so that a rerun re-validates it
instead of paying for the same reply again; see `middleware.with_cache`).
Transient failures (HTTP errors, timeouts, empty or malformed bodies) are never stored.

Committed rows must not live in the `-wal` file alone (a kernel that is killed never closes its
connections, and a `-wal` file lost or deleted afterwards took them along): every write is
checkpointed into the database file (passively, never waiting for readers), and the cache is
checkpointed fully when it is closed, or at the latest when the process exits.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

_SCHEMA = """
CREATE TABLE IF NOT EXISTS completions (
    key TEXT PRIMARY KEY, model TEXT, text TEXT, prompt_tokens INTEGER, completion_tokens INTEGER,
    created_at REAL, status TEXT NOT NULL DEFAULT 'ok', served_model TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS embeddings (
    key TEXT PRIMARY KEY, model TEXT, vector BLOB, n_tokens INTEGER, created_at REAL);
"""
# Columns added after the first release, with their definitions: a cache file written before them
# gains them in place (its rows and keys unchanged, so it keeps hitting).
_ADDED_COLUMNS = {
    "completions": {
        "status": "TEXT NOT NULL DEFAULT 'ok'",
        "served_model": "TEXT NOT NULL DEFAULT ''",
    }
}
STATUS_OK = "ok"
STATUS_PARSE_FAILURE = "parse"


class CacheError(RuntimeError):
    """The cache file cannot be used (corrupt, truncated, not SQLite, locked); names the file."""


@dataclass(frozen=True)
class CachedReply:
    text: str
    prompt_tokens: int
    completion_tokens: int
    status: str  # STATUS_OK or STATUS_PARSE_FAILURE
    served_model: str  # the `model` the endpoint reported; "" when it was not recorded


def cache_key(payload: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of everything that changes the answer."""
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _checkpoint(conn: sqlite3.Connection) -> None:
    """Copy the committed WAL frames into the database file, as far as readers allow."""
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")


def _close_connections(connections: list[sqlite3.Connection], lock: threading.Lock) -> None:
    """Checkpoint the WAL into the database file and close every connection."""
    with lock:
        for conn in connections:
            try:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error:
                pass  # another process holds a read lock: SQLite checkpoints when the last one closes
            conn.close()
        connections.clear()


class ResponseCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        # Runs on close() or garbage collection, and at interpreter exit for a cache still open.
        self._finalizer = weakref.finalize(self, _close_connections, self._connections, self._lock)
        with self._guard():
            conn = self._connect()
            conn.executescript(_SCHEMA)
            self._migrate(conn)

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """SQLite errors as one line naming the cache file."""
        try:
            yield
        except sqlite3.DatabaseError as err:
            raise CacheError(
                f"response cache {self.path}: {err} (if the file is corrupt or truncated, delete it: it "
                "only saves model calls; or set cache_path to another file)"
            ) from None

    def _connect(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            # check_same_thread=False only so that close() can close it from another thread;
            # each thread still uses its own connection.
            conn = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
            with self._lock:
                self._connections.append(conn)
            self._local.conn = conn
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")  # one process migrates; the others then see the columns
        try:
            for table, columns in _ADDED_COLUMNS.items():
                present = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
                for name, definition in columns.items():
                    if name not in present:
                        conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {definition}")
        finally:
            conn.execute("COMMIT")

    def close(self) -> None:
        """Checkpoint the WAL into the database file and close the connections (reopened on use)."""
        _close_connections(self._connections, self._lock)
        self._local = threading.local()

    def get_completion(self, key: str) -> CachedReply | None:
        with self._guard():
            row = (
                self._connect()
                .execute(
                    "SELECT text, prompt_tokens, completion_tokens, status, served_model "
                    "FROM completions WHERE key=?",
                    (key,),
                )
                .fetchone()
            )
        return None if row is None else CachedReply(row[0], int(row[1]), int(row[2]), row[3], row[4])

    def put_completion(
        self,
        key: str,
        model: str,
        text: str,
        prompt_tokens: int,
        completion_tokens: int,
        status: str = STATUS_OK,
        served_model: str = "",
    ) -> None:
        with self._guard():
            conn = self._connect()
            conn.execute(
                "INSERT OR REPLACE INTO completions (key, model, text, prompt_tokens, completion_tokens, "
                "created_at, status, served_model) VALUES (?,?,?,?,?,?,?,?)",
                (key, model, text, prompt_tokens, completion_tokens, time.time(), status, served_model),
            )
            _checkpoint(conn)

    def get_embeddings(self, keys: list[str]) -> dict[str, tuple[np.ndarray, int]]:
        found: dict[str, tuple[np.ndarray, int]] = {}
        with self._guard():
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
        with self._guard():
            conn = self._connect()
            conn.execute("BEGIN")
            conn.executemany(
                "INSERT OR REPLACE INTO embeddings VALUES (?,?,?,?,?)",
                [(k, model, np.asarray(v, dtype=np.float32).tobytes(), n, now) for k, v, n in rows],
            )
            conn.execute("COMMIT")
            _checkpoint(conn)

    def counts(self) -> dict[str, int]:
        with self._guard():
            conn = self._connect()
            return {
                t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                for t in ("completions", "embeddings")
            }
