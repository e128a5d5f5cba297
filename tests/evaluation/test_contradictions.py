"""Contradiction handling (ragtrial.evaluation.contradictions): each class on hand-built answers, the
provenance rule (a source named, or a citation of an entry that states the value), and questions
without claims metadata left out.
"""

import pandas as pd

from ragtrial.evaluation.contradictions import HANDLING, cited_clauses, contradiction_handling
from ragtrial.records import Question
from ragtrial.retrieval.packing import context_entries

CLAIMS = [
    {"value": "Ann Lee", "source": "The Varo Courier", "doc_id": "doc-0001"},
    {"value": "Bo Ek", "source": "Kesti Gazette", "doc_id": "doc-0004"},
]
QUESTIONS = [
    Question(
        question_id="c1",
        question="Who is the chief executive of Vanta?",
        answers=["Ann Lee", "Bo Ek"],
        question_type="contradictory",
        metadata={"claims": CLAIMS},
    ),
    Question(
        question_id="s1", question="Where is Vanta based?", answers=["Oslo"], question_type="single_hop"
    ),
]
CONTEXT = (
    "[1] (chunk) Ann Lee is the chief executive of Vanta.\n\n"
    "[2] (chunk) Vanta makes lamps [3 units].\n\n"
    "[3] (chunk) Bo Ek leads Vanta."
)


def _answers(rows):
    return pd.DataFrame(
        [(q, m, text, failure, CONTEXT) for q, m, text, failure in rows],
        columns=["question_id", "method", "text", "failure", "context_text"],
    )


def test_context_entries_and_cited_clauses():
    assert context_entries(CONTEXT) == {
        1: "Ann Lee is the chief executive of Vanta.",
        2: "Vanta makes lamps [3 units].",
        3: "Bo Ek leads Vanta.",
    }
    assert cited_clauses("Ann Lee [1], Bo Ek [2][3] says more") == [
        ("Ann Lee", [1]),
        (", Bo Ek", [2, 3]),
        (" says more", []),
    ]


def test_each_answer_is_classified_and_only_a_silent_pick_is_a_failure():
    answers = _answers(
        [
            ("c1", "cited", "Ann Lee [1], Bo Ek [3]", ""),  # each value cited to an entry stating it
            ("c1", "sources", "The Varo Courier says Ann Lee; Kesti Gazette says Bo Ek.", ""),
            ("c1", "miscited", "Ann Lee [1], Bo Ek [2]", ""),  # entry 2 does not state Bo Ek
            ("c1", "bare", "Ann Lee or Bo Ek", ""),
            ("c1", "flag", "Sources disagree about who leads Vanta [1].", ""),
            ("c1", "one", "Ann Lee [1]", ""),
            ("c1", "decline", "Insufficient information.", ""),
            ("c1", "failed", "", "timeout"),
            ("c1", "neither", "Carl Berg [2]", ""),
            ("s1", "cited", "Oslo [1]", ""),  # no claims metadata: not in the table
        ]
    )
    table = contradiction_handling(answers, QUESTIONS).set_index("method")
    assert table["handling"].to_dict() == {
        "cited": "both_with_provenance",
        "sources": "both_with_provenance",
        "miscited": "both_values",
        "bare": "both_values",
        "flag": "flagged",
        "one": "silent_pick",
        "decline": "declined",
        "failed": "no answer",
        "neither": "other",
    }
    assert set(table["handling"]) == set(HANDLING)
    assert table.index[table["failure"]].tolist() == ["one"]
    assert table.loc["miscited", ["values", "values_named", "provenance_named"]].tolist() == [2, 2, 1]
    assert pd.isna(table.loc["failed", "values_named"])
    assert (table["question_id"] == "c1").all()


def test_no_question_with_claims_gives_an_empty_table():
    answers = _answers([("s1", "cited", "Oslo [1]", "")])
    table = contradiction_handling(answers, QUESTIONS)
    assert table.empty and "handling" in table.columns
