import numpy as np
import pytest

from ragtrial.config.retrieval import RetrievalSettings
from ragtrial.config.store import StoreSettings
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


# A walk needs a hop to show the filter: Ada Lind's Tarn passage is reached only through her
# 2001-2010 relation to Kest Works; Cal Moor's Brill passage through his relation since 2010.
WALK_TEXTS = [
    "Ada Lind served as chief executive of Kest Works from 2001 to 2010.",
    "Cal Moor has been the chief executive of Kest Works since 2010.",
    "Kest Works is headquartered in Vorn.",
    "Ada Lind lives in Tarn.",
    "Cal Moor lives in Brill.",
]
WINDOWED = "Who was the chief executive of Kest Works in 2012?"


def walk_index() -> tuple[GraphIndex, dict[str, str]]:
    """The index of WALK_TEXTS (one document each) and each passage's chunk id by its place name."""
    documents = records_frame(
        [Document(doc_id=f"d{i}", title="", text=t) for i, t in enumerate(WALK_TEXTS)], Document
    )
    chunks = documents_as_chunks(documents)
    entities, relations = extract_nlp_graph(chunks, cooccurrence="sentence")
    built = GraphIndex(documents=documents, chunks=chunks, entities=entities, relations=relations)
    index = embed_index(
        date_relations(built), lambda texts, method: EMBEDDER.embed(texts, stage="test", method=method)
    )
    chunk_of = dict(zip(index.chunks["doc_id"], index.chunks["chunk_id"], strict=True))
    return index, {"Tarn": chunk_of["d3"], "Brill": chunk_of["d4"]}


@pytest.mark.parametrize("name", ["graph_walk", "hipporag"])
def test_a_filtered_walk_takes_no_out_of_window_relation_and_counts_it(name):
    """Seed 004 step 3: "filter during retrieval". The walk (breadth-first, or HippoRAG's PageRank) does
    not cross Ada Lind's 2001-2010 relation in 2012, so her Tarn passage is never reached.
    """
    index, chunk = walk_index()
    parts = RetrieverParts(embedder=EMBEDDER)
    unfiltered = make_retriever(name, index, parts, RetrievalSettings()).retrieve(WINDOWED, 5)
    filtered = make_retriever(name, index, parts, RetrievalSettings(time_filter=True)).retrieve(WINDOWED, 5)
    assert chunk["Tarn"] in unfiltered.chunk_ids and "time_filtered" not in unfiltered.notes
    assert chunk["Tarn"] not in filtered.chunk_ids
    assert chunk["Brill"] in filtered.chunk_ids  # Cal Moor, chief executive since 2010: in the window
    assert filtered.notes["time_filtered"] == 1 and filtered.notes["time_window"] == [2012, 2012]
    no_window = make_retriever(name, index, parts, RetrievalSettings(time_filter=True))
    assert no_window.retrieve("Who leads Kest Works?", 5).notes["time_filtered"] == 0


def test_graph_hybrid_fuses_the_filtered_walk_and_says_what_it_dropped():
    index, chunk = walk_index()
    parts, settings = RetrieverParts(embedder=EMBEDDER), RetrievalSettings(time_filter=True)
    found = make_retriever("graph_hybrid", index, parts, settings).retrieve(WINDOWED, 5)
    assert found.notes["time_filtered"] == 1 and found.notes["time_window"] == [2012, 2012]
    # Tarn's fused score is the hybrid list's alone: the filtered walk never reached it.
    hybrid = make_retriever("hybrid", index, parts, settings).retrieve(WINDOWED, settings.rrf_depth).chunk_ids
    score = {item.chunk_ids[0]: item.score for item in found.items}
    assert score[chunk["Tarn"]] == pytest.approx(1 / (settings.rrf_k + hybrid.index(chunk["Tarn"]) + 1))


def test_kg_triplets_drops_the_out_of_window_triplet_and_counts_it():
    index, _ = walk_index()
    parts = RetrieverParts(embedder=EMBEDDER)
    unfiltered = make_retriever("kg_triplets", index, parts, RetrievalSettings()).retrieve(WINDOWED, 5)
    filtered = make_retriever("kg_triplets", index, parts, RetrievalSettings(time_filter=True)).retrieve(
        WINDOWED, 5
    )

    def ends(found) -> set[frozenset[str]]:
        names = dict(zip(index.entities["entity_id"], index.entities["name"], strict=True))
        return {frozenset(names[e] for e in item.entity_ids) for item in found.items}

    assert frozenset({"Ada Lind", "Kest Works"}) in ends(unfiltered)
    assert frozenset({"Ada Lind", "Kest Works"}) not in ends(filtered)
    assert frozenset({"Cal Moor", "Kest Works"}) in ends(filtered)
    assert filtered.notes["time_filtered"] == 1 and filtered.notes["time_window"] == [2012, 2012]


def test_the_postgres_walk_refuses_a_filter_it_cannot_apply():
    index, _ = walk_index()
    parts = RetrieverParts(
        embedder=EMBEDDER, store=StoreSettings(retrieval="postgresql", url="postgresql://127.0.0.1:1/x")
    )
    with pytest.raises(ValueError, match="cannot apply retrieval.time_filter"):
        make_retriever("graph_walk", index, parts, RetrievalSettings(time_filter=True))
