"""Gold entities (supporting titles) and 2Wiki evidence edges on the multi-hop QA sets."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import PROJECT_ROOT, SHARED_DATASETS

from ragtrial.data import load_dataset
from ragtrial.records import DataError, GoldEdge

FIXTURES = PROJECT_ROOT / "tests" / "fixtures" / "data"


def _shared(name: str, folder: str):
    path = SHARED_DATASETS / folder
    if not path.is_dir():
        pytest.skip(f"shared data set folder {path} is absent")
    return load_dataset(name, path)


@pytest.mark.parametrize(
    ("name", "folder"),
    [
        ("musique", "musique_sample_hipporag"),
        ("hotpotqa", "hotpotqa_sample_hipporag"),
        ("2wikimultihopqa", "2wikimultihopqa_hipporag"),
    ],
)
def test_gold_entities_are_the_titles_of_the_supporting_passages(name, folder):
    dataset = _shared(name, folder)
    titles = {d.doc_id: d.title for d in dataset.documents}
    for q in dataset.questions:
        assert q.gold_entities, q.question_id
        assert q.gold_entities == list(dict.fromkeys(titles[d] for d in q.gold_doc_ids)), q.question_id


def test_2wiki_evidence_triples_are_gold_edges():
    dataset = load_dataset("2wikimultihopqa", FIXTURES / "2wiki_evidences_ok")
    (q,) = dataset.questions
    assert q.gold_entities == ["Lothair II", "Ermengarde of Tours"]
    assert q.gold_edges == [
        GoldEdge(source="Lothair II", relation="mother", target="Ermengarde of Tours"),
        GoldEdge(source="Ermengarde of Tours", relation="date of death", target="20 March 851"),
    ]
    assert q.answers == ["20 March 851"]


def test_a_malformed_evidence_triple_names_file_record_and_field():
    with pytest.raises(DataError) as caught:
        load_dataset("2wikimultihopqa", FIXTURES / "2wiki_bad_evidence")
    err = caught.value
    assert Path(err.path).name == "fastgraphrag_vdb_results_101_with_gold_titles.json"
    assert (err.record, err.field) == (0, "evidences[1]")
    assert "evidence triple" in err.problem
