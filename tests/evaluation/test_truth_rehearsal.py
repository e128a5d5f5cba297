"""The planted truth recovered through a whole batch (issue 36): notebooks 07 and 10 run by the
runner against the simulated capable endpoint, whose judge follows a known truth. The truth rides on
what each method's context shows: the endpoint's answers name every marker their prompt carries, so
local_search's answers (its context holds community reports) carry "(community_report)" and the
planted advantage, lightrag's carry "(relation)" (quality 0: a planted null against naive_rag, whose
chunks carry neither). From the tables the batch saved: the unbiased protocol's intervals cover the
true relative win rate of the answers judged, the classic protocol shows the planted position bias,
and the verdict names local_search better than naive_rag and makes no claim for lightrag.
"""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from capable_server import CapableServer, Truth, true_relative_win_rate
from conftest import PROJECT_ROOT, endpoint_settings

from ragtrial.runner.batch import run_batch

# one pytest worker runs the module: the rehearsal below is its tests' one fixture, built once
pytestmark = [pytest.mark.usefixtures("notebook_kernels"), pytest.mark.xdist_group("truth_rehearsal")]

ADVANTAGE = 0.6
TRUTH = Truth(
    {"(community_report)": ADVANTAGE, "(relation)": 0.0},
    spread=0.3,
    position_bias=0.9,  # classic: the first-shown answer wins 90% of the time between equals
    position_bonus=1.0,  # unbiased: one score point for the first-shown answer (both orders cancel it)
)
PAIRS = [("local_search", "naive_rag"), ("lightrag", "naive_rag")]
SECTIONS = {
    # every level-0 community gets a report, so local_search's contexts show them
    "index": {"graph_source": "nlp", "max_reports": None},
    "judge": {
        "methods": ["local_search", "lightrag", "naive_rag"],
        "pairs": [list(p) for p in PAIRS],
        "questions_per_type": 10,
        "trials": 2,
        "classic_positions": ["AB", "BA"],
        "tolerance_words": 100000,  # no length alignment: the answers judged are the answers saved
        "bootstrap_resamples": 500,
    },
    "verdict": {"bootstrap_resamples": 500, "notebooks": ["07_pairwise_method_comparison"]},
}


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("truth")
    batch = tmp / "batch.yaml"
    runs = [{"notebook": "07_pairwise_method_comparison"}, {"notebook": "10_verdict"}]
    batch.write_text(yaml.safe_dump({"settings": {}, "runs": runs}))
    with CapableServer(time_scale=0.0001, slots=32, truth=TRUTH) as server:
        results = run_batch(
            batch,
            endpoint_settings(server.base_url, tmp, **SECTIONS),
            root=PROJECT_ROOT,
            outputs=tmp / "out",
            log=lambda _: None,
        )
    for result in results:
        assert result.status == "completed", (result.run_id, result.error)
    judged, verdict = (r.run_dir / "tables" for r in results)
    return lambda run, name: pd.read_parquet((judged if run == "07" else verdict) / f"{name}.parquet")


def true_rates(tables) -> dict[tuple[str, str], float]:
    answers = tables("07", "answers").set_index(["question_id", "method"])["text"]
    rates = {}
    for a, b in PAIRS:
        both = answers.unstack("method")[[a, b]].dropna()
        rates[(a, b)] = true_relative_win_rate(TRUTH, list(both[a]), list(both[b]))
    return rates


def test_the_unbiased_intervals_cover_the_true_relative_win_rates(tables):
    summary = tables("07", "unbiased_summary").set_index(["method_a", "method_b"])
    rates = true_rates(tables)
    assert rates[PAIRS[0]] > 0.3 and abs(rates[PAIRS[1]]) < 0.3  # the plant took: an advantage and a null
    for pair, rate in rates.items():
        assert summary.at[pair, "rwr_ci_low"] <= rate <= summary.at[pair, "rwr_ci_high"], pair


def test_the_classic_protocol_shows_the_planted_position_bias(tables):
    classic = tables("07", "classic_summary")
    null = classic[(classic["method_a"] == "lightrag") & (classic["aspect"] == "overall")]
    assert set(null["position"]) == {"AB", "BA"}
    # between equals, whichever is shown first wins (planted 0.9, diluted by the answers' own spread;
    # an unbiased judge: 0.5)
    assert (null["first_slot_win_rate"] > 0.6).all() and null["first_slot_win_rate"].mean() > 0.7


def test_the_verdict_names_the_method_with_the_planted_advantage_and_no_claim_for_the_null(tables):
    verdicts = tables("10", "verdicts")
    judged = verdicts[(verdicts["question_type"] == "all") & (verdicts["measure"] == "judge_score")]
    judged = judged.set_index("method")
    assert set(judged["baseline"]) == {"naive_rag"}
    assert judged.at["local_search", "supported"] and judged.at["local_search", "mean_diff"] > 0
    assert not judged.at["lightrag", "supported"]  # the planted null: no claim
