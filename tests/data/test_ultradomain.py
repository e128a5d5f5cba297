"""The UltraDomain cs questions KAG ships (no documents, or the books from corpus_path), and a data set
made of an answers file's questions.
"""

from __future__ import annotations

import json

import pytest
from conftest import SHARED_DATASETS

from ragtrial.data import load_dataset
from ragtrial.records import DataError

KAG = SHARED_DATASETS / "ultradomain_cs_questions_kag"


def test_the_cs_questions_load_with_their_reference_answers_and_no_documents():
    dataset = load_dataset("ultradomain", KAG)
    raw = json.loads((KAG / "questions.json").read_text())
    assert len(dataset.questions) == 100 and dataset.documents == []
    first = dataset.questions[0]
    assert (first.question_id, first.question, first.answers) == (
        raw[0]["_id"],
        raw[0]["input"],
        raw[0]["answers"],
    )
    assert first.question_type == "cs"
    assert first.metadata == {"title": raw[0]["context"], "context_id": raw[0]["context_id"]}
    assert len({q.metadata["context_id"] for q in dataset.questions}) == 10


def test_corpus_path_makes_the_books_the_documents(tmp_path):
    (tmp_path / "questions.json").write_text((KAG / "questions.json").read_text())
    (tmp_path / "books").mkdir()
    (tmp_path / "books" / "guide_to_java.md").write_text("# Guide to Java\n\nClasses and objects.")
    dataset = load_dataset("ultradomain", tmp_path, corpus_path="books")
    assert [d.doc_id for d in dataset.documents] == ["guide_to_java.md"]


def test_an_answers_file_is_a_data_set_of_its_questions(tmp_path):
    rows = [
        {"q": "q1", "text": "How?", "method": "a", "answer": "So."},
        {"q": "q1", "text": "How?", "method": "b", "answer": "Thus."},
        {"q": "q2", "text": "Why?", "method": "a", "answer": "Because."},
    ]
    (tmp_path / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    columns = {"question_id": "q", "question": "text"}
    dataset = load_dataset("answers_file", tmp_path, file="answers.jsonl", columns=columns)
    assert [(q.question_id, q.question) for q in dataset.questions] == [("q1", "How?"), ("q2", "Why?")]
    assert dataset.documents == []
    (tmp_path / "bare.jsonl").write_text('{"question_id": "q1", "answer": "x"}\n')
    with pytest.raises(DataError, match=r"record line 1, field 'question': missing"):
        load_dataset("answers_file", tmp_path, file="bare.jsonl")
