"""The calibration of notebook 12: the simulated judge behind the LLM interface answers the kit's own
protocols; with no bias the unbiased protocol's intervals cover the truth at their nominal rate; with
a position bias the classic protocol declares the first-shown method at the closed-form rate and the
unbiased one does not; fitting an audit of a known judge recovers its parameters.

Statistical tests are seeded (deterministic) and state their tolerance: about three Monte Carlo
standard errors of the rate they check, plus the named approximation.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from conftest import batch_runs

import ragtrial.evaluation.judge.aggregate as aggregate
import ragtrial.evaluation.judge.audits as audits
import ragtrial.evaluation.judge.pipeline as pipeline
import ragtrial.evaluation.judge.protocols as protocols
from ragtrial.config.judge import JudgeSettings
from ragtrial.evaluation.calibration import studies
from ragtrial.evaluation.calibration.design import (
    classic_declared_probability,
    classic_first_shown_probability,
)
from ragtrial.evaluation.calibration.fit import fit_judge
from ragtrial.evaluation.calibration.judge import NotAJudgeCall, SimulatedJudge, simulated_llm
from ragtrial.evaluation.calibration.model import JudgeModel, difference_for_win_rate, true_relative_win_rate
from ragtrial.evaluation.calibration.studies import (
    Grid,
    Scenario,
    StudyPlan,
    design_subset,
    make_world,
    run_study,
    scenarios,
    simulate_audit,
)
from ragtrial.llm.errors import LLMError
from ragtrial.stats import claim_supported

ASPECTS = ("comprehensiveness", "relevance", "empowerment", "directness")
NO_BIAS = JudgeModel(aspects=ASPECTS, call_sd=0.6, question_sd=0.5, level_sd=0.5)
JUDGE = JudgeSettings()


def studies_in_one_world(model: JudgeModel, studies_n: int, questions: int, seed: int):
    """`studies_n` independent studies of `questions` questions as blocks of one simulated world (the
    questions are independent and there is no trial shift, so a block is a study), and the LLM that
    judges them.
    """
    world = make_world(model, Scenario("A/A", (0.0,) * len(ASPECTS)), studies_n * questions, 80, 15.0, seed)
    llm = simulated_llm(SimulatedJudge(model, world.answers, seed))
    asked = list(world.pairs["question_id"])  # `pairs` pairs every answer again: read it once
    blocks = [asked[i * questions : (i + 1) * questions] for i in range(studies_n)]
    return world, llm, blocks


def test_the_studies_run_the_kits_own_protocols_through_the_llm_interface():
    # the very pipeline and functions notebooks 06 and 07 call, not copies
    assert studies.run_judge_pipeline is pipeline.run_judge_pipeline
    assert studies.unbiased_summary is aggregate.unbiased_summary
    assert studies.classic_summary is aggregate.classic_summary
    assert studies.sanity_table is audits.sanity_table
    world = make_world(NO_BIAS, Scenario("A/A", (0.0,) * 4), 6, 80, 15.0, seed=1)
    llm = simulated_llm(SimulatedJudge(NO_BIAS, world.answers, seed=1, repeats=2))
    run = protocols.judge_unbiased(
        llm, world.pairs, ASPECTS, trials=3, repeats=2, max_tokens=48, temperature=0.7
    )
    ledger = llm.ledger.frame()
    assert len(ledger) == 3 * 2 * 2 * 6 and set(ledger["stage"]) == {"judge_unbiased"}
    assert (ledger["served_model"] == "simulated judge").all() and ledger["prompt_tokens"].gt(100).all()
    # replies are deterministic given the seed: a second judge answers every call alike
    again = simulated_llm(SimulatedJudge(NO_BIAS, world.answers, seed=1, repeats=2))
    rerun = protocols.judge_unbiased(
        again, world.pairs, ASPECTS, trials=3, repeats=2, max_tokens=48, temperature=0.7
    )
    pd.testing.assert_frame_equal(run.judgments, rerun.judgments)
    # a smaller design read from the run is exactly what the protocol makes at that design
    smaller = protocols.judge_unbiased(
        again, world.pairs.iloc[:4], ASPECTS, trials=2, repeats=2, max_tokens=48, temperature=0.7
    )
    subset = design_subset(run, 2, 2, list(world.pairs["question_id"][:4]))
    pd.testing.assert_frame_equal(
        subset.judgments.sort_values([*protocols.CALL_KEY, "aspect"]).reset_index(drop=True),
        smaller.judgments.sort_values([*protocols.CALL_KEY, "aspect"]).reset_index(drop=True),
    )
    # the summary alone is aggregate_unbiased's summary
    pd.testing.assert_frame_equal(
        aggregate.unbiased_summary(run, 200)[2], aggregate.aggregate_unbiased(run, 200).summary
    )
    with pytest.raises(LLMError, match=f"{NotAJudgeCall.__name__}.*answer_long"):
        llm.complete("Write an answer.", stage="answer", prompt=protocols.load_prompt("answer_long"))


def test_a_study_reads_every_design_and_states_the_truth():
    model = JudgeModel(aspects=ASPECTS, position_bias=0.3, classic_first_win_rate=0.7)
    effect = difference_for_win_rate(model, 0.2)
    assert true_relative_win_rate(model, effect) == pytest.approx(0.2)
    assert true_relative_win_rate(model, (effect * 2, 0.0, effect, effect)) > 0  # integrated, not closed form
    plan = StudyPlan(model, Grid((1, 2), (1, 2), (6, 10)), JUDGE, 0, 80, 15.0, 100)
    rows, per_question = run_study(plan, Scenario("effect", (effect,) * 4, 10.0), 0)
    assert len(rows) == 2 * (1 + 4)  # per question count: classic once, unbiased at each (M, N)
    assert np.allclose(rows["truth"], 0.2) and set(rows["winner"]) <= {"method_a", "method_b", "none"}
    assert len(per_question) == 10 * 5 and per_question["code"].between(-1, 1).all()


def test_with_no_bias_the_unbiased_intervals_cover_the_truth_at_their_nominal_rate(simulation_processes):
    """160 A/A studies of 20 questions (M = N = 1): coverage of the truth (0) by the 95% interval
    within 0.07 of 0.95: three Monte Carlo standard errors (0.017 each) and the percentile bootstrap's
    known undercoverage at 20 questions (about 0.02).
    """
    world, llm, blocks = studies_in_one_world(NO_BIAS, 160, 20, seed=11)
    run = protocols.judge_unbiased(
        llm, world.pairs, ASPECTS, trials=1, repeats=1, max_tokens=48, temperature=0.7
    )
    covered = 0
    for block in blocks:
        summary = aggregate.unbiased_summary(design_subset(run, 1, 1, block), 500, seed=0)[2].iloc[0]
        covered += summary.rwr_ci_low <= 0 <= summary.rwr_ci_high
    assert abs(covered / len(blocks) - 0.95) <= 0.07, covered


def test_position_bias_makes_the_classic_protocol_declare_the_first_shown_method_at_the_closed_form_rate(
    simulation_processes,
):
    """A judge with no quality difference that picks the first-shown answer 68% of the time (and shifts
    rubric scores 0.5 toward it): per question the classic protocol's first-shown share is within three
    standard errors of 0.68; over 200 studies of 30 questions its claim rule declares the first-shown
    method at the binomial closed form within 0.105 (three Monte Carlo standard errors); the unbiased
    protocol on 60 of those studies declares a winner in at most 0.05 + 0.085 (three standard errors).
    """
    model = JudgeModel(aspects=ASPECTS, position_bias=0.5, classic_first_win_rate=0.68)
    first_shown = classic_first_shown_probability(model)
    assert first_shown == pytest.approx(0.68)
    world, llm, blocks = studies_in_one_world(model, 200, 30, seed=12)
    classic = protocols.judge_classic(llm, world.pairs, max_tokens=48, temperature=0.7)
    overall = classic.judgments[classic.judgments["aspect"] == "overall"]
    share = float((overall["winner_slot"] == 1).mean())
    assert abs(share - first_shown) <= 3 * math.sqrt(first_shown * (1 - first_shown) / len(overall))
    declared = 0
    for block in blocks:
        row = aggregate.classic_summary(design_subset(classic, 1, 1, block), 200, 0)
        row = row[row["aspect"] == "overall"].iloc[0]
        declared += claim_supported(row.rwr_ci_low, row.rwr_ci_high, row.p_holm) and row.relative_win_rate > 0
    expected = classic_declared_probability(first_shown, 30, 0.05)
    assert 0.2 < expected < 0.8  # a rate the test can tell from 0 and 1
    assert abs(declared / len(blocks) - expected) <= 0.105, (declared, expected)
    unbiased = protocols.judge_unbiased(
        llm, world.pairs.iloc[: 60 * 30], ASPECTS, trials=1, repeats=1, max_tokens=48, temperature=0.7
    )
    spurious = 0
    for block in blocks[:60]:
        summary = aggregate.unbiased_summary(design_subset(unbiased, 1, 1, block), 500, seed=0)[2].iloc[0]
        spurious += claim_supported(summary.rwr_ci_low, summary.rwr_ci_high, summary.p_holm)
    assert spurious / 60 <= 0.135, spurious


TRUE = JudgeModel(
    aspects=ASPECTS,
    score_level=3.2,
    level_sd=0.6,
    question_sd=0.5,
    call_sd=0.6,
    trial_sd=0.2,
    position_bias=0.3,
    classic_first_win_rate=0.7,
    length_bias=0.01,
    tie_propensity=0.1,
)
# How close a fit of one audit of 60 questions x 3 trials x 2 repeats must come to the truth: about two
# to three of the fit's own standard errors at that size.
TOLERANCE = {
    "score_level": 0.2,
    "level_sd": 0.2,
    "question_sd": 0.2,
    "call_sd": 0.08,
    "trial_sd": 0.12,
    "position_bias": 0.08,
    "tie_propensity": 0.04,
    "classic_first_win_rate": 0.12,
    "length_bias": 0.01,
}


def test_fitting_an_audit_of_a_known_judge_recovers_its_parameters():
    tables = simulate_audit(TRUE, JudgeSettings(trials=3, repeats=2), questions=60, seed=3)
    assert set(tables) == {"unbiased_judgments", "classic_judgments", "length_verdicts"}
    fit = fit_judge(tables, simulated_scores_budget=30_000, resamples=50, seed=0)
    table = fit.parameters.set_index("parameter")
    errors = {name: abs(getattr(fit.model, name) - getattr(TRUE, name)) for name in TOLERANCE}
    assert all(errors[n] <= TOLERANCE[n] for n in TOLERANCE), errors
    covered = [table.at[n, "ci_low"] <= getattr(TRUE, n) <= table.at[n, "ci_high"] for n in TOLERANCE]
    assert sum(covered) >= 7, table  # 95% intervals: most of the nine hold the truth
    assert (fit.moments["fitted"] - fit.moments["observed"]).abs().lt(3 * fit.moments["scale"]).all()


def test_an_audit_with_one_trial_and_no_classic_verdicts_fits_what_it_measures():
    tables = simulate_audit(TRUE, JudgeSettings(trials=1, repeats=1), questions=12, seed=4)
    fit = fit_judge(
        {"unbiased_judgments": tables["unbiased_judgments"]}, simulated_scores_budget=5_000, resamples=20
    )
    notes = fit.parameters.set_index("parameter")["note"]
    assert fit.model.trial_sd == 0 and "one trial" in notes["trial_sd"]
    assert fit.model.classic_first_win_rate == 0.5 and "no classic verdict" in notes["classic_first_win_rate"]
    assert fit.model.length_bias == 0 and notes["length_bias"]
    assert np.isfinite(fit.parameters.set_index("parameter").loc["call_sd", "estimate"])


def test_the_effect_scenario_is_a_method_better_by_the_papers_10_point_win_rate():
    """Seed 000 §VI-C ("below 10% in win rate"; `params/paper_calibration.yaml`,
    calibration.win_rate_difference 0.1): notebook 12's scenarios are an A/A study and one where A's
    true relative win rate is exactly that difference, A's answers longer by the batch's gap in both.
    """
    (cfg,) = [
        s.settings.calibration
        for s in batch_runs("params/paper_calibration.yaml")
        if s.notebook.startswith("12")
    ]
    null, effect = scenarios(NO_BIAS, cfg.win_rate_difference, cfg.length_gap_words)
    assert true_relative_win_rate(NO_BIAS, null.difference) == 0
    assert true_relative_win_rate(NO_BIAS, effect.difference) == pytest.approx(0.1)
    assert null.length_gap_words == effect.length_gap_words == cfg.length_gap_words
