"""Settings of the judge-protocol calibration (notebook 12): which audit the simulated judge is fitted
from, the simulated studies (scenarios, designs, how many), and the targets of the recommendation.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ragtrial.config.methods import Resampling

Count = Annotated[int, Field(ge=1)]
# The simulated judge's parameters a user may set over the fitted ones (evaluation.calibration.model).
JudgeParameter = Literal[
    "score_level",
    "level_sd",
    "question_sd",
    "call_sd",
    "trial_sd",
    "position_bias",
    "classic_first_win_rate",
    "length_bias",
    "tie_propensity",
]


class CalibrationSettings(Resampling):
    """Notebook 12 (ragtrial.evaluation.calibration): a simulated judge fitted to a notebook-06 audit runs
    the kit's classic and unbiased protocols over many simulated studies with a known truth, for the
    bias, interval coverage, power and spurious-winner rate of each design, and the smallest design that
    reaches the targets. It makes no model call; the protocols' own settings are the `judge` section's.
    """

    bootstrap_resamples: int = Field(
        500, ge=100, description="bootstrap resamples of every simulated study's intervals and tests"
    )
    audit_run: str = Field(
        "",
        description="the run id of the notebook-06 audit to fit the judge from; empty: this batch's 06 run, "
        "else the latest completed one for the same data set, model and index",
    )
    fit_audit: bool = Field(
        True,
        description="fit the simulated judge to the audit; False: the judge is the model's defaults with "
        "`parameters` set over them (no audit needed)",
    )
    parameters: dict[JudgeParameter, float] = Field(
        {},
        description="parameters of the simulated judge set over the fitted ones (e.g. {trial_sd: 0.2} to "
        "ask what a judge with more trial variation would need)",
    )
    fit_simulated_scores: int = Field(
        50_000,
        ge=1_000,
        description="simulated 0-5 scores per moment evaluation of the fit (replicas of the audit's design)",
    )
    fit_resamples: int = Field(
        200, ge=10, description="audits resampled by question for the moments' covariance (the fit's errors)"
    )
    win_rate_difference: float = Field(
        0.10,
        gt=0,
        lt=1,
        description="the true relative win rate of the effect scenario (A better than B by this many "
        "points of win rate); the A/A scenario has none",
    )
    length_gap_words: float = Field(
        0.0,
        ge=-1000,
        le=1000,
        description="how many words longer method A's answers are as generated, in both scenarios (the "
        "classic protocol judges them so; length alignment closes the gap for the unbiased one)",
    )
    answer_words: int = Field(80, ge=5, description="the mean length of the simulated answers, in words")
    length_sd_words: float = Field(15.0, ge=0, description="the spread of the simulated answers' lengths")
    studies: int = Field(40, ge=2, description="simulated studies per scenario")
    simulated_trials: list[Count] = Field(
        [1, 3], min_length=1, description="the values of M (trials) simulated"
    )
    simulated_repeats: list[Count] = Field(
        [1, 2], min_length=1, description="the values of N (repeats) simulated"
    )
    simulated_questions: list[Annotated[int, Field(ge=4)]] = Field(
        [20, 40], min_length=1, description="the question counts simulated"
    )
    target_power: float = Field(
        0.8, gt=0, lt=1, description="the recommendation's power to declare the truly better method"
    )
    target_false_winner: float = Field(
        0.05,
        gt=0,
        lt=1,
        description="the recommendation's largest rate of declaring a winner in an A/A study",
    )
    max_questions: int = Field(
        2_000, ge=4, description="the largest question count the recommendation considers"
    )
    workers: int = Field(
        2, ge=1, description="processes the simulated studies run in (results are the same at any value)"
    )
    seed: int = Field(0, ge=0, description="seed of the simulated studies and of the fit")
