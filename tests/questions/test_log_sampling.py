"""Questions from a production log: the query_log loader and cluster-proportional sampling."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import PROJECT_ROOT

from ragtrial.data import load_dataset
from ragtrial.llm.hashing_embedder import HashingEmbedder
from ragtrial.questions.log_sampling import sample_log
from ragtrial.questions.test_sets import metric_support
from ragtrial.records import DataError

LOG = PROJECT_ROOT / "tests" / "fixtures" / "query_log"


@pytest.fixture(scope="module")
def log():
    return load_dataset("query_log", LOG, count_column="count", corpus="corpus")


def test_repeats_are_one_question_with_their_summed_frequency(log):
    by_text = {q.question: q for q in log.questions}
    assert len(log.questions) == 8  # 9 rows, one a repeat differing in case and spacing only
    assert by_text["How do I reset my password?"].metadata["frequency"] == 50
    assert by_text["How do I reset my password?"].metadata["first_record"] == "line 2"
    assert all(q.metadata["no_gold_answers"] and q.metadata["retrieval_only"] for q in log.questions)
    assert [d.doc_id for d in log.documents] == ["help.txt"]


def test_a_log_without_gold_supports_only_the_metrics_that_need_none(log):
    (row,) = metric_support(log.questions).to_dict("records")[-1:]
    assert row["metrics"] == ["grounding", "citation_coverage"]


def test_json_lines_log_with_its_own_field_names():
    ds = load_dataset("query_log", LOG, file="queries.jsonl", question_column="text", count_column="n")
    assert [(q.question, q.metadata["frequency"]) for q in ds.questions] == [
        ("How do I reset my password?", 5),
        ("Where is the Berlin office located?", 1),
    ]
    assert ds.documents == []


def test_a_bad_count_names_file_record_and_field():
    with pytest.raises(DataError) as caught:
        load_dataset("query_log", LOG, file="bad_count.csv", count_column="count")
    err = caught.value
    assert (Path(err.path).name, err.record, err.field) == ("bad_count.csv", "line 3", "count")
    assert "positive whole count" in err.problem


def test_a_missing_question_column_is_named():
    with pytest.raises(DataError, match="missing CSV column") as caught:
        load_dataset("query_log", LOG, question_column="query")
    assert caught.value.field == "query"


def test_places_follow_cluster_frequency_by_largest_remainder(log):
    sample, clusters = sample_log(log.questions, HashingEmbedder(), 7, seed=0)
    # clusters: password resets (75 asks), refund policies (24), the Berlin office (3), payments (2)
    assert clusters["frequency"].tolist() == [75, 24, 3, 2]
    assert clusters["size"].tolist() == [3, 3, 1, 1]
    # one place each, then the other 3 by share among the clusters with room (75 and 24 of 99):
    # quotas 2.27 and 0.73 -> floors 2 and 0, the remaining place to the larger remainder (#1)
    assert clusters["sampled"].tolist() == [3, 2, 1, 1]
    assert len(sample) == 7 and len({q.question_id for q in sample}) == 7
    assert sorted(q.metadata["cluster"] for q in sample) == [0, 0, 0, 1, 1, 2, 3]
    assert clusters.loc[0, "example"] == "How do I reset my password?"


def test_fewer_places_than_clusters_go_to_the_most_frequent(log):
    _, clusters = sample_log(log.questions, HashingEmbedder(), 2, seed=0)
    assert clusters["sampled"].tolist() == [1, 1, 0, 0]


def test_a_cluster_never_gives_more_than_it_has_and_sampling_is_seeded(log):
    sample, clusters = sample_log(log.questions, HashingEmbedder(), 50, seed=3)
    assert clusters["sampled"].tolist() == clusters["size"].tolist() and len(sample) == 8
    first = [q.question_id for q in sample_log(log.questions, HashingEmbedder(), 5, seed=1)[0]]
    again = [q.question_id for q in sample_log(log.questions, HashingEmbedder(), 5, seed=1)[0]]
    assert first == again
    assert all("cluster" not in q.metadata for q in log.questions)  # the input is left as it was
