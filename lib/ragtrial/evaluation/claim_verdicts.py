"""Agreement of the claim-based winners with an LLM judge (GraphRAG paper, Section 5.2).

Verdicts (trial, question_id, method_a, method_b, aspect, outcome = win/tie/loss of method_a) come
from the classic judge protocol run here, from another run's saved table, or not at all; per
question and pair they collapse to the strict majority, and on the non-tie ones the answer with
more claims (more clusters) should be the judge's winner.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from ragtrial.config.claims import ClaimsSettings
from ragtrial.config.judge import JudgeSettings
from ragtrial.evaluation.judge.cost_plan import judge_prompt_tokens
from ragtrial.evaluation.judge.pairs import all_pairs, make_pairs
from ragtrial.evaluation.judge.protocols import (
    CLASSIC_OUTCOME,
    FAILURE_COLUMNS,
    Judgments,
    judge_classic_with_settings,
)
from ragtrial.llm.client import LLM
from ragtrial.llm.plan import StagePlan, projected
from ragtrial.stats import bootstrap_mean_ci, majority_verdict

VERDICT_COLUMNS = ["trial", "question_id", "method_a", "method_b", "aspect", "outcome"]
FLIPPED = {"win": "loss", "loss": "win", "tie": "tie"}


def verdict_source(
    judge: str,
    votes_per_order: int = 0,
    positions: Sequence[str] = (),
    ties: bool = False,
    question_pairs: int = 0,
    failed_judge_calls: int = 0,
    verdicts_path: str = "",
) -> pd.DataFrame:
    """Where the verdicts came from, as one saved row: the report words it."""
    return pd.DataFrame(
        [
            {
                "judge": judge,
                "votes_per_order": votes_per_order,
                "positions": ", ".join(positions),
                "ties": ties,
                "question_pairs": question_pairs,
                "failed_judge_calls": failed_judge_calls,
                "verdicts_path": verdicts_path,
            }
        ]
    )


def judge_verdicts(
    llm: LLM,
    cfg: ClaimsSettings,
    judge_cfg: JudgeSettings,
    questions: pd.DataFrame,
    answers: pd.DataFrame,
    methods: Sequence[str],
) -> tuple[pd.DataFrame, Judgments, pd.DataFrame]:
    """The verdicts `cfg.judge` asks for, the judge run made here (its failed calls and what each call
    cost; empty when the verdicts are read or absent), and their source (`verdict_source`).
    """
    if cfg.judge == "classic":
        pairs, _ = make_pairs(
            questions, answers[answers["failure"] == ""].assign(replicate=0), all_pairs(methods)
        )
        run = judge_classic_with_settings(llm, pairs, judge_cfg, cfg.judge_positions)
        source = verdict_source(
            "classic",
            judge_cfg.classic_repeats,
            cfg.judge_positions,
            judge_cfg.classic_ties,
            len(pairs),
            len(run.failures),
        )
        return verdicts_from_classic(run.judgments), run, source
    not_judged = Judgments(pd.DataFrame(), pd.DataFrame(columns=FAILURE_COLUMNS))
    if cfg.judge == "file" and cfg.verdicts_path:
        return (
            read_verdicts(cfg.verdicts_path),
            not_judged,
            verdict_source("file", verdicts_path=cfg.verdicts_path),
        )
    return pd.DataFrame(columns=VERDICT_COLUMNS), not_judged, verdict_source("none")


def read_verdicts(path: str | Path) -> pd.DataFrame:
    """A verdict table saved by another run (Parquet or CSV with VERDICT_COLUMNS)."""
    path = Path(path)
    frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    missing = [c for c in VERDICT_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: verdict table lacks columns {missing}")
    return frame[VERDICT_COLUMNS]


def verdicts_from_classic(judgments: pd.DataFrame) -> pd.DataFrame:
    """ragtrial.judge's classic judgments (winner "a"/"b"/"tie" per aspect) as verdicts, one vote
    per (repeat, shown order); without the judge's ties, ties come only from votes that disagree.
    """
    return pd.DataFrame(
        {
            "trial": judgments["repeat"].astype(str) + "/" + judgments["position"],
            "question_id": judgments["question_id"],
            "method_a": judgments["method_a"],
            "method_b": judgments["method_b"],
            "aspect": judgments["aspect"],
            "outcome": judgments["winner"].map(CLASSIC_OUTCOME),
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
    if verdicts.empty or metrics.empty:  # nothing judged, or no claim values
        return pd.DataFrame()
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


def planned_calls(
    cfg: ClaimsSettings,
    judge_cfg: JudgeSettings,
    n_questions: int,
    methods: Sequence[str],
    answer_tokens: int,
) -> list[StagePlan]:
    """The classic judge calls of `judge_verdicts` before the answers exist: every pair of methods x
    question x shown order x repeat, at most (a pair with a failed answer is not judged); none unless
    `claims.judge` is classic.
    """
    if cfg.judge != "classic":
        return []
    calls = len(all_pairs(list(methods))) * n_questions * len(cfg.judge_positions) * judge_cfg.classic_repeats
    per_call = judge_prompt_tokens(None, 24, answer_tokens, judge_cfg.classic_ties)
    return [
        projected(
            "judge_classic",
            calls,
            calls * per_call,
            judge_cfg.classic_max_tokens,
            "upper bound",
            "json",
            "pairs with both answers",
        )
    ]
