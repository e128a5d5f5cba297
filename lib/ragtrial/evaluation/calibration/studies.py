"""Simulated studies: two methods with a known true difference answer simulated questions, and the kit's
own protocols judge them through the simulated judge, exactly as notebooks 06 and 07 call them
(`run_judge_pipeline`: pairs, the classic protocol, length alignment and the unbiased protocol; then
`classic_summary`, `unbiased_summary` and the claim rule of `sanity_table`). Many studies give each
protocol's bias, interval coverage, power and spurious-winner rate against the truth.

One study runs the classic protocol once (A shown first, as published) and the unbiased one at the
largest trials (M), repeats (N) and question count of the grid; a smaller design is read from it: its
first M trials, first N repeats and first questions. For M and the questions these are exactly the
calls `judge_unbiased(trials=M)` on those questions makes (a reply depends on its own request only);
for N they are the same judge on the same pairs, equal in distribution (a call's replicate numbers
trial x N + repeat, so the requests differ). Designs nested in one study share its random draws, which
makes the curves smooth; each point is still an average over independent studies.
"""

from __future__ import annotations

import itertools
import multiprocessing
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ragtrial.config.judge import JudgeSettings
from ragtrial.evaluation.calibration.judge import SimulatedAnswer, SimulatedJudge, simulated_llm
from ragtrial.evaluation.calibration.model import (
    JudgeModel,
    difference_for_win_rate,
    true_relative_win_rate,
    uniform_difference,
)
from ragtrial.evaluation.judge.aggregate import classic_summary, unbiased_summary
from ragtrial.evaluation.judge.answers import AnswerSet, MethodRun
from ragtrial.evaluation.judge.audits import length_verdicts, sanity_table
from ragtrial.evaluation.judge.pairs import make_pairs
from ragtrial.evaluation.judge.pipeline import JudgeDesign, JudgeRun, run_judge_pipeline
from ragtrial.evaluation.judge.protocols import CLASSIC_OUTCOME, POSITIONS, Judgments
from ragtrial.llm.client import LLM
from ragtrial.stats import OUTCOME_CODES, proportion_interval

METHOD_A, METHOD_B = "method_a", "method_b"
QUESTION_TYPE = "simulated"
MIN_WORDS = 5


@dataclass(frozen=True)
class Scenario:
    """What the methods truly are: their difference per aspect (A minus B, in the judge's points) and
    how much longer A's answers are as generated (words; length alignment closes the gap for the
    unbiased protocol, the classic one judges them as generated).
    """

    name: str
    difference: tuple[float, ...]
    length_gap_words: float = 0.0


@dataclass(frozen=True)
class Grid:
    """The designs a study is read at: trials (M) and repeats (N) of the unbiased protocol, and question
    counts (both protocols).
    """

    trials: tuple[int, ...]
    repeats: tuple[int, ...]
    questions: tuple[int, ...]

    def designs(self) -> list[tuple[int, int, int]]:
        return list(itertools.product(self.trials, self.repeats, self.questions))


# ---------------------------------------------------------------- one simulated world


@dataclass
class SimulatedWorld:
    """The questions (a `questions_frame`), the two methods' answers (question_id, method, replicate,
    text, failure) and what the judge knows of every answer text; `regenerate` / `append` are the
    methods' length alignment (they write the target length exactly, keeping the answer's quality).
    """

    methods: tuple[MethodRun, MethodRun]  # (A, B)
    questions: pd.DataFrame
    answer_texts: pd.DataFrame
    answers: dict[str, SimulatedAnswer]
    originals: dict[tuple[str, str, int], SimulatedAnswer]  # (question_id, method, replicate) -> answer
    versions: Counter[tuple[str, str, int]]  # the same key -> answers written so far

    def write(self, key: tuple[str, str, int], words: int, answer: SimulatedAnswer) -> str:
        """A new answer text of `words` words (a unique first word), known to the judge as `answer`."""
        version = self.versions[key]
        self.versions[key] += 1
        first = "-".join(str(part) for part in (*key, f"v{version}"))
        text = " ".join([first, *(["lorem"] * (max(words, MIN_WORDS) - 1))])
        self.answers[text] = answer
        return text

    def regenerate(self, question_id: str, method: str, replicate: int, target_words: int) -> str:
        key = (question_id, method, replicate)
        return self.write(key, target_words, self.originals[key])

    def append(self, question: str, answer: str, n_words: int, method: str) -> str:
        text = " ".join(["lorem"] * n_words)
        self.answers[f"{answer.rstrip()} {text}".strip()] = self.answers[answer]
        return text

    def design(self, classic_positions: tuple[str, ...]) -> JudgeDesign:
        """A against B on every question, the classic protocol in `classic_positions`."""
        (method_a, replicate_a), (method_b, replicate_b) = self.methods
        return JudgeDesign(
            self.methods, ((method_a, method_b),), (replicate_a, replicate_b), classic_positions
        )

    @property
    def pairs(self) -> pd.DataFrame:
        """The answer pairs the judge is shown (`PAIR_COLUMNS`), as generated."""
        design = self.design(())
        return make_pairs(self.questions, self.answer_texts, design.method_pairs, design.replicates)[0]

    def judge(self, llm: LLM, judge: JudgeSettings, classic_positions: tuple[str, ...]) -> JudgeRun:
        """The kit's judge pipeline on this world's answers (its length alignment is this world's); a
        failed call is the simulation's fault.
        """
        answers = AnswerSet(self.answer_texts, self.regenerate)
        design = self.design(classic_positions)
        # A simulated answer is not a sample that can be drawn again: every trial judges the one set,
        # so the simulated trial spread is the judge's alone (`trial_scope: judge_only`).
        fixed_answers = judge.model_copy(update={"trial_scope": "judge_only"})
        run = run_judge_pipeline(llm, fixed_answers, design, self.questions, answers, append=self.append)
        for protocol in run.protocols:
            judged_without_failure(protocol)
        return run


# A study's two methods, (name, replicate); notebook 06's audit pairs one method's two runs.
TWO_METHODS = ((METHOD_A, 0), (METHOD_B, 0))
SELF_METHOD = "self"
TWO_RUNS = ((SELF_METHOD, 0), (SELF_METHOD, 1))


def make_world(
    model: JudgeModel,
    scenario: Scenario,
    n_questions: int,
    answer_words: int,
    length_sd_words: float,
    seed: int,
    methods: tuple[tuple[str, int], tuple[str, int]] = TWO_METHODS,
) -> SimulatedWorld:
    """`n_questions` questions, each answered by both `methods` (A, B): a shared level (sd `level_sd`),
    the difference per aspect plus the question's spread (sd `question_sd`), split evenly between the
    two; lengths around `answer_words` (sd `length_sd_words`), A's longer by the scenario's gap.
    """
    rng = np.random.default_rng([seed, 1])
    delta = uniform_difference(scenario.difference, model.aspects)
    level = rng.normal(0.0, model.level_sd, (n_questions, 1))
    spread = rng.normal(0.0, model.question_sd, (n_questions, 1))
    quality = (level + (delta + spread) / 2, level - (delta + spread) / 2)
    gap = scenario.length_gap_words / 2
    words = (
        np.rint(rng.normal(answer_words + gap, length_sd_words, n_questions)).astype(int),
        np.rint(rng.normal(answer_words - gap, length_sd_words, n_questions)).astype(int),
    )
    world = SimulatedWorld(methods, pd.DataFrame(), pd.DataFrame(), {}, {}, Counter())
    questions, answers = [], []
    for i in range(n_questions):
        question_id = f"s{seed}q{i}"
        questions.append((question_id, f"Simulated question {i}?", QUESTION_TYPE))
        for side, (method, replicate) in enumerate(methods):
            key = (question_id, method, replicate)
            world.originals[key] = SimulatedAnswer(f"{method}#{replicate}", tuple(quality[side][i]))
            answers.append((*key, world.write(key, words[side][i], world.originals[key]), ""))
    world.questions = pd.DataFrame(questions, columns=["question_id", "question", "question_type"])
    world.answer_texts = pd.DataFrame(
        answers, columns=["question_id", "method", "replicate", "text", "failure"]
    )
    return world


def simulate_audit(
    model: JudgeModel,
    judge: JudgeSettings,
    questions: int,
    seed: int,
    answer_words: int = 80,
    length_sd_words: float = 20.0,
) -> dict[str, pd.DataFrame]:
    """Notebook 06's audit of a simulated judge, through the same calls: one method's two runs, the
    classic protocol in both orders on the answers as generated (`length_verdicts` of them), length
    alignment and the unbiased protocol at `judge.trials` x `judge.repeats`. Returns the tables 06
    saves that `fit.fit_judge` reads.
    """
    scenario = Scenario("audit", (0.0,))
    world = make_world(model, scenario, questions, answer_words, length_sd_words, seed, TWO_RUNS)
    llm = simulated_llm(SimulatedJudge(model, world.answers, seed, repeats=judge.repeats))
    judged = world.judge(llm, judge.model_copy(update={"aspects": list(model.aspects)}), POSITIONS)
    assert judged.classic is not None  # the classic protocol ran, in POSITIONS
    return {
        "unbiased_judgments": judged.unbiased.judgments,
        "classic_judgments": judged.classic.judgments,
        "length_verdicts": length_verdicts(judged.pairs, judged.classic),
    }


# ---------------------------------------------------------------- one study, every design


def judged_without_failure(run: Judgments) -> Judgments:
    """`run`, checked: a simulated judge that failed a call (an answer it was not given, a prompt it
    cannot read) is a fault of the simulation, never a judge failure to leave out and count.
    """
    if not run.failures.empty:
        first = run.failures.iloc[0]
        raise RuntimeError(f"the simulated judge failed {len(run.failures)} call(s), first: {first['error']}")
    return run


def design_subset(run: Judgments, trials: int, repeats: int, question_ids: Sequence[str]) -> Judgments:
    """The judgments (and failures) of the first `trials` trials, first `repeats` repeats and the
    questions `question_ids`.
    """

    def keep(frame: pd.DataFrame) -> pd.DataFrame:
        mask = frame["question_id"].isin(question_ids)
        if "trial" in frame:
            mask &= (frame["trial"] < trials) & (frame["repeat"] < repeats)
        return frame[mask].reset_index(drop=True)

    return Judgments(keep(run.judgments), keep(run.failures), keep(run.costs))


STUDY_COLUMNS = [
    "scenario",
    "study",
    "protocol",
    "trials",
    "repeats",
    "questions",
    "truth",
    "relative_win_rate",
    "ci_low",
    "ci_high",
    "p_holm",
    "supported",
    "winner",
]
# Per question of a study's largest question count: what the claim rule's two statistics average, the
# outcome code (win 1, tie 0, loss -1) averaged over trials (the interval's) and the overall score
# difference A - B averaged over trials (the paired test's; the classic protocol's is its code).
QUESTION_COLUMNS = ["scenario", "study", "protocol", "trials", "repeats", "question_id", "code", "score_diff"]


@dataclass(frozen=True)
class StudyPlan:
    """What every simulated study shares: the judge, the grid, the protocols' settings (the run's
    `judge` section), the answers' lengths and the bootstrap.
    """

    model: JudgeModel
    grid: Grid
    judge: JudgeSettings
    seed: int
    answer_words: int
    length_sd_words: float
    resamples: int


def _row(scenario: Scenario, study: int, protocol: str, design: tuple, truth: float, r: Any) -> list:
    # r: an itertuples() row of sanity_table
    winner = (METHOD_A if r.relative_win_rate > 0 else METHOD_B) if r.supported else "none"
    return [
        scenario.name,
        study,
        protocol,
        *design,
        truth,
        r.relative_win_rate,
        r.ci_low,
        r.ci_high,
        r.p_holm,
        bool(r.supported),
        winner,
    ]


def run_study(plan: StudyPlan, scenario: Scenario, study: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One simulated study read at every design of the grid: per protocol and design (`STUDY_COLUMNS`)
    A's relative win rate with its interval and adjusted p-value as `sanity_table` reports them,
    whether the claim rule declares a winner (`winner`: method_a, method_b or "none") and the truth;
    and per question at the largest question count (`QUESTION_COLUMNS`).
    """
    model, grid, judge = plan.model, plan.grid, plan.judge
    study_seed = plan.seed * 1_000_003 + study
    world = make_world(
        model, scenario, max(grid.questions), plan.answer_words, plan.length_sd_words, study_seed
    )
    llm = simulated_llm(SimulatedJudge(model, world.answers, study_seed, repeats=max(grid.repeats)))
    largest = {"aspects": list(model.aspects), "trials": max(grid.trials), "repeats": max(grid.repeats)}
    judged = world.judge(llm, judge.model_copy(update=largest), ("AB",))
    classic, unbiased = judged.classic, judged.unbiased
    assert classic is not None  # the classic protocol ran, in "AB"
    truth = true_relative_win_rate(model, scenario.difference)
    question_ids = list(judged.pairs["question_id"])
    rows, per_question = [], []
    for n_questions in grid.questions:
        asked = question_ids[:n_questions]
        classic_run = design_subset(classic, 1, judge.classic_repeats, asked)
        classic_table = classic_summary(classic_run, plan.resamples, plan.seed)
        if n_questions == max(grid.questions):
            overall = classic_run.judgments[classic_run.judgments["aspect"] == "overall"]
            codes = overall["winner"].map(CLASSIC_OUTCOME).map(OUTCOME_CODES).groupby(overall["question_id"])
            code = codes.mean()
            per_question += [
                [scenario.name, study, "classic", 1, judge.classic_repeats, q, c, c] for q, c in code.items()
            ]
        for i, (trials, repeats) in enumerate(itertools.product(grid.trials, grid.repeats)):
            outcomes, _, summary = unbiased_summary(
                design_subset(unbiased, trials, repeats, asked), plan.resamples, seed=plan.seed
            )
            sides = sanity_table(classic_table, summary).set_index("protocol")
            if i == 0:  # the classic protocol has no M or N: once per question count
                design = (1, judge.classic_repeats, n_questions)
                rows.append(_row(scenario, study, "classic", design, truth, sides.loc["classic"]))
            design = (trials, repeats, n_questions)
            rows.append(_row(scenario, study, "unbiased", design, truth, sides.loc["unbiased"]))
            if n_questions == max(grid.questions):
                by_question = (
                    outcomes.assign(
                        code=outcomes["outcome"].map(OUTCOME_CODES),
                        score_diff=outcomes["overall_a"] - outcomes["overall_b"],
                    )
                    .groupby("question_id", sort=False)[["code", "score_diff"]]
                    .mean()
                )
                per_question += [
                    [scenario.name, study, "unbiased", trials, repeats, q, r.code, r.score_diff]
                    for q, r in by_question.iterrows()
                ]
    return pd.DataFrame(rows, columns=STUDY_COLUMNS), pd.DataFrame(per_question, columns=QUESTION_COLUMNS)


def _run_studies(
    plan: StudyPlan, units: list[tuple[Scenario, int]]
) -> list[tuple[pd.DataFrame, pd.DataFrame]]:
    return [run_study(plan, scenario, study) for scenario, study in units]


def simulate(
    plan: StudyPlan, scenarios: Sequence[Scenario], studies: int, workers: int = 1
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`studies` simulated studies of every scenario (`run_study`), concatenated; with `workers` > 1 in
    that many processes (spawned: a kernel's threads do not survive a fork), the studies dealt out in
    turn. The results do not depend on `workers`: a study's draws follow from its seed and number.
    """
    units = [(scenario, study) for scenario in scenarios for study in range(studies)]
    if workers <= 1 or len(units) <= 1:
        done = _run_studies(plan, units)
    else:
        shares = [units[i::workers] for i in range(workers)]
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            parts = list(pool.map(_run_studies, [plan] * workers, shares))
        placed = {
            unit: result
            for share, part in zip(shares, parts, strict=True)
            for unit, result in zip(share, part, strict=True)
        }
        done = [placed[unit] for unit in units]
    return (
        pd.concat([d[0] for d in done], ignore_index=True),
        pd.concat([d[1] for d in done], ignore_index=True),
    )


# ---------------------------------------------------------------- over studies


SUMMARY_KEYS = ["scenario", "protocol", "trials", "repeats", "questions"]


def summarize_studies(results: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Per scenario, protocol and design, over its studies: the truth, the mean estimate and its bias
    (with the Monte Carlo standard error), the coverage of the 95% interval, and how often the claim
    rule declared a winner at all, the truly better method (power), the other one, or A (the method
    the classic protocol shows first: its position bias declares A); A/A scenarios
    (truth 0) have no better method, so every winner there is spurious. Each rate has a Wilson
    interval over the studies.
    """
    rows = []
    for key, group in results.groupby(SUMMARY_KEYS, sort=False):
        truth = float(group["truth"].iloc[0])
        error = group["relative_win_rate"] - truth
        covered = int(((group["ci_low"] <= truth) & (truth <= group["ci_high"])).sum())
        better = METHOD_A if truth > 0 else METHOD_B if truth < 0 else None
        declared = group["winner"] != "none"
        counts = {
            "coverage": covered,
            "winner_rate": int(declared.sum()),
            "power": int((group["winner"] == better).sum()) if better else 0,
            "wrong_winner_rate": int((declared & (group["winner"] != better)).sum()),
            "a_winner_rate": int((group["winner"] == METHOD_A).sum()),
        }
        n = len(group)
        row = dict(zip(SUMMARY_KEYS, key, strict=True)) | {
            "studies": n,
            "truth": truth,
            "mean_estimate": float(group["relative_win_rate"].mean()),
            "bias": float(error.mean()),
            "bias_se": float(error.std(ddof=1) / np.sqrt(n)) if n > 1 else np.nan,
            "rmse": float(np.sqrt((error**2).mean())),
        }
        for name, k in counts.items():
            ci = proportion_interval(k, n, confidence)
            row |= {name: ci.mean, f"{name}_low": ci.low, f"{name}_high": ci.high}
        if better is None:
            row["power"] = row["power_low"] = row["power_high"] = np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def scenario_table(model: JudgeModel, studied: Sequence[Scenario], studies: int) -> pd.DataFrame:
    """What each simulated scenario truly is, as the report states it: its studies, its difference
    (mean over the aspects, and whether it is the same on every aspect), its true relative win rate
    and A's length gap.
    """
    return pd.DataFrame(
        [
            {
                "scenario": scenario.name,
                "studies": studies,
                "difference_points": float(np.mean(scenario.difference)),
                "uniform_difference": len(set(scenario.difference)) == 1,
                "true_relative_win_rate": true_relative_win_rate(model, scenario.difference),
                "length_gap_words": scenario.length_gap_words,
            }
            for scenario in studied
        ]
    )


def scenarios(
    model: JudgeModel, win_rate_difference: float, length_gap_words: float
) -> tuple[Scenario, Scenario]:
    """The A/A scenario (no true difference) and the effect scenario (A better on every aspect by the
    difference whose true relative win rate is `win_rate_difference`), A's answers longer by the gap in
    both.
    """
    effect = difference_for_win_rate(model, win_rate_difference)
    return (
        Scenario("A/A", (0.0,) * len(model.aspects), length_gap_words),
        Scenario(
            f"A better (true relative win rate {win_rate_difference:+.2f})",
            (effect,) * len(model.aspects),
            length_gap_words,
        ),
    )
