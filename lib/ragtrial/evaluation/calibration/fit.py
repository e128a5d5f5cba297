"""The simulated judge's parameters fitted from a notebook-06 audit (its saved tables), with their
uncertainty.

- From the unbiased protocol's judgments (`unbiased_judgments`: every call's 0-5 scores of both runs,
  per trial, repeat, order and aspect), by the simulated method of moments: the score level, the
  position shift, how often the two answers get equal scores (per aspect, and on every aspect at
  once), the variance between repeats and between trials of one answer's score, across questions of
  a question's mean score and of its mean difference, and across trials of a trial's mean difference.
  The same moments are computed on simulated replicas of the audit's own design (its questions,
  trials, repeats, orders and aspects, its missing calls left out), drawn by the judge model's own
  `rubric_scores` with fixed random numbers, and the parameters are moved until the two agree
  (Nelder-Mead on the moments scaled by their simulated spread). The audit pairs one method with
  itself, so the true difference is 0 by construction.
- The classic judge's first-shown win rate from its overall verdicts in both orders (`classic_judgments`,
  ties left out): averaged over both orders, the answers' own difference and lengths cancel.
- The length bias from the classic verdicts by word gap (`length_verdicts`): a probit of "the longer
  answer won" on the gap, with the position shift of the order it was shown in as a known offset,
  by maximum likelihood; its slope, in units of the classic spread, gives points per word.

Uncertainty: the whole fit repeated on audits resampled by question (a nonparametric bootstrap).
A parameter the audit cannot measure (trial variation with one trial, the classic or length bias
without classic verdicts) is fixed at its unbiased value and the table says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize, special, stats

from ragtrial.config.calibration import CalibrationSettings
from ragtrial.evaluation.calibration.model import Draws, JudgeModel, rubric_scores
from ragtrial.evaluation.judge.pairs import METHOD_KEY

AUDIT_TABLES = ("unbiased_judgments", "classic_judgments", "length_verdicts")
FLOOR_SD = 0.01  # sds are fitted on the log scale down to this (0 is not a fitted value)
MAX_TIE = 0.99


@dataclass(frozen=True)
class AuditScores:
    """An audit's unbiased judgments as arrays (question unit, trial, repeat, order AB/BA, aspect):
    the scores of run A and run B, NaN where no call was judged.
    """

    a: np.ndarray
    b: np.ndarray
    aspects: tuple[str, ...]
    units: tuple[tuple, ...]  # (pair..., question_id) per question unit

    @property
    def shape(self) -> tuple[int, ...]:
        return self.a.shape

    def take(self, units: np.ndarray) -> AuditScores:
        return AuditScores(self.a[units], self.b[units], self.aspects, tuple(self.units[i] for i in units))


def audit_scores(judgments: pd.DataFrame) -> AuditScores:
    """`unbiased_judgments` of a 06 run (`judge_unbiased`'s frame) as `AuditScores`."""
    if judgments.empty:
        raise ValueError("the audit has no unbiased judgment to fit the judge from")
    aspects = tuple(pd.unique(judgments["aspect"]))
    unit_keys = [*METHOD_KEY, "question_id"]
    units = list(dict.fromkeys(judgments[unit_keys].itertuples(index=False, name=None)))
    trials = sorted(judgments["trial"].unique())
    repeats = sorted(judgments["repeat"].unique())
    shape = (len(units), len(trials), len(repeats), 2, len(aspects))
    index = (
        pd.Index(units).get_indexer(list(judgments[unit_keys].itertuples(index=False, name=None))),
        pd.Index(trials).get_indexer(judgments["trial"]),
        pd.Index(repeats).get_indexer(judgments["repeat"]),
        np.where(judgments["position"] == "AB", 0, 1),
        pd.Index(aspects).get_indexer(judgments["aspect"]),
    )
    a, b = np.full(shape, np.nan), np.full(shape, np.nan)
    a[index], b[index] = judgments["score_a"].to_numpy(float), judgments["score_b"].to_numpy(float)
    return AuditScores(a, b, aspects, tuple(units))


# ---------------------------------------------------------------- moments


# the axes of score arrays (..., units, trials, repeats, orders, aspects), counted from the end
UNIT, TRIAL, REPEAT, ORDER, ASPECT = -5, -4, -3, -2, -1
ALL = (UNIT, TRIAL, REPEAT, ORDER, ASPECT)


def _mean(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """Mean over `axes` of the values present (NaN where none is)."""
    n = np.sum(~np.isnan(x), axis=axes)
    return np.where(n > 0, np.nansum(x, axis=axes) / np.maximum(n, 1), np.nan)


def _var(x: np.ndarray, axis: int) -> np.ndarray:
    """Variance (ddof 1) along `axis` of the values present (NaN where fewer than two are)."""
    n = np.sum(~np.isnan(x), axis=axis)
    mean = np.nansum(x, axis=axis) / np.maximum(n, 1)
    deviations = np.nansum((x - np.expand_dims(mean, axis)) ** 2, axis=axis)
    return np.where(n > 1, deviations / np.maximum(n - 1, 1), np.nan)


def moment_names(shape: tuple[int, ...]) -> list[str]:
    """The moments an audit of this shape (units, trials, repeats, 2, aspects) measures."""
    _, trials, repeats, _, _ = shape
    names = ["mean score", "position shift", "equal scores", "equal on every aspect"]
    names += ["repeat variance"] if repeats > 1 else []
    names += ["trial variance", "trial difference variance"] if trials > 1 else []
    return [*names, "question level variance", "question difference variance"]


def moments(a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    """The fitted moments of score arrays (..., units, trials, repeats, 2 orders, aspects): leading
    replica axes give one value per replica.
    """
    ab = (np.arange(2) == 0)[:, None]  # order AB shows run A first
    judged = ~np.isnan(a)
    equal = np.where(judged, (a == b).astype(float), np.nan)
    every_aspect = np.where(judged.all(axis=ASPECT), np.nan_to_num(equal).min(axis=ASPECT), np.nan)
    out = {
        "mean score": _mean((a + b) / 2, ALL),
        "position shift": _mean(np.where(ab, a - b, b - a), ALL),
        "equal scores": _mean(equal, ALL),
        "equal on every aspect": _mean(every_aspect, (-4, -3, -2, -1)),
    }
    both = np.stack([a, b], axis=UNIT - 1)  # one answer's score, run A's and run B's side by side
    if a.shape[REPEAT] > 1:
        out["repeat variance"] = _mean(_var(both, REPEAT), (-5, -4, -3, -2, -1))
    if a.shape[TRIAL] > 1:
        out["trial variance"] = _mean(_var(_mean(both, (REPEAT,)), TRIAL), (-4, -3, -2, -1))
        out["trial difference variance"] = _var(_mean(a - b, (UNIT, REPEAT, ORDER, ASPECT)), -1)
    out["question level variance"] = _var(_mean((a + b) / 2, (TRIAL, REPEAT, ORDER, ASPECT)), -1)
    out["question difference variance"] = _var(_mean(a - b, (TRIAL, REPEAT, ORDER, ASPECT)), -1)
    return out


# ---------------------------------------------------------------- simulated replicas of the audit


FITTED = ("score_level", "level_sd", "question_sd", "call_sd", "trial_sd", "position_bias", "tie_propensity")
LOG_SCALE = {"level_sd", "question_sd", "call_sd", "trial_sd"}


@dataclass(frozen=True)
class Replicas:
    """Fixed random numbers for `replicas` simulated copies of an audit of `shape`."""

    level: np.ndarray  # (replicas, units)
    spread: np.ndarray  # (replicas, units)
    trial: np.ndarray  # (replicas, trials, 2): per run
    draws: Draws  # calls (replicas, units, trials, repeats, 2 orders), 2 slots, aspects

    @classmethod
    def of(cls, shape: tuple[int, ...], replicas: int, seed: int) -> Replicas:
        units, trials, repeats, orders, aspects = shape
        rng = np.random.default_rng(seed)
        return cls(
            rng.standard_normal((replicas, units)),
            rng.standard_normal((replicas, units)),
            rng.standard_normal((replicas, trials, 2)),
            Draws.of(rng, (replicas, units, trials, repeats, orders), aspects),
        )


def simulated_scores(
    model: JudgeModel, replicas: Replicas, mask: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Run A's and run B's scores in every replica of the audit (NaN where the audit has no call): two
    runs of one method (no true difference), lengths aligned, both orders.
    """
    calls = replicas.draws.tie.shape  # (replicas, units, trials, repeats, orders)
    ab = np.arange(2) == 0  # along the order axis: AB shows run A first
    level = model.level_sd * replicas.level
    spread = model.question_sd * replicas.spread / 2
    run_a, run_b = (level + spread)[..., None, None, None], (level - spread)[..., None, None, None]
    slots = np.stack([np.where(ab, run_a, run_b), np.where(ab, run_b, run_a)], axis=-1)[..., None]
    quality = np.broadcast_to(slots, (*calls, 2, replicas.draws.same.shape[-1]))
    shift = model.trial_sd / math.sqrt(2) * replicas.trial  # (replicas, trials, runs)
    shift_a, shift_b = shift[:, None, :, None, None, 0], shift[:, None, :, None, None, 1]
    shifts = np.stack([np.where(ab, shift_a, shift_b), np.where(ab, shift_b, shift_a)], axis=-1)
    shifts = np.broadcast_to(shifts, (*calls, 2))
    scores = rubric_scores(model, quality, np.zeros(shifts.shape), shifts, replicas.draws).astype(float)
    first, second = scores[..., 0, :], scores[..., 1, :]
    a, b = np.where(ab[:, None], first, second), np.where(ab[:, None], second, first)
    return np.where(mask, a, np.nan), np.where(mask, b, np.nan)


def _model(x: np.ndarray, names: tuple[str, ...], fixed: JudgeModel) -> JudgeModel:
    values = {}
    for name, value in zip(names, x, strict=True):
        if name in LOG_SCALE:
            values[name] = FLOOR_SD + math.exp(min(value, 5.0))
        elif name == "tie_propensity":
            values[name] = MAX_TIE * float(special.expit(value))
        else:
            values[name] = float(value)
    return JudgeModel(**(fixed.as_fields() | values))


def _vector(model: JudgeModel, names: tuple[str, ...]) -> np.ndarray:
    out = []
    for name in names:
        value = getattr(model, name)
        if name in LOG_SCALE:
            out.append(math.log(max(value - FLOOR_SD, 1e-4)))
        elif name == "tie_propensity":
            out.append(float(special.logit(min(max(value / MAX_TIE, 1e-4), 1 - 1e-4))))
        else:
            out.append(value)
    return np.array(out)


def _start(observed: dict[str, float], aspects: tuple[str, ...], trials: int) -> JudgeModel:
    """Starting values from the moments read as if the scores were continuous (Sheppard's 1/12)."""
    noise = observed.get("repeat variance", observed.get("trial variance", 0.5)) - 1 / 12
    return JudgeModel(
        aspects=aspects,
        score_level=observed["mean score"],
        level_sd=math.sqrt(max(observed["question level variance"], 0.01)),
        question_sd=math.sqrt(max(observed["question difference variance"], 0.01)),
        call_sd=math.sqrt(max(noise, 0.01)),
        trial_sd=0.1 if trials > 1 else 0.0,
        position_bias=observed["position shift"],
        tie_propensity=0.05,
    )


@dataclass(frozen=True)
class ScoreFit:
    model: JudgeModel
    moments: pd.DataFrame  # moment, observed, fitted, scale
    se: dict[str, float]  # the sandwich standard error of each fitted parameter


def replicas_for(shape: tuple[int, ...], simulated_scores_budget: int) -> int:
    """How many replicas of an audit of `shape` fit in a budget of simulated scores (at least 4)."""
    return max(4, simulated_scores_budget // int(np.prod(shape)))


def bootstrap_moments(scores: AuditScores, names: list[str], resamples: int, seed: int) -> np.ndarray:
    """The moments of `resamples` audits resampled by question, (resamples, moments)."""
    rng = np.random.default_rng([seed, 3])
    picks = rng.integers(0, scores.shape[0], (resamples, scores.shape[0]))
    per_chunk = max(1, 2_000_000 // scores.a.size)
    rows = []
    for start in range(0, resamples, per_chunk):
        chunk = picks[start : start + per_chunk]
        values = moments(scores.a[chunk], scores.b[chunk])
        rows.append(np.column_stack([values[n] for n in names]))
    return np.vstack(rows)


def fit_scores(
    scores: AuditScores, simulated_scores_budget: int = 50_000, resamples: int = 200, seed: int = 0
) -> ScoreFit:
    """The rubric-score parameters (`FITTED`; trial_sd only with two trials or more) by the simulated
    method of moments (see the module's docstring), with sandwich standard errors: the moments'
    covariance over audits resampled by question (plus the simulation's own, over the replicas),
    through the finite-difference slopes of the simulated moments in the parameters.
    """
    names = moment_names(scores.shape)
    computed = moments(scores.a, scores.b)
    observed = {name: float(computed[name]) for name in names}
    usable = [name for name in names if math.isfinite(observed[name])]
    fitted = tuple(p for p in FITTED if p != "trial_sd" or scores.shape[1] > 1)
    first = _start(observed, scores.aspects, scores.shape[1])
    replicas = replicas_for(scores.shape, simulated_scores_budget)
    draws = Replicas.of(scores.shape, replicas, seed)
    mask = ~np.isnan(scores.a)

    def simulated(model: JudgeModel) -> np.ndarray:
        """The usable moments of every replica at `model`, (replicas, moments)."""
        values = moments(*simulated_scores(model, draws, mask))
        return np.column_stack([values[n] for n in usable])

    spread = simulated(first)
    scale = np.maximum(np.nanstd(spread, axis=0), 0.01)
    target = np.array([observed[n] for n in usable])

    def loss(x: np.ndarray) -> float:
        return float(
            np.nansum(((np.nanmean(simulated(_model(x, fitted, first)), axis=0) - target) / scale) ** 2)
        )

    x0 = _vector(first, fitted)
    steps = np.where([n in LOG_SCALE or n == "tie_propensity" for n in fitted], 0.5, 0.3)
    found = optimize.minimize(
        loss,
        x0,
        method="Nelder-Mead",
        options={"initial_simplex": np.vstack([x0, x0 + np.diag(steps)]), "maxfev": 500, "xatol": 1e-3},
    )
    model = _model(found.x, fitted, first)
    at_fit = simulated(model)
    se = _sandwich(
        model, fitted, simulated, at_fit, scale, bootstrap_moments(scores, usable, resamples, seed)
    )
    table = pd.DataFrame(
        {
            "moment": usable,
            "observed": target,
            "fitted": np.nanmean(at_fit, axis=0),
            "scale": scale,
        }
    )
    return ScoreFit(model, table, se)


# finite-difference steps of the parameters, in their own units (the sds relative)
STEP = {"score_level": 0.05, "position_bias": 0.05, "tie_propensity": 0.02}


def _sandwich(model, fitted, simulated, at_fit, scale, boot) -> dict[str, float]:
    """SMM standard errors: A G'W (S_obs + S_sim) W G A with A = (G'WG)^-1, W = diag(1/scale^2)."""
    columns = []
    for name in fitted:
        value = getattr(model, name)
        h = STEP.get(name, max(0.02, 0.1 * value))
        low = (
            max(value - h, FLOOR_SD)
            if name in LOG_SCALE
            else max(value - h, 0.0)
            if name == "tie_propensity"
            else value - h
        )
        high = value + h
        up = np.nanmean(simulated(JudgeModel(**(model.as_fields() | {name: high}))), axis=0)
        down = np.nanmean(simulated(JudgeModel(**(model.as_fields() | {name: low}))), axis=0)
        columns.append((up - down) / (high - low))
    g = np.nan_to_num(np.column_stack(columns))
    w = np.diag(1 / scale**2)
    keep = ~np.isnan(boot).any(axis=0)
    s_obs = np.cov(boot[:, keep], rowvar=False) if boot.shape[0] > 1 else np.zeros((keep.sum(),) * 2)
    s_sim = np.cov(np.nan_to_num(at_fit[:, keep]), rowvar=False) / at_fit.shape[0]
    g, w = g[keep], w[np.ix_(keep, keep)]
    bread = np.linalg.pinv(g.T @ w @ g)
    meat = g.T @ w @ (np.atleast_2d(s_obs) + np.atleast_2d(s_sim)) @ w @ g
    variance = np.diag(bread @ meat @ bread)
    return {
        name: float(math.sqrt(v)) if v > 0 else math.nan for name, v in zip(fitted, variance, strict=True)
    }


# ---------------------------------------------------------------- the classic judge and length


def classic_first_win_rate(classic: pd.DataFrame) -> tuple[float, int]:
    """The share of classic overall verdicts (both orders, ties left out) that picked the answer shown
    first, and how many verdicts it is of; (0.5, 0) without any.
    """
    if classic.empty:
        return 0.5, 0
    overall = classic[(classic["aspect"] == "overall") & (classic["winner_slot"] != 0)]
    if overall.empty:
        return 0.5, 0
    return float((overall["winner_slot"] == 1).mean()), len(overall)


def length_slope(verdicts: pd.DataFrame, first_win_rate: float) -> tuple[float, float, int]:
    """The probit slope per word of "the longer answer won" on the word gap, with the order's position
    shift (Phi^-1 of the first-shown win rate, + when the longer answer was shown first) as offset; its
    standard error (observed information), and the verdicts it is of. (0, NaN, 0) without verdicts.
    """
    if verdicts.empty:
        return 0.0, math.nan, 0
    longer_first = (verdicts["longer"] == "a") == (verdicts["position"] == "AB")
    offset = float(stats.norm.ppf(first_win_rate)) * np.where(longer_first, 1.0, -1.0)
    gap = verdicts["gap"].to_numpy(float)
    sign = np.where(verdicts["longer_won"], 1.0, -1.0)

    def negative_log_likelihood(slope: float) -> float:
        return float(-stats.norm.logcdf(sign * (slope * gap + offset)).sum())

    found = optimize.minimize_scalar(negative_log_likelihood, bounds=(-0.5, 0.5), method="bounded")
    h = 1e-4
    curvature = (
        negative_log_likelihood(found.x + h) - 2 * found.fun + negative_log_likelihood(found.x - h)
    ) / h**2
    se = 1 / math.sqrt(curvature) if curvature > 0 else math.nan
    return float(found.x), se, len(verdicts)


# ---------------------------------------------------------------- the whole fit


PARAMETER_COLUMNS = ["parameter", "estimate", "se", "ci_low", "ci_high", "measured_from", "note"]
# Where a parameter lives: an interval is clipped to it.
RANGE = {"classic_first_win_rate": (0.0, 1.0), "tie_propensity": (0.0, 1.0)}


@dataclass(frozen=True)
class JudgeFit:
    model: JudgeModel
    parameters: pd.DataFrame  # PARAMETER_COLUMNS
    moments: pd.DataFrame  # the score moments, observed and fitted
    source: str = ""  # where the parameters come from, when not from a fit ("" for a fit)


def fit_judge(
    tables: dict[str, pd.DataFrame],
    simulated_scores_budget: int = 50_000,
    resamples: int = 200,
    seed: int = 0,
    confidence: float = 0.95,
) -> JudgeFit:
    """The judge model of a notebook-06 audit from its saved tables (`AUDIT_TABLES`: a missing classic or
    length table leaves those biases unmeasured), each parameter with a standard error and a normal
    interval at `confidence` (see the module's docstring).
    """
    scores = audit_scores(tables["unbiased_judgments"])
    classic = tables.get("classic_judgments", pd.DataFrame())
    verdicts = tables.get("length_verdicts", pd.DataFrame())
    score_fit = fit_scores(scores, simulated_scores_budget, resamples, seed)
    first_rate, n_classic = classic_first_win_rate(classic)
    first_rate = min(max(first_rate, 0.01), 0.99)
    slope, slope_se, n_verdicts = length_slope(verdicts, first_rate)
    model = JudgeModel(**(score_fit.model.as_fields() | {"classic_first_win_rate": first_rate}))
    model = JudgeModel(**(model.as_fields() | {"length_bias": slope * model.classic_spread}))
    se = score_fit.se | {
        "classic_first_win_rate": math.sqrt(first_rate * (1 - first_rate) / n_classic)
        if n_classic
        else math.nan,
        "length_bias": slope_se * model.classic_spread,
    }
    n_units, n_trials, n_repeats = scores.shape[:3]
    design = f"{n_units} questions x {n_trials} trials x {n_repeats} repeats x 2 orders"
    source = {name: f"unbiased judgments ({design}), simulated moments" for name in FITTED}
    source["classic_first_win_rate"] = f"classic overall verdicts in both orders ({n_classic})"
    source["length_bias"] = f"classic verdicts on unaligned pairs, probit on the word gap ({n_verdicts})"
    notes = {
        "trial_sd": "not measured: the audit ran one trial (fixed at 0)" if n_trials < 2 else "",
        "classic_first_win_rate": "not measured: no classic verdict (fixed at 0.5)" if not n_classic else "",
        "length_bias": "not measured: no verdict on answers of unequal length (fixed at 0)"
        if not n_verdicts
        else "",
    }
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    rows = []
    for name in (*FITTED, "classic_first_win_rate", "length_bias"):
        value, error = getattr(model, name), se.get(name, math.nan)
        low, high = RANGE.get(name, (0.0, math.inf) if name in LOG_SCALE else (-math.inf, math.inf))
        rows.append(
            {
                "parameter": name,
                "estimate": value,
                "se": error,
                "ci_low": max(low, value - z * error) if math.isfinite(error) else math.nan,
                "ci_high": min(high, value + z * error) if math.isfinite(error) else math.nan,
                "measured_from": source[name],
                "note": notes.get(name, ""),
            }
        )
    return JudgeFit(model, pd.DataFrame(rows, columns=PARAMETER_COLUMNS), score_fit.moments)


def calibration_judge(
    tables: dict[str, pd.DataFrame] | None, aspects: Sequence[str], settings: CalibrationSettings
) -> JudgeFit:
    """The judge notebook 12 simulates: fitted to the audit `tables` (None: no audit is fitted), or the
    model's defaults on `aspects` when there is nothing to fit (no audit, or an audit whose unbiased
    judge calls all failed), with `settings.parameters` set over it.
    """
    if tables is not None and not tables["unbiased_judgments"].empty:
        fit = fit_judge(tables, settings.fit_simulated_scores, settings.fit_resamples, settings.seed)
        source = fit.source
    else:
        fit = JudgeFit(
            JudgeModel(aspects=tuple(aspects)), pd.DataFrame(columns=PARAMETER_COLUMNS), pd.DataFrame()
        )
        source = (
            "the model's defaults (`calibration.fit_audit` is false)"
            if tables is None
            else "the model's defaults: the audit has no unbiased judgment to fit (every call failed)"
        )
    parameters: dict[str, Any] = fit.model.as_fields() | settings.parameters
    return JudgeFit(JudgeModel(**parameters), fit.parameters, fit.moments, source)
