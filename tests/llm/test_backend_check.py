"""Notebook 00's backend check: it fails when no model answered, and says what did answer."""

import json
import threading
from types import SimpleNamespace

import pytest
import yaml
from conftest import PROJECT_ROOT, make_llm
from traceable import assert_narrated_from_saved_tables

from ragtrial.config.settings import Settings
from ragtrial.llm.backend_check import (
    BackendCheckError,
    require_an_answer,
    run_backend_check,
)
from ragtrial.llm.cache import ResponseCache
from ragtrial.llm.embedder import Embedder
from ragtrial.llm.ledger import CallRecord, answered_by, answered_by_table, throughput_table
from ragtrial.report.markdown import escape_markdown, table_cell
from ragtrial.report.narrative.backend import throughput_note
from ragtrial.runner.batch import run_batch

GOOD_PAIR = '{"city": "Tokyo", "continent": "Asia"}'


def check_context(llm_url, embeddings_url, tmp_path, **llm):
    """What run_backend_check needs: settings, the ledger and the two model doors."""
    model = make_llm(llm_url, tmp_path, **llm)
    settings = Settings()
    embeddings = settings.embeddings.model_copy(
        update={"backend": "openai_compatible", "base_url": embeddings_url}
    )
    embedder = Embedder(embeddings, ResponseCache(tmp_path / "cache.sqlite"), model.ledger, model.settings)
    return SimpleNamespace(settings=settings, run_id="r", ledger=model.ledger, llm=model, embedder=embedder)


@pytest.mark.fault
def test_an_unreachable_endpoint_fails_the_check_and_nothing_claims_a_replay(scripted, tmp_path):
    ctx = check_context("http://127.0.0.1:9/v1", scripted.base_url, tmp_path, max_retries=0)
    probes = run_backend_check(ctx)
    assert probes.set_index("probe").loc["completion", "failure"].startswith("connection:")
    with pytest.raises(BackendCheckError, match="no model answered"):
        require_an_answer(probes)
    ledger = ctx.ledger.frame()
    assert throughput_note(throughput_table(ledger), answered_by_table(ledger)) == (
        "No live call succeeded, so no throughput was measured in this run."
    )
    assert answered_by(ledger) == "no model answered (2 calls failed: connection)"


@pytest.mark.fault
@pytest.mark.parametrize("step", [("text", ""), ("body", 200, {"choices": []})])
def test_an_empty_or_malformed_completion_is_a_failed_probe(scripted, tmp_path, step):
    scripted.script.extend([step, ("text", GOOD_PAIR)])
    probes = run_backend_check(check_context(scripted.base_url, scripted.base_url, tmp_path, max_retries=0))
    failures = probes.set_index("probe")["failure"]
    assert failures["completion"].split(":")[0] in {"empty_reply", "malformed_response"}
    assert failures["structured"] == "" and failures["embedding"] == ""
    require_an_answer(probes)  # the structured probe was answered: a partial failure, reported


@pytest.mark.fault
def test_a_probe_reports_its_own_call_when_another_thread_records_one_right_after(scripted, tmp_path):
    ctx = check_context(scripted.base_url, scripted.base_url, tmp_path, max_retries=0)
    scripted.script.extend([("text", "Paris is the capital."), ("text", GOOD_PAIR)])
    record = ctx.ledger.record
    foreign = CallRecord(
        "r", "completion", "elsewhere", "", "other", "", 0, True, 999, 999, 0.0, 0, "", "other"
    )

    def record_then_another_threads(row: CallRecord) -> None:
        record(row)
        if row.stage == "backend_check":  # a call of another unit lands before the probe reads
            other = threading.Thread(target=record, args=(foreign,))
            other.start()
            other.join()

    ctx.ledger.record = record_then_another_threads
    probes = run_backend_check(ctx).set_index("probe")
    mine = ctx.ledger.frame().query("stage == 'backend_check'").set_index("method")
    for probe in ("completion", "structured"):
        assert probes.loc[probe, "prompt_tokens"] == mine.loc[probe, "prompt_tokens"] != 999
        assert probes.loc[probe, "served_model"] == "scripted"
    assert probes.loc["embedding", "served_model"] == mine.loc["embedding", "served_model"] != "other"


def notebook_00(tmp_path, llm: dict, force=False):
    path = tmp_path / "batch.yaml"
    settings = {"llm": {"backend": "openai_compatible", "max_retries": 0, **llm}}
    settings["cache"] = {"url": f"sqlite:///{tmp_path / 'cache.sqlite'}"}
    path.write_text(yaml.safe_dump({"settings": settings, "runs": [{"notebook": "00_backend_check"}]}))
    [result] = run_batch(path, root=PROJECT_ROOT, outputs=tmp_path / "out", force=force, log=lambda _: None)
    return result, json.loads((result.run_dir / "run.json").read_text())


def markdown_outputs(run_dir) -> str:
    notebook = json.loads((run_dir / "notebook.ipynb").read_text())
    return "\n".join(
        "".join(out.get("data", {}).get("text/markdown", ""))
        for cell in notebook["cells"]
        for out in cell.get("outputs", [])
    )


@pytest.mark.usefixtures("notebook_kernels")
@pytest.mark.fault
def test_notebook_00_fails_when_no_model_answered(tmp_path):
    result, run = notebook_00(tmp_path, {"base_url": "http://127.0.0.1:9/v1", "model": "my-model"})
    assert result.status == "failed" and run["status"] == "failed"
    assert "BackendCheckError" in result.error and "no model answered" in result.error
    shown = markdown_outputs(result.run_dir)
    assert "replayed from the cache" not in shown and "Answered by `my-model`" not in shown
    assert "no model answered" in shown  # the banner's provenance, refreshed after the failing cell


def served_reply(content: str) -> tuple:
    choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
    return ("body", 200, {"model": "served-by-test", "choices": [choice], "usage": None})


@pytest.mark.usefixtures("notebook_kernels")
@pytest.mark.fault
def test_notebook_00_says_what_answered_and_a_warm_rerun_replays_the_invalid_reply(scripted, tmp_path):
    # the completion answers; the structured probe's reply and its repair are both invalid
    scripted.script.extend([served_reply("Paris."), served_reply("{not json"), served_reply('{"city": "x"}')])
    cold, cold_run = notebook_00(tmp_path, {"base_url": scripted.base_url, "model": "asked-for"})
    assert cold.status == "completed", cold.error
    assert cold_run["ledger"]["failures"] == 1 and cold_run["ledger"]["llm_calls_live"] == 2
    banner = markdown_outputs(cold.run_dir)
    assert f"| answered by | {table_cell('served-by-test (2 calls live)')} |" in banner
    assert f"| LLM requested | {table_cell('asked-for via')}" in banner
    assert_narrated_from_saved_tables(cold.run_dir)
    asked = len(scripted.chat_requests())
    warm, warm_run = notebook_00(tmp_path, {"base_url": scripted.base_url, "model": "asked-for"}, force=True)
    assert warm.status == "completed" and len(scripted.chat_requests()) == asked  # paid nothing
    assert warm_run["ledger"]["failures"] == 1 and warm_run["ledger"]["llm_calls_cached"] == 2
    shown = markdown_outputs(warm.run_dir)
    assert "Every call was replayed from the cache" in shown
    assert escape_markdown("2 calls replayed from the cache (answered by served-by-test)") in shown
    assert_narrated_from_saved_tables(warm.run_dir)
