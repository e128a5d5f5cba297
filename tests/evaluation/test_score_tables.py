"""Experiment tables on hand-made answer frames: failures are counted, never scored."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ragtrial.config.methods import SummarizationSettings
from ragtrial.evaluation.run_methods import failures_table, fallback_table
from ragtrial.evaluation.score_tables import (
    by_question_type,
    complementarity_table,
    cost_table,
    index_cost_table,
    method_summary,
    paired_by_fallback,
    paired_table,
    pareto_table,
    score_qa,
    score_summaries,
    summarization_bertscore_model,
)
from ragtrial.evaluation.task_findings import task_findings
from ragtrial.questions.sampling import select_questions, task_questions
from ragtrial.records import Dataset, Question
from ragtrial.report.narrative.tasks import findings_text, paired_sentences
from ragtrial.stats import holm_correction, p95, paired_comparison_table


def q(
    qid: str, answers: list[str], qtype: str = "single_hop", gold: list[str] | None = None, **meta
) -> Question:
    return Question(
        question_id=qid,
        question=f"question {qid}?",
        answers=answers,
        question_type=qtype,
        gold_doc_ids=gold or [],
        metadata=meta,
    )


def row(
    qid: str,
    method: str,
    text: str,
    failure: str = "",
    doc_ids: list[str] | None = None,
    ready: bool = True,
    calls: int = 1,
    prompt_tokens: int = 100,
    latency: float = 1.0,
) -> dict:
    return {
        "question_id": qid,
        "method": method,
        "text": "" if failure else text,
        "failure": failure,
        "fallback": "",
        "route": "",
        "context_ready": ready,
        "doc_ids": doc_ids or [],
        "context_ids": [],
        "context_items": len(doc_ids or []),
        "context_tokens": 10 * len(doc_ids or []),
        "tokens_chunk": 10 * len(doc_ids or []),
        "calls": calls,
        "cached_calls": 0,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": 5,
        "latency_s": latency,
        "notes": "{}",
        "failures": [{"stage": "answer", "kind": failure, "detail": "boom"}] if failure else [],
    }


QUESTIONS = [
    q("q1", ["Paris", "City of Light"], gold=["d1"]),
    q("q2", ["1999"], "multi_hop", gold=["d2", "d3"]),
    q("q3", ["Insufficient information."], "null_query", gold=["d4"], is_null=True),
    q("q4", ["Berlin"], "multi_hop", gold=["d5"]),
]


@pytest.fixture
def answers() -> pd.DataFrame:
    return pd.DataFrame(
        [
            row("q1", "closed_book", "City of Light"),
            row("q2", "closed_book", "2001"),
            row("q3", "closed_book", "Lyon"),
            row("q4", "closed_book", "Berlin"),
            row("q1", "naive_rag", "Paris", doc_ids=["d1", "d9"]),
            row("q2", "naive_rag", "in 1999", doc_ids=["d2", "d7", "d8"]),
            row("q3", "naive_rag", "I don't know", doc_ids=["d6"]),
            row("q4", "naive_rag", "Munich", doc_ids=["d7"]),
            row("q1", "graph_walk", "", failure="parse", ready=False, calls=2, latency=3.0),
            row("q2", "graph_walk", "1999", doc_ids=["d3", "d2"]),
            row("q3", "graph_walk", "Insufficient information.", doc_ids=[]),
            row("q4", "graph_walk", "", failure="timeout", doc_ids=["d5"], latency=9.0),
        ]
    )


def test_score_qa_leaves_failures_unscored_and_credits_declines_only_on_null_questions(answers):
    scores = score_qa(answers, QUESTIONS, k=1).set_index(["question_id", "method"])
    assert scores.loc[("q1", "closed_book"), "em"] == 1.0  # alias
    assert scores.loc[("q2", "naive_rag"), ["em", "f1", "accuracy"]].tolist() == [
        0.0,
        pytest.approx(2 / 3),
        1.0,
    ]
    assert (
        scores.loc[("q3", "naive_rag"), "accuracy"] == 1.0 and scores.loc[("q3", "closed_book"), "em"] == 0.0
    )
    for key in [("q1", "graph_walk"), ("q4", "graph_walk")]:
        assert scores.loc[key, ["em", "f1", "accuracy"]].isna().all()
    # retrieval: the first k distinct documents shown, against the gold documents
    assert scores.loc[("q2", "naive_rag"), ["recall@1", "recall", "all_supporting"]].tolist() == [
        0.5,
        0.5,
        0.0,
    ]
    assert scores.loc[("q2", "graph_walk"), ["recall@1", "recall", "all_supporting"]].tolist() == [
        0.5,
        1.0,
        1.0,
    ]
    assert scores.loc[("q4", "graph_walk"), "recall"] == 1.0  # generation failed, but its retrieval happened
    assert math.isnan(scores.loc[("q1", "graph_walk"), "recall"])  # retrieval itself failed
    assert scores.loc[("q3", "graph_walk"), "recall"] == 0.0  # a passage method that showed none
    assert scores.xs("closed_book", level="method")["recall"].isna().all()  # never shows passages


def test_score_qa_scores_contradictory_questions_by_whether_the_conflict_is_surfaced():
    # the generated corpus's contradictory question: two outlets name two different headquarters
    questions = [q("c1", ["Tucson", "Phoenix"], "contradictory", gold=["d1", "d2"])]
    answers = pd.DataFrame(
        [
            row("c1", "naive_rag", "Tucson"),
            row("c1", "hybrid", "Tucson or Phoenix: the sources disagree"),
        ]
    )
    scores = score_qa(answers, questions, k=1).set_index("method")
    assert scores.loc["naive_rag", ["em", "f1", "accuracy"]].tolist() == [0.0, 0.0, 0.0]
    assert scores.loc["hybrid", ["em", "f1", "accuracy"]].tolist() == [1.0, 1.0, 1.0]


def test_summary_reports_token_precision_and_recall_beside_f1(answers):
    scores = score_qa(answers, QUESTIONS, k=1).set_index(["question_id", "method"])
    # "in 1999" against "1999": precision 1/2 ("in" is extra), recall 1
    assert scores.loc[("q2", "naive_rag"), ["token_precision", "token_recall"]].tolist() == [0.5, 1.0]
    summary = method_summary(
        scores.reset_index(), ["f1", "token_precision", "token_recall"], n_resamples=200
    ).set_index("method")
    assert {"token_precision", "token_precision_low", "token_recall_high"} <= set(summary.columns)
    # naive_rag: q1 "Paris" (1, 1), q2 (1/2, 1), q3 declined on a null question (1, 1), q4 "Munich" (0, 0)
    assert summary.loc["naive_rag", "token_precision"] == pytest.approx(2.5 / 4)
    assert summary.loc["naive_rag", "token_recall"] == pytest.approx(3 / 4)


def test_summary_excludes_failures_from_means_and_counts_them(answers):
    scores = score_qa(answers, QUESTIONS, k=1)
    summary = method_summary(scores, ["em", "recall"], n_resamples=200).set_index("method")
    assert summary.loc["graph_walk", ["questions", "failures", "em_n"]].tolist() == [4, 2, 2]
    assert summary.loc["graph_walk", "em"] == 1.0  # both answered questions exact, failures not zeros
    assert summary.loc["naive_rag", "em"] == 0.5 and summary.loc["naive_rag", "failures"] == 0
    assert summary.loc["graph_walk", "recall_n"] == 3
    assert summary.loc["naive_rag", "em_low"] <= 0.5 <= summary.loc["naive_rag", "em_high"]
    per_type = by_question_type(scores, "em", n_resamples=200).set_index(["method", "question_type"])
    assert per_type.loc[("graph_walk", "multi_hop"), ["n", "failures"]].tolist() == [1, 1]
    assert per_type.loc[("graph_walk", "single_hop"), "failures"] == 1
    assert pd.isna(per_type.loc[("graph_walk", "single_hop"), "n"])  # nothing answered: no mean


def test_paired_table_compares_on_questions_both_answered_with_the_stats_module(answers):
    scores = score_qa(answers, QUESTIONS, k=1)
    table = paired_table(scores, "accuracy", "naive_rag", n_resamples=300).set_index("method")
    assert table.loc["graph_walk", "n"] == 2 and table.loc["closed_book", "n"] == 4
    assert table.loc["closed_book", "test"] == "exact binomial"  # McNemar on a binary metric
    both = scores[
        scores["question_id"].isin(["q2", "q3"]) & scores["method"].isin(["graph_walk", "naive_rag"])
    ]
    expected = paired_comparison_table(
        both.rename(columns={"accuracy": "score"}), "naive_rag", True, n_resamples=300
    ).iloc[0]
    assert table.loc["graph_walk", ["mean_diff", "ci_low", "ci_high", "p_value"]].tolist() == pytest.approx(
        [expected.mean_diff, expected.ci_low, expected.ci_high, expected.p_value]
    )
    holm = holm_correction(table["p_value"].tolist())["p_holm"].to_numpy()
    assert np.allclose(table["p_holm"], holm)
    assert paired_table(scores, "f1", "naive_rag", n_resamples=300)["test"].str.startswith("wilcoxon").all()
    sentences = paired_sentences(table.reset_index())
    assert all("no claim" in s for s, ok in zip(sentences, table["supported"], strict=True) if not ok)
    summary = method_summary(scores, ["accuracy", "recall@1"], n_resamples=200)
    paired = table.reset_index()
    found = task_findings(summary, paired, answers, quality="accuracy", recall="recall@1", embedded=True)
    text = findings_text(
        summary,
        paired,
        complementarity_table(scores, "naive_rag"),
        fallback_table(answers),
        found,
        quality="accuracy",
        recall="recall@1",
    )
    assert "graph_walk 2 of 4" in text and "naive_rag 0.38" in text and "Gemma 3 270M" in text
    assert "(naive_rag)" in text  # the only passage method whose every answer took one model call


def test_paired_table_decides_claims_on_the_holm_adjusted_p():
    # Three methods each better than the baseline on all 6 questions: each raw Wilcoxon p is 1/32
    # (below 0.05), Holm over the three lifts every p to 3/32, so no claim holds although each interval
    # excludes zero.
    rows = [
        {"question_id": f"q{i}", "method": method, "f1": 0.0 if method == "base" else 0.1 + 0.01 * i + shift}
        for i in range(6)
        for method, shift in (("base", 0.0), ("a", 0.0), ("b", 0.05), ("c", 0.1))
    ]
    table = paired_table(pd.DataFrame(rows), "f1", "base", n_resamples=300)
    assert (table["p_value"] < 0.05).all() and (table["ci_low"] > 0).all()
    assert table["p_holm"].tolist() == pytest.approx([3 / 32] * 3)
    assert not table["supported"].any()


def test_complementarity_counts_on_common_questions(answers):
    scores = score_qa(answers, QUESTIONS, k=1)
    comp = complementarity_table(scores, "naive_rag").set_index("method")
    # closed_book right on q1, q4; naive_rag right on q1, q2, q3
    assert comp.loc["closed_book", ["n", "only_method", "only_baseline", "both", "neither"]].tolist() == [
        4,
        1,
        2,
        1,
        0,
    ]
    assert comp.loc["graph_walk", "n"] == 2


def test_cost_table_counts_failed_answers_because_they_were_paid_for(answers):
    cost = cost_table(answers).set_index("method")
    assert cost.loc["graph_walk", "calls_per_question"] == 1.25
    assert cost.loc["graph_walk", "latency_p95_s"] == pytest.approx(p95([3.0, 1.0, 1.0, 9.0]))
    assert cost.loc["naive_rag", "tokens_per_question"] == 105
    assert cost.loc["naive_rag", "context_tokens_chunk"] == pytest.approx(17.5)
    failures = failures_table(answers)
    assert sorted(failures["kind"]) == ["parse", "timeout"] and failures["answer_lost"].all()


def test_pareto_marks_undominated_methods(answers):
    scores = score_qa(answers, QUESTIONS, k=1)
    summary = method_summary(scores, ["accuracy"], n_resamples=200)
    cost = pd.DataFrame(
        {"method": ["closed_book", "naive_rag", "graph_walk"], "tokens_per_question": [50, 100, 200]}
    )
    front = pareto_table(summary, cost, "accuracy").set_index("method")["pareto"]
    # accuracy: closed_book 0.5, naive_rag 0.75, graph_walk 1.0 (on its two answered questions)
    assert front.to_dict() == {"closed_book": True, "naive_rag": True, "graph_walk": True}
    cost["tokens_per_question"] = [50, 300, 200]
    assert not pareto_table(summary, cost, "accuracy").set_index("method").loc["naive_rag", "pareto"]


def test_select_questions_samples_every_type():
    questions = [q(f"q{i}", ["x"], qtype) for i, qtype in enumerate(["a"] * 5 + ["b"] * 1 + ["c"] * 3)]
    chosen = select_questions(questions, 2, seed=1)
    assert [x.question_type for x in chosen].count("a") == 2 and len(chosen) == 5
    assert [x.question_id for x in chosen] == sorted(
        (x.question_id for x in chosen), key=lambda s: int(s[1:])
    )
    assert select_questions(questions, None) == questions


def test_task_questions_split_qa_from_summarization_and_name_an_empty_task():
    summary = Question(
        question_id="s", question="Summarize X.", question_type="summary", reference_summaries=["X."]
    )
    null = q("n", [], "null", is_null=True)
    dataset = Dataset(
        name="mixed", documents=[], questions=[q("a", ["x"]), summary, null, q("g", [], "global")]
    )
    assert [x.question_id for x in task_questions(dataset, "qa", None)] == ["a", "n"]
    assert [x.question_id for x in task_questions(dataset, "summarization", None)] == ["s"]
    with pytest.raises(ValueError, match="'only_qa' has no summarization questions"):
        task_questions(Dataset(name="only_qa", documents=[], questions=[q("a", ["x"])]), "summarization", 3)


def test_score_summaries_rouge_and_bertscore_skip_failures():
    questions = [
        Question(question_id=f"s{i}", question="Summarize.", reference_summaries=[ref])
        for i, ref in enumerate(
            ["The team chose a rubber case for the remote.", "They agreed to meet again next week."]
        )
    ]
    answers = pd.DataFrame(
        [
            row("s0", "naive_rag", "The team chose a rubber case."),
            row("s1", "naive_rag", "", failure="timeout"),
        ]
    )
    scores, info = score_summaries(answers, questions, k=5)
    assert scores.loc[0, "rouge2_f"] > 0.4 and scores.loc[0, "bertscore_f1"] > 0.5
    assert scores.loc[1, ["rouge2_f", "rougeL_f", "bertscore_f1"]].isna().all()
    assert info["num_layers"] == info["model_num_layers"] and "MiniLM" in info["model_name"]


def fallback_answers() -> pd.DataFrame:
    """Six questions; graph_walk falls back on q1 and q2 (where it is wrong), is right elsewhere;
    hybrid is right on q1, q2 and q3 only; q6's graph_walk context failed to build.
    """
    rows = []
    for i in range(1, 7):
        qid = f"q{i}"
        rows.append(dict(question_id=qid, method="hybrid", em=float(i <= 3), fallback="", context_ready=True))
        rows.append(
            dict(
                question_id=qid,
                method="graph_walk",
                em=float(i > 2),
                fallback="no usable entity -> vector" if i <= 2 else "",
                context_ready=i != 6,
            )
        )
    return pd.DataFrame(rows)


def test_fallbacks_are_counted_and_pairs_are_also_tested_without_them():
    scores = fallback_answers()
    fallbacks = fallback_table(scores).set_index("method")
    assert fallbacks.loc["graph_walk", ["retrieved", "fallbacks"]].tolist() == [5, 2]
    assert fallbacks.loc["graph_walk", "fallback_rate"] == pytest.approx(2 / 5)
    assert fallbacks.loc["graph_walk", "most_common"] == "no usable entity -> vector"
    assert fallbacks.loc["hybrid", "fallback_rate"] == 0
    paired = paired_by_fallback(scores, ["em"], "hybrid", fallbacks.reset_index(), n_resamples=200)
    by_subset = paired.set_index("subset")
    assert by_subset.loc["all", ["n", "wins", "losses"]].tolist() == [6, 3, 2]
    # Without q1 and q2 (graph_walk fell back there): the questions neither method fell back on.
    assert by_subset.loc["no fallback", ["n", "wins", "losses"]].tolist() == [4, 3, 0]
    assert paired["method_fallback_rate"].tolist() == pytest.approx([2 / 5, 2 / 5])
    assert (paired["baseline_fallback_rate"] == 0).all() and set(paired["metric"]) == {"em"}
    summary = method_summary(scores.assign(failure=""), ["em"], 200)
    answers = scores.assign(calls=1, route="")
    found = task_findings(summary, paired, answers, quality="em", recall=None, embedded=False)
    text = findings_text(
        summary, paired, pd.DataFrame(), fallbacks.reset_index(), found, quality="em", recall=None
    )
    assert "**graph_walk** 2 of 5 (40%; most often `no usable entity -> vector`)" in text
    tail = text.split("On the questions where neither method fell back:")[1]
    assert "over 4 questions both answered (3 better, 0 worse" in tail


def test_summarization_bertscore_model_follows_the_settings(tmp_path, monkeypatch):
    import huggingface_hub.constants

    default = summarization_bertscore_model(SummarizationSettings())
    assert "MiniLM" in default.name and not default.comparable_with_published
    assert summarization_bertscore_model(SummarizationSettings(bertscore_layers=3)).num_layers == 3
    # paper runs ask for bert-score's published setting: absent, they fail before any answer is paid for
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(ValueError, match=r"summarization.bertscore_standard is true .* Hugging Face cache"):
        summarization_bertscore_model(SummarizationSettings(bertscore_standard=True))
    with pytest.raises(
        ValueError, match=r"from summarization.bertscore_model: .*does not hold roberta-large"
    ):
        summarization_bertscore_model(
            SummarizationSettings(bertscore_standard=True, bertscore_model=str(tmp_path))
        )
    with pytest.raises(ValueError, match="bertscore_layers"):
        SummarizationSettings(bertscore_standard=True, bertscore_layers=24)


def test_index_cost_table_sums_the_indexes_of_every_document():
    def manifest(calls: int, wall: float) -> dict:
        cost = {
            "calls": calls,
            "cached": 0,
            "failures": 0,
            "prompt_tokens": 10 * calls,
            "completion_tokens": 1,
        }
        rows = [{"stage": s, "method": "index", **cost, "latency_s": 1.0} for s in ("extract_llm", "reports")]
        return {"ledger": rows, "build_wall_s": wall}

    one = index_cost_table(manifest(2, 5.0)).set_index("stage")
    assert one.loc["total", ["calls", "prompt_tokens", "build_wall_s"]].tolist() == [4, 40, 5.0]
    both = index_cost_table(manifest(2, 5.0), manifest(3, 7.0)).set_index("stage")
    assert list(both.index) == ["extract_llm", "reports", "total"]
    assert both.loc["extract_llm", "calls"] == 5
    assert both.loc["total", ["calls", "prompt_tokens", "build_wall_s"]].tolist() == [10, 100, 12.0]
