"""Answer correctness by key facts (ragtrial.evaluation.key_facts): the judge path through the scripted
server (all facts present, one missing, an unparseable reply counted), the key facts taken from gold
answers, the "contains" path with a contradictory question, the dispatch and the planner.
"""

import json

import pandas as pd
import pytest
from conftest import make_llm

from ragtrial.config.settings import Settings
from ragtrial.evaluation.key_facts import (
    STAGE,
    answer_correctness,
    check_key_facts,
    contains_correctness,
    facts_reply_schema,
    planned_key_fact_checks,
    question_facts,
)
from ragtrial.records import Question

QUESTIONS = [
    Question(
        question_id="q1",
        question="Who founded Lumo Labs, and when?",
        answers=["Marta Ruiz"],
        key_facts=["Marta Ruiz founded Lumo Labs", "Lumo Labs was founded in 2011"],
    ),
    Question(
        question_id="q2",
        question="Where is Lumo Labs based?",
        answers=["Oslo", "Christiania"],
        question_type="single_hop",
    ),
    Question(
        question_id="q3",
        question="Who is the chief executive of Vanta?",
        answers=["Ann Lee", "Bo Ek"],
        question_type="contradictory",
    ),
    Question(question_id="q4", question="What happened?", question_type="single_hop"),
]


def _answers(rows):
    return pd.DataFrame(rows, columns=["question_id", "method", "text", "failure", "context_text"])


def test_key_facts_come_from_the_question_else_from_its_gold_answers():
    by_id = {q.question_id: q for q in QUESTIONS}
    assert question_facts(by_id["q1"]) == (
        "key facts",
        [["Marta Ruiz founded Lumo Labs"], ["Lumo Labs was founded in 2011"]],
    )
    assert question_facts(by_id["q2"]) == ("gold answers", [["Oslo", "Christiania"]])  # aliases: one fact
    assert question_facts(by_id["q3"]) == ("gold answers", [["Ann Lee"], ["Bo Ek"]])  # every value
    assert question_facts(by_id["q4"]) == ("gold answers", [])


def test_the_reply_schema_fixes_the_number_of_facts():
    schema = facts_reply_schema(2)
    assert schema.model_validate({"present": [True, False]}).present == [True, False]
    with pytest.raises(ValueError):
        schema.model_validate({"present": [True]})


def _judge(body):
    asked = next(m["content"] for m in body["messages"] if m["role"] == "user")  # also in a repair round
    answer = asked.split("Answer: ", 1)[1].split("\n", 1)[0]
    if answer.startswith("Marta Ruiz founded it in 2011"):
        return json.dumps({"present": [True, True]})
    if answer.startswith("Marta Ruiz"):
        return json.dumps({"present": [True, False]})
    if answer.startswith("Ann Lee"):
        return json.dumps(
            {"present": [True, True, True]}
        )  # three booleans for two facts: invalid, its repair too
    return json.dumps({"present": [True]})


@pytest.mark.fault
def test_check_key_facts_scores_each_fact_and_counts_an_unparseable_check(scripted, tmp_path):
    scripted.default_reply = _judge
    llm = make_llm(scripted.base_url, tmp_path)
    settings = Settings()
    answers = _answers(
        [
            ("q1", "vector", "Marta Ruiz founded it in 2011 [1].", "", ""),
            ("q1", "graph", "Marta Ruiz [2]", "", ""),
            ("q2", "vector", "Oslo [1]", "", ""),
            ("q3", "vector", "Ann Lee [1] and Bo Ek [2]", "", ""),  # the judge's replies stay invalid
            ("q2", "graph", "", "timeout", ""),
            ("q2", "hybrid", "Insufficient information.", "", ""),
            ("q4", "vector", "Nothing.", "", ""),
        ]
    )
    table, failures = check_key_facts(answers, QUESTIONS, llm, settings)
    rows = {(r.question_id, r.method): r for r in table.itertuples(index=False)}
    assert rows["q1", "vector"].facts_present == 2 and rows["q1", "vector"].answer_correct
    assert rows["q1", "graph"].facts_present == 1 and not rows["q1", "graph"].answer_correct
    assert rows["q1", "graph"].key_fact_source == "key facts"
    assert rows["q2", "vector"].answer_correct and rows["q2", "vector"].key_fact_source == "gold answers"
    assert rows["q2", "vector"].key_facts == ["Oslo (also written: Christiania)"]
    assert {k: r.status for k, r in rows.items()} == {
        ("q1", "vector"): "ok",
        ("q1", "graph"): "ok",
        ("q2", "vector"): "ok",
        ("q3", "vector"): "failed",
        ("q2", "graph"): "no answer",
        ("q2", "hybrid"): "ok",  # a decline states no fact: scored without a call
        ("q4", "vector"): "no key facts",
    }
    assert rows["q2", "hybrid"].facts_present == 0 and not rows["q2", "hybrid"].answer_correct
    for key in [("q3", "vector"), ("q2", "graph"), ("q4", "vector")]:  # counted, never scored
        assert pd.isna(rows[key].facts_present) and pd.isna(rows[key].answer_correct)
    assert failures[["question_id", "method", "stage", "kind"]].values.tolist() == [
        ["q3", "vector", STAGE, "parse"]
    ]
    # calls: q1 twice, q2 once, q3 with its repair round; the judge sees the answer without markers
    requests = scripted.chat_requests()
    assert len(requests) == 5
    assert all("[1]" not in r["body"]["messages"][1]["content"].split("Answer: ", 1)[1] for r in requests)
    assert (
        "1. Marta Ruiz founded Lumo Labs\n2. Lumo Labs was founded in 2011"
        in requests[0]["body"]["messages"][1]["content"]
    )
    assert {r["body"]["max_tokens"] for r in requests} == {settings.diagnostics.check_max_tokens}
    assert set(llm.ledger.frame()["stage"]) == {STAGE}


def test_contains_correctness_needs_every_value_of_a_contradictory_question():
    answers = _answers(
        [
            ("q2", "vector", "Christiania [1]", "", ""),  # an alias is the fact
            ("q3", "vector", "Ann Lee [1]", "", ""),  # one value of two
            ("q3", "graph", "Ann Lee [1] or Bo Ek [3]", "", ""),
            ("q3", "hybrid", "", "timeout", ""),
            ("q4", "vector", "Nothing.", "", ""),
        ]
    )
    table = contains_correctness(answers, QUESTIONS)
    assert table["answer_correct"].tolist() == [True, False, True, pd.NA, pd.NA]
    assert table["facts_present"].tolist() == [1, 1, 2, pd.NA, pd.NA]
    assert table["status"].tolist() == ["ok", "ok", "ok", "no answer", "no key facts"]


def test_an_answer_to_an_unknown_question_names_it():
    with pytest.raises(KeyError, match="q9"):
        contains_correctness(_answers([("q9", "vector", "x", "", "")]), QUESTIONS)


def test_answer_correctness_dispatches_and_planner_follows_the_setting():
    answers = _answers([("q2", "vector", "Oslo", "", "")])
    table, failures = answer_correctness(
        answers, QUESTIONS, None, Settings(diagnostics={"correctness": "contains"})
    )
    assert table["answer_correct"].tolist() == [True] and failures.empty
    assert planned_key_fact_checks(8, Settings(diagnostics={"correctness": "contains"})) == []
    (plan,) = planned_key_fact_checks(8, Settings())
    assert (plan.stage, plan.calls, plan.basis, plan.output) == (STAGE, 8, "upper bound", "json")
    assert plan.completion_tokens_max == 8 * Settings().diagnostics.check_max_tokens


def test_containment_checks_the_gold_answers_not_the_key_fact_sentences():
    """A short answer never contains a key-fact sentence word for word: containment reads the golds."""
    table = contains_correctness(_answers([("q1", "vector", "Marta Ruiz [2]", "", "")]), QUESTIONS)
    assert table["answer_correct"].tolist() == [True]
    assert table["key_fact_source"].tolist() == ["gold answers"]
