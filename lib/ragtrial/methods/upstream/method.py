"""An upstream system's search mode as a method: its answer and the context it retrieved, in the
kit's answers table beside the kit's own methods.

`UpstreamSession` holds what a run's upstream methods share: one model proxy (every call the
systems make goes through the kit's LLM layer: cached, in the ledger under the method's name), one
worker per system, and each system's index, made once per (system, version, kit index, settings)
under `<index.store_path>/upstream/` and reused by every later run. `UpstreamMethod.fill` asks its
worker one question inside `proxy.bound(name)`, so the answer's tally holds exactly the calls the
system made for it. The context comes back in the system's ids and is mapped onto the kit's index
(ids kept when the index has them, else names or text), so overlap with the kit's reimplementation
is measured in one id space; what could not be mapped is counted in the answer's notes.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from ragtrial.config.data import data_path
from ragtrial.config.paths import output_path
from ragtrial.index.merge_extractions import normalize_name
from ragtrial.index.tables import GraphIndex, config_hash
from ragtrial.llm.proxy import ModelProxy
from ragtrial.llm.tokens import count_tokens
from ragtrial.locks import FolderLock
from ragtrial.methods.base import Draft, Generator, Method, MethodUnavailable, SystemFailure
from ragtrial.methods.upstream.boundary import UpstreamError, Worker
from ragtrial.methods.upstream.environments import SYSTEMS_RECORD, SystemNotInstalled
from ragtrial.records import Question
from ragtrial.retrieval.base import ContextItem
from ragtrial.retrieval.entity_graph import select_graph

if TYPE_CHECKING:
    from ragtrial.llm.context import ModelContext

MANIFEST = "manifest.json"  # written last: a folder without it is an unfinished build


@dataclass(frozen=True)
class UpstreamMode:
    """What a registered upstream method is: a system, its search mode, and the kit method that
    reimplements it (its twin in notebook 11's side-by-side).
    """

    system: str
    mode: str
    twin: str


class UpstreamSession:
    """The proxy, the workers and the indexes of a run's upstream methods (built on first use)."""

    def __init__(self, ctx: ModelContext, index: GraphIndex, documents: pd.DataFrame | None = None):
        self.ctx, self.index = ctx, index
        self.documents = index.documents if documents is None else documents
        self.proxy: ModelProxy | None = None
        self.workers: dict[str, Worker] = {}
        self.versions: dict[str, dict[str, Any]] = {}
        self.builds: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        # a session nobody closed still stops its workers when it is collected (or at exit)
        weakref.finalize(self, _stop_workers, self.workers)

    # ------------------------------------------------------------ shared parts

    def model_proxy(self) -> ModelProxy:
        with self._lock:
            if self.proxy is None:
                self.proxy = ModelProxy(self.ctx.llm, self.ctx.embedder)
                self.proxy.start()
            return self.proxy

    def worker(self, system: str) -> Worker:
        with self._lock:
            if system not in self.workers:
                s = self.ctx.settings.systems
                worker = Worker(
                    system,
                    self.store() / "work",
                    Path(self.ctx.run_dir) / "systems" / f"{system}.log",
                    s.timeout_s,
                    install_missing=s.install == "lazy",
                )
                try:
                    hello = worker.request("hello")
                except (UpstreamError, SystemNotInstalled) as err:
                    raise MethodUnavailable(f"{system}: {err}") from err
                self.workers[system] = worker
                self.versions[system] = hello
                self._write_record()
            return self.workers[system]

    def store(self) -> Path:
        # absolute: a worker runs in a folder of its own, where a relative path means another place
        return (output_path(self.ctx.settings.index.store_path) / "upstream").resolve()

    def _write_record(self) -> None:
        record = {
            name: {**hello, "index": self.builds.get(name, {})} for name, hello in self.versions.items()
        }
        path = Path(self.ctx.run_dir) / SYSTEMS_RECORD
        path.write_text(json.dumps(record, indent=2, sort_keys=True, default=str))

    # ------------------------------------------------------------ a system's index

    def build_request(self, system: str) -> dict[str, Any]:
        """What the system's `index` op is given: a pre-built output folder, the kit's graph or
        the run's documents, and the system's settings.
        """
        settings = self.ctx.settings
        section = getattr(settings.systems, system)
        options = section.index_options()
        # they size their vector stores before embedding; GraphRAG calls the model concurrently
        if system in ("lightrag", "fast_graphrag"):
            options["embedding_dim"] = self.embedding_dimension()
        else:
            options |= {"vector_size": self.embedding_dimension(), "concurrency": settings.llm.in_flight}
        request: dict[str, Any] = {"documents": None, "graph": None, "output": None, "options": options}
        if system == "graphrag":
            output = section.output or (
                settings.index.import_path if settings.index.graph_source == "import" else None
            )
            if output:
                request["output"] = str(graphrag_output_folder(data_path(output)))
        if system == "lightrag" and section.graph == "kit":
            request["graph"] = kit_graph(select_graph(self.index, settings.retrieval))
        elif request["output"] is None:
            request["documents"] = [
                {"id": r.doc_id, "title": r.title, "text": r.text} for r in self.documents.itertuples()
            ]
        return request

    def embedding_dimension(self) -> int:
        """The kit embedder's dimension: the index's vectors', else one (cached) probe."""
        for vectors in (self.index.chunk_embeddings, self.index.entity_embeddings):
            if vectors is not None and len(vectors):
                return int(vectors.shape[1])
        return int(self.ctx.embedder.embed(["dimension"], stage="embedding_dimension").shape[1])

    def prepared(self, system: str) -> Path:
        """The folder of system `system`'s index, built now if no earlier run built it."""
        with self._lock:
            if system in self.builds:
                return Path(self.builds[system]["folder"])
        worker = self.worker(system)
        request = self.build_request(system)
        s = self.ctx.settings
        identity = {
            "system": system,
            "version": self.versions[system].get("version"),
            "model": s.llm.model,
            "embedding_model": s.embeddings.model,
            "request": config_hash(request),
        }
        folder = self.store() / f"{system}-{config_hash(identity)}"
        folder.parent.mkdir(parents=True, exist_ok=True)
        with FolderLock(folder.parent / f"{folder.name}.lock", wait=True):
            if not (folder / MANIFEST).is_file():
                self._build(worker, system, folder, identity, request)
        manifest = json.loads((folder / MANIFEST).read_text())
        with self._lock:
            self.builds[system] = {"folder": str(folder), **manifest}
            self._write_record()
        return folder

    def _build(
        self, worker: Worker, system: str, folder: Path, identity: dict[str, Any], request: dict[str, Any]
    ) -> None:
        if folder.exists():  # an interrupted build: its calls replay from the cache
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        proxy = self.model_proxy()
        started = time.perf_counter()
        with self.ctx.ledger.tally() as tally, proxy.bound(system):
            try:
                result = worker.request(
                    "index",
                    base_url=proxy.base_url(system, "upstream_index"),
                    model=self.ctx.settings.llm.model,
                    embedding_model=self.ctx.settings.embeddings.model,
                    workdir=str(folder),
                    **request,
                )
            except UpstreamError as err:
                raise MethodUnavailable(f"{system}: its index could not be built: {err}") from err
        manifest = {
            "identity": identity,
            "counts": result.get("counts", {}),
            "system_usage": result.get("usage"),
            "ledger": tally.totals(),
            "embedding_tokens": sum(r.prompt_tokens for r in tally.rows if r.kind == "embedding"),
            "model_s": round(sum(r.latency_s for r in tally.rows), 3),
            "wall_s": round(time.perf_counter() - started, 3),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        (folder / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True, default=str))

    def close(self) -> None:
        _stop_workers(self.workers)
        if self.proxy is not None:
            self.proxy.stop()
            self.proxy = None


def _stop_workers(workers: dict[str, Worker]) -> None:
    for worker in workers.values():
        worker.close()
    workers.clear()


def graphrag_output_folder(path: Path) -> Path:
    """A GraphRAG project root or its `output/` folder: the folder holding the parquet tables."""
    return path / "output" if not list(path.glob("*.parquet")) and (path / "output").is_dir() else path


def kit_graph(graph: GraphIndex) -> dict[str, list[dict[str, Any]]]:
    """The kit's chunks and graph as JSON rows (the `index` op's `graph`): the graph the kit's own
    retrievers read (`retrieval.graph_origin`, `select_graph`), so both systems read one graph.
    """
    index = graph
    return {
        "chunks": index.chunks[["chunk_id", "doc_id", "text"]].to_dict("records"),
        "entities": [
            {**r, "chunk_ids": list(r["chunk_ids"])}
            for r in graph.entities[["entity_id", "name", "type", "description", "chunk_ids"]].to_dict(
                "records"
            )
        ],
        "relations": [
            {**r, "chunk_ids": list(r["chunk_ids"]), "weight": float(r["weight"])}
            for r in graph.relations[
                ["relation_id", "source_id", "target_id", "description", "weight", "chunk_ids"]
            ].to_dict("records")
        ],
    }


class KitIds:
    """Maps a system's context items onto the kit index's ids: an id the index has is kept; an
    entity is else found by its normalized name, a relation by its two ends, a chunk by its text.
    """

    def __init__(self, index: GraphIndex):
        self.chunks = set(index.chunks["chunk_id"])
        chunks = zip(index.chunks["chunk_id"], index.chunks["text"], strict=True)
        self.chunk_by_text = {t.strip(): c for c, t in chunks}
        self.entities = set(index.entities["entity_id"])
        self.entity_by_name = {
            normalize_name(n): e
            for e, n in zip(index.entities["entity_id"], index.entities["name"], strict=True)
        }
        self.relations = set(index.relations["relation_id"])
        relations = index.relations
        ends = zip(relations["source_id"], relations["target_id"], relations["relation_id"], strict=True)
        self.relation_by_ends = {frozenset((s, t)): r for s, t, r in ends}
        self.communities = set(index.communities["community_id"].astype(str))

    def entity(self, value: str) -> str | None:
        return value if value in self.entities else self.entity_by_name.get(normalize_name(value))

    def item(self, raw: dict[str, Any], rank: int, retriever: str) -> tuple[ContextItem, int]:
        """The kit's ContextItem for one system item, and how many of its references found no kit id."""
        kind, text = raw.get("kind", "chunk"), str(raw.get("text", ""))
        unmapped = 0

        def keep(values: Sequence[str], known: set[str]) -> list[str]:
            nonlocal unmapped
            kept = [v for v in map(str, values) if v in known]
            unmapped += len(values) - len(kept)
            return kept

        chunk_ids = keep(raw.get("chunk_ids", []), self.chunks)
        entity_ids = [e for e in (self.entity(str(v)) for v in raw.get("entity_ids", [])) if e]
        unmapped += len(raw.get("entity_ids", [])) - len(entity_ids)
        relation_ids = keep(raw.get("relation_ids", []), self.relations)
        community_ids = keep(raw.get("community_ids", []), self.communities)
        own = str(raw.get("id", ""))
        if kind == "chunk" and not chunk_ids:
            found = own if own in self.chunks else self.chunk_by_text.get(text.strip())
            chunk_ids, unmapped = ([found], unmapped) if found else ([], unmapped + 1)
        elif kind == "entity" and not entity_ids:
            found = self.entity(own) or self.entity(str(raw.get("name", "")))
            entity_ids, unmapped = ([found], unmapped) if found else ([], unmapped + 1)
        elif kind == "relation" and not relation_ids:
            ends = [self.entity(str(raw.get(side, ""))) for side in ("source", "target")]
            found = (
                own
                if own in self.relations
                else self.relation_by_ends.get(frozenset(ends))
                if all(ends)
                else None
            )
            relation_ids, unmapped = ([found], unmapped) if found else ([], unmapped + 1)
        elif kind == "community_report" and not community_ids:
            community_ids, unmapped = ([own], unmapped) if own in self.communities else ([], unmapped + 1)
        item = ContextItem(
            kind=kind,
            text=text,
            score=1.0 / (rank + 1),  # the system's order, best first
            retriever=retriever,
            chunk_ids=chunk_ids,
            entity_ids=entity_ids,
            relation_ids=relation_ids,
            community_ids=community_ids,
        )
        return item, unmapped


class UpstreamMethod(Method):
    """One search mode of an upstream system, answering through its worker."""

    regenerable = False
    not_regenerable = "an upstream system's answer cannot be regenerated by the kit's generator"

    def __init__(
        self,
        name: str,
        generator: Generator,
        ctx: ModelContext,
        doc_of_chunk: dict[str, str],
        session: UpstreamSession,
        mode: UpstreamMode,
    ):
        super().__init__(name, generator, ctx.ledger, doc_of_chunk)
        self.ctx, self.session, self.mode = ctx, session, mode
        self.kit_ids = KitIds(session.index)
        self._answering = threading.Lock()
        # built (or found) now, so a system that cannot install, start or index is an unavailable
        # method with its reason (make_methods), never a crash in the middle of the answers
        self.folder = session.prepared(mode.system)
        self.options = getattr(ctx.settings.systems, mode.system).query_options()
        if mode.system == "graphrag":  # the kit's global level, and the run's concurrency
            level = self.options["community_level"]
            self.options["community_level"] = ctx.settings.methods.global_level if level is None else level
            self.options |= {"concurrency": ctx.settings.llm.in_flight}

    def fill(self, question: Question, draft: Draft) -> None:
        system = self.mode.system
        proxy = self.session.model_proxy()
        # one question at a time per method: the proxy tells a method's calls apart by its binding
        with self._answering, proxy.bound(self.name):
            try:
                result = self.session.worker(system).request(
                    "query",
                    base_url=proxy.base_url(self.name, "answer"),
                    model=self.ctx.settings.llm.model,
                    embedding_model=self.ctx.settings.embeddings.model,
                    workdir=str(self.folder),
                    question_id=question.question_id,
                    question=question.question,
                    mode=self.mode.mode,
                    options=self.options,
                )
            except UpstreamError as err:
                raise SystemFailure(err.kind, str(err)) from err
        unmapped = 0
        for rank, raw in enumerate(result.get("context", [])):
            item, missing = self.kit_ids.item(raw, rank, system)
            draft.context.append(item)
            unmapped += missing
        for item in draft.context:
            draft.context_tokens[item.kind] = draft.context_tokens.get(item.kind, 0) + count_tokens(item.text)
        draft.context_ready = True
        draft.notes.update(
            {
                "system": system,
                "version": self.session.versions[system].get("version", ""),
                "mode": self.mode.mode,
                "system_usage": result.get("usage"),
                "unmapped_ids": unmapped,
            }
        )
        answer = str(result.get("answer", "")).strip()
        if not answer:
            raise SystemFailure("empty_answer", f"{system} {self.mode.mode} returned an empty answer")
        draft.text = answer


def systems_table(methods: Sequence[Method]) -> pd.DataFrame:
    """Per upstream system the methods used: its version and Python, and its index build (folder,
    what it holds, what it cost: calls, cached calls, tokens, embedding tokens, wall seconds).
    """
    sessions = {id(m.session): m.session for m in methods if isinstance(m, UpstreamMethod)}
    rows = []
    for session in sessions.values():
        for system, hello in session.versions.items():
            build = session.builds.get(system, {})
            rows.append(
                {
                    "system": system,
                    "version": hello.get("version", ""),
                    "python": hello.get("python", ""),
                    "index_folder": build.get("folder", ""),
                    "counts": json.dumps(build.get("counts", {}), sort_keys=True),
                    **{f"build_{k}": v for k, v in build.get("ledger", {}).items()},
                    "build_embedding_tokens": build.get("embedding_tokens", 0),
                    "build_wall_s": build.get("wall_s", float("nan")),
                }
            )
    return pd.DataFrame(rows)
