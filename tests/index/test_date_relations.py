import pandas as pd
import pyarrow.parquet as pq
import pytest

from ragtrial.data.synthetic import generate_corpus, world_tables
from ragtrial.index.build import STAGES
from ragtrial.index.chunk_documents import documents_as_chunks
from ragtrial.index.date_relations import chunks_dates, combined_validity, date_relations, sentence_validity
from ragtrial.index.extract_nlp_graph import extract_nlp_graph
from ragtrial.index.tables import SCHEMAS, GraphIndex, produced_columns
from ragtrial.records import Document, records_frame


@pytest.mark.parametrize(
    ("sentence", "validity"),
    [
        ("Ada Lind worked for Kest Works from 2001 to 2010.", (2001, 2010)),
        ("From 2001 to 2010, Ada Lind was employed by Kest Works.", (2001, 2010)),
        ("Between 1998 and 2004 she ran the lab.", (1998, 2004)),
        ("Ada Lind was CEO of Kest Works (2003–2009).", (2003, 2009)),
        ("Ada Lind has worked for Kest Works since 2005.", (2005, None)),
        ("Since 2005, Kest Works has been led by CEO Ada Lind.", (2005, None)),
        ("Ada Lind chaired the board until 2010.", (None, 2010)),
        ("Kest Works acquired Mora Labs in 2003.", (2003, None)),
        (
            "In 2003, Ada Lind succeeded Bo Rand as chief executive of Kest Works, serving until 2010.",
            (2003, 2010),
        ),
        ("Ada Lind is married to Bo Rand.", None),
        ("Kest Works sold 2500 kettles.", None),
    ],
)
def test_sentence_validity_reads_the_corpus_phrasings(sentence, validity):
    assert sentence_validity(sentence) == validity


def test_several_statements_span_from_the_earliest_start_and_stay_open_if_one_still_holds():
    assert combined_validity([(2001, 2004), (2006, 2010)]) == (2001, 2010)
    assert combined_validity([(2001, 2004), (2006, None)]) == (2001, None)
    assert combined_validity([(None, 2004)]) == (None, 2004)


def _index(*texts: str) -> GraphIndex:
    documents = records_frame(
        [Document(doc_id=f"d{i}", title=f"d{i}", text=t) for i, t in enumerate(texts)], Document
    )
    chunks = documents_as_chunks(documents)
    entities, relations = extract_nlp_graph(chunks, cooccurrence="sentence")
    return GraphIndex(documents=documents, chunks=chunks, entities=entities, relations=relations)


def _validity(index: GraphIndex, a: str, b: str) -> tuple:
    """The validity of the relation between entities named `a` and `b` (or a noun phrase around
    them: the NLP graph finds "CEO Ada Lind").
    """
    names = dict(zip(index.entities["entity_id"], index.entities["name"], strict=True))
    for row in index.relations.itertuples():
        ends = names[row.source_id], names[row.target_id]
        if (a in ends[0] and b in ends[1]) or (b in ends[0] and a in ends[1]):
            return (
                None if pd.isna(row.valid_from) else int(row.valid_from),
                None if pd.isna(row.valid_to) else int(row.valid_to),
            )
    raise AssertionError(f"no relation {a} - {b}")


def test_a_relation_is_dated_by_its_sentence_and_an_undated_one_stays_missing():
    built = _index(
        "Ada Lind worked for Kest Works from 2001 to 2010. Ada Lind is married to Bo Rand. "
        "In 2010, Cal Moor succeeded Ada Lind at Kest Works, serving until 2015."
    )
    dated = date_relations(built)
    assert _validity(dated, "Ada Lind", "Kest Works") == (2001, 2010)  # its own sentence, not the successor's
    assert _validity(dated, "Cal Moor", "Kest Works") == (2010, 2015)
    assert _validity(dated, "Ada Lind", "Bo Rand") == (None, None)  # missing, never 0
    assert dated.relations["valid_from"].dtype == "Int64"
    unchanged = [c for c in SCHEMAS["relations"] if c not in ("valid_from", "valid_to")]
    pd.testing.assert_frame_equal(dated.relations[unchanged], built.relations[unchanged])


def test_the_generated_corpus_states_every_time_bound_fact_with_its_years():
    dataset, world = generate_corpus("tiny")
    entities, gold = world_tables(world, dataset)
    name = dict(zip(entities["entity_id"], entities["name"], strict=True))
    documents = dataset.documents_frame()
    chunks = documents_as_chunks(documents)
    nlp_entities, nlp_relations = extract_nlp_graph(chunks, cooccurrence="sentence")
    dated = date_relations(
        GraphIndex(documents=documents, chunks=chunks, entities=nlp_entities, relations=nlp_relations)
    )
    # An NLP edge is a pair, untyped: a founder's edge to the company carries the founding (still
    # holding) and the first term as one span, so only pairs with one gold relation are compared.
    pair = [frozenset(p) for p in zip(gold["source_id"], gold["target_id"], strict=True)]
    alone = gold.assign(pair=pair).groupby("pair")["relation_id"].transform("size") == 1
    timed = gold[alone & gold["valid_from"].notna() & gold["relation"].isin(["ceo_of", "works_for"])]
    assert len(timed) >= 5
    for row in timed.itertuples():
        expected = (int(row.valid_from), None if pd.isna(row.valid_to) else int(row.valid_to))
        assert _validity(dated, name[row.source_id], name[row.target_id]) == expected, row


def test_dated_sentences_read_beforehand_date_the_relations_as_reading_them_there():
    # the build reads the chunks' dated sentences while the model calls are in flight
    built = _index(
        "Ada Lind worked for Kest Works from 2001 to 2010. Ada Lind is married to Bo Rand.",
        "In 2010, Cal Moor succeeded Ada Lind at Kest Works, serving until 2015.",
    )
    dates = chunks_dates(built.chunks)
    assert sorted(validity for found in dates.values() for _, validity in found) == [
        (2001, 2010),
        (2010, 2015),
    ]
    pd.testing.assert_frame_equal(date_relations(built, dates).relations, date_relations(built).relations)


def test_an_index_saved_before_the_validity_columns_loads_with_them_missing(tmp_path):
    built = date_relations(_index("Ada Lind worked for Kest Works from 2001 to 2010."))
    path = built.save(tmp_path / "index")
    old = pq.read_table(path / "relations.parquet").select(produced_columns("relations"))
    pq.write_table(old, path / "relations.parquet")
    loaded = GraphIndex.load(path)
    assert list(loaded.relations.columns) == list(SCHEMAS["relations"])
    assert loaded.relations["valid_from"].isna().all() and loaded.relations["valid_to"].isna().all()


def test_the_build_dates_relations_once_after_the_graph_is_merged():
    names = [name for name, _, _ in STAGES]
    assert names.count("date_relations") == 1
    assert names.index("communities") < names.index("date_relations") < names.index("embeddings")
