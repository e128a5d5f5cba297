"""The quality measures the verdict reads from the result tables of earlier runs, one registry entry
each: which notebook and table hold it, its direction and scale, whether it is measured against gold
without a model, and the difference worth detecting.

A measure's target turns a run's tables into per-answer observations: question_id, question_type,
method, partner ("" for a score of one answer; the other method of a judged pair), value, status
("ok", or why the answer is not scored: the answer failed, no gold, a failed check). Nothing that is
not "ok" carries a value, and nothing is dropped: the verdict counts what it leaves out.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from ragtrial.registry import Registry

Tables = Callable[[str], pd.DataFrame | None]  # table name -> the run's table (None: not saved)
OBSERVATION_COLUMNS = ["question_id", "question_type", "method", "partner", "value", "status"]


class MissingTable(LookupError):
    """A run lacks a table a measure is read from (the verdict says so and reads the rest)."""


def _required(tables: Tables, name: str, notebook: str) -> pd.DataFrame:
    try:
        frame = tables(name)
    except FileNotFoundError as err:
        raise MissingTable(f"notebook {notebook}'s run has no table {name!r} ({err})") from None
    if frame is None:
        raise MissingTable(f"no run of notebook {notebook}")
    return frame


def _answer_scores(notebook: str, column: str) -> Callable[[Tables], pd.DataFrame]:
    """A score column of a scores table (one row per question x method); a failed answer or a
    question the metric does not apply to (NaN) is an observation with its status.
    """

    def observe(tables: Tables) -> pd.DataFrame:
        scores = _required(tables, "scores", notebook)
        name = _score_column(scores, column, notebook)
        failed = scores["failure"].fillna("").astype(str) != ""
        missing = scores[name].isna()
        status = pd.Series("ok", index=scores.index)
        status[missing] = f"no {name} (no gold for it)"
        status[failed] = "answer failed: " + scores.loc[failed, "failure"].astype(str)
        return _frame(scores, scores["question_type"], scores[name].where(status == "ok"), status)

    return observe


def _score_column(scores: pd.DataFrame, column: str, notebook: str) -> str:
    """The column, or for "recall@k" the one recall@<k> the run computed."""
    if column != "recall@k":
        if column not in scores.columns:
            raise ValueError(f"notebook {notebook}'s scores table has no column {column!r}")
        return column
    found = [c for c in scores.columns if c.startswith("recall@")]
    if len(found) != 1:
        raise ValueError(f"notebook {notebook}'s scores table: expected one recall@k column, found {found}")
    return found[0]


def _frame(rows: pd.DataFrame, question_type: pd.Series, value: pd.Series, status: pd.Series) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "question_id": rows["question_id"].astype(str).to_numpy(),
            "question_type": question_type.astype(str).to_numpy(),
            "method": rows["method"].astype(str).to_numpy(),
            "partner": "",
            "value": value.astype(float).to_numpy(),
            "status": status.astype(str).to_numpy(),
        }
    )


def _diagnostic(column: str) -> Callable[[Tables], pd.DataFrame]:
    """A metric of notebook 09's per-answer table, with its own `<column>_status`."""

    def observe(tables: Tables) -> pd.DataFrame:
        per_answer = _required(tables, "per_answer", "09_retrieval_diagnostics")
        status = per_answer[f"{column}_status"].astype(str)
        value = per_answer[column].astype(float).where(status == "ok")
        return _frame(per_answer, per_answer["category"], value, status)

    return observe


def judge_scores(tables: Tables) -> pd.DataFrame:
    """Notebook 07's unbiased 0-5 judge: per question and judged pair, each method's mean score over
    trials, repeats, both positions and the aspects (partner = the other method of the pair).
    """
    judged = _required(tables, "unbiased_judgments", "07_pairwise_method_comparison")
    keys = ["question_id", "question_type", "method_a", "method_b"]
    means = judged.groupby(keys, sort=False)[["score_a", "score_b"]].mean().reset_index()
    sides = [
        means.rename(columns={"method_a": "method", "method_b": "partner", "score_a": "value"}),
        means.rename(columns={"method_b": "method", "method_a": "partner", "score_b": "value"}),
    ]
    frame = pd.concat([s[["question_id", "question_type", "method", "partner", "value"]] for s in sides])
    return frame.assign(value=frame["value"].astype(float), status="ok")[OBSERVATION_COLUMNS].reset_index(
        drop=True
    )


def _claims(measure: str | None) -> Callable[[Tables], pd.DataFrame]:
    """Notebook 08's claim counts per answer (comprehensiveness, or diversity at the run's first
    threshold); a failed claim extraction is an observation with its status.
    """

    def observe(tables: Tables) -> pd.DataFrame:
        notebook = "08_claims_comprehensiveness_diversity"
        metrics = _required(tables, "claim_metrics", notebook)
        questions = _required(tables, "questions", notebook)
        sets = _required(tables, "claim_sets", notebook)
        wanted = measure or _first_diversity(metrics)
        chosen = metrics[metrics["measure"] == wanted][["answer_id", "value"]]
        answers = sets[["answer_id", "question_id", "method", "status"]].merge(
            chosen, on="answer_id", how="left"
        )
        answers = answers.merge(questions[["question_id", "question_type"]], on="question_id", how="left")
        status = answers["status"].astype(str).where(answers["status"] == "ok", "claim extraction failed")
        status = status.where(
            (status != "ok") | answers["value"].notna(), f"no {wanted or 'diversity'} value"
        )
        return _frame(answers, answers["question_type"], answers["value"].where(status == "ok"), status)

    return observe


def _first_diversity(metrics: pd.DataFrame) -> str | None:
    """The diversity measure at the run's first (lowest) threshold; None when no answer has one
    (every claim extraction failed).
    """
    thresholds = metrics.loc[metrics["metric"] == "diversity", "threshold"].dropna()
    return f"diversity@{min(thresholds):g}" if len(thresholds) else None


# `measured_by`: "gold" (retrieval checked against gold, no model in the measurement), "answer" (the
# generator's answer scored against gold), "judge" (a model judges or extracts). On the embedded
# model only "gold" measures are findings; the rest prove the pipeline. `binary`: 0/1 per answer
# (McNemar), else Wilcoxon. `difference`: the difference the power analysis asks a question count for.
MEASURES: Registry[Callable[[Tables], pd.DataFrame]] = Registry("measure")
for _name, _notebook, _column, _binary, _by, _difference, _what in [
    ("qa_accuracy", "04_rag_vs_graphrag_qa", "accuracy", True, "answer", 0.1, "a gold answer is contained"),
    ("qa_f1", "04_rag_vs_graphrag_qa", "f1", False, "answer", 0.1, "SQuAD token F1 against gold"),
    (
        "qa_recall_at_k",
        "04_rag_vs_graphrag_qa",
        "recall@k",
        False,
        "gold",
        0.1,
        "gold documents in the top k",
    ),
    ("summary_rouge2", "05_rag_vs_graphrag_summarization", "rouge2_f", False, "answer", 0.05, "ROUGE-2 F1"),
    (
        "summary_bertscore",
        "05_rag_vs_graphrag_summarization",
        "bertscore_f1",
        False,
        "answer",
        0.05,
        "BERTScore F1",
    ),
]:
    MEASURES.add(
        _name,
        _answer_scores(_notebook, _column),
        _what,
        notebook=_notebook,
        higher_is_better=True,
        binary=_binary,
        measured_by=_by,
        scale="0-1",
        difference=_difference,
    )
MEASURES.add(
    "judge_score",
    judge_scores,
    "the unbiased judge's mean 0-5 score over trials, repeats, positions and aspects",
    notebook="07_pairwise_method_comparison",
    higher_is_better=True,
    binary=False,
    measured_by="judge",
    scale="0-5",
    difference=0.5,
)
for _name, _measure, _what in [
    ("claims_comprehensiveness", "comprehensiveness", "claims extracted from the answer"),
    ("claims_diversity", None, "claim clusters at the run's first diversity threshold"),
]:
    MEASURES.add(
        _name,
        _claims(_measure),
        _what,
        notebook="08_claims_comprehensiveness_diversity",
        higher_is_better=True,
        binary=False,
        measured_by="judge",
        scale="claims",
        difference=1.0,
    )
for _name, _column, _binary, _by, _what in [
    ("entity_recall", "entity_recall", False, "gold", "gold entities the context held"),
    ("relationship_recall", "relationship_recall", False, "gold", "gold edges the context held, both ends"),
    ("grounding", "grounding", False, "answer", "share of the answer's claims its context supports"),
    ("citation_coverage", "citation_coverage", False, "answer", "share of the answer's citations valid"),
    ("key_fact_correctness", "answer_correct", True, "answer", "every key fact present"),
]:
    MEASURES.add(
        _name,
        _diagnostic(_column),
        _what,
        notebook="09_retrieval_diagnostics",
        higher_is_better=True,
        binary=_binary,
        measured_by=_by,
        scale="0-1",
        difference=0.1,
    )


def observations(measure: str, tables: Tables) -> pd.DataFrame:
    """The measure's per-answer observations from one run's tables (`OBSERVATION_COLUMNS`)."""
    frame = MEASURES.get(measure)(tables)
    return frame.assign(measure=measure)[["measure", *OBSERVATION_COLUMNS]]
