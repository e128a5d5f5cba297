"""The entity graph without an LLM: NLP extraction, merging, hierarchical Leiden, importers.

Every extraction source (this module's NLP path, OpenIE triples, the LLM extractor) produces
*instance* rows — one per mention — in the entities/relations columns of the index contract;
`merge_extractions` folds them into one graph keyed by normalized name, exactly as GraphRAG folds
repeated element instances into nodes and edges (edge weight = number of instances).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import combinations
from pathlib import Path

import graspologic_native as gn
import networkx as nx
import pandas as pd

from ragtrial.index import SCHEMAS, GraphIndex, chunk_documents, conform_table, make_chunk_id, short_hash
from ragtrial.phrases import lower_case_vocabulary, noun_phrases, sentences
from ragtrial.records import DataError, Dataset

Frames = tuple[pd.DataFrame, pd.DataFrame]
# The columns an extraction's instance frames need (relation/entity ids and degree are derived).
ENTITY_INSTANCE = ["entity_id", "name", "type", "description", "chunk_ids", "origin"]
RELATION_INSTANCE = ["source_id", "target_id", "description", "weight", "chunk_ids"]

# ---------------------------------------------------------------- names and ids


@lru_cache(maxsize=1 << 17)  # names repeat across mentions; bounded for long sessions
def normalize_name(name: str) -> str:
    """Merge key: NFKC, case-folded, possessive 's / s' stripped, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", name).replace("’", "'").casefold()
    text = re.sub(r"(?<=\w)'s\b|(?<=s)'(?!\w)", "", text)
    return " ".join(text.strip(" \t\n\"'.,;:!?()[]{}").split())


@lru_cache(maxsize=1 << 17)
def entity_key(normalized: str) -> str:
    return "ent-" + short_hash(normalized)


def relation_key(id_a: str, id_b: str) -> str:
    return "rel-" + short_hash(*sorted((id_a, id_b)))


def _ordered_union(lists: Iterable[Iterable[str]]) -> list[str]:
    return list(dict.fromkeys(x for ids in lists for x in ids))


# ---------------------------------------------------------------- merging


@dataclass
class _Fold:
    descriptions: dict[str, None] = field(default_factory=dict)
    chunks: dict[str, None] = field(default_factory=dict)

    def add(self, description: str, chunk_ids: Iterable[str], bound: int | None) -> None:
        if description and (bound is None or len(self.descriptions) < bound):
            self.descriptions[description] = None
        self.chunks.update(dict.fromkeys(chunk_ids))


@dataclass
class _EntityFold(_Fold):
    names: Counter = field(default_factory=Counter)
    types: Counter = field(default_factory=Counter)
    origins: Counter = field(default_factory=Counter)


@dataclass
class _RelationFold(_Fold):
    ends: tuple[str, str] = ("", "")
    weight: float = 0.0


def _top(counter: Counter) -> str:
    # Most common value, ties to the earliest seen (Counter keeps insertion order for equal counts).
    return max(counter, key=counter.__getitem__) if counter else ""


def merge_extractions(extractions: Sequence[Frames], max_descriptions: int | None = None) -> Frames:
    """Fold entity/relation instances from any number of extractions into one graph.

    Entities merge by `normalize_name(name)` (id `entity_key` of it): chunk_ids are unioned in
    order, distinct non-empty descriptions are joined with newlines (at most `max_descriptions`),
    and name/type/origin take the most common value among the instances. Relations merge by the
    unordered pair of merged endpoints (Leiden and degree treat the graph as undirected), keeping
    the first instance's direction and summing weights; self-loops left by merging aliases of one
    entity are dropped. Degree is recomputed.
    """
    ents: dict[str, _EntityFold] = {}
    rels: dict[tuple[str, str], _RelationFold] = {}
    for i, (entities, relations) in enumerate(extractions):
        key_of: dict[str, str] = {}
        for eid, name, typ, desc, chunks, origin in zip(
            *(entities[c].tolist() for c in ENTITY_INSTANCE), strict=True
        ):
            key = normalize_name(name)
            if not key:
                raise ValueError(
                    f"extraction {i}: entity {eid!r} has no name left after normalizing {name!r}"
                )
            if key_of.setdefault(eid, key) != key:
                raise ValueError(f"extraction {i}: entity id {eid!r} is used for {key_of[eid]!r} and {key!r}")
            fold = ents.get(entity_key(key)) or ents.setdefault(entity_key(key), _EntityFold())
            fold.names[name] += 1
            fold.types.update([typ] if typ else [])
            fold.origins[origin] += 1
            fold.add(desc, chunks, max_descriptions)
        for src, tgt, desc, weight, chunks in zip(
            *(relations[c].tolist() for c in RELATION_INSTANCE), strict=True
        ):
            for end in (src, tgt):
                if end not in key_of:
                    raise ValueError(
                        f"extraction {i}: relation {src!r} -> {tgt!r} names unknown entity {end!r}"
                    )
            a, b = entity_key(key_of[src]), entity_key(key_of[tgt])
            if a == b:
                continue
            pair = (a, b) if a < b else (b, a)
            fold = rels.get(pair) or rels.setdefault(pair, _RelationFold(ends=(a, b)))
            fold.weight += float(weight)
            fold.add(desc, chunks, max_descriptions)
    relations_df = pd.DataFrame(
        [
            (relation_key(*pair), *f.ends, "\n".join(f.descriptions), f.weight, list(f.chunks))
            for pair, f in rels.items()
        ],
        columns=list(SCHEMAS["relations"]),
    )
    neighbours = Counter(end for pair in rels for end in pair)
    entities_df = pd.DataFrame(
        [
            (
                eid,
                _top(f.names),
                _top(f.types),
                "\n".join(f.descriptions),
                list(f.chunks),
                neighbours[eid],
                _top(f.origins),
            )
            for eid, f in ents.items()
        ],
        columns=list(SCHEMAS["entities"]),
    )
    return conform_table("entities", entities_df), conform_table("relations", relations_df)


# ---------------------------------------------------------------- NLP extraction

_MAX_SENTENCE_CHARS = 400


def extract_nlp_graph(
    chunks_df: pd.DataFrame,
    *,
    cooccurrence: str = "chunk",
    common_nouns: bool = False,
    min_chunks: int = 1,
    max_descriptions: int = 5,
) -> Frames:
    """GraphRAG's NLP ("fast") graph, without an LLM or a tagger model.

    Entities are the noun phrases of `noun_phrases` found in at least `min_chunks` chunks; two
    entities are linked when they co-occur in a chunk (`cooccurrence="chunk"`) or in one sentence
    of a chunk (`"sentence"`); edge weight = number of such chunks. Descriptions are the first
    `max_descriptions` distinct sentences mentioning the entity (for an edge: both endpoints).
    Deterministic: the output depends only on the chunks and the options.
    """
    if cooccurrence not in ("chunk", "sentence"):
        raise ValueError(f"cooccurrence must be 'chunk' or 'sentence', got {cooccurrence!r}")
    texts = list(chunks_df["text"])
    lower_vocab = lower_case_vocabulary(texts)
    # Pass 1: per chunk, each sentence (whitespace-collapsed, bounded) with the names it mentions.
    per_chunk: list[list[tuple[str, list[tuple[str, str, str]]]]] = []
    for text in texts:
        parsed = []
        for sentence in sentences(text):
            found = [(normalize_name(s), s, t) for s, t in noun_phrases(sentence, lower_vocab, common_nouns)]
            parsed.append((" ".join(sentence.split())[:_MAX_SENTENCE_CHARS], [f for f in found if f[0]]))
        per_chunk.append(parsed)
    chunk_count = Counter(key for parsed in per_chunk for key in {f[0] for _, found in parsed for f in found})
    keep = {key for key, n in chunk_count.items() if n >= min_chunks}
    # Pass 2: one entity instance per mention, one relation instance per linked pair and chunk.
    ent_rows, rel_rows = [], []
    for chunk_id, parsed in zip(chunks_df["chunk_id"], per_chunk, strict=True):
        sentence_of_pair: dict[tuple[str, str], str] = {}
        for sentence, found in parsed:
            ent_rows += [
                (entity_key(k), surface, typ, sentence, [chunk_id], "nlp")
                for k, surface, typ in found
                if k in keep
            ]
            for pair in combinations(sorted({f[0] for f in found} & keep), 2):
                sentence_of_pair.setdefault(pair, sentence)
        if cooccurrence == "chunk":
            pairs = combinations(sorted({f[0] for _, found in parsed for f in found} & keep), 2)
        else:
            pairs = iter(sentence_of_pair)
        rel_rows += [
            (entity_key(a), entity_key(b), sentence_of_pair.get((a, b), ""), 1.0, [chunk_id])
            for a, b in pairs
        ]
    return merge_extractions(
        [
            (
                pd.DataFrame(ent_rows, columns=ENTITY_INSTANCE),
                pd.DataFrame(rel_rows, columns=RELATION_INSTANCE),
            )
        ],
        max_descriptions=max_descriptions,
    )


# ---------------------------------------------------------------- hierarchical Leiden


def build_communities(
    entities_df: pd.DataFrame,
    relations_df: pd.DataFrame,
    max_cluster_size: int = 10,
    seed: int = 0xDEADBEEF,
    use_lcc: bool = False,
    resolution: float = 1.0,
) -> pd.DataFrame:
    """Hierarchical Leiden (graspologic's core, GraphRAG's defaults) as levels C0 (root) … Cn.

    Every level is a partition of all clustered nodes, as the GraphRAG paper describes: a node whose
    cluster was not split further keeps it at deeper levels, as a copy with id "<cluster>@<level>"
    whose parent is the same cluster one level up (so a copy has the same members as its parent).
    Clusters keep graspologic's ids (unique across levels). Entities without edges get singleton
    communities numbered after the clusters; `use_lcc=True` clusters the largest connected
    component only (GraphRAG's default) and leaves every other entity out. Parallel and reversed
    relations add their weights; self-loops are ignored for clustering.
    """
    entity_ids = list(entities_df["entity_id"])
    known = set(entity_ids)
    weights: dict[tuple[str, str], float] = {}
    for rid, src, tgt, weight in zip(
        relations_df["relation_id"],
        relations_df["source_id"],
        relations_df["target_id"],
        relations_df["weight"],
        strict=True,
    ):
        if src not in known or tgt not in known:
            raise ValueError(
                f"relation {rid!r} has an endpoint that is not in the entities table; "
                "drop dangling relations before clustering"
            )
        if src != tgt:
            pair = (src, tgt) if src < tgt else (tgt, src)
            weights[pair] = weights.get(pair, 0.0) + float(weight)
    nodes = known
    if use_lcc and weights:
        nodes = set(max(nx.connected_components(nx.Graph(list(weights))), key=len))
    edges = sorted((a, b, w) for (a, b), w in weights.items() if a in nodes)
    clusters = (
        gn.hierarchical_leiden(edges, max_cluster_size=max_cluster_size, seed=seed, resolution=resolution)
        if edges
        else []
    )
    # Each node's clusters from level 0 down to its final one; isolated nodes become singletons.
    path: dict[str, list[int]] = {}
    for c in sorted(clusters, key=lambda c: c.level):
        path.setdefault(c.node, []).append(c.cluster)
    next_id = max((c.cluster for c in clusters), default=-1) + 1
    for eid in entity_ids:
        if eid in nodes and eid not in path:
            path[eid] = [next_id]
            next_id += 1
    depth = max((len(p) for p in path.values()), default=0)

    def community(node: str, level: int) -> tuple[str, int]:
        """(community id, cluster it stems from) of `node` at `level`."""
        own = path[node]
        base = own[min(level, len(own) - 1)]
        return (str(base) if level < len(own) else f"{base}@{level}"), base

    chunks_of = dict(zip(entities_df["entity_id"], entities_df["chunk_ids"], strict=True))
    rows = []
    for level in range(depth):
        members: dict[tuple[str, int], list[str]] = {}
        for eid in entity_ids:
            if eid in path:
                members.setdefault(community(eid, level), []).append(eid)
        inside: dict[str, list[str]] = {}
        for rid, src, tgt in zip(
            relations_df["relation_id"], relations_df["source_id"], relations_df["target_id"], strict=True
        ):
            if src in path and tgt in path and community(src, level) == community(tgt, level):
                inside.setdefault(community(src, level)[0], []).append(rid)
        for (cid, _), ids in sorted(members.items(), key=lambda item: item[0][1]):
            parent_id = community(ids[0], level - 1)[0] if level else None
            rows.append(
                (
                    cid,
                    level,
                    parent_id,
                    ids,
                    inside.get(cid, []),
                    _ordered_union(chunks_of[e] for e in ids),
                    len(ids),
                )
            )
    return conform_table("communities", pd.DataFrame(rows, columns=list(SCHEMAS["communities"])))


# ---------------------------------------------------------------- importers


_GRAPHRAG = ("documents", "text_units", "entities", "relationships", "communities", "community_reports")


@dataclass
class _Parquet:
    path: Path
    df: pd.DataFrame

    def col(self, *names: str) -> pd.Series:
        """The first column present among `names` (GraphRAG renamed a few across versions)."""
        for name in names:
            if name in self.df.columns:
                return self.df[name]
        raise DataError(str(self.path), None, names[0], "missing column")


def _graphrag_table(folder: Path, name: str) -> _Parquet | None:
    # GraphRAG >= 2 writes <name>.parquet; 1.x wrote create_final_<name>.parquet.
    for path in (folder / f"{name}.parquet", folder / f"create_final_{name}.parquet"):
        if path.is_file():
            return _Parquet(path, pd.read_parquet(path))
    return None


def _failure(chunk_ids: Sequence[str], kind: str, detail: str) -> tuple[str, str, str, str]:
    return (chunk_ids[0] if len(chunk_ids) else "", "import", kind, detail)


def _nulls(values: Iterable[str]) -> list[str | None]:
    return [None if pd.isna(v) or v in ("", "NONE") else v for v in values]  # GraphRAG writes "NONE"


@dataclass
class _GraphRAGIds:
    """GraphRAG text unit ids -> chunk ids and entity titles -> entity ids, collecting failures."""

    chunk_of: dict[str, str]
    entity_of: dict[str, str]
    failures: list[tuple[str, str, str, str]] = field(default_factory=list)

    def chunks(self, table: _Parquet, column: str) -> list[list[str]]:
        rows = []
        for record, units in zip(table.col("id"), table.col(column), strict=True):
            units = [units] if isinstance(units, str) else list(units)
            missing = [u for u in units if u not in self.chunk_of]
            if missing:
                raise DataError(str(table.path), record, column, f"unknown text unit {missing[0]!r}")
            rows.append([self.chunk_of[u] for u in units])
        return rows

    def entities(self, table: _Parquet, column: str, chunks: list[list[str]]) -> list[str | None]:
        ids = []
        for record, name, chunk_ids in zip(table.col("id"), _nulls(table.col(column)), chunks, strict=True):
            if name is not None and name not in self.entity_of:
                detail = f"{table.path.name} record {record} {column}: {name!r} is not in the entities table"
                self.failures.append(_failure(chunk_ids, "unknown_entity", detail))
            ids.append(None if name is None else self.entity_of.get(name) or entity_key(normalize_name(name)))
        return ids


def import_graphrag_output(folder: str | Path) -> GraphIndex:
    """A Microsoft GraphRAG output folder (or its project root with `output/`) as a GraphIndex.

    GraphRAG's own ids, communities (levels as GraphRAG made them) and reports are kept; text
    units become chunks with ids `make_chunk_id(document id, position, "graphrag")`. Relationship
    endpoints and claim subjects/objects are entity titles in GraphRAG; a title missing from the
    entities table gets the name-derived id `entity_key(normalize_name(title))` (what an extraction
    of that name would produce) and an `extraction_failures` row of kind "unknown_entity".
    GraphRAG's "NONE" placeholders in claims become nulls; covariates (claims) are optional.
    """
    folder = Path(folder)
    if not list(folder.glob("*.parquet")) and (folder / "output").is_dir():
        folder = folder / "output"
    tables = {name: _graphrag_table(folder, name) for name in (*_GRAPHRAG, "covariates")}
    for name in _GRAPHRAG:
        if tables[name] is None:
            raise DataError(
                str(folder / f"{name}.parquet"),
                None,
                None,
                f"missing (also looked for create_final_{name}.parquet)",
            )
    docs, units, ents, rels, comms, reports = (tables[name] for name in _GRAPHRAG)

    # A text unit's position is its rank among its document's units, in table order.
    doc_ids = [d if isinstance(d, str) else d[0] for d in units.col("document_id", "document_ids")]
    positions = pd.Series(doc_ids).groupby(doc_ids, sort=False).cumcount().tolist()
    chunk_ids = [make_chunk_id(d, p, "graphrag") for d, p in zip(doc_ids, positions, strict=True)]
    ids = _GraphRAGIds(
        dict(zip(units.col("id"), chunk_ids, strict=True)),
        dict(zip(ents.col("title", "name"), ents.col("id"), strict=True)),
    )
    rel_chunks = ids.chunks(rels, "text_unit_ids")
    tables_out = {
        "documents": pd.DataFrame(
            {
                "doc_id": docs.col("id"),
                "title": docs.col("title"),
                "text": docs.col("text"),
                "source": "graphrag",
                "date": None,
                "metadata": [{"creation_date": d} for d in docs.col("creation_date")],
            }
        ),
        "chunks": pd.DataFrame(
            {
                "chunk_id": chunk_ids,
                "doc_id": doc_ids,
                "position": positions,
                "text": units.col("text"),
                "n_tokens": units.col("n_tokens"),
            }
        ),
        "entities": pd.DataFrame(
            {
                "entity_id": ents.col("id"),
                "name": ents.col("title", "name"),
                "type": ents.col("type"),
                "description": ents.col("description"),
                "chunk_ids": ids.chunks(ents, "text_unit_ids"),
                "degree": ents.col("degree"),
                "origin": "import",
            }
        ),
        "relations": pd.DataFrame(
            {
                "relation_id": rels.col("id"),
                "source_id": ids.entities(rels, "source", rel_chunks),
                "target_id": ids.entities(rels, "target", rel_chunks),
                "description": rels.col("description"),
                "weight": rels.col("weight"),
                "chunk_ids": rel_chunks,
            }
        ),
        "communities": pd.DataFrame(
            {
                "community_id": comms.col("community").astype(str),
                "level": comms.col("level"),
                "parent_id": [None if p < 0 else str(p) for p in comms.col("parent")],
                "entity_ids": comms.col("entity_ids").map(list),
                "relation_ids": comms.col("relationship_ids").map(list),
                "chunk_ids": ids.chunks(comms, "text_unit_ids"),
                "size": comms.col("size"),
            }
        ),
    }
    by_community = tables_out["communities"].set_index("community_id")
    report_ids = reports.col("community").astype(str)
    if not report_ids.isin(by_community.index).all():
        raise DataError(
            str(reports.path),
            report_ids[~report_ids.isin(by_community.index)].iloc[0],
            "community",
            "no such community in the communities table",
        )
    tables_out["community_reports"] = pd.DataFrame(
        {
            "community_id": report_ids,
            "level": reports.col("level"),
            "title": reports.col("title"),
            "summary": reports.col("summary"),
            "findings": [
                [{"summary": f.get("summary", ""), "explanation": f.get("explanation", "")} for f in fs]
                for fs in reports.col("findings")
            ],
            "rating": reports.col("rank", "rating"),
            "full_text": reports.col("full_content"),
            "entity_ids": list(by_community.loc[report_ids, "entity_ids"]),
            "chunk_ids": list(by_community.loc[report_ids, "chunk_ids"]),
        }
    )
    if (cov := tables["covariates"]) is not None:
        claim_chunks = ids.chunks(cov, "text_unit_id")
        tables_out["claims"] = pd.DataFrame(
            {
                "claim_id": cov.col("id"),
                "subject_id": ids.entities(cov, "subject_id", claim_chunks),
                "object_id": ids.entities(cov, "object_id", claim_chunks),
                "claim_type": cov.col("type"),
                "status": cov.col("status"),
                "start_date": _nulls(cov.col("start_date")),
                "end_date": _nulls(cov.col("end_date")),
                "description": cov.col("description"),
                "chunk_ids": claim_chunks,
            }
        )
    failures = pd.DataFrame(ids.failures, columns=list(SCHEMAS["extraction_failures"]))
    return GraphIndex(
        **tables_out,
        extraction_failures=failures,
        manifest={"source": "graphrag", "imported_from": str(folder)},
    )


def _json_with_nan(path: Path) -> object:
    # HippoRAG's export writes bare NaN for two unused averages: not strict JSON, but Python's json
    # reads it; we accept it knowingly (as None) instead of rejecting the file.
    try:
        return json.loads(path.read_text(encoding="utf-8"), parse_constant=lambda _: None)
    except json.JSONDecodeError as e:
        raise DataError(str(path), None, None, f"invalid JSON: {e}") from e


def import_openie(
    path: str | Path, corpus: Dataset | pd.DataFrame, chunks: pd.DataFrame | None = None
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """HippoRAG OpenIE triples as (entities, relations, extraction_failures).

    Each record of `docs` is matched to a corpus document by (title, text) and its triples are
    attributed to that document's chunks (`chunks`, default `chunk_documents` with the kit's
    defaults, which keeps a short passage whole). Subjects and objects become entities (origin
    "import"), each triple one relation instance "subject relation object"; instances merge with
    `merge_extractions`, so weight = number of triples linking the pair. Triples that are not
    [subject, relation, object] (HippoRAG's output has some) are skipped and reported as failures;
    anything else malformed raises DataError naming file, record and field.
    """
    path = Path(path)
    documents = corpus.documents_frame() if isinstance(corpus, Dataset) else corpus
    chunks = chunk_documents(documents) if chunks is None else chunks
    doc_of: dict[tuple[str, str], str] = {}
    for doc_id, title, text in zip(documents["doc_id"], documents["title"], documents["text"], strict=True):
        doc_of.setdefault((title, text), doc_id)
    chunks_of: dict[str, list[str]] = {}
    for chunk_id, doc_id in zip(chunks["chunk_id"], chunks["doc_id"], strict=True):
        chunks_of.setdefault(doc_id, []).append(chunk_id)

    data = _json_with_nan(path)
    records = data.get("docs") if isinstance(data, dict) else None
    if not isinstance(records, list):
        raise DataError(str(path), None, "docs", "expected an object whose 'docs' is a list")
    ent_rows, rel_rows, failures = [], [], []
    for i, record in enumerate(records):
        if not isinstance(record, dict):
            raise DataError(str(path), i, None, f"expected an object, got {type(record).__name__}")
        for key in ("title", "text"):
            if not isinstance(record.get(key), str):
                raise DataError(str(path), i, key, "expected a string")
        doc_id = doc_of.get((record["title"], record["text"]))
        if doc_id is None:
            raise DataError(str(path), i, "text", f"matches no corpus document (title {record['title']!r})")
        chunk_ids = chunks_of.get(doc_id, [])
        triples = record.get("extracted_triples")
        if not isinstance(triples, list):
            raise DataError(str(path), i, "extracted_triples", "expected a list of triples")
        for triple in triples:
            if not isinstance(triple, list) or not all(isinstance(x, str) for x in triple):
                raise DataError(
                    str(path), i, "extracted_triples", f"expected lists of strings, got {triple!r}"
                )
            if len(triple) != 3 or not all(normalize_name(x) for x in (triple[0], triple[2])):
                failures.append(
                    _failure(chunk_ids, "malformed_triple", f"{path.name} record {i}: {triple!r}")
                )
                continue
            subject, relation, obj = triple
            sentence = f"{subject} {relation} {obj}"
            ids = [entity_key(normalize_name(x)) for x in (subject, obj)]
            ent_rows += [
                (eid, name, "", sentence, chunk_ids, "import")
                for eid, name in zip(ids, (subject, obj), strict=True)
            ]
            rel_rows.append((*ids, sentence, 1.0, chunk_ids))
    entities, relations = merge_extractions(
        [(pd.DataFrame(ent_rows, columns=ENTITY_INSTANCE), pd.DataFrame(rel_rows, columns=RELATION_INSTANCE))]
    )
    return (
        entities,
        relations,
        conform_table(
            "extraction_failures", pd.DataFrame(failures, columns=list(SCHEMAS["extraction_failures"]))
        ),
    )
