"""fast-graphrag 0.0.5's worker (the protocol in `protocol.py`): its own `GraphRAG.insert` builds the
index in `<workdir>/fast_graphrag`, its own `GraphRAG.query` answers, every model call going to the
kit's proxy at the request's `base_url`.

Structured output: fast-graphrag asks instructor for pydantic objects in instructor's JSON mode
(`response_format: json_object`, the schema in the system message; no tool calls), which any
OpenAI-compatible endpoint that takes `response_format` serves. Option `structured_output` picks
another tool-free instructor mode (`json_schema_mode` sends the schema as `json_schema`).

Same inputs, same prompts (a rebuild replays every call from the kit's cache): fast-graphrag 0.0.5
merges what it extracted in the order its concurrent calls happened to finish (documents as their
extractions complete, entities as their summaries come back), and a merge's prompt lists what it
merges in that order. The worker keeps fast-graphrag's concurrency and fixes the order: documents are
merged in input order (`ExtractionInDocumentOrder`), an entity upsert's summaries are handed back in
the order they were asked for (`NodeUpsertInCallOrder`), and the entity vectors' HNSW index is built on
one thread (its parallel build links entities in thread order). Each order is one fast-graphrag could
have met on its own; none changes a prompt, a threshold or a step (docs/paper_conditions.md).

Usage is read from the HTTP replies themselves (an httpx hook on both of fast-graphrag's OpenAI
clients): every attempt is a call, a call without a successful reply a failed call, tokens come from
each reply's `usage`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import httpx  # noqa: E402
import instructor  # noqa: E402
import openai  # noqa: E402
import protocol  # noqa: E402
from fast_graphrag import (  # noqa: E402  (the Config defaults' parts, as its __init__ imports them)
    DefaultGraphUpsertPolicy,
    DefaultInformationExtractionService,
    DefaultVectorStorage,
    DefaultVectorStorageConfig,
    EdgeUpsertPolicy_UpsertIfValidNodes,
    GraphRAG,
    NodeUpsertPolicy_SummarizeDescription,
    QueryParam,
)
from fast_graphrag._llm import OpenAIEmbeddingService, OpenAILLMService  # noqa: E402  (the README's import)

SYSTEM = "fast_graphrag"
API_KEY = "ragtrial-proxy"  # the proxy's placeholder: the real key never leaves the kit
STORE = "fast_graphrag"  # fast-graphrag's working_dir under the worker's workdir
INDEX_SETTINGS = "ragtrial-index.json"  # what a query must reuse from the index build (embedding model, dim)

# The defaults of fast-graphrag's README quick start (its one worked example, on A Christmas Carol).
README_DOMAIN = (
    "Analyze this story and identify the characters. Focus on how they interact with each other, "
    "the locations they explore, and their relationships."
)
README_EXAMPLE_QUERIES = [
    "What is the significance of Christmas Eve in A Christmas Carol?",
    "How does the setting of Victorian London contribute to the story's themes?",
    "Describe the chain of events that leads to Scrooge's transformation.",
    "How does Dickens use the different spirits (Past, Present, and Future) to guide Scrooge?",
    'Why does Dickens choose to divide the story into "staves" rather than chapters?',
]
README_ENTITY_TYPES = ["Character", "Animal", "Place", "Object", "Activity", "Event"]

# instructor modes that need no tool calls (fast-graphrag's default first).
STRUCTURED_OUTPUT_MODES = (instructor.Mode.JSON, instructor.Mode.JSON_SCHEMA, instructor.Mode.MD_JSON)
INDEX_OPTIONS = {"domain", "example_queries", "entity_types", "embedding_dim", "structured_output"}
QUERY_OPTIONS = {f.name for f in dataclasses.fields(QueryParam)} | {"structured_output"}

# One loop for the worker's life: fast-graphrag runs its coroutines on the thread's current loop, and
# the httpx clients it is given must live on that same loop.
LOOP = asyncio.new_event_loop()
asyncio.set_event_loop(LOOP)


class UsageMeter:
    """Calls, failed calls and tokens of every HTTP attempt fast-graphrag's clients make."""

    def __init__(self) -> None:
        self.calls = self.succeeded = self.prompt_tokens = self.completion_tokens = 0
        self.calls_without_usage = 0

    def http_client(self) -> httpx.AsyncClient:
        """An httpx client (openai's defaults) whose every request and reply this meter counts."""
        # mypy reads the kit's openai (an httpx2 client); the worker's own environment's openai
        # makes an httpx one
        return openai.DefaultAsyncHttpxClient(  # type: ignore[return-value]
            event_hooks={"request": [self._on_request], "response": [self._on_response]}
        )

    async def _on_request(self, request: httpx.Request) -> None:
        self.calls += 1

    async def _on_response(self, response: httpx.Response) -> None:
        if response.status_code >= 400:
            return
        self.succeeded += 1
        await response.aread()
        try:
            usage = response.json().get("usage") or {}
        except (ValueError, AttributeError):  # a body the client will refuse anyway
            usage = {}
        if "prompt_tokens" not in usage:
            self.calls_without_usage += 1
        self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
        self.completion_tokens += int(usage.get("completion_tokens") or 0)

    def report(self) -> dict[str, int]:
        """The protocol's usage, with the failed calls and the replies that carried no usage."""
        return {
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "failed_calls": self.calls - self.succeeded,
            "calls_without_usage": self.calls_without_usage,
        }


class RepliesInCallOrder:
    """fast-graphrag's LLM service whose replies are handed back in the order the calls were made: the
    calls still run concurrently, but the caller's code after reply k runs before that after reply k+1,
    whatever order the endpoint answered in.
    """

    def __init__(self, llm: OpenAILLMService) -> None:
        self.llm = llm
        self.last_handed: asyncio.Future[None] | None = None

    async def send_message(self, *args: Any, **kwargs: Any) -> Any:
        previous, handed = self.last_handed, LOOP.create_future()
        self.last_handed = handed
        try:
            return await self.llm.send_message(*args, **kwargs)
        finally:
            if previous is not None:
                await previous
            # the caller resumes in this same step, before the next call's waiter can
            handed.set_result(None)


class NodeUpsertInCallOrder(NodeUpsertPolicy_SummarizeDescription):  # type: ignore[misc]
    """fast-graphrag's entity upsert (concurrent summaries), its entities stored in the order it
    started them: it stores an entity when its summary returns, so the entities' indices (and the order
    later prompts and the vector index meet them in) would follow the endpoint's reply order.
    """

    async def __call__(self, llm: OpenAILLMService, target: Any, source_nodes: Any) -> Any:
        return await super().__call__(RepliesInCallOrder(llm), target, source_nodes)


class ExtractionInDocumentOrder(DefaultInformationExtractionService):  # type: ignore[misc]
    """fast-graphrag's extraction (documents concurrently), each document's result released only after
    the one before it: its insert merges documents as their results complete (asyncio.as_completed).
    """

    def extract(self, llm: OpenAILLMService, documents: Any, prompt_kwargs: Any, entity_types: Any) -> Any:
        extractions = super().extract(llm, documents, prompt_kwargs, entity_types)
        released: list[asyncio.Task[Any]] = []
        for extraction in extractions:
            released.append(LOOP.create_task(after(released[-1] if released else None, extraction)))
        return released


async def after(previous: asyncio.Future[Any] | None, own: asyncio.Future[Any]) -> Any:
    """`own`'s result, once `previous` (if any) has finished (an extraction returns None on failure)."""
    if previous is not None:
        await asyncio.wait([previous])
    return await own


def check_options(op: str, options: dict[str, Any], known: set[str]) -> None:
    """Refuse options this worker does not know, naming them and the known ones."""
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"{op}: unknown options {', '.join(unknown)}; known: {', '.join(sorted(known))}")


def structured_output_mode(options: dict[str, Any]) -> instructor.Mode:
    """The instructor mode of `options.structured_output` (default: fast-graphrag's JSON mode)."""
    value = options.get("structured_output", instructor.Mode.JSON.value)
    modes = {mode.value: mode for mode in STRUCTURED_OUTPUT_MODES}
    if value not in modes:
        raise ValueError(f"options.structured_output: {value!r} is not one of {', '.join(modes)}")
    return modes[value]


def services(
    request: dict[str, Any], embedding_dim: int | None, meter: UsageMeter
) -> tuple[OpenAILLMService, OpenAIEmbeddingService]:
    """fast-graphrag's own OpenAI services pointed at the proxy, their clients metered and without
    client-side retries (the kit's LLM layer behind the proxy retries; fast-graphrag's own retry
    policies stay as shipped). Without `embedding_dim`, one embedding call measures it.
    """
    mode = structured_output_mode(request.get("options") or {})
    llm = OpenAILLMService(model=request["model"], base_url=request["base_url"], api_key=API_KEY, mode=mode)
    llm.llm_async_client = instructor.from_openai(
        llm.llm_async_client.client.with_options(http_client=meter.http_client(), max_retries=0), mode=mode
    )
    embedder = OpenAIEmbeddingService(
        model=request["embedding_model"], base_url=request["base_url"], api_key=API_KEY
    )
    embedder.embedding_async_client = embedder.embedding_async_client.with_options(
        http_client=meter.http_client(), max_retries=0
    )
    if embedding_dim is None:
        embedding_dim = int(LOOP.run_until_complete(embedder.encode(["embedding dimension probe"])).shape[1])
    embedder.embedding_dim = embedding_dim
    return llm, embedder


def graph_rag(
    request: dict[str, Any],
    llm: OpenAILLMService,
    embedder: OpenAIEmbeddingService,
    domain: str,
    example_queries: str,
    entity_types: list[str],
) -> GraphRAG:
    """fast-graphrag's GraphRAG over `<workdir>/fast_graphrag` with these services and prompts."""
    return GraphRAG(
        working_dir=str(Path(request["workdir"]) / STORE),
        domain=domain,
        example_queries=example_queries,
        entity_types=entity_types,
        config=GraphRAG.Config(
            llm_service=llm,
            embedding_service=embedder,
            information_extraction_service_cls=ExtractionInDocumentOrder,
            # fast-graphrag's defaults (its __init__), with the entity upsert in call order
            information_extraction_upsert_policy=DefaultGraphUpsertPolicy(
                config=NodeUpsertPolicy_SummarizeDescription.Config(),
                nodes_upsert_cls=NodeUpsertInCallOrder,
                edges_upsert_cls=EdgeUpsertPolicy_UpsertIfValidNodes,
            ),
            node_upsert_policy=NodeUpsertInCallOrder(),
            entity_storage=DefaultVectorStorage(DefaultVectorStorageConfig(num_threads=1)),
        ),
    )


def index(request: dict[str, Any]) -> dict[str, Any]:
    """fast-graphrag's own insert of `documents`; the counts it stored; usage of every call."""
    if request.get("graph") is not None:
        raise ValueError(
            "fast-graphrag 0.0.5 builds its own graph; its public API (GraphRAG.insert) takes documents "
            "only, so a prebuilt graph (the kit's tables) cannot be loaded: index with `documents`"
        )
    documents = request.get("documents") or []
    if not documents:
        raise ValueError("index: no documents (fast-graphrag 0.0.5 builds its graph from documents)")
    options = request.get("options") or {}
    check_options("index", options, INDEX_OPTIONS)
    example_queries = options.get("example_queries", README_EXAMPLE_QUERIES)
    meter = UsageMeter()
    llm, embedder = services(request, options.get("embedding_dim"), meter)
    rag = graph_rag(
        request,
        llm,
        embedder,
        domain=options.get("domain", README_DOMAIN),
        example_queries=example_queries if isinstance(example_queries, str) else "\n".join(example_queries),
        entity_types=list(options.get("entity_types", README_ENTITY_TYPES)),
    )
    entities, relations, chunks = rag.insert(
        [document["text"] for document in documents],
        metadata=[{"id": document["id"], "title": document.get("title", "")} for document in documents],
        show_progress=False,
    )
    usage = meter.report()
    if entities == 0 and any(document["text"].strip() for document in documents):
        # An empty graph over real text would make "fast-graphrag" answer from nothing: another
        # method under its name. Either the endpoint failed or the model's replies gave no entity.
        cause = (
            f"{usage['failed_calls']} of {usage['calls']} model calls failed (fast-graphrag 0.0.5 skips a "
            "document whose extraction fails); see the worker log"
            if usage["failed_calls"]
            else f"none of {usage['calls']} model calls failed, so the model's extraction replies named no "
            "entity or did not parse (fast-graphrag 0.0.5 skips a document whose reply does not parse)"
        )
        raise RuntimeError(f"fast-graphrag stored no entities from {len(documents)} documents: {cause}")
    (Path(request["workdir"]) / STORE / INDEX_SETTINGS).write_text(
        json.dumps({"embedding_model": request["embedding_model"], "embedding_dim": embedder.embedding_dim})
    )
    if request.get("output"):
        rag.save_graphml(str(request["output"]))
    return {
        "counts": {
            "documents": len(documents),
            "entities": entities,
            "relations": relations,
            "chunks": chunks,
        },
        "usage": usage,
    }


def context_items(context: Any) -> list[dict[str, Any]]:
    """fast-graphrag's retrieved context as the protocol's items (its ids: an entity's name, a
    chunk's content hash; a relation has none of its own), each with fast-graphrag's score.
    """
    items = [
        {"kind": "entity", "text": entity.description, "id": entity.name, "name": entity.name, "score": score}
        for entity, score in context.entities
    ]
    items += [
        {
            "kind": "relation",
            "text": relation.description,
            "id": "",
            "source": relation.source,
            "target": relation.target,
            "chunk_ids": [str(chunk_id) for chunk_id in relation.chunks or []],
            "score": score,
        }
        for relation, score in context.relations
    ]
    items += [
        {"kind": "chunk", "text": chunk.content, "id": str(chunk.id), "score": score}
        for chunk, score in context.chunks
    ]
    return [{**item, "score": float(item["score"])} for item in items]


def query(request: dict[str, Any]) -> dict[str, Any]:
    """fast-graphrag's own query: its answer, the context it retrieved, usage of every call."""
    options = dict(request.get("options") or {})
    check_options("query", options, QUERY_OPTIONS)
    settings_path = Path(request["workdir"]) / STORE / INDEX_SETTINGS
    if not settings_path.is_file():
        raise FileNotFoundError(f"no fast-graphrag index in {settings_path.parent}: run `index` first")
    built = json.loads(settings_path.read_text())
    if built["embedding_model"] != request["embedding_model"]:
        raise ValueError(
            f"embedding_model {request['embedding_model']!r} is not the index's {built['embedding_model']!r} "
            f"({settings_path})"
        )
    meter = UsageMeter()
    llm, embedder = services(request, built["embedding_dim"], meter)
    # domain, example queries and entity types steer extraction only; a query does not use them
    rag = graph_rag(
        request, llm, embedder, README_DOMAIN, "\n".join(README_EXAMPLE_QUERIES), README_ENTITY_TYPES
    )
    options.pop("structured_output", None)
    response = rag.query(request["question"], QueryParam(**options))
    return {"answer": response.response, "context": context_items(response.context), "usage": meter.report()}


if __name__ == "__main__":
    protocol.serve({"hello": protocol.hello(SYSTEM, "fast-graphrag"), "index": index, "query": query})
