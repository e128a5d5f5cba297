"""Notebook 11: each upstream system beside the kit's reimplementation of it, on the same questions.

How far does the kit's fast version stand in for the original? Per (upstream, twin) pair and
question: how much of the context they retrieved is the same (Jaccard overlap of the index ids
each showed, per kind of id: passages, entities, relations, communities; undefined when neither
showed that kind), how much their answers agree (token F1 and ROUGE-L F between the two answers),
and what each cost (calls, tokens, seconds). A pair with a failed side is kept apart and counted,
never scored.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ragtrial.evaluation.answer_metrics import rouge_scores, token_f1
from ragtrial.stats import bootstrap_mean_ci

ID_KINDS = {
    "passages": "context_ids",
    "entities": "context_entity_ids",
    "relations": "context_relation_ids",
    "communities": "context_community_ids",
}
COST_COLUMNS = ["calls", "cached_calls", "prompt_tokens", "completion_tokens", "latency_s"]
SIDE_BY_SIDE_COLUMNS = [
    "upstream",
    "twin",
    "question_id",
    "status",
    *[f"overlap_{kind}" for kind in ID_KINDS],
    "answer_f1",
    "answer_rouge_l",
    *[f"{side}_{column}" for column in COST_COLUMNS for side in ("upstream", "twin")],
]


def jaccard(a: Sequence[str], b: Sequence[str]) -> float:
    """|a ∩ b| / |a ∪ b|; NaN when both are empty (nothing of that kind was shown: undefined, not 0)."""
    union = set(a) | set(b)
    return len(set(a) & set(b)) / len(union) if union else float("nan")


def side_by_side(answers: pd.DataFrame, pairs: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """One row per (upstream, twin, question): both answered (`status` ok), or which side failed;
    the overlap per id kind, the answer agreement and both sides' cost.
    """
    rows: list[dict] = []
    if answers.empty:  # no question was asked (their generation failed): nothing to compare
        return pd.DataFrame(rows, columns=SIDE_BY_SIDE_COLUMNS)
    by_key = answers.set_index(["question_id", "method"])
    for upstream, twin in pairs:
        for question_id in dict.fromkeys(answers.loc[answers["method"] == upstream, "question_id"]):
            if (question_id, twin) not in by_key.index:
                continue
            a, b = by_key.loc[(question_id, upstream)], by_key.loc[(question_id, twin)]
            failed = [m for m, r in ((upstream, a), (twin, b)) if r["failure"]]
            row = {
                "upstream": upstream,
                "twin": twin,
                "question_id": question_id,
                "status": "ok" if not failed else "failed: " + ", ".join(failed),
            }
            for kind, column in ID_KINDS.items():
                row[f"overlap_{kind}"] = jaccard(a[column], b[column]) if not failed else float("nan")
            both = not failed
            row["answer_f1"] = token_f1(a["text"], [b["text"]]) if both else float("nan")
            row["answer_rouge_l"] = rouge_scores(a["text"], [b["text"]])["rougeL_f"] if both else float("nan")
            for column in COST_COLUMNS:
                row[f"upstream_{column}"], row[f"twin_{column}"] = a[column], b[column]
            rows.append(row)
    return pd.DataFrame(rows, columns=SIDE_BY_SIDE_COLUMNS)


def side_by_side_summary(table: pd.DataFrame, resamples: int, seed: int) -> pd.DataFrame:
    """Per pair: questions compared, failed pairs, each mean overlap and agreement with its bootstrap
    interval over questions (NaN where no question defines it), and each side's mean cost per answer.
    """
    measures = [f"overlap_{k}" for k in ID_KINDS] + ["answer_f1", "answer_rouge_l"]
    rows = []
    for (upstream, twin), group in table.groupby(["upstream", "twin"], sort=False):
        ok = group[group["status"] == "ok"]
        row = {"upstream": upstream, "twin": twin, "questions": len(ok), "failed": len(group) - len(ok)}
        for measure in measures:
            values = ok[measure].dropna().to_numpy(dtype=float)
            row[f"{measure}_n"] = len(values)
            if len(values):
                ci = bootstrap_mean_ci(values, n_resamples=resamples, seed=seed)
                row[measure], row[f"{measure}_low"], row[f"{measure}_high"] = ci.mean, ci.low, ci.high
            else:
                row[measure] = row[f"{measure}_low"] = row[f"{measure}_high"] = np.nan
        for side in ("upstream", "twin"):
            for column in COST_COLUMNS:
                row[f"{side}_{column}"] = float(group[f"{side}_{column}"].mean())
        rows.append(row)
    return pd.DataFrame(rows)
