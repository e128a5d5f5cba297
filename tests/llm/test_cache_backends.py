"""The two cache backends as several processes and machines use them: writers of the same keys at
once in separate processes, a dropped server connection, and the errors of an unusable cache URL.
"""

import multiprocessing

import cache_writers
import psycopg
import pytest
from postgres_server import free_port

from ragtrial.config.base import ParamsError
from ragtrial.config.settings import validate_settings
from ragtrial.llm.cache import CacheError, ResponseCache, copy_rows


@pytest.mark.fault
def test_two_processes_writing_the_same_keys_leave_one_whole_row_per_key(cache_location):
    location = str(cache_location)  # the processes race to create the schema, too
    spawn = multiprocessing.get_context("spawn")  # separate interpreters, nothing inherited
    start, writers_done, results = spawn.Barrier(3), spawn.Event(), spawn.Queue()
    writers = [spawn.Process(target=cache_writers.write, args=(location, w, start)) for w in (0, 1)]
    reader = spawn.Process(target=cache_writers.read, args=(location, start, writers_done, results))
    for process in [*writers, reader]:
        process.start()
    for process in writers:
        process.join(180)
    writers_done.set()
    seen, torn = results.get(timeout=180)
    reader.join(60)
    assert [p.exitcode for p in [*writers, reader]] == [0, 0, 0]
    assert torn == [] and seen > 0
    cache = ResponseCache(location)
    keys = cache_writers.KEYS
    assert cache.counts() == {"completions": len(keys), "embeddings": len(keys)}
    for key in keys:
        assert cache.get_completion(key) in {cache_writers.written_reply(key, w) for w in (0, 1)}


def test_a_stored_failure_is_replaced_by_a_later_success_whole(cache_location):
    cache = ResponseCache(cache_location)
    cache.put_completion("k", "m", '{"town": "Paris"}', 30, 7, status="parse", served_model="m-v1")
    cache.put_completion("k", "m", '{"city": "Paris"}', 12, 3, served_model="m-v2")
    assert cache.get_completion("k") == ResponseCache(cache_location).get_completion("k")
    assert cache.get_completion("k").status == "ok" and cache.get_completion("k").served_model == "m-v2"
    assert cache.counts()["completions"] == 1


def test_a_connection_the_server_dropped_is_replaced(postgres_url):
    cache = ResponseCache(postgres_url)
    cache.put_completion("k", "m", "text", 1, 1)
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'ragtrial' AND pid <> pg_backend_pid()"
        )
    assert cache.get_completion("k").text == "text"


def test_the_password_may_come_from_the_environment_only(postgres_server, monkeypatch):
    url = postgres_server.create_database()
    bare = url.replace(f":{postgres_server.password}@", "@")
    monkeypatch.setenv("RAGTRIAL_TEST_CACHE_PASSWORD", postgres_server.password)
    cache = ResponseCache(bare, password_env="RAGTRIAL_TEST_CACHE_PASSWORD")
    cache.put_completion("k", "m", "text", 1, 1)
    assert cache.get_completion("k").text == "text" and postgres_server.password not in cache.where


def unusable_urls(server) -> dict[str, tuple[str, str]]:
    """Per case: a URL that cannot serve as a cache, and what its error must say."""
    return {
        "dead port": (
            f"postgresql://postgres:{server.password}@127.0.0.1:{free_port()}/ragtrial",
            "Connection refused",
        ),
        "wrong password": (server.url(password="not-the-password"), "password authentication failed"),
        "missing database": (server.url("no_such_database"), 'database "no_such_database" does not exist'),
    }


@pytest.mark.fault
@pytest.mark.parametrize("case", ["dead port", "wrong password", "missing database"])
def test_an_unusable_postgresql_cache_is_one_line_naming_the_url_without_its_password(postgres_server, case):
    url, symptom = unusable_urls(postgres_server)[case]
    with pytest.raises(CacheError) as err:
        ResponseCache(url)
    message = str(err.value)
    host = url.rsplit("@", 1)[1]
    assert f"response cache postgresql://***@{host}: " in message and symptom in message, message
    assert "\n" not in message and err.value.__cause__ is None
    assert postgres_server.password not in message and "not-the-password" not in message


@pytest.mark.fault
def test_an_unknown_scheme_or_a_bare_path_is_refused_naming_the_key_and_the_fix():
    with pytest.raises(CacheError, match=r"unknown cache URL scheme 'mysql'") as err:
        ResponseCache("mysql://alice:pw-secret@db.example.org/cache")
    assert "pw-secret" not in str(err.value)
    with pytest.raises(ParamsError, match=r"key 'cache\.url'.*unknown cache URL scheme 'mysql'") as err:
        validate_settings({"cache": {"url": "mysql://alice:pw-secret@db.example.org/cache"}}, "batch.yaml")
    assert "pw-secret" not in str(err.value)
    with pytest.raises(ParamsError, match=r"write sqlite:///outputs/cache/x\.sqlite for a SQLite file"):
        validate_settings({"cache": {"url": "outputs/cache/x.sqlite"}}, "batch.yaml")
    with pytest.raises(ParamsError, match=r"key 'cache_path' moved to 'cache\.url'"):
        validate_settings({"cache_path": "outputs/cache/x.sqlite"}, "batch.yaml")


@pytest.mark.fault
def test_reply_text_holding_nul_or_the_escape_mark_round_trips_and_copies_whole(cache_location, tmp_path):
    texts = ["before\x00after", '\ufdd0json:"looks escaped"', "plain", "\x00"]
    cache = ResponseCache(cache_location)
    for i, text in enumerate(texts):
        cache.put_completion(f"k{i}", "m", text, 1, 1, served_model=f"m\x00{i}")
    assert [cache.get_completion(f"k{i}").text for i in range(len(texts))] == texts
    assert cache.get_completion("k0").served_model == "m\x000"
    copy = ResponseCache(tmp_path / "copy.sqlite")
    copy_rows(cache, copy)
    assert [copy.get_completion(f"k{i}").text for i in range(len(texts))] == texts
    back = ResponseCache(tmp_path / "back.sqlite")
    copy_rows(copy, back)
    assert back.rows("completions") == copy.rows("completions") == cache.rows("completions")
