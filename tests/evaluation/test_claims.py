"""Tests for ragtrial.claims. Expected cluster counts, agreement shares and Holm-adjusted p-values are
worked out by hand in the comments (ROUGE-L F1 from longest common subsequences of the tokens).
"""

import json

import numpy as np
import pandas as pd
import pytest
from conftest import make_llm
from scipy import stats as sps

from ragtrial.config.claims import ClaimsSettings
from ragtrial.config.judge import JudgeSettings
from ragtrial.config.llm import LLMSettings
from ragtrial.evaluation.claim_verdicts import (
    VERDICT_COLUMNS,
    collapse_verdicts,
    judge_agreement,
    judge_verdicts,
    read_verdicts,
    verdicts_from_classic,
)
from ragtrial.evaluation.claims import (
    CLAIM_SET_COLUMNS,
    FAILED,
    OK,
    STAGE,
    answer_id,
    claim_clusters,
    claim_metrics,
    claim_set_failures,
    comprehensiveness,
    condition_summary,
    diversity,
    example_answer,
    extract_claims,
    extraction_counts,
    pairwise_tests,
    run_failures,
    with_distinct_claims,
)
from ragtrial.evaluation.claims_findings import claims_findings
from ragtrial.evaluation.findings import findings_table
from ragtrial.llm.cache import ResponseCache
from ragtrial.llm.client import LLM
from ragtrial.llm.ledger import Ledger
from ragtrial.llm.server import EmbeddedServer
from ragtrial.report.narrative.claims import (
    agreement_sentences,
    clusters_html,
    comparison_sentences,
    verdict_source_sentence,
)

# extraction_counts of a run with no answer
NO_COUNTS = pd.DataFrame(
    columns=["method", "answers", "declined", "at_cap", "failed_answer", "failed_extraction"]
)


def _claim_sets(rows):
    """Hand-made claim sets: (question_id, method, claims or None for a failed extraction)."""
    return pd.DataFrame(
        [
            {
                "answer_id": answer_id(q, m),
                "question_id": q,
                "method": m,
                "status": FAILED if c is None else OK,
                "claims": c or [],
                "n_distinct": len({x.casefold() for x in c or []}),
                "n_returned": len(c or []),
                "at_cap": False,
                "declined": False,
                "stage": STAGE if c is None else "",
                "error": "parse: bad" if c is None else "",
            }
            for q, m, c in rows
        ],
        columns=CLAIM_SET_COLUMNS,
    )


# A, B share "alpha beta gamma" (LCS 3 of 4 tokens each): F1 0.75, distance 0.25.
# B, C share "gamma eps" (LCS 2 of 4): F1 0.5, distance 0.5. A, C share "gamma" (LCS 1): distance 0.75.
CHAIN = ["alpha beta gamma delta", "alpha beta gamma eps", "gamma eps zeta eta"]


def _count(claims, threshold):
    return len(set(claim_clusters(claims, threshold)))


def test_identical_claims_form_one_cluster_and_disjoint_claims_one_each():
    same = ["Paris is the capital of France."] * 3
    disjoint = ["alpha beta", "gamma delta", "eps zeta", "eta theta"]
    for t in (0.05, 0.5, 0.8, 1.0):
        assert _count(same, t) == 1  # distance 0 <= t
        assert _count(disjoint, t) == (1 if t == 1.0 else 4)  # distance 1 merges only at a threshold of 1


@pytest.mark.parametrize(
    ("threshold", "expected"),
    [
        (0.2, 3),  # no distance below 0.2
        (0.25, 2),  # A-B at exactly 0.25 merges: "max distance <= the threshold" (sklearn alone: < only)
        (0.3, 2),  # {A, B}, {C}
        (0.7, 2),  # complete linkage: d({A,B}, C) = max(0.75, 0.5) = 0.75 stays apart
        # (single linkage would merge at 0.5, average linkage at 0.625)
        (0.75, 1),  # exactly at the threshold again: merged
        (0.8, 1),
    ],
)
def test_complete_linkage_cluster_counts_on_a_chain(threshold, expected):
    assert _count(CHAIN, threshold) == expected


def test_one_claim_is_one_cluster_no_claims_zero_and_failures_are_excluded_and_counted():
    sets = _claim_sets(
        [
            ("q1", "m", ["only one claim here"]),
            ("q2", "m", []),
            ("q3", "m", None),
            ("q1", "n", CHAIN),
            ("q2", "n", ["x y", "x y z"]),
            ("q3", "n", None),
        ]
    )
    div = diversity(sets, [0.3, 0.8])
    got = {(r.question_id, r.method, r.threshold): r.n_clusters for r in div.itertuples()}
    # "x y" vs "x y z": LCS 2, F1 = 2 * (1 * 2/3) / (5/3) = 0.8, distance 0.2 -> merged at 0.3
    assert got == {
        ("q1", "m", 0.3): 1,
        ("q1", "m", 0.8): 1,
        ("q2", "m", 0.3): 0,
        ("q2", "m", 0.8): 0,
        ("q1", "n", 0.3): 2,
        ("q1", "n", 0.8): 1,
        ("q2", "n", 0.3): 1,
        ("q2", "n", 0.8): 1,
    }
    comp = comprehensiveness(sets)
    assert dict(zip(comp["answer_id"], comp["n_claims"], strict=True)) == {
        "m:q1": 1,
        "m:q2": 0,
        "n:q1": 3,
        "n:q2": 2,
    }
    summary = condition_summary(claim_metrics(sets, [0.3]), n_resamples=200)
    claims_rows = summary[summary["measure"] == "comprehensiveness"].set_index("method")
    assert claims_rows.loc["m", "n"] == 2 and claims_rows.loc["m", "mean"] == pytest.approx(
        0.5
    )  # (1 + 0) / 2
    assert claims_rows.loc["n", "mean"] == pytest.approx(2.5)
    assert set(summary["measure"]) == {"comprehensiveness", "diversity@0.3"}
    failed = claim_set_failures(sets)
    assert list(failed["answer_id"]) == ["m:q3", "n:q3"] and set(failed["stage"]) == {STAGE}


def _reply_for(body):
    asked = next(m["content"] for m in body["messages"] if m["role"] == "user")  # also in a repair round
    text = asked.rsplit("Text: ", 1)[1]
    if text.startswith("California"):
        return json.dumps(
            {
                "claims": [
                    "California implemented incentives.",
                    "New York implemented incentives.",
                    "  new york implemented   incentives. ",
                    " , ",
                ]
            }
        )
    if text.startswith("Garbled"):
        return "I cannot do JSON today"
    return '{"claims": []}'


def test_extract_claims_records_failures_declines_and_repeats(scripted, tmp_path):
    scripted.default_reply = _reply_for
    llm = make_llm(scripted.base_url, tmp_path)
    answers = pd.DataFrame(
        [
            ("q1", "gs", "California and New York implemented incentives for renewable energy adoption.", ""),
            ("q2", "gs", "Garbled answer", ""),
            ("q1", "ss", "Insufficient information.", ""),
            ("q2", "ss", "", "timeout"),
            ("q3", "gs", "Well, who knows.", ""),
        ],
        columns=["question_id", "method", "text", "failure"],
    )
    sets = extract_claims(answers, llm, max_tokens=64, max_claims=4).set_index("answer_id")
    # one call for q1, two for the garbled one (the LLM layer's repair round), one for q3; none for
    # the decline or the failed answer
    assert len(scripted.chat_requests()) == 4
    # every claim counts, as the paper counts them; the repeat is only dropped from n_distinct
    assert sets.loc["gs:q1", "claims"] == [
        "California implemented incentives.",
        "New York implemented incentives.",
        "new york implemented incentives.",
    ]
    assert sets.loc["gs:q1", "n_distinct"] == 2
    assert sets.loc["gs:q1", "n_returned"] == 4 and sets.loc["gs:q1", "at_cap"]
    assert sets.loc["gs:q2", "status"] == FAILED and sets.loc["gs:q2", "stage"] == STAGE
    assert sets.loc["gs:q2", "error"].startswith("parse")
    assert (
        sets.loc["ss:q1", "status"] == OK
        and sets.loc["ss:q1", "declined"]
        and sets.loc["ss:q1", "claims"] == []
    )
    assert sets.loc["ss:q2", "status"] == FAILED and sets.loc["ss:q2", "stage"] == "answer"
    assert sets.loc["gs:q3", "status"] == OK and sets.loc["gs:q3", "claims"] == []
    counts = extraction_counts(sets.reset_index()).set_index("method")
    assert counts.loc["gs"].to_dict() == {
        "answers": 3,
        "extracted": 2,
        "no_claims": 1,
        "declined": 0,
        "at_cap": 1,
        "failed_answer": 0,
        "failed_extraction": 1,
    }
    assert counts.loc["ss"].to_dict() == {
        "answers": 2,
        "extracted": 1,
        "no_claims": 1,
        "declined": 1,
        "at_cap": 0,
        "failed_answer": 1,
        "failed_extraction": 0,
    }
    metrics = claim_metrics(sets.reset_index(), [0.4, 0.5])
    # the two claims: LCS "implemented incentives" = 2 of 3 and 4 tokens: F1 = 2 * (2/3 * 1/2) / (7/6) = 4/7,
    # distance 3/7 = 0.43: apart at 0.4, merged at 0.5
    got = metrics[metrics["answer_id"] == "gs:q1"].set_index("measure")["value"].to_dict()
    # the repeat is at distance 0 from its twin: it never adds a cluster
    assert got == {"comprehensiveness": 3.0, "diversity@0.4": 2.0, "diversity@0.5": 1.0}
    summary = with_distinct_claims(condition_summary(metrics, n_resamples=50), sets.reset_index())
    gs = summary[(summary["method"] == "gs") & (summary["measure"] == "comprehensiveness")].iloc[0]
    assert (gs["mean"], gs["mean_distinct"]) == (1.5, 1.0)  # (3 + 0) / 2 beside (2 + 0) / 2
    assert summary.loc[summary["metric"] == "diversity", "mean_distinct"].isna().all()
    assert set(metrics["answer_id"]) == {"gs:q1", "ss:q1", "gs:q3"}
    ledger = llm.ledger.frame()
    assert set(ledger["stage"]) == {STAGE} and list(ledger["failure"]).count("parse") == 1


def test_pairwise_tests_use_wilcoxon_on_shared_questions_and_holm_across_pairs():
    values = {
        "a": [5, 6, 7, 8, 9, 10, 11, 12],
        "b": [4, 4, 5, 6, 6, 7, 9, 8],
        "c": [5, 5, 7, 7, 9, 9, 12, 11],
    }
    rows = [(f"q{i}", m, v) for m, vs in values.items() for i, v in enumerate(vs)]
    rows += [(f"x{i}", "d", 1.0) for i in range(3)]  # d shares no question with anyone
    metrics = pd.DataFrame(rows, columns=["question_id", "method", "value"]).assign(
        answer_id="", metric="comprehensiveness", threshold=np.nan, measure="comprehensiveness"
    )
    assert pairwise_tests(metrics[metrics["method"] == "a"]).empty  # one condition: nothing to compare
    table = pairwise_tests(metrics, n_resamples=200)
    assert len(table) == 6
    untested = table[table["n_shared"] == 0]
    assert set(untested["method_b"]) == {"d"} and untested["p_value"].isna().all()
    tested = table[table["n_shared"] > 0].set_index(["method_a", "method_b"])
    raw = {
        pair: sps.wilcoxon(values[pair[0]], values[pair[1]]).pvalue
        for pair in [("a", "b"), ("a", "c"), ("b", "c")]
    }
    for pair, p in raw.items():
        assert tested.loc[pair, "p_value"] == pytest.approx(p)
        assert tested.loc[pair, "mean_diff"] == pytest.approx(
            np.mean(values[pair[0]]) - np.mean(values[pair[1]])
        )
    # Holm by hand over the three tested pairs only: sorted p1 <= p2 <= p3 -> 3 p1, max(., 2 p2), max(., p3)
    ordered = sorted(raw, key=raw.get)
    expected, running = {}, 0.0
    for rank, pair in enumerate(ordered):
        running = max(running, min(1.0, (3 - rank) * raw[pair]))
        expected[pair] = running
    for pair, p in expected.items():
        assert tested.loc[pair, "p_holm"] == pytest.approx(p)


def _verdicts():
    rows = []
    for q, orientation, outcomes in [
        ("q1", ("c0", "ss"), ["win", "win", "loss"]),  # majority: c0 wins
        ("q2", ("ss", "c0"), ["win", "win"]),  # ss wins, judged with ss first ...
        ("q2", ("c0", "ss"), ["loss"]),  # ... and once the other way: three votes for ss
        ("q3", ("c0", "ss"), ["win", "tie", "loss"]),  # no majority: tie
        ("q4", ("c0", "ss"), ["win", "win", "tie"]),  # c0 wins
        ("q5", ("c0", "ss"), ["loss", "loss", "win"]),  # ss wins, but c0's claims failed
    ]:
        rows += [
            {
                "trial": t,
                "question_id": q,
                "method_a": orientation[0],
                "method_b": orientation[1],
                "aspect": "Comprehensiveness",
                "outcome": o,
            }
            for t, o in enumerate(outcomes)
        ]
    rows.append(
        {
            "trial": 0,
            "question_id": "q1",
            "method_a": "c0",
            "method_b": "ss",
            "aspect": "diversity",
            "outcome": "win",
        }
    )
    return pd.DataFrame(rows)


def test_majority_collapse_and_agreement_share():
    collapsed = collapse_verdicts(_verdicts()).set_index(["question_id", "aspect"])
    assert collapsed.loc[
        ("q2", "comprehensiveness"), ["method_a", "method_b", "n_trials", "verdict"]
    ].tolist() == ["c0", "ss", 3, "loss"]
    assert collapsed.loc[("q3", "comprehensiveness"), "verdict"] == "tie"
    comp = {
        ("q1", "c0"): 5,
        ("q1", "ss"): 3,
        ("q2", "c0"): 4,
        ("q2", "ss"): 2,
        ("q3", "c0"): 1,
        ("q3", "ss"): 1,
        ("q4", "c0"): 3,
        ("q4", "ss"): 3,
        ("q5", "ss"): 2,
    }
    div = {("q1", "c0", 0.5): 2, ("q1", "ss", 0.5): 1, ("q1", "c0", 0.8): 1, ("q1", "ss", 0.8): 1}
    metrics = pd.DataFrame(
        [
            {
                "question_id": q,
                "method": m,
                "metric": "comprehensiveness",
                "threshold": np.nan,
                "measure": "comprehensiveness",
                "value": v,
            }
            for (q, m), v in comp.items()
        ]
        + [
            {
                "question_id": q,
                "method": m,
                "metric": "diversity",
                "threshold": t,
                "measure": f"diversity@{t:g}",
                "value": v,
            }
            for (q, m, t), v in div.items()
        ]
    ).assign(answer_id="")
    table = judge_agreement(metrics, _verdicts(), n_resamples=200).set_index("measure")
    # comprehensiveness: 5 judged, q3 tie -> 4 non-tie; q5 lacks c0's claims -> 3 compared:
    # q1 claims 5 > 3 agrees with "win"; q2 4 > 2 contradicts "loss"; q4 3 = 3 is a claim tie
    row = table.loc["comprehensiveness"]
    assert row[["judged", "non_tie", "missing_claims", "compared", "claim_ties", "agree"]].tolist() == [
        5,
        4,
        1,
        3,
        1,
        1,
    ]
    assert row["non_tie_share"] == pytest.approx(0.8) and row["agreement"] == pytest.approx(1 / 3)
    # diversity: one judged pair (q1, c0 wins): 2 > 1 clusters agrees at 0.5; 1 = 1 is a tie at 0.8
    assert table.loc["diversity@0.5", "agreement"] == 1.0
    assert table.loc["diversity@0.8", "agreement"] == 0.0 and table.loc["diversity@0.8", "claim_ties"] == 1


def test_clusters_html_groups_by_cluster_and_escapes():
    page = clusters_html(["b <claim>", "a claim", "c claim"], [1, 0, 1])
    assert "&lt;claim&gt;" in page and "<claim>" not in page
    assert page.index("a claim") < page.index("b &lt;claim&gt;") < page.index("c claim")
    assert page.count("cluster 2") == 2


@pytest.mark.usefixtures("embedded_model")
def test_embedded_model_extracts_claims_or_records_the_failure(tmp_path):
    settings = LLMSettings()
    server = EmbeddedServer(settings, tmp_path / "server.log")
    base_url = server.start()
    try:
        llm = LLM(settings, ResponseCache(tmp_path / "c.sqlite"), Ledger("t"), lambda: base_url)
        answers = pd.DataFrame(
            [("q1", "m", "Ada Lovelace wrote the first program. She worked with Babbage.")],
            columns=["question_id", "method", "text"],
        )
        sets = extract_claims(answers, llm, max_tokens=ClaimsSettings().extraction_max_tokens, max_claims=3)
    finally:
        server.stop()
    row = sets.iloc[0]
    if row["status"] == OK:
        assert all(isinstance(c, str) and c for c in row["claims"]) and len(row["claims"]) <= 3
    else:
        assert row["stage"] == STAGE and row["error"].startswith("parse")


def test_classic_judgments_become_one_vote_per_shown_order(tmp_path):
    judgments = pd.DataFrame(
        {
            "trial": 0,
            "repeat": 0,
            "position": ["AB", "BA", "AB", "BA"],
            "question_id": "q1",
            "method_a": "c0",
            "method_b": "ss",
            "aspect": ["diversity", "diversity", "directness", "directness"],
            "winner": ["a", "a", "a", "b"],
        }
    )
    verdicts = verdicts_from_classic(judgments)
    assert list(verdicts["outcome"]) == ["win", "win", "win", "loss"]
    collapsed = collapse_verdicts(verdicts).set_index("aspect")["verdict"]
    assert collapsed.to_dict() == {"diversity": "win", "directness": "tie"}  # 1 of 2 votes is no majority
    verdicts.to_csv(tmp_path / "v.csv", index=False)
    assert read_verdicts(tmp_path / "v.csv").equals(verdicts)
    verdicts.drop(columns="aspect").to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ValueError, match="aspect"):
        read_verdicts(tmp_path / "bad.csv")


def test_sentences_claim_only_what_the_intervals_and_tests_support():
    tests = pd.DataFrame(
        [
            {
                "measure": "comprehensiveness",
                "method_a": "c0",
                "method_b": "ss",
                "n_shared": 9,
                "mean_diff": 2.0,
                "ci_low": 1.0,
                "ci_high": 3.0,
                "p_value": 0.004,
                "p_holm": 0.012,
                "reject": True,
            },
            {
                "measure": "diversity@0.5",
                "method_a": "c0",
                "method_b": "ss",
                "n_shared": 9,
                "mean_diff": 0.5,
                "ci_low": -0.2,
                "ci_high": 1.1,
                "p_value": 0.2,
                "p_holm": 0.4,
                "reject": False,
            },
            {
                "measure": "diversity@0.8",
                "method_a": "c0",
                "method_b": "ss",
                "n_shared": 9,
                "mean_diff": 0.4,
                "ci_low": 0.1,
                "ci_high": 0.7,
                "p_value": 0.04,
                "p_holm": 0.08,
                "reject": False,
            },
        ]
    )
    first, second, third = comparison_sentences(tests)
    assert "c0 gave more than ss" in first
    assert "includes zero" in second and "no claim" in second
    assert "does not reject" in third and "no claim" in third
    agreement = pd.DataFrame(
        [
            {
                "measure": "comprehensiveness",
                "metric": "comprehensiveness",
                "judged": 4,
                "non_tie": 0,
                "non_tie_share": 0.0,
                "compared": 0,
                "agree": 0,
                "claim_ties": 0,
                "agreement": None,
                "ci_low": None,
                "ci_high": None,
            },
            {
                "measure": "diversity@0.5",
                "metric": "diversity",
                "judged": 4,
                "non_tie": 2,
                "non_tie_share": 0.5,
                "compared": 2,
                "agree": 1,
                "claim_ties": 1,
                "agreement": 0.5,
                "ci_low": 0.0,
                "ci_high": 1.0,
            },
        ]
    )
    findings = findings_table(claims_findings(NO_COUNTS, ClaimsSettings(), judge_ties=True, embedded=False))
    tie, half = agreement_sentences(agreement, findings)
    assert "no verdict to check" in tie
    assert "agreed 1 times (50%" in half and "69-70%" in half


def test_the_example_answer_is_the_one_with_most_claims_clustered_at_the_middle_threshold():
    sets = _claim_sets([("q1", "m", ["one claim"]), ("q1", "n", CHAIN), ("q2", "n", None)])
    answer, labels, threshold = example_answer(sets, [0.3, 0.6, 0.8])
    assert (answer["answer_id"], threshold, len(set(labels))) == ("n:q1", 0.6, 2)
    assert example_answer(_claim_sets([("q1", "m", []), ("q2", "m", None)]), [0.5]) is None


def test_run_failures_list_every_stage_once():
    sets = _claim_sets([("q1", "m", None), ("q2", "m", ["c"])])
    answers = pd.DataFrame(
        [{"question_id": "q3", "method": "m", "failure": "timeout",
          "failures": [{"stage": "answer", "kind": "timeout", "detail": "slow"}]}]
    )  # fmt: skip
    questions = pd.DataFrame([{"item_id": "p1", "generator": "persona", "stage": "personas", "kind": "parse",
                               "detail": "bad"}])  # fmt: skip
    judge = pd.DataFrame(
        [{"question_id": "q2", "method_a": "m", "method_b": "n", "stage": "judge_classic", "kind": "parse",
          "error": "bad"}]
    )  # fmt: skip
    rows = run_failures(sets, answers, questions, judge)
    assert list(rows["item_id"]) == ["m:q1", "q3", "p1", "q2"]
    assert list(rows["who"]) == ["m", "m", "persona questions", "m vs n"]
    assert list(rows["detail"]) == ["parse: bad", "timeout: slow", "parse: bad", "parse: bad"]


def test_verdicts_come_from_a_file_or_are_absent_without_a_judge_call(tmp_path):
    saved = _verdicts()
    saved.to_csv(tmp_path / "verdicts.csv", index=False)
    no_model = None  # neither branch may call a model
    file_cfg = ClaimsSettings(judge="file", verdicts_path=str(tmp_path / "verdicts.csv"))
    verdicts, judged, source = judge_verdicts(
        no_model, file_cfg, JudgeSettings(), pd.DataFrame(), pd.DataFrame(), []
    )
    assert (
        len(verdicts) == len(saved)
        and judged.failures.empty
        and "verdicts.csv" in verdict_source_sentence(source)
    )
    assert judged.costs.empty  # no judge call made here
    verdicts, judged, source = judge_verdicts(
        no_model, ClaimsSettings(judge="none"), JudgeSettings(), pd.DataFrame(), pd.DataFrame(), []
    )
    assert verdicts.empty and list(verdicts.columns) == VERDICT_COLUMNS and source.loc[0, "judge"] == "none"
    assert verdict_source_sentence(source).startswith("Judge verdicts: none")
    assert judge_agreement(claim_metrics(_claim_sets([("q1", "m", ["c"])]), [0.5]), verdicts).empty


def test_two_claims_at_exactly_the_threshold_are_one_cluster():
    # "alpha beta gamma delta" / "alpha beta eps zeta": LCS 2 of 4 tokens each, F1 0.5, distance 0.5
    pair = ["alpha beta gamma delta", "alpha beta eps zeta"]
    sets = _claim_sets([("q1", "m", pair)])
    div = diversity(sets, [0.49, 0.5])
    assert dict(zip(div["threshold"], div["n_clusters"], strict=True)) == {0.49: 2, 0.5: 1}
