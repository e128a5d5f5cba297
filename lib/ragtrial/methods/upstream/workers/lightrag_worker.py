"""LightRAG (lightrag-hku) behind the kit's process boundary (see `protocol.py` for the ops).

Runs in the kit's own Python but as a process of its own: LightRAG is asyncio and a notebook kernel
already runs a loop, so this worker owns one event loop and runs every op on it.

- `index` with `graph` inserts the kit's graph tables as LightRAG's custom knowledge graph (the
  comparison holds the graph fixed), with `documents` runs LightRAG's own extraction (`ainsert`).
  Beside LightRAG's storage, `kit_ids.json` maps LightRAG's chunk ids and entity names back to the
  kit's chunk_id / entity_id / relation_id, so `query` returns kit ids.
- `query` runs `aquery_llm` once: the answer and the entities, relations and chunks LightRAG put in
  the answer's context come from the same retrieval (`aquery` plus `aquery_data` would retrieve and
  extract keywords twice).

Every model call goes to `base_url` (the kit's proxy), one attempt each: the kit's LLM layer retries,
caches and counts. LightRAG's own LLM response cache is off for the same reason.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from importlib.util import find_spec
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import protocol  # noqa: E402

# LightRAG reads these when it is imported. Floats, not base64: what an OpenAI-compatible proxy
# serves for certain. tiktoken (LightRAG's tokenizer) downloads encodings on first use; point it at
# the cl100k_base copy llama-index-core ships, as the kit's own token counting does.
os.environ.setdefault("EMBEDDING_USE_BASE64", "false")
if "TIKTOKEN_CACHE_DIR" not in os.environ and (spec := find_spec("llama_index.core")) and spec.origin:
    os.environ["TIKTOKEN_CACHE_DIR"] = str(Path(spec.origin).parent / "_static" / "tiktoken_cache")

import pipmaster  # noqa: E402


def _refuse_install(*args: Any, **kwargs: Any) -> None:
    raise RuntimeError(
        f"LightRAG asked pipmaster to install {args or kwargs}; the worker installs nothing at run "
        "time: add it to the kit's environment"
    )


# LightRAG's modules call pipmaster to pip-install what they miss on import; here that is an error.
for _name in dir(pipmaster):
    if _name.startswith(("install", "ensure", "async_install", "async_ensure")):
        setattr(pipmaster, _name, _refuse_install)

import numpy as np  # noqa: E402
import tiktoken  # noqa: E402
from lightrag import LightRAG, QueryParam  # noqa: E402
from lightrag.base import DocStatus  # noqa: E402
from lightrag.constants import GRAPH_FIELD_SEP  # noqa: E402
from lightrag.llm.openai import openai_complete_if_cache, openai_embed  # noqa: E402
from lightrag.utils import EmbeddingFunc, Tokenizer, TokenTracker, compute_mdhash_id  # noqa: E402
from lightrag.utils import normalize_entity_name as lightrag_entity_name  # noqa: E402
from tenacity import stop_after_attempt  # noqa: E402

API_KEY = "ragtrial-proxy"  # the proxy's placeholder: the real key never leaves the kit
IDS_FILE = "kit_ids.json"
DEFAULT_EMBEDDING_DIM = 384  # the kit's embedder (all-MiniLM-L6-v2)
# One attempt per call: the kit's LLM layer behind base_url retries (and counts each retry once).
complete_once = openai_complete_if_cache.retry_with(stop=stop_after_attempt(1), reraise=True)
embed_once = openai_embed.func.retry_with(stop=stop_after_attempt(1), reraise=True)
# QueryParam fields a query's `options` may set, as LightRAG names them; the rest keep its defaults.
QUERY_OPTIONS = (
    "top_k",
    "chunk_top_k",
    "max_entity_tokens",
    "max_relation_tokens",
    "max_total_tokens",
    "response_type",
    "enable_rerank",
    "hl_keywords",
    "ll_keywords",
    "user_prompt",
)
MODES = ("naive", "local", "global", "hybrid", "mix")

loop = asyncio.new_event_loop()


class Endpoint:
    """Where this request's model calls go, and the tracker counting them (chat completions only:
    embeddings are not model calls in the kit's ledger either).
    """

    def __init__(self) -> None:
        self.base_url, self.model, self.embedding_model = "", "", ""
        self.tracker = TokenTracker()

    def use(self, payload: dict[str, Any]) -> TokenTracker:
        self.base_url, self.model = payload["base_url"], payload["model"]
        self.embedding_model = payload["embedding_model"]
        self.tracker = TokenTracker()
        return self.tracker

    async def complete(
        self,
        prompt: str,
        system_prompt: str | None = None,
        history_messages: list[dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> str:
        kwargs.pop("hashing_kv", None)
        return await complete_once(
            self.model,
            prompt,
            system_prompt=system_prompt,
            history_messages=history_messages or [],
            base_url=self.base_url,
            api_key=API_KEY,
            token_tracker=self.tracker,
            **kwargs,
        )

    async def embed(self, texts: list[str], **kwargs: Any) -> np.ndarray:
        return await embed_once(
            texts, model=self.embedding_model, base_url=self.base_url, api_key=API_KEY, **kwargs
        )


endpoint = Endpoint()
# LightRAG keeps its storages' data in process-wide namespaces (one per workspace), so one worker
# serves one workdir: two in one process would share their in-memory stores.
instances: dict[str, LightRAG] = {}


def run(coroutine: Any) -> Any:
    return loop.run_until_complete(coroutine)


def served_workdir(payload: dict[str, Any]) -> Path:
    """The request's workdir, refused if this worker already serves another."""
    workdir = Path(payload["workdir"])
    if instances and str(workdir) not in instances:
        raise ValueError(f"this worker serves {next(iter(instances))}; start another one for {workdir}")
    return workdir


def lightrag_for(workdir: str, embedding_dim: int) -> LightRAG:
    """The LightRAG over `workdir`, its storages initialized once per worker."""
    if workdir not in instances:
        rag = LightRAG(
            working_dir=workdir,
            llm_model_func=endpoint.complete,
            llm_model_name=endpoint.model,
            embedding_func=EmbeddingFunc(embedding_dim=embedding_dim, func=endpoint.embed),
            tokenizer=Tokenizer("cl100k_base", tiktoken.get_encoding("cl100k_base")),
            # The kit's cache is the one cache: every call reaches the kit and is counted in its ledger.
            enable_llm_cache=False,
            enable_llm_cache_for_entity_extract=False,
        )
        run(rag.initialize_storages())
        instances[workdir] = rag
    return instances[workdir]


def usage(tracker: TokenTracker) -> dict[str, int]:
    counted = tracker.get_usage()
    return {
        "calls": counted["call_count"],
        "prompt_tokens": counted["prompt_tokens"],
        "completion_tokens": counted["completion_tokens"],
    }


def custom_kg(graph: dict[str, list[dict[str, Any]]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The kit's graph rows as LightRAG's custom KG, and the map from LightRAG's ids to the kit's.
    LightRAG keeps one source chunk per inserted entity and relation: the first of its chunk_ids.
    """
    chunk_text = {row["chunk_id"]: row["text"] for row in graph.get("chunks", [])}
    chunks = [{"content": row["text"], "source_id": row["chunk_id"]} for row in graph.get("chunks", [])]
    names = {row["entity_id"]: lightrag_entity_name(row["name"]) for row in graph.get("entities", [])}
    entities, relationships = [], []
    kit_chunks: dict[str, list[str]] = {}
    for chunk_id, text in chunk_text.items():
        kit_chunks.setdefault(compute_mdhash_id(text, prefix="chunk-"), []).append(chunk_id)
    kit_entities: dict[str, list[str]] = {}
    for row in graph.get("entities", []):
        kit_entities.setdefault(names[row["entity_id"]], []).append(row["entity_id"])
        entities.append(
            {
                "entity_name": row["name"],
                "entity_type": row.get("type") or "UNKNOWN",
                "description": row.get("description") or "",
                "source_id": first(row.get("chunk_ids")),
            }
        )
    kit_relations: dict[str, list[str]] = {}
    self_loops = 0
    for row in graph.get("relations", []):
        # An endpoint missing from the entities table keeps its id as its name (LightRAG adds a node).
        source, target = (names.get(row[end], row[end]) for end in ("source_id", "target_id"))
        if lightrag_entity_name(source) == lightrag_entity_name(target):
            self_loops += 1  # LightRAG refuses self-loops; counted in the index's counts
            continue
        kit_relations.setdefault(relation_key(source, target), []).append(row["relation_id"])
        relationships.append(
            {
                "src_id": source,
                "tgt_id": target,
                "description": row.get("description") or "",
                "keywords": "",
                "weight": float(row.get("weight") or 1.0),
                "source_id": first(row.get("chunk_ids")),
            }
        )
    ids = {"chunks": kit_chunks, "entities": kit_entities, "relations": kit_relations}
    return {"chunks": chunks, "entities": entities, "relationships": relationships}, {
        "ids": ids,
        "self_loops_not_inserted": self_loops,
    }


def first(values: list[str] | None) -> str:
    return values[0] if values else ""


def relation_key(source: str, target: str) -> str:
    """LightRAG's relations are undirected: one key per pair of (LightRAG-normalized) names."""
    return GRAPH_FIELD_SEP.join(sorted((lightrag_entity_name(source), lightrag_entity_name(target))))


def index(payload: dict[str, Any]) -> dict[str, Any]:
    """Build LightRAG's index in `workdir`: the kit's graph inserted, or LightRAG's own extraction."""
    workdir = served_workdir(payload)
    # LightRAG upserts into what its storage holds: a second or retried index would mix two graphs.
    if workdir.exists() and any(workdir.iterdir()):
        raise ValueError(
            f"{workdir} holds a previous index (finished or failed): index into an empty workdir"
        )
    if payload.get("output") is not None:
        raise ValueError("LightRAG imports no pre-built output folder: give `graph` or `documents`")
    graph, documents = payload.get("graph"), payload.get("documents")
    if (graph is None) == (documents is None):
        raise ValueError("index needs exactly one of `graph` and `documents`")
    options = dict(payload.get("options") or {})
    embedding_dim = int(options.pop("embedding_dim", DEFAULT_EMBEDDING_DIM))
    if options:
        raise ValueError(f"unknown index options: {', '.join(sorted(options))}; known: embedding_dim")
    tracker = endpoint.use(payload)
    rag = lightrag_for(str(workdir), embedding_dim)
    counts: dict[str, int] = {}
    if graph is not None:
        kg, kept = custom_kg(graph)
        run(rag.ainsert_custom_kg(kg))
        ids = kept["ids"]
        counts["self_loops_not_inserted"] = kept["self_loops_not_inserted"]
    else:
        assert documents is not None  # exactly one of the two, checked above
        texts, ids = [d["text"] for d in documents], [d["id"] for d in documents]
        run(rag.ainsert(texts, ids=ids, file_paths=[d.get("title") or d["id"] for d in documents]))
        failed = run(rag.doc_status.get_docs_by_statuses([DocStatus.FAILED]))
        if failed:
            reasons = "; ".join(f"{doc_id}: {status.error_msg}" for doc_id, status in failed.items())
            raise RuntimeError(f"LightRAG failed {len(failed)} of {len(documents)} documents: {reasons}")
        ids = {"chunks": {}, "entities": {}, "relations": {}}  # LightRAG's own graph: no kit ids to map to
    stored = stored_counts(rag, workdir)
    (workdir / IDS_FILE).write_text(
        json.dumps({"embedding_model": payload["embedding_model"], "embedding_dim": embedding_dim, **ids})
    )
    return {"counts": {**stored, **counts}, "usage": usage(tracker)}


def stored_counts(rag: LightRAG, workdir: Path) -> dict[str, int]:
    """Entities, relations and chunks as LightRAG's storage holds them after the insert."""
    chunks_file = workdir / "kv_store_text_chunks.json"
    chunks = json.loads(chunks_file.read_text()) if chunks_file.exists() else {}
    return {
        "entities": len(run(rag.chunk_entity_relation_graph.get_all_nodes())),
        "relations": len(run(rag.chunk_entity_relation_graph.get_all_edges())),
        "chunks": len(chunks),
    }


def query(payload: dict[str, Any]) -> dict[str, Any]:
    """LightRAG's answer to `question` in `mode`, with the context it answered from."""
    workdir = served_workdir(payload)
    ids_file = workdir / IDS_FILE
    if not ids_file.exists():
        raise ValueError(f"no LightRAG index in {workdir} ({IDS_FILE} missing): run index first")
    kept = json.loads(ids_file.read_text())
    if payload["embedding_model"] != kept["embedding_model"]:
        raise ValueError(
            f"the index in {workdir} was embedded with {kept['embedding_model']!r}, "
            f"the query asks {payload['embedding_model']!r}"
        )
    if payload["mode"] not in MODES:
        raise ValueError(f"unknown LightRAG mode {payload['mode']!r}; known: {', '.join(MODES)}")
    options = dict(payload.get("options") or {})
    unknown = sorted(set(options) - set(QUERY_OPTIONS))
    if unknown:
        raise ValueError(f"unknown query options: {', '.join(unknown)}; known: {', '.join(QUERY_OPTIONS)}")
    tracker = endpoint.use(payload)
    rag = lightrag_for(str(workdir), kept["embedding_dim"])
    result = run(rag.aquery_llm(payload["question"], QueryParam(mode=payload["mode"], **options)))
    # aquery_llm turns an exception into a failure status; "no results" is LightRAG's own answer.
    if result.get("status") == "failure" and result.get("metadata", {}).get("failure_reason") != "no_results":
        raise RuntimeError(f"LightRAG {payload['mode']} query: {result.get('message')}")
    answer = result["llm_response"]["content"]
    return {
        "answer": answer,
        "context": context_items(result.get("data") or {}, kept),
        "usage": usage(tracker),
    }


def context_items(data: dict[str, Any], kept: dict[str, Any]) -> list[dict[str, Any]]:
    """LightRAG's retrieved entities, relations and chunks as protocol items, with kit ids."""

    def kit_chunks(source_id: str) -> list[str]:
        return [kit for chunk in source_id.split(GRAPH_FIELD_SEP) for kit in kept["chunks"].get(chunk, [])]

    def kit_entities(*names: str) -> list[str]:
        return [kit for name in names for kit in kept["entities"].get(name, [])]

    items = []
    for entity in data.get("entities", []):
        name = entity["entity_name"]
        items.append(
            {
                "kind": "entity",
                "text": entity.get("description", ""),
                "id": name,
                "name": name,
                "entity_ids": kit_entities(name),
                "chunk_ids": kit_chunks(entity.get("source_id", "")),
            }
        )
    for relation in data.get("relationships", []):
        source, target = relation["src_id"], relation["tgt_id"]
        items.append(
            {
                "kind": "relation",
                "text": relation.get("description", ""),
                "id": compute_mdhash_id(
                    "".join(sorted((source, target))), prefix="rel-"
                ),  # as LightRAG keys it
                "source": source,
                "target": target,
                "relation_ids": kept["relations"].get(relation_key(source, target), []),
                "entity_ids": kit_entities(source, target),
                "chunk_ids": kit_chunks(relation.get("source_id", "")),
            }
        )
    for chunk in data.get("chunks", []):
        items.append(
            {
                "kind": "chunk",
                "text": chunk.get("content", ""),
                "id": chunk.get("chunk_id", ""),
                "chunk_ids": kept["chunks"].get(chunk.get("chunk_id", ""), []),
            }
        )
    return items


def close() -> None:
    """Flush LightRAG's storages and stop its queue workers before the loop closes."""
    for rag in instances.values():
        run(rag.finalize_storages())
    pending = asyncio.all_tasks(loop)
    for task in pending:
        task.cancel()
    run(asyncio.gather(*pending, return_exceptions=True))
    loop.close()


if __name__ == "__main__":
    try:
        protocol.serve({"hello": protocol.hello("lightrag", "lightrag-hku"), "index": index, "query": query})
    finally:
        close()
