"""The provenance every report opens with: what was asked for, and what actually answered."""

import os

import pytest

from ragtrial import cli
from ragtrial.llm.middleware import RETRY_FAILURES_ENV
from ragtrial.runner import batch
from ragtrial.runner.context import open_run


@pytest.mark.fault
def test_provenance_names_the_model_that_answered_not_only_the_one_asked_for(scripted, tmp_path):
    scripted.script.append(
        ("body", 200, {"model": "served-v2", "choices": [{"message": {"content": "Paris"}}]})
    )
    settings = {
        "llm": {"backend": "openai_compatible", "base_url": scripted.base_url, "model": "asked-for"},
        "cache": {"url": f"sqlite:///{tmp_path / 'cache.sqlite'}"},
    }
    ctx = open_run(settings, tmp_path / "run", notebook="00_backend_check")
    rows = lambda: dict(ctx.provenance().itertuples(index=False))  # noqa: E731
    assert rows()["answered by"] == "no model call yet in this run"
    ctx.llm.complete("capital of France?", stage="t")
    assert rows()["LLM requested"].startswith("asked-for via http://127.0.0.1")
    assert rows()["answered by"] == "served-v2 (1 call live)"


@pytest.mark.fault
def test_retry_failures_reaches_the_model_calls_without_changing_the_run(monkeypatch, tmp_path):
    seen = {}

    def fake_run_batch(batch_path, overrides, **kwargs):
        seen["env"], seen["kwargs"] = os.environ.get(RETRY_FAILURES_ENV), kwargs
        return []

    monkeypatch.setattr(batch, "run_batch", fake_run_batch)
    monkeypatch.setattr(cli.signal, "signal", lambda *args: None)
    monkeypatch.setenv(RETRY_FAILURES_ENV, "0")  # restored when the test ends
    assert cli.main(["run", "params/default.yaml", "--retry-failures", "--outputs", str(tmp_path)]) == 0
    assert (
        seen["env"] not in ("", "0", None) and "retry_failures" not in seen["kwargs"]
    )  # not a setting: same run ids


def test_provenance_states_the_requests_in_flight_and_the_rate_limits(tmp_path):
    embedded = open_run({"llm": {"concurrency": 12}}, tmp_path / "a", notebook="00_backend_check")
    assert dict(embedded.provenance().itertuples(index=False))["requests in flight"] == (
        "8 (llm.concurrency 12; the embedded server's slots)"
    )
    by_default = open_run({}, tmp_path / "c", notebook="00_backend_check")
    assert dict(by_default.provenance().itertuples(index=False))["requests in flight"] == (
        "8 (llm.concurrency null: the embedded server's slots)"
    )
    endpoint = {
        "backend": "openai_compatible",
        "base_url": "http://127.0.0.1:9/v1",
        "concurrency": 32,
        "requests_per_minute": 500,
        "tokens_per_minute": 200000,
    }
    ctx = open_run({"llm": endpoint}, tmp_path / "b", notebook="00_backend_check")
    assert dict(ctx.provenance().itertuples(index=False))["requests in flight"] == (
        "32 (llm.concurrency); at most 500 requests and 200,000 tokens a minute"
    )
