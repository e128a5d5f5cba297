"""Corpus-scale index stages on a Ray cluster. A notebook run of `ragtrial run --engine ray` finds the
cluster's address in its kernel's `RAGTRIAL_RAY_ADDRESS` (`index.build.RAY_ADDRESS_ENV`), and its
`build_index` hands the corpus-scale work to Ray tasks there; this module is imported only then, and
holds the Ray pieces the engine (`runner.ray_engine`) shares with it.

- What runs where: chunking (the documents in partitions), the NLP graph's per-chunk parse (the
  chunks in partitions; the corpus's lower-case vocabulary, the merge and the ids are computed by
  the driver as on one machine), the LLM extraction calls (the sampled chunks in partitions; the
  description summaries and the reports are asked by the driver) and the embeddings (the text
  batches the cache lacks, in partitions). The tables and ids are those of the single-machine
  build: every partition's result is what the same function gives on one machine, put back in order,
  and the index's identity (its config hash) holds no word of the cluster.
- Partitions: at most one per CPU of the cluster (and, for the LLM, per request in flight), each a
  task asking no CPU of Ray: the kernel that waits for them holds its run's CPU, so tasks that asked
  for one could wait for ever on a cluster whose CPUs the batch's runs hold.
- Calls: a task builds the run's LLM client (or embedder) from its settings on its node, with the
  run's cache (`cache.url`, a shared SQLite file or PostgreSQL), so a rebuild or a resumed build
  pays nothing again. The LLM tasks share the run's `llm.concurrency` and rate limits between them;
  they append their ledger rows to the run's `ledger.csv` as the calls happen (the run folder is on
  the path every node sees) and return them, and the driver keeps them in the run's ledger and the
  stage's tally as each task ends: calls and tokens are counted once, per stage, as on one machine.
  An embedding call is one ledger row, recorded by the driver as on one machine. The embedded backend
  serves only its own node (127.0.0.1): its extraction calls stay on the driver, and the manifest
  says so.
- Honesty: the manifest's `distributed` says how many tasks each stage ran and on which nodes. An
  address that reaches no cluster fails the build, naming it; nothing falls back to one machine.
- Secrets: no API key travels; a task reads its keys from its node's environment (set them where
  `ray start` runs) and fails naming a variable the driver has and its node lacks. Settings whose
  URL carries a password are refused: task arguments are kept in the cluster's object store.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import signal
import socket
import threading
from collections.abc import Callable, Hashable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ragtrial.config import Settings
from ragtrial.config.base import ParamsError
from ragtrial.config.data import DATA_ROOT_ENV
from ragtrial.config.index import IndexSettings
from ragtrial.config.llm import EmbeddingSettings, LLMSettings
from ragtrial.index.chunk_documents import chunks_for
from ragtrial.index.extract_llm_graph import ChunkGraph, extract_chunks
from ragtrial.index.extract_nlp_graph import ParsedChunk, parse_chunks
from ragtrial.index.tables import conform_table
from ragtrial.llm.cache import ResponseCache, cache_location
from ragtrial.llm.client import LLM
from ragtrial.llm.embedder import ComputeBatches, Computed, Embedder
from ragtrial.llm.errors import LLMError
from ragtrial.llm.ledger import CallRecord, Ledger
from ragtrial.llm.middleware import RETRY_FAILURES_ENV
from ragtrial.redact import password_key

# What a kernel and a task read from their environment besides the API keys (none of it secret).
FORWARDED = (
    DATA_ROOT_ENV,
    RETRY_FAILURES_ENV,
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "RAGTRIAL_SYSTEMS_HOME",
)


# ---------------------------------------------------------------- shared with the engine


PROBE_TIMEOUT_S = 5.0  # how long a cluster's address may take to accept a connection


def probe(address: str | None, named: str) -> None:
    """ParamsError beginning with `named` when nothing listens at a "host:port" or "ray://host:port"
    address (Ray itself would retry it for minutes); "auto", "local" and none are Ray's to find.
    """
    if not address or address in ("auto", "local"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_TIMEOUT_S):
            return
    except (OSError, ValueError) as err:
        raise ParamsError(f"{named}: cannot connect to a Ray cluster there: {err}") from None


def connect(address: str | None, named: str) -> bool:
    """Connect this process to the cluster (unless it is already); whether it connected here.
    ParamsError beginning with `named` (what gave the address) when no cluster is there.
    """
    if ray.is_initialized():
        return False
    probe(address, named)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # the kit calls no service it was not told of
    # Ray's own SIGTERM handler ends the process; the command's stops the batch as Ctrl-C does
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        # the nodes' own logs stay in their Ray log folders; the terminal shows the kit's lines
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
    except (ConnectionError, ValueError) as err:  # no cluster there; a ray:// address without ray[client]
        raise ParamsError(f"{named}: cannot connect to a Ray cluster there: {err}") from None
    if threading.current_thread() is threading.main_thread():
        for number, handler in handlers.items():
            if handler is not None:
                signal.signal(number, handler)
    return True


def forward(environment: dict[str, str]) -> None:
    """Set each `FORWARDED` variable as the driver has it (`environment`), unset the others."""
    for name in FORWARDED:
        if name in environment:
            os.environ[name] = environment[name]
        else:
            os.environ.pop(name, None)


def missing_keys(key_variables: Sequence[str], node: str) -> str | None:
    """Why this node cannot make the calls: the key variables (set on the driver) it lacks; None if none."""
    missing = [name for name in key_variables if not os.environ.get(name)]
    if not missing:
        return None
    return (
        f"{', '.join(missing)} not set on Ray node {node}: a node reads the API keys from its own "
        "environment; set them where `ray start` runs on it"
    )


def node_names() -> dict[str, str]:
    """Each live node of the cluster: its id, and its address with the id's first characters."""
    return {n["NodeID"]: f"{n['NodeManagerAddress']} {n['NodeID'][:8]}" for n in ray.nodes() if n["Alive"]}


def dealt_nodes(cpus: dict[str, int], count: int) -> list[str]:
    """The node of each of `count` tasks: the nodes' CPUs dealt in turn (every node's first CPU, then
    every node's second, ...); nodes without CPUs only when no node has one.
    """
    working = {node: n for node, n in sorted(cpus.items()) if n > 0} or dict.fromkeys(sorted(cpus), 1)
    seats = [node for turn in range(max(working.values())) for node, n in working.items() if turn < n]
    return [seats[i % len(seats)] for i in range(count)]


def placements(count: int) -> list[NodeAffinitySchedulingStrategy]:
    """`dealt_nodes` over the live nodes, each task pinned softly (a node that dies hands its task
    on). Ray's SPREAD is best effort: under load it put both tasks of a two-node stage on one node.
    """
    cpus = {n["NodeID"]: int(n["Resources"].get("CPU", 0)) for n in ray.nodes() if n["Alive"]}
    return [NodeAffinitySchedulingStrategy(node, soft=True) for node in dealt_nodes(cpus, count)]


# ---------------------------------------------------------------- the tasks


class NodeError(RuntimeError):
    """A task that cannot run on its node (a key variable missing there)."""


@ray.remote(num_cpus=0)
def _task(
    work: Callable[..., Any], environment: dict[str, str], key_variables: list[str], part: Any, *shared: Any
) -> tuple[str, Any]:
    """`work(part, *shared)` on this node, with the driver's `FORWARDED` variables; (node id, result)."""
    forward(environment)
    node = ray.get_runtime_context().get_node_id()
    reason = missing_keys(key_variables, node)
    if reason:
        raise NodeError(reason)
    return node, work(part, *shared)


def _extract_part(
    units: list[tuple[str, str]],
    llm: LLMSettings,
    cache: tuple[str | Path, str],
    settings: IndexSettings,
    ledger_file: tuple[str, Path | None],
) -> tuple[list[ChunkGraph], list[CallRecord]]:
    """The extraction calls of some chunks, through the run's cache; their graphs and ledger rows
    (written to the run's ledger file as the calls happen, when it has one).
    """
    ledger, responses = Ledger(*ledger_file), ResponseCache(*cache)
    try:
        client = LLM(llm, responses, ledger, lambda: llm.base_url or "")
        with ledger.tally() as tally:
            graphs = extract_chunks(client, units, settings)
        return graphs, tally.rows
    finally:
        responses.close()


@functools.cache
def _node_embedder(settings: str, retry: str, cache: tuple[str | Path, str], run_id: str) -> Embedder:
    """One embedder per worker process and settings (a local model loads once)."""
    return Embedder(
        EmbeddingSettings.model_validate_json(settings),
        ResponseCache(*cache),
        Ledger(run_id),
        LLMSettings.model_validate_json(retry),
    )


def _embed_part(
    batches: list[list[str]], settings: str, retry: str, cache: tuple[str | Path, str], run_id: str
) -> list[Computed | LLMError]:
    """The vectors of some text batches, in order, up to the first that fails (its error last)."""
    embedder = _node_embedder(settings, retry, cache, run_id)
    done: list[Computed | LLMError] = []
    for texts in batches:
        try:
            done.append(embedder.compute(texts))
        except LLMError as err:
            done.append(err)
            break
    return done


# ---------------------------------------------------------------- the driver's side


def partitions(
    items: Sequence[Any], count: int, key: Callable[[Any], Hashable] | None = None
) -> list[list[int]]:
    """The positions of `items` in at most `count` partitions of consecutive items; with `key`, the
    items of one key share the first one's partition (a recurring request is then asked once, the
    others replay the cache as on one machine).
    """
    keys = [key(item) for item in items] if key else list(range(len(items)))
    distinct = list(dict.fromkeys(keys))
    if not distinct:
        return []
    size = math.ceil(len(distinct) / max(1, count))
    part_of = {k: i // size for i, k in enumerate(distinct)}
    parts: list[list[int]] = [[] for _ in range(math.ceil(len(distinct) / size))]
    for position, k in enumerate(keys):
        parts[part_of[k]].append(position)
    return parts


class Cluster:
    """The Ray cluster at `address`, for one index build of a run with `settings`."""

    def __init__(self, address: str, settings: Settings, env_name: str):
        key = password_key(settings.model_dump(mode="json"))
        if key:
            raise ParamsError(
                f"key '{key}' carries a password in its URL; the index stages on the Ray cluster "
                f"({env_name}={address}) keep a task's settings in the cluster's object store, so give "
                "it through the environment (llm.api_key_env, cache.password_env)"
            )
        self.address, self.settings = address, settings
        self.connected = connect(address, f"{env_name}={address}")
        self.environment = {name: os.environ[name] for name in FORWARDED if name in os.environ}
        secrets = (settings.llm.api_key_env, settings.embeddings.api_key_env, settings.cache.password_env)
        self.key_variables = [name for name in dict.fromkeys(secrets) if os.environ.get(name)]
        self.cache = (str(cache_location(settings.cache)), settings.cache.password_env)
        self.cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self.names = node_names()
        self.stages: dict[str, dict[str, Any]] = {}

    def close(self) -> None:
        if self.connected:
            ray.shutdown()

    def record(self) -> dict[str, Any]:
        """What the manifest says of the cluster and of what ran on it."""
        return {
            "engine": "ray",
            "address": self.address,
            "cluster_nodes": sorted(self.names.values()),
            "cluster_cpus": self.cpus,
            "stages": self.stages,
        }

    def _map(
        self,
        stage: str,
        work: Callable[..., Any],
        parts: list[Any],
        *shared: Any,
        each: Callable[[Any], None] | None = None,
    ) -> list[Any]:
        """`[work(part, *shared) for part in parts]`, one task a part; `each` sees every result as its
        task ends. A task's failure is raised as it was raised there.
        """
        shared_refs = [ray.put(value) for value in shared]  # once, however many tasks read them
        refs = [
            _task.options(scheduling_strategy=placement).remote(
                work, self.environment, self.key_variables, part, *shared_refs
            )
            for part, placement in zip(parts, placements(len(parts)), strict=True)
        ]
        position = {ref: i for i, ref in enumerate(refs)}
        results: list[Any] = [None] * len(refs)
        nodes: set[str] = set()
        pending = list(refs)
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                node, result = ray.get(ready[0])
                nodes.add(node)
                results[position[ready[0]]] = result
                if each is not None:
                    each(result)
        except ray.exceptions.RayTaskError as err:
            for ref in pending:
                ray.cancel(ref)
            raise err.cause from None
        record = self.stages.setdefault(stage, {"tasks": 0, "nodes": []})
        record["tasks"] += len(refs)
        if len(self.names) < len(nodes | set(self.names)):  # a node that joined since
            self.names = node_names()
        record["nodes"] = sorted(set(record["nodes"]) | {self.names.get(n, n) for n in nodes})
        return results

    def chunks(self, documents: pd.DataFrame, settings: IndexSettings) -> pd.DataFrame:
        """`chunk_documents.chunks_for`, the documents in partitions."""
        parts = partitions(range(len(documents)), self.cpus)
        frames = self._map("chunk", chunks_for, [documents.iloc[p] for p in parts], settings)
        return conform_table("chunks", pd.concat(frames, ignore_index=True))

    def parse(self, texts: list[str], lower_vocab: set[str], common_nouns: bool) -> list[ParsedChunk]:
        """`extract_nlp_graph.parse_chunks`, the chunks in partitions."""
        parts = partitions(texts, self.cpus)
        done = self._map(
            "extract_nlp", parse_chunks, [[texts[i] for i in p] for p in parts], lower_vocab, common_nouns
        )
        return [parsed for part in done for parsed in part]

    def extraction(
        self, ledger: Ledger, settings: IndexSettings
    ) -> Callable[[list[tuple[str, str]]], list[ChunkGraph]] | None:
        """What makes `extract_llm_graph`'s per-chunk calls on the cluster: the tasks append their rows
        to `ledger`'s file as the calls happen (so a build killed mid-stage shows what it paid, as on one
        machine), and `ledger` keeps them when each task ends. None for the embedded backend (its
        server answers on its own node only).
        """
        llm = self.settings.llm
        if llm.backend == "embedded":
            self.stages["extract_llm"] = {
                "tasks": 0,
                "nodes": [],
                "note": "on the driver: the embedded server answers on its own node only",
            }
            return None

        def extract(units: list[tuple[str, str]]) -> list[ChunkGraph]:
            parts = partitions(units, min(self.cpus, llm.in_flight), key=lambda unit: unit[1])
            shared = _shared_limits(llm, len(parts))

            def record(result: tuple[list[ChunkGraph], list[CallRecord]]) -> None:
                ledger.extend(result[1])

            ledger.start_file()  # its header, before the tasks append to it

            done = self._map(
                "extract_llm",
                _extract_part,
                [[units[i] for i in p] for p in parts],
                shared,
                self.cache,
                settings,
                (ledger.run_id, ledger.path),
                each=record,
            )
            graphs: list[ChunkGraph | None] = [None] * len(units)
            for part, (found, _) in zip(parts, done, strict=True):
                for position, graph in zip(part, found, strict=True):
                    graphs[position] = graph
            return graphs  # type: ignore[return-value]  # every position is in one partition

        return extract

    def embedding(self, run_id: str) -> ComputeBatches:
        """What computes the text batches an `Embedder.embed` call lacks, on the cluster, in order."""
        settings, retry = self.settings.embeddings.model_dump_json(), self.settings.llm.model_dump_json()

        def compute(batches: list[list[str]]) -> Iterator[Computed]:
            parts = partitions(batches, self.cpus)
            done = self._map(
                "embeddings",
                _embed_part,
                [[batches[i] for i in p] for p in parts],
                settings,
                retry,
                self.cache,
                run_id,
            )
            for part in done:
                for result in part:
                    if isinstance(result, LLMError):
                        raise result
                    yield result

        return compute


def _shared_limits(llm: LLMSettings, tasks: int) -> LLMSettings:
    """The run's LLM settings for one of `tasks` tasks running at once: its share of the requests in
    flight and of the rate limits, so the endpoint sees what one machine would send it.
    """

    def share(limit: int | None) -> int | None:
        return None if limit is None else max(1, limit // tasks)

    return llm.model_copy(
        update={
            "concurrency": max(1, llm.in_flight // tasks),
            "requests_per_minute": share(llm.requests_per_minute),
            "tokens_per_minute": share(llm.tokens_per_minute),
        }
    )
