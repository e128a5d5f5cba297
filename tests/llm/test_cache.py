"""The SQLite response cache: schema migration, durability of committed rows, unusable files."""

import gc
import os
import sqlite3
import subprocess
import sys
import threading
import time

import pytest
from conftest import make_llm

from ragtrial.llm.cache import CachedReply, CacheError, ResponseCache

OLD_SCHEMA = """
CREATE TABLE completions (
    key TEXT PRIMARY KEY, model TEXT, text TEXT, prompt_tokens INTEGER, completion_tokens INTEGER,
    created_at REAL);
CREATE TABLE embeddings (key TEXT PRIMARY KEY, model TEXT, vector BLOB, n_tokens INTEGER, created_at REAL);
"""


@pytest.mark.fault
def test_a_cache_written_before_the_status_column_keeps_its_rows_and_keys(scripted, tmp_path):
    llm = make_llm(scripted.base_url, tmp_path)
    llm.complete("hello", stage="t")
    llm.cache.close()
    path = tmp_path / "cache.sqlite"
    with sqlite3.connect(path) as conn:  # rebuild the file in the first release's schema, same rows
        rows = conn.execute(
            "SELECT key, model, text, prompt_tokens, completion_tokens, created_at FROM completions"
        )
        rows = rows.fetchall()
        conn.executescript("DROP TABLE completions; DROP TABLE embeddings;" + OLD_SCHEMA)
        conn.executemany("INSERT INTO completions VALUES (?,?,?,?,?,?)", rows)
    replay = make_llm(scripted.base_url, tmp_path)
    assert replay.complete("hello", stage="t").cached and len(scripted.chat_requests()) == 1
    assert replay.cache.get_completion(rows[0][0]) == CachedReply(
        rows[0][2], rows[0][3], rows[0][4], "ok", ""
    )


WRITER = """
import os
import sys
from ragtrial.llm.cache import ResponseCache
cache = ResponseCache(sys.argv[1])
for i in range(7):
    cache.put_completion(f"k{i}", "m", f"reply {i}", 1, 1)
os._exit(0)  # as a killed kernel ends: no connection is closed, no exit handler runs
"""


@pytest.mark.fault
def test_committed_rows_survive_the_loss_of_the_wal_file_after_a_killed_process(tmp_path):
    path = tmp_path / "c.sqlite"
    subprocess.run([sys.executable, "-c", WRITER, str(path)], check=True, timeout=60)
    wal = path.with_name(path.name + "-wal")
    wal.unlink(missing_ok=True)  # what a copy of the .sqlite file alone, or a cleanup, loses
    assert ResponseCache(path).counts()["completions"] == 7


@pytest.mark.fault
def test_close_checkpoints_and_the_cache_reopens_on_use(cache_location, tmp_path):
    cache = ResponseCache(cache_location)
    cache.put_completion("k", "m", "text", 1, 1)
    cache.close()
    (tmp_path / "cache.sqlite-wal").unlink(missing_ok=True)  # SQLite: the file alone holds the row
    assert cache.get_completion("k").text == "text"


def test_a_threads_connection_is_closed_when_the_thread_ends(cache_location):
    """The fan-outs start threads by the thousand at paper size, each opening its own connection;
    one kept open per finished thread ran notebook 04 out of file descriptors (issue 36).
    """

    def open_files() -> int:
        return len(os.listdir("/proc/self/fd"))

    cache = ResponseCache(cache_location)
    cache.put_completion("k", "m", "text", 1, 1)  # this thread's connection, open throughout
    before = open_files()
    for _ in range(40):
        thread = threading.Thread(target=cache.get_completion, args=("k",))
        thread.start()
        thread.join()
    gc.collect()
    assert open_files() - before < 5  # 40 connections kept would hold 40 to 120 files
    assert cache.get_completion("k").text == "text"  # the cache and this thread's connection go on
    cache.close()


def test_close_does_not_wait_for_another_connections_read(tmp_path):
    """A reader on an older snapshot (another process, or a cache of this one closed by the garbage
    collector inside a write) once held close() for SQLite's 60 s busy timeout.
    """
    path = tmp_path / "cache.sqlite"
    cache = ResponseCache(path)
    cache.put_completion("a", "m", "text", 1, 1)
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM completions").fetchall()
    cache.put_completion("b", "m", "text", 1, 1)
    started = time.monotonic()
    cache.close()
    assert time.monotonic() - started < 5
    reader.execute("COMMIT")
    reader.close()
    assert ResponseCache(path).get_completion("b").text == "text"


@pytest.mark.fault
@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_an_unusable_cache_file_is_one_line_naming_the_file(tmp_path, damage):
    path = tmp_path / "c.sqlite"
    if damage == "garbage":
        path.write_bytes(b"this is not a database, " * 200)
    else:
        cache = ResponseCache(path)
        cache.put_embeddings("m", [(f"k{i}", [float(i)] * 384, 3) for i in range(200)])
        cache.close()
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 3])
    with pytest.raises(CacheError) as err:
        ResponseCache(path).get_embeddings([f"k{i}" for i in range(200)])
    message = str(err.value)
    assert str(path) in message and "\n" not in message and err.value.__cause__ is None
