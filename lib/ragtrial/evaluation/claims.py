"""Claim-based comprehensiveness and diversity of answers (GraphRAG paper, Experiment 2).

One structured model call lists an answer's factual claims ("statements that explicitly present
verifiable facts", Ni et al. 2024). Comprehensiveness of an answer is its number of claims, every
one counted as the paper counts them (`n_distinct`, beside it, drops case-insensitive repeats); its
diversity at distance threshold t is the number of clusters agglomerative clustering (complete
linkage, precomputed distance 1 - ROUGE-L F1, as Padmakumar & He 2024) leaves when clusters merge
while their largest distance is at most t, as the paper states it.
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
from collections.abc import Sequence
from functools import cache
from typing import Annotated, Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field, create_model
from sklearn.cluster import AgglomerativeClustering

from ragtrial.evaluation.answer_metrics import register_metric, rouge_l_distance_matrix
from ragtrial.evaluation.run_methods import failures_table
from ragtrial.llm.client import LLM
from ragtrial.llm.errors import LLMError
from ragtrial.llm.plan import StagePlan, frame_tokens, projected
from ragtrial.prompts import load_prompt
from ragtrial.stats import (
    holm_correction,
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
    "n_distinct",
    "n_returned",
    "at_cap",
    "declined",
    "stage",
    "error",
    # the extraction's own model calls (a repair round included) and tokens; 0 when none was asked
    "calls",
    "cached_calls",
    "prompt_tokens",
    "completion_tokens",
]
METRIC_COLUMNS = ["answer_id", "question_id", "method", "metric", "threshold", "measure", "value"]
# The kit's answer prompts decline with exactly "Insufficient information."; such an answer states no
# fact, so it has no claims without asking a model (a weak one tends to echo the sentence as a claim).
DECLINE = normalize_answer("Insufficient information.")


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


def claim_texts(raw: Sequence[str]) -> list[str]:
    """Claims with whitespace collapsed and wordless ones (",", which state nothing) dropped; a
    repeated claim stays: the paper counts every extracted claim.
    """
    texts = (" ".join(claim.split()) for claim in raw)
    return [text for text in texts if any(ch.isalnum() for ch in text)]


def distinct_claims(claims: Sequence[str]) -> list[str]:
    """`claims` without case-insensitive repeats, first wording kept: a fact stated twice is one
    verifiable fact (a looping model's inflation is the gap between the two counts).
    """
    kept: dict[str, str] = {}
    for claim in claims:
        kept.setdefault(claim.casefold(), claim)
    return list(kept.values())


def _claim_set(
    claims: list[str], n_returned: int, max_claims: int | None, declined: bool = False
) -> dict[str, Any]:
    return {
        "status": OK,
        "claims": claims,
        "n_distinct": len(distinct_claims(claims)),
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
        "n_distinct": 0,
        "n_returned": 0,
        "at_cap": False,
        "declined": False,
        "stage": stage,
        "error": error,
    }


def extract_claims(
    answers: pd.DataFrame, llm: LLM, *, max_tokens: int, max_claims: int | None = None, stage: str = STAGE
) -> pd.DataFrame:
    """One claim set per answer. `at_cap` marks replies that hit `max_claims` (their count is a lower
    bound); an answer with a `failure` or no text is recorded as failed at stage "answer". `stage`
    labels the calls in the ledger (answer grounding extracts under its own stage; the stage is not
    part of the cache key, so the same answer's extraction is asked once).
    """
    prompt = load_prompt(PROMPT)
    schema = claims_reply_schema(max_claims)

    def claim_set(r: dict[str, Any]) -> dict[str, Any]:
        failure, text = (value if isinstance(value, str) else "" for value in (r.get("failure"), r["text"]))
        if failure or not text.strip():
            return _failed("answer", failure or "no answer text")
        if normalize_answer(text) == DECLINE:
            return _claim_set([], 0, max_claims, declined=True)
        try:
            reply: Any = llm.structured(  # a claims_reply_schema model: its fields are made at run time
                prompt.render(answer=text),
                schema,
                stage=stage,
                method=r["method"],
                prompt=prompt,
                max_tokens=max_tokens,
            )
        except LLMError as err:
            return _failed(stage, f"{err.kind}: {err}")
        return _claim_set(claim_texts(reply.claims), len(reply.claims), max_claims)

    def extract(r: dict[str, Any]) -> dict[str, Any]:
        with llm.ledger.tally() as tally:
            found = claim_set(r)
        return {
            "answer_id": answer_id(r["question_id"], r["method"]),
            "question_id": r["question_id"],
            "method": r["method"],
            **found,
            **tally.totals(),
        }

    # one extraction per answer, concurrently up to llm.concurrency, rows in the answers' order
    rows = llm.fan_out(extract, answers.to_dict("records"), label=stage)
    return pd.DataFrame(rows, columns=CLAIM_SET_COLUMNS)


def claims_table(claim_sets: pd.DataFrame) -> pd.DataFrame:
    """One row per extracted claim (answer_id, question_id, method, claim_index, claim)."""
    rows = [
        (r.answer_id, r.question_id, r.method, i, claim)
        for r in claim_sets.itertuples(index=False)
        for i, claim in enumerate(r.claims)
    ]
    return pd.DataFrame(rows, columns=["answer_id", "question_id", "method", "claim_index", "claim"])


def claim_set_failures(claim_sets: pd.DataFrame) -> pd.DataFrame:
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
    """Cluster label per claim: two clusters merge while their complete-linkage distance (the
    largest claim-to-claim distance between them) is at most `threshold`, as the paper states it.
    scikit-learn merges only strictly below its distance_threshold, so it gets the next float up.
    """
    n = len(distance)
    if n < 2:  # scikit-learn needs two samples; one claim is one cluster, none is none
        return np.zeros(n, dtype=int)
    model = AgglomerativeClustering(
        n_clusters=None,
        metric="precomputed",
        linkage="complete",
        distance_threshold=float(np.nextafter(threshold, np.inf)),
    )
    return model.fit_predict(distance)


def claim_clusters(claims: Sequence[str], threshold: float, use_stemmer: bool = False) -> np.ndarray:
    return cluster_labels(rouge_l_distance_matrix(list(claims), use_stemmer), threshold)


def _ok(claim_sets: pd.DataFrame) -> pd.DataFrame:
    return claim_sets[claim_sets["status"] == OK]


def comprehensiveness(claim_sets: pd.DataFrame) -> pd.DataFrame:
    """Claims per successfully extracted answer (answer_id, question_id, method, n_claims, and
    n_distinct: without case-insensitive repeats).
    """
    ok = _ok(claim_sets)
    return (
        ok[["answer_id", "question_id", "method"]]
        .assign(n_claims=ok["claims"].map(len), n_distinct=ok["n_distinct"])
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


def with_distinct_claims(summary: pd.DataFrame, claim_sets: pd.DataFrame) -> pd.DataFrame:
    """`summary` (`condition_summary`) with `mean_distinct` beside the comprehensiveness mean: the
    mean claims per answer once case-insensitive repeats are dropped (the same answers); empty on
    the diversity rows, which repeats do not change (a repeat is at distance 0 from its twin).
    """
    distinct = comprehensiveness(claim_sets).groupby("method")["n_distinct"].mean()
    on_claims = summary["measure"] == "comprehensiveness"
    return summary.assign(mean_distinct=summary["method"].map(distinct).where(on_claims))


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
    if metrics.empty:  # no answer had claims extracted
        return pd.DataFrame(columns=[*keys, "n", "mean", "ci_low", "ci_high"])
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


def example_answer(
    claim_sets: pd.DataFrame, thresholds: Sequence[float], use_stemmer: bool = False
) -> tuple[pd.Series, np.ndarray, float] | None:
    """The extracted answer with the most claims, its cluster labels at the middle threshold, and
    that threshold; None when no answer had a claim.
    """
    extracted = claim_sets[claim_sets["status"] == OK]
    if not extracted["claims"].map(len).gt(0).any():
        return None
    example = extracted.loc[extracted["claims"].map(len).idxmax()]
    threshold = thresholds[len(thresholds) // 2]
    return example, claim_clusters(example["claims"], threshold, use_stemmer), threshold


def run_failures(
    claim_sets: pd.DataFrame,
    answers: pd.DataFrame,
    question_failures: pd.DataFrame,
    judge_failures: pd.DataFrame,
) -> pd.DataFrame:
    """Every failure of a claims run in one table (item_id, who, stage, detail): claim extractions,
    answers, persona question generation and judge calls.
    """
    claims_failed = claim_set_failures(claim_sets)
    claims_failed = claims_failed[claims_failed["stage"] == STAGE]  # failed answers come from `answers`
    answers_failed = failures_table(answers)
    parts = [
        (claims_failed["answer_id"], claims_failed["method"], claims_failed["stage"], claims_failed["error"]),
        (
            answers_failed["question_id"],
            answers_failed["method"],
            answers_failed["stage"],
            answers_failed["kind"] + ": " + answers_failed["detail"],
        ),
        (
            question_failures["item_id"],
            "persona questions",
            question_failures["stage"],
            question_failures["kind"] + ": " + question_failures["detail"],
        ),
        (
            judge_failures["question_id"],
            judge_failures["method_a"] + " vs " + judge_failures["method_b"],
            judge_failures["stage"],
            judge_failures["kind"] + ": " + judge_failures["error"],
        ),
    ]
    return pd.concat(
        [pd.DataFrame({"item_id": i, "who": w, "stage": st, "detail": d}) for i, w, st, d in parts],
        ignore_index=True,
    )


register_metric(
    "comprehensiveness", comprehensiveness, "claims per answer", task="claims", paired_test="wilcoxon"
)
register_metric(
    "diversity",
    diversity,
    "claim clusters per answer at a 1 - ROUGE-L distance threshold",
    task="claims",
    paired_test="wilcoxon",
)


def planned_calls(n_answers: int, answer_tokens: int, max_tokens: int, stage: str = STAGE) -> list[StagePlan]:
    """The extraction calls before the answers exist: one per answer, at most (a failed answer has
    none); each prompt projected with an answer of `answer_tokens`.
    """
    frame = frame_tokens(load_prompt(PROMPT))
    return [
        projected(
            stage,
            n_answers,
            n_answers * (frame + answer_tokens),
            max_tokens,
            "upper bound",
            "json",
            "one per successful answer",
        )
    ]
