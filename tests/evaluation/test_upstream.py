"""Notebook 11's side by side: context overlap per id kind, answer agreement, cost, failed sides."""

import math

import pandas as pd
import pytest

from ragtrial.evaluation.upstream import jaccard, side_by_side, side_by_side_summary


def answer(question_id, method, text, chunks=(), entities=(), failure="", calls=1):
    return {
        "question_id": question_id,
        "method": method,
        "text": text,
        "failure": failure,
        "context_ids": list(chunks),
        "context_entity_ids": list(entities),
        "context_relation_ids": [],
        "context_community_ids": [],
        "calls": calls,
        "cached_calls": 0,
        "prompt_tokens": 100 * calls,
        "completion_tokens": 10,
        "latency_s": 0.5 * calls,
    }


ANSWERS = pd.DataFrame(
    [
        answer("q1", "graphrag_local", "Scrooge is a miser", ["c1", "c2"], ["e1"], calls=2),
        answer("q1", "local_search", "Scrooge is a miser in London", ["c2", "c3"], ["e1"]),
        answer("q2", "graphrag_local", "Marley", ["c1"], []),
        answer("q2", "local_search", "", ["c1"], [], failure="server_error"),
        answer("q3", "graphrag_local", "Fred", [], []),
        answer("q3", "local_search", "Fred", [], []),
    ]
)


def test_jaccard_is_undefined_when_neither_side_showed_that_kind():
    assert jaccard(["a", "b"], ["b", "c"]) == pytest.approx(1 / 3)
    assert math.isnan(jaccard([], []))


def test_side_by_side_compares_each_question_both_answered_and_keeps_failed_sides_apart():
    table = side_by_side(ANSWERS, [("graphrag_local", "local_search")]).set_index("question_id")
    assert table.loc["q1", "status"] == "ok"
    assert table.loc["q1", "overlap_passages"] == pytest.approx(1 / 3)
    assert table.loc["q1", "overlap_entities"] == 1.0
    assert math.isnan(table.loc["q1", "overlap_relations"])
    assert 0 < table.loc["q1", "answer_f1"] < 1
    assert table.loc["q2", "status"] == "failed: local_search"
    assert math.isnan(table.loc["q2", "answer_f1"]) and math.isnan(table.loc["q2", "overlap_passages"])
    assert table.loc["q3", "answer_f1"] == 1.0 and math.isnan(table.loc["q3", "overlap_passages"])
    assert table.loc["q1", "upstream_calls"] == 2 and table.loc["q1", "twin_calls"] == 1


def test_the_summary_counts_questions_and_failures_and_says_undefined_not_zero():
    summary = side_by_side_summary(side_by_side(ANSWERS, [("graphrag_local", "local_search")]), 200, 0)
    row = summary.iloc[0]
    assert (row["questions"], row["failed"]) == (2, 1)
    assert row["overlap_passages_n"] == 1 and row["overlap_passages"] == pytest.approx(1 / 3)
    assert row["overlap_relations_n"] == 0 and math.isnan(row["overlap_relations"])
    assert row["answer_f1_n"] == 2 and row["answer_f1_low"] <= row["answer_f1"] <= row["answer_f1_high"]
    assert row["upstream_calls"] == pytest.approx(4 / 3)


def test_an_answers_table_without_answers_still_has_every_column():
    from ragtrial.evaluation.run_methods import ANSWER_COLUMNS, answers_frame
    from ragtrial.methods.base import Answer

    one = Answer("q1", "m", "text", [], {"chunk": 3}, 1, 10, 2, 0.1)
    assert [c for c in answers_frame([one]).columns if not c.startswith("tokens_")] == ANSWER_COLUMNS
    empty = answers_frame([])
    assert list(empty.columns) == ANSWER_COLUMNS and empty.empty
    assert side_by_side(empty, [("graphrag_local", "local_search")]).empty


def test_equal_contexts_are_one_string_in_every_answers_table_holding_them(tmp_path):
    """A judge at paper size keeps every trial's answers, and a method whose retrieval does not
    sample shows the same context in each (issue 36: 781 MB of context text, 250 MB distinct): the
    tables share one string per distinct context instead of a copy per row, and save it whole.
    """
    from ragtrial.evaluation.run_methods import answers_frame
    from ragtrial.methods.base import Answer
    from ragtrial.report.files import write_table
    from ragtrial.retrieval.base import ContextItem

    def answer(question_id: str, words: list[str]) -> Answer:  # a context built anew for each answer
        item = ContextItem(kind="chunk", text=" ".join(words), score=1.0, retriever="vector", chunk_ids=[])
        return Answer(question_id, "rag", "text", [item], {"chunk": 3}, 1, 10, 2, 0.1, context_ready=True)

    words = ["the", "same", "passage"]
    trials = [answers_frame([answer("q1", list(words)), answer("q2", ["another"])]) for _ in range(3)]
    stacked = pd.concat(trials, ignore_index=True)
    first_question = list(stacked.loc[stacked["question_id"] == "q1", "context_text"])  # held: ids stay apart
    assert first_question[0].endswith("the same passage") and first_question == [first_question[0]] * 3
    assert len({id(text) for text in first_question}) == 1
    write_table(tmp_path / "answers.parquet", stacked.drop(columns=["failures"]))
    saved = pd.read_parquet(tmp_path / "answers.parquet")
    assert list(saved["context_text"]) == list(stacked["context_text"])
