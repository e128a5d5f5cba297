"""The graph index tables: their schemas, `GraphIndex` and its persistence, and origin selection.

Every producer (NLP extraction, LLM extraction, imported GraphRAG outputs, Leiden, report
generation) writes into the same tables, whose columns and types are fixed in `SCHEMAS` (the
"Index tables" contract of docs/design.md). `GraphIndex` conforms every table to its schema on
construction, so an index built in memory and one loaded from disk are identical frames.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import uuid
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

_S, _I, _F = pa.string(), pa.int64(), pa.float64()
_IDS = pa.list_(pa.string())
_FINDINGS = pa.list_(pa.struct([("summary", _S), ("explanation", _S)]))
# Free-form dicts (Document.metadata) have no fixed Arrow type: they are stored as JSON text.
_JSON = pa.string()

SCHEMAS: dict[str, dict[str, pa.DataType]] = {
    "documents": {"doc_id": _S, "title": _S, "text": _S, "source": _S, "date": _S, "metadata": _JSON},
    "chunks": {"chunk_id": _S, "doc_id": _S, "position": _I, "text": _S, "n_tokens": _I},
    "entities": {
        "entity_id": _S,
        "name": _S,
        "type": _S,
        "description": _S,
        "chunk_ids": _IDS,
        "degree": _I,
        "origin": _S,
    },
    "relations": {
        "relation_id": _S,
        "source_id": _S,
        "target_id": _S,
        "description": _S,
        "weight": _F,
        "chunk_ids": _IDS,
        "valid_from": _I,  # first year the relation holds; missing: not stated
        "valid_to": _I,  # last year; missing with valid_from set: still holds
    },
    "claims": {
        "claim_id": _S,
        "subject_id": _S,
        "object_id": _S,
        "claim_type": _S,
        "status": _S,
        "start_date": _S,
        "end_date": _S,
        "description": _S,
        "chunk_ids": _IDS,
    },
    "communities": {
        "community_id": _S,
        "level": _I,
        "parent_id": _S,
        "entity_ids": _IDS,
        "relation_ids": _IDS,
        "chunk_ids": _IDS,
        "size": _I,
    },
    "community_reports": {
        "community_id": _S,
        "level": _I,
        "title": _S,
        "summary": _S,
        "findings": _FINDINGS,
        "rating": _F,
        "full_text": _S,
        "entity_ids": _IDS,
        "chunk_ids": _IDS,
    },
    "extraction_failures": {"chunk_id": _S, "stage": _S, "kind": _S, "detail": _S},
}
JSON_COLUMNS = {("documents", "metadata")}
# Columns a later build step fills (`index.date_relations`), not the extractors: a frame or a saved
# index (built before the step existed) without them gets them missing, never a made-up value.
FILLED_LATER = {"relations": ("valid_from", "valid_to")}
KEYS = {
    "documents": "doc_id",
    "chunks": "chunk_id",
    "entities": "entity_id",
    "relations": "relation_id",
    "claims": "claim_id",
    "communities": "community_id",
    "community_reports": "community_id",
}
# table -> (GraphIndex attribute, file name); rows are in table order.
EMBEDDINGS = {
    "chunks": ("chunk_embeddings", "chunks.npy"),
    "entities": ("entity_embeddings", "entities.npy"),
    "community_reports": ("report_embeddings", "reports.npy"),
}
FORMAT = "ragtrial-index/1"


def short_hash(*parts: object, length: int = 16) -> str:
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:length]


def config_hash(settings: dict[str, Any]) -> str:
    """Stable across key order and processes: sha256 of sorted-key compact JSON, first 12 hex digits."""
    text = json.dumps(settings, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


# ---------------------------------------------------------------- schema enforcement


def _arrow_schema(table: str) -> pa.Schema:
    return pa.schema(list(SCHEMAS[table].items()))


def produced_columns(table: str) -> list[str]:
    """The columns of `table` that its producers (extractors, importers) write: all but FILLED_LATER's."""
    return [c for c in SCHEMAS[table] if c not in FILLED_LATER.get(table, ())]


def _with_later_columns(table: str, df: pd.DataFrame) -> pd.DataFrame:
    absent = [c for c in FILLED_LATER.get(table, ()) if c not in df.columns]
    return df.assign(**{c: pd.array([pd.NA] * len(df), dtype="Int64") for c in absent}) if absent else df


def _to_arrow(table: str, df: pd.DataFrame) -> pa.Table:
    columns = list(SCHEMAS[table])
    df = _with_later_columns(table, df)
    missing, extra = set(columns) - set(df.columns), set(df.columns) - set(columns)
    if missing or extra:
        raise ValueError(f"table {table!r}: missing columns {sorted(missing)}, unexpected {sorted(extra)}")
    df = df[columns].reset_index(drop=True)
    for t, col in JSON_COLUMNS:
        if t == table:
            df = df.assign(**{col: [json.dumps(v, sort_keys=True) for v in df[col]]})
    try:
        return pa.Table.from_pandas(df, schema=_arrow_schema(table), preserve_index=False)
    except pa.ArrowException as e:
        raise ValueError(f"table {table!r} does not match its schema: {e}") from e


_NULLABLE_INTS = {(t, c) for t, cols in FILLED_LATER.items() for c in cols}


def _from_arrow(table: str, arrow: pa.Table) -> pd.DataFrame:
    data: dict[str, Any] = {}
    for col, typ in SCHEMAS[table].items():
        values = arrow.column(col)
        if (table, col) in JSON_COLUMNS:
            data[col] = pd.Series([json.loads(v) for v in values.to_pylist()], dtype=object)
        elif (table, col) in _NULLABLE_INTS:
            data[col] = pd.Series(values.to_pylist(), dtype="Int64")
        elif pa.types.is_list(typ):
            # to_pandas would give numpy arrays; plain lists compare and serialize predictably.
            data[col] = pd.Series(values.to_pylist(), dtype=object)
        else:
            data[col] = values.to_pandas()
    return pd.DataFrame(data, columns=list(SCHEMAS[table]))


def _later_columns_added(table: str, arrow: pa.Table) -> pa.Table:
    """A saved table with FILLED_LATER's columns it predates added as nulls."""
    for col in FILLED_LATER.get(table, ()):
        if col not in arrow.column_names:
            typ = SCHEMAS[table][col]
            arrow = arrow.append_column(pa.field(col, typ), pa.nulls(len(arrow), typ))
    return arrow


def conform_table(table: str, df: pd.DataFrame) -> pd.DataFrame:
    """`df` with exactly the contract columns, in contract order and types; raises on a mismatch."""
    frame = _from_arrow(table, _to_arrow(table, df))
    key = KEYS.get(table)
    if key is not None and frame[key].duplicated().any():
        dup = frame.loc[frame[key].duplicated(), key].iloc[0]
        raise ValueError(f"table {table!r}: duplicate {key} {dup!r}")
    return frame


def empty_tables() -> dict[str, pd.DataFrame]:
    """A correctly typed empty frame for every contract table."""
    return {name: _from_arrow(name, _arrow_schema(name).empty_table()) for name in SCHEMAS}


def _empty(table: str) -> Callable[[], pd.DataFrame]:
    return lambda: empty_tables()[table]


def fingerprint_documents(documents: pd.DataFrame) -> str:
    """sha256 over every field of every document, independent of row order."""
    rows = conform_table("documents", documents).sort_values("doc_id").to_dict("records")
    return hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()


# ---------------------------------------------------------------- the index


@dataclasses.dataclass(frozen=True, eq=False)
class GraphIndex:
    """The contract tables plus their embeddings. Tables are conformed on construction and meant
    to be treated as immutable: derive a new index with `dataclasses.replace` (which also resets the
    cached graph) instead of editing a frame in place.
    """

    documents: pd.DataFrame = dataclasses.field(default_factory=_empty("documents"))
    chunks: pd.DataFrame = dataclasses.field(default_factory=_empty("chunks"))
    entities: pd.DataFrame = dataclasses.field(default_factory=_empty("entities"))
    relations: pd.DataFrame = dataclasses.field(default_factory=_empty("relations"))
    claims: pd.DataFrame = dataclasses.field(default_factory=_empty("claims"))
    communities: pd.DataFrame = dataclasses.field(default_factory=_empty("communities"))
    community_reports: pd.DataFrame = dataclasses.field(default_factory=_empty("community_reports"))
    extraction_failures: pd.DataFrame = dataclasses.field(default_factory=_empty("extraction_failures"))
    chunk_embeddings: np.ndarray | None = None
    entity_embeddings: np.ndarray | None = None
    report_embeddings: np.ndarray | None = None
    manifest: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        for table in SCHEMAS:
            object.__setattr__(self, table, conform_table(table, getattr(self, table)))
        for table, (attr, _) in EMBEDDINGS.items():
            array = getattr(self, attr)
            if array is not None and (array.ndim != 2 or len(array) != len(getattr(self, table))):
                raise ValueError(
                    f"{attr} has shape {array.shape}, but {table} has {len(getattr(self, table))} rows"
                )

    def to_networkx(self) -> nx.Graph:
        """Undirected entity graph (cached per index object): nodes carry the entity columns, edges
        the summed weight and the ids of the relations they aggregate (either direction). An
        endpoint missing from the entities table (possible in imported graphs, see
        extraction_failures) appears as a node without attributes.
        """
        return self._graph

    @cached_property
    def _graph(self) -> nx.Graph:
        graph = nx.Graph()
        for row in self.entities.itertuples(index=False):
            graph.add_node(
                row.entity_id,
                name=row.name,
                type=row.type,
                description=row.description,
                degree=row.degree,
                origin=row.origin,
                chunk_ids=row.chunk_ids,
            )
        for row in self.relations.itertuples(index=False):
            if graph.has_edge(row.source_id, row.target_id):
                edge = graph.edges[row.source_id, row.target_id]
                edge["weight"] += row.weight
                edge["relation_ids"].append(row.relation_id)
            else:
                graph.add_edge(
                    row.source_id, row.target_id, weight=row.weight, relation_ids=[row.relation_id]
                )
        return graph

    def full_manifest(self) -> dict[str, Any]:
        """The caller's manifest plus what describes the saved tables (recomputed on every save)."""
        return {
            **self.manifest,
            "format": FORMAT,
            "config_hash": config_hash(self.manifest.get("settings", {})),
            "source_fingerprint": fingerprint_documents(self.documents),
            "counts": {table: len(getattr(self, table)) for table in SCHEMAS},
            "embeddings": {
                attr: None if getattr(self, attr) is None else list(getattr(self, attr).shape)
                for attr, _ in EMBEDDINGS.values()
            },
        }

    def content_hash(self) -> str:
        """sha256 over every table (in row order) and every embedding array: equal for equal contents,
        whatever the manifest says (what a database store is named by).
        """
        digest = hashlib.sha256()
        for table in SCHEMAS:
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, _arrow_schema(table)) as writer:
                writer.write_table(_to_arrow(table, getattr(self, table)))
            digest.update(table.encode() + b"\0" + sink.getvalue().to_pybytes())
        for attr, _ in EMBEDDINGS.values():
            array = getattr(self, attr)
            digest.update(
                attr.encode() + b"\0" + (b"" if array is None else np.ascontiguousarray(array).tobytes())
            )
        return digest.hexdigest()

    def save(self, path: str | Path) -> Path:
        """Write the index folder atomically: everything goes to a hidden sibling folder that is
        renamed into place only when complete, so an interrupted save never leaves a folder that
        looks like an index; an earlier index at `path` is untouched until the two final renames.
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f".{path.name}.tmp-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            for table in SCHEMAS:
                pq.write_table(_to_arrow(table, getattr(self, table)), tmp / f"{table}.parquet")
            for attr, filename in EMBEDDINGS.values():
                if getattr(self, attr) is not None:
                    np.save(tmp / filename, getattr(self, attr))
            (tmp / "manifest.json").write_text(
                json.dumps(self.full_manifest(), indent=2, sort_keys=True, default=str)
            )
            old = path.parent / f".{path.name}.old-{uuid.uuid4().hex[:8]}"
            if path.exists():
                path.rename(old)
            tmp.rename(path)
            shutil.rmtree(old, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return path

    @classmethod
    def load(cls, path: str | Path) -> GraphIndex:
        path = Path(path)

        def need(name: str) -> Path:
            file = path / name
            if not file.is_file():
                raise FileNotFoundError(f"index folder {path} is incomplete: {name} is missing")
            return file

        manifest = json.loads(need("manifest.json").read_text())
        tables = {
            t: _from_arrow(t, _later_columns_added(t, pq.read_table(need(f"{t}.parquet")))) for t in SCHEMAS
        }
        saved = manifest.get("embeddings", {})
        arrays = {
            attr: np.load(need(name)) if saved.get(attr) else None for attr, name in EMBEDDINGS.values()
        }
        return cls(**tables, **arrays, manifest=manifest)


ORIGINS = ("nlp", "llm", "import")


# ---------------------------------------------------------------- reading an index


def select_origin(index: GraphIndex, origin: str) -> GraphIndex:
    """The part of the index extracted by one source (its entities, the relations, claims,
    communities and reports among them, and their embedding rows); chunks and documents stay.
    """
    keep = (index.entities["origin"] == origin).to_numpy()
    ids = set(index.entities.loc[keep, "entity_id"])
    rel = index.relations["source_id"].isin(ids).to_numpy()
    communities = index.communities[
        np.array([len(e) > 0 and e[0] in ids for e in index.communities["entity_ids"]], dtype=bool)
    ]
    rep = index.community_reports["community_id"].isin(set(communities["community_id"])).to_numpy()

    def rows(attr: str, mask: np.ndarray) -> np.ndarray | None:
        array = getattr(index, attr)
        return None if array is None else array[mask]

    return dataclasses.replace(
        index,
        entities=index.entities[keep],
        relations=index.relations[rel],
        claims=index.claims[index.claims["subject_id"].isin(ids)],
        communities=communities,
        community_reports=index.community_reports[rep],
        entity_embeddings=rows(EMBEDDINGS["entities"][0], keep),
        report_embeddings=rows(EMBEDDINGS["community_reports"][0], rep),
    )
