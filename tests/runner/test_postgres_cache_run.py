"""A batch whose cache is a PostgreSQL database (`--set cache.url=postgresql://...`): the second run
replays every call from it, and the URL's password reaches no output.
"""

import json

import yaml
from conftest import endpoint_settings
from latency_server import schema_reply

from ragtrial.cli import main
from ragtrial.llm.cache import ResponseCache
from ragtrial.llm.ledger import read_ledger


def test_a_second_run_replays_from_the_postgresql_cache_with_no_live_call(
    scripted, postgres_url, tmp_path, monkeypatch
):
    scripted.default_reply = schema_reply
    monkeypatch.chdir(tmp_path)
    batch = tmp_path / "batch.yaml"
    settings = endpoint_settings(scripted.base_url, tmp_path)  # a SQLite cache, which --set replaces
    batch.write_text(yaml.safe_dump({"settings": settings, "runs": [{"notebook": "00_backend_check"}]}))
    command = ["run", str(batch), "--set", f"cache.url={postgres_url}", "--outputs", str(tmp_path / "out")]
    assert main(command) == 0
    paid = len(scripted.requests)
    assert paid >= 3 and ResponseCache(postgres_url).counts()["completions"] >= 2

    assert main([*command, "--force"]) == 0
    assert len(scripted.requests) == paid  # nothing asked twice
    [run_json] = (tmp_path / "out").glob("00_backend_check-*/run.json")
    run = json.loads(run_json.read_text())
    ledger = read_ledger(run_json.parent / "ledger.csv")
    assert run["status"] == "completed" and run["ledger"]["llm_calls_live"] == 0
    assert len(ledger) > 0 and ledger["cached"].astype(str).str.lower().eq("true").all()
    assert not (tmp_path / "cache.sqlite").exists()

    password = postgres_url.split("@")[0].rsplit(":", 1)[1]
    assert run["settings"]["cache"]["url"] == f"postgresql://***@{postgres_url.split('@')[1]}"
    leaks = [p for p in (tmp_path / "out").rglob("*") if p.is_file() and password.encode() in p.read_bytes()]
    assert leaks == []
