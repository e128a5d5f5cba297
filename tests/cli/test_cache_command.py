"""`ragtrial cache export/import`: rows move whole between a SQLite file and PostgreSQL, and again
adds nothing; what cannot be copied is an error naming it, credentials masked.
"""

import numpy as np
import pytest
import yaml

from ragtrial.cli import main
from ragtrial.llm.cache import COLUMNS, ResponseCache


def filled_cache(path) -> ResponseCache:
    """A cache as runs leave it: replies and a kept validation failure, embeddings."""
    cache = ResponseCache(path)
    for i in range(7):
        cache.put_completion(f"c{i}", "m", f"reply {i} ü ✓", 10 + i, i, served_model="m-v2")
    cache.put_completion("bad", "m", '{"town": "Paris"}', 30, 7, status="parse")
    cache.put_embeddings("emb", [(f"e{i}", np.linspace(-1, 1, 384) * i, i + 1) for i in range(1200)])
    return cache


def every_row(location) -> dict[str, list[tuple]]:
    cache = ResponseCache(location)
    return {table: cache.rows(table, limit=10_000) for table in COLUMNS}


def copied(out: str) -> list[str]:
    """The per-table lines of a copy's report."""
    return [line for line in out.splitlines() if line.startswith(("completions:", "embeddings:"))]


def test_rows_go_from_sqlite_to_postgresql_to_a_file_to_sqlite_unchanged(
    postgres_url, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    outputs = tmp_path / "outputs-of-a-study"
    filled_cache(outputs / "cache" / "ragtrial.sqlite").close()  # the project's cache, at its default place
    rows = every_row(outputs / "cache" / "ragtrial.sqlite")

    assert main(["cache", "export", "--to", postgres_url, "--outputs", str(outputs)]) == 0
    out = capsys.readouterr().out
    assert copied(out) == [
        "completions: 8 copied, 0 skipped (the target held their keys)",
        "embeddings: 1,200 copied, 0 skipped (the target held their keys)",
    ]
    assert postgres_url.split("@")[0].split(":")[-1] not in out and "postgresql://***@" in out
    assert main(["cache", "export", "--to", postgres_url, "--outputs", str(outputs)]) == 0  # again: nothing
    assert copied(capsys.readouterr().out) == [
        "completions: 0 copied, 8 skipped (the target held their keys)",
        "embeddings: 0 copied, 1,200 skipped (the target held their keys)",
    ]
    assert main(["cache", "export", "--from", postgres_url, "--to", "shipped.sqlite"]) == 0
    fresh = tmp_path / "elsewhere" / "cache.sqlite"
    assert main(["cache", "import", "shipped.sqlite", "--to", f"sqlite:///{fresh}"]) == 0
    assert main(["cache", "import", "shipped.sqlite", "--to", f"sqlite:///{fresh}"]) == 0
    assert copied(capsys.readouterr().out)[-2:] == [
        "completions: 0 copied, 8 skipped (the target held their keys)",
        "embeddings: 0 copied, 1,200 skipped (the target held their keys)",
    ]
    assert every_row(postgres_url) == every_row(tmp_path / "shipped.sqlite") == every_row(fresh) == rows


def test_import_fills_the_cache_a_batch_names(postgres_url, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    filled_cache(tmp_path / "results.sqlite").close()
    batch = tmp_path / "batch.yaml"
    batch.write_text(
        yaml.safe_dump({"settings": {"cache": {"url": postgres_url}}, "runs": [{"notebook": "x"}]})
    )
    assert main(["cache", "import", "results.sqlite", str(batch)]) == 0
    assert ResponseCache(postgres_url).counts() == {"completions": 8, "embeddings": 1200}


@pytest.mark.fault
def test_what_cannot_be_copied_is_named(postgres_server, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["cache", "import", "missing.sqlite", "--to", "x.sqlite"]) == 2
    assert f"no cache file {tmp_path / 'missing.sqlite'}" in capsys.readouterr().err
    assert main(["cache", "export", "--from", "a.sqlite", "--to", "mysql://bob:pw-9876@db/x"]) == 2
    err = capsys.readouterr().err
    assert "unknown cache URL scheme 'mysql'" in err and "pw-9876" not in err
    filled_cache(tmp_path / "a.sqlite").close()
    assert main(["cache", "export", "--from", "a.sqlite", "--to", "a.sqlite"]) == 2
    assert "the same cache" in capsys.readouterr().err
    wrong = postgres_server.url(password="wrong-pw-1234")
    assert main(["cache", "export", "--from", "a.sqlite", "--to", wrong]) == 1
    err = capsys.readouterr().err
    assert "password authentication failed" in err and "wrong-pw-1234" not in err and "\n" not in err.strip()
