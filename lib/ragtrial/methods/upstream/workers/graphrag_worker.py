"""The Microsoft GraphRAG 3.3.0 worker (runs in GraphRAG's own environment: standard library, graphrag
and `protocol` only; see protocol.py for the operations).

`index` makes `workdir` a GraphRAG project: with `output` (a pre-built GraphRAG output folder, only
read) it copies the parquet tables into `workdir/output` and runs GraphRAG's own
`generate_text_embeddings` workflow over them, so the lancedb stores are the ones GraphRAG's
searches read; with `documents` it writes them as input text files and runs GraphRAG's standard
indexing pipeline. `query` builds GraphRAG's search engines (local, global, drift, basic) over
`workdir/output` and returns the engine's SearchResult: its answer, its context tables as context
items and its usage. Every model call goes to `base_url` (litellm's "openai" provider with
`api_base`); the config is made in code from the request, never read from a settings file.

Options (all optional): concurrency (model calls at once, default 1), vector_size (the embedder's
dimension, default 384: the kit's MiniLM), chunk_size / chunk_overlap (tokens, documents builds),
community_level (default 2), response_type (default "Multiple Paragraphs"),
dynamic_community_selection (default false), max_context_tokens (every search's context budget:
local, global map and data, DRIFT, basic), and `graphrag`: GraphRAG config settings merged in last
(e.g. {"drift_search": {"n_depth": 1}}).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
# litellm points tiktoken at the encodings it ships (cl100k_base, o200k_base): imported before
# graphrag's chunker asks tiktoken for one, no encoding is ever downloaded.
import litellm  # noqa: E402, F401
import pandas as pd  # noqa: E402
import protocol  # noqa: E402
from graphrag.api.index import build_index  # noqa: E402
from graphrag.config.embeddings import (  # noqa: E402
    community_full_content_embedding,
    entity_description_embedding,
    text_unit_text_embedding,
)
from graphrag.config.models.graph_rag_config import GraphRagConfig  # noqa: E402
from graphrag.query.factory import (  # noqa: E402
    get_basic_search_engine,
    get_drift_search_engine,
    get_global_search_engine,
    get_local_search_engine,
)
from graphrag.query.indexer_adapters import (  # noqa: E402
    read_indexer_communities,
    read_indexer_covariates,
    read_indexer_entities,
    read_indexer_relationships,
    read_indexer_report_embeddings,
    read_indexer_reports,
    read_indexer_text_units,
)
from graphrag.utils.api import get_embedding_store, load_search_prompt  # noqa: E402
from graphrag_llm.config import MetricsConfig  # noqa: E402
from graphrag_llm.metrics import create_metrics_store  # noqa: E402

# The tables a GraphRAG output folder holds: the searches read all but documents; covariates (claims)
# only if the index extracted them.
SEARCH_TABLES = ("text_units", "entities", "relationships", "communities", "community_reports")
TABLES = ("documents", *SEARCH_TABLES)
OPTIONAL_TABLES = ("covariates",)
CHAT_MODEL_ID = "default_completion_model"
EMBEDDING_MODEL_ID = "default_embedding_model"
API_KEY = "ragtrial-proxy"  # the kit's proxy holds the real key
# No metrics writer: the store is then one per model (a singleton GraphRAG keys by its settings),
# so the worker can read the calls and tokens GraphRAG counted during an index build.
METRICS = {"writer": None}
# Context tables of a SearchResult -> protocol kinds and the column holding each item's text.
CONTEXT_KINDS = {
    "entities": ("entity", "description"),
    "relationships": ("relation", "description"),
    "sources": ("chunk", "text"),
    "reports": ("community_report", "content"),
    "claims": ("claim", "description"),
}


def _merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    for key, value in overrides.items():
        base[key] = (
            _merge(dict(base[key]), value)
            if isinstance(value, dict) and isinstance(base.get(key), dict)
            else value
        )
    return base


def graphrag_config(payload: dict[str, Any]) -> GraphRagConfig:
    """GraphRAG's config for this request's workdir, models and options (validated by GraphRAG)."""
    options = payload.get("options") or {}
    workdir = Path(payload["workdir"]).resolve()
    concurrency = int(options.get("concurrency", 1))

    def model(name: str) -> dict[str, Any]:
        return {
            "model_provider": "openai",
            "model": name,
            "api_base": payload["base_url"],
            "api_key": API_KEY,
            "metrics": METRICS,
            # the kit's proxy retries by its settings and counts every attempt; the OpenAI client's
            # own retries (2 on a 5xx) would hide failures from it and multiply its attempts (litellm
            # 1.100's embedding call still makes them: it reads 0 as unset)
            "call_args": {"max_retries": 0},
        }

    settings: dict[str, Any] = {
        "completion_models": {CHAT_MODEL_ID: model(payload["model"])},
        "embedding_models": {EMBEDDING_MODEL_ID: model(payload["embedding_model"])},
        "concurrent_requests": concurrency,
        "input_storage": {"base_dir": str(workdir / "input")},
        "output_storage": {"base_dir": str(workdir / "output")},
        "update_output_storage": {"base_dir": str(workdir / "update_output")},
        "reporting": {"base_dir": str(workdir / "logs")},
        # every call reaches the kit's proxy, which caches and counts them
        "cache": {"type": "none"},
        "vector_store": {
            "db_uri": str(workdir / "output" / "lancedb"),
            "vector_size": int(options.get("vector_size", 384)),
        },
        "drift_search": {"concurrency": concurrency},
        "extract_graph_nlp": {"concurrent_requests": concurrency},
    }
    if "chunk_size" in options or "chunk_overlap" in options:
        settings["chunking"] = {
            key: int(options[option])
            for key, option in (("size", "chunk_size"), ("overlap", "chunk_overlap"))
            if option in options
        }
    if "max_context_tokens" in options:
        budget = int(options["max_context_tokens"])
        _merge(
            settings,
            {
                "local_search": {"max_context_tokens": budget},
                "global_search": {"max_context_tokens": budget, "data_max_tokens": budget},
                "basic_search": {"max_context_tokens": budget},
                "drift_search": {
                    "data_max_tokens": budget,
                    "local_search_max_data_tokens": budget,
                    "primer_llm_max_tokens": budget,
                },
            },
        )
    _merge(settings, options.get("graphrag") or {})
    return GraphRagConfig(**settings)


def _model_metrics(config: GraphRagConfig) -> list[Any]:
    """GraphRAG's metrics stores of the chat and the embedding model (shared per model id)."""
    stores = {}
    for model in (config.completion_models[CHAT_MODEL_ID], config.embedding_models[EMBEDDING_MODEL_ID]):
        model_id = f"{model.model_provider}/{model.model}"
        stores[model_id] = create_metrics_store(MetricsConfig(**METRICS), id=model_id)
    return list(stores.values())


def _index_usage(config: GraphRagConfig) -> dict[str, int] | None:
    totals = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
    for store in _model_metrics(config):
        metrics = store.get_metrics()
        totals["calls"] += int(metrics.get("attempted_request_count", 0))
        totals["prompt_tokens"] += int(metrics.get("prompt_tokens", 0))
        totals["completion_tokens"] += int(metrics.get("completion_tokens", 0))
    return totals if totals["calls"] else None


def _import_output(source: Path, output: Path) -> None:
    """Copy a pre-built output folder's tables into the workdir (the source is only read)."""
    missing = [name for name in TABLES if not (source / f"{name}.parquet").is_file()]
    if missing:
        raise FileNotFoundError(f"GraphRAG output folder {source} lacks {', '.join(missing)} (.parquet)")
    output.mkdir(parents=True, exist_ok=True)
    for name in TABLES + OPTIONAL_TABLES:
        if (source / f"{name}.parquet").is_file():
            shutil.copyfile(source / f"{name}.parquet", output / f"{name}.parquet")


def _write_documents(documents: list[dict[str, Any]], input_dir: Path) -> None:
    if input_dir.exists():
        shutil.rmtree(input_dir)
    input_dir.mkdir(parents=True)
    for number, document in enumerate(documents):
        if not str(document.get("text", "")).strip():
            raise ValueError(f"documents[{number}] (id {document.get('id')!r}) has no text")
        # GraphRAG's text input takes a file's name as the document's title
        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in str(document.get("id", number)))
        (input_dir / f"{number:05d}_{name}.txt").write_text(str(document["text"]), encoding="utf-8")


def index(payload: dict[str, Any]) -> dict[str, Any]:
    """Make `workdir` a GraphRAG project ready for every search; counts of its tables and stores."""
    config = graphrag_config(payload)
    workdir = Path(payload["workdir"]).resolve()
    output = workdir / "output"
    if payload.get("output"):
        _import_output(Path(payload["output"]), output)
        config.workflows = ["generate_text_embeddings"]
    elif payload.get("documents"):
        _write_documents(payload["documents"], workdir / "input")
    else:
        raise ValueError("index needs `output` (a GraphRAG output folder) or `documents`")
    if (output / "lancedb").exists():  # embeddings of an earlier build would mix with these
        shutil.rmtree(output / "lancedb")
    for store in _model_metrics(config):
        store.clear_metrics()
    results = asyncio.run(build_index(config=config, method="standard"))
    failed = [result for result in results if result.error is not None]
    if failed:
        error = failed[0].error
        raise RuntimeError(f"GraphRAG workflow {failed[0].workflow} failed: {type(error).__name__}: {error}")
    counts = {name: len(pd.read_parquet(output / f"{name}.parquet")) for name in TABLES}
    for name in (entity_description_embedding, text_unit_text_embedding, community_full_content_embedding):
        counts[f"embeddings.{name}"] = get_embedding_store(config.vector_store, name).count()
    return {"counts": counts, "usage": _index_usage(config)}


def _read_table(output: Path, name: str) -> pd.DataFrame | None:
    path = output / f"{name}.parquet"
    if not path.is_file():
        if name in OPTIONAL_TABLES:
            return None
        raise FileNotFoundError(f"{path} is missing: run index on this workdir first")
    return pd.read_parquet(path)


def search_engine(config: GraphRagConfig, mode: str, output: Path, options: dict[str, Any]) -> Any:
    """GraphRAG's search engine for `mode`, over the tables and stores in `output` (as api.query
    builds them).
    """
    level = int(options.get("community_level", 2))
    response_type = str(options.get("response_type", "Multiple Paragraphs"))
    tables = {name: _read_table(output, name) for name in SEARCH_TABLES + OPTIONAL_TABLES}
    communities, community_reports = tables["communities"], tables["community_reports"]
    if mode == "global":
        dynamic = bool(options.get("dynamic_community_selection", False))
        return get_global_search_engine(
            config,
            reports=read_indexer_reports(
                community_reports, communities, level, dynamic_community_selection=dynamic
            ),
            entities=read_indexer_entities(tables["entities"], communities, level),
            communities=read_indexer_communities(communities, community_reports),
            response_type=response_type,
            dynamic_community_selection=dynamic,
            map_system_prompt=load_search_prompt(config.global_search.map_prompt),
            reduce_system_prompt=load_search_prompt(config.global_search.reduce_prompt),
            general_knowledge_inclusion_prompt=load_search_prompt(config.global_search.knowledge_prompt),
        )
    text_units = read_indexer_text_units(tables["text_units"])
    if mode == "basic":
        engine = get_basic_search_engine(
            text_units=text_units,
            text_unit_embeddings=get_embedding_store(config.vector_store, text_unit_text_embedding),
            config=config,
            response_type=response_type,
            system_prompt=load_search_prompt(config.basic_search.prompt),
        )
        engine.model = _StreamingModel(engine.model)
        return engine
    entities = read_indexer_entities(tables["entities"], communities, level)
    relationships = read_indexer_relationships(tables["relationships"])
    reports = read_indexer_reports(community_reports, communities, level)
    descriptions = get_embedding_store(config.vector_store, entity_description_embedding)
    if mode == "local":
        covariates = tables["covariates"]
        return get_local_search_engine(
            config=config,
            reports=reports,
            text_units=text_units,
            entities=entities,
            relationships=relationships,
            covariates={"claims": read_indexer_covariates(covariates) if covariates is not None else []},
            description_embedding_store=descriptions,
            response_type=response_type,
            system_prompt=load_search_prompt(config.local_search.prompt),
        )
    if mode == "drift":
        read_indexer_report_embeddings(
            reports, get_embedding_store(config.vector_store, community_full_content_embedding)
        )
        return get_drift_search_engine(
            config=config,
            reports=reports,
            text_units=text_units,
            entities=entities,
            relationships=relationships,
            description_embedding_store=descriptions,
            response_type=response_type,
            local_system_prompt=load_search_prompt(config.drift_search.prompt),
            reduce_system_prompt=load_search_prompt(config.drift_search.reduce_prompt),
        )
    raise ValueError(f"unknown mode {mode!r}; known: local, global, drift, basic")


def context_items(context_data: Any) -> list[dict[str, Any]]:
    """The SearchResult's context tables as protocol items, once each (DRIFT nests one set of
    tables per follow-up query).
    """
    items: dict[tuple[str, str], dict[str, Any]] = {}

    def walk(data: Any) -> None:
        if not isinstance(data, dict):
            return
        for key, value in data.items():
            if isinstance(value, pd.DataFrame) and str(key).lower() in CONTEXT_KINDS:
                kind, text_column = CONTEXT_KINDS[str(key).lower()]
                for row in value.to_dict(orient="records"):
                    item = {"kind": kind, "id": str(row.get("id", "")), "text": str(row.get(text_column, ""))}
                    if kind == "entity":
                        item["name"] = str(row.get("entity", ""))
                    elif kind == "relation":
                        item["source"], item["target"] = (
                            str(row.get("source", "")),
                            str(row.get("target", "")),
                        )
                    elif kind == "community_report":
                        item["name"] = str(row.get("title", ""))
                    items.setdefault((kind, item["id"]), item)
            else:
                walk(value)

    walk(context_data)
    return list(items.values())


class _AwaitedStream:
    """A streamed completion that can be iterated without being awaited first."""

    def __init__(self, pending: Any) -> None:
        self.pending = pending

    def __await__(self) -> Any:
        return self.pending.__await__()

    async def _chunks(self) -> Any:
        async for chunk in await self.pending:
            yield chunk

    def __aiter__(self) -> Any:
        return self._chunks()


class _StreamingModel:
    """GraphRAG 3.3.0's BasicSearch.search iterates its model's stream without awaiting it (a
    TypeError every time; its stream_search awaits): the engine's model behind this answers both.
    """

    def __init__(self, model: Any) -> None:
        self.model = model

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def completion_async(self, **kwargs: Any) -> _AwaitedStream:
        return _AwaitedStream(self.model.completion_async(**kwargs))


class _FailureLog(logging.Handler):
    """Keeps the errors GraphRAG's searches log: they catch a failed model call, log it and carry
    on with an empty answer, which must reach the kit as a failure, not as an answer.
    """

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.failures: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        cause = record.exc_info[1] if record.exc_info else None
        self.failures.append(
            f"{record.getMessage()}: {type(cause).__name__}: {cause}" if cause else record.getMessage()
        )


def query(payload: dict[str, Any]) -> dict[str, Any]:
    """Answer one question with GraphRAG's search of `mode`; its answer, context and usage."""
    options = payload.get("options") or {}
    config = graphrag_config(payload)
    engine = search_engine(config, payload["mode"], Path(payload["workdir"]).resolve() / "output", options)
    failures = _FailureLog()
    graphrag_logger = logging.getLogger("graphrag")
    graphrag_logger.addHandler(failures)
    try:
        result = asyncio.run(engine.search(query=payload["question"]))
    finally:
        graphrag_logger.removeHandler(failures)
    if failures.failures:
        raise RuntimeError(f"GraphRAG {payload['mode']} search failed: {failures.failures[0]}")
    answer = result.response if isinstance(result.response, str) else str(result.response)
    return {
        "answer": answer,
        "context": context_items(result.context_data),
        "usage": {
            "calls": int(result.llm_calls),
            "prompt_tokens": int(result.prompt_tokens),
            "completion_tokens": int(result.output_tokens),
        },
    }


if __name__ == "__main__":
    protocol.serve({"hello": protocol.hello("graphrag", "graphrag"), "index": index, "query": query})
