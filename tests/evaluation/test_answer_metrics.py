"""QA, retrieval and summary metrics (the ROUGE-L matrix has its own file)."""

from __future__ import annotations

import json
import os
import re
import string
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rouge_score import rouge_scorer

from ragtrial.evaluation.answer_metrics import (
    METRICS,
    BertScoreModel,
    all_supporting_retrieved,
    answer_contained,
    bertscore,
    bertscore_label,
    default_bertscore_model,
    exact_match,
    is_declined,
    normalize_answer,
    qa_metrics,
    qa_scores,
    recall_at_k,
    retrieval_scores,
    rouge_scores,
    score_qa,
    standard_bertscore_model,
    surfaces_conflict,
    token_f1,
    token_prf,
)

# --------------------------------------------------------------------------- oracle
# Verbatim from the official SQuAD v1.1 evaluation script (evaluate-v1.1.py), except for the
# `_squad` / `_hotpot` suffixes that keep these names apart from the functions under test.
# fmt: off


def normalize_answer_squad(s):
    """Lower text and remove punctuation, articles and extra whitespace."""
    def remove_articles(text):
        return re.sub(r'\b(a|an|the)\b', ' ', text)

    def white_space_fix(text):
        return ' '.join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return ''.join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def f1_score_squad(prediction, ground_truth):
    prediction_tokens = normalize_answer_squad(prediction).split()
    ground_truth_tokens = normalize_answer_squad(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1


def exact_match_score_squad(prediction, ground_truth):
    return (normalize_answer_squad(prediction) == normalize_answer_squad(ground_truth))


def metric_max_over_ground_truths(metric_fn, prediction, ground_truths):
    scores_for_ground_truths = []
    for ground_truth in ground_truths:
        score = metric_fn(prediction, ground_truth)
        scores_for_ground_truths.append(score)
    return max(scores_for_ground_truths)


# Verbatim from the official HotpotQA script (hotpot_evaluate_v1.py); its normalize_answer is SQuAD's.
normalize_answer_hotpot = normalize_answer_squad


def f1_score_hotpot(prediction, ground_truth):
    normalized_prediction = normalize_answer_hotpot(prediction)
    normalized_ground_truth = normalize_answer_hotpot(ground_truth)

    ZERO_METRIC = (0, 0, 0)

    if normalized_prediction in ['yes', 'no', 'noanswer'] and normalized_prediction != normalized_ground_truth:  # noqa: E501 (verbatim)
        return ZERO_METRIC
    if normalized_ground_truth in ['yes', 'no', 'noanswer'] and normalized_prediction != normalized_ground_truth:  # noqa: E501 (verbatim)
        return ZERO_METRIC

    prediction_tokens = normalized_prediction.split()
    ground_truth_tokens = normalized_ground_truth.split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return ZERO_METRIC
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1, precision, recall
# fmt: on


# --------------------------------------------------------------------------- QA: hand-computed table

# (prediction, golds, normalized prediction, em, f1, accuracy), worked out from the official formulas.
QA_CASES = [
    ("The Eiffel Tower", ["eiffel tower"], "eiffel tower", 1, 1, 1),
    # 2 shared of 4 predicted, 2 gold: P = 1/2, R = 1, F = 2/3
    ("Eiffel Tower in Paris", ["the Eiffel Tower"], "eiffel tower in paris", 0, 2 / 3, 1),
    ("U.S.A.", ["USA"], "usa", 1, 1, 1),
    ("It's the 1st", ["its 1st"], "its 1st", 1, 1, 1),
    ("A-ha!", ["aha"], "aha", 1, 1, 1),  # hyphen removed before articles: "aha" is no article
    ("1990-1995", ["19901995"], "19901995", 1, 1, 1),
    ("THE END", ["the end"], "end", 1, 1, 1),
    ("  multiple   spaces\there ", ["multiple spaces here"], "multiple spaces here", 1, 1, 1),
    ("New\u00a0York", ["new york"], "new york", 1, 1, 1),  # str.split() splits on no-break space
    # both normalize to "": equal strings, but no shared token; an empty gold never counts as contained
    ("a", ["the"], "", 1, 0, 0),
    ("an", ["a"], "", 1, 0, 0),
    ("theater", ["the ater"], "theater", 0, 0, 1),  # containment is plain substring
    ("the the cat", ["cat cat"], "cat", 0, 2 / 3, 0),  # Counter overlap 1: P = 1, R = 1/2
    ("paris paris paris", ["paris"], "paris paris paris", 0, 0.5, 1),  # P = 1/3, R = 1
    # unicode: letters are lowercased but never folded
    ("CAFÉ", ["café"], "café", 1, 1, 1),
    ("Café", ["cafe"], "café", 0, 0, 0),
    ("L'Oréal", ["loreal"], "loréal", 0, 0, 0),
    ("İstanbul", ["istanbul"], "i\u0307stanbul", 0, 0, 0),  # "İ".lower() keeps a combining dot
    # unicode punctuation is not in string.punctuation, so it stays
    ("“Hamlet”", ["Hamlet"], "“hamlet”", 0, 0, 1),
    ("It’s", ["its"], "it’s", 0, 0, 0),
    ("1990—1995", ["1990 1995"], "1990—1995", 0, 0, 0),
    ("a—b", ["b"], "—b", 0, 0, 1),  # "—" is a word boundary, so the article "a" goes
    ("", ["Paris"], "", 0, 0, 0),
    # aliases: the best gold wins each metric
    ("Lisbon", ["Porto", "lisbon, portugal", "Lisboa"], "lisbon", 0, 2 / 3, 0),
    ("Lisboa", ["Lisbon", "Lisboa"], "lisboa", 1, 1, 1),
    ("Paris", ["", "Paris"], "paris", 1, 1, 1),
    # HotpotQA: yes/no/noanswer get no partial credit (SQuAD F1 would give 1/2, 2/3, 0)
    ("yes", ["Yes."], "yes", 1, 1, 1),
    ("yes it is", ["yes"], "yes it is", 0, 0, 1),
    ("no", ["no way"], "no", 0, 0, 0),
    ("noanswer", ["no answer"], "noanswer", 0, 0, 0),
]


@pytest.mark.parametrize(("prediction", "golds", "normalized", "em", "f1", "accuracy"), QA_CASES)
def test_qa_metrics_on_hand_computed_cases(
    prediction: str, golds: list[str], normalized: str, em: float, f1: float, accuracy: float
) -> None:
    assert normalize_answer(prediction) == normalized
    assert exact_match(prediction, golds) == em
    assert token_f1(prediction, golds) == pytest.approx(f1, abs=1e-15)
    assert answer_contained(prediction, golds) == accuracy
    scores = score_qa(prediction, golds)
    assert {m: scores[m] for m in ("em", "f1", "accuracy")} == pytest.approx(
        {"em": em, "f1": f1, "accuracy": accuracy}, abs=1e-15
    )


def assert_agrees_with_official_scripts(prediction: str, golds: list[str]) -> None:
    assert normalize_answer(prediction) == normalize_answer_squad(prediction)
    assert exact_match(prediction, golds) == metric_max_over_ground_truths(
        exact_match_score_squad, prediction, golds
    )
    hotpot_f1 = max(f1_score_hotpot(prediction, gold)[0] for gold in golds)
    assert token_f1(prediction, golds) == hotpot_f1  # exactly: same float operations
    # precision and recall come from the alias with the best F1 (the first of equals), as HotpotQA's
    # script computes them for one gold
    best_gold = max(golds, key=lambda gold: f1_score_hotpot(prediction, gold)[0])
    f1, precision, recall = f1_score_hotpot(prediction, best_gold)
    assert token_prf(prediction, golds) == (precision, recall, f1)
    special = {"yes", "no", "noanswer"}
    if not {normalize_answer_squad(text) for text in [prediction, *golds]} & special:
        assert token_f1(prediction, golds) == metric_max_over_ground_truths(f1_score_squad, prediction, golds)


@pytest.mark.parametrize(("prediction", "golds"), [case[:2] for case in QA_CASES])
def test_table_agrees_with_official_scripts(prediction: str, golds: list[str]) -> None:
    assert_agrees_with_official_scripts(prediction, golds)


answer_piece = st.sampled_from(
    ["a", "an", "the", "The", "A", "yes", "no", "noanswer", "Yes!", "paris", "Paris", "tower", "1990",
     "café", "İ", "ß", "an.", "(the)", "—", "“", "”", "’", "-", ".", ",", "'s", "a-ha", "x"]
)  # fmt: skip
answer_text = st.lists(
    st.tuples(answer_piece, st.sampled_from([" ", "", "  ", "\u00a0", "\n"])), max_size=8
).map(lambda parts: "".join(piece + separator for piece, separator in parts))


@settings(max_examples=400, deadline=None)
@given(
    prediction=answer_text | st.text(max_size=20),
    golds=st.lists(answer_text | st.text(max_size=20), min_size=1, max_size=3),
)
def test_random_answers_agree_with_official_scripts(prediction: str, golds: list[str]) -> None:
    assert_agrees_with_official_scripts(prediction, golds)


def test_empty_gold_list_is_an_error_not_a_zero() -> None:
    for metric in (exact_match, token_f1, answer_contained):
        with pytest.raises(ValueError, match="no gold answers"):
            metric("Paris", [])


def test_a_single_gold_string_is_refused() -> None:
    with pytest.raises(TypeError, match="single string"):
        exact_match("Paris", "Paris")


@pytest.mark.parametrize(
    "answer",
    [
        "Insufficient information.",
        "insufficient  INFORMATION",
        "Based on the context, there is not enough information to answer.",
        "The answer cannot be determined from the articles.",
        "It can't be determined.",
        "I cannot determine that.",
        "I don't know.",
        "I don’t know",
        "I do not know",
        "Unknown",
        "unknown.",
        "The provided articles do not contain information about this.",
        "There is no relevant information.",
    ],
)
def test_refusals_are_recognized(answer: str) -> None:
    assert is_declined(answer)


@pytest.mark.parametrize(
    "answer",
    ["Paris", "The Unknown Soldier", "Yes", "It is known that he won.", "", "The information age"],
)
def test_answers_are_not_refusals(answer: str) -> None:
    assert not is_declined(answer)


def test_null_questions_are_right_only_when_declined() -> None:
    null_gold = ["Insufficient information."]
    right, wrong = dict.fromkeys(qa_metrics(), 1.0), dict.fromkeys(qa_metrics(), 0.0)
    assert score_qa("Insufficient information.", null_gold, is_null=True) == right
    assert score_qa("I don't know", null_gold, is_null=True) == right
    assert score_qa("Paris", null_gold, is_null=True) == wrong
    # a refusal on an answerable question is scored like any other answer
    assert score_qa("Insufficient information.", ["Paris"]) == wrong


def test_token_precision_and_recall_are_reported_beside_f1() -> None:
    # "the eiffel tower paris" against "eiffel tower": 2 shared tokens of 3 (articles dropped) and of 2
    scores = score_qa("The Eiffel Tower, Paris", ["Eiffel Tower"])
    assert (scores["token_precision"], scores["token_recall"]) == (2 / 3, 1.0)
    assert scores["f1"] == pytest.approx(0.8)
    for column in ("token_precision", "token_recall"):
        assert METRICS.entry(column).metadata["paired_test"] == "wilcoxon"


@pytest.mark.parametrize(
    ("answer", "right"),
    [
        ("Tucson", False),  # picks one value silently: the liability FalkorDB's evaluation names
        ("Phoenix.", False),
        ("Insufficient information.", False),
        ("Tucson or Phoenix", True),  # both values
        ("Tucson (Daily Ledger); Phoenix according to the Courier", True),
        ("The sources disagree.", True),  # flags the inconsistency without naming the values
        ("Tucson, though reports conflict", True),
        ("Sources differ: one says Tucson", True),
    ],
)
def test_contradictory_questions_are_right_only_when_the_answer_surfaces_the_conflict(
    answer: str, right: bool
) -> None:
    golds = ["Tucson", "Phoenix"]
    assert surfaces_conflict(answer, golds) is right
    assert score_qa(answer, golds, is_contradictory=True) == dict.fromkeys(qa_metrics(), float(right))
    # the rule is stated where a report reads what a column means
    assert "contradictory" in METRICS.entry("accuracy").metadata["special_questions"]


def test_qa_scores_adds_columns_and_keeps_failures_visible() -> None:
    df = pd.DataFrame(
        {
            "prediction": ["The Eiffel Tower", "Insufficient information.", None, "Lisbon"],
            "answers": [
                ["eiffel tower"],
                ["Insufficient information."],
                ["x"],
                np.array(["Lisboa", "Lisbon"]),
            ],
            "is_null": [False, True, False, False],
        },
        index=["q1", "q2", "q3", "q4"],
    )
    scored = qa_scores(df, "prediction", "answers", null_col="is_null")
    assert list(scored.index) == ["q1", "q2", "q3", "q4"]
    assert scored.loc[["q1", "q2", "q4"], ["em", "f1", "accuracy"]].to_numpy().tolist() == [[1, 1, 1]] * 3
    assert scored.loc["q3", ["em", "f1", "accuracy"]].isna().all()
    assert "em" not in df.columns  # the input is left alone
    without_null = qa_scores(df, "prediction", "answers")
    assert without_null.loc["q2", "em"] == 1.0  # "Insufficient information." equals its gold text
    conflicting = pd.DataFrame(
        {"prediction": ["Lisbon", "Lisbon or Porto"], "answers": [["Lisbon", "Porto"]] * 2, "conflict": True}
    )
    contradictory = qa_scores(conflicting, "prediction", "answers", contradictory_col="conflict")
    assert contradictory["accuracy"].tolist() == [0.0, 1.0]  # one of two conflicting values is wrong


def test_qa_scores_names_the_row_without_gold() -> None:
    df = pd.DataFrame({"prediction": ["Paris"], "answers": [[]]}, index=["q7"])
    with pytest.raises(ValueError, match="row 'q7'.*no gold answers"):
        qa_scores(df, "prediction", "answers")


# --------------------------------------------------------------------------- retrieval


def test_recall_counts_distinct_documents_in_rank_order() -> None:
    retrieved = ["d1", "d1", "d2", "d1", "d3"]  # chunks of the same document repeat its id
    assert recall_at_k(retrieved, ["d2", "d3"], k=1) == 0.0
    assert recall_at_k(retrieved, ["d2", "d3"], k=2) == 0.5
    assert recall_at_k(retrieved, ["d2", "d3"], k=3) == 1.0
    assert recall_at_k(retrieved, ["d2", "d3", "d9"]) == pytest.approx(2 / 3)
    assert recall_at_k(retrieved, ["d2", "d2"], k=2) == 1.0  # a repeated gold id counts once
    assert recall_at_k([], ["d1"], k=5) == 0.0


def test_recall_refuses_undefined_cases() -> None:
    with pytest.raises(ValueError, match="no gold document ids"):
        recall_at_k(["d1"], [], k=1)
    with pytest.raises(ValueError, match="k must be at least 1"):
        recall_at_k(["d1"], ["d1"], k=0)


def test_all_supporting_retrieved() -> None:
    assert all_supporting_retrieved(["d3", "d1", "d2"], ["d1", "d2"])
    assert not all_supporting_retrieved(["d3", "d1", "d2"], ["d1", "d2"], k=2)


def test_retrieval_scores_frame() -> None:
    df = pd.DataFrame({"retrieved": [["d1", "d2"], ["d3", "d3", "d4"]], "gold": [["d2"], ["d4", "d5"]]})
    scored = retrieval_scores(df, "retrieved", "gold", ks=(1, 2))
    assert scored["recall@1"].tolist() == [0.0, 0.0]
    assert scored["recall@2"].tolist() == [1.0, 0.5]
    assert scored["all_supporting@2"].tolist() == [True, False]
    bad = pd.DataFrame({"retrieved": [["d1"]], "gold": [[]]})
    with pytest.raises(ValueError, match="row 0: no gold document ids"):
        retrieval_scores(bad, "retrieved", "gold")


# --------------------------------------------------------------------------- summaries


def test_rouge_scores_use_the_best_reference_per_type() -> None:
    prediction = "the company reported higher revenues in the third quarter"
    references = ["profits fell sharply", "the company reports higher revenue in the third quarter", ""]
    scores = rouge_scores(prediction, references)
    best = rouge_scorer.RougeScorer(["rouge2", "rougeL"], use_stemmer=True).score(references[1], prediction)
    expected = {
        f"{rouge_type}_{part}": getattr(best[rouge_type], field)
        for rouge_type in ("rouge2", "rougeL")
        for part, field in (("p", "precision"), ("r", "recall"), ("f", "fmeasure"))
    }
    assert scores == expected
    assert scores["rougeL_f"] == 1.0  # with the stemmer, reported/reports and revenues/revenue match
    with pytest.raises(ValueError, match="no references"):
        rouge_scores(prediction, [])


CANDIDATE = "The cat sat on the mat."
SHORT_REFERENCE = "The cat."  # every reference token is matched: high recall, lower precision
LONG_REFERENCE = "The cat sat on the mat while the dog barked at the mailman all afternoon."  # the reverse


@pytest.fixture(scope="module")
def bertscore_result() -> tuple[pd.DataFrame, dict]:
    references = [[CANDIDATE], [SHORT_REFERENCE], [LONG_REFERENCE], [SHORT_REFERENCE, LONG_REFERENCE]]
    return bertscore([CANDIDATE] * len(references), references)


def test_bertscore_scores_each_example(bertscore_result: tuple[pd.DataFrame, dict]) -> None:
    scores, _ = bertscore_result
    assert list(scores.columns) == ["precision", "recall", "f1"]
    assert len(scores) == 4
    assert scores.loc[0].tolist() == pytest.approx([1.0, 1.0, 1.0], abs=1e-5)
    short, long = scores.loc[1], scores.loc[2]
    assert short["recall"] > long["recall"] and short["precision"] < long["precision"]


def test_bertscore_takes_p_r_f1_from_the_best_f1_reference(
    bertscore_result: tuple[pd.DataFrame, dict],
) -> None:
    scores = bertscore_result[0]
    best = scores.loc[1] if scores.loc[1, "f1"] > scores.loc[2, "f1"] else scores.loc[2]
    # bert_score's own multi-reference mode would mix the short reference's recall with the long one's
    # precision
    assert scores.loc[3].tolist() == pytest.approx(best.tolist(), abs=1e-5)


def test_bertscore_records_its_settings(bertscore_result: tuple[pd.DataFrame, dict]) -> None:
    _, info = bertscore_result
    assert info["model_name"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert info["num_layers"] == info["model_num_layers"] == 6  # last layer by default
    assert info["idf"] is False
    assert info["bert_score_version"] == "0.3.13"
    assert "_L6_no-idf" in info["bert_score_hash"]
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_bertscore_refuses_mismatched_inputs() -> None:
    with pytest.raises(ValueError, match="one reference list per prediction"):
        bertscore(["a", "b"], [["a"]])
    with pytest.raises(ValueError, match="no references of example 0"):
        bertscore(["a"], [[]])


def test_the_bundled_bertscore_model_is_labelled_not_comparable(bertscore_result) -> None:
    _, info = bertscore_result
    assert info["rescale_with_baseline"] is False and info["comparable_with_published"] is False
    assert info["label"].startswith("BERTScore on sentence-transformers/all-MiniLM-L6-v2, layer 6 of 6")
    assert "not comparable with published BERTScore (roberta-large, layer 17" in info["label"]


def fake_roberta_large(folder: Path, **config) -> Path:
    """A folder shaped like roberta-large (its config and a weights file): enough for the lookup,
    not for scoring.
    """
    folder.mkdir(parents=True)
    values = {"model_type": "roberta", "num_hidden_layers": 24, "hidden_size": 1024} | config
    (folder / "config.json").write_text(json.dumps(values))
    (folder / "model.safetensors").write_bytes(b"")
    return folder


def test_the_standard_bertscore_model_is_roberta_large_layer_17_rescaled(tmp_path) -> None:
    model = standard_bertscore_model(fake_roberta_large(tmp_path / "roberta"))
    assert (model.name, model.path, model.num_layers) == ("roberta-large", str(tmp_path / "roberta"), 17)
    assert model.rescale_with_baseline and model.comparable_with_published
    assert model.baseline_path.endswith("bert_score/rescale_baseline/en/roberta-large.tsv")
    assert Path(model.baseline_path).is_file()
    info = {"model_name": "roberta-large", "num_layers": 17, "model_num_layers": 24}
    assert bertscore_label(info | {"comparable_with_published": True}) == (
        "BERTScore on roberta-large, layer 17 of 24, rescaled with bert-score's baseline: "
        "bert-score's published setting"
    )


def test_the_standard_bertscore_model_refuses_a_folder_holding_another_model(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="does not hold roberta-large: config.json has"):
        standard_bertscore_model(default_bertscore_model().path)  # the bundled MiniLM
    with pytest.raises(FileNotFoundError, match="num_hidden_layers"):
        standard_bertscore_model(fake_roberta_large(tmp_path / "base", num_hidden_layers=12))
    no_weights = fake_roberta_large(tmp_path / "no_weights")
    (no_weights / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="no weights"):
        standard_bertscore_model(no_weights)


def test_the_standard_bertscore_model_is_read_from_the_hugging_face_cache_only(tmp_path, monkeypatch) -> None:
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(
        FileNotFoundError, match="not in the local Hugging Face cache .*roberta-large: not cached"
    ):
        standard_bertscore_model()
    repo = tmp_path / "models--FacebookAI--roberta-large"
    snapshot = fake_roberta_large(repo / "snapshots" / "abc123")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    assert standard_bertscore_model().path == str(snapshot)


def test_bertscore_rescales_with_the_given_baseline() -> None:
    # The bundled model with roberta-large's baseline row 6: proves the rescaling is applied (bert-score
    # only warns and leaves raw scores when a baseline file is missing), not a meaningful number.
    import bert_score

    minilm = default_bertscore_model()
    tsv = Path(bert_score.__file__).parent / "rescale_baseline" / "en" / "roberta-large.tsv"
    rescaled_model = BertScoreModel(
        minilm.name, minilm.path, 6, rescale_with_baseline=True, baseline_path=str(tsv)
    )
    raw, _ = bertscore([CANDIDATE], [[LONG_REFERENCE]], minilm)
    rescaled, info = bertscore([CANDIDATE], [[LONG_REFERENCE]], rescaled_model)
    p, r, f = pd.read_csv(tsv).iloc[6].to_numpy()[1:]
    expected = [(raw.loc[0, "precision"] - p) / (1 - p), (raw.loc[0, "recall"] - r) / (1 - r)]
    assert rescaled.loc[0, ["precision", "recall"]].tolist() == pytest.approx(expected, abs=1e-5)
    assert info["rescale_with_baseline"] is True and info["bert_score_hash"].endswith("-custom-rescaled")


def test_citation_markers_are_not_part_of_a_scored_answer():
    assert score_qa("Alvor [1]", ["Alvor"]) == score_qa("Alvor", ["Alvor"])
    assert score_qa("Alvor [1]", ["Alvor"])["em"] == 1
