"""The simulated judge's parameters and its score model: what a judge call answers, as a function of
the two answers' latent quality, where each was shown, their lengths, the trial and the call's noise.

Every answer has a latent quality per aspect on the rubric's 0-5 scale, relative to the judge's
`score_level`: a question's two answers share a level (`level_sd` across questions), and differ by the
methods' true difference per aspect plus a per-question spread (`question_sd`: even two runs of one
method write answers of different quality). One judge call perceives each answer as

    score_level + quality + position_bias (shown first) + length_bias * (its words - the other's) / 2
    + trial shift of its method (sd trial_sd / sqrt 2 per method, so trial_sd on the difference)
    + call noise (sd call_sd, per answer and aspect)

and scores it by rounding to an integer in 0..5; with probability `tie_propensity` it does not tell the
two apart and gives both the same scores. The classic judge picks the answer it perceives better per
criterion (a criterion that is not a rubric aspect, and "overall", perceive the mean over the aspects);
its position shift is stated as the probability that it picks the first-shown of two answers of equal
expected quality (`classic_first_win_rate`, what notebook 06's position audit measures), and with ties
allowed it calls a tie with probability `tie_propensity`.

The truth a protocol should find: per question, whether A's answer is better, as this judge sees it
without its biases and noise (its expected score, summed over the aspects, from infinitely many
position-balanced calls on length-aligned answers); the true relative win rate is P(A better) - P(B
better) over the question population.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from scipy import stats

from ragtrial.evaluation.judge.protocols import CLASSIC_ASPECTS

MAX_SCORE = 5
CLASSIC_CRITERIA = (*CLASSIC_ASPECTS, "overall")
# Questions drawn to integrate the true relative win rate when the difference is not the same on every
# aspect (a uniform difference has a closed form).
TRUTH_DRAWS = 200_000


@dataclass(frozen=True)
class JudgeModel:
    """A judge's parameters (set them, or fit them from a notebook-06 audit: `calibration.fit`)."""

    aspects: tuple[str, ...]  # the rubric aspects it scores, in the scoring prompt's order
    score_level: float = 3.0  # its mean score
    level_sd: float = 0.5  # spread of a question's answer level, across questions
    question_sd: float = 0.5  # per-question spread of the two answers' quality difference
    call_sd: float = 0.5  # per-call noise, per answer and aspect
    trial_sd: float = 0.0  # per-trial shift of the difference between two methods
    position_bias: float = 0.0  # points added to the first-shown answer's rubric scores
    classic_first_win_rate: float = 0.5  # classic: P(the first-shown of two equal answers wins)
    length_bias: float = 0.0  # points per word of length gap, to the longer answer
    tie_propensity: float = 0.0  # P(a call gives both answers the same scores; a classic tie)

    def __post_init__(self) -> None:
        if not self.aspects:
            raise ValueError("a judge model needs at least one aspect")
        for name in ("level_sd", "question_sd", "call_sd", "trial_sd"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not self.question_sd > 0:
            raise ValueError("question_sd must be > 0: without it every question has the same winner")
        if not 0 < self.classic_first_win_rate < 1:
            raise ValueError(f"classic_first_win_rate must lie in (0, 1), got {self.classic_first_win_rate}")
        if not 0 <= self.tie_propensity < 1:
            raise ValueError(f"tie_propensity must lie in [0, 1), got {self.tie_propensity}")

    @property
    def classic_spread(self) -> float:
        """The sd of the classic judge's perceived difference between two answers of equal expected
        quality: the question spread and both answers' call noise.
        """
        return math.hypot(self.question_sd, math.sqrt(2) * self.call_sd)

    @property
    def classic_position_shift(self) -> float:
        """The classic judge's shift toward the first-shown answer, in points."""
        return float(stats.norm.ppf(self.classic_first_win_rate)) * self.classic_spread

    def as_fields(self) -> dict[str, Any]:
        """The parameters by name (`JudgeModel(**model.as_fields() | changes)` makes a variant)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def as_row(self) -> dict[str, object]:
        """The parameters as one table row (aspects joined)."""
        return self.as_fields() | {"aspects": ", ".join(self.aspects)}


# ---------------------------------------------------------------- one call's reply


@dataclass(frozen=True)
class Draws:
    """The random numbers of judge calls, shape (..., 2, aspects or criteria) for `noise` (standard
    normal, per answer), (..., aspects) for `same` (standard normal, a call that does not tell the
    answers apart) and (...) for `tie` (uniform). Drawn apart from the model so that a fit can hold
    them fixed while it moves the parameters (common random numbers).
    """

    noise: np.ndarray
    same: np.ndarray
    tie: np.ndarray

    @classmethod
    def of(cls, rng: np.random.Generator, calls: tuple[int, ...], width: int) -> Draws:
        return cls(
            rng.standard_normal((*calls, 2, width)), rng.standard_normal((*calls, width)), rng.random(calls)
        )


def rubric_scores(
    model: JudgeModel, quality: np.ndarray, words: np.ndarray, trial_shift: np.ndarray, draws: Draws
) -> np.ndarray:
    """Integer 0-5 scores, shape (..., 2, aspects): index 0 of the second-last axis is the answer
    shown first. `quality` (..., 2, aspects) is each answer's latent quality, `words` (..., 2) its
    length, `trial_shift` (..., 2) its method's shift in this trial.
    """
    quality, words, trial_shift = (np.asarray(a, dtype=float) for a in (quality, words, trial_shift))
    gap = words - words[..., ::-1]
    first = np.zeros(words.shape)
    first[..., 0] = model.position_bias
    shift = first + model.length_bias * gap / 2 + trial_shift
    latent = model.score_level + quality + shift[..., None] + model.call_sd * draws.noise
    # a call that does not tell the answers apart scores both as their average
    same = (
        model.score_level
        + quality.mean(axis=-2)
        + shift.mean(axis=-1)[..., None]
        + model.call_sd * draws.same
    )
    tie = draws.tie < model.tie_propensity
    latent = np.where(tie[..., None, None], same[..., None, :], latent)
    return np.clip(np.rint(latent), 0, MAX_SCORE).astype(int)


def classic_picks(
    model: JudgeModel,
    quality: np.ndarray,
    words: np.ndarray,
    trial_shift: np.ndarray,
    ties: bool,
    draws: Draws,
) -> np.ndarray:
    """The classic judge's answer per criterion, shape (..., criteria): 1 (the first-shown answer),
    2, or 0 for a tie when `ties`. `quality` (..., 2, criteria) is each answer's latent quality per
    criterion (`criterion_quality`), `words` and `trial_shift` (..., 2) as in `rubric_scores`.
    """
    quality, words, trial_shift = (np.asarray(a, dtype=float) for a in (quality, words, trial_shift))
    shift = (
        model.classic_position_shift
        + model.length_bias * (words[..., 0] - words[..., 1])
        + trial_shift[..., 0]
        - trial_shift[..., 1]
    )
    noise = model.call_sd * (draws.noise[..., 0, :] - draws.noise[..., 1, :])
    perceived = quality[..., 0, :] - quality[..., 1, :] + shift[..., None] + noise
    picks = np.where(perceived > 0, 1, 2)
    if ties:
        picks = np.where((draws.tie < model.tie_propensity)[..., None], 0, picks)
    return picks


def criterion_quality(quality: np.ndarray, aspects: Sequence[str]) -> np.ndarray:
    """Per classic criterion (CLASSIC_CRITERIA), the latent quality the classic judge perceives: the
    aspect of that name, else (diversity, overall) the mean over the aspects. Last axis: aspects ->
    criteria.
    """
    quality = np.asarray(quality, dtype=float)
    mean = quality.mean(axis=-1)
    columns = [quality[..., list(aspects).index(c)] if c in aspects else mean for c in CLASSIC_CRITERIA]
    return np.stack(columns, axis=-1)


# ---------------------------------------------------------------- the truth


def expected_score(latent: np.ndarray, sd: float) -> np.ndarray:
    """E[clip(round(latent + noise), 0, 5)] for normal noise of sd `sd` (the rounded score itself at 0)."""
    latent = np.asarray(latent, dtype=float)
    if sd <= 0:
        return np.clip(np.rint(latent), 0, MAX_SCORE)
    # E = sum over s=1..5 of P(score >= s) = sum of P(latent + noise >= s - 1/2)
    steps = np.arange(1, MAX_SCORE + 1) - 0.5
    return stats.norm.sf((steps - latent[..., None]) / sd).sum(axis=-1)


def uniform_difference(difference: float | Sequence[float], aspects: Sequence[str]) -> np.ndarray:
    """The methods' true difference per aspect (one number: the same on every aspect)."""
    values = np.broadcast_to(np.asarray(difference, dtype=float), (len(aspects),)).copy()
    return values


def true_relative_win_rate(model: JudgeModel, difference: float | Sequence[float], seed: int = 0) -> float:
    """P(A's answer better) - P(B's better) as the judge sees them without biases and noise (see the
    module's docstring); closed form 2 Phi(d / question_sd) - 1 for the same difference d on every
    aspect, else integrated over `TRUTH_DRAWS` questions.
    """
    delta = uniform_difference(difference, model.aspects)
    if np.all(delta == delta[0]):
        return float(2 * stats.norm.cdf(delta[0] / model.question_sd) - 1)
    rng = np.random.default_rng(seed)
    level = rng.normal(0.0, model.level_sd, (TRUTH_DRAWS, 1))
    spread = rng.normal(0.0, model.question_sd, (TRUTH_DRAWS, 1))
    sd = math.hypot(model.call_sd, model.trial_sd / math.sqrt(2))
    a = expected_score(model.score_level + level + (delta + spread) / 2, sd).sum(axis=-1)
    b = expected_score(model.score_level + level - (delta + spread) / 2, sd).sum(axis=-1)
    return float(np.mean(np.sign(a - b)))


def difference_for_win_rate(model: JudgeModel, relative_win_rate: float) -> float:
    """The difference on every aspect whose true relative win rate is `relative_win_rate`."""
    if not -1 < relative_win_rate < 1:
        raise ValueError(f"a relative win rate lies in (-1, 1), got {relative_win_rate}")
    return float(model.question_sd * stats.norm.ppf((1 + relative_win_rate) / 2))
