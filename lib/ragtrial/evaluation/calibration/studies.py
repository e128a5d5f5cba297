"""Simulated studies: two methods with a known true difference answer simulated questions, and the kit's
own protocols judge them through the simulated judge, exactly as notebooks 06 and 07 call them
(`judge_classic` and `classic_summary`; `align_lengths`, `judge_unbiased` and `aggregate_unbiased`; the
claim rule of `sanity_table`). Many studies give each protocol's bias, interval coverage, power and
spurious-winner rate against the truth.

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
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ragtrial.config.judge import JudgeSettings
from ragtrial.evaluation.calibration.judge import SimulatedAnswer, SimulatedJudge, simulated_llm
from ragtrial.evaluation.calibration.model import JudgeModel, true_relative_win_rate, uniform_difference
from ragtrial.evaluation.judge.aggregate import classic_summary, unbiased_summary
from ragtrial.evaluation.judge.audits import sanity_table
from ragtrial.evaluation.judge.pairs import PAIR_COLUMNS, align_lengths
from ragtrial.evaluation.judge.protocols import Judgments, judge_classic, judge_unbiased
from ragtrial.stats import proportion_interval

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
    """The questions, the two methods' answers (`PAIR_COLUMNS`) and what the judge knows of every answer
    text; `regenerate` / `append` are the methods' length alignment (they write the target length
    exactly, keeping the answer's quality).
    """

    pairs: pd.DataFrame
    answers: dict[str, SimulatedAnswer]
    originals: dict[tuple[str, str], SimulatedAnswer]  # (question_id, method) -> its answer
    versions: Counter[tuple[str, str]]  # (question_id, method) -> answers written so far

    def write(self, question_id: str, method: str, words: int, answer: SimulatedAnswer) -> str:
        """A new answer text of `words` words (a unique first word), known to the judge as `answer`."""
        version = self.versions[(question_id, method)]
        self.versions[(question_id, method)] += 1
        text = " ".join([f"{question_id}-{method}-v{version}", *(["lorem"] * (max(words, MIN_WORDS) - 1))])
        self.answers[text] = answer
        return text

    def regenerate(self, question_id: str, method: str, replicate: int, target_words: int) -> str:
        return self.write(question_id, method, target_words, self.originals[(question_id, method)])

    def append(self, question: str, answer: str, n_words: int, method: str) -> str:
        text = " ".join(["lorem"] * n_words)
        self.answers[f"{answer.rstrip()} {text}".strip()] = self.answers[answer]
        return text


def make_world(
    model: JudgeModel,
    scenario: Scenario,
    n_questions: int,
    answer_words: int,
    length_sd_words: float,
    seed: int,
) -> SimulatedWorld:
    """`n_questions` questions, each answered once by A and by B: a shared level (sd `level_sd`), the
    difference per aspect plus the question's spread (sd `question_sd`), split evenly between the two;
    lengths around `answer_words` (sd `length_sd_words`), A's longer by the scenario's gap.
    """
    rng = np.random.default_rng([seed, 1])
    delta = uniform_difference(scenario.difference, model.aspects)
    level = rng.normal(0.0, model.level_sd, (n_questions, 1))
    spread = rng.normal(0.0, model.question_sd, (n_questions, 1))
    quality_a, quality_b = level + (delta + spread) / 2, level - (delta + spread) / 2
    gap = scenario.length_gap_words / 2
    words_a = np.rint(rng.normal(answer_words + gap, length_sd_words, n_questions)).astype(int)
    words_b = np.rint(rng.normal(answer_words - gap, length_sd_words, n_questions)).astype(int)
    world = SimulatedWorld(pd.DataFrame(columns=PAIR_COLUMNS), {}, {}, Counter())
    rows = []
    for i in range(n_questions):
        question_id = f"s{seed}q{i}"
        for method, quality in ((METHOD_A, quality_a[i]), (METHOD_B, quality_b[i])):
            world.originals[(question_id, method)] = SimulatedAnswer(f"{method}#0", tuple(quality))
        text_a = world.write(question_id, METHOD_A, words_a[i], world.originals[(question_id, METHOD_A)])
        text_b = world.write(question_id, METHOD_B, words_b[i], world.originals[(question_id, METHOD_B)])
        rows.append(
            (question_id, f"Simulated question {i}?", QUESTION_TYPE, METHOD_A, 0, text_a, METHOD_B, 0, text_b)
        )
    world.pairs = pd.DataFrame(rows, columns=PAIR_COLUMNS)
    return world


# ---------------------------------------------------------------- one study, every design


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


def run_study(
    model: JudgeModel,
    scenario: Scenario,
    grid: Grid,
    judge: JudgeSettings,
    study: int,
    *,
    seed: int,
    answer_words: int,
    length_sd_words: float,
    resamples: int,
) -> pd.DataFrame:
    """One simulated study read at every design of `grid` (`STUDY_COLUMNS`): per protocol, the
    relative win rate of A with its interval and adjusted p-value as `sanity_table` reports them, whether
    the claim rule declares a winner (`winner`: method_a, method_b or "none"), and the truth. The
    protocols run as `judge` configures them (classic ties and repeats, alignment tolerance and
    regenerations, token caps, temperature).
    """
    study_seed = seed * 1_000_003 + study
    world = make_world(model, scenario, max(grid.questions), answer_words, length_sd_words, study_seed)
    simulated = SimulatedJudge(model, world.answers, study_seed, repeats=max(grid.repeats))
    llm = simulated_llm(simulated)
    classic = judge_classic(
        llm,
        world.pairs,
        max_tokens=judge.classic_max_tokens,
        temperature=judge.judge_temperature,
        positions=("AB",),
        repeats=judge.classic_repeats,
        ties=judge.classic_ties,
    )
    aligned, _ = align_lengths(
        world.pairs, world.regenerate, world.append, judge.tolerance_words, judge.max_regenerations
    )
    unbiased = judge_unbiased(
        llm,
        aligned,
        model.aspects,
        trials=max(grid.trials),
        repeats=max(grid.repeats),
        max_tokens=judge.judge_max_tokens,
        temperature=judge.judge_temperature,
    )
    truth = true_relative_win_rate(model, scenario.difference)
    question_ids = list(world.pairs["question_id"])
    rows = []
    for n_questions in grid.questions:
        asked = question_ids[:n_questions]
        classic_table = classic_summary(
            design_subset(classic, 1, judge.classic_repeats, asked), resamples, seed
        )
        for trials, repeats in itertools.product(grid.trials, grid.repeats):
            _, _, summary = unbiased_summary(
                design_subset(unbiased, trials, repeats, asked), resamples, seed=seed
            )
            sides = sanity_table(classic_table, summary).set_index("protocol")
            for protocol, design in (
                ("classic", (1, judge.classic_repeats)),
                ("unbiased", (trials, repeats)),
            ):
                if protocol == "classic" and (trials, repeats) != (grid.trials[0], grid.repeats[0]):
                    continue  # the classic protocol has no M or N: once per question count
                r = sides.loc[protocol]
                winner = (METHOD_A if r.relative_win_rate > 0 else METHOD_B) if r.supported else "none"
                rows.append(
                    [
                        scenario.name,
                        study,
                        protocol,
                        *design,
                        n_questions,
                        truth,
                        r.relative_win_rate,
                        r.ci_low,
                        r.ci_high,
                        r.p_holm,
                        bool(r.supported),
                        winner,
                    ]
                )
    return pd.DataFrame(rows, columns=STUDY_COLUMNS)


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
