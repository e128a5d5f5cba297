"""The figures the judge notebooks' prose states (06 the bias audit, 07 the pairwise comparison, 11 the
upstream systems), computed from the tables they save and returned as `Finding`s for their `findings`
table: the estimate's totals, the answer length rules, the alignment's counts, the judge calls and
their failures, the audits' weighted rates and spreads, and the settings the prose quotes.
`report.narrative.judge` and `report.narrative.upstream` only word them.

Statement ids (one per kind of sentence) are the module's constants' values; a subject names a
pair ("a vs b"), an outcome, an aspect, a prompt or a failure kind.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from ragtrial.config.methods import AnswerSettings
from ragtrial.evaluation.findings import Finding, claim_alpha_finding, embedded_model_finding
from ragtrial.evaluation.judge.aggregate import ALIGNMENT_OUTCOMES, alignment_summary
from ragtrial.evaluation.judge.pairs import METHOD_KEY
from ragtrial.evaluation.judge.pipeline import JudgeRun
from ragtrial.evaluation.run_findings import answer_length_findings
from ragtrial.prompts import load_prompt
from ragtrial.stats import box_stats

RUN_SETTINGS = "run.json"
# Reference figures the prose compares with: published values and the no-bias level, not this run's data.
SEED_PAPER = "reference: seed 000 (the unbiased-evaluation paper)"
NO_BIAS = "reference: a judge without length bias"


def setup_findings(settings: AnswerSettings, k: int) -> list[Finding]:
    """The settings a judge notebook's setup note quotes beside the answer length's: k and the context
    budget.
    """
    return [
        Finding("retrieval_k", "k, the retrieved units per question", k, RUN_SETTINGS),
        Finding("context_budget", "context budget in tokens", settings.context_budget, RUN_SETTINGS),
    ]


def estimate_findings(estimate: pd.DataFrame) -> list[Finding]:
    """The estimate's totals over its steps: calls, prompt tokens, completion tokens at their caps, and
    minutes on the embedded model when it has a throughput.
    """
    rows = [
        Finding("estimated_calls", "model calls at most", int(estimate["calls"].sum()), "cost_estimate"),
        Finding(
            "estimated_prompt_tokens",
            "prompt tokens (cl100k)",
            int(estimate["prompt_tokens"].sum()),
            "cost_estimate",
        ),
        Finding(
            "estimated_completion_tokens",
            "completion tokens at most",
            int(estimate["completion_tokens_max"].sum()),
            "cost_estimate",
        ),
    ]
    if "seconds_est" in estimate:
        minutes = estimate["seconds_est"].sum() / 60
        rows.append(
            Finding("estimated_minutes", "minutes on the embedded model at most", minutes, "cost_estimate")
        )
    return rows


def alignment_findings(log: pd.DataFrame, tolerance: int) -> list[Finding]:
    """Length alignment's counts (none when no pair was aligned): pairs tried and kept, the kept share
    beside the paper's, each outcome's count over the pairs, and the kept pairs' mean word gap before
    and after.
    """
    if log.empty:
        return []
    outcomes = alignment_summary(log).drop(columns=["pair"]).sum(numeric_only=True)
    aligned = log[log["status"] == "aligned"]
    rows = [
        Finding("alignment_tolerance", "word gap allowed", tolerance, RUN_SETTINGS),
        Finding("alignment_pairs", "pairs length alignment tried", len(log), "alignment_log"),
        Finding("aligned_pairs", "pairs it kept", len(aligned), "alignment_log"),
        Finding("aligned_share", "share of pairs kept", len(aligned) / len(log), "alignment_log"),
        Finding("seed_aligned_share", "share of pairs the paper aligns", 0.85, SEED_PAPER),
        *(
            Finding("alignment_outcome", "pairs", int(outcomes.get(k, 0)), "alignment_summary", subject=k)
            for k in ALIGNMENT_OUTCOMES
        ),
    ]
    if not aligned.empty:
        rows += [
            Finding(
                "aligned_gap_before",
                "mean word gap of the kept pairs before",
                aligned["gap_before"].mean(),
                "alignment_log",
            ),
            Finding(
                "aligned_gap_after",
                "mean word gap of the kept pairs after",
                aligned["gap_after"].mean(),
                "alignment_log",
            ),
        ]
    return rows


def judge_call_findings(failures: pd.DataFrame, costs: pd.DataFrame) -> list[Finding]:
    """The judge calls made (one `costs` row each), how many failed after the repair round and of what
    kind, and the (question, trial) judgments of the unbiased protocol left out of their trial.
    """
    excluded = failures[failures["stage"] == "judge_unbiased"].drop_duplicates(
        [*METHOD_KEY, "trial", "question_id"]
    )
    return [
        Finding("judge_calls", "judge calls made", len(costs), "costs"),
        Finding("judge_failures", "judge calls that failed", len(failures), "judge_failures"),
        *(
            Finding("judge_failure_kind", "failed judge calls", n, "judge_failures", subject=kind)
            for kind, n in failures["kind"].value_counts().items()
        ),
        Finding(
            "excluded_judgments", "(question, trial) judgments left out", len(excluded), "judge_failures"
        ),
    ]


def position_findings(position_audit: pd.DataFrame) -> list[Finding]:
    """Per pair and protocol of the position audit: A's win rate shown first minus shown second."""
    rows = []
    for (pair, protocol), g in position_audit.groupby(["pair", "protocol"], sort=False):
        a_won = dict(zip(g["order"], g["a_win_rate"], strict=True))
        rows.append(
            Finding(
                "position_difference",
                "A's win rate shown first minus shown second",
                a_won.get("AB", np.nan) - a_won.get("BA", np.nan),
                "position_bias",
                subject=f"{pair}, {protocol}",
            )
        )
    return rows


def length_findings(length_bins: pd.DataFrame) -> list[Finding]:
    """Fig. 6's audit over all token-gap bins (`audits.length_bias`): the position-exchanged verdicts
    with a winner and the ties, the longer answer's win rate among the former (the bins' wins over
    their verdicts), beside the rate without length bias; none without a token gap.
    """
    if length_bins.empty:
        return []
    verdicts = int(length_bins["verdicts"].sum())
    wins = float((length_bins["longer_win_rate"].fillna(0) * length_bins["verdicts"]).sum())
    return [
        Finding(
            "length_verdicts",
            "position-exchanged classic verdicts with a token gap and a winner",
            verdicts,
            "length_bias",
        ),
        Finding(
            "length_ties",
            "position-exchanged verdicts with a token gap and a tie",
            int(length_bins["ties"].sum()),
            "length_bias",
        ),
        Finding(
            "longer_win_rate",
            "share of them the longer answer won",
            wins / verdicts if verdicts else np.nan,
            "length_bias",
        ),
        Finding("no_bias_longer_win_rate", "the longer answer's win rate without length bias", 0.5, NO_BIAS),
    ]


def trial_findings(trials: pd.DataFrame) -> list[Finding]:
    """The spread of the unbiased protocol's per-trial relative win rate: its range, median and
    quartiles over the trials; none without a trial.
    """
    if trials.empty:
        return []
    rwr = trials["relative_win_rate"]
    box = box_stats(rwr)
    return [
        Finding("trials", "trials of the unbiased protocol", len(trials), "unbiased_trials"),
        Finding("trial_rwr_min", "lowest per-trial relative win rate", rwr.min(), "unbiased_trials"),
        Finding("trial_rwr_max", "highest per-trial relative win rate", rwr.max(), "unbiased_trials"),
        Finding("trial_rwr_median", "median per-trial relative win rate", box.median, "unbiased_trials"),
        Finding("trial_rwr_q1", "first quartile", box.q1, "unbiased_trials"),
        Finding("trial_rwr_q3", "third quartile", box.q3, "unbiased_trials"),
    ]


def bias_audit_findings(
    run: JudgeRun,
    estimate: pd.DataFrame,
    position_audit: pd.DataFrame,
    length_bins: pd.DataFrame,
    embedded: bool,
) -> list[Finding]:
    """Notebook 06's figures: the estimate, the failed answers, the answer length, the position,
    length and trial audits, alignment and judge calls.
    """
    return [
        *estimate_findings(estimate),
        missing_answers_finding(run),
        *answer_length_findings(run.settings),
        claim_alpha_finding(),
        embedded_model_finding(embedded),
        *position_findings(position_audit),
        *length_findings(length_bins),
        *trial_findings(run.unbiased_result.trials),
        *run_findings(run),
    ]


def missing_answers_finding(run: JudgeRun) -> Finding:
    """The answers that failed (their pairs are not judged)."""
    return Finding("missing_answers", "failed answers", len(run.missing), "answer_failures")


def run_findings(run: JudgeRun) -> list[Finding]:
    """A judge run's alignment, what its trials re-ran, its rubrics' wording and its judge calls."""
    alignment = alignment_findings(run.alignment_log, run.settings.tolerance_words)
    return [
        *alignment,
        *trial_scope_findings(run),
        *rubric_findings(run),
        *judge_call_findings(run.judge_failures, run.costs),
    ]


def rubric_findings(run: JudgeRun) -> list[Finding]:
    """Per aspect the unbiased protocol scored (none when it did not run): whether its rubric is the
    seed paper's wording (seed 000 prints the Directness criteria alone, Table I) or the kit's own,
    from the rubric prompt file's `wording:` header.
    """
    if not run.design.unbiased:
        return []
    rubrics = [load_prompt(f"judge_rubric_{aspect}") for aspect in run.settings.aspects]
    return [
        Finding(
            "rubric_wording",
            "1 when the rubric is the paper's wording, 0 when the kit's own",
            float(rubric.wording == "paper"),
            f"prompt {rubric.tag}",
            subject=rubric.name.removeprefix("judge_rubric_"),
        )
        for rubric in rubrics
    ]


def trial_scope_findings(run: JudgeRun) -> list[Finding]:
    """What the unbiased protocol's trials re-ran (none when no pair was aligned): the trials, and
    how many of them wrote and aligned answers of their own (`trial_scope`; seed 000 re-runs the
    whole evaluation, answers included, in every trial).
    """
    log = run.alignment_log
    if log.empty:
        return []
    return [
        Finding("trials_run", "trials of the unbiased protocol", run.settings.trials, RUN_SETTINGS),
        Finding(
            "answer_trials",
            "trials whose answers were written and aligned anew",
            log["trial"].nunique(),
            "alignment_log",
        ),
    ]


def supported_pairs_findings(sanity: pd.DataFrame) -> list[Finding]:
    """How many pairs the headline's protocol (the unbiased one when it ran, else the classic) tells
    apart under the claim rule, of how many it judged.
    """
    protocol = "unbiased" if (sanity["protocol"] == "unbiased").any() else "classic"
    rows = sanity[sanity["protocol"] == protocol]
    return [
        Finding("headline_pairs", "pairs judged", len(rows), "protocols_side_by_side", subject=protocol),
        Finding(
            "headline_supported",
            "pairs that differ under the claim rule",
            int(rows["supported"].sum()),
            "protocols_side_by_side",
            subject=protocol,
        ),
    ]


def unbiased_pairs_findings(summary: pd.DataFrame) -> list[Finding]:
    """How many pairs the unbiased protocol's Holm adjustment runs over."""
    return [
        Finding("unbiased_pairs", "pairs judged by the unbiased protocol", len(summary), "unbiased_summary")
    ]


def pairwise_findings(
    run: JudgeRun, estimate: pd.DataFrame, sanity: pd.DataFrame, k: int, embedded: bool
) -> list[Finding]:
    """Notebook 07's figures: the estimate and setup, the failed answers, the headline's count of pairs
    told apart, the unbiased pairs, the tie rate per aspect (mean over pairs and trials), alignment and
    judge calls, and the settings quoted.
    """
    aspects = run.unbiased_result.aspects
    ties = aspects.groupby("aspect", sort=False)["tie_rate"].mean() if not aspects.empty else pd.Series()
    return [
        *estimate_findings(estimate),
        *setup_findings(run.settings, k),
        *answer_length_findings(run.settings),
        claim_alpha_finding(),
        embedded_model_finding(embedded),
        missing_answers_finding(run),
        *(supported_pairs_findings(sanity) if not sanity.empty else []),
        *unbiased_pairs_findings(run.unbiased_result.summary),
        *(
            Finding(
                "aspect_tie_rate", "tie rate, mean over pairs and trials", rate, "unbiased_aspects", subject=a
            )
            for a, rate in ties.items()
        ),
        *run_findings(run),
    ]


def build_findings(systems: pd.DataFrame) -> list[Finding]:
    """Per upstream system whose index was built: the build's prompt and completion tokens, and what
    the index holds (the counts the systems table keeps as JSON, one row per kind).
    """
    rows = []
    for r in systems.itertuples(index=False):
        if not r.index_folder:
            continue
        tokens = r.build_prompt_tokens + r.build_completion_tokens
        rows.append(
            Finding(
                "build_tokens",
                "prompt and completion tokens of the index build",
                tokens,
                "systems",
                subject=r.system,
            )
        )
        rows += [
            Finding("build_count", f"{kind} in the index", n, "systems", subject=f"{r.system}: {kind}")
            for kind, n in json.loads(r.counts).items()
            if isinstance(n, int | float)
        ]
    return rows


def upstream_findings(
    run: JudgeRun, summary: pd.DataFrame, systems: pd.DataFrame, k: int, embedded: bool
) -> list[Finding]:
    """Notebook 11's figures: the settings quoted, each system's index build tokens, each (upstream,
    twin) pair's tokens per answer on either side, the pairs the unbiased judge tells apart, alignment.
    """
    rows = [
        *setup_findings(run.settings, k),
        *answer_length_findings(run.settings),
        claim_alpha_finding(),
        embedded_model_finding(embedded),
        *build_findings(systems),
    ]
    for r in summary.itertuples(index=False):
        pair = f"{r.upstream} vs {r.twin}"
        rows += [
            Finding(
                "upstream_tokens",
                "upstream tokens per answer",
                r.upstream_prompt_tokens + r.upstream_completion_tokens,
                "side_by_side_summary",
                subject=pair,
            ),
            Finding(
                "twin_tokens",
                "twin tokens per answer",
                r.twin_prompt_tokens + r.twin_completion_tokens,
                "side_by_side_summary",
                subject=pair,
            ),
        ]
    rows += unbiased_pairs_findings(run.unbiased_result.summary)
    return [
        *rows,
        *alignment_findings(run.alignment_log, run.settings.tolerance_words),
        *trial_scope_findings(run),
        *rubric_findings(run),
    ]
