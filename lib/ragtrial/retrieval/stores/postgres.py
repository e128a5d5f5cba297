"""The index in PostgreSQL, searched by SQL: the in-database twins of the kit's vector, bm25, ts_rank,
hybrid, graph_walk and graph_hybrid retrievers (the Postgres graph-walk experiment's store, seed 001).

`PostgresIndexStore.open` finds the schema `ragtrial_<content hash>` that holds an index, or writes it
in one transaction (nothing is left of a write that fails): the index's tables in the documented
layout (`ragtrial.index.database`), or, for your own data (an index read from `store.schema_name`),
none of them, and beside them the kit's search tables, derived with the in-memory retrievers' own
code so that each twin ranks what the in-memory retriever ranks:

- `chunk_search`: per chunk its table position (`ordinal`, what ties are broken by, lowest first, as
  in memory), its token count and a `tsvector` of its `bm25_tokens` (positions 1..tf, at most 256 per
  lexeme, Postgres' own limit), so that `ts_rank` is Postgres' real function over the terms the
  in-memory scorers see (Postgres' english configuration would also stem);
- `chunk_terms` / `term_idf`: term frequencies and idf, for BM25 computed in SQL (no extension is
  needed);
- `entity_search` / `entity_edges`: each entity's table position and distinct-neighbour count, and the
  undirected adjacency of the in-memory entity graph (self-loops and zero-weight pairs dropped as
  there), which the walk and the hub cap use.

Vector search is pgvector's inner product where the extension is installed (or can be created), else
the exact dot product of `double precision[]` in SQL, which is the cosine of the L2-normalized vectors
(slower: every chunk is scored on each query); which one is in `store.vector_search`, logged when the
store opens and noted on every retrieval. Question entities are linked by the kit's own linker (the
in-memory graph retrievers' code, so the seeds are the same); the walk, its hub cap, the passage
scores, the keyword scores and the reciprocal rank fusion of hybrid run in SQL; graph_hybrid fuses the
walk's and hybrid's SQL results with the kit's fusion.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragtrial.config.retrieval import RetrievalSettings
from ragtrial.config.store import StoreSettings
from ragtrial.index.database import (
    LAYOUT,
    Database,
    StoreError,
    copy_rows,
    create_table,
    database,
    embedding_value,
    schema_columns,
    vector_rows,
    write_layout,
)
from ragtrial.index.tables import GraphIndex
from ragtrial.retrieval.base import ChunkTable, Retrieval, RetrieverParts
from ragtrial.retrieval.entity_graph import EntityGraph, Link
from ragtrial.retrieval.graph_walk import GraphHybridRetriever, GraphWalkRetriever
from ragtrial.retrieval.passages import TS_MAX_POSITIONS, bm25_idf, bm25_tokens, embed_question

STORE_FORMAT = "ragtrial-postgres-store/1"
SCHEMA_PREFIX = "ragtrial_"
EXACT = "exact dot product of double precision[] in SQL"
# Postgres refuses a lexeme of 2 KB or more ("word is too long"); such a token is left out of the
# tsvector (and the tsquery), the one difference from the in-memory ts_rank.
TS_MAX_LEXEME_BYTES = 2046

log = logging.getLogger(__name__)


def _sql(text: str, **tables: Any) -> Any:
    from psycopg import sql

    return sql.SQL(text).format(**tables)


def _id(*names: str) -> Any:
    from psycopg import sql

    return sql.Identifier(*names)


# ---------------------------------------------------------------- what the store derives


def lexeme_counts(text: str) -> Counter[str]:
    """The chunk's terms as the in-memory keyword scorers count them (`bm25_tokens`)."""
    return Counter(bm25_tokens(text))


def tsvector_text(counts: Counter[str]) -> str:
    """A tsvector literal of `counts`: each lexeme quoted with positions 1..tf (at most 256, Postgres'
    limit per lexeme), so that ts_rank sees each term's frequency as the in-memory ts_rank does.
    """
    return " ".join(
        f"'{term}':{','.join(map(str, range(1, min(tf, TS_MAX_POSITIONS) + 1)))}"
        for term, tf in counts.items()
        if len(term.encode()) <= TS_MAX_LEXEME_BYTES
    )


def tsquery_text(tokens: Sequence[str]) -> str:
    """The question's distinct terms joined by OR (the in-memory ts_rank's query), each lexeme quoted."""
    return " | ".join(f"'{t}'" for t in dict.fromkeys(tokens) if len(t.encode()) <= TS_MAX_LEXEME_BYTES)


def search_rows(index: GraphIndex) -> dict[str, list[tuple]]:
    """The rows of the kit's search tables for `index`, from the in-memory retrievers' own structures."""
    chunks = ChunkTable(index)
    counts = [lexeme_counts(t) for t in chunks.texts]
    df = Counter(term for c in counts for term in c)
    terms = sorted(df)
    idf = bm25_idf(np.array([df[t] for t in terms], dtype=np.int64), len(counts))
    graph = EntityGraph(index, chunks)
    adjacency = graph.adjacency.tocoo()
    return {
        "chunk_search": [
            (cid, row, sum(c.values()), tsvector_text(c))
            for row, (cid, c) in enumerate(zip(chunks.ids, counts, strict=True))
        ],
        "chunk_terms": [
            (term, cid, tf) for cid, c in zip(chunks.ids, counts, strict=True) for term, tf in c.items()
        ],
        "term_idf": list(zip(terms, idf.tolist(), strict=True)),
        "entity_search": [
            (eid, row, int(d)) for row, (eid, d) in enumerate(zip(graph.ids, graph.degree, strict=True))
        ],
        "entity_edges": [
            (graph.ids[s], graph.ids[t]) for s, t in zip(adjacency.row, adjacency.col, strict=True)
        ],
    }


SEARCH_TABLES = {
    "store_info": ("key text PRIMARY KEY, value text NOT NULL", ("key", "value")),
    "chunk_search": (
        "chunk_id text PRIMARY KEY, ordinal integer NOT NULL UNIQUE, length integer NOT NULL, "
        "tsv tsvector NOT NULL",
        ("chunk_id", "ordinal", "length", "tsv"),
    ),
    "chunk_terms": (
        "term text NOT NULL, chunk_id text NOT NULL, tf integer NOT NULL, PRIMARY KEY (term, chunk_id)",
        ("term", "chunk_id", "tf"),
    ),
    "term_idf": ("term text PRIMARY KEY, idf double precision NOT NULL", ("term", "idf")),
    "entity_search": (
        "entity_id text PRIMARY KEY, ordinal integer NOT NULL UNIQUE, degree integer NOT NULL",
        ("entity_id", "ordinal", "degree"),
    ),
    "entity_edges": (
        "source_id text NOT NULL, target_id text NOT NULL, PRIMARY KEY (source_id, target_id)",
        ("source_id", "target_id"),
    ),
}


# ---------------------------------------------------------------- the store


def pgvector_problem(conn: Any) -> str:
    """Why pgvector's `vector` type cannot be used in this database ("" when it can; it is created
    here when the server has it and the user may).
    """
    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
        return ""
    if not conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone():
        return "pgvector is not installed on this server"
    import psycopg

    try:
        with conn.transaction():  # a savepoint: a refused CREATE EXTENSION leaves the write going
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.Error as err:
        return f"pgvector could not be enabled ({' '.join(str(err).split())})"
    return ""


# The searches, with the store's tables as {placeholders}; every list is ordered by score, then by
# the chunk's table position (the in-memory retrievers break ties by the lower row).
VECTOR_EXACT = """
SELECT s.ordinal,
       (SELECT sum(a * b) FROM unnest(e.embedding::float8[], %(vector)s::float8[]) AS t(a, b)) AS score
FROM {chunk_embeddings} e JOIN {chunk_search} s USING (chunk_id)
ORDER BY score DESC, s.ordinal LIMIT %(depth)s"""
VECTOR_PGVECTOR = """
SELECT s.ordinal, -(e.embedding <#> %(vector)s::vector) AS score
FROM {chunk_embeddings} e JOIN {chunk_search} s USING (chunk_id)
ORDER BY e.embedding <#> %(vector)s::vector, s.ordinal LIMIT %(depth)s"""
TS_RANK = """
SELECT s.ordinal, ts_rank(s.tsv, %(tsquery)s::tsquery)::float8 AS score
FROM {chunk_search} s WHERE s.tsv @@ %(tsquery)s::tsquery
ORDER BY score DESC, s.ordinal LIMIT %(depth)s"""
# BM25 Okapi as the in-memory BM25, operation for operation: the stored idf (numpy's log1p, as in
# memory), k1 saturation, b length normalization, a term the question repeats counting again, and each
# chunk's sum taken term by term in code-point order (the in-memory vocabulary's column order).
BM25 = """
WITH q AS (SELECT term, count(*)::float8 AS n FROM unnest(%(terms)s::text[]) AS term GROUP BY term),
stats AS (SELECT coalesce(nullif(avg(length), 0), 1)::float8 AS avgdl FROM {chunk_search})
SELECT s.ordinal,
       sum(i.idf * t.tf * (%(k1)s + 1) / (t.tf + %(k1)s * (1 - %(b)s + %(b)s * s.length / stats.avgdl)) * q.n
           ORDER BY t.term COLLATE "C") AS score
FROM q JOIN {chunk_terms} t USING (term) JOIN {term_idf} i USING (term) JOIN {chunk_search} s USING (chunk_id)
     CROSS JOIN stats
GROUP BY s.ordinal ORDER BY score DESC, s.ordinal LIMIT %(depth)s"""
NO_KEYWORD = "SELECT NULL::integer AS ordinal, NULL::float8 AS score WHERE false"
# Reciprocal rank fusion; a tie keeps the order of first appearance, list by list, as the kit's fusion.
HYBRID = """
WITH vector_list AS ({vector}), keyword_list AS ({keyword}),
ranked AS (SELECT ordinal, 1 AS list, row_number() OVER (ORDER BY score DESC, ordinal) AS rank
           FROM vector_list
           UNION ALL
           SELECT ordinal, 2, row_number() OVER (ORDER BY score DESC, ordinal) FROM keyword_list)
SELECT ordinal, sum(1.0::float8 / (%(rrf_k)s + rank)) AS score FROM ranked GROUP BY ordinal
ORDER BY score DESC, min(ARRAY[list, rank]) LIMIT %(k)s"""
# Breadth-first by a recursive query; an entity above the hub cap is reached but not walked through.
# A chunk's score is summed entity by entity in table order, as the in-memory sparse product adds them.
WALK = """
WITH RECURSIVE walk(entity_id, hops) AS (
    SELECT DISTINCT unnest(%(seeds)s::text[]), 0
    UNION
    SELECT e.target_id, w.hops + 1
    FROM walk w JOIN {entity_search} d ON d.entity_id = w.entity_id
                JOIN {entity_edges} e ON e.source_id = w.entity_id
    WHERE w.hops < %(hops)s AND (%(cap)s::integer IS NULL OR d.degree <= %(cap)s)),
reached AS (SELECT entity_id, min(hops) AS hops FROM walk GROUP BY entity_id),
walked AS (SELECT count(*) AS reached, coalesce(max(r.hops), 0) AS max_hops,
                  count(*) FILTER (WHERE r.hops < %(hops)s AND d.degree > %(cap)s) AS hubs
           FROM reached r JOIN {entity_search} d USING (entity_id)),
scored AS (SELECT s.ordinal, sum(1.0::float8 / (1 + r.hops) ORDER BY d.ordinal) AS score
           FROM reached r JOIN {entity_search} d USING (entity_id) JOIN {mentions} m USING (entity_id)
                JOIN {chunk_search} s USING (chunk_id)
           GROUP BY s.ordinal ORDER BY score DESC, s.ordinal LIMIT %(k)s)
SELECT w.reached, w.max_hops, w.hubs, s.ordinal, s.score FROM walked w LEFT JOIN scored s ON true
ORDER BY s.score DESC, s.ordinal"""


class PostgresIndexStore:
    """One index in a PostgreSQL database: the schema of its search tables (`schema`), the schema of
    its layout tables (`base`: the same for an index the kit wrote, yours for your own data), and the
    SQL of each search.
    """

    _open: dict[tuple[str, str, str], PostgresIndexStore] = {}
    _lock = threading.Lock()

    def __init__(self, db: Database, schema: str, info: dict[str, str]):
        self.db, self.schema, self.info = db, schema, info
        self.base = info["base_schema"]
        self.vector_search = info["vector_search"]
        self.pgvector = info["vector_search"] == "pgvector"
        self.tables = {
            **{t: _id(schema, t) for t in SEARCH_TABLES},
            "chunk_embeddings": _id(info["chunk_embeddings_schema"], "chunk_embeddings"),
            **{t: _id(self.base, t) for t in ("chunks", "mentions")},
        }
        self.notes = {"store": f"postgresql {db.where} schema {schema}; vector search: {self.vector_search}"}

    @classmethod
    def open(cls, settings: StoreSettings, index: GraphIndex) -> PostgresIndexStore:
        """The store of `index` in the database `settings.url` names, written first if no schema holds
        it (one transaction, under an advisory lock, so that two processes write it once). An index
        read from your own database (its manifest names the schema) gets only the search tables.
        """
        if not settings.url:
            raise StoreError("a PostgreSQL store needs store.url (postgresql://user@host:port/database)")
        db = database(settings.url, settings.password_env)
        fingerprint = index.content_hash()
        key = (settings.url, settings.password_env, fingerprint)
        with cls._lock:
            if key not in cls._open:
                schema = SCHEMA_PREFIX + fingerprint[:16]
                info = _read_info(db, schema) or _write(db, schema, index, fingerprint)
                if info.get("fingerprint") != fingerprint:
                    raise StoreError(
                        f"database {db.where}: schema {schema} holds another index "
                        f"({info.get('fingerprint')}); drop it (DROP SCHEMA {schema} CASCADE) to let the kit "
                        "write this one"
                    )
                store = cls(db, schema, info)
                if not store.pgvector:
                    log.warning(
                        "PostgreSQL store %s in %s: vector search by %s",
                        schema,
                        db.where,
                        store.vector_search,
                    )
                cls._open[key] = store
            return cls._open[key]

    def _query(self, template: str, **parts: Any) -> Any:
        return _sql(template, **self.tables, **parts)

    def _params(
        self, depth: int, vector: np.ndarray | None, tokens: Sequence[str], settings: RetrievalSettings
    ) -> dict:
        shown = None if vector is None else vector.astype(np.float64).tolist()
        return {
            "depth": depth,
            "vector": None
            if shown is None
            else embedding_value(shown, "vector" if self.pgvector else "array"),
            "terms": list(tokens),
            "tsquery": tsquery_text(tokens),
            "k1": settings.bm25_k1,
            "b": settings.bm25_b,
        }

    def _vector_sql(self) -> Any:
        return self._query(VECTOR_PGVECTOR if self.pgvector else VECTOR_EXACT)

    def _keyword_sql(self, scorer: str) -> Any:
        return self._query(TS_RANK if scorer == "ts_rank" else BM25)

    def vector(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """(chunk ordinal, score) of the k chunks whose embeddings are nearest `vector`, best first."""
        return self.db.rows(self._vector_sql(), self._params(k, vector, (), RetrievalSettings()))

    def keyword(
        self, scorer: str, tokens: Sequence[str], k: int, settings: RetrievalSettings
    ) -> list[tuple[int, float]]:
        """(chunk ordinal, score) of the k best chunks by `scorer` (bm25, ts_rank) sharing a term with
        `tokens`.
        """
        if not tsquery_text(tokens):
            return []
        return self.db.rows(self._keyword_sql(scorer), self._params(k, None, tokens, settings))

    def hybrid(
        self, vector: np.ndarray, tokens: Sequence[str], k: int, settings: RetrievalSettings
    ) -> list[tuple[int, float]]:
        """Reciprocal rank fusion in SQL of the vector and the keyword (`settings.keyword`) lists, each
        its top max(k, rrf_depth), as the in-memory hybrid fuses them.
        """
        keyword = self._keyword_sql(settings.keyword) if tsquery_text(tokens) else _sql(NO_KEYWORD)
        query = _sql(HYBRID, vector=self._vector_sql(), keyword=keyword)
        params = self._params(max(k, settings.rrf_depth), vector, tokens, settings)
        return self.db.rows(query, params | {"rrf_k": settings.rrf_k, "k": k})

    def walk(
        self, seeds: Sequence[str], hops: int, hub_degree_cap: int | None, k: int
    ) -> tuple[list[tuple[int, float]], dict[str, int]]:
        """The graph walk in SQL: breadth-first from `seeds` over the entity edges for `hops` hops,
        never onward from an entity with more than `hub_degree_cap` neighbours (seeds included); each
        chunk scored by the reached entities it mentions, each weighted 1 / (1 + hops from the nearest
        seed). The k best (ordinal, score) and the walk's notes (reached, max_hops, hubs_not_walked).
        """
        rows = self.db.rows(
            self._query(WALK), {"seeds": list(seeds), "hops": hops, "cap": hub_degree_cap, "k": k}
        )
        reached, max_hops, hubs = rows[0][:3]
        notes = {"reached": int(reached), "max_hops": int(max_hops), "hubs_not_walked": int(hubs or 0)}
        return [(o, s) for *_, o, s in rows if o is not None], notes


def _read_info(db: Database, schema: str) -> dict[str, str]:
    """The store_info of `schema`, {} when the schema holds no store."""
    if "store_info" not in schema_columns(db, schema):
        return {}
    return dict(db.rows(_sql("SELECT key, value FROM {t}", t=_id(schema, "store_info"))))


def _write(db: Database, schema: str, index: GraphIndex, fingerprint: str) -> dict[str, str]:
    """The store of `index` as `schema`, written in one transaction (unless another process wrote it
    meanwhile); its store_info.
    """
    own = index.manifest.get("database", {}).get("schema")
    with db.transaction() as conn:
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (schema,))
        if not schema_columns(db, schema):
            _write_store(conn, db, schema, index, fingerprint, own)
    return _read_info(db, schema)


def _write_store(
    conn: Any, db: Database, schema: str, index: GraphIndex, fingerprint: str, own: str | None
) -> None:
    problem = pgvector_problem(conn)
    width = 0 if index.chunk_embeddings is None else index.chunk_embeddings.shape[1]
    embedding_type = f"vector({width})" if not problem and width else "double precision[]"
    ours = "pgvector" if embedding_type.startswith("vector") else f"{EXACT} ({problem})"
    info = {"format": STORE_FORMAT, "fingerprint": fingerprint, "base_schema": own or schema}
    if own is None:
        write_layout(conn, schema, index, embedding_type)
        info |= {"chunk_embeddings_schema": schema, "vector_search": ours}
    else:
        conn.execute(_sql("CREATE SCHEMA {s}", s=_id(schema)))
        udt = schema_columns(db, own).get("chunk_embeddings", {}).get("embedding")
        if udt:
            info |= {
                "chunk_embeddings_schema": own,
                "vector_search": "pgvector" if udt == "vector" else f"{EXACT} (your column is {udt})",
            }
        else:  # the kit embedded your chunks: their vectors sit beside its search tables (no reference
            # into your schema)
            create_table(conn, schema, "chunk_embeddings", embedding_type, references=False)
            copy_rows(
                conn,
                schema,
                "chunk_embeddings",
                ("chunk_id", "embedding"),
                vector_rows(index, "chunk_embeddings", embedding_type),
            )
            info |= {"chunk_embeddings_schema": schema, "vector_search": ours}
    for table, (columns, _) in SEARCH_TABLES.items():
        conn.execute(_sql("CREATE TABLE {t} (" + columns + ")", t=_id(schema, table)))
    conn.execute(_sql("CREATE INDEX ON {t} USING gin (tsv)", t=_id(schema, "chunk_search")))
    for table, rows in search_rows(index).items():
        copy_rows(conn, schema, table, SEARCH_TABLES[table][1], rows)
    copy_rows(conn, schema, "store_info", ("key", "value"), list(info.items()))
    for table in (*SEARCH_TABLES, *(LAYOUT if own is None else ())):
        conn.execute(_sql("ANALYZE {t}", t=_id(schema, table)))


# ---------------------------------------------------------------- the retrievers


class PostgresVectorRetriever:
    """`vector` in the database: the question's embedding against every chunk's, top k."""

    name = "vector_postgresql"

    def __init__(self, index: GraphIndex, parts: RetrieverParts, settings: RetrievalSettings):
        if index.chunk_embeddings is None:
            raise ValueError(f"{self.name} needs chunk embeddings: embed the index first (index.embed_index)")
        self.store = PostgresIndexStore.open(parts.store, index)
        self.chunks = ChunkTable(index)
        self.embedder = parts.embedder

    def retrieve(self, question: str, k: int) -> Retrieval:
        rows = self.store.vector(embed_question(self.embedder, question, self.name), k)
        return Retrieval([self.chunks.item(o, s, self.name) for o, s in rows], notes=dict(self.store.notes))


class PostgresKeywordRetriever:
    """A keyword scorer in the database over the chunks' `bm25_tokens`; subclasses name it."""

    name = "keyword_postgresql"
    scorer = ""

    def __init__(self, index: GraphIndex, parts: RetrieverParts, settings: RetrievalSettings):
        self.store = PostgresIndexStore.open(parts.store, index)
        self.chunks = ChunkTable(index)
        self.settings = settings

    def retrieve(self, question: str, k: int) -> Retrieval:
        rows = self.store.keyword(self.scorer, bm25_tokens(question), k, self.settings)
        return Retrieval([self.chunks.item(o, s, self.name) for o, s in rows], notes=dict(self.store.notes))


class PostgresBM25Retriever(PostgresKeywordRetriever):
    """`bm25` in the database: BM25 Okapi computed in SQL from the store's term frequencies."""

    name = "bm25_postgresql"
    scorer = "bm25"


class PostgresTsRankRetriever(PostgresKeywordRetriever):
    """`ts_rank` in the database: Postgres' own ts_rank over a tsvector of the chunk's terms."""

    name = "ts_rank_postgresql"
    scorer = "ts_rank"


class PostgresHybridRetriever:
    """`hybrid` in the database: the vector and keyword lists and their rank fusion, in one query."""

    name = "hybrid_postgresql"

    def __init__(self, index: GraphIndex, parts: RetrieverParts, settings: RetrievalSettings):
        self.vector = PostgresVectorRetriever(index, parts, settings)
        self.store, self.chunks, self.settings = self.vector.store, self.vector.chunks, settings

    def retrieve(self, question: str, k: int) -> Retrieval:
        vector = embed_question(self.vector.embedder, question, self.name)
        rows = self.store.hybrid(vector, bm25_tokens(question), k, self.settings)
        return Retrieval([self.chunks.item(o, s, self.name) for o, s in rows], notes=dict(self.store.notes))


class PostgresGraphWalkRetriever(GraphWalkRetriever):
    """`graph_walk` in the database: the kit's entity linking, then the walk, the hub cap and the
    passage scores in SQL; a question without usable seeds falls back to `vector_postgresql`. Its
    edge table holds no validity, so it cannot filter by a time window: with `retrieval.time_filter`
    it refuses to be built rather than silently walk every relation.
    """

    name = "graph_walk_postgresql"

    def __init__(self, index: GraphIndex, parts: RetrieverParts, settings: RetrievalSettings):
        if settings.time_filter:
            raise ValueError(
                f"{self.name} cannot apply retrieval.time_filter (its edge table holds no validity): "
                "walk in memory or in the Cypher store (store.retrieval), or turn the filter off"
            )
        super().__init__(index, parts, settings)
        fallback = PostgresVectorRetriever(index, parts, settings)
        self.fallback, self.store = fallback, fallback.store

    def from_seeds(self, question: str, links: list[Link], notes: dict, k: int) -> Retrieval:
        s = self.settings
        seeds = [self.graph.ids[x.entity] for x in links]
        rows, walked = self.store.walk(seeds, s.hops, s.hub_degree_cap, k)
        notes.update(walked, **self.store.notes)
        if not rows:
            return self.fall_back(question, k, "seeds mention no chunk", notes)
        return Retrieval([self.chunks.item(o, sc, self.name) for o, sc in rows], notes=notes)


class PostgresGraphHybridRetriever(GraphHybridRetriever):
    """`graph_hybrid` in the database: the SQL walk's and the SQL hybrid's lists, fused by the kit's RRF."""

    name = "graph_hybrid_postgresql"
    walk_retriever = PostgresGraphWalkRetriever
    hybrid_retriever = PostgresHybridRetriever
