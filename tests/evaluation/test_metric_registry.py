"""One registration per metric: the scoring, the summary columns and the notebooks' column lists
all follow from it, so a new metric is scored and summarized without touching anything else.
"""

from __future__ import annotations

import pandas as pd
import pytest

from ragtrial.evaluation import answer_metrics
from ragtrial.evaluation.answer_metrics import (
    METRICS,
    qa_metrics,
    qa_scores,
    register_metric,
    reported_metrics,
    score_qa,
)
from ragtrial.evaluation.score_tables import method_summary
from ragtrial.registry import Registry


@pytest.fixture
def metrics(monkeypatch):
    """A copy of the metric registry, so a test's registration does not outlive the test."""
    copy: Registry = Registry("metric")
    for name in METRICS:
        entry = METRICS.entry(name)
        copy.add(name, entry.target, entry.description, **entry.metadata)
    monkeypatch.setattr(answer_metrics, "METRICS", copy)
    return copy


def short_answer(prediction: str, golds: list[str]) -> float:
    """1.0 when the answer has at most three words (a dummy metric)."""
    return float(len(prediction.split()) <= 3)


def test_a_registered_qa_metric_is_scored_summarized_and_listed_for_notebook_04(metrics):
    register_metric(
        "short",
        short_answer,
        "the answer has at most three words",
        task="qa",
        paired_test="mcnemar",
        reported={"qa": ("summary", "paired")},
    )
    assert qa_metrics()[-1] == "short"
    assert "short" in reported_metrics("qa", "summary", 5) and "short" in reported_metrics("qa", "paired", 5)
    assert "short" not in reported_metrics("qa", "by_question_type", 5)
    # McNemar comparisons come first, in registration order
    assert reported_metrics("qa", "paired", 5) == ["em", "accuracy", "short", "f1", "recall@5"]
    assert score_qa("Paris", ["Paris"])["short"] == 1.0
    # a null question scores the new column by the null rule too
    assert score_qa("I do not know the answer here", ["x"], is_null=True)["short"] == 1.0

    answers = pd.DataFrame(
        {
            "question_id": ["q1", "q2", "q1", "q2"],
            "method": ["a", "a", "b", "b"],
            "failure": ["", "", "", "timeout"],
            "text": ["Paris", "the capital of France is Paris", "Paris", None],
            "golds": [["Paris"]] * 4,
        }
    )
    scores = qa_scores(answers, "text", "golds")
    assert scores["short"].tolist()[:3] == [1.0, 0.0, 1.0] and pd.isna(scores["short"].iloc[3])
    summary = method_summary(scores, reported_metrics("qa", "summary", 5)[:5] + ["short"], 50, 0)
    assert summary.set_index("method").loc["a", "short"] == 0.5
    assert summary.set_index("method").loc["b", "short_n"] == 1


def test_report_roles_are_checked_at_registration(metrics):
    with pytest.raises(ValueError, match="unknown report roles"):
        register_metric(
            "x", short_answer, "x", task="qa", paired_test="mcnemar", reported={"qa": ("sumary",)}
        )
    with pytest.raises(ValueError, match="unknown report role"):
        reported_metrics("qa", "headline", 5)


def test_the_notebooks_column_lists_are_the_registered_ones():
    assert reported_metrics("qa", "summary", 10) == [
        "em",
        "f1",
        "token_precision",
        "token_recall",
        "accuracy",
        "recall@10",
        "recall",
        "all_supporting",
    ]
    assert reported_metrics("qa", "by_question_type", 10) == ["accuracy", "recall@10"]
    assert reported_metrics("summarization", "summary", 3) == [
        "rouge2_f",
        "rougeL_f",
        "bertscore_f1",
        "recall@3",
    ]
    assert reported_metrics("summarization", "paired", 3) == ["rouge2_f", "bertscore_f1"]
