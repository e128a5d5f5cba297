"""Index build orchestration: data set -> chunks -> graph(s) -> communities -> reports -> embeddings.

`build_index` runs the stages that `settings.index` asks for, times each one, and saves the result
to `<store_path>/<config hash>/`. The hash covers everything that changes the tables: the index
settings, the documents' fingerprint, the LLM and embedding models, the prompt versions and, for
imports, the imported files' bytes; so any notebook asking for the same index finds it
(`load_or_build_index`), and a rebuild replays the response cache into identical tables.

`graph_source: both` keeps the NLP graph and the LLM graph side by side in one index: entity,
relation and claim ids are prefixed with their origin (`nlp:`, `llm:`), nothing merges across the
two, and since Leiden communities are connected, every community belongs to one origin.
`ragtrial.index.tables.select_origin` cuts one graph out of such an index.

With `RAGTRIAL_RAY_ADDRESS` set (the Ray engine sets it in a run's kernel), chunking, the NLP parse,
the LLM extraction calls and the embeddings run as tasks on that Ray cluster (`index.distribute`,
imported only then), with the same tables, ids and index folder; the manifest's `distributed` says so.
"""

from __future__ import annotations

import contextvars
import dataclasses
import datetime as dt
import functools
import hashlib
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ragtrial.config.base import ParamsError
from ragtrial.config.data import data_path, data_root_origin
from ragtrial.config.index import IndexSettings
from ragtrial.config.paths import output_path
from ragtrial.index.chunk_documents import chunks_for
from ragtrial.index.create_communities import create_communities
from ragtrial.index.create_community_reports import create_community_reports
from ragtrial.index.create_community_reports import planned_calls as report_plan
from ragtrial.index.database import database, read_index
from ragtrial.index.date_relations import chunks_dates, date_relations
from ragtrial.index.embed_index import chunk_texts, embed_index, embed_table, entity_texts
from ragtrial.index.extract_llm_graph import PROMPTS as EXTRACTION_PROMPTS
from ragtrial.index.extract_llm_graph import extract_llm_graph
from ragtrial.index.extract_llm_graph import planned_calls as extraction_plan
from ragtrial.index.extract_nlp_graph import extract_nlp_graph
from ragtrial.index.import_graphs import IMPORTER_VERSION, import_graphrag_output, import_openie
from ragtrial.index.tables import EMBEDDINGS, GraphIndex, config_hash, empty_tables, fingerprint_documents
from ragtrial.llm.context import ModelContext
from ragtrial.llm.ledger import Ledger, Tally, by_stage
from ragtrial.llm.middleware import retry_round
from ragtrial.llm.plan import StagePlan
from ragtrial.locks import FolderLock
from ragtrial.prompts import load_prompt
from ragtrial.records import Dataset, Question

# The Ray cluster whose nodes run the corpus-scale stages (set by `ragtrial run --engine ray`).
RAY_ADDRESS_ENV = "RAGTRIAL_RAY_ADDRESS"

# ---------------------------------------------------------------- identity of an index


def _import_location(settings: IndexSettings) -> Path | None:
    """Where import_path points (relative paths are under the data root)."""
    return data_path(settings.import_path) if settings.import_path else None


def _imports_graphrag(settings: IndexSettings) -> bool:
    location = _import_location(settings)
    return settings.graph_source == "import" and location is not None and location.is_dir()


def _files_fingerprint(path: Path) -> str:
    files = sorted(path.rglob("*.parquet")) if path.is_dir() else [path]
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.name.encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()


def index_identity(ctx: ModelContext, dataset: Dataset, settings: IndexSettings) -> dict[str, Any]:
    """Everything the index tables depend on; its hash names the index folder."""
    location = _import_location(settings)
    if settings.graph_source == "import" and not (location and location.exists()):
        raise ParamsError(
            f"key 'index.import_path': graph_source 'import' needs an existing GraphRAG output "
            f"folder or OpenIE file, got {settings.import_path!r} (looked in {location}; data root: "
            f"{data_root_origin()})"
        )
    prompts = list(EXTRACTION_PROMPTS) if settings.graph_source in ("llm", "both") else []
    if settings.reports == "llm" and not _imports_graphrag(settings):
        prompts.append("community_report")
    llm = ctx.settings.llm
    return {
        "index": settings.model_dump(mode="json", exclude={"store_path"}),
        "dataset": dataset.name,
        "documents": fingerprint_documents(dataset.documents_frame()),
        # the importer's version too: an import saved by an older importer is read again
        "imported_files": f"{IMPORTER_VERSION}:{_files_fingerprint(location)}" if location else None,
        "llm": {
            "model": llm.model,
            "temperature": llm.temperature,
            "top_p": llm.top_p,
            "seed": llm.seed,
            "json_mode": llm.json_mode,
        }
        if prompts
        else None,
        "embeddings": ctx.settings.embeddings.vectors,
        "prompts": [load_prompt(p).tag for p in prompts],
        # A new build step changes what the tables hold, so an index saved without it is rebuilt
        # (its model calls replay from the cache).
        "steps": [stage[0] for stage in STAGES],
    }


def index_path(ctx: ModelContext, dataset: Dataset, settings: IndexSettings | None = None) -> Path:
    settings = settings or ctx.settings.index
    return _index_folder(settings, index_identity(ctx, dataset, settings))


def _index_folder(settings: IndexSettings, identity: dict[str, Any]) -> Path:
    """`<store_path>/<config hash>/`, the store under the outputs folder when it is an `outputs/` path."""
    return output_path(settings.store_path) / config_hash(identity)


# ---------------------------------------------------------------- stages


class _Stages:
    """Wall time per build stage, and the model time (live-call latency in the ledger) inside it."""

    def __init__(self, ledger: Ledger):
        self.ledger = ledger
        self.calls = Tally()  # every call of the build, stage by stage
        self.times: list[dict[str, Any]] = []  # in build order (a JSON list keeps it)

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        with self.ledger.tally() as tally:
            yield
        self.calls.rows += tally.rows
        calls = tally.frame()
        live = calls[~calls["cached"].astype(bool)]
        self.times.append(
            {
                "stage": name,
                "wall_s": round(time.perf_counter() - started, 3),
                "model_s": round(float(live["latency_s"].sum()), 3),
                "calls": len(calls),
                "live_calls": len(live),
            }
        )

    def cost_by_stage(self) -> list[dict[str, Any]]:
        return by_stage(self.calls.frame()).to_dict("records")


def _namespaced(origin: str, tables: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Ids prefixed with the origin, so two graphs that name the same things stay apart."""

    def tag(values: pd.Series) -> list[Any]:
        return [None if v is None else f"{origin}:{v}" for v in values]

    entities, relations, claims = tables["entities"], tables["relations"], tables["claims"]
    return {
        "entities": entities.assign(entity_id=tag(entities["entity_id"])),
        "relations": relations.assign(
            relation_id=tag(relations["relation_id"]),
            source_id=tag(relations["source_id"]),
            target_id=tag(relations["target_id"]),
        ),
        "claims": claims.assign(
            claim_id=tag(claims["claim_id"]),
            subject_id=tag(claims["subject_id"]),
            object_id=tag(claims["object_id"]),
        ),
    }


class _Ahead:
    """Work of a later stage started as soon as its inputs exist, in a thread of its own, so that it
    runs while the model calls of the stages in between are in flight: during the LLM extraction,
    the chunk embeddings and the reading of the chunks' dated sentences; during the community
    reports, the entity embeddings. Its result is taken where the later stage needs it,
    and its calls are tallied there (`Ledger.adopt`), so each stage of the manifest still counts its
    own calls. Without `ledger` (the build passes none when the endpoint takes one request at a
    time, `llm.in_flight` 1), each piece of work runs where its result is taken: the build's old order.
    """

    def __init__(self, ledger: Ledger | None = None):
        self.ledger = ledger
        self.pool = ThreadPoolExecutor(thread_name_prefix="ragtrial-index-ahead") if ledger else None
        self.pending: dict[str, Future[tuple[Any, Tally, float]] | Callable[[], Any]] = {}
        self.seconds: dict[str, float] = {}  # wall time of each piece that ran in a thread (manifest)

    def start(self, name: str, work: Callable[[], Any]) -> None:
        ledger, pool = self.ledger, self.pool
        if ledger is None or pool is None:
            self.pending[name] = work
            return

        def run() -> tuple[Any, Tally, float]:
            started = time.perf_counter()
            with ledger.tally_apart() as tally:
                value = work()
            return value, tally, time.perf_counter() - started

        self.pending[name] = pool.submit(contextvars.copy_context().run, run)

    def started(self, name: str) -> bool:
        return name in self.pending

    def result(self, name: str) -> Any:
        job = self.pending.pop(name)
        if not isinstance(job, Future):
            return job()
        assert self.ledger is not None  # work goes to a thread only with a ledger
        value, tally, seconds = job.result()
        self.ledger.adopt(tally)
        self.seconds[name] = round(seconds, 3)
        return value

    def close(self) -> None:
        """Wait for the work still running (a stage failed before taking its result)."""
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)


@dataclass
class _Build:
    """What the stages hand each other: the tables so far and the manifest's notes."""

    ctx: ModelContext
    settings: IndexSettings
    dataset: Dataset
    notes: dict[str, Any] = field(default_factory=dict)
    documents: pd.DataFrame | None = None
    chunks: pd.DataFrame | None = None
    graphs: dict[str, dict[str, pd.DataFrame]] = field(default_factory=dict)  # per origin
    failures: list[pd.DataFrame] = field(default_factory=lambda: [empty_tables()["extraction_failures"]])
    index: GraphIndex | None = None
    cluster: Any = None  # an `index.distribute.Cluster` when the stages run on Ray
    ahead: _Ahead = field(default_factory=_Ahead)

    def embed(self) -> Callable[..., Any]:
        """The build's embedding call: `embed(texts, method=label)`."""
        on_cluster = {"compute_batches": self.cluster.embedding(self.ctx.run_id)} if self.cluster else {}
        return functools.partial(self.ctx.embedder.embed, stage="index_embeddings", **on_cluster)

    def embed_ahead(self, table: str, texts: tuple[list[str], list[str]]) -> None:
        """Start embedding one table's texts (and their origins) ahead of the embedding stage."""
        self.ahead.start(f"{table}_embeddings", functools.partial(embed_table, table, *texts, self.embed()))


def _import_graphrag(b: _Build) -> None:
    location = _import_location(b.settings)
    assert location is not None  # IndexSettings require import_path with graph_source "import"
    b.index = import_graphrag_output(location)
    b.notes["imported_from"] = b.settings.import_path


def _chunk(b: _Build) -> None:
    b.documents = b.dataset.documents_frame()
    chunk = b.cluster.chunks if b.cluster else chunks_for
    b.chunks = chunk(b.documents, b.settings)


def _extract_nlp(b: _Build) -> None:
    # Built before the LLM extraction, not beside its calls: measured, the calls then took longer
    # (this CPU-bound work shares the interpreter) by as much as the build gained.
    parse = {"parse": b.cluster.parse} if b.cluster else {}
    entities, relations = extract_nlp_graph(b.chunks, cooccurrence=b.settings.nlp_cooccurrence, **parse)
    b.graphs["nlp"] = {"entities": entities, "relations": relations, "claims": empty_tables()["claims"]}


def _extract_llm(b: _Build) -> None:
    assert b.chunks is not None  # made by _chunk
    # what needs the chunks alone, done while the extraction's calls are in flight
    b.embed_ahead("chunks", chunk_texts(b.chunks))
    b.ahead.start("chunk_dates", functools.partial(chunks_dates, b.chunks))
    extract = b.cluster.extraction(b.ctx.ledger, b.settings) if b.cluster else None
    llm = extract_llm_graph(b.ctx.llm, b.chunks, b.settings, extract)
    b.graphs["llm"] = {"entities": llm.entities, "relations": llm.relations, "claims": llm.claims}
    b.failures.append(llm.failures)
    b.notes["llm_extraction"] = llm.stats


def _import_openie(b: _Build) -> None:
    location = _import_location(b.settings)
    assert location is not None  # IndexSettings require import_path with graph_source "import"
    # a corpus cut by data.limit_documents holds some of the file's passages: the rest are left out
    cut = b.ctx.settings.data.limit_documents is not None
    entities, relations, failed = import_openie(location, b.documents, b.chunks, corpus_is_a_subset=cut)
    b.graphs["import"] = {"entities": entities, "relations": relations, "claims": empty_tables()["claims"]}
    b.failures.append(failed)


def _create_communities(b: _Build) -> None:
    """The extracted graphs side by side (ids namespaced by origin when there are two), then Leiden."""
    graphs = b.graphs
    if len(graphs) > 1:
        graphs = {origin: _namespaced(origin, tables) for origin, tables in graphs.items()}
    tables = {
        t: pd.concat([g[t] for g in graphs.values()], ignore_index=True)
        for t in ("entities", "relations", "claims")
    }
    communities = create_communities(
        tables["entities"],
        tables["relations"],
        max_cluster_size=b.settings.max_cluster_size,
        seed=b.settings.seed,
        use_lcc=b.settings.community_input == "graphrag",
        edge_rule=b.settings.community_input,
    )
    b.index = GraphIndex(
        documents=b.documents,
        chunks=b.chunks,
        communities=communities,
        extraction_failures=pd.concat(b.failures, ignore_index=True),
        **tables,
    )


def _create_community_reports(b: _Build) -> None:
    index = b.index
    assert index is not None  # made by _create_communities or the GraphRAG import
    result = create_community_reports(
        b.ctx.llm,
        index.entities,
        index.relations,
        index.claims,
        index.communities,
        b.settings,
        sending=functools.partial(_start_entity_embeddings, b),
    )
    b.index = dataclasses.replace(index, community_reports=result.reports)
    b.notes["community_reports"] = result.stats


def _date_relations(b: _Build) -> None:
    assert b.index is not None  # made by _create_communities or the GraphRAG import
    dates = b.ahead.result("chunk_dates") if b.ahead.started("chunk_dates") else None
    b.index = date_relations(b.index, dates)
    rels = b.index.relations
    b.notes["dated_relations"] = int((rels["valid_from"].notna() | rels["valid_to"].notna()).sum())


def _embed(b: _Build) -> None:
    assert b.index is not None  # made by _create_communities or the GraphRAG import
    embedded = {
        table: b.ahead.result(f"{table}_embeddings")
        for table in EMBEDDINGS
        if b.ahead.started(f"{table}_embeddings")
    }
    b.index = embed_index(
        b.index, b.embed(), skip=() if b.settings.embed_entities else ("entities",), embedded=embedded
    )


def _start_entity_embeddings(b: _Build) -> None:
    """The entities are final once the communities are found (the reports read them and change
    none): their embeddings need not wait for the reports.
    """
    assert b.index is not None  # made by _create_communities
    if b.settings.embed_entities:
        b.embed_ahead("entities", entity_texts(b.index.entities))


def _builds_graph(s: IndexSettings) -> bool:
    return not _imports_graphrag(s)


# The build's stages, in order, each with when the settings ask for it; the names are the manifest's.
STAGES: list[tuple[str, Callable[[IndexSettings], bool], Callable[[_Build], None]]] = [
    ("import", _imports_graphrag, _import_graphrag),
    ("chunk", _builds_graph, _chunk),
    ("extract_nlp", lambda s: _builds_graph(s) and s.graph_source in ("nlp", "both"), _extract_nlp),
    ("extract_llm", lambda s: _builds_graph(s) and s.graph_source in ("llm", "both"), _extract_llm),
    ("import", lambda s: _builds_graph(s) and s.graph_source == "import", _import_openie),
    ("communities", _builds_graph, _create_communities),
    ("community_reports", lambda s: _builds_graph(s) and s.reports == "llm", _create_community_reports),
    ("date_relations", lambda s: True, _date_relations),
    ("embeddings", lambda s: True, _embed),
]


def _build_lock(path: Path) -> FolderLock:
    """The lock of one index folder, beside it (the folder itself is replaced by a rename on save).

    A second process asking for an index that is being built waits for the build, then loads it,
    instead of paying for the same extraction again.
    """

    def say_why(pid: int | None) -> None:
        holder = f"process {pid}" if pid else "another process"
        logging.getLogger(__name__).warning("waiting for %s, which is building the index %s", holder, path)

    return FolderLock(path.parent / f".{path.name}.lock", wait=True, on_wait=say_why)


def _cluster(ctx: ModelContext) -> Any:
    """The Ray cluster at $RAGTRIAL_RAY_ADDRESS (connected; ParamsError naming the address when no
    cluster is there), or None when it is unset: then nothing of Ray is imported.
    """
    address = os.environ.get(RAY_ADDRESS_ENV, "").strip()
    if not address:
        return None
    from ragtrial.index.distribute import Cluster

    return Cluster(address, ctx.settings, RAY_ADDRESS_ENV)


def benchmark_index_settings(settings: IndexSettings, graph: str) -> IndexSettings:
    """The run's index settings for one graph of the retrieval benchmark (notebook 13): that graph
    source, no community reports (no model call) and no entity embeddings (the benchmark's retrievers
    read neither: its graph retrievers link question entities by name embeddings of their own).
    """
    update = {"graph_source": graph, "reports": "none", "embed_entities": False}
    return IndexSettings.model_validate({**settings.model_dump(), **update})


def build_index(ctx: ModelContext, dataset: Dataset, settings: IndexSettings | None = None) -> GraphIndex:
    """Build the index the settings describe and save it under `<store_path>/<config hash>/`."""
    s = settings or ctx.settings.index
    identity = index_identity(ctx, dataset, s)
    path = _index_folder(s, identity)
    with _build_lock(path):
        return _build(ctx, dataset, s, identity, path)


def _build(
    ctx: ModelContext, dataset: Dataset, s: IndexSettings, identity: dict[str, Any], path: Path
) -> GraphIndex:
    stage = _Stages(ctx.ledger)
    started = time.perf_counter()
    # beside model calls in flight, when the endpoint takes several at once
    ahead = _Ahead(ctx.ledger if ctx.settings.llm.in_flight > 1 else None)
    build = _Build(ctx, s, dataset, cluster=_cluster(ctx), ahead=ahead)
    try:
        for name, applies, step in STAGES:
            if applies(s):
                with stage(name):
                    step(build)
    finally:
        ahead.close()
        if build.cluster:
            build.cluster.close()
    manifest = {
        "settings": identity,
        "data_settings": ctx.settings.data.model_dump(mode="json"),
        "built_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "built_by_run": ctx.run_id,
        "build_wall_s": round(time.perf_counter() - started, 3),
        "stages": stage.times,
        **({"ran_ahead_s": ahead.seconds} if ahead.seconds else {}),
        "ledger": stage.cost_by_stage(),
        **build.notes,
        **({"distributed": build.cluster.record()} if build.cluster else {}),
        **({"retry_round": retry_round()} if retry_round() else {}),
    }
    assert build.index is not None  # every stage plan makes an index
    saved = dataclasses.replace(build.index, manifest=manifest).save(path)
    return GraphIndex.load(saved)  # exactly what a later load_or_build_index returns, full manifest included


def database_index(ctx: ModelContext) -> GraphIndex | None:
    """Your own data: the index the schema `store.schema_name` of `store.url` holds in the documented
    layout (`index.database`), checked table by table and read as it is; embeddings it lacks are the
    kit's (`embeddings.model`). None when `store.schema_name` is unset (the kit builds the index).
    """
    store = ctx.settings.store
    if not store.schema_name:
        return None
    index = read_index(database(store.url or "", store.password_env), store.schema_name)
    embedded = embed_index(
        index, functools.partial(ctx.embedder.embed, stage="index_embeddings"), keep_existing=True
    )
    return dataclasses.replace(
        embedded, manifest={**index.manifest, "settings": {"dataset": ctx.settings.data.dataset}}
    )


def load_or_build_index(
    ctx: ModelContext, dataset: Dataset, settings: IndexSettings | None = None
) -> GraphIndex:
    """The saved index for these settings and data if there is one, else a fresh build (one at a
    time: a build under way in another process is waited for, then loaded). A data set without
    documents has an empty index (nothing built or saved): only methods reading no index answer.
    With `store.schema_name` set, the index is your own database's (`database_index`), never built.
    """
    own = database_index(ctx)
    if own is not None:
        return own
    if not dataset.documents:  # questions without documents (UltraDomain): nothing to index
        return GraphIndex(manifest={"empty": f"data set {dataset.name!r} has no documents"})
    settings = settings or ctx.settings.index
    identity = index_identity(ctx, dataset, settings)
    path = _index_folder(settings, identity)
    if (path / "manifest.json").is_file() and not _to_retry(saved := GraphIndex.load(path)):
        return saved
    with _build_lock(path):
        # built by the process this one waited for (or, retrying, rebuilt by it)
        if (path / "manifest.json").is_file() and not _to_retry(saved := GraphIndex.load(path)):
            return saved
        return _build(ctx, dataset, settings, identity, path)


def failed_model_calls(index: GraphIndex) -> int:
    """The model calls of an index's build that failed: its extraction failures (those of a
    file's import aside, which no model call made) and the community reports that failed.
    """
    failures = index.extraction_failures
    reports = index.manifest.get("community_reports", {})
    return int((failures["stage"] != "import").sum()) + len(reports.get("failed", []))


def _to_retry(saved: GraphIndex) -> bool:
    """Whether `ragtrial run --retry-failures` rebuilds the saved index: it has failed model calls
    and was not rebuilt in this invocation yet. The rebuild replays every successful call from the
    cache and asks the failed ones again, so only the failed parts change (and cost).
    """
    return (
        bool(retry_round())
        and saved.manifest.get("retry_round") != retry_round()
        and (failed_model_calls(saved) > 0)
    )


def saved_index(ctx: ModelContext, dataset: Dataset, settings: IndexSettings | None = None) -> GraphIndex:
    """The saved index for these settings and data; FileNotFoundError naming the folder when it was
    never built (for readers of an index that must not pay for a build, e.g. the verdict).
    """
    own = database_index(ctx)
    if own is not None:
        return own
    path = index_path(ctx, dataset, settings)
    if not (path / "manifest.json").is_file():
        raise FileNotFoundError(
            f"no index at {path} for these data and index settings: run 01_build_index (or any notebook "
            "that answers) with the same settings first"
        )
    return GraphIndex.load(path)


def load_or_build_document_indexes(
    ctx: ModelContext, dataset: Dataset, questions: Sequence[Question], settings: IndexSettings | None = None
) -> list[tuple[str, GraphIndex, list[Question]]]:
    """One index per document that `questions` ask about, as Han et al. build for single-document
    summarization sets (QMSum, SQuALITY): (document id, its index, its questions), in question order.
    Each index is `load_or_build_index` of the data set cut to that document, so it is shared and
    reused like any other. A question without exactly one gold document cannot be routed: ValueError.
    """
    documents = {document.doc_id: document for document in dataset.documents}
    by_document: dict[str, list[Question]] = {}
    for question in questions:
        if len(question.gold_doc_ids) != 1 or question.gold_doc_ids[0] not in documents:
            raise ValueError(
                f"one index per document: question {question.question_id!r} of {dataset.name} needs exactly "
                f"one gold document of the data set, it has {question.gold_doc_ids}"
            )
        by_document.setdefault(question.gold_doc_ids[0], []).append(question)
    return [
        (
            doc_id,
            load_or_build_index(
                ctx, dataset.model_copy(update={"documents": [documents[doc_id]], "questions": own}), settings
            ),
            own,
        )
        for doc_id, own in by_document.items()
    ]


# ---------------------------------------------------------------- before the build (ragtrial estimate)


def planned_build(
    ctx: ModelContext, dataset: Dataset, settings: IndexSettings | None = None
) -> tuple[Path, list[StagePlan]]:
    """Where the index for these settings lives, and the model calls building it would make: none
    when it is saved there; else the LLM extraction planned on the real chunks (`STAGES`' chunking,
    model-free) and the reports of communities not yet found. An imported GraphRAG index calls no model.
    """
    s = settings or ctx.settings.index
    path = index_path(ctx, dataset, s)
    if (path / "manifest.json").is_file() or _imports_graphrag(s) or ctx.settings.store.schema_name:
        return path, []  # saved, imported, or your own database's: no model call
    build = _Build(ctx, s, dataset)
    _chunk(build)
    plans = []
    if s.graph_source in ("llm", "both"):
        plans += extraction_plan(ctx.llm, build.chunks, s)
    if s.reports == "llm":
        plans += report_plan(s, origins=2 if s.graph_source == "both" else 1)
    return path, plans
