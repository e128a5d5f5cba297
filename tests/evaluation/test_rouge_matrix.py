"""`rouge_l_matrix` against rouge-score's own per-pair scorer, which is the specification."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rouge_score import rouge_scorer

from ragtrial.evaluation.answer_metrics import rouge_l_distance_matrix, rouge_l_matrix

WORDS = [
    "the", "cat", "cats", "sat", "sitting", "on", "mat", "mats", "run", "running", "runs", "ran",
    "study", "studies", "studied", "generously", "generous", "company", "companies", "reported",
    "revenue", "1990", "3.5", "42", "q3", "café", "naïve", "don't", "U.S.", "e-mail", "Ünïcödé",
]  # fmt: skip
PUNCTUATION = [",", ".", "—", "'s", "-", "!", "(", ")", "“", "”", "%"]
SEPARATORS = [" ", "  ", "\n", "\t", ""]


def rouge_score_matrix(texts: list[str], use_stemmer: bool) -> np.ndarray:
    """The slow reference: rouge-score on every ordered pair, row = target, column = prediction."""
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=use_stemmer)
    scores = [[scorer.score(a, b)["rougeL"].fmeasure for b in texts] for a in texts]
    return np.array(scores, dtype=float).reshape(len(texts), len(texts))  # keeps (0, 0) for no texts


def assert_matches_rouge_score(texts: list[str], use_stemmer: bool) -> None:
    fast = rouge_l_matrix(texts, use_stemmer=use_stemmer)
    reference = rouge_score_matrix(texts, use_stemmer)
    assert fast.shape == reference.shape
    assert np.max(np.abs(fast - reference), initial=0.0) <= 1e-12
    assert np.array_equal(fast, reference)  # in fact bit-for-bit: same operations in the same order
    assert np.array_equal(fast, fast.T)


claim_like_text = st.lists(
    st.tuples(st.sampled_from(WORDS + PUNCTUATION), st.sampled_from(SEPARATORS)), max_size=30
).map(lambda parts: "".join(token + separator for token, separator in parts))


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(claim_like_text, max_size=9), use_stemmer=st.booleans())
def test_matches_rouge_score_on_random_claim_like_texts(texts: list[str], use_stemmer: bool) -> None:
    assert_matches_rouge_score(texts, use_stemmer)


def test_matches_rouge_score_on_texts_longer_than_one_machine_word() -> None:
    # rapidfuzz switches to its multi-word bit-parallel LCS beyond 64 tokens.
    rng = random.Random(7)
    texts = [" ".join(rng.choices(WORDS, k=rng.randint(60, 200))) for _ in range(7)]
    assert_matches_rouge_score(texts, use_stemmer=False)


def test_hand_computed_values() -> None:
    # LCS "the cat on the mat" = 5 of 6 tokens each way; "a b c d" vs "a c": P = 1, R = 1/2.
    matrix = rouge_l_matrix(["the cat sat on the mat", "the cat on the mat sat", "a b c d", "a c"])
    assert matrix[0, 1] == pytest.approx(5 / 6)
    assert matrix[2, 3] == matrix[3, 2] == pytest.approx(2 / 3)
    assert matrix[0, 2] == 0.0
    assert np.diag(matrix).tolist() == [1.0, 1.0, 1.0, 1.0]


def test_stemmer_is_applied() -> None:
    texts = ["running dogs", "run dog"]  # Porter stems words longer than 3 characters only
    assert rouge_l_matrix(texts)[0, 1] == 0.0
    assert rouge_l_matrix(texts, use_stemmer=True)[0, 1] == 1.0


def test_empty_texts_score_zero_even_against_themselves() -> None:
    texts = ["", "!!! —", "word"]  # the second has no [a-z0-9] token
    matrix = rouge_l_matrix(texts)
    assert matrix.tolist() == [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    distance = rouge_l_distance_matrix(texts)
    assert distance.tolist() == [[0.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0]]


def test_distance_is_one_minus_f1_off_the_diagonal() -> None:
    texts = ["the cat sat on the mat", "the cat on the mat sat", "a b c d", "a c"]
    distance = rouge_l_distance_matrix(texts)
    off_diagonal = ~np.eye(len(texts), dtype=bool)
    assert np.array_equal(distance[off_diagonal], 1.0 - rouge_l_matrix(texts)[off_diagonal])
    assert np.all(np.diag(distance) == 0.0)


def test_parallel_result_equals_serial_result() -> None:
    rng = random.Random(3)
    texts = [" ".join(rng.choices(WORDS, k=rng.randint(0, 25))) for _ in range(200)]
    assert np.array_equal(rouge_l_matrix(texts, n_jobs=2), rouge_l_matrix(texts, n_jobs=1))


def test_no_texts_give_an_empty_matrix() -> None:
    assert rouge_l_matrix([]).shape == (0, 0)


def test_a_single_string_is_refused() -> None:
    with pytest.raises(TypeError, match="single string"):
        rouge_l_matrix("the cat sat")
