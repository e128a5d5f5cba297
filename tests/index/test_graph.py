import importlib.metadata
import json
import shutil
from pathlib import Path

import networkx as nx
import pandas as pd
import pytest
from conftest import SHARED_DATASETS

from ragtrial.index.chunk_documents import chunk_documents
from ragtrial.index.create_communities import EdgeRule, create_communities
from ragtrial.index.extract_nlp_graph import extract_nlp_graph
from ragtrial.index.import_graphs import import_graphrag_output, import_openie
from ragtrial.index.merge_extractions import entity_key, merge_extractions, normalize_name
from ragtrial.index.phrases import noun_phrases
from ragtrial.index.tables import GraphIndex
from ragtrial.records import DataError, Dataset, Document
from ragtrial.retrieval.base import ChunkTable
from ragtrial.retrieval.entity_graph import EntityGraph

DATASETS = SHARED_DATASETS
CAROL = DATASETS / "graphrag_examples" / "a_christmas_carol_index" / "output"
MUSIQUE = DATASETS / "musique_sample_hipporag"
OPENIE = MUSIQUE / "openie_graph" / "openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json"


def needs(path: Path):
    return pytest.mark.skipif(not path.exists(), reason=f"shared data set not present: {path}")


# ---------------------------------------------------------------- NLP extraction

CHUNKS = pd.DataFrame(
    {
        "chunk_id": ["c1", "c2"],
        "text": [
            "Ada Lovelace worked with Charles Babbage in London. Babbage designed the Analytical Engine.",
            "The Royal Society invited Ada Lovelace’s friend Mary Somerville. Honestly, Charles Babbage was "
            "honestly late.",
        ],
    }
)


def by_name(entities: pd.DataFrame) -> dict[str, pd.Series]:
    return {row["name"]: row for _, row in entities.iterrows()}


def edge_weights(entities: pd.DataFrame, relations: pd.DataFrame) -> dict[frozenset, float]:
    name = dict(zip(entities["entity_id"], entities["name"], strict=True))
    return {
        frozenset((name[s], name[t])): w
        for s, t, w in zip(relations["source_id"], relations["target_id"], relations["weight"], strict=True)
    }


def test_normalize_name_merges_case_possessives_and_spacing():
    assert normalize_name("Ada  Lovelace’s") == normalize_name("ADA LOVELACE") == "ada lovelace"
    assert normalize_name("the Smiths'") == "the smiths"
    assert normalize_name("O'Brien") == "o'brien"


def test_noun_phrases_by_rule():
    found = noun_phrases(
        "Well, the Bank of the West hired Kevin Scott's team at Microsoft\nKEVIN SCOTT: Thanks",
        lower_vocab={"well", "thanks"},
    )
    assert [name for name, _ in found] == ["Bank of the West", "Kevin Scott", "Microsoft", "KEVIN SCOTT"]
    assert noun_phrases("[MUSIC] IBM is big.", lower_vocab={"music"}) == [("IBM", "proper_noun")]
    common = noun_phrases("The neural network was trained by Ada.", set(), common_nouns=True)
    assert common == [("Ada", "proper_noun"), ("neural network", "noun_phrase")]


def test_nlp_extraction_finds_known_entities_and_chunk_cooccurrence_edges():
    entities, relations = extract_nlp_graph(CHUNKS)
    ents = by_name(entities)
    assert set(ents) == {
        "Ada Lovelace",
        "Charles Babbage",
        "London",
        "Babbage",
        "Analytical Engine",
        "Royal Society",
        "Mary Somerville",
    }
    assert ents["Ada Lovelace"]["chunk_ids"] == ["c1", "c2"] and ents["London"]["chunk_ids"] == ["c1"]
    assert ents["Ada Lovelace"]["description"] == (
        "Ada Lovelace worked with Charles Babbage in London.\n"
        "The Royal Society invited Ada Lovelace’s friend Mary Somerville."
    )
    assert set(entities["origin"]) == {"nlp"} and entities["entity_id"][0] == entity_key("ada lovelace")
    weights = edge_weights(entities, relations)
    assert len(weights) == 10 + 6 - 1  # all pairs per chunk; Ada–Charles is in both chunks
    assert weights[frozenset(("Ada Lovelace", "Charles Babbage"))] == 2.0
    assert weights[frozenset(("London", "Analytical Engine"))] == 1.0
    assert ents["Ada Lovelace"]["degree"] == 6 and ents["Mary Somerville"]["degree"] == 3


def test_nlp_extraction_sentence_cooccurrence_and_min_chunks():
    entities, relations = extract_nlp_graph(CHUNKS, cooccurrence="sentence")
    weights = edge_weights(entities, relations)
    assert weights == {
        frozenset(p): 1.0
        for p in [
            ("Ada Lovelace", "Charles Babbage"),
            ("Ada Lovelace", "London"),
            ("Charles Babbage", "London"),
            ("Babbage", "Analytical Engine"),
            ("Royal Society", "Ada Lovelace"),
            ("Royal Society", "Mary Somerville"),
            ("Ada Lovelace", "Mary Somerville"),
        ]
    }
    pair = relations.loc[relations["weight"].idxmax()]
    assert pair["description"] == "Ada Lovelace worked with Charles Babbage in London."
    frequent, _ = extract_nlp_graph(CHUNKS, min_chunks=2)
    assert set(frequent["name"]) == {"Ada Lovelace", "Charles Babbage"}


def test_nlp_extraction_is_deterministic():
    first, again = extract_nlp_graph(CHUNKS), extract_nlp_graph(CHUNKS)
    for a, b in zip(first, again, strict=True):
        pd.testing.assert_frame_equal(a, b)


# ---------------------------------------------------------------- merging


def frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows)


def test_merge_extractions_folds_duplicates_by_normalized_name():
    llm = (
        frame(
            [
                dict(
                    entity_id="e1",
                    name="Ada Lovelace",
                    type="PERSON",
                    description="mathematician",
                    chunk_ids=["c1"],
                    origin="llm",
                ),
                dict(
                    entity_id="e2",
                    name="Charles Babbage",
                    type="PERSON",
                    description="inventor",
                    chunk_ids=["c1"],
                    origin="llm",
                ),
            ]
        ),
        frame(
            [dict(source_id="e1", target_id="e2", description="worked with", weight=2.0, chunk_ids=["c1"])]
        ),
    )
    nlp = (
        frame(
            [
                dict(
                    entity_id="x",
                    name="ADA LOVELACE'S",
                    type="",
                    description="mathematician",
                    chunk_ids=["c2"],
                    origin="nlp",
                ),
                dict(
                    entity_id="z",
                    name="Ada Lovelace",
                    type="",
                    description="",
                    chunk_ids=["c3"],
                    origin="nlp",
                ),
                dict(
                    entity_id="y",
                    name="charles  babbage",
                    type="",
                    description="engineer",
                    chunk_ids=["c2", "c1"],
                    origin="nlp",
                ),
            ]
        ),
        frame(
            [
                dict(source_id="y", target_id="x", description="met", weight=1.0, chunk_ids=["c2"]),
                dict(source_id="x", target_id="z", description="alias", weight=1.0, chunk_ids=["c3"]),
            ]
        ),
    )
    entities, relations = merge_extractions([llm, nlp])
    assert list(entities["name"]) == ["Ada Lovelace", "Charles Babbage"]
    ada, charles = entities.iloc[0], entities.iloc[1]
    assert ada["entity_id"] == entity_key("ada lovelace") and ada["type"] == "PERSON"
    assert ada["chunk_ids"] == ["c1", "c2", "c3"] and ada["description"] == "mathematician"
    assert ada["origin"] == "nlp" and charles["description"] == "inventor\nengineer"
    assert list(entities["degree"]) == [1, 1]
    assert len(relations) == 1  # reversed duplicate merged, alias self-loop dropped
    rel = relations.iloc[0]
    assert (rel["source_id"], rel["target_id"]) == (ada["entity_id"], charles["entity_id"])
    assert (
        rel["weight"] == 3.0 and rel["description"] == "worked with\nmet" and rel["chunk_ids"] == ["c1", "c2"]
    )
    bounded, _ = merge_extractions([llm, nlp], max_descriptions=1)
    assert bounded.iloc[1]["description"] == "inventor"


def test_merge_rejects_relations_to_unknown_entities():
    entities = frame([dict(entity_id="a", name="A", type="", description="", chunk_ids=[], origin="llm")])
    relations = frame([dict(source_id="a", target_id="b", description="", weight=1.0, chunk_ids=[])])
    with pytest.raises(ValueError, match="unknown entity 'b'"):
        merge_extractions([(entities, relations)])


# ---------------------------------------------------------------- Leiden


def graph_frames(g: nx.Graph, extra_nodes: tuple[str, ...] = ()) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The index's entity and relation tables of a generated graph (node i is entity "n<i>")."""
    nodes = [f"n{i}" for i in g.nodes] + list(extra_nodes)
    entities = pd.DataFrame(
        {
            "entity_id": nodes,
            "name": nodes,
            "type": "",
            "description": "",
            "chunk_ids": [[f"c{i % 5}"] for i in range(len(nodes))],
            "degree": 0,
            "origin": "nlp",
        }
    )
    relations = pd.DataFrame(
        {
            "relation_id": [f"r{i}" for i in range(g.number_of_edges())],
            "source_id": [f"n{a}" for a, _ in g.edges],
            "target_id": [f"n{b}" for _, b in g.edges],
            "description": "",
            "weight": 1.0,
            "chunk_ids": [[] for _ in g.edges],
        }
    )
    return entities, relations


@pytest.fixture(scope="module")
def graph_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    return graph_frames(nx.planted_partition_graph(8, 8, 0.7, 0.03, seed=3), extra_nodes=("lonely",))


def test_leiden_splits_every_leaf_community_down_to_the_max_cluster_size():
    # seed 002's index.max_cluster_size: GraphRAG's 10 caps the leaves; a larger cap leaves larger ones
    entities, relations = graph_frames(nx.planted_partition_graph(3, 20, 0.6, 0.02, seed=3))

    def leaf_sizes(cap: int) -> list[int]:
        communities = create_communities(entities, relations, max_cluster_size=cap)
        return list(communities[communities["level"] == communities["level"].max()]["size"])

    assert max(leaf_sizes(10)) <= 10
    assert max(leaf_sizes(30)) > 10


def test_every_level_partitions_all_entities(graph_tables):
    entities, relations = graph_tables
    communities = create_communities(entities, relations, max_cluster_size=5)
    levels = sorted(communities["level"].unique())
    assert levels == list(range(len(levels))) and len(levels) >= 2
    members = {}
    for level in levels:
        rows = communities[communities["level"] == level]
        flat = [e for ids in rows["entity_ids"] for e in ids]
        assert sorted(flat) == sorted(entities["entity_id"]), f"level {level} is not a partition"
        members.update(dict(zip(rows["community_id"], map(set, rows["entity_ids"]), strict=True)))
    for _, row in communities.iterrows():
        assert row["size"] == len(row["entity_ids"])
        if row["level"] == 0:
            assert pd.isna(row["parent_id"])
        else:
            parent = communities[communities["community_id"] == row["parent_id"]].iloc[0]
            assert parent["level"] == row["level"] - 1 and set(row["entity_ids"]) <= members[row["parent_id"]]
    lonely = communities[communities["entity_ids"].map(lambda ids: "lonely" in ids)]
    assert list(lonely["size"]) == [1] * len(levels)
    ends = dict(
        zip(
            relations["relation_id"],
            zip(relations["source_id"], relations["target_id"], strict=True),
            strict=True,
        )
    )
    leaves = communities[communities["level"] == levels[-1]]
    for ids, rel_ids in zip(leaves["entity_ids"], leaves["relation_ids"], strict=True):
        expected = [r for r, (s, t) in ends.items() if s in ids and t in ids]
        assert rel_ids == expected


def test_leiden_is_deterministic_with_a_seed(graph_tables):
    first = create_communities(*graph_tables, max_cluster_size=5, seed=7)
    pd.testing.assert_frame_equal(first, create_communities(*graph_tables, max_cluster_size=5, seed=7))


def test_largest_component_only_and_dangling_relations(graph_tables):
    entities, relations = graph_tables
    lcc = create_communities(entities, relations, use_lcc=True)
    assert "lonely" not in {e for ids in lcc["entity_ids"] for e in ids}
    dangling = pd.concat([relations, relations.head(1).assign(relation_id="bad", target_id="nowhere")])
    with pytest.raises(ValueError, match="'bad'"):
        create_communities(entities, dangling)


# ---------------------------------------------------------------- importers


@needs(CAROL)
def test_christmas_carol_graphrag_index_imports_with_its_counts(tmp_path):
    index = import_graphrag_output(CAROL.parent)
    counts = {
        t: len(getattr(index, t))
        for t in (
            "documents",
            "chunks",
            "entities",
            "relations",
            "claims",
            "communities",
            "community_reports",
        )
    }
    assert counts == {
        "documents": 1,
        "chunks": 42,
        "entities": 529 + 99,  # GraphRAG's 529 and the 99 titles its relations and claims name without a row
        "relations": 978,
        "claims": 406,
        "communities": 122,
        "community_reports": 122,
    }
    reports = index.community_reports
    assert reports["level"].value_counts().to_dict() == {0: 23, 1: 65, 2: 32, 3: 2}
    first = reports.iloc[0]
    assert first["title"] == "Project Gutenberg Digital Library Community" and first["rating"] == 8.5
    assert first["full_text"].startswith("# Project Gutenberg") and set(first["findings"][0]) == {
        "summary",
        "explanation",
    }
    chunk_ids = set(index.chunks["chunk_id"])
    for table in ("entities", "relations", "communities", "community_reports", "claims"):
        assert {c for ids in getattr(index, table)["chunk_ids"] for c in ids} <= chunk_ids, table
    entity_ids = set(index.entities["entity_id"])
    assert all(e in entity_ids for col in ("source_id", "target_id") for e in index.relations[col])
    added = index.entities[index.entities["type"] == ""]
    assert len(added) == 99 and (added["description"] == "").all() and added["chunk_ids"].map(len).gt(0).all()
    graph = EntityGraph(index, ChunkTable(index))  # the graph retrievers read: every relation in it
    assert len(graph.ids) == len(index.entities)
    failures = index.extraction_failures  # each relation end that named no entity row is still counted
    assert set(failures["kind"]) == {"unknown_entity"}
    assert failures["detail"].str.startswith("relationships.parquet").sum() == 84
    # GraphRAG 1.x named the same tables create_final_<name>.parquet
    old = tmp_path / "old"
    old.mkdir()
    for file in CAROL.glob("*.parquet"):
        shutil.copy(file, old / f"create_final_{file.name}")
    assert len(import_graphrag_output(old).entities) == 529 + 99


@needs(CAROL)
def test_graphrag_rule_reproduces_graphrags_own_communities_of_the_christmas_carol():
    """GraphRAG 3.3's communities of its published index, from the kit's import of its entities and
    relationships, clustered by the kit under GraphRAG's input rule with GraphRAG's seed, cluster size
    and largest component (GraphRAG's defaults: 0xDEADBEEF, 10, use_lcc). GraphRAG lists in a
    community only titles with an entity row; the kit also clusters the 99 titles the importer adds.
    """
    index = import_graphrag_output(CAROL.parent)
    published = pd.read_parquet(CAROL / "communities.parquet")
    own_entities = set(pd.read_parquet(CAROL / "entities.parquet")["id"])

    def equal_to_published(ours: pd.DataFrame) -> int:
        members = {
            (level, cid): {e for e in ids if e in own_entities}
            for level, cid, ids in zip(ours["level"], ours["community_id"], ours["entity_ids"], strict=True)
        }
        return sum(
            members.get((level, str(community))) == set(ids)
            for level, community, ids in zip(
                published["level"], published["community"], published["entity_ids"], strict=True
            )
        )

    def clustered(rule: EdgeRule) -> pd.DataFrame:
        return create_communities(
            index.entities,
            index.relations,
            max_cluster_size=10,
            seed=0xDEADBEEF,
            use_lcc=True,
            edge_rule=rule,
        )

    graphrag = clustered("graphrag")
    equal = equal_to_published(graphrag)
    version = importlib.metadata.version("graspologic-native")
    assert equal == len(published) == 122, (
        f"{equal} of {len(published)} communities equal GraphRAG's (graspologic-native {version})"
    )
    assert (~graphrag["community_id"].str.contains("@")).sum() == 122  # "<id>@<level>": carried down
    # the kit's own rule (weights summed, edges in id order) clusters the same graph otherwise
    assert equal_to_published(clustered("summed")) < 122


def musique_corpus() -> Dataset:
    """The passages as ragtrial.data.multihop_qa's HippoRAG loader makes them: id "<title>#<k>"."""
    seen: dict[str, int] = {}
    docs = []
    for passage in json.loads((MUSIQUE / "musique_train_corpus.json").read_text()):
        k = seen[passage["title"]] = seen.get(passage["title"], -1) + 1
        docs.append(Document(doc_id=f"{passage['title']}#{k}", title=passage["title"], text=passage["text"]))
    return Dataset(name="musique", documents=docs)


@needs(OPENIE)
def test_openie_triples_import_onto_chunks():
    corpus = musique_corpus()
    chunks = chunk_documents(corpus.documents_frame())
    entities, relations, failures = import_openie(OPENIE, corpus, chunks)
    assert len(failures) == 185 and set(failures["kind"]) == {
        "malformed_triple"
    }  # SOURCE.md: 185 not length 3
    assert len(entities) > 10_000 and set(entities["origin"]) == {"import"}
    assert {c for ids in relations["chunk_ids"] for c in ids} <= set(chunks["chunk_id"])
    ids = {normalize_name(n): e for n, e in zip(entities["name"], entities["entity_id"], strict=True)}
    pair = {ids["journal of mathematical physics"], ids["american institute of physics"]}
    rel = relations[
        [{s, t} == pair for s, t in zip(relations["source_id"], relations["target_id"], strict=True)]
    ]
    assert (
        "Journal of Mathematical Physics published by American Institute of Physics"
        in rel.iloc[0]["description"]
    )
    journal_chunk = chunks.loc[chunks["doc_id"] == "Journal of Mathematical Physics#0", "chunk_id"].tolist()
    assert set(journal_chunk) <= set(rel.iloc[0]["chunk_ids"])
    GraphIndex(
        documents=corpus.documents_frame(),
        chunks=chunks,
        entities=entities,
        relations=relations,
        extraction_failures=failures,
    )  # conforms to the contract


@pytest.mark.parametrize(
    "record, field",
    [
        ({"title": "T", "text": 5, "extracted_triples": []}, "text"),
        ({"title": "T", "text": "unknown passage", "extracted_triples": []}, "text"),
        ({"title": "T", "text": "Body.", "extracted_triples": [["a", 1, "b"]]}, "extracted_triples"),
        ({"title": "T", "text": "Body."}, "extracted_triples"),
    ],
)
def test_malformed_openie_file_names_file_record_and_field(tmp_path, record, field):
    path = tmp_path / "openie.json"
    path.write_text('{"docs": [' + json.dumps(record) + '], "avg_ent_chars": NaN}')
    corpus = Dataset(name="t", documents=[Document(doc_id="T#0", title="T", text="Body.")])
    with pytest.raises(DataError) as err:
        import_openie(path, corpus)
    assert (err.value.path, err.value.record, err.value.field) == (str(path), 0, field)
    assert "openie.json" in str(err.value) and "record 0" in str(err.value)


def test_a_cut_corpus_leaves_the_openie_records_of_other_passages_out_and_says_so(tmp_path):
    path = tmp_path / "openie.json"
    records = [
        {"title": "T", "text": "Body.", "extracted_triples": [["Ann", "met", "Bob"]]},
        {"title": "U", "text": "Not in the sample.", "extracted_triples": [["Cy", "met", "Di"]]},
    ]
    path.write_text(json.dumps({"docs": records}))
    corpus = Dataset(name="t", documents=[Document(doc_id="T#0", title="T", text="Body.")])
    with pytest.raises(DataError):
        import_openie(path, corpus)
    entities, _, failures = import_openie(path, corpus, corpus_is_a_subset=True)
    assert sorted(entities["name"]) == ["Ann", "Bob"]
    assert failures["kind"].tolist() == ["outside_corpus"] and "record 1" in failures["detail"].iloc[0]
