"""Evaluation glue: run methods over questions, score the answers, aggregate with `ragtrial.stats`.

Failed answers (no text because a model call failed) are never scored: their metric cells are
NaN, every mean and test runs on the answered questions only, and the failures are counted in
their own column. Paired comparisons use the questions both methods answered.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ragtrial import metrics, stats
from ragtrial.records import Dataset, Question

if TYPE_CHECKING:  # experiment tables work on answer frames; only run_methods needs live methods
    from ragtrial.config import MethodSettings
    from ragtrial.index import GraphIndex
    from ragtrial.methods import Answer, Method

BINARY_METRICS = {"em", "accuracy"}  # McNemar; every other metric is compared with Wilcoxon


# ---------------------------------------------------------------- questions and answers


def task_questions(dataset: Dataset, task: str, per_type: int | None, seed: int = 0) -> list[Question]:
    """The data set's questions for one task, sampled per type: "qa" (gold answers, or null questions
    that must be declined) or "summarization" (reference summaries); an error when it has none.
    """
    if task not in ("qa", "summarization"):
        raise ValueError(f"task must be 'qa' or 'summarization', not {task!r}")
    if task == "qa":
        pool = [q for q in dataset.questions if q.answers or q.metadata.get("is_null")]
    else:
        pool = [q for q in dataset.questions if q.reference_summaries]
    if not pool:
        hint = (
            "qmsum, squality or odsum"
            if task == "summarization"
            else "generated, multihop_rag, musique or hotpotqa"
        )
        raise ValueError(
            f"data set {dataset.name!r} has no {task} questions; set data.dataset to {hint} "
            "and data.path to its folder (README: Data sets)"
        )
    return select_questions(pool, per_type, seed)


def select_questions(questions: Sequence[Question], per_type: int | None, seed: int = 0) -> list[Question]:
    """A seeded sample of at most `per_type` questions of each question_type (all when None), in the
    original order, so every type is represented even when the budget allows only a few questions.
    """
    if per_type is None:
        return list(questions)
    rng = random.Random(f"{seed}:questions_per_type")
    by_type: dict[str, list[int]] = {}
    for i, q in enumerate(questions):
        by_type.setdefault(q.question_type, []).append(i)
    keep = {i for ids in by_type.values() for i in rng.sample(ids, min(per_type, len(ids)))}
    return [q for i, q in enumerate(questions) if i in keep]


def run_methods(methods: Sequence[Method], questions: Sequence[Question]) -> pd.DataFrame:
    """One row per question x method: the answer or its failure, the context shown (ids, tokens per
    kind), calls, tokens and latency. Sequential: per-answer cost is read off the ledger in order.
    """
    return answers_frame(method.answer(question) for question in questions for method in methods)


def answers_frame(answers: Iterable[Answer]) -> pd.DataFrame:
    """Answers as rows; `tokens_<kind>` columns hold context tokens per kind (0 where absent)."""
    rows = []
    for a in answers:
        rows.append(
            {
                "question_id": a.question_id,
                "method": a.method,
                "text": a.text,
                "failure": a.failure,
                "fallback": a.fallback,
                "route": a.notes.get("route", ""),
                "context_ready": a.context_ready,
                "doc_ids": a.doc_ids,
                "context_ids": list(dict.fromkeys(c for item in a.context for c in item.chunk_ids)),
                "context_items": len(a.context),
                "context_tokens": sum(a.context_tokens.values()),
                **{f"tokens_{kind}": n for kind, n in a.context_tokens.items()},
                "calls": a.calls,
                "cached_calls": a.cached_calls,
                "prompt_tokens": a.prompt_tokens,
                "completion_tokens": a.completion_tokens,
                "latency_s": a.latency_s,
                "notes": json.dumps(a.notes, sort_keys=True, default=str),
                "failures": a.failures,
            }
        )
    frame = pd.DataFrame(rows)
    kinds = [c for c in frame.columns if c.startswith("tokens_")]
    return frame.fillna({c: 0 for c in kinds}).astype({c: int for c in kinds})


def failures_table(answers: pd.DataFrame) -> pd.DataFrame:
    """Every recorded failure (item id, method, stage, kind, detail), fatal or not; `answer_lost`
    says whether the method ended with no answer for that question.
    """
    rows = [
        (r.question_id, r.method, f["stage"], f["kind"], f["detail"], r.failure != "")
        for r in answers.itertuples(index=False)
        for f in r.failures
    ]
    return pd.DataFrame(rows, columns=["question_id", "method", "stage", "kind", "detail", "answer_lost"])


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
            metrics.recall_at_k(d, g, depth)
            for d, g in zip(df.loc[usable, "doc_ids"], df.loc[usable, "gold_doc_ids"], strict=True)
        ]
    out["all_supporting"] = out["recall"].map(lambda r: np.nan if pd.isna(r) else float(r == 1.0))
    return out


def score_qa(answers: pd.DataFrame, questions: Sequence[Question], k: int) -> pd.DataFrame:
    """Per question x method: EM / F1 (max over aliases) / accuracy, NaN for failed answers (a null
    question counts as right only when declined), and the retrieval measures of `_retrieval_scores`.
    """
    df = _with_questions(answers, questions)
    prediction = df["text"].where(df["failure"] == "")
    scored = metrics.qa_scores(df.assign(prediction=prediction), "prediction", "answers", "is_null")
    return pd.concat([scored, _retrieval_scores(df, k)], axis=1).drop(columns=["prediction", "references"])


def score_summaries(
    answers: pd.DataFrame,
    questions: Sequence[Question],
    k: int,
    model_path: str | None = None,
    num_layers: int | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """ROUGE-2 / ROUGE-L (best reference) and BERTScore (local MiniLM unless `model_path`) per
    answered question x method, NaN for failed answers, plus the retrieval measures. Returns the
    scores and BERTScore's settings (model, layer, version).
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
    rouge = pd.DataFrame([metrics.rouge_scores(t, refs) for t, refs in zip(texts, references, strict=True)])
    bert, info = metrics.bertscore(texts, references, model_path=model_path, num_layers=num_layers)
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
        ci = stats.summary_by_group(valid, "method", metric, n_resamples, seed=seed).set_index("method")
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
        stats.summary_by_group(valid, keys, metric, n_resamples, seed=seed)
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
    bootstrap interval, McNemar (binary metrics) or Wilcoxon, Holm across methods; `supported` is
    False when the interval includes zero.
    """
    rows = [
        stats.paired_comparison_table(pair, baseline, metric in BINARY_METRICS, n_resamples, seed=seed)
        for _, pair in _pairs(scores, metric, baseline)
    ]
    if not rows:
        return pd.DataFrame()
    table = pd.concat(rows, ignore_index=True).assign(metric=metric)
    table["p_holm"] = stats.holm_correction(table["p_value"].tolist())["p_holm"].to_numpy()
    return table


def complementarity_table(scores: pd.DataFrame, baseline: str, metric: str = "accuracy") -> pd.DataFrame:
    """Per method, how its correct answers overlap the baseline's on the questions both answered."""
    rows = []
    for method, pair in _pairs(scores, metric, baseline):
        wide = pair.pivot(index="question_id", columns="method", values="score")
        parts = stats.complementarity(wide[method].to_numpy(), wide[baseline].to_numpy())
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
        latency = stats.latency_summary(group["latency_s"])
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


def index_cost_table(manifest: dict[str, Any]) -> pd.DataFrame:
    """What building the index cost (from its manifest): model calls and tokens per stage, and the
    build's wall time; an index built once serves every method and every run that asks for it.
    """
    ledger = pd.DataFrame(
        manifest.get("ledger", []),
        columns=[
            "stage",
            "method",
            "calls",
            "cached",
            "failures",
            "prompt_tokens",
            "completion_tokens",
            "latency_s",
        ],
    )
    total = {
        "stage": "total",
        "method": "",
        **ledger.drop(columns=["stage", "method"]).sum().to_dict(),
        "build_wall_s": manifest.get("build_wall_s", np.nan),
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
    return table.assign(pareto=stats.pareto_front(table, cost_col, quality))


def pareto_plot(front: pd.DataFrame, quality: str, label: str) -> Any:
    """Quality (with its interval) against tokens per question; the Pareto front joined by a line."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    err = [front[quality] - front[f"{quality}_low"], front[f"{quality}_high"] - front[quality]]
    ax.errorbar(front["tokens_per_question"], front[quality], yerr=err, fmt="o", color="grey", alpha=0.6)
    line = front[front["pareto"]].sort_values("tokens_per_question")
    ax.plot(line["tokens_per_question"], line[quality], "-o", color="tab:blue", label="Pareto front")
    for r in front.itertuples(index=False):
        ax.annotate(
            r.method,
            (r.tokens_per_question, getattr(r, quality)),
            textcoords="offset points",
            xytext=(4, 4),
            fontsize=8,
        )
    ax.set(
        xlabel="tokens per question (prompt + completion, all calls)",
        ylabel=f"{label} (95% bootstrap interval)",
        title="Quality against cost",
    )
    ax.legend()
    plt.close(fig)  # shown once, by the notebook displaying the returned figure
    return fig


# ---------------------------------------------------------------- narrative


def index_sizes(index: GraphIndex) -> pd.DataFrame:
    tables = ("documents", "chunks", "entities", "relations", "communities", "community_reports")
    return pd.DataFrame([{t: len(getattr(index, t)) for t in tables}], index=["rows"])


def setup_note(methods: Sequence[Method], unavailable: pd.DataFrame, settings: MethodSettings, k: int) -> str:
    """What ran: methods, baseline, k, budget, prompt, and which methods the index could not support."""
    note = (
        f"Methods: {', '.join(m.name for m in methods)}; baseline **{settings.baseline}**; k = {k}; context "
        f"budget {settings.context_budget} tokens; prompt `{settings.answer_prompt}`, at most "
        f"{settings.answer_max_tokens} tokens."
    )
    if not unavailable.empty:
        note += "\n\nNot run, because the index cannot support them: " + "; ".join(
            f"**{m}**: {r}" for m, r in unavailable.itertuples(index=False)
        )
    return note


def _interval(mean: float, low: float, high: float, digits: int = 2) -> str:
    return f"{mean:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"


def paired_sentences(paired: pd.DataFrame) -> list[str]:
    """One sentence per comparison, saying what the interval supports (includes zero: no claim)."""
    lines = []
    for r in paired.itertuples(index=False):
        head = (
            f"**{r.method}** vs {r.baseline} on {r.metric}: {_interval(r.mean_diff, r.ci_low, r.ci_high)} "
            f"over {r.n} questions both answered ({r.wins} better, {r.losses} worse; {r.test} "
            f"p={r.p_value:.3g}, Holm {r.p_holm:.3g})"
        )
        if r.supported:
            direction = "better" if r.mean_diff > 0 else "worse"
            lines.append(
                f"{head}: the interval excludes zero, so {r.method} did {direction} than {r.baseline} "
                "on these questions."
            )
        else:
            lines.append(f"{head}: the interval includes zero, so **no claim** either way.")
    return lines


def complementarity_sentences(comp: pd.DataFrame, metric: str = "accuracy") -> list[str]:
    return [
        f"**{r.method}** was right where {r.baseline} was wrong on {r.only_method} of {r.n} questions "
        f"({r.only_method_share:.0%}), the reverse on {r.only_baseline} ({r.only_baseline_share:.0%}); "
        f"both right on {r.both}, neither on {r.neither} ({metric})."
        for r in comp.itertuples(index=False)
    ]


def failure_sentence(summary: pd.DataFrame) -> str:
    failed = summary[summary["failures"] > 0]
    if failed.empty:
        return "Every method produced an answer for every question."
    parts = ", ".join(f"{r.method} {r.failures} of {r.questions}" for r in failed.itertuples(index=False))
    return (
        f"Answers lost to model failures (excluded from every mean and test, listed in the failures "
        f"table): {parts}."
    )


def findings(
    summary: pd.DataFrame,
    paired: pd.DataFrame,
    comp: pd.DataFrame,
    answers: pd.DataFrame,
    *,
    quality: str,
    recall: str | None,
    embedded: bool,
) -> str:
    """The narrative of a results section, generated from the tables: what they support and what not."""
    lines = [failure_sentence(summary)]
    scored = summary.dropna(subset=[quality]).sort_values(quality, ascending=False)
    if not scored.empty:
        top = scored.iloc[0]
        lines.append(
            f"Highest mean {quality}: **{top.method}**, {top[quality]:.2f} "
            f"[{top[f'{quality}_low']:.2f}, {top[f'{quality}_high']:.2f}] over {int(top[f'{quality}_n'])} "
            "answered questions. A ranking of point estimates is not a finding; the paired comparisons "
            "below say which differences the data support."
        )
    lines += paired_sentences(paired[paired["metric"] == quality]) if not paired.empty else []
    lines += complementarity_sentences(comp)
    if recall and recall in summary and summary[recall].notna().any():
        shown = summary.dropna(subset=[recall])
        values = ", ".join(f"{m} {v:.2f}" for m, v in zip(shown["method"], shown[recall], strict=True))
        model_free = sorted(
            m for m, g in answers.groupby("method") if (g["calls"] == 1).all() and m in set(shown.method)
        )
        lines.append(
            f"Supporting-passage {recall} (share of gold documents among the passages shown): {values}. "
            f"Methods whose only model call is the answer ({', '.join(model_free) or 'none'}) retrieved "
            "without a model, so their recall does not depend on the generator at all."
        )
        if not paired.empty and (paired["metric"] == recall).any():
            lines += paired_sentences(paired[paired["metric"] == recall])
    n = int(summary["questions"].max()) if not summary.empty else 0
    lines.append(
        f"Every method saw the same {n} questions; with so few, intervals are wide, and a difference "
        "whose interval includes zero is reported as no claim rather than as a trend."
    )
    if embedded:
        lines.append(
            "These answers come from the embedded Gemma 3 270M base model: the answer metrics show the "
            "pipeline works end to end, not how the methods compare with a capable generator. The "
            "retrieval recall numbers, computed against the data set's gold passages, are the "
            "trustworthy part of this run."
        )
    return "\n\n".join(lines)
