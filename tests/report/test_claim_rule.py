"""One rule for a claim in every notebook's narrative: fed the same borderline numbers, each says the
same thing. An interval that excludes zero with an adjusted p of 0.5 (notebook 04 once wrote "did
better" there), an interval that includes zero with a tiny p, and a case that meets both conditions.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import pytest

from ragtrial.evaluation.findings import Finding, findings_table
from ragtrial.evaluation.index_findings import recall_difference_table
from ragtrial.evaluation.judge.audits import sanity_table
from ragtrial.questions.quality import compare_generators
from ragtrial.report.narrative.claims import comparison_sentences
from ragtrial.report.narrative.index_build import narrate as narrate_index
from ragtrial.report.narrative.judge import audit_findings, classic_order_sentences, comparison_findings
from ragtrial.report.narrative.tasks import paired_sentences
from ragtrial.stats import Interval, McNemarResult, paired_comparison_table

# (low, high, adjusted p, whether the rule supports a claim)
BORDERLINE = [
    pytest.param(0.05, 0.40, 0.5, False, id="interval-off-zero-test-does-not-reject"),
    pytest.param(-0.05, 0.40, 0.001, False, id="test-rejects-interval-includes-zero"),
    pytest.param(0.05, 0.40, 0.05, True, id="p-at-alpha-rejects"),
    pytest.param(0.05, 0.40, 0.0500001, False, id="p-just-above-alpha-does-not-reject"),
    pytest.param(0.05, 0.40, 0.01, True, id="both-conditions-hold"),
]


def _paired_row(low: float, high: float, p: float) -> dict:
    return dict(mean_diff=(low + high) / 2, ci_low=low, ci_high=high, n=8, wins=5, losses=1, ties=2,
                test="Wilcoxon", statistic=3.0, p_value=p / 4, p_holm=p)  # fmt: skip


def _qa(low: float, high: float, p: float) -> str:  # notebooks 04 and 05
    row = _paired_row(low, high, p) | {"method": "graph_walk", "baseline": "naive_rag", "metric": "f1"}
    return paired_sentences(pd.DataFrame([row]))[0]


def _claims(low: float, high: float, p: float) -> str:  # notebook 08
    row = _paired_row(low, high, p) | {"method_a": "c0", "method_b": "ss", "measure": "claims"}
    return comparison_sentences(pd.DataFrame([row | {"n_shared": 8, "reject": p <= 0.05}]))[0]


def _index(low: float, high: float, p: float) -> str:  # notebook 01
    test = McNemarResult(1, 6, 0.0, p, "exact binomial")
    difference = recall_difference_table((Interval((low + high) / 2, low, high, 8), test))
    findings = findings_table(
        [Finding(s, "", v, "index") for s, v in (("documents", 1), ("chunks", 1), ("llm extraction", 0))]
    )
    build = pd.DataFrame({"wall_s": [2.0], "model_s": [1.0]})
    return narrate_index(
        {"findings": findings, "index_build": build, "graph_counts": pd.DataFrame(),
         "relation_recall_difference": difference}
    ).findings  # fmt: skip


def _classic(low: float, high: float, p: float) -> pd.DataFrame:
    row = dict(pair="a vs b", aspect="overall", position="AB", score_a=0.6, wins_a=5, ties=1, wins_b=2,
               n=8, questions=8, relative_win_rate=(low + high) / 2, rwr_ci_low=low, rwr_ci_high=high,
               win_rate_a=0.6, tie_rate=0.1, loss_rate=0.3, test="Wilcoxon", p_value=p / 2,
               p_holm=p)  # fmt: skip
    return pd.DataFrame([row])


UNBIASED_COLUMNS = ["pair", "questions_judged", "relative_win_rate", "rwr_ci_low", "rwr_ci_high", "win_rate",
                    "tie_rate", "loss_rate", "p_holm"]  # fmt: skip
NO_FLIPS = pd.DataFrame(columns=["pair", "aspect", "flip"])


def _judge_audit(low: float, high: float, p: float) -> str:  # notebook 06's sanity check
    sanity = sanity_table(_classic(low, high, p), pd.DataFrame(columns=UNBIASED_COLUMNS))
    positions = pd.DataFrame(columns=["pair", "protocol", "order", "first_shown_win_rate", "a_win_rate"])
    return audit_findings(sanity, positions, findings_table([]))


def _judge_comparison(low: float, high: float, p: float) -> str:  # notebook 07
    classic = _classic(low, high, p)
    sanity = sanity_table(classic, pd.DataFrame(columns=UNBIASED_COLUMNS))
    return comparison_findings(sanity, classic, NO_FLIPS, pd.DataFrame(), findings_table([]))


NARRATIVES: dict[str, Callable[[float, float, float], str]] = {
    "04/05 paired comparisons": _qa,
    "08 claim counts": _claims,
    "01 LLM vs NLP recall": _index,
    "06 judge sanity check": _judge_audit,
    "07 judge comparison": _judge_comparison,
    "07 classic fixed order": lambda low, high, p: classic_order_sentences(_classic(low, high, p), NO_FLIPS)[
        0
    ],
}
CLAIM_WORDS = ("did better", "gave more", "recalls more", "A better", "B better")


@pytest.mark.parametrize("narrative", NARRATIVES)
@pytest.mark.parametrize(("low", "high", "p", "claimed"), BORDERLINE)
def test_every_narrative_applies_the_one_claim_rule(narrative, low, high, p, claimed) -> None:
    text = NARRATIVES[narrative](low, high, p)
    assert any(word in text for word in CLAIM_WORDS) is claimed, text
    assert ("**no claim** either way" in text) is not claimed, text


def test_the_paired_table_marks_supported_by_the_same_rule() -> None:
    scores = pd.DataFrame(
        {"question_id": ["q1", "q2"] * 2, "method": ["base"] * 2 + ["other"] * 2, "score": [0, 1, 1, 1]}
    )
    table = paired_comparison_table(scores, "base", binary=True, n_resamples=50)
    assert table.loc[0, "supported"] == (table.loc[0, "ci_low"] > 0 and table.loc[0, "p_holm"] <= 0.05)
    assert not table.loc[0, "supported"]  # one question of two: the interval may exclude zero, p = 1


def test_notebook_03_claims_a_generator_difference_only_when_the_test_rejects() -> None:
    def ratings(anchors: int) -> pd.DataFrame:
        # every shared anchor rated one point higher for graph: the interval is [1, 1], off zero
        rows = [(f"a{i}", g, s) for i in range(anchors) for g, s in (("graph", 3.0), ("summary", 2.0))]
        return pd.DataFrame(rows, columns=["anchor_id", "generator", "score"])

    five = compare_generators(ratings(5)).iloc[0]  # Wilcoxon exact p = 0.0625 on 5 positive differences
    assert five["ci_low"] > 0 and not five["supported"]
    assert "adjusted test does not reject" in five["verdict"] and "more relevant" not in five["verdict"]
    six = compare_generators(ratings(6)).iloc[0]  # p = 0.03125
    assert six["supported"] and "graph's questions got more relevant retrievals" in six["verdict"]


def test_notebook_03_adjusts_its_paired_comparisons_together() -> None:
    # three generators, each pair paired on 6 anchors with the same one-point gap: p = 0.03125 each,
    # which Holm over the three pairs lifts above 0.05
    rows = [
        (f"a{i}", g, s) for i in range(6) for g, s in (("graph", 3.0), ("summary", 2.0), ("persona", 1.0))
    ]
    table = compare_generators(pd.DataFrame(rows, columns=["anchor_id", "generator", "score"]))
    assert len(table) == 3 and not table["supported"].any()
    assert table["verdict"].str.contains("Holm over 3 paired comparison").all()
