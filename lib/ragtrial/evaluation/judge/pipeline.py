"""The judge pipeline, once: the methods' answers -> answer pairs -> length alignment -> the classic
and the unbiased protocols -> their summaries, as notebooks 06, 07 and 11 and the calibration studies
run it, and what it will cost before it is paid for (`ragtrial estimate` and the notebooks' estimate
tables both plan it from here).

A `JudgeDesign` says what is judged (who answers, which pairs, the classic protocol's fixed orders,
whether the unbiased protocol runs); the settings section (`UnbiasedJudgeSettings` and its
subclasses) says how (alignment tolerance, M trials x N repeats, what a trial re-runs, aspects,
token caps, bootstrap).
`run_judge_pipeline` returns a `JudgeRun`: every frame the notebooks save, the summaries computed
when first read (the calibration studies read subsets of the judgments instead).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, cast

import pandas as pd

from ragtrial.evaluation.judge import aggregate
from ragtrial.evaluation.judge.answers import AnswerSet, MethodRun
from ragtrial.evaluation.judge.cost_plan import estimate_cost, mean_question_tokens, planned_calls
from ragtrial.evaluation.judge.pairs import Append, align_lengths, all_pairs, llm_appender, make_pairs
from ragtrial.evaluation.judge.protocols import (
    POSITIONS,
    Judgments,
    judge_classic_with_settings,
    judge_unbiased,
)
from ragtrial.evaluation.run_methods import failures_table
from ragtrial.llm.client import LLM
from ragtrial.llm.plan import QUESTION_TOKENS, StagePlan

if TYPE_CHECKING:
    from ragtrial.config.judge import JudgeSettings, UnbiasedJudgeSettings


@dataclass(frozen=True)
class JudgeDesign:
    """What a judge run judges: `answerers` answer every question; each of `method_pairs` is judged
    on every question both answered, method A's run `replicates[0]` against B's `replicates[1]`; the
    classic protocol runs in each of `classic_positions` (none: it does not run), and length alignment
    and the unbiased protocol run when `unbiased`.
    """

    answerers: tuple[MethodRun, ...]
    method_pairs: tuple[tuple[str, str], ...]
    replicates: tuple[int, int] = (0, 0)
    classic_positions: tuple[str, ...] = ()
    unbiased: bool = True


def self_check_design(cfg: JudgeSettings) -> JudgeDesign:
    """Notebook 06: `self_method`'s two sampled runs against each other, the classic protocol in both
    orders (the position audit) and the unbiased one.
    """
    method = cfg.self_method
    return JudgeDesign(((method, 0), (method, 1)), ((method, method),), (0, 1), POSITIONS)


def comparison_design(cfg: JudgeSettings, methods: Sequence[str]) -> JudgeDesign:
    """Notebook 07: the listed pairs (every pair when none is listed) of the `methods` that run, the
    classic protocol in `classic_positions`, the unbiased one when `cfg.unbiased`.
    """
    pairs = [p for p in (cfg.pairs or all_pairs(methods)) if set(p) <= set(methods)]
    return JudgeDesign(
        tuple((m, 0) for m in methods),
        tuple((a, b) for a, b in pairs),
        classic_positions=tuple(cfg.classic_positions),
        unbiased=cfg.unbiased,
    )


def unbiased_design(cfg: UnbiasedJudgeSettings, methods: Sequence[str]) -> JudgeDesign:
    """Notebook 11: the listed pairs of the `methods` that run, by the unbiased protocol alone."""
    pairs = [(a, b) for a, b in cfg.pairs if {a, b} <= set(methods)]
    return JudgeDesign(tuple((m, 0) for m in methods), tuple(pairs))


# ---------------------------------------------------------------- the run


@dataclass(frozen=True)
class JudgeRun:
    """One judge pipeline run. `classic` is None when the design runs no classic order; `unbiased`
    holds no judgment when the design does not run it (no pair is aligned then either).
    """

    settings: UnbiasedJudgeSettings
    design: JudgeDesign
    # Each of answers, missing, aligned and alignment_log has a `trial` column: the trial whose answers
    # the row is of (under `trial_scope: judge_only` all are trial 0's, which every trial judges).
    answers: pd.DataFrame  # every answer, failed ones included (`AnswerSet.frame`)
    pairs: pd.DataFrame  # PAIR_COLUMNS, trial 0's answers as generated (the classic protocol's pairs)
    missing: pd.DataFrame  # the failed answers (question_id, method, replicate): their pairs are not judged
    aligned: pd.DataFrame  # the pairs length alignment kept, their answers as aligned
    alignment_log: pd.DataFrame  # one row per pair alignment tried (ALIGNMENT_LOG_COLUMNS)
    classic: Judgments | None
    unbiased: Judgments

    @cached_property
    def answer_failures(self) -> pd.DataFrame:
        return failures_table(self.answers)

    @cached_property
    def alignment(self) -> pd.DataFrame:
        """Per method pair, how its pairs were aligned (`alignment_summary`)."""
        return aggregate.alignment_summary(self.alignment_log)

    @cached_property
    def classic_summary(self) -> pd.DataFrame:
        """Per (pair, fixed order, criterion): `classic_summary` at the section's bootstrap."""
        if self.classic is None:
            raise ValueError("this judge run's design ran no classic order")
        s = self.settings
        return aggregate.classic_summary(self.classic, s.bootstrap_resamples, s.seed)

    @cached_property
    def unbiased_result(self) -> aggregate.UnbiasedResult:
        """The unbiased protocol's tables (`aggregate_unbiased`) at the section's bootstrap."""
        s = self.settings
        return aggregate.aggregate_unbiased(self.unbiased, s.bootstrap_resamples, seed=s.seed)

    @property
    def protocols(self) -> list[Judgments]:
        return [j for j in (self.classic, self.unbiased) if j is not None]

    @cached_property
    def judge_failures(self) -> pd.DataFrame:
        """The judge calls of both protocols that gave no usable reply (FAILURE_COLUMNS)."""
        return pd.concat([j.failures for j in self.protocols], ignore_index=True)

    @cached_property
    def costs(self) -> pd.DataFrame:
        """One row per judge call of both protocols, judged or failed, with its own calls and tokens
        (COST_COLUMNS): its length is the number of judge calls made.
        """
        return pd.concat([j.costs for j in self.protocols], ignore_index=True)


# Trials of `trial_scope: answers` in flight at once. Measured (`bench/concurrency.py --workload judge
# --trial-scope answers --p99 2`, 6 trials): wall / ideal 2.08 one at a time, 1.31-1.37 two, 1.23 three
# and four, 1.16 all six; three keeps most of the gain with three trials' answers (and contexts) in memory.
TRIALS_AT_ONCE = 3


def run_judge_pipeline(
    llm: LLM,
    cfg: UnbiasedJudgeSettings,
    design: JudgeDesign,
    questions: pd.DataFrame,
    answered: AnswerSet,
    *,
    append: Append | None = None,
) -> JudgeRun:
    """Judge `answered` (the design's answerers' answers to `questions`, a `questions_frame`) by the
    design: pairs of the answers that did not fail, the classic protocol on them as generated, length
    alignment (regenerating through `answered.regenerate`, then appending with `append`, by default
    the model at `answer_temperature`) and the unbiased protocol on the aligned pairs, in that order.
    Under `trial_scope: answers` trial t >= 1 judges answers of its own (`answered.resample(t)`),
    paired and aligned again; under `judge_only` every trial judges the one aligned set. The classic
    protocol (one trial by definition) judges trial 0's pairs. Judge calls run concurrently up to
    `llm.concurrency`; nothing failed is scored (see `JudgeRun`).
    """
    resample = answered.resample
    per_trial = cfg.trial_scope == "answers" and design.unbiased
    if per_trial and resample is None:
        raise ValueError("trial_scope answers needs answers that can be written again per trial (resample)")
    first = _paired(design, questions, answered)

    def classic_protocol() -> Judgments | None:
        if not design.classic_positions:
            return None
        classic_cfg = cast("JudgeSettings", cfg)  # only 06's and 07's designs run the classic protocol
        return judge_classic_with_settings(llm, first[0], classic_cfg, design.classic_positions)

    def first_trial() -> _Trial:
        return _judge_trial(llm, cfg, design, answered, first, append, 0, 1 if per_trial else cfg.trials)

    def later_trial(trial: int, answers_of: Callable[[int], AnswerSet]) -> Callable[[], _Trial]:
        def run() -> _Trial:
            answer_set = answers_of(trial)
            paired = _paired(design, questions, answer_set)
            return _judge_trial(llm, cfg, design, answer_set, paired, append, trial, 1)

        return run

    # Independent units: the classic protocol (it judges the pairs as generated) and the trials (each
    # aligns and judges pairs of its own). A trial's stages (answers, alignment, judging) each end in a
    # partly filled wave that waits for its slowest call; trials run TRIALS_AT_ONCE at a time and fill
    # each other's, the classic protocol the first ones'. Trial t waits for trial t - TRIALS_AT_ONCE,
    # which bounds the trials' answers in memory; the endpoint's limit holds across all. At
    # concurrency 1 they run in this order: the classic protocol, then trial after trial.
    later = [later_trial(t, resample) for t in range(1, cfg.trials)] if per_trial and resample else []
    units: list[Callable[[], Any]] = [classic_protocol, first_trial, *later]
    runs = llm.fan_out(
        lambda unit: unit(),
        units,
        label=f"classic judge and trials, {TRIALS_AT_ONCE} at a time",
        after=[{i - TRIALS_AT_ONCE} if i > TRIALS_AT_ONCE else set() for i in range(len(units))],
    )
    classic = cast("Judgments | None", runs[0])
    trial_runs = [cast("_Trial", run) for run in runs[1:]]

    def stacked(name: str) -> pd.DataFrame:
        frames = [getattr(run, name).assign(trial=trial) for trial, run in enumerate(trial_runs)]
        return pd.concat(frames, ignore_index=True)

    unbiased = Judgments(
        *(pd.concat([getattr(r.unbiased, f) for r in trial_runs], ignore_index=True) for f in JUDGMENT_FRAMES)
    )
    return JudgeRun(
        cfg,
        design,
        stacked("answers"),
        first[0],
        stacked("missing"),
        stacked("aligned"),
        stacked("alignment_log"),
        classic,
        unbiased,
    )


JUDGMENT_FRAMES = [f.name for f in dataclasses.fields(Judgments)]


@dataclass(frozen=True)
class _Trial:
    """One trial's answers (under `judge_only`, the answers every trial judges) and their judging."""

    answers: pd.DataFrame
    missing: pd.DataFrame
    aligned: pd.DataFrame
    alignment_log: pd.DataFrame
    unbiased: Judgments


def _paired(
    design: JudgeDesign, questions: pd.DataFrame, answered: AnswerSet
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`make_pairs` of the design on the answers that did not fail."""
    answers = answered.frame
    return make_pairs(questions, answers[answers["failure"] == ""], design.method_pairs, design.replicates)


def _judge_trial(
    llm: LLM,
    cfg: UnbiasedJudgeSettings,
    design: JudgeDesign,
    answered: AnswerSet,
    paired: tuple[pd.DataFrame, pd.DataFrame],
    append: Append | None,
    first_trial: int,
    trials: int,
) -> _Trial:
    """`answered`'s pairs (and missing answers, `paired`) length-aligned, then judged by the unbiased
    protocol in `trials` trials numbered from `first_trial`.
    """
    pairs, missing = paired
    aligned, alignment_log = align_lengths(
        pairs if design.unbiased else pairs.iloc[:0],
        answered.regenerate,
        append or llm_appender(llm, cfg.answer_temperature),
        cfg.tolerance_words,
        cfg.max_regenerations,
        llm=llm,
    )
    unbiased = judge_unbiased(
        llm,
        aligned,
        cfg.aspects,
        trials=trials,
        first_trial=first_trial,
        repeats=cfg.repeats,
        max_tokens=cfg.judge_max_tokens,
        temperature=cfg.judge_temperature,
    )
    return _Trial(answered.frame, missing, aligned, alignment_log, unbiased)


# ---------------------------------------------------------------- its cost, before paying


def _sizes(cfg: UnbiasedJudgeSettings, design: JudgeDesign, n_answers: int, question_tokens: int) -> dict:
    """`estimate_cost`'s sizes for a design: answers at their token cap, answer prompts at the context
    budget plus the prompt's own words.
    """
    return {
        "n_answers": n_answers,
        "question_tokens": question_tokens,
        "answer_tokens": cfg.answer_max_tokens,
        "answer_prompt_tokens": cfg.context_budget + 100,
        "classic_positions": len(design.classic_positions),
        "unbiased": design.unbiased,
    }


def judge_cost_estimate(
    cfg: UnbiasedJudgeSettings,
    design: JudgeDesign,
    questions: Sequence[str],
    throughput: dict[str, float] | None = None,
) -> pd.DataFrame:
    """The notebook's estimate table of `run_judge_pipeline` on `questions` (their mean length
    counted): every answerer answers every question (`estimate_cost`).
    """
    n_answers = len(questions) * len(design.answerers)
    sizes = _sizes(cfg, design, n_answers, mean_question_tokens(list(questions)))
    return estimate_cost(cfg, len(questions), len(design.method_pairs), **sizes, throughput=throughput)


def planned_judge_calls(
    cfg: UnbiasedJudgeSettings, design: JudgeDesign, n_questions: int, kit_answered: Collection[str]
) -> list[StagePlan]:
    """`run_judge_pipeline`'s calls for `ragtrial estimate`, on questions not yet asked (projected at
    QUESTION_TOKENS): the answerers among `kit_answered` write their answers (an imported or an upstream
    system's answer costs the kit no call).
    """
    n_answers = n_questions * sum(method in kit_answered for method, _ in design.answerers)
    sizes = _sizes(cfg, design, n_answers, QUESTION_TOKENS)
    return planned_calls(cfg, n_questions, len(design.method_pairs), **sizes)
