"""Scoring tables: QA and summary scores per answer, per-method means with bootstrap intervals,
paired comparisons against a baseline, complementarity, cost and the quality/cost Pareto front.

Failed answers (no text because a model call failed) are never scored: their metric cells are
NaN, every mean and test runs on the answered questions only, and the failures are counted in
their own column. Paired comparisons use the questions both methods answered; which paired test
applies is the metric's own (`ragtrial.evaluation.answer_metrics.METRICS`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ragtrial.config.methods import SummarizationSettings
from ragtrial.evaluation.answer_metrics import (
    CONTRADICTORY_TYPE,
    BertScoreModel,
    bertscore,
    default_bertscore_model,
    metric_entry,
    qa_scores,
    recall_at_k,
    rouge_scores,
    standard_bertscore_model,
)
from ragtrial.records import Question
from ragtrial.stats import (
    complementarity,
    latency_summary,
    paired_comparison_table,
    pareto_front,
    summary_by_group,
    with_holm_claims,
)


def _with_questions(answers: pd.DataFrame, questions: Sequence[Question]) -> pd.DataFrame:
    qs = pd.DataFrame(
        [
            {
                "question_id": q.question_id,
                "question_type": q.question_type,
                "answers": q.answers,
                "gold_doc_ids": q.gold_doc_ids,
                "references": q.reference_summaries,
                "is_null": bool(q.metadata.get("is_null", False)),
                "is_contradictory": q.question_type == CONTRADICTORY_TYPE,
            }
            for q in questions
        ]
    )
    return answers.merge(qs, on="question_id", how="left", validate="many_to_one")


# ---------------------------------------------------------------- scoring


def _retrieval_scores(df: pd.DataFrame, k: int) -> pd.DataFrame:
    """recall@k (share of gold documents among the first k distinct documents of the passages
    shown), recall over all passages shown, and whether all were shown. NaN for methods that never
    show passages (closed book, triplets, global search), for questions without gold documents,
    and where the context step itself failed.
    """
    shows_passages = df.groupby("method")["doc_ids"].transform(lambda ids: ids.map(len).gt(0).any())
    usable = shows_passages & (df["gold_doc_ids"].map(len) > 0) & df["context_ready"]
    out = pd.DataFrame(index=df.index)
    for name, depth in ((f"recall@{k}", k), ("recall", None)):
        out[name] = np.nan
        out.loc[usable, name] = [
            recall_at_k(d, g, depth)
            for d, g in zip(df.loc[usable, "doc_ids"], df.loc[usable, "gold_doc_ids"], strict=True)
        ]
    out["all_supporting"] = out["recall"].map(lambda r: np.nan if pd.isna(r) else float(r == 1.0))
    return out


def score_qa(answers: pd.DataFrame, questions: Sequence[Question], k: int) -> pd.DataFrame:
    """Per question x method: EM / F1 / token precision and recall (best alias) / accuracy, NaN for
    failed answers (a null question counts as right only when declined, a contradictory one only
    when the answer surfaces the conflict: `metrics.score_qa`), and the retrieval measures of
    `_retrieval_scores`.
    """
    df = _with_questions(answers, questions)
    prediction = df["text"].where(df["failure"] == "")
    scored = qa_scores(
        df.assign(prediction=prediction), "prediction", "answers", "is_null", "is_contradictory"
    )
    return pd.concat([scored, _retrieval_scores(df, k)], axis=1).drop(columns=["prediction", "references"])


def summarization_bertscore_model(settings: SummarizationSettings) -> BertScoreModel:
    """The BERTScore model `settings` ask for, checked before any answer is paid for: bert-score's
    published setting (`bertscore_standard`) or a local model, labelled not comparable.
    Raises ValueError naming the setting when the standard model is not on this machine.
    """
    if not settings.bertscore_standard:
        return default_bertscore_model(settings.bertscore_model, settings.bertscore_layers)
    try:
        return standard_bertscore_model(settings.bertscore_model)
    except FileNotFoundError as error:
        where = "summarization.bertscore_model" if settings.bertscore_model else "the Hugging Face cache"
        raise ValueError(
            f"summarization.bertscore_standard is true but roberta-large is not usable from {where}: "
            f"{error}. Put the model there (on a machine with network: huggingface-cli download "
            "roberta-large), or set summarization.bertscore_standard=false for the bundled MiniLM, "
            "reported as not comparable with published BERTScore"
        ) from error


def score_summaries(
    answers: pd.DataFrame,
    questions: Sequence[Question],
    k: int,
    bertscore_model: BertScoreModel | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """ROUGE-2 / ROUGE-L (best reference) and BERTScore (the bundled MiniLM unless `bertscore_model`)
    per answered question x method, NaN for failed answers, plus the retrieval measures. Returns the
    scores and BERTScore's settings (model, layer, rescaling, version, and the report's `label`).
    """
    df = _with_questions(answers, questions)
    answered = df["failure"] == ""
    out = pd.concat([df.drop(columns=["answers"]), _retrieval_scores(df, k)], axis=1)
    columns = [
        "rouge2_p",
        "rouge2_r",
        "rouge2_f",
        "rougeL_f",
        "bertscore_precision",
        "bertscore_recall",
        "bertscore_f1",
    ]
    out[columns] = np.nan
    if not answered.any():
        return out.drop(columns=["references"]), {}
    texts, references = list(df.loc[answered, "text"]), list(df.loc[answered, "references"])
    rouge = pd.DataFrame([rouge_scores(t, refs) for t, refs in zip(texts, references, strict=True)])
    bert, info = bertscore(texts, references, bertscore_model)
    out.loc[answered, columns[:4]] = rouge[columns[:4]].to_numpy()
    out.loc[answered, columns[4:]] = bert[["precision", "recall", "f1"]].to_numpy()
    return out.drop(columns=["references"]), info


# ---------------------------------------------------------------- aggregates


def method_summary(
    scores: pd.DataFrame, metric_names: Sequence[str], n_resamples: int = 2000, seed: int = 0
) -> pd.DataFrame:
    """Per method: questions, failures (not scored), and per metric the mean with a 95% bootstrap
    interval over the questions that have a value.
    """
    base = scores.groupby("method", sort=False).agg(
        questions=("question_id", "size"), failures=("failure", lambda f: int((f != "").sum()))
    )
    for metric in metric_names:
        valid = scores[scores[metric].notna()]
        if valid.empty:
            continue
        ci = summary_by_group(valid, "method", metric, n_resamples, seed=seed).set_index("method")
        base = base.join(
            ci.rename(
                columns={
                    "n": f"{metric}_n",
                    "mean": metric,
                    "ci_low": f"{metric}_low",
                    "ci_high": f"{metric}_high",
                }
            )
        )
    return base.reset_index()


def by_question_type(
    scores: pd.DataFrame, metric: str, n_resamples: int = 2000, seed: int = 0
) -> pd.DataFrame:
    """Mean `metric` with 95% bootstrap interval per method x question type, failures counted apart."""
    keys = ["method", "question_type"]
    failures = (
        scores.groupby(keys, sort=False)["failure"].agg(lambda f: int((f != "").sum())).rename("failures")
    )
    valid = scores[scores[metric].notna()]
    table = (
        summary_by_group(valid, keys, metric, n_resamples, seed=seed)
        if not valid.empty
        else pd.DataFrame(columns=[*keys, "n", "mean", "ci_low", "ci_high"])
    )
    return table.merge(failures.reset_index(), on=keys, how="outer").assign(metric=metric)


def _pairs(scores: pd.DataFrame, metric: str, baseline: str) -> Iterable[tuple[str, pd.DataFrame]]:
    """(method, long frame of method + baseline scores on the questions both have a value for)."""
    wide = scores.pivot(index="question_id", columns="method", values=metric)
    if baseline not in wide.columns:
        raise ValueError(f"baseline {baseline!r} is not among the scored methods {list(wide.columns)}")
    for method in (m for m in pd.unique(scores["method"]) if m != baseline):
        both = wide[[method, baseline]].dropna()
        if not both.empty:
            yield (
                method,
                both.reset_index().melt(id_vars="question_id", var_name="method", value_name="score"),
            )


def paired_table(
    scores: pd.DataFrame, metric: str, baseline: str, n_resamples: int = 2000, seed: int = 0
) -> pd.DataFrame:
    """Each method against `baseline` on the questions both answered: mean difference with a paired
    bootstrap interval, the metric's paired test (McNemar or Wilcoxon), Holm across methods; `supported` is
    the claim rule on the Holm-adjusted p (`stats.with_holm_claims`).
    """
    binary = metric_entry(metric).metadata["paired_test"] == "mcnemar"
    rows = [
        paired_comparison_table(pair, baseline, binary, n_resamples, seed=seed)
        for _, pair in _pairs(scores, metric, baseline)
    ]
    if not rows:
        return pd.DataFrame()
    # Each pair was tested alone; Holm and the claim rule apply across the methods compared.
    return with_holm_claims(pd.concat(rows, ignore_index=True).assign(metric=metric))


def paired_by_fallback(
    scores: pd.DataFrame,
    metrics: Sequence[str],
    baseline: str,
    fallbacks: pd.DataFrame,
    n_resamples: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """`paired_table` for each metric twice: on all the questions both answered (`subset` "all") and
    on those where neither method's retrieval fell back (`subset` "no fallback"), each row with the
    method's and the baseline's fallback rate from `fallbacks` (`evaluation.run_methods.fallback_table`).
    """
    # A fallen-back answer's scores are left out, so the pairs keep the questions neither fell back on.
    kept = scores.assign(**{m: scores[m].where(scores["fallback"] == "") for m in metrics})
    tables = [
        paired_table(frame, metric, baseline, n_resamples, seed).assign(subset=subset)
        for subset, frame in (("all", scores), ("no fallback", kept))
        for metric in metrics
    ]
    tables = [t for t in tables if not t.empty]
    if not tables:
        return pd.DataFrame()
    table = pd.concat(tables, ignore_index=True)
    rate = fallbacks.set_index("method")["fallback_rate"]
    return table.assign(
        method_fallback_rate=table["method"].map(rate), baseline_fallback_rate=table["baseline"].map(rate)
    )


def complementarity_table(scores: pd.DataFrame, baseline: str, metric: str = "accuracy") -> pd.DataFrame:
    """Per method, how its correct answers overlap the baseline's on the questions both answered."""
    rows = []
    for method, pair in _pairs(scores, metric, baseline):
        wide = pair.pivot(index="question_id", columns="method", values="score")
        parts = complementarity(wide[method].to_numpy(), wide[baseline].to_numpy())
        row = {"method": method, "baseline": baseline, "n": len(wide)}
        for key, label in (
            ("only_a", "only_method"),
            ("only_b", "only_baseline"),
            ("both", "both"),
            ("neither", "neither"),
        ):
            row |= {label: parts[key]["count"], f"{label}_share": parts[key]["share"]}
        rows.append(row)
    return pd.DataFrame(rows)


def cost_table(answers: pd.DataFrame) -> pd.DataFrame:
    """Per method and question: calls, prompt/completion tokens, context tokens per kind, latency
    mean and p95 (failed answers included: they were paid for); totals for the whole run.
    """
    kinds = [c for c in answers.columns if c.startswith("tokens_")]
    rows = []
    for method, group in answers.groupby("method", sort=False):
        latency = latency_summary(group["latency_s"])
        row = {
            "method": method,
            "questions": len(group),
            "calls_per_question": group["calls"].mean(),
            "cached_share": group["cached_calls"].sum() / max(1, group["calls"].sum()),
            "prompt_tokens_per_question": group["prompt_tokens"].mean(),
            "completion_tokens_per_question": group["completion_tokens"].mean(),
        }
        row["tokens_per_question"] = row["prompt_tokens_per_question"] + row["completion_tokens_per_question"]
        row |= {f"context_{c}": group[c].mean() for c in kinds}
        row |= {
            "latency_mean_s": latency["mean"],
            "latency_p95_s": latency["p95"],
            "total_prompt_tokens": int(group["prompt_tokens"].sum()),
            "total_completion_tokens": int(group["completion_tokens"].sum()),
        }
        rows.append(row)
    return pd.DataFrame(rows)


def index_cost_table(*manifests: dict[str, Any]) -> pd.DataFrame:
    """What building the index cost (from its manifest): model calls and tokens per stage, and the
    build's wall time; an index built once serves every method and every run that asks for it.
    Given one manifest per document's index, each stage's rows and the wall times are summed.
    """
    columns = [
        "stage",
        "method",
        "calls",
        "cached",
        "failures",
        "prompt_tokens",
        "completion_tokens",
        "latency_s",
    ]
    ledger = pd.DataFrame(
        [row for manifest in manifests for row in manifest.get("ledger", [])], columns=columns
    )
    ledger = ledger.groupby(["stage", "method"], sort=False, as_index=False).sum()
    total = {
        "stage": "total",
        "method": "",
        **ledger.drop(columns=["stage", "method"]).sum().to_dict(),
        "build_wall_s": sum(manifest.get("build_wall_s", np.nan) for manifest in manifests),
    }
    return pd.concat([ledger, pd.DataFrame([total])], ignore_index=True)


def pareto_table(
    summary: pd.DataFrame, cost: pd.DataFrame, quality: str, cost_col: str = "tokens_per_question"
) -> pd.DataFrame:
    """Quality against tokens per question, with the methods no other method dominates marked
    (empty when no method has a `quality` value, e.g. every answer failed).
    """
    columns = ["method", quality, f"{quality}_low", f"{quality}_high"]
    if quality not in summary:
        return pd.DataFrame(columns=[*columns, cost_col, "pareto"])
    table = summary[columns].merge(cost[["method", cost_col]], on="method").dropna(subset=[quality])
    return table.assign(pareto=pareto_front(table, cost_col, quality))
