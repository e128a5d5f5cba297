"""Persistent response cache, shared by every run: a SQLite file (WAL mode, safe for several
processes of one machine) or a PostgreSQL database (safe for several machines).

Rows keep the token counts of the call that produced them, so a replay still reports what the
work cost, and the model that served them. A row's `status` is `ok` (a usable reply) or `parse`
(a well-formed structured reply that failed validation, kept so that a rerun re-validates it
instead of paying for the same reply again; see `middleware.with_cache`).
Transient failures (HTTP errors, timeouts, empty or malformed bodies) are never stored.

A third table, `claims`, holds the requests in flight: a live call claims its key with a lease
(`ResponseCache.claim`), so that processes and machines sharing the cache send a request once.
On PostgreSQL, a reply holding a NUL byte is stored escaped (`PostgresStore.stored_text`).

Both backends hold the same tables and run the same statements: a write is an upsert (the last
writer of a key wins, whole rows only, so a `--retry-failures` success replaces a stored failure),
and writers of the same keys at once, in threads or processes or on several machines, neither fail
nor leave more than one row per key. A batch of embeddings is written in one transaction, in key
order (so two writers of overlapping batches take PostgreSQL's row locks in the same order and
never deadlock). Each thread has its own connection.

SQLite: committed rows must not live in the `-wal` file alone (a kernel that is killed never closes
its connections, and a `-wal` file lost or deleted afterwards took them along): every write is
checkpointed into the database file (passively, never waiting for readers), and the cache is
checkpointed fully when it is closed, or at the latest when the process exits.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import socket
import sqlite3
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeVar, cast

import numpy as np

from ragtrial.config.cache import (
    DEFAULT_PASSWORD_ENV,
    POSTGRES_SCHEMES,
    CacheSettings,
    sqlite_file,
    url_problem,
)
from ragtrial.config.paths import output_path
from ragtrial.locks import pid_alive
from ragtrial.redact import MASK, redact, redact_url

# Every column of the two tables, in the order `rows` returns them and `add_rows` takes them.
COLUMNS = {
    "completions": (
        "key",
        "model",
        "text",
        "prompt_tokens",
        "completion_tokens",
        "created_at",
        "status",
        "served_model",
    ),
    "embeddings": ("key", "model", "vector", "n_tokens", "created_at"),
}
# The columns that hold what an endpoint sent (a NUL byte included), stored as `stored_text` says.
_REPLY_COLUMNS = ("text", "served_model")
STATUS_OK = "ok"
STATUS_PARSE_FAILURE = "parse"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS completions (
    key TEXT PRIMARY KEY, model TEXT, text TEXT, prompt_tokens {integer}, completion_tokens {integer},
    created_at {real}, status TEXT NOT NULL DEFAULT 'ok', served_model TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS embeddings (
    key TEXT PRIMARY KEY, model TEXT, vector {blob}, n_tokens {integer}, created_at {real});
CREATE TABLE IF NOT EXISTS claims (key TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_at {real} NOT NULL);
"""
# A claim's lease (`ResponseCache.claim`), renewed while its holder lives: a claimer that died (a kill
# -9, a lost machine) holds its keys at most this long.
CLAIM_LEASE_S = 60.0
# Columns added to the SQLite schema after the first release, with their definitions: a cache file
# written before them gains them in place (its rows and keys unchanged, so it keeps hitting).
_ADDED_COLUMNS = {
    "completions": {
        "status": "TEXT NOT NULL DEFAULT 'ok'",
        "served_model": "TEXT NOT NULL DEFAULT ''",
    }
}
# The mark of a PostgreSQL text stored JSON-escaped (`PostgresStore.stored_text`): a noncharacter,
# which no reply starts with in practice (and one that does is escaped too, so reading is exact).
_ESCAPED = "\ufdd0json:"
# The key of the row `ResponseCache.check_writable` writes and rolls back.
_PROBE_KEY = "ragtrial-check: a write, rolled back"
_KEYS_PER_QUERY = 500  # stay below SQLite's bound-parameter limit
T = TypeVar("T")


class CacheError(RuntimeError):
    """The cache cannot be used (a corrupt, truncated, locked or foreign file; an unreachable
    server, refused credentials, a missing database); names the file or the URL, credentials masked.
    """


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


# ---------------------------------------------------------------- connections, one per thread


def _close_all(connections: list[Any], lock: threading.Lock, close_one: Callable[[Any], None]) -> None:
    with lock:
        for conn in connections:
            close_one(conn)
        connections.clear()


def _close_forgotten(
    conn: Any, connections: list[Any], lock: threading.Lock, close_one: Callable[[Any], None]
) -> None:
    """Close `conn` unless `close` (or a reconnect) already did: it is closed once, whoever comes first."""
    with lock:
        if conn not in connections:
            return
        connections.remove(conn)
    close_one(conn)


class _Held:
    """A thread's connection, held in its thread-local storage: when the thread ends, Python drops its
    thread-locals, and the finalizer made with this object closes the connection.
    """

    def __init__(self, conn: Any):
        self.conn = conn


class ThreadConnections:
    """One connection per thread, opened on first use (again after `close`, or when the server
    dropped it); each is closed when its thread ends, and every one by `close`, on garbage collection
    of `owner`, or at exit. Closing at thread end matters at paper size: the fan-outs start threads
    by the thousand, and a connection kept for each (a SQLite one holds three files) ran a run out of
    file descriptors (issue 36: "Too many open files" in notebook 04 of `paper_rag_vs_graphrag`).
    """

    def __init__(
        self,
        owner: object,
        open_one: Callable[[], Any],
        close_one: Callable[[Any], None],
        usable: Callable[[Any], bool] = lambda conn: True,
    ):
        self._open, self._close_one, self._usable = open_one, close_one, usable
        self._local = threading.local()
        self._all: list[Any] = []
        self._lock = threading.Lock()
        # neither open_one nor close_one may hold `owner`: the finalizer would keep it alive, or a
        # reference cycle would delay it to the next garbage collection
        self._finalizer = weakref.finalize(owner, _close_all, self._all, self._lock, close_one)

    def get(self) -> Any:
        held = getattr(self._local, "held", None)
        if held is not None and self._usable(held.conn):
            return held.conn
        if held is not None:  # dropped by the server: closed, forgotten
            _close_forgotten(held.conn, self._all, self._lock, self._close_one)
        fresh = _Held(self._open())
        with self._lock:
            self._all.append(fresh.conn)
        weakref.finalize(fresh, _close_forgotten, fresh.conn, self._all, self._lock, self._close_one)
        self._local.held = fresh
        return fresh.conn

    def close(self) -> None:
        _close_all(self._all, self._lock, self._close_one)
        self._local = threading.local()


# ---------------------------------------------------------------- the two backends


def _open_sqlite(path: Path) -> sqlite3.Connection:
    # check_same_thread=False only so that close() can close it from another thread;
    # each thread still uses its own connection.
    conn = sqlite3.connect(path, timeout=60, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def _close_sqlite(conn: sqlite3.Connection) -> None:
    """Checkpoint the WAL into the database file, then close."""
    try:
        # without waiting: TRUNCATE waits out the busy timeout (60 s) while any other connection reads or
        # writes, a finalizer's close inside this process's own write included
        conn.execute("PRAGMA busy_timeout=0")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.Error:
        pass  # another process holds a read lock: SQLite checkpoints when the last one closes
    conn.close()


class SQLiteStore:
    """A cache file in WAL mode; each write is checkpointed into the file."""

    mark = "?"

    def __init__(self, path: Path):
        self.path = Path(path)
        self.where = str(self.path)
        # another process can open it (SQLite's ":memory:" is a database of this connection alone)
        self.shared = self.where != ":memory:"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.connections = ThreadConnections(self, functools.partial(_open_sqlite, self.path), _close_sqlite)

    @contextmanager
    def guard(self) -> Iterator[None]:
        """SQLite errors as one line naming the cache file."""
        try:
            yield
        except sqlite3.DatabaseError as err:
            hint = (
                "make the file and its folder writable, or set cache.url to another file"
                if "readonly" in str(err)
                else "if the file is corrupt or truncated, delete it: it only saves model calls; or set "
                "cache.url to another file"
            )
            raise CacheError(f"response cache {self.path}: {err} ({hint})") from None

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self.guard():
            return self.connections.get().execute(sql, params).fetchall()

    def write(self, work: Callable[[Any], T]) -> T:
        """`work(connection)` in one transaction, then checkpointed into the file."""
        with self.guard():
            conn = self.connections.get()
            conn.execute("BEGIN IMMEDIATE")  # take the write lock now (waiting up to the timeout)
            try:
                result = work(conn)
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            # copy the committed WAL frames into the database file, as far as readers allow
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            return result

    @staticmethod
    def stored_text(text: str) -> str:
        return text  # SQLite text holds any string

    @staticmethod
    def read_text(stored: str) -> str:
        return stored

    def create_schema(self) -> None:
        with self.guard():
            self.connections.get().executescript(_SCHEMA.format(integer="INTEGER", real="REAL", blob="BLOB"))
        self.write(_add_missing_columns)  # one process migrates; the others then see the columns


def _add_missing_columns(conn: sqlite3.Connection) -> None:
    for table, columns in _ADDED_COLUMNS.items():
        present = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        for name, definition in columns.items():
            if name not in present:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {definition}")


def _open_postgres(psycopg: Any, url: str, password_env: str) -> Any:
    """A connection in autocommit; the password of `password_env` read now, when it is set (libpq
    also reads $PGPASSWORD itself).
    """
    password = os.environ.get(password_env) if password_env else None
    extra = {"password": password} if password else {}
    return psycopg.connect(url, autocommit=True, connect_timeout=10, application_name="ragtrial", **extra)


def _close_postgres(conn: Any) -> None:
    conn.close()  # also on a connection the server dropped


class PostgresStore:
    """A PostgreSQL database (psycopg 3), in autocommit but for the transactions of batch writes."""

    mark = "%s"
    SCHEMA_LOCK = 0x7261677472696C  # "ragtril"
    shared = True  # other processes and machines open it

    def __init__(self, url: str, password_env: str = DEFAULT_PASSWORD_ENV):
        self.url, self.password_env = url, password_env
        self.where = redact_url(url)
        try:
            import psycopg  # the `postgres` extra; only a PostgreSQL cache needs it
        except ImportError:
            raise CacheError(
                f"response cache {self.where}: the PostgreSQL backend needs psycopg (pip install "
                "'ragtrial[postgres]')"
            ) from None
        self.psycopg = psycopg
        try:
            # conninfo values are typed str | int; a password is a str
            self.url_password = cast(str | None, psycopg.conninfo.conninfo_to_dict(url).get("password"))
        except psycopg.ProgrammingError as err:
            raise CacheError(
                f"response cache {self.where}: not a PostgreSQL URL: {redact_url(str(err))}"
            ) from None
        if self.url_password:  # also when given as ?password=...
            self.where = self.where.replace(self.url_password, MASK)
        opener = functools.partial(
            _open_postgres, psycopg, url, password_env if not self.url_password else ""
        )
        self.connections = ThreadConnections(
            self, opener, _close_postgres, lambda conn: not (conn.closed or conn.broken)
        )

    @contextmanager
    def guard(self) -> Iterator[None]:
        """Psycopg errors as one line naming the URL (credentials masked), with what to check."""
        try:
            yield
        except self.psycopg.Error as err:
            message = " ".join(str(err).split())  # libpq's messages span lines
            if self.url_password:
                message = message.replace(self.url_password, MASK)
            hint = next(
                (hint for symptom, hint in self.hints() if symptom in message),
                "check that the server runs and that cache.url names it",
            )
            raise CacheError(
                f"response cache {self.where}: {redact(message, [self.password_env])} ({hint})"
            ) from None

    def hints(self) -> list[tuple[str, str]]:
        """(what libpq's message says, what to check): connection failures carry no SQLSTATE."""
        credentials = f"check the user and the password, in the URL or ${self.password_env}"
        return [
            ("password authentication failed", credentials),
            ("no password supplied", credentials),
            (
                "does not exist",
                "create the database (createdb -O <user> <name>), or name another in cache.url",
            ),
            ("permission denied", "the user needs a database it may create tables in (createdb -O <user>)"),
        ]

    def _on_a_connection(self, work: Callable[[Any], T], transaction: bool) -> T:
        """`work(connection)`, in a transaction if asked. A connection the server dropped (a restart,
        an idle timeout) is replaced and the work done once more: every statement of the cache is
        idempotent (a read, an upsert of whole rows, an insert of absent keys).
        """
        with self.guard():
            conn = self.connections.get()
            try:
                return _run(work, conn, transaction)
            except self.psycopg.OperationalError:
                if not conn.broken:
                    raise
            return _run(work, self.connections.get(), transaction)

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return self._on_a_connection(lambda conn: conn.execute(sql, params).fetchall(), transaction=False)

    def write(self, work: Callable[[Any], T]) -> T:
        """`work(connection)` in one transaction."""
        return self._on_a_connection(work, transaction=True)

    @staticmethod
    def stored_text(text: str) -> str:
        """`text` as PostgreSQL text can hold it: a NUL byte (a model may send one) cannot be stored
        as such, so a text holding one, or starting with the escape mark, is stored JSON-escaped
        after the mark; every other text as it is (the rows of older caches read unchanged).
        """
        if "\x00" in text or text.startswith(_ESCAPED):
            return _ESCAPED + json.dumps(text)
        return text

    @staticmethod
    def read_text(stored: str) -> str:
        """The text `stored_text` stored."""
        return json.loads(stored[len(_ESCAPED) :]) if stored.startswith(_ESCAPED) else stored

    def create_schema(self) -> None:
        self.write(_create_postgres_schema)


def _run(work: Callable[[Any], T], conn: Any, transaction: bool) -> T:
    if not transaction:
        return work(conn)
    with conn.transaction():
        return work(conn)


def _create_postgres_schema(conn: Any) -> None:
    # under an advisory lock: CREATE TABLE IF NOT EXISTS of two sessions at once may fail on the catalog
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (PostgresStore.SCHEMA_LOCK,))
    for statement in _SCHEMA.format(integer="BIGINT", real="DOUBLE PRECISION", blob="BYTEA").split(";"):
        if statement.strip():
            conn.execute(statement)


def open_store(location: str | Path, password_env: str = DEFAULT_PASSWORD_ENV) -> SQLiteStore | PostgresStore:
    """The backend of a cache location: a file path, or a cache URL (`config.cache`)."""
    text = str(location)
    if "://" not in text:
        return SQLiteStore(Path(location))
    problem = url_problem(text)
    if problem:
        raise CacheError(f"response cache: {problem}")
    file = sqlite_file(text)
    if file is not None:
        return SQLiteStore(Path(file).expanduser())
    assert text.partition("://")[0] in POSTGRES_SCHEMES
    return PostgresStore(text, password_env)


# ---------------------------------------------------------------- the cache


def _insert(table: str, mark: str, on_conflict: str) -> str:
    """Insert a whole row of `table`; `on_conflict`: what a row already holding its key does."""
    columns = COLUMNS[table]
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join([mark] * len(columns))}) "
        f"ON CONFLICT (key) {on_conflict}"
    )


def _upsert(table: str, mark: str) -> str:
    """Insert a whole row, or replace every column of the row of its key."""
    updates = ", ".join(f"{c} = excluded.{c}" for c in COLUMNS[table][1:])
    return _insert(table, mark, f"DO UPDATE SET {updates}")


class CopyCount(NamedTuple):
    copied: int
    skipped: int  # rows whose key the target already held


class ResponseCache:
    """The response cache at `location`: a file path (SQLite), or a cache URL (`sqlite:///<path>`,
    `postgresql://...`; see `ragtrial.config.cache`). Open the cache of a run's settings with
    `open_cache`.
    """

    def __init__(
        self, location: str | Path, password_env: str = DEFAULT_PASSWORD_ENV, lease_s: float = CLAIM_LEASE_S
    ):
        self.store = open_store(location, password_env)
        self.where = self.store.where  # the file, or the URL with its credentials masked
        self.store.create_schema()
        # who holds this instance's claims: unique across processes and machines
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex}"
        self.lease_s = lease_s
        self.held = 0  # claims held now; the renewer runs while there are any
        self.held_lock = threading.Lock()

    def close(self) -> None:
        """Close the connections (SQLite: checkpoint the WAL into the file first); reopened on use."""
        self.store.connections.close()

    def get_completion(self, key: str) -> CachedReply | None:
        rows = self.store.read(
            "SELECT text, prompt_tokens, completion_tokens, status, served_model FROM completions "
            f"WHERE key = {self.store.mark}",
            (key,),
        )
        if not rows:
            return None
        text, prompt_tokens, completion_tokens, status, served_model = rows[0]
        read = self.store.read_text
        return CachedReply(read(text), int(prompt_tokens), int(completion_tokens), status, read(served_model))

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
        stored = self.store.stored_text
        row = (
            key,
            model,
            stored(text),
            prompt_tokens,
            completion_tokens,
            time.time(),
            status,
            stored(served_model),
        )
        sql = _upsert("completions", self.store.mark)
        self.store.write(lambda conn: conn.execute(sql, row))

    def get_embeddings(self, keys: list[str]) -> dict[str, tuple[np.ndarray, int]]:
        found: dict[str, tuple[np.ndarray, int]] = {}
        for start in range(0, len(keys), _KEYS_PER_QUERY):
            part = keys[start : start + _KEYS_PER_QUERY]
            marks = ",".join([self.store.mark] * len(part))
            for key, blob, n_tokens in self.store.read(
                f"SELECT key, vector, n_tokens FROM embeddings WHERE key IN ({marks})", part
            ):
                found[key] = (np.frombuffer(blob, dtype=np.float32), int(n_tokens))
        return found

    def put_embeddings(self, model: str, rows: list[tuple[str, np.ndarray, int]]) -> None:
        now = time.time()
        # one row per key (the last, as one write after another would leave), in key order
        latest = {k: (k, model, np.asarray(v, dtype=np.float32).tobytes(), n, now) for k, v, n in rows}
        sql = _upsert("embeddings", self.store.mark)
        self.store.write(lambda conn: conn.cursor().executemany(sql, sorted(latest.values())))

    def claim(self, key: str) -> bool:
        """Claim the live call of `key` for this instance, unless another live holder has it: the
        cross-process half of request deduplication (several processes or machines on one cache
        send one request; the others wait for its reply, `middleware.with_cache`). A claim is a
        row with a lease, renewed every third of it while held (`release` ends it), so a claimer
        that died stops holding its key when its lease runs out, or at once when it was a process of
        this machine (`_died_here`). Clocks of several machines are assumed to agree to well within
        the lease. A cache no other process can open (in memory) needs no claim: within a process
        `middleware.with_cache` already sends identical requests once.
        """
        if not self.store.shared:
            return True
        mark = self.store.mark
        take = (
            f"INSERT INTO claims (key, holder, expires_at) VALUES ({mark}, {mark}, {mark}) ON CONFLICT (key) "
            f"DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at "
            f"WHERE claims.expires_at < {mark}"
        )

        def holder(conn: Any) -> str:
            rows = conn.execute(f"SELECT holder FROM claims WHERE key = {mark}", (key,)).fetchall()
            return rows[0][0] if rows else ""

        def try_to_take(conn: Any) -> bool:
            now = time.time()
            conn.execute(take, (key, self.holder, now + self.lease_s, now))
            other = holder(conn)
            if other != self.holder and _died_here(other):  # killed on this machine: no need to wait
                conn.execute(f"DELETE FROM claims WHERE key = {mark} AND holder = {mark}", (key, other))
                conn.execute(take, (key, self.holder, now + self.lease_s, now))
            return holder(conn) == self.holder

        taken = self.store.write(try_to_take)
        if taken:
            with self.held_lock:
                self.held += 1
                if self.held == 1:
                    threading.Thread(target=_renew_claims, args=(weakref.ref(self),), daemon=True).start()
        return taken

    def release(self, key: str) -> None:
        """End this instance's claim of `key` (its reply is stored, or its call failed)."""
        if not self.store.shared:
            return
        with self.held_lock:
            self.held -= 1
        mark = self.store.mark
        sql = f"DELETE FROM claims WHERE key = {mark} AND holder = {mark}"
        self.store.write(lambda conn: conn.execute(sql, (key, self.holder)))

    def renew_claims(self) -> None:
        """Extend the lease of every claim this instance holds."""
        mark = self.store.mark
        sql = f"UPDATE claims SET expires_at = {mark} WHERE holder = {mark}"
        self.store.write(lambda conn: conn.execute(sql, (time.time() + self.lease_s, self.holder)))

    def check_writable(self) -> None:
        """Raise `CacheError` unless a row can be written (a read-only or immutable file, a user
        without the right to insert); the row is rolled back, so the cache is left as it was.
        """

        class RolledBack(Exception):
            pass

        row = (_PROBE_KEY, "", "", 0, 0, time.time(), STATUS_OK, "")
        sql = _upsert("completions", self.store.mark)

        def write_then_undo(conn: Any) -> None:
            conn.execute(sql, row)
            raise RolledBack

        try:
            self.store.write(write_then_undo)
        except RolledBack:
            pass

    def counts(self) -> dict[str, int]:
        return {table: self.store.read(f"SELECT COUNT(*) FROM {table}")[0][0] for table in COLUMNS}

    def rows(self, table: str, after: str = "", limit: int = 1000) -> list[tuple]:
        """Up to `limit` whole rows of `table` (columns as `COLUMNS`), in key order, after key `after`."""
        mark = self.store.mark
        rows = self.store.read(
            f"SELECT {', '.join(COLUMNS[table])} FROM {table} WHERE key > {mark} ORDER BY key LIMIT {mark}",
            (after, limit),
        )
        return [self._texts(table, row, self.store.read_text) for row in rows]

    @staticmethod
    def _texts(table: str, row: tuple, convert: Callable[[str], str]) -> tuple:
        """`row` with `convert` applied to its columns that hold a reply's characters."""
        return tuple(
            convert(v) if c in _REPLY_COLUMNS and v is not None else v
            for c, v in zip(COLUMNS[table], row, strict=True)
        )

    def add_rows(self, table: str, rows: list[tuple]) -> int:
        """Insert whole rows of `table` whose keys it does not hold yet; the number inserted."""
        sql = _insert(table, self.store.mark, "DO NOTHING")
        stored = [self._texts(table, row, self.store.stored_text) for row in rows]

        def insert(conn: Any) -> int:
            cursor = conn.cursor()
            cursor.executemany(sql, stored)
            return cursor.rowcount

        return self.store.write(insert)


def _died_here(holder: str) -> bool:
    """Whether a claim's holder was a process of this machine (by host name) that no longer runs:
    a killed run's claim then ends at once rather than with its lease (on a host name two machines
    share, at worst a call is paid twice).
    """
    host, _, rest = holder.partition(":")
    pid = rest.partition(":")[0]
    return host == socket.gethostname() and pid.isdigit() and not pid_alive(int(pid))


def _renew_claims(cache_ref: weakref.ref[ResponseCache]) -> None:
    """Renew the claims of a cache every third of its lease while it holds any (and exists)."""
    while (cache := cache_ref()) is not None and cache.held > 0:
        pause = cache.lease_s / 3
        try:
            cache.renew_claims()
        except CacheError:
            pass  # the claim's own write reports a cache that fails; a lapsed lease costs a duplicate
        del cache  # hold no reference while sleeping
        time.sleep(pause)


def cache_location(
    settings: CacheSettings, root: str | Path | None = None, outputs: str | Path | None = None
) -> str | Path:
    """Where `settings.url` points: a PostgreSQL URL as given; a SQLite file as a settings path
    (`config.paths.output_path`: `outputs/...` under the outputs folder, any other relative path
    under `root`).
    """
    file = sqlite_file(settings.url)
    return settings.url if file is None else output_path(file, root, outputs)


def open_cache(
    settings: CacheSettings, root: str | Path | None = None, outputs: str | Path | None = None
) -> ResponseCache:
    """The cache `settings` name (see `cache_location`)."""
    return ResponseCache(cache_location(settings, root, outputs), settings.password_env)


def copy_rows(source: ResponseCache, target: ResponseCache, page: int = 1000) -> dict[str, CopyCount]:
    """Every row of `source` whose key `target` lacks, copied whole (token counts, status, served
    model and time of the call kept), `page` rows per transaction; per table, the rows copied and
    those skipped because `target` held their key. Copying again copies nothing.
    """
    counts = {}
    for table in COLUMNS:
        copied = skipped = 0
        after = ""
        while batch := source.rows(table, after, page):
            added = target.add_rows(table, batch)
            copied, skipped = copied + added, skipped + len(batch) - added
            after = batch[-1][0]
        counts[table] = CopyCount(copied, skipped)
    return counts
