"""An index in a PostgreSQL database: the documented layout of its tables (docs/stores.md), writing
an index into it, and reading a database that holds your own data in that layout, validated.

The layout holds what the seed-001 experiment kept in PostgreSQL: documents, chunks and their
embeddings, entities (with their embeddings), relations (with their validity years), mentions (which
chunks an entity appears in), the chunks each relation was extracted from, and the communities with
their members. Claims and community reports are not part of it (they stay in the kit's index folder;
an index read from a database has none). Everything the retrievers derive for searching (full-text
vectors, BM25 terms, degrees) is the kit's own, in `ragtrial.retrieval.stores.postgres`, never in the
layout, so a database that holds the layout is searched as it is.

`Database` is one database (psycopg 3, one connection per thread); its errors name the URL with its
credentials masked and say what to check. `write_layout` writes an index's tables into a new schema
on a connection inside the caller's transaction; `read_index` checks a schema table by table and
column by column (`LayoutError` names each table and column at fault) and returns the `GraphIndex`
it holds.
"""

from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pandas as pd

from ragtrial.config.cache import DEFAULT_PASSWORD_ENV
from ragtrial.index.tables import ORIGINS, GraphIndex
from ragtrial.llm.cache import ThreadConnections
from ragtrial.llm.tokens import count_tokens
from ragtrial.records import ordered_union
from ragtrial.redact import MASK, redact, redact_url

# ---------------------------------------------------------------- the layout


@dataclass(frozen=True)
class Column:
    name: str
    kind: str  # text | integer | float | json | embedding (see KINDS)
    required: bool = True
    references: str = ""  # "table.column" every value must name


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    required: bool = True
    purpose: str = ""

    def column(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)


# Column kinds: the PostgreSQL types accepted (information_schema's udt_name) and the type the kit
# creates; an embedding is float8[] (exact cosine in SQL) or pgvector's vector where installed.
KINDS: dict[str, tuple[tuple[str, ...], str]] = {
    "text": (("text", "varchar", "bpchar", "name"), "text"),
    "integer": (("int2", "int4", "int8"), "bigint"),
    "float": (("float4", "float8", "numeric", "int2", "int4", "int8"), "double precision"),
    "json": (("jsonb", "json"), "jsonb"),
    "embedding": (("_float8", "_float4", "_numeric", "vector"), "double precision[]"),
}

LAYOUT: dict[str, Table] = {
    t.name: t
    for t in (
        Table(
            "documents",
            (
                Column("doc_id", "text"),
                Column("text", "text"),
                Column("title", "text", required=False),
                Column("source", "text", required=False),
                Column("date", "text", required=False),
                Column("metadata", "json", required=False),
            ),
            ("doc_id",),
            purpose="the source documents",
        ),
        Table(
            "chunks",
            (
                Column("chunk_id", "text"),
                Column("doc_id", "text", references="documents.doc_id"),
                Column("position", "integer"),
                Column("text", "text"),
                Column("n_tokens", "integer", required=False),
            ),
            ("chunk_id",),
            purpose="the passages retrieved, `position` their place in their document",
        ),
        Table(
            "chunk_embeddings",
            (Column("chunk_id", "text", references="chunks.chunk_id"), Column("embedding", "embedding")),
            ("chunk_id",),
            required=False,
            purpose="one L2-normalized vector per chunk, from the model `embeddings.model` names",
        ),
        Table(
            "entities",
            (
                Column("entity_id", "text"),
                Column("name", "text"),
                Column("type", "text", required=False),
                Column("description", "text", required=False),
                Column("origin", "text", required=False),
                Column("degree", "integer", required=False),
            ),
            ("entity_id",),
            purpose="the graph's nodes; `origin` one of nlp, llm, import (default import); `degree` the "
            "number of distinct neighbours (computed when absent)",
        ),
        Table(
            "entity_embeddings",
            (Column("entity_id", "text", references="entities.entity_id"), Column("embedding", "embedding")),
            ("entity_id",),
            required=False,
            purpose="one L2-normalized vector per entity (of 'name: description'), for local search",
        ),
        Table(
            "relations",
            (
                Column("relation_id", "text"),
                Column("source_id", "text", references="entities.entity_id"),
                Column("target_id", "text", references="entities.entity_id"),
                Column("description", "text", required=False),
                Column("weight", "float", required=False),
                Column("valid_from", "integer", required=False),
                Column("valid_to", "integer", required=False),
            ),
            ("relation_id",),
            purpose="the graph's edges (walked in both directions); `valid_from` / `valid_to` the first "
            "and last year the relation holds (null: not stated; valid_to null with valid_from set: "
            "still holds); weight default 1",
        ),
        Table(
            "mentions",
            (
                Column("entity_id", "text", references="entities.entity_id"),
                Column("chunk_id", "text", references="chunks.chunk_id"),
            ),
            ("entity_id", "chunk_id"),
            purpose="which chunks each entity appears in (what the graph walk scores passages by)",
        ),
        Table(
            "relation_chunks",
            (
                Column("relation_id", "text", references="relations.relation_id"),
                Column("chunk_id", "text", references="chunks.chunk_id"),
            ),
            ("relation_id", "chunk_id"),
            required=False,
            purpose="the chunks each relation was extracted from",
        ),
        Table(
            "communities",
            (
                Column("community_id", "text"),
                Column("level", "integer"),
                Column("parent_id", "text", required=False),
            ),
            ("community_id",),
            required=False,
            purpose="hierarchical communities C0 (root level) ... Cn",
        ),
        Table(
            "community_members",
            (
                Column("community_id", "text", references="communities.community_id"),
                Column("entity_id", "text", references="entities.entity_id"),
            ),
            ("community_id", "entity_id"),
            required=False,
            purpose="each community's entities (its relations are those among them)",
        ),
    )
}


class StoreError(RuntimeError):
    """A database that cannot be used (unreachable, refused, no privilege), named without credentials."""


class LayoutError(ValueError):
    """A schema not holding an index in the documented layout: the message names each table and column."""


# ---------------------------------------------------------------- the database


class Database:
    """One PostgreSQL database (psycopg 3): a connection per thread, in autocommit outside the
    transactions `transaction` opens; every psycopg error leaves as a StoreError naming `where`.
    """

    def __init__(self, url: str, password_env: str = DEFAULT_PASSWORD_ENV):
        self.url, self.password_env = url, password_env
        self.where = redact_url(url)
        try:
            import psycopg  # the `postgres` extra; only a database store needs it
        except ImportError:
            raise StoreError(
                f"{self.where}: a PostgreSQL store needs psycopg (pip install 'ragtrial[postgres]')"
            ) from None
        self.psycopg = psycopg
        try:
            # conninfo values are typed str | int; a password is a str
            self.url_password = cast(str | None, psycopg.conninfo.conninfo_to_dict(url).get("password"))
        except psycopg.ProgrammingError as err:
            raise StoreError(f"{self.where}: not a PostgreSQL URL: {redact_url(str(err))}") from None
        if self.url_password:
            self.where = self.where.replace(self.url_password, MASK)
        opener = functools.partial(_connect, psycopg, url, None if self.url_password else password_env)
        self.connections = ThreadConnections(
            self, opener, _close, lambda conn: not (conn.closed or conn.broken)
        )

    @contextmanager
    def guard(self) -> Iterator[None]:
        """Psycopg errors as one StoreError line naming the database (credentials masked), what to check."""
        try:
            yield
        except self.psycopg.Error as err:
            message = " ".join(str(err).split())
            if self.url_password:
                message = message.replace(self.url_password, MASK)
            hint = next(
                (hint for symptom, hint in self.hints() if symptom in message),
                "check that the server runs and that store.url names it",
            )
            raise StoreError(
                f"database {self.where}: {redact(message, [self.password_env])} ({hint})"
            ) from None

    def hints(self) -> list[tuple[str, str]]:
        credentials = f"check the user and the password (in store.url or ${self.password_env})"
        return [
            ("password authentication failed", credentials),
            ("no password supplied", credentials),
            ("database", "create the database (createdb -O <user> <name>), or name another in store.url"),
            ("permission denied", "the user needs a database it may create schemas in (createdb -O <user>)"),
            ("Connection refused", "start the server, or correct the host and port of store.url"),
        ]

    def rows(self, query: Any, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple]:
        with self.guard():
            return self.connections.get().execute(query, params).fetchall()

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """A connection inside one transaction: everything or nothing of what it writes is kept."""
        with self.guard():
            conn = self.connections.get()
            with conn.transaction():
                yield conn

    def close(self) -> None:
        self.connections.close()


def _connect(psycopg: Any, url: str, password_env: str | None) -> Any:
    """A connection in autocommit; the password from `password_env` (read now) when the URL has none."""
    password = os.environ.get(password_env) if password_env else None
    extra = {"password": password} if password else {}
    return psycopg.connect(
        url, autocommit=True, connect_timeout=10, application_name="ragtrial-store", **extra
    )


def _close(conn: Any) -> None:
    conn.close()


_DATABASES: dict[tuple[str, str], Database] = {}
_DATABASES_LOCK = threading.Lock()


def database(url: str, password_env: str = DEFAULT_PASSWORD_ENV) -> Database:
    """The process's one `Database` for this URL (retrievers of a run share its connections)."""
    with _DATABASES_LOCK:
        if (url, password_env) not in _DATABASES:
            _DATABASES[(url, password_env)] = Database(url, password_env)
        return _DATABASES[(url, password_env)]


# ---------------------------------------------------------------- writing the layout


def _identifier(*names: str) -> Any:
    from psycopg import sql

    return sql.Identifier(*names)


def create_table(conn: Any, schema: str, name: str, embedding_type: str, references: bool = True) -> None:
    """The layout table `name` in `schema`, with its key and (`references`) its references within
    `schema`; embeddings as `embedding_type` (double precision[], or pgvector's vector(d)).
    """
    from psycopg import sql

    table = LAYOUT[name]
    columns = [
        sql.SQL("{} {}{}").format(
            _identifier(c.name),
            sql.SQL(embedding_type if c.kind == "embedding" else KINDS[c.kind][1]),
            sql.SQL(" NOT NULL" if c.required else ""),
        )
        for c in table.columns
    ]
    columns.append(sql.SQL("PRIMARY KEY ({})").format(sql.SQL(", ").join(map(_identifier, table.key))))
    for c in table.columns:
        if c.references and references:
            target, column = c.references.split(".")
            columns.append(
                sql.SQL("FOREIGN KEY ({}) REFERENCES {} ({})").format(
                    _identifier(c.name), _identifier(schema, target), _identifier(column)
                )
            )
    conn.execute(
        sql.SQL("CREATE TABLE {} ({})").format(_identifier(schema, name), sql.SQL(", ").join(columns))
    )


def embedding_value(vector: list[float], embedding_type: str) -> Any:
    """A vector as its column takes it: a list for double precision[], '[x,y,...]' for pgvector's vector."""
    return "[" + ",".join(map(repr, vector)) + "]" if embedding_type.startswith("vector") else vector


def vector_rows(index: GraphIndex, table: str, embedding_type: str) -> list[tuple]:
    """(id, vector) rows of chunk_embeddings or entity_embeddings, in table order ([] without vectors)."""
    rows_of, attr = {
        "chunk_embeddings": ("chunks", "chunk_embeddings"),
        "entity_embeddings": ("entities", "entity_embeddings"),
    }[table]
    array = getattr(index, attr)
    if array is None:
        return []
    ids = getattr(index, rows_of).iloc[:, 0]
    return [
        (i, embedding_value(v, embedding_type))
        for i, v in zip(ids, array.astype(np.float64).tolist(), strict=True)
    ]


def _pairs(ids: Sequence[str], lists: Sequence[Sequence[str]]) -> list[tuple[str, str]]:
    return list(dict.fromkeys((a, b) for a, bs in zip(ids, lists, strict=True) for b in bs))


def layout_rows(index: GraphIndex, embedding_type: str) -> dict[str, list[tuple]]:
    """The index's rows of each layout table, in table order (embeddings only where the index has them)."""
    d, c, e, r, m = index.documents, index.chunks, index.entities, index.relations, index.communities

    def year(value: Any) -> int | None:
        return None if pd.isna(value) else int(value)

    return {
        "documents": [
            (row.doc_id, row.text, row.title, row.source, row.date, json.dumps(row.metadata, sort_keys=True))
            for row in d.itertuples(index=False)
        ],
        "chunks": list(
            c[["chunk_id", "doc_id", "position", "text", "n_tokens"]].itertuples(index=False, name=None)
        ),
        "chunk_embeddings": vector_rows(index, "chunk_embeddings", embedding_type),
        "entities": list(
            e[["entity_id", "name", "type", "description", "origin", "degree"]].itertuples(
                index=False, name=None
            )
        ),
        "entity_embeddings": vector_rows(index, "entity_embeddings", embedding_type),
        "relations": [
            (
                row.relation_id,
                row.source_id,
                row.target_id,
                row.description,
                row.weight,
                year(row.valid_from),
                year(row.valid_to),
            )
            for row in r.itertuples(index=False)
        ],
        "mentions": _pairs(list(e["entity_id"]), list(e["chunk_ids"])),
        "relation_chunks": _pairs(list(r["relation_id"]), list(r["chunk_ids"])),
        "communities": list(m[["community_id", "level", "parent_id"]].itertuples(index=False, name=None)),
        "community_members": _pairs(list(m["community_id"]), list(m["entity_ids"])),
    }


def copy_rows(conn: Any, schema: str, table: str, columns: Sequence[str], rows: Sequence[tuple]) -> None:
    """`rows` into `schema.table` by COPY (on the caller's connection and transaction)."""
    from psycopg import sql

    statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
        _identifier(schema, table), sql.SQL(", ").join(map(_identifier, columns))
    )
    with conn.cursor().copy(statement) as copy:
        for row in rows:
            copy.write_row(row)


def write_layout(conn: Any, schema: str, index: GraphIndex, embedding_type: str) -> None:
    """The index's tables into a new `schema` in the documented layout, on `conn` in its transaction."""
    from psycopg import sql

    conn.execute(sql.SQL("CREATE SCHEMA {}").format(_identifier(schema)))
    for name in LAYOUT:
        create_table(conn, schema, name, embedding_type)
    for name, rows in layout_rows(index, embedding_type).items():
        copy_rows(conn, schema, name, [c.name for c in LAYOUT[name].columns], rows)


# ---------------------------------------------------------------- reading and validating a schema


def schema_columns(db: Database, schema: str) -> dict[str, dict[str, str]]:
    """Table -> column -> udt_name of every table (and view) in `schema`."""
    found: dict[str, dict[str, str]] = {}
    for table, column, udt in db.rows(
        "SELECT table_name, column_name, udt_name FROM information_schema.columns "
        "WHERE table_schema = %s ORDER BY table_name, ordinal_position",
        (schema,),
    ):
        found.setdefault(table, {})[column] = udt
    return found


def layout_problems(columns: dict[str, dict[str, str]]) -> list[str]:
    """What keeps `columns` (`schema_columns`) from holding the layout, each naming its table and column."""
    problems = []
    for table in LAYOUT.values():
        present = columns.get(table.name)
        if present is None:
            if table.required or (table.name == "community_members" and "communities" in columns):
                problems.append(f"table {table.name} is missing ({table.purpose})")
            continue
        for c in table.columns:
            accepted, _ = KINDS[c.kind]
            if c.name not in present:
                if c.required:
                    problems.append(f"{table.name}.{c.name} is missing (a {c.kind} column, required)")
            elif present[c.name] not in accepted:
                problems.append(
                    f"{table.name}.{c.name} has type {present[c.name]}, expected a {c.kind} column "
                    f"({', '.join(accepted)})"
                )
    return problems


def _select(schema: str, table: Table, present: dict[str, str], order: str) -> Any:
    """SELECT of every layout column of `table` (NULL for an optional column the schema lacks)."""
    from psycopg import sql

    def value(c: Column) -> Any:
        if c.name not in present:
            return sql.SQL("NULL")
        if c.kind == "embedding":
            return sql.SQL("{}::float8[]").format(_identifier(c.name))
        if c.kind == "json":
            return sql.SQL("{}::text").format(_identifier(c.name))
        return _identifier(c.name)

    return sql.SQL("SELECT {} FROM {} ORDER BY {}").format(
        sql.SQL(", ").join(value(c) for c in table.columns), _identifier(schema, table.name), sql.SQL(order)
    )


def _frame(
    db: Database, schema: str, name: str, columns: dict[str, dict[str, str]], order: str
) -> pd.DataFrame:
    table = LAYOUT[name]
    if name not in columns:
        return pd.DataFrame(columns=[c.name for c in table.columns])
    rows = db.rows(_select(schema, table, columns[name], order))
    return pd.DataFrame(rows, columns=[c.name for c in table.columns], dtype=object)


def _value_problems(frames: dict[str, pd.DataFrame], present: dict[str, dict[str, str]]) -> list[str]:
    """Null required values, duplicate keys and references to rows that do not exist, per table and column."""
    problems = []
    for name, frame in frames.items():
        table = LAYOUT[name]
        for c in table.columns:
            nulls = int(frame[c.name].isna().sum()) if c.name in present.get(name, {}) else 0
            if c.required and nulls:
                problems.append(f"{name}.{c.name}: {nulls} rows are null")
        duplicated = frame.duplicated(list(table.key))
        if duplicated.any():
            first = frame.loc[duplicated, list(table.key)].iloc[0].tolist()
            problems.append(
                f"{name} ({', '.join(table.key)}): {int(duplicated.sum())} duplicate rows, e.g. {first}"
            )
        for c in table.columns:
            if not c.references or name not in present:
                continue
            target, column = c.references.split(".")
            dangling = frame[c.name].dropna()[~frame[c.name].dropna().isin(set(frames[target][column]))]
            if len(dangling):
                problems.append(
                    f"{name}.{c.name}: {len(dangling)} rows name no {column} of {target}, "
                    f"e.g. {dangling.iloc[0]!r}"
                )
    origins = frames["entities"]["origin"].dropna()
    unknown = origins[~origins.isin(ORIGINS)]
    if len(unknown):
        problems.append(f"entities.origin: {unknown.iloc[0]!r} is not one of {', '.join(ORIGINS)}")
    return problems


def _embeddings(
    frame: pd.DataFrame, key: str, ids: Sequence[str], name: str
) -> tuple[np.ndarray | None, list[str]]:
    """The vectors of `frame` in the order of `ids` (None when the table is empty), or the problems."""
    if frame.empty:
        return None, []
    by_id = dict(zip(frame[key], frame["embedding"], strict=True))
    missing = [i for i in ids if i not in by_id]
    if missing:
        return None, [
            f"{name}.embedding: {len(missing)} of {len(ids)} rows have no vector, e.g. {missing[0]!r}"
        ]
    widths = {len(v) for v in by_id.values()}
    if len(widths) != 1:
        return None, [f"{name}.embedding: vectors of different lengths {sorted(widths)}"]
    array = np.array([by_id[i] for i in ids], dtype=np.float64)
    norms = np.linalg.norm(array, axis=1)
    off = np.flatnonzero(np.abs(norms - 1) > 1e-3)
    if len(off):
        return None, [
            f"{name}.embedding: {len(off)} vectors are not L2-normalized (e.g. {ids[off[0]]!r}, norm "
            f"{norms[off[0]]:.4g}); the kit ranks by the dot product, which is the cosine of unit vectors"
        ]
    return array.astype(np.float32), []


def read_index(db: Database, schema: str) -> GraphIndex:
    """The index `schema` holds in the documented layout, after checking it; LayoutError lists every
    table and column at fault (types, missing columns, nulls, duplicates, dangling references,
    embeddings). Rows are read in key order: chunks by document, position and id, the rest by id.
    """
    where = f"schema {schema} of {db.where}"
    columns = schema_columns(db, schema)
    if not columns:
        raise LayoutError(
            f"{where}: no such schema, or it holds no table (docs/stores.md describes the layout)"
        )
    problems = layout_problems(columns)
    if problems:
        raise LayoutError(f"{where} does not hold the index layout (docs/stores.md): " + "; ".join(problems))
    frames = {
        name: _frame(db, schema, name, columns, order)
        for name, order in (
            ("documents", "doc_id"),
            ("chunks", "doc_id, position, chunk_id"),
            ("chunk_embeddings", "chunk_id"),
            ("entities", "entity_id"),
            ("entity_embeddings", "entity_id"),
            ("relations", "relation_id"),
            ("mentions", "entity_id, chunk_id"),
            ("relation_chunks", "relation_id, chunk_id"),
            ("communities", "level, community_id"),
            ("community_members", "community_id, entity_id"),
        )
    }
    problems = _value_problems(frames, columns)
    chunk_vectors, bad = _embeddings(
        frames["chunk_embeddings"], "chunk_id", list(frames["chunks"]["chunk_id"]), "chunk_embeddings"
    )
    entity_vectors, worse = _embeddings(
        frames["entity_embeddings"], "entity_id", list(frames["entities"]["entity_id"]), "entity_embeddings"
    )
    problems += bad + worse
    if problems:
        raise LayoutError(f"{where}: " + "; ".join(problems))
    manifest = {
        "database": {"url": db.where, "schema": schema},
        "rows": {t: len(f) for t, f in frames.items()},
    }
    return GraphIndex(
        **_index_tables(frames),
        chunk_embeddings=chunk_vectors,
        entity_embeddings=entity_vectors,
        manifest=manifest,
    )


def _grouped(frame: pd.DataFrame, key: str, value: str, order: Sequence[str]) -> dict[str, list[str]]:
    """Key -> its values, ordered as in `order`."""
    rank = {v: i for i, v in enumerate(order)}
    groups: dict[str, list[str]] = {}
    for k, v in zip(frame[key], frame[value], strict=True):
        groups.setdefault(k, []).append(v)
    return {k: sorted(vs, key=lambda v: rank.get(v, len(rank))) for k, vs in groups.items()}


def _index_tables(frames: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The GraphIndex tables of a validated schema's rows (defaults for the optional columns)."""
    d, c, e, r = frames["documents"], frames["chunks"], frames["entities"], frames["relations"]
    chunk_order = list(c["chunk_id"])
    mentions = _grouped(frames["mentions"], "entity_id", "chunk_id", chunk_order)
    relation_chunks = _grouped(frames["relation_chunks"], "relation_id", "chunk_id", chunk_order)
    neighbours: dict[str, set[str]] = {}
    for s, t in zip(r["source_id"], r["target_id"], strict=True):
        if s != t:
            neighbours.setdefault(s, set()).add(t)
            neighbours.setdefault(t, set()).add(s)
    entities = pd.DataFrame(
        {
            "entity_id": e["entity_id"],
            "name": e["name"],
            "type": e["type"].fillna(""),
            "description": e["description"].fillna(""),
            "chunk_ids": [mentions.get(x, []) for x in e["entity_id"]],
            "degree": [
                len(neighbours.get(x, ())) if pd.isna(n) else int(n)
                for x, n in zip(e["entity_id"], e["degree"], strict=True)
            ],
            "origin": e["origin"].fillna("import"),
        }
    )
    relations = pd.DataFrame(
        {
            "relation_id": r["relation_id"],
            "source_id": r["source_id"],
            "target_id": r["target_id"],
            "description": r["description"].fillna(""),
            "weight": pd.to_numeric(r["weight"].fillna(1.0), downcast=None).astype(float),
            "chunk_ids": [relation_chunks.get(x, []) for x in r["relation_id"]],
            "valid_from": pd.array(r["valid_from"].tolist(), dtype="Int64"),
            "valid_to": pd.array(r["valid_to"].tolist(), dtype="Int64"),
        }
    )
    members = _grouped(frames["community_members"], "community_id", "entity_id", list(e["entity_id"]))
    chunks_of = dict(zip(entities["entity_id"], entities["chunk_ids"], strict=True))
    communities_of: dict[str, set[str]] = {}
    for cid, ids in members.items():
        for x in ids:
            communities_of.setdefault(x, set()).add(cid)
    inside: dict[str, list[str]] = {}  # a community's relations: those between two of its members
    for rid, s, t in zip(r["relation_id"], r["source_id"], r["target_id"], strict=True):
        for cid in communities_of.get(s, set()) & communities_of.get(t, set()):
            inside.setdefault(cid, []).append(rid)
    communities = pd.DataFrame(
        [
            (
                cid,
                int(level),
                parent,
                members.get(cid, []),
                inside.get(cid, []),
                ordered_union(chunks_of[x] for x in members.get(cid, [])),
                len(members.get(cid, [])),
            )
            for cid, level, parent in zip(
                frames["communities"]["community_id"],
                frames["communities"]["level"],
                frames["communities"]["parent_id"],
                strict=True,
            )
        ],
        columns=["community_id", "level", "parent_id", "entity_ids", "relation_ids", "chunk_ids", "size"],
    )
    documents = pd.DataFrame(
        {
            "doc_id": d["doc_id"],
            "title": d["title"].fillna(""),
            "text": d["text"],
            "source": d["source"].fillna(""),
            "date": d["date"],
            "metadata": [{} if pd.isna(m) else json.loads(m) for m in d["metadata"]],
        }
    )
    chunks = pd.DataFrame(
        {
            "chunk_id": c["chunk_id"],
            "doc_id": c["doc_id"],
            "position": c["position"].astype(int),
            "text": c["text"],
            "n_tokens": [
                count_tokens(t) if pd.isna(n) else int(n)
                for t, n in zip(c["text"], c["n_tokens"], strict=True)
            ],
        }
    )
    return {
        "documents": documents,
        "chunks": chunks,
        "entities": entities,
        "relations": relations,
        "communities": communities,
    }
