"""The entity graph in a Cypher graph database, queried by Cypher: Kùzu embedded (a folder per index)
or a FalkorDB server through its client (seed 004 pulls the retrieved subgraph from FalkorDB).

The graph: `(:Entity {id, name, type, origin, degree, ordinal})`, `(:Chunk {id, ordinal})`,
`(:Entity)-[:RELATES {id, relation, weight, valid_from, valid_to}]->(:Entity)` (one edge per index
relation, its description as `relation`: extracted relations are untyped, and one edge table keeps
the Cypher the same on a store with a fixed schema such as Kùzu) and
`(:Entity)-[:MENTIONED_IN]->(:Chunk)`. `degree` (distinct neighbours) and `ordinal` (table position)
are the in-memory entity graph's, so that the Cypher walk ranks as the in-memory one.

Every query is in `QUERIES`, in the Cypher that Kùzu, FalkorDB and Neo4j share (no variable-length
patterns with filters, no list comprehensions, no APOC), so the same text runs on each; what differs
between stores is how the graph is written and a query sent, which the adapters (`KuzuGraph`,
`FalkorDBGraph`) hold. A Neo4j adapter would need only those two methods.

Writing is all or nothing: Kùzu writes into a hidden folder renamed into place when complete;
FalkorDB writes a graph of its own name and deletes it if any statement fails.
"""

from __future__ import annotations

import functools
import shutil
import threading
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np
import pandas as pd
import pyarrow as pa

from ragtrial.config.paths import output_path
from ragtrial.config.retrieval import RetrievalSettings
from ragtrial.config.store import StoreSettings
from ragtrial.index.tables import GraphIndex
from ragtrial.redact import redact_url
from ragtrial.retrieval.base import ChunkTable, Retrieval, RetrieverParts, top_k
from ragtrial.retrieval.entity_graph import EntityGraph, Link
from ragtrial.retrieval.graph_walk import GraphHybridRetriever, GraphWalkRetriever
from ragtrial.retrieval.time_window import Window, question_window

GRAPH_PREFIX = "ragtrial_"
# Stands for "no bound" in the queries (a cap or a window side), so that one text serves every call.
UNBOUNDED = 2**62

# The queries, each returning named columns in a fixed order.
QUERIES = {
    # An entity neighbourhood: every relation of the `frontier` entities that may be walked through
    # (degree at most `cap`), with its validity and whether it overlaps the window [first, last].
    "neighbourhood": """
MATCH (a:Entity)-[r:RELATES]-(b:Entity)
WHERE a.id IN $frontier AND a.degree <= $cap
RETURN a.id AS source, r.id AS relation_id, r.relation AS relation, b.id AS target,
       r.valid_from AS valid_from, r.valid_to AS valid_to,
       (r.valid_from IS NULL OR r.valid_from <= $last) AND (r.valid_to IS NULL OR r.valid_to >= $first)
       AS in_window""",
    # The seed's query: edges among retrieved nodes only (both ends in the set, or recall is inflated).
    "edges_among": """
MATCH (n:Entity)-[r:RELATES]->(m:Entity)
WHERE n.id IN $ids AND m.id IN $ids
RETURN n.id AS source, r.id AS relation_id, r.relation AS relation, m.id AS target,
       r.valid_from AS valid_from, r.valid_to AS valid_to""",
    # The passages the entities appear in, by table position.
    "mentions": """
MATCH (e:Entity)-[:MENTIONED_IN]->(c:Chunk)
WHERE e.id IN $ids
RETURN e.ordinal AS entity, c.ordinal AS chunk""",
}
COLUMNS = {
    "neighbourhood": ["source", "relation_id", "relation", "target", "valid_from", "valid_to", "in_window"],
    "edges_among": ["source", "relation_id", "relation", "target", "valid_from", "valid_to"],
    "mentions": ["entity", "chunk"],
}


class GraphStoreError(RuntimeError):
    """A graph store that cannot be opened, written or queried, named by its folder or address."""


# ---------------------------------------------------------------- the graph's rows


def graph_rows(index: GraphIndex) -> dict[str, pa.Table]:
    """The graph's nodes and edges as Arrow tables (edge tables: their two ends first)."""
    chunks = ChunkTable(index)
    graph = EntityGraph(index, chunks)
    entities, relations = index.entities, index.relations

    def years(values: pd.Series) -> pa.Array:
        return pa.array([None if pd.isna(v) else int(v) for v in values], pa.int64())

    mentions = [
        (e, c) for e, ids in zip(graph.ids, entities["chunk_ids"], strict=True) for c in dict.fromkeys(ids)
    ]
    return {
        "Entity": pa.table(
            {
                "id": pa.array(graph.ids, pa.string()),
                "name": pa.array(graph.names, pa.string()),
                "type": pa.array(list(entities["type"]), pa.string()),
                "origin": pa.array(graph.origins, pa.string()),
                "degree": pa.array(graph.degree.tolist(), pa.int64()),
                "ordinal": pa.array(range(len(graph.ids)), pa.int64()),
            }
        ),
        "Chunk": pa.table(
            {"id": pa.array(chunks.ids, pa.string()), "ordinal": pa.array(range(len(chunks.ids)), pa.int64())}
        ),
        "RELATES": pa.table(
            {
                "from": pa.array(list(relations["source_id"]), pa.string()),
                "to": pa.array(list(relations["target_id"]), pa.string()),
                "id": pa.array(list(relations["relation_id"]), pa.string()),
                "relation": pa.array(list(relations["description"]), pa.string()),
                "weight": pa.array(relations["weight"].astype(float).tolist(), pa.float64()),
                "valid_from": years(relations["valid_from"]),
                "valid_to": years(relations["valid_to"]),
            }
        ),
        "MENTIONED_IN": pa.table(
            {
                "from": pa.array([e for e, _ in mentions], pa.string()),
                "to": pa.array([c for _, c in mentions], pa.string()),
            }
        ),
    }


# ---------------------------------------------------------------- the stores


class CypherGraph(Protocol):
    """What the kit needs of a Cypher store: rows of a query, in the order of its RETURN."""

    where: str

    def rows(self, query: str, params: dict[str, Any]) -> list[list[Any]]: ...


KUZU_SCHEMA = [
    "CREATE NODE TABLE Entity(id STRING PRIMARY KEY, name STRING, type STRING, origin STRING, degree INT64, "
    "ordinal INT64)",
    "CREATE NODE TABLE Chunk(id STRING PRIMARY KEY, ordinal INT64)",
    "CREATE REL TABLE RELATES(FROM Entity TO Entity, id STRING, relation STRING, weight DOUBLE, "
    "valid_from INT64, valid_to INT64)",
    "CREATE REL TABLE MENTIONED_IN(FROM Entity TO Chunk)",
]
KUZU_FILE = "graph.kuzu"
# A small buffer pool and two threads: Kùzu would otherwise reserve most of the machine's memory.
KUZU_OPTIONS: dict[str, Any] = {"buffer_pool_size": 256 * 1024**2, "max_num_threads": 2}


class KuzuGraph:
    """Kùzu embedded: the graph in `<folder>/graph.kuzu`, opened read-only, a connection per thread."""

    def __init__(self, folder: Path):
        import kuzu

        self.where = str(folder)
        try:
            self.database = kuzu.Database(str(folder / KUZU_FILE), read_only=True, **KUZU_OPTIONS)
        except RuntimeError as err:
            raise GraphStoreError(f"Kùzu graph {folder}: {err}") from None
        self._local = threading.local()

    @staticmethod
    def write(folder: Path, tables: dict[str, pa.Table]) -> None:
        """The graph into `folder` (absent): written in a hidden sibling, renamed into place when complete."""
        import kuzu

        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = folder.parent / f".{folder.name}.tmp-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            database = kuzu.Database(str(tmp / KUZU_FILE), **KUZU_OPTIONS)
            conn = kuzu.Connection(database)
            for statement in KUZU_SCHEMA:
                conn.execute(statement)
            for name, table in tables.items():
                if table.num_rows:
                    _copy(conn, name, table)
            conn.close()
            database.close()
            try:
                tmp.rename(folder)
            except OSError:  # another process wrote the same graph meanwhile: keep its folder
                if not (folder / KUZU_FILE).exists():
                    raise
        except RuntimeError as err:
            raise GraphStoreError(f"Kùzu graph {folder}: writing failed, nothing kept: {err}") from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def rows(self, query: str, params: dict[str, Any]) -> list[list[Any]]:
        import kuzu

        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = kuzu.Connection(self.database)
        try:
            # one statement: one QueryResult, whose rows are lists (kuzu's default)
            return cast(list[list[Any]], cast("kuzu.QueryResult", conn.execute(query, params)).get_all())
        except RuntimeError as err:
            raise GraphStoreError(f"Kùzu graph {self.where}: {err}") from None


def _copy(conn: Any, table: str, rows: pa.Table) -> None:
    """COPY an Arrow table into a Kùzu table; Kùzu's COPY reads a Python variable of the caller's scope."""
    conn.execute(f"COPY {table} FROM rows")


class FalkorDBGraph:
    """A FalkorDB server (redis://[user:password@]host:port) through the falkordb client: the graph
    `name` of it.
    """

    BATCH = 5000

    def __init__(self, url: str, name: str):
        self.where = f"{redact_url(url)} graph {name}"
        try:
            from falkordb import FalkorDB
        except ImportError:
            raise GraphStoreError(
                f"FalkorDB {self.where}: the falkordb client is needed (pip install 'ragtrial[stores]')"
            ) from None
        self.name = name
        self.client = self._guarded(lambda: FalkorDB.from_url(url))
        self.graph = self.client.select_graph(name)

    def exists(self) -> bool:
        return self.name in self._guarded(self.client.list_graphs)

    def _guarded(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except Exception as err:  # redis and falkordb errors share no base class worth naming here
            raise GraphStoreError(f"FalkorDB {self.where}: {redact_url(str(err))}") from None

    def write(self, tables: dict[str, pa.Table]) -> None:
        """The graph by batches of UNWIND; deleted again if any statement fails (FalkorDB has no
        multi-statement transaction).
        """
        statements = {
            "Entity": "UNWIND $rows AS row CREATE (:Entity {id: row.id, name: row.name, type: row.type, "
            "origin: row.origin, degree: row.degree, ordinal: row.ordinal})",
            "Chunk": "UNWIND $rows AS row CREATE (:Chunk {id: row.id, ordinal: row.ordinal})",
            "RELATES": "UNWIND $rows AS row MATCH (a:Entity {id: row.from}), (b:Entity {id: row.to}) "
            "CREATE (a)-[:RELATES {id: row.id, relation: row.relation, weight: row.weight, "
            "valid_from: row.valid_from, valid_to: row.valid_to}]->(b)",
            "MENTIONED_IN": "UNWIND $rows AS row MATCH (a:Entity {id: row.from}), (c:Chunk {id: row.to}) "
            "CREATE (a)-[:MENTIONED_IN]->(c)",
        }
        try:
            self._guarded(lambda: self.graph.query("CREATE INDEX FOR (e:Entity) ON (e.id)"))
            self._guarded(lambda: self.graph.query("CREATE INDEX FOR (c:Chunk) ON (c.id)"))
            for name, table in tables.items():
                rows = table.to_pylist()
                for start in range(0, len(rows), self.BATCH):
                    batch = rows[start : start + self.BATCH]
                    self._guarded(functools.partial(self.graph.query, statements[name], {"rows": batch}))
        except BaseException:
            try:
                self.graph.delete()
            finally:
                raise

    def rows(self, query: str, params: dict[str, Any]) -> list[list[Any]]:
        return self._guarded(lambda: self.graph.ro_query(query, params).result_set)


# ---------------------------------------------------------------- one index's graph


def _window_bounds(window: Window | None) -> tuple[int, int]:
    first, last = window or (None, None)
    return (-UNBOUNDED if first is None else first), (UNBOUNDED if last is None else last)


class CypherGraphStore:
    """The entity graph of one index in a Cypher store (`store.graph`), written on first use, and the
    kit's queries of it.
    """

    _open: dict[tuple[str, str], CypherGraphStore] = {}
    _lock = threading.Lock()

    def __init__(self, graph: CypherGraph, backend: str):
        self.graph, self.backend = graph, backend

    @classmethod
    def open(cls, settings: StoreSettings, index: GraphIndex) -> CypherGraphStore:
        """The graph of `index` in the store `settings.graph` names (Kùzu: a folder under
        `store.graph_path` named by the index's content hash; FalkorDB: a graph of that name), written
        first when absent.
        """
        if settings.graph == "none":
            raise GraphStoreError("no Cypher graph store: set store.graph to kuzu or falkordb")
        name = GRAPH_PREFIX + index.content_hash()[:16]
        where = settings.graph_url if settings.graph == "falkordb" else str(output_path(settings.graph_path))
        assert where is not None  # StoreSettings require graph_url with falkordb
        key = (f"{settings.graph}:{where}", name)
        with cls._lock:
            if key not in cls._open:
                if settings.graph == "kuzu":
                    folder = Path(where) / name
                    if not (folder / KUZU_FILE).exists():
                        KuzuGraph.write(folder, graph_rows(index))
                    graph: CypherGraph = KuzuGraph(folder)
                else:
                    graph = FalkorDBGraph(settings.graph_url or "", name)
                    if not graph.exists():
                        graph.write(graph_rows(index))
                cls._open[key] = cls(graph, settings.graph)
            return cls._open[key]

    def query(self, name: str, **params: Any) -> pd.DataFrame:
        """The named query of `QUERIES` as a frame of its columns."""
        return pd.DataFrame(self.graph.rows(QUERIES[name], params), columns=COLUMNS[name])

    def neighbourhood(
        self, entity_ids: Sequence[str], window: Window | None = None, hub_degree_cap: int | None = None
    ) -> pd.DataFrame:
        """The relations of `entity_ids` (each once per end in the set), with their validity and
        `in_window` (whether it overlaps `window`; always true without one); entities with more than
        `hub_degree_cap` neighbours are left out.
        """
        first, last = _window_bounds(window)
        cap = UNBOUNDED if hub_degree_cap is None else hub_degree_cap
        frame = self.query("neighbourhood", frontier=list(entity_ids), cap=cap, first=first, last=last)
        return frame.sort_values(["source", "target", "relation_id"], kind="stable", ignore_index=True)

    def paths(
        self, seeds: Sequence[str], hops: int, hub_degree_cap: int | None = None, window: Window | None = None
    ) -> tuple[pd.DataFrame, set[str]]:
        """k-hop paths from `seeds`, breadth-first, one neighbourhood query per hop: each entity reached
        within `hops` with its hop count and the relation it was first reached by (`via`, `from`), never
        onward from an entity with more than `hub_degree_cap` neighbours (seeds included), over relations
        valid in `window` only; and the ids of the relations the window dropped on the way.
        """
        reached: dict[str, tuple[int, str, str]] = {s: (0, "", "") for s in dict.fromkeys(seeds)}
        frontier, dropped = list(reached), set()
        for hop in range(1, hops + 1):
            if not frontier:
                break
            found = self.neighbourhood(frontier, window, hub_degree_cap)
            dropped |= set(found.loc[~found["in_window"].astype(bool), "relation_id"])
            frontier = []
            for source, relation, target in found.loc[
                found["in_window"].astype(bool), ["source", "relation_id", "target"]
            ].itertuples(index=False):
                if target not in reached:
                    reached[target] = (hop, relation, source)
                    frontier.append(target)
        frame = pd.DataFrame(
            [(e, h, r, s) for e, (h, r, s) in reached.items()], columns=["entity_id", "hops", "via", "from"]
        )
        return frame, dropped

    def edges_among(self, entity_ids: Sequence[str]) -> pd.DataFrame:
        """The seed's query: the relations whose two ends are both among `entity_ids`, with their validity."""
        frame = self.query("edges_among", ids=list(dict.fromkeys(entity_ids)))
        return frame.sort_values(["source", "target", "relation_id"], kind="stable", ignore_index=True)

    def relations_among(self, entity_ids: set[str]) -> set[str]:
        """The ids of `edges_among`: what relationship recall's induced edges are (the diagnostics' hook)."""
        return set(self.edges_among(sorted(entity_ids))["relation_id"]) if entity_ids else set()

    def mentions(self, entity_ids: Sequence[str]) -> pd.DataFrame:
        """(entity ordinal, chunk ordinal) of every passage the entities appear in."""
        return self.query("mentions", ids=list(entity_ids))


def open_graph_store(settings: StoreSettings, index: GraphIndex) -> CypherGraphStore | None:
    """The Cypher store of `index` that `store.graph` names, None when it is "none"."""
    return None if settings.graph == "none" else CypherGraphStore.open(settings, index)


# ---------------------------------------------------------------- the retrievers


class CypherGraphWalkRetriever(GraphWalkRetriever):
    """`graph_walk` on the Cypher store: the kit's entity linking, then the walk and the hub cap by one
    Cypher neighbourhood query per hop and the reached entities' passages by Cypher; passages are
    scored 1 / (1 + hops) per entity, summed in entity table order as in memory. With
    `retrieval.time_filter` the walk follows only relations valid in the question's time window (the
    seed's filter during retrieval, as the in-memory graph_walk does), and the dropped relations
    are counted in the notes.
    """

    name = "graph_walk_cypher"

    def __init__(self, index: GraphIndex, parts: RetrieverParts, settings: RetrievalSettings):
        super().__init__(index, parts, settings)
        self.store = CypherGraphStore.open(parts.store, index)

    def from_seeds(self, question: str, links: list[Link], notes: dict, k: int) -> Retrieval:
        g, s = self.graph, self.settings
        window = question_window(question) if s.time_filter else None
        reached, dropped = self.store.paths(
            [g.ids[x.entity] for x in links], s.hops, s.hub_degree_cap, window
        )
        rows = reached["entity_id"].map(g.row_of).to_numpy()
        hops = reached["hops"].to_numpy()
        weights = np.zeros(len(g.ids))
        weights[rows] = 1.0 / (1.0 + hops)
        mentions = self.store.mentions(list(reached["entity_id"])).sort_values(
            ["entity", "chunk"], kind="stable"
        )
        scores = np.zeros(len(self.chunks.ids))
        for entity, chunk in mentions.itertuples(index=False):  # entity order: the in-memory product's sums
            scores[chunk] += weights[entity]
        notes.update(
            reached=len(reached),
            max_hops=int(hops.max()),
            hubs_not_walked=0
            if s.hub_degree_cap is None
            else int(((hops < s.hops) & (g.degree[rows] > s.hub_degree_cap)).sum()),
            store=f"{self.store.backend} {self.store.graph.where}",
        )
        if s.time_filter:
            notes.update(time_window=None if window is None else list(window), time_filtered=len(dropped))
        found = top_k(scores, k, positive_only=True)
        if not len(found):
            return self.fall_back(question, k, "seeds mention no chunk", notes)
        return Retrieval(self.chunks.ranked(found, scores, self.name), notes=notes)


class CypherGraphHybridRetriever(GraphHybridRetriever):
    """`graph_hybrid` with the walk on the Cypher store, fused with the in-memory hybrid by the kit's RRF."""

    name = "graph_hybrid_cypher"
    walk_retriever = CypherGraphWalkRetriever
