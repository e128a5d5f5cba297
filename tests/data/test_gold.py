"""What gold a data set carries, and the one-line stop of a notebook run on a data set without the
gold it needs (config.notebooks.NOTEBOOKS).
"""

from __future__ import annotations

import pytest

from ragtrial.config.base import ParamsError
from ragtrial.config.notebooks import NOTEBOOKS, notebook_specs
from ragtrial.data.gold import gold_carried, require_gold
from ragtrial.records import Dataset, Document, Question

DOCS = [Document(doc_id="a", title="a", text="Ada met Kel.")]


def dataset(*questions: Question) -> Dataset:
    return Dataset(name="mine", documents=DOCS, questions=list(questions), source_path="corpus")


def test_the_gold_a_data_set_carries_is_read_from_its_questions():
    assert gold_carried(dataset()) == set()
    assert gold_carried(dataset(Question(question_id="q", question="Who?"))) == {"questions"}
    null = Question(question_id="n", question="Who?", metadata={"is_null": True})
    assert gold_carried(dataset(null)) == {"questions", "answers"}  # a null question is scored declined
    full = Question(
        question_id="f",
        question="Who?",
        answers=["Ada"],
        gold_doc_ids=["a"],
        gold_entities=["Ada"],
        reference_summaries=["Ada met Kel."],
    )
    assert gold_carried(dataset(full)) == {
        "questions",
        "answers",
        "gold passages",
        "gold entities",
        "reference summaries",
    }


@pytest.mark.parametrize("notebook", [s.name for s in notebook_specs() if s.needs])
def test_a_notebook_that_needs_gold_names_the_data_set_what_is_missing_and_why(notebook):
    spec = NOTEBOOKS.get(notebook)
    with pytest.raises(ParamsError) as raised:
        require_gold(dataset(), notebook)
    message = str(raised.value)
    assert "\n" not in message and "data set 'mine' (corpus)" in message and spec.why_not in message
    assert all(f"no {kind}" in message for kind in spec.needs)


def test_a_notebook_without_needs_or_unknown_to_the_kit_runs_on_documents_alone():
    for notebook in [s.name for s in notebook_specs() if not s.needs] + ["interactive"]:
        require_gold(dataset(), notebook)  # no error
    require_gold(dataset(Question(question_id="q", question="Why?")), "09_retrieval_diagnostics")
