"""Bring your own answers: the answers-file format, its errors, the KAG LightRAG answers, ImportedMethod,
an empty corpus, and length alignment leaving an imported answer as it is.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import SHARED_DATASETS, make_llm
from test_methods import Run

from ragtrial.config import Settings
from ragtrial.data import load_dataset
from ragtrial.data.answer_files import read_answers
from ragtrial.evaluation.judge.pairs import NOT_ALIGNABLE, CannotRegenerate, align_lengths
from ragtrial.index.build import load_or_build_index
from ragtrial.index.tables import GraphIndex
from ragtrial.methods.imported import NOT_ANSWERED
from ragtrial.methods.registry import index_parts, make_methods
from ragtrial.records import DataError, Dataset, Question

KAG = SHARED_DATASETS / "ultradomain_cs_questions_kag"
KAG_COLUMNS = {
    "question_id": "_id",
    "question": "input",
    "answer": "lightrag_answer",
    "contexts": "lightrag_context",
}
ROWS = pd.DataFrame(
    {
        "question_id": ["q1", "q2", "q1"],
        "method": ["sys_a", "sys_a", "sys_b"],
        "answer": ["London", "", "Paris"],
        "contexts": [["Ada was born in London."], [], ["Paris is a city."]],
        "chunk_ids": [["c1"], [], []],
        "prompt_tokens": [120, 0, 80],
        "completion_tokens": [5, 0, 4],
        "calls": [2, 1, 1],
        "latency_s": [1.5, 0.2, 0.7],
        "failure": ["", "timeout", ""],
    }
)


def write(frame: pd.DataFrame, path: Path) -> Path:
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in frame.to_dict("records")))
    elif path.suffix == ".json":
        path.write_text(json.dumps(frame.to_dict("records")))
    elif path.suffix == ".csv":
        listed = frame.assign(**{c: frame[c].map(json.dumps) for c in ("contexts", "chunk_ids")})
        listed.to_csv(path, index=False)
    else:
        frame.to_parquet(path)
    return path


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet", ".json"])
def test_every_format_reads_back_what_was_written(tmp_path, suffix):
    answers = read_answers(write(ROWS, tmp_path / f"answers{suffix}"))
    got = pd.DataFrame(
        [
            (
                a.question_id,
                a.method,
                a.text,
                list(a.contexts),
                list(a.chunk_ids),
                a.prompt_tokens,
                a.completion_tokens,
                a.calls,
                a.latency_s,
                a.failure,
            )
            for a in answers
        ],
        columns=list(ROWS.columns),
    )
    pd.testing.assert_frame_equal(got, ROWS)


def error_of(tmp_path: Path, name: str, content: str, columns: dict | None = None) -> str:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(DataError) as err:
        read_answers(path, columns=columns)
    return str(err.value)


@pytest.mark.parametrize(
    ("name", "content", "columns", "expected"),
    [
        (
            "a.jsonl",
            '{"question_id": "q1", "answer": "x"}\n{"question_id": "q2"}\n',
            None,
            ["line 2", "'answer'", "missing"],
        ),
        (
            "a.json",
            '[{"id": "q1", "answer": "x"}]',
            {"question_id": "qid"},
            ["record 0", "qid (answer_files columns: question_id -> qid)", "missing"],
        ),
        (
            "a.csv",
            "question_id,reply\nq1,x\n",
            {"answer": "text"},
            ["a.csv", "text (answer_files columns: answer -> text)", "missing column"],
        ),
        (
            "a.csv",
            "question_id,answer\nq1,x\nq1,y\n",
            None,
            ["line 3", "'question_id'", "duplicate answer to question 'q1'", "line 2"],
        ),
        (
            "a.jsonl",
            '{"question_id": "q1", "answer": "x", "prompt_tokens": "many"}\n',
            None,
            ["line 1", "'prompt_tokens'", "'many'"],
        ),
        (
            "a.csv",
            "question_id,answer,completion_tokens\nq1,x,1.5\n",
            None,
            ["line 2", "'completion_tokens'", "integer"],
        ),
        ("a.jsonl", '{"question_id": "q1", "answer": "  "}\n', None, ["line 1", "'answer'", "no failure"]),
    ],
    ids=[
        "missing_field",
        "missing_mapped_field",
        "missing_column",
        "duplicate",
        "non_numeric",
        "fractional_count",
        "empty_answer",
    ],
)
def test_each_error_names_the_file_the_record_and_the_field(tmp_path, name, content, columns, expected):
    message = error_of(tmp_path, name, content, columns)
    assert str(tmp_path / name) in message
    for part in expected:
        assert part in message


def test_the_kag_lightrag_answers_read_through_the_column_mapping_and_match_the_questions():
    answers = read_answers(KAG / "csqa_lightrag_answers.json", columns=KAG_COLUMNS)
    questions = load_dataset("ultradomain", KAG).questions
    assert len(answers) == 100 and all(a.text and not a.failure for a in answers)
    assert [a.question_id for a in answers] == [q.question_id for q in questions]
    assert [a.question for a in answers] == [q.question for q in questions]
    assert all(a.contexts == () for a in answers)  # lightrag_context is always empty upstream


def chunk_index() -> GraphIndex:
    chunks = pd.DataFrame(
        {
            "chunk_id": ["c1"],
            "doc_id": ["d1"],
            "position": [0],
            "text": ["Ada was born in London."],
            "n_tokens": [6],
        }
    )
    return GraphIndex(chunks=chunks)


def answers_settings(file: Path, **data) -> Settings:
    data = data or {"dataset": "answers_file", "path": str(file.parent), "options": {"file": file.name}}
    return Settings(
        data=data,
        methods={"answer_files": {"sys_a": {"path": str(file), "system": "a test system"}}},
        judge={"methods": ["sys_a", "closed_book"]},
    )


def test_an_imported_method_answers_from_its_file_and_fails_a_question_it_does_not_answer(scripted, tmp_path):
    path = write(
        ROWS.assign(question=["Where was Ada born?", "Q2?", "Where was Ada born?"]), tmp_path / "a.jsonl"
    )
    settings = answers_settings(path)
    llm = make_llm(scripted.base_url, tmp_path)
    (method,), unavailable = make_methods(["sys_a"], chunk_index(), Run(settings, llm), settings.judge)
    assert unavailable.empty and index_parts("sys_a", settings) == []
    answered = method.answer(Question(question_id="q1", question="Where was Ada born?"))
    assert (answered.text, answered.failure) == ("London", "")
    assert (answered.calls, answered.prompt_tokens, answered.completion_tokens, answered.latency_s) == (
        2,
        120,
        5,
        1.5,
    )
    assert [(i.kind, i.chunk_ids, i.text) for i in answered.context] == [
        ("chunk", ["c1"], "Ada was born in London.")
    ]
    assert answered.doc_ids == ["d1"] and answered.notes["imported"] == str(path)
    failed = method.answer(Question(question_id="q2", question="Q2?"))
    assert (failed.text, failed.failure, failed.failures[0]["kind"]) == ("", "timeout", "timeout")
    missing = method.answer(Question(question_id="q3", question="Q3?"))
    assert (missing.text, missing.failure, missing.calls) == ("", NOT_ANSWERED, 0)
    assert "has no answer to question 'q3'" in missing.failures[0]["detail"]
    assert scripted.chat_requests() == []  # nothing asked of a model


def test_an_answer_to_a_question_not_in_the_data_set_is_an_error_naming_its_record(scripted, tmp_path):
    path = write(ROWS.iloc[:1].assign(method="sys_a", question_id="nowhere"), tmp_path / "a.jsonl")
    settings = answers_settings(path, dataset="ultradomain", path=str(KAG))
    llm = make_llm(scripted.base_url, tmp_path)
    with pytest.raises(DataError, match=r"record line 1, field 'question_id': unknown question id 'nowhere'"):
        make_methods(["sys_a"], chunk_index(), Run(settings, llm), settings.judge)


def test_a_data_set_without_documents_has_an_empty_index_and_only_index_free_methods(scripted, tmp_path):
    path = write(ROWS.assign(question="Where was Ada born?"), tmp_path / "a.jsonl")
    settings = answers_settings(path)
    llm = make_llm(scripted.base_url, tmp_path)
    ctx = Run(settings, llm)
    index = load_or_build_index(ctx, Dataset(name="questions_only", documents=[]))
    assert index.chunks.empty and not (tmp_path / "indexes").exists()
    methods, unavailable = make_methods(["sys_a", "closed_book", "naive_rag"], index, ctx, settings.judge)
    assert [m.name for m in methods] == ["sys_a", "closed_book"]
    assert unavailable["method"].tolist() == ["naive_rag"]
    assert "the data set has no documents" in unavailable["reason"].iloc[0]


@pytest.mark.parametrize(
    ("fixed", "status", "regenerated"), [("a", "aligned", ["b"]), ("ab", NOT_ALIGNABLE, [])]
)
def test_alignment_leaves_an_imported_answer_as_it_is(fixed, status, regenerated):
    asked = []

    def regenerate(question_id, method, replicate, target_words):
        if method in fixed:
            raise CannotRegenerate(method)
        asked.append(method)
        return " ".join(["word"] * target_words)

    pairs = pd.DataFrame(
        [("q1", "Q?", "cs", "a", 0, "short answer", "b", 0, " ".join(["long"] * 40))],
        columns=[
            "question_id",
            "question",
            "question_type",
            "method_a",
            "replicate_a",
            "text_a",
            "method_b",
            "replicate_b",
            "text_b",
        ],
    )
    appended = []
    aligned, log = align_lengths(pairs, regenerate, lambda *a: appended.append(a) or "x", 3, 2)
    assert log["status"].tolist() == [status] and asked == regenerated and appended == []
    if status == "aligned":
        assert aligned["text_a"].tolist() == ["short answer"]  # the imported answer unchanged


@pytest.mark.fault
def test_a_quoted_multi_line_csv_cell_and_line_separators_inside_jsonl_strings_are_read_as_written(tmp_path):
    csv_file = tmp_path / "a.csv"
    csv_file.write_text('question_id,answer\nq1,"first line\nsecond line"\nq2,y\n')
    assert [(a.record, a.question_id, a.text) for a in read_answers(csv_file)] == [
        ("line 2", "q1", "first line\nsecond line"),
        ("line 4", "q2", "y"),
    ]
    jsonl_file = tmp_path / "a.jsonl"
    odd = "a\u2028b\x85c\u2029d\x0ce"  # valid inside a JSON string; str.splitlines cuts at each
    jsonl_file.write_text(json.dumps({"question_id": "q1", "answer": odd}, ensure_ascii=False) + "\n")
    assert [(a.record, a.text) for a in read_answers(jsonl_file)] == [("line 1", odd)]


@pytest.mark.fault
@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("a.csv", 'question_id,answer\nq1,"unterminated\nq2,y\n', ["line 2", "unterminated quote"]),
        ("a.csv", 'question_id,answer\nq1,"x"y,z\nq2,y\n', ["line 2", "CSV"]),
        ("a.csv", "question_id,answer\nq1,x,extra\n", ["line 2", "3 cells where the header has 2"]),
        (
            "a.jsonl",
            '{"question_id": "q1", "answer": "x", "method": "m"}\n{"question_id": "q1", "answer": "y"}\n',
            ["line 2", "'method'", "1 of 2 rows name their method"],
        ),
    ],
    ids=["unterminated_quote", "stray_quote", "extra_cell", "row_without_method"],
)
def test_a_broken_or_ambiguous_answers_file_is_an_error_naming_its_record(tmp_path, name, content, expected):
    message = error_of(tmp_path, name, content)
    assert str(tmp_path / name) in message
    for part in expected:
        assert part in message
