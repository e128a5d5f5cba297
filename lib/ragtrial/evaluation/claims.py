"""Claim-based comprehensiveness and diversity of answers (GraphRAG paper, Experiment 2).

One structured model call lists an answer's factual claims ("statements that explicitly present
verifiable facts", Ni et al. 2024). Comprehensiveness of an answer is its number of claims; its
diversity at distance threshold t is the number of clusters scikit-learn's agglomerative clustering
(complete linkage, precomputed distance 1 - ROUGE-L F1, as Padmakumar & He 2024) leaves at t.
Conditions are compared by means with bootstrap intervals, Wilcoxon tests on the questions both
have a value for (Holm across pairs), and by how often the claim-based winner agrees with the LLM
judge's majority verdict.

Frames: answers (question_id, method, text[, failure]) -> claim sets, one row per answer
(answer_id, question_id, method, status, claims, ...) -> long claim metrics (answer_id,
question_id, method, metric, threshold, measure, value). An answer that a method failed to produce
or whose claims could not be extracted has status "failed": it is excluded from every mean, test
and agreement and counted; only a successful extraction that found nothing gives 0 claims.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field, create_model
from sklearn.cluster import AgglomerativeClustering

from ragtrial.evaluation.metrics import rouge_l_distance_matrix
from ragtrial.llm.client import LLM
from ragtrial.llm.errors import LLMError
from ragtrial.prompts import load_prompt
from ragtrial.stats import (
    bootstrap_mean_ci,
    holm_correction,
    majority_verdict,
    paired_bootstrap_diff,
    summary_by_group,
    wilcoxon_signed_rank,
)
from ragtrial.text import normalize_answer

PROMPT = "extract_claims_from_answer"
STAGE = "claim_extraction"
OK, FAILED = "ok", "failed"
CLAIM_SET_COLUMNS = [
    "answer_id",
    "question_id",
    "method",
    "status",
    "claims",
    "n_returned",
    "at_cap",
    "declined",
    "stage",
    "error",
]
METRIC_COLUMNS = ["answer_id", "question_id", "method", "metric", "threshold", "measure", "value"]
VERDICT_COLUMNS = ["trial", "question_id", "method_a", "method_b", "aspect", "outcome"]
# The kit's answer prompts decline with exactly "Insufficient information."; such an answer states no
# fact, so it has no claims without asking a model (a weak one tends to echo the sentence as a claim).
DECLINE = normalize_answer("Insufficient information.")
FLIPPED = {"win": "loss", "loss": "win", "tie": "tie"}


# ---------------------------------------------------------------- extraction


@cache
def claims_reply_schema(max_claims: int | None) -> type[BaseModel]:
    """Reply schema; `max_claims` becomes maxItems, so a grammar-constrained reply closes its JSON
    before max_tokens instead of being cut off (None: unbounded). No maxLength on the claims: the
    llama.cpp server crashed compiling a 120-character bound into its grammar.
    """
    return create_model("AnswerClaims", claims=(Annotated[list[str], Field(max_length=max_claims)], ...))


def answer_id(question_id: str, method: str) -> str:
    return f"{method}:{question_id}"


def distinct_claims(raw: Sequence[str]) -> list[str]:
    """Claims with whitespace collapsed; wordless ones (",") and case-insensitive repeats dropped: a
    fact stated twice is one verifiable fact, and a looping model must not inflate the count.
    """
    kept: dict[str, str] = {}
    for claim in raw:
        text = " ".join(claim.split())
        if any(ch.isalnum() for ch in text):
            kept.setdefault(text.casefold(), text)
    return list(kept.values())


def _claim_set(
    claims: list[str], n_returned: int, max_claims: int | None, declined: bool = False
) -> dict[str, Any]:
    return {
        "status": OK,
        "claims": claims,
        "n_returned": n_returned,
        "declined": declined,
        "at_cap": max_claims is not None and n_returned >= max_claims,
        "stage": "",
        "error": "",
    }


def _failed(stage: str, error: str) -> dict[str, Any]:
    return {
        "status": FAILED,
        "claims": [],
        "n_returned": 0,
        "at_cap": False,
        "declined": False,
        "stage": stage,
        "error": error,
    }


def extract_claims(
    answers: pd.DataFrame, llm: LLM, *, max_tokens: int, max_claims: int | None = None
) -> pd.DataFrame:
    """One claim set per answer. `at_cap` marks replies that hit `max_claims` (their count is a lower
    bound); an answer with a `failure` or no text is recorded as failed at stage "answer".
    """
    prompt = load_prompt(PROMPT)
    schema = claims_reply_schema(max_claims)
    rows = []
    for r in answers.to_dict("records"):
        row = {
            "answer_id": answer_id(r["question_id"], r["method"]),
            "question_id": r["question_id"],
            "method": r["method"],
        }
        failure, text = (value if isinstance(value, str) else "" for value in (r.get("failure"), r["text"]))
        if failure or not text.strip():
            rows.append(row | _failed("answer", failure or "no answer text"))
        elif normalize_answer(text) == DECLINE:
            rows.append(row | _claim_set([], 0, max_claims, declined=True))
        else:
            try:
                reply = llm.structured(
                    prompt.render(answer=text),
                    schema,
                    stage=STAGE,
                    method=r["method"],
                    prompt=prompt,
                    max_tokens=max_tokens,
                )
            except LLMError as err:
                rows.append(row | _failed(STAGE, f"{err.kind}: {err}"))
                continue
            rows.append(row | _claim_set(distinct_claims(reply.claims), len(reply.claims), max_claims))
    return pd.DataFrame(rows, columns=CLAIM_SET_COLUMNS)


def claims_table(claim_sets: pd.DataFrame) -> pd.DataFrame:
    """One row per extracted claim (answer_id, question_id, method, claim_index, claim)."""
    rows = [
        (r.answer_id, r.question_id, r.method, i, claim)
        for r in claim_sets.itertuples(index=False)
        for i, claim in enumerate(r.claims)
    ]
    return pd.DataFrame(rows, columns=["answer_id", "question_id", "method", "claim_index", "claim"])


def failures(claim_sets: pd.DataFrame) -> pd.DataFrame:
    """The answers left out of every measure: item id, stage (answer / claim_extraction), error."""
    failed = claim_sets[claim_sets["status"] == FAILED]
    return failed[["answer_id", "question_id", "method", "stage", "error"]].reset_index(drop=True)


def extraction_counts(claim_sets: pd.DataFrame) -> pd.DataFrame:
    """Per method: answers, extracted, of those with no claims / declined / at the cap, and failures."""
    ok = claim_sets["status"] == OK
    flags = claim_sets.assign(
        extracted=ok,
        no_claims=ok & (claim_sets["claims"].map(len) == 0),
        declined=claim_sets["declined"],
        at_cap=claim_sets["at_cap"],
        failed_answer=claim_sets["stage"] == "answer",
        failed_extraction=claim_sets["stage"] == STAGE,
    )
    columns = ["extracted", "no_claims", "declined", "at_cap", "failed_answer", "failed_extraction"]
    counts = flags.groupby("method", sort=False)[columns].sum().astype(int)
    counts.insert(0, "answers", flags.groupby("method", sort=False).size())
    return counts.reset_index()


# ---------------------------------------------------------------- measures


def cluster_labels(distance: np.ndarray, threshold: float) -> np.ndarray:
    """Cluster label per claim. scikit-learn merges two clusters while their complete-linkage
    distance (the largest claim-to-claim distance between them) is strictly below `threshold`.
    """
    n = len(distance)
    if n < 2:  # scikit-learn needs two samples; one claim is one cluster, none is none
        return np.zeros(n, dtype=int)
    model = AgglomerativeClustering(
        n_clusters=None, metric="precomputed", linkage="complete", distance_threshold=threshold
    )
    return model.fit_predict(distance)


def claim_clusters(claims: Sequence[str], threshold: float, use_stemmer: bool = False) -> np.ndarray:
    return cluster_labels(rouge_l_distance_matrix(list(claims), use_stemmer), threshold)


def _ok(claim_sets: pd.DataFrame) -> pd.DataFrame:
    return claim_sets[claim_sets["status"] == OK]


def comprehensiveness(claim_sets: pd.DataFrame) -> pd.DataFrame:
    """Claims per successfully extracted answer (answer_id, question_id, method, n_claims)."""
    ok = _ok(claim_sets)
    return (
        ok[["answer_id", "question_id", "method"]]
        .assign(n_claims=ok["claims"].map(len))
        .reset_index(drop=True)
    )


def diversity(
    claim_sets: pd.DataFrame, thresholds: Sequence[float], use_stemmer: bool = False
) -> pd.DataFrame:
    """Clusters per successfully extracted answer and threshold (answer_id, question_id, method,
    threshold, n_clusters); the distance matrix is computed once per answer.
    """
    rows = []
    for r in _ok(claim_sets).itertuples(index=False):
        distance = rouge_l_distance_matrix(list(r.claims), use_stemmer)
        for t in thresholds:
            n_clusters = len(set(cluster_labels(distance, t)))
            rows.append((r.answer_id, r.question_id, r.method, float(t), n_clusters))
    return pd.DataFrame(rows, columns=["answer_id", "question_id", "method", "threshold", "n_clusters"])


def measure_name(metric: str, threshold: float | None = None) -> str:
    return metric if threshold is None or pd.isna(threshold) else f"{metric}@{threshold:g}"


def claim_metrics(
    claim_sets: pd.DataFrame, thresholds: Sequence[float], use_stemmer: bool = False
) -> pd.DataFrame:
    """Both measures in one long frame; `measure` names a metric at a threshold ("diversity@0.7")."""
    comp = comprehensiveness(claim_sets).rename(columns={"n_claims": "value"})
    comp = comp.assign(metric="comprehensiveness", threshold=np.nan, measure="comprehensiveness")
    div = diversity(claim_sets, thresholds, use_stemmer).rename(columns={"n_clusters": "value"})
    div = div.assign(metric="diversity", measure=[measure_name("diversity", t) for t in div["threshold"]])
    both = pd.concat([comp, div], ignore_index=True)[METRIC_COLUMNS]
    return both.astype({"value": float})


def condition_summary(metrics: pd.DataFrame, n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Mean per measure and method with a bootstrap interval over answers (failures are not in
    `metrics`, so they are excluded, not zeros).
    """
    keys = ["measure", "metric", "threshold", "method"]
    return summary_by_group(metrics, keys, "value", n_resamples, seed=seed)


def pairwise_tests(
    metrics: pd.DataFrame, n_resamples: int = 2000, seed: int = 0, alpha: float = 0.05
) -> pd.DataFrame:
    """Every pair of methods on every measure, on the questions both have a value for: mean
    difference (a - b) with a paired bootstrap interval, Wilcoxon signed-rank, Holm across the pairs
    of one measure. A pair without shared questions is listed as untested, outside the Holm family.
    """
    methods = list(pd.unique(metrics["method"]))
    if len(methods) < 2:
        return pd.DataFrame()
    tables = []
    for (measure, metric, threshold), group in metrics.groupby(
        ["measure", "metric", "threshold"], sort=False, dropna=False
    ):
        wide = group.pivot(index="question_id", columns="method", values="value").reindex(columns=methods)
        rows = []
        for a, b in itertools.combinations(methods, 2):
            shared = wide[[a, b]].dropna()
            row = {
                "measure": measure,
                "metric": metric,
                "threshold": threshold,
                "method_a": a,
                "method_b": b,
                "n_shared": len(shared),
            }
            if shared.empty:
                rows.append(row | {"test": "untested: no question with a value for both"})
                continue
            x, y = shared[a].to_numpy(), shared[b].to_numpy()
            diff = paired_bootstrap_diff(x, y, n_resamples, seed=seed)
            test = wilcoxon_signed_rank(x, y)
            rows.append(
                row
                | {
                    "mean_a": x.mean(),
                    "mean_b": y.mean(),
                    "mean_diff": diff.mean,
                    "ci_low": diff.low,
                    "ci_high": diff.high,
                    "n_nonzero": test.n_nonzero,
                    "statistic": test.statistic,
                    "p_value": test.p_value,
                    "test": test.method,
                }
            )
        table = pd.DataFrame(rows)
        tested = table["n_shared"] > 0
        if tested.any():
            holm = holm_correction(table.loc[tested, "p_value"].tolist(), alpha)
            table.loc[tested, "p_holm"] = holm["p_holm"].to_numpy()
            table.loc[tested, "reject"] = holm["reject"].to_numpy()
        tables.append(table)
    return pd.concat(tables, ignore_index=True)


# ---------------------------------------------------------------- agreement with the judge


def read_verdicts(path: str | Path) -> pd.DataFrame:
    """A verdict table saved by another run (Parquet or CSV with VERDICT_COLUMNS)."""
    path = Path(path)
    frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    missing = [c for c in VERDICT_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: verdict table lacks columns {missing}")
    return frame[VERDICT_COLUMNS]


def verdicts_from_classic(judgments: pd.DataFrame) -> pd.DataFrame:
    """ragtrial.judge's classic judgments (winner "a"/"b" per aspect) as verdicts, one vote per
    (trial, shown order): the protocol has no ties, so ties come only from votes that disagree.
    """
    return pd.DataFrame(
        {
            "trial": judgments["trial"].astype(str) + "/" + judgments["position"],
            "question_id": judgments["question_id"],
            "method_a": judgments["method_a"],
            "method_b": judgments["method_b"],
            "aspect": judgments["aspect"],
            "outcome": np.where(judgments["winner"] == "a", "win", "loss"),
        }
    )


def collapse_verdicts(verdicts: pd.DataFrame) -> pd.DataFrame:
    """One verdict per (question, pair, aspect): the strict majority of its trials, else tie
    (stats.majority_verdict). Pairs are put in sorted order, flipping outcomes judged the other way
    round, so trials with swapped positions vote together. Outcomes are win/tie/loss of method_a.
    """
    swap = verdicts["method_a"] > verdicts["method_b"]
    canonical = verdicts.assign(
        method_a=verdicts["method_a"].where(~swap, verdicts["method_b"]),
        method_b=verdicts["method_b"].where(~swap, verdicts["method_a"]),
        outcome=verdicts["outcome"].where(~swap, verdicts["outcome"].map(FLIPPED)),
        aspect=verdicts["aspect"].str.lower(),
    )
    keys = ["question_id", "method_a", "method_b", "aspect"]
    grouped = canonical.groupby(keys, sort=False)["outcome"]
    return grouped.agg(n_trials="size", verdict=lambda o: majority_verdict(list(o))).reset_index()


def _claim_outcome(value_a: float | None, value_b: float | None) -> str:
    if value_a is None or value_b is None:
        return "missing"
    return "win" if value_a > value_b else "loss" if value_a < value_b else "tie"


def agreement_details(
    metrics: pd.DataFrame, verdicts: pd.DataFrame, aspects: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """Per measure and judged (question, pair): the judge's majority verdict, both claim values, the
    claim-based outcome (more claims / more clusters wins; "missing" when either answer failed) and
    whether they agree. `aspects` maps a claim metric to the judge aspect it is checked against.
    """
    aspects = (
        {"comprehensiveness": "comprehensiveness", "diversity": "diversity"} if aspects is None else aspects
    )
    collapsed = collapse_verdicts(verdicts)
    value = metrics.set_index(["measure", "question_id", "method"])["value"].to_dict()
    rows = []
    for measure, metric, threshold in (
        metrics[["measure", "metric", "threshold"]].drop_duplicates().itertuples(index=False)
    ):
        judged = collapsed[collapsed["aspect"] == aspects.get(metric, "").lower()]
        for j in judged.itertuples(index=False):
            va, vb = (
                value.get((measure, j.question_id, j.method_a)),
                value.get((measure, j.question_id, j.method_b)),
            )
            outcome = _claim_outcome(va, vb)
            rows.append(
                {
                    "measure": measure,
                    "metric": metric,
                    "threshold": threshold,
                    "aspect": j.aspect,
                    "question_id": j.question_id,
                    "method_a": j.method_a,
                    "method_b": j.method_b,
                    "n_trials": j.n_trials,
                    "verdict": j.verdict,
                    "value_a": va,
                    "value_b": vb,
                    "claim_outcome": outcome,
                    "agree": j.verdict != "tie" and outcome == j.verdict,
                }
            )
    return pd.DataFrame(rows)


def judge_agreement(
    metrics: pd.DataFrame,
    verdicts: pd.DataFrame,
    aspects: Mapping[str, str] | None = None,
    n_resamples: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """Per measure, the paper's agreement: among judged (question, pair)s whose majority verdict is
    not a tie and where both answers have a claim value, the share on which the claim-based winner is
    the judge's winner (a claim-based tie counts as disagreement and is counted apart), with a
    bootstrap interval over those pairs.
    """
    details = agreement_details(metrics, verdicts, aspects)
    rows = []
    for (measure, metric, threshold), group in details.groupby(
        ["measure", "metric", "threshold"], sort=False, dropna=False
    ):
        non_tie = group[group["verdict"] != "tie"]
        compared = non_tie[non_tie["claim_outcome"] != "missing"]
        row = {
            "measure": measure,
            "metric": metric,
            "threshold": threshold,
            "judged": len(group),
            "non_tie": len(non_tie),
            "non_tie_share": len(non_tie) / len(group),
            "missing_claims": len(non_tie) - len(compared),
            "compared": len(compared),
            "claim_ties": int((compared["claim_outcome"] == "tie").sum()),
            "agree": int(compared["agree"].sum()),
            "agreement": None,
            "ci_low": None,
            "ci_high": None,
        }  # stay None when nothing was compared
        if len(compared):
            ci = bootstrap_mean_ci(compared["agree"].astype(float), n_resamples, seed=seed)
            row |= {"agreement": ci.mean, "ci_low": ci.low, "ci_high": ci.high}
        rows.append(row)
    return pd.DataFrame(rows)
