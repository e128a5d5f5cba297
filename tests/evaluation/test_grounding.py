"""Answer grounding (ragtrial.evaluation.grounding): the LLM-free entity check on hand-built answers,
the model check through the scripted server (a supported, a partially supported, an unsupported and an
unparseable check), the statuses that are counted and never scored, and the planner.
"""

import json

import pandas as pd
import pytest
from conftest import make_llm

from ragtrial.config.settings import Settings
from ragtrial.evaluation.answer_metrics import cited_entries, strip_citations
from ragtrial.evaluation.grounding import (
    CHECK_STAGE,
    CLAIMS_STAGE,
    answer_grounding,
    entity_claims,
    entity_grounding,
    model_grounding,
    planned_grounding,
)

CONTEXT = (
    "[1] (chunk) Marta Ruiz founded Lumo Labs in 2011. Lumo Labs sells solar lamps.\n\n"
    "[2] (entity) Oslo: the capital of Norway"
)


def _answers(rows):
    """Hand-built answers: (question_id, method, text, failure, context_text)."""
    return pd.DataFrame(rows, columns=["question_id", "method", "text", "failure", "context_text"])


def test_citation_markers_are_read_and_stripped():
    assert cited_entries("Ann Lee [1], Bo Ek [2, 3][4]") == [1, 2, 3, 4]
    assert strip_citations("Ann Lee [1], Bo Ek [2, 3][4].") == "Ann Lee , Bo Ek ."
    assert strip_citations("the [sic] list") == "the [sic] list"  # only numbered markers are citations


def test_entity_claims_are_the_names_and_years_of_the_answer():
    claims = entity_claims("Marta Ruiz founded Lumo Labs in 2011, and Lumo Labs moved.", [])
    assert claims == ["Marta Ruiz", "Lumo Labs", "2011"]  # each once
    assert entity_claims("Yes, in Oslo.", []) == ["Oslo"]  # a yes/no answer's word names nothing


def test_entity_grounding_counts_supported_names_and_years_in_the_context():
    answers = _answers(
        [
            # Marta Ruiz, Lumo Labs, Oslo in the context; 2012 is not (it says 2011): 3 of 4
            ("q1", "vector", "Marta Ruiz founded Lumo Labs in Oslo in 2012 [1][2].", "", CONTEXT),
            # the citation marker is not a year or a name; both names occur
            ("q2", "vector", "Lumo Labs [1]", "", CONTEXT),
            # "Annex" in the context does not support "Ann"
            ("q3", "vector", "Ann", "", "[1] (chunk) The Annex was built."),
        ]
    )
    table = entity_grounding(answers).set_index("question_id")
    assert table.loc["q1", ["grounding_claims", "grounding_supported"]].tolist() == [4, 3]
    assert table.loc["q1", "grounding"] == pytest.approx(0.75)
    assert table.loc["q1", "unsupported_claims"] == ["2012"]
    assert table.loc["q2", "grounding"] == 1.0 and table.loc["q2", "grounding_claims"] == 1
    assert table.loc["q3", "grounding"] == 0.0 and table.loc["q3", "grounding_status"] == "ok"


def test_entity_grounding_counts_unscorable_answers_without_a_share():
    answers = _answers(
        [
            ("q1", "vector", "", "timeout", CONTEXT),
            ("q2", "vector", "Insufficient information.", "", CONTEXT),
            ("q3", "vector", "Marta Ruiz", "", "(no context)"),
            ("q4", "vector", "solar lamps [1]", "", CONTEXT),  # states no name and no year
        ]
    )
    table = entity_grounding(answers).set_index("question_id")
    assert table["grounding_status"].to_dict() == {
        "q1": "no answer",
        "q2": "declined",
        "q3": "no context",
        "q4": "no claims",
    }
    assert table["grounding"].isna().all()  # never scored 0
    assert table.loc["q4", "grounding_claims"] == 0


def _scripted_reply(body):
    """Claims of the one answer that has any, and a verdict per claim (one verdict stays unparseable,
    in its repair round too).
    """
    asked = next(m["content"] for m in body["messages"] if m["role"] == "user")
    if "Claims:" in asked:
        text = asked.rsplit("Text: ", 1)[1]
        if text.startswith("Marta"):
            claims = [
                "Marta Ruiz founded Lumo Labs.",
                "Lumo Labs was founded in 2011.",
                "Lumo Labs is in Oslo.",
            ]
            claims.append("Lumo Labs employs 500 people.")
            return json.dumps({"claims": claims})
        if text.startswith("Garbled"):
            return "no JSON"
        return '{"claims": []}'
    claim = asked.rsplit("Claim: ", 1)[1]
    verdicts = {
        "Marta Ruiz founded Lumo Labs.": '{"verdict": "supported", "reason": "entry 1"}',
        "Lumo Labs was founded in 2011.": '{"verdict": "partially_supported", "reason": "entry 1"}',
        "Lumo Labs is in Oslo.": '{"verdict": "not_supported", "reason": "no entry"}',
    }
    return verdicts.get(claim, "the claim is fine")


@pytest.mark.fault
def test_model_grounding_scores_verdicts_and_counts_failed_checks(scripted, tmp_path):
    scripted.default_reply = _scripted_reply
    llm = make_llm(scripted.base_url, tmp_path)
    settings = Settings(diagnostics={"grounding": "model"})
    answers = _answers(
        [
            ("q1", "vector", "Marta Ruiz founded Lumo Labs in 2011 in Oslo [1].", "", CONTEXT),
            ("q2", "vector", "Garbled", "", CONTEXT),
            ("q3", "vector", "", "timeout", CONTEXT),
            ("q4", "vector", "Insufficient information.", "", CONTEXT),
            ("q5", "vector", "Lumo Labs", "", "(no context)"),
            ("q6", "vector", "solar lamps", "", CONTEXT),
        ]
    )
    table, failures = model_grounding(answers, llm, settings)
    table = table.set_index("question_id")
    q1 = table.loc["q1"]
    # supported 1 + partially 0.5 + not 0 over the 3 checks that parsed; the 4th is counted, not scored
    assert (q1["grounding_claims"], q1["checks_failed"]) == (4, 1)
    assert q1["grounding_supported"] == pytest.approx(1.5)
    assert q1["grounding"] == pytest.approx(0.5)
    assert [v["verdict"] for v in q1["verdicts"]] == ["supported", "partially_supported", "not_supported"]
    assert table["grounding_status"].to_dict() == {
        "q1": "ok",
        "q2": "failed",  # its extraction stayed unparseable
        "q3": "no answer",
        "q4": "declined",
        "q5": "no context",
        "q6": "no claims",
    }
    assert table.drop(index="q1")["grounding"].isna().all()
    assert failures[["question_id", "stage", "claim"]].values.tolist() == [
        ["q1", CHECK_STAGE, "Lumo Labs employs 500 people."],
        ["q2", CLAIMS_STAGE, ""],
    ]
    assert (failures["kind"] == "parse").all()
    # the citation marker is not in the text the claims are extracted from
    extraction = next(
        r["body"] for r in scripted.chat_requests() if "Claims:" in r["body"]["messages"][-1]["content"]
    )
    assert "[1]" not in extraction["messages"][-1]["content"].rsplit("Text: ", 1)[1]
    # no call for the failed, declined or context-less answers: extractions for q1, q2, q6 and four
    # checks for q1 in the ledger, under the grounding stages; q2's extraction and q1's fourth check
    # each had a repair round
    assert llm.ledger.frame()["stage"].value_counts().to_dict() == {CLAIMS_STAGE: 3, CHECK_STAGE: 4}
    assert len(scripted.chat_requests()) == 4 + 5
    max_tokens = {
        r["body"]["max_tokens"]
        for r in scripted.chat_requests()
        if "Claim: " in r["body"]["messages"][-1]["content"]
    }
    assert max_tokens == {settings.diagnostics.check_max_tokens}


@pytest.mark.fault
def test_an_answer_whose_every_check_failed_is_failed(scripted, tmp_path):
    scripted.default_reply = lambda body: (
        '{"claims": ["Lumo Labs sells lamps."]}'
        if "Claims:" in body["messages"][-1]["content"]
        else "no JSON"
    )
    llm = make_llm(scripted.base_url, tmp_path)
    table, failures = model_grounding(
        _answers([("q1", "vector", "Lumo Labs sells lamps.", "", CONTEXT)]),
        llm,
        Settings(diagnostics={"grounding": "model"}),
    )
    row = table.iloc[0]
    assert row["grounding_status"] == "failed" and pd.isna(row["grounding"])
    assert (row["grounding_claims"], row["checks_failed"]) == (1, 1)
    assert len(failures) == 1


def test_answer_grounding_dispatches_on_the_setting(tmp_path):
    answers = _answers([("q1", "vector", "Lumo Labs [1]", "", CONTEXT)])
    table, failures = answer_grounding(answers, None, Settings(diagnostics={"grounding": "entities"}))
    assert table["grounding"].tolist() == [1.0] and failures.empty
    table, failures = answer_grounding(answers, None, Settings(diagnostics={"grounding": "none"}))
    assert table.empty and failures.empty


def test_planned_grounding_bounds_extractions_and_checks():
    assert planned_grounding(10, Settings()) == []  # "entities": no model call
    plans = planned_grounding(10, Settings(diagnostics={"grounding": "model", "grounding_max_claims": 3}))
    assert [(p.stage, p.calls, p.basis) for p in plans] == [
        (CLAIMS_STAGE, 10, "upper bound"),
        (CHECK_STAGE, 30, "upper bound"),
    ]
    unbounded = planned_grounding(
        10, Settings(diagnostics={"grounding": "model", "grounding_max_claims": None})
    )
    assert unbounded[1].basis == "unknown"
