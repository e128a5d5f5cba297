"""Importers: a Microsoft GraphRAG output folder (parquet tables, with its own ids, communities
and reports) and HippoRAG OpenIE files, into the index tables.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ragtrial.index.chunk_documents import chunk_documents, make_chunk_id
from ragtrial.index.merge_extractions import (
    ENTITY_INSTANCE,
    RELATION_INSTANCE,
    entity_key,
    merge_extractions,
    normalize_name,
)
from ragtrial.index.tables import SCHEMAS, GraphIndex, conform_table
from ragtrial.records import DataError, Dataset

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


# What the importer makes of the same files; a new version re-imports a saved index (2: an entity row
# for each title a relation or claim names without one).
IMPORTER_VERSION = 2


@dataclass
class _GraphRAGIds:
    """GraphRAG text unit ids -> chunk ids and entity titles -> entity ids, collecting failures."""

    chunk_of: dict[str, str]
    entity_of: dict[str, str]
    failures: list[tuple[str, str, str, str]] = field(default_factory=list)
    # titles a relation or claim names that the entities table lacks -> the chunks naming them
    unknown: dict[str, list[str]] = field(default_factory=dict)

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
                self.unknown.setdefault(name, []).extend(c for c in chunk_ids if c not in self.unknown[name])
            ids.append(None if name is None else self.entity_of.get(name) or entity_key(normalize_name(name)))
        return ids


def import_graphrag_output(folder: str | Path) -> GraphIndex:
    """A Microsoft GraphRAG output folder (or its project root with `output/`) as a GraphIndex.

    GraphRAG's own ids, communities (levels as GraphRAG made them) and reports are kept; text
    units become chunks with ids `make_chunk_id(document id, position, "graphrag")`. Relationship
    endpoints and claim subjects/objects are entity titles in GraphRAG; a title missing from the
    entities table gets the name-derived id `entity_key(normalize_name(title))` (what an extraction
    of that name would produce), an entity row of that name (no type, no description, the chunks
    naming it) so every relation's ends are in the graph, and an `extraction_failures` row of kind
    "unknown_entity".
    GraphRAG's "NONE" placeholders in claims become nulls; covariates (claims) are optional.
    """
    folder = Path(folder)
    if not list(folder.glob("*.parquet")) and (folder / "output").is_dir():
        folder = folder / "output"
    tables = {name: _graphrag_table(folder, name) for name in (*_GRAPHRAG, "covariates")}
    required: dict[str, _Parquet] = {}
    for name in _GRAPHRAG:
        table = tables[name]
        if table is None:
            raise DataError(
                str(folder / f"{name}.parquet"),
                None,
                None,
                f"missing (also looked for create_final_{name}.parquet)",
            )
        required[name] = table
    docs, units, ents, rels, comms, reports = (required[name] for name in _GRAPHRAG)

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
    if ids.unknown:  # an entity row for each, so every relation's ends are in the graph (and counted)
        tables_out["entities"] = pd.concat(
            [
                tables_out["entities"],
                pd.DataFrame(
                    {
                        "entity_id": [entity_key(normalize_name(name)) for name in ids.unknown],
                        "name": list(ids.unknown),
                        "type": "",
                        "description": "",
                        "chunk_ids": list(ids.unknown.values()),
                        "degree": 0,
                        "origin": "import",
                    }
                ),
            ],
            ignore_index=True,
        ).drop_duplicates("entity_id")
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
    path: str | Path,
    corpus: Dataset | pd.DataFrame,
    chunks: pd.DataFrame | None = None,
    corpus_is_a_subset: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """HippoRAG OpenIE triples as (entities, relations, extraction_failures).

    Each record of `docs` is matched to a corpus document by (title, text) and its triples are
    attributed to that document's chunks (`chunks`, default `chunk_documents` with the kit's
    defaults, which keeps a short passage whole). Subjects and objects become entities (origin
    "import"), each triple one relation instance "subject relation object"; instances merge with
    `merge_extractions`, so weight = number of triples linking the pair. Triples that are not
    [subject, relation, object] (HippoRAG's output has some) are skipped and reported as failures;
    anything else malformed raises DataError naming file, record and field. A record matching no
    corpus document is a DataError, unless `corpus_is_a_subset` (the corpus was cut to a sample): then
    it is left out and reported (kind "outside_corpus").
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
        if doc_id is None and corpus_is_a_subset:
            failures.append(_failure([], "outside_corpus", f"{path.name} record {i}: {record['title']!r}"))
            continue
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


def openie_stated_cost(path: str | Path) -> tuple[float | None, str]:
    """The extraction cost in US dollars a HippoRAG OpenIE file states (`approx_total_cost`), with
    where it is stated; None when the file states none or 0.0 (HippoRAG's export leaves 0.0 when the
    run did not track it: a cost of zero would be false).
    """
    path = Path(path)
    data = _json_with_nan(path)
    value = data.get("approx_total_cost") if isinstance(data, dict) else None
    where = f"approx_total_cost in {path.name}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None, f"{path.name} states no approx_total_cost"
    if value == 0:
        return None, f"{where} is 0.0: the export did not track its cost"
    return float(value), where
