"""Which diagnostics a question set supports: counted from the gold its questions carry."""

from __future__ import annotations

import pytest
from conftest import SHARED_DATASETS

from ragtrial.data import load_dataset
from ragtrial.data.synthetic import generate_corpus
from ragtrial.questions.test_sets import METRIC_GOLD, metric_support
from ragtrial.records import GoldEdge, Question


def test_metric_support_counts_each_kind_of_gold_per_question_type():
    questions = [
        Question(
            question_id="a", question="?", question_type="single_hop", answers=["x"], gold_entities=["X"]
        ),
        Question(
            question_id="b",
            question="?",
            question_type="temporal",
            answers=["y"],
            gold_edges=[GoldEdge(source="X", relation="r", target="Y", valid_from=2001)],
            key_facts=["X r Y."],
        ),
        Question(question_id="c", question="?", question_type="temporal"),
    ]
    table = metric_support(questions).set_index("question_type")
    assert table.index.tolist() == ["single_hop", "temporal", "all"]
    assert table.loc[
        "temporal", ["questions", "answers", "gold_edges", "validity", "gold_entities"]
    ].tolist() == [
        2,
        1,
        1,
        1,
        0,
    ]
    assert table.loc["single_hop", "metrics"] == [
        "entity_recall",
        "correctness_answers",
        "grounding",
        "citation_coverage",
    ]
    assert table.loc["all", "questions"] == 3 and table.loc["all", "conflicts"] == 0


def test_the_generated_corpus_supports_every_metric_and_its_categories_their_own():
    table = metric_support(generate_corpus("small")[0].questions).set_index("question_type")
    assert table.loc["all", "metrics"] == list(METRIC_GOLD)
    assert table.loc["contradictory", "conflicts"] == table.loc["contradictory", "questions"] > 0
    assert table.loc["temporal", "validity"] == table.loc["temporal", "questions"]
    assert (table["key_facts"] == table["questions"]).all()


def test_2wiki_supports_retrieval_metrics_but_not_answer_correctness():
    path = SHARED_DATASETS / "2wikimultihopqa_hipporag"
    if not path.is_dir():
        pytest.skip(f"shared data set folder {path} is absent")
    row = (
        metric_support(load_dataset("2wikimultihopqa", path).questions).set_index("question_type").loc["all"]
    )
    assert row["gold_entities"] == row["questions"] == 101 and row["answers"] == 0
    assert "entity_recall" in row["metrics"] and "correctness_answers" not in row["metrics"]
