"""`ragtrial query`: one answer by one method over the index the settings describe (built on first use,
loaded after), its context entries and its cost, against the scripted server on the tiny generated
corpus; the second ask is replayed from the cache, as the ledger of its run folder says.
"""

from __future__ import annotations

import base64
import secrets

import pandas as pd
import pytest
import yaml
from conftest import cited_answer_reply, endpoint_settings

from ragtrial.cli import main
from ragtrial.config.paths import OUTPUTS_ENV

QUESTION = "Where did the founder of the company live?"


@pytest.fixture
def batch(scripted, tmp_path, monkeypatch):
    monkeypatch.delenv(OUTPUTS_ENV, raising=False)  # the command sets it for the run it opens
    scripted.default_reply = cited_answer_reply
    settings = endpoint_settings(
        scripted.base_url,
        tmp_path,
        data={"size": "tiny"},
        index={"graph_source": "nlp", "reports": "none"},
        retrieval={"k": 2},
    )
    path = tmp_path / "batch.yaml"
    runs = [{"notebook": "01_build_index"}, {"notebook": "04_rag_vs_graphrag_qa"}]
    path.write_text(yaml.safe_dump({"settings": settings, "runs": runs}))
    return path


def ask(batch, tmp_path, capsys, *extra: str) -> tuple[int, str]:
    code = main(
        ["query", QUESTION, "--method", "naive_rag", str(batch), "--outputs", str(tmp_path / "out"), *extra]
    )
    return code, capsys.readouterr().out


def test_the_answer_its_context_and_its_cost_then_the_same_from_the_cache(batch, scripted, tmp_path, capsys):
    code, out = ask(batch, tmp_path, capsys)
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == f"question: {QUESTION}"
    assert lines[1] == "method: naive_rag (scripted; answer settings of `qa`)"  # as notebook 04 answers
    assert lines[2:4] == ["answer:", "  Alvor [1]"]
    assert lines[4].startswith("context: 2 entries, ")
    assert lines[5].startswith("  [1] chunk ") and "(vector, score " in lines[5]
    assert "cost: 1 calls (1 live, 0 cached)" in out
    assert f"index: built now into {tmp_path / 'indexes'}" in out
    answer_request = scripted.chat_requests()[-1]["body"]["messages"][-1]["content"]
    assert QUESTION in answer_request
    (folder,) = (tmp_path / "out" / "interactive").iterdir()
    assert folder.name.startswith("query-") and f"run folder: {folder}" in out
    calls = len(scripted.chat_requests())

    code, again = ask(batch, tmp_path, capsys)
    assert code == 0 and "  Alvor [1]" in again
    assert (
        "cost: 1 calls (0 live, 1 cached)" in again and f"index: loaded from {tmp_path / 'indexes'}" in again
    )
    assert len(scripted.chat_requests()) == calls  # nothing paid twice
    ledger = pd.read_csv(folder / "ledger.csv")
    assert list(ledger.loc[ledger["stage"] == "answer", "cached"]) == [False, True]


def test_set_overrides_a_setting_of_the_query(batch, tmp_path, capsys):
    code, out = ask(batch, tmp_path, capsys, "--set", "retrieval.k=1")
    assert code == 0 and "context: 1 entries" in out


def test_without_a_batch_the_code_defaults_and_set_apply(scripted, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(OUTPUTS_ENV, raising=False)
    scripted.default_reply = cited_answer_reply
    sets = [
        f"llm={{backend: openai_compatible, base_url: '{scripted.base_url}', model: scripted}}",
        f"embeddings={{backend: openai_compatible, base_url: '{scripted.base_url}', model: emb}}",
        f"cache.url=sqlite:///{tmp_path / 'cache.sqlite'}",
        f"index.store_path={tmp_path / 'indexes'}",
        "data.size=tiny",
        "index.graph_source=nlp",
        "index.reports=none",
    ]
    args = ["query", QUESTION, "--method", "naive_rag", "--outputs", str(tmp_path / "out")]
    assert main([*args, *(a for s in sets for a in ("--set", s))]) == 0
    assert "  Alvor [1]" in capsys.readouterr().out


def test_an_unknown_method_is_named_with_the_known_ones(batch, tmp_path, capsys):
    code = main(["query", QUESTION, "--method", "nope", str(batch), "--outputs", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "--method nope: not a method of the kit" in err and "naive_rag" in err


def test_a_notebook_the_batch_does_not_run_is_named(batch, tmp_path, capsys):
    args = [
        "query",
        QUESTION,
        "--method",
        "naive_rag",
        str(batch),
        "--notebook",
        "07_pairwise_method_comparison",
    ]
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2 and "--notebook 07_pairwise_method_comparison: no run of that notebook" in err


@pytest.mark.fault
def test_credentials_echoed_in_a_200_reply_reach_neither_the_printout_nor_the_cache(
    scripted, tmp_path, capsys, monkeypatch
):
    """An endpoint quoting the request's key (Bearer) and URL password (Basic) back in a successful
    reply: the printed answer and every file written (cache, ledger, run folder) hold neither.
    """
    monkeypatch.delenv(OUTPUTS_ENV, raising=False)
    scripted.default_reply = cited_answer_reply
    scripted.echo_authorization = True
    key = "sk-echoed-" + secrets.token_hex(12)
    password = "s3cretpass-" + secrets.token_hex(6)
    basic = base64.b64encode(f"scripted-user:{password}".encode()).decode()
    monkeypatch.setenv("RAGTRIAL_KEY_UNDER_TEST", key)
    with_password = scripted.base_url.replace("http://", f"http://scripted-user:{password}@")
    outcomes = {}
    for name, llm in {
        "key": {"api_key_env": "RAGTRIAL_KEY_UNDER_TEST"},
        "password": {"base_url": with_password},
    }.items():
        folder = tmp_path / name
        settings = endpoint_settings(
            scripted.base_url,
            folder,
            llm=llm,
            data={"size": "tiny"},
            index={"graph_source": "nlp", "reports": "none"},
            retrieval={"k": 2},
        )
        folder.mkdir()
        path = folder / "batch.yaml"
        path.write_text(
            yaml.safe_dump({"settings": settings, "runs": [{"notebook": "04_rag_vs_graphrag_qa"}]})
        )
        code, out = ask(path, folder, capsys)
        outcomes[name] = (code, "header Bearer ***" in out or "header Basic ***" in out, out)
    sent = {r["authorization"] for r in scripted.chat_requests()}
    assert f"Bearer {key}" in sent and f"Basic {basic}" in sent  # both credentials went out
    assert {name: outcome[:2] for name, outcome in outcomes.items()} == {
        "key": (0, True),
        "password": (0, True),
    }, outcomes
    printed = "\n".join(outcome[2] for outcome in outcomes.values())
    assert [s for s in (key, password, basic) if s in printed] == []
    held = {
        str(p.relative_to(tmp_path))
        for p in tmp_path.rglob("*")
        if p.is_file()
        and p.name != "batch.yaml"
        and any(s.encode() in p.read_bytes() for s in (key, password, basic))
    }
    assert held == set()
    assert any((tmp_path / name / "cache.sqlite").is_file() for name in outcomes)


@pytest.mark.fault
@pytest.mark.parametrize("question", ["", "  \t\n "])
def test_an_empty_question_is_refused_in_one_line_without_a_call(batch, scripted, tmp_path, capsys, question):
    code = main(["query", question, "--method", "naive_rag", str(batch), "--outputs", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert code != 0 and "the question is empty" in captured.err
    assert len(captured.err.strip().splitlines()) == 1 and "Traceback" not in captured.err
    assert scripted.requests == []


@pytest.mark.fault
def test_terminal_control_sequences_in_a_reply_are_printed_escaped(batch, scripted, tmp_path, capsys):
    hostile = "Alvor [1]\x1b]0;pwned\x07\x1b[2J\x9b31m done"
    scripted.default_reply = lambda body: hostile
    code, out = ask(batch, tmp_path, capsys)
    assert code == 0, out
    assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
    assert "  Alvor [1]\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m done" in out
