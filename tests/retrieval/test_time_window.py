import numpy as np
import pytest

from ragtrial.config.retrieval import RetrievalSettings
from ragtrial.index.chunk_documents import documents_as_chunks
from ragtrial.index.date_relations import date_relations
from ragtrial.index.embed_index import embed_index
from ragtrial.index.extract_nlp_graph import extract_nlp_graph
from ragtrial.index.tables import GraphIndex
from ragtrial.llm.hashing_embedder import HashingEmbedder
from ragtrial.records import Document, records_frame
from ragtrial.retrieval.base import RetrieverParts
from ragtrial.retrieval.registry import make_retriever
from ragtrial.retrieval.time_window import bounds, date_year, overlaps, question_window

EMBEDDER = HashingEmbedder()


@pytest.mark.parametrize(
    ("question", "window"),
    [
        ("Who was the chief executive of Kest Works in 2005?", (2005, 2005)),
        ("Who led Kest Works before 2010?", (None, 2009)),
        ("Which firms did Kest Works acquire after 2001?", (2002, None)),
        ("Who worked for Kest Works between 2001 and 2005?", (2001, 2005)),
        ("Who was on the board of Kest Works as of 2003?", (2003, 2003)),
        ("Who has run Kest Works since 2015?", (2015, None)),
        ("Who founded Kest Works?", None),
        ("In which year did Kest Works acquire Mora Labs?", None),
    ],
)
def test_question_window(question, window):
    assert question_window(question) == window


def test_overlap_treats_a_missing_end_as_unbounded():
    lo, hi = bounds([2001, 2010, None, 2015], [2009, None, None, None])
    assert list(overlaps(lo, hi, (2012, 2012))) == [False, True, True, False]
    assert list(overlaps(lo, hi, (None, 2009))) == [True, False, True, False]
    assert date_year("2003-05-01T00:00:00") == 2003 and date_year("NONE") is None and date_year(None) is None


def _index() -> GraphIndex:
    text = (
        "Ada Lind served as chief executive of Kest Works from 2001 to 2010. "
        "Cal Moor has been the chief executive of Kest Works since 2010. "
        "Kest Works is headquartered in Vorn."
    )
    documents = records_frame([Document(doc_id="d0", title="Kest Works", text=text)], Document)
    chunks = documents_as_chunks(documents)
    entities, relations = extract_nlp_graph(chunks, cooccurrence="sentence")
    built = GraphIndex(documents=documents, chunks=chunks, entities=entities, relations=relations)
    return embed_index(
        date_relations(built), lambda texts, method: EMBEDDER.embed(texts, stage="test", method=method)
    )


def _related(retrieval) -> set[str]:
    return {item.text.split(":")[0] for item in retrieval.items if item.kind == "relation"}


@pytest.mark.parametrize("name", ["fastgraphrag", "lightrag", "local_search"])
def test_a_filtered_retrieval_drops_the_out_of_window_relation_and_counts_it(name):
    index, question = _index(), "Who was the chief executive of Kest Works in 2012?"
    parts = RetrieverParts(embedder=EMBEDDER)
    unfiltered = make_retriever(name, index, parts, RetrievalSettings()).retrieve(question, 5)
    filtered = make_retriever(name, index, parts, RetrievalSettings(time_filter=True)).retrieve(question, 5)
    assert "Ada Lind -> Kest Works" in _related(unfiltered) or "Kest Works -> Ada Lind" in _related(
        unfiltered
    )
    assert "time_filtered" not in unfiltered.notes  # off: the notes are as before
    assert not any("Ada Lind" in r for r in _related(filtered))
    assert any("Cal Moor" in r for r in _related(filtered))  # open-ended since 2010: in the window
    assert filtered.notes["time_filtered"] == 1 and filtered.notes["time_window"] == [2012, 2012]
    chunks = [item.chunk_ids for item in filtered.items if item.kind == "chunk"]
    assert chunks == [item.chunk_ids for item in unfiltered.items if item.kind == "chunk"]  # passages stay


def test_a_question_without_a_window_keeps_everything_and_says_so():
    index = _index()
    retriever = make_retriever(
        "fastgraphrag", index, RetrieverParts(embedder=EMBEDDER), RetrievalSettings(time_filter=True)
    )
    found = retriever.retrieve("Who leads Kest Works?", 5)
    assert found.notes["time_filtered"] == 0 and found.notes["time_window"] is None
    assert np.sum([item.kind == "relation" for item in found.items]) == len(index.relations)
