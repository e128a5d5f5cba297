"""LLM graph extraction, GraphRAG's way: element instances per chunk, merged into one graph.

Per chunk, one structured call returns entities (name, type, description) and relations (source,
target, description, strength 1-10); optional gleaning rounds ask for what was missed, and an
optional second call extracts claims. Instances merge by normalized name through
`index.merge_extractions`, which sums instance weights: a relation instance weighs its strength
(GraphRAG's code) or 1 (`index.relation_weight: occurrences`, the number of occurrences the GraphRAG
paper's 3.1.3 names), so an edge weighs its summed strength or its occurrences. An element extracted
from several chunks with differing descriptions gets one LLM summary of them (bounded). A relation or
claim endpoint the model did not list as an entity becomes an entity of unknown type (""), as GraphRAG
adds missing nodes, and is counted. A reply that fails after the LLM layer's repair round leaves its
chunk without a graph and a row in `extraction_failures`; it is never turned into an empty graph.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Any, Literal

import pandas as pd
from pydantic import BaseModel, Field, create_model

from ragtrial.config.index import IndexSettings
from ragtrial.index.merge_extractions import (
    ENTITY_INSTANCE,
    RELATION_INSTANCE,
    entity_key,
    merge_extractions,
    normalize_name,
)
from ragtrial.index.tables import SCHEMAS, conform_table, short_hash
from ragtrial.llm.client import LLM
from ragtrial.llm.errors import LLMError
from ragtrial.llm.plan import StagePlan, counted, frame_tokens, projected
from ragtrial.prompts import Prompt, load_prompt
from ragtrial.records import ordered_union

ORIGIN = "llm"
UNKNOWN_TYPE = ""  # type of an entity known only as a relation or claim endpoint
NO_OBJECT = "NONE"
CLAIM_STATUS = Literal["TRUE", "FALSE", "SUSPECTED"]
Strength = Literal[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]  # an enum, so llama.cpp's grammar enforces the range
PROMPTS = ("extract_graph", "glean_graph", "extract_claims", "summarize_descriptions")


# ---------------------------------------------------------------- reply schemas


def _text(max_chars: int | None) -> Any:
    return Annotated[str, Field(max_length=max_chars)]


def _name() -> Any:
    return Annotated[str, Field(min_length=1, max_length=48)]


def _items(model: type[BaseModel], max_items: int | None) -> Any:
    return Annotated[list[model], Field(max_length=max_items)]  # type: ignore[valid-type]  # built at run time


@cache
def graph_schema(
    entity_types: tuple[str, ...], max_items: int | None, max_chars: int | None
) -> type[BaseModel]:
    """Reply schema of one extraction call. The bounds become maxItems/maxLength in the JSON schema,
    so a grammar-constrained reply closes its JSON before max_tokens instead of being cut off.
    """
    entity = create_model(
        "Entity",
        name=(_name(), ...),
        type=(Literal[entity_types], ...),  # type: ignore[arg-type]  # a Literal built at run time
        description=(_text(max_chars), ...),
    )
    relation = create_model(
        "Relation",
        source=(_name(), ...),
        target=(_name(), ...),
        description=(_text(max_chars), ...),
        strength=(Strength, ...),
    )
    return create_model(
        "GraphExtraction",
        entities=(_items(entity, max_items), ...),
        relations=(_items(relation, max_items), ...),
    )


@cache
def claims_schema(max_items: int | None, max_chars: int | None) -> type[BaseModel]:
    date = Annotated[str | None, Field(max_length=10)]
    claim = create_model(
        "Claim",
        subject=(_name(), ...),
        object=(_name(), ...),
        claim_type=(Annotated[str, Field(max_length=40)], ...),
        status=(CLAIM_STATUS, ...),
        start_date=(date, ...),
        end_date=(date, ...),
        description=(_text(max_chars), ...),
    )
    return create_model("ClaimExtraction", claims=(_items(claim, max_items), ...))


# ---------------------------------------------------------------- one chunk


@dataclass
class ChunkGraph:
    """Instances extracted from one chunk (rows of the instance/claim columns) and what went wrong."""

    chunk_id: str
    entities: list[tuple] = field(default_factory=list)  # ENTITY_INSTANCE
    relations: list[tuple] = field(default_factory=list)  # RELATION_INSTANCE
    claims: list[dict[str, Any]] = field(default_factory=list)
    failures: list[tuple[str, str, str, str]] = field(default_factory=list)
    endpoints_added: int = 0
    gleaning_rounds: int = 0
    gleaned_entities: int = 0

    def entity_keys(self) -> set[str]:
        return {normalize_name(row[1]) for row in self.entities}

    def add_entity(self, name: str, type_: str, description: str) -> None:
        self.entities.append(
            (
                entity_key(normalize_name(name)),
                name.strip(),
                type_,
                description.strip(),
                [self.chunk_id],
                ORIGIN,
            )
        )

    def endpoint(self, name: str) -> str:
        """Entity id of a relation/claim endpoint, adding it as an unknown-type entity if unlisted."""
        key = normalize_name(name)
        if key not in self.entity_keys():
            self.add_entity(name, UNKNOWN_TYPE, "")
            self.endpoints_added += 1
        return entity_key(key)

    def fail(self, stage: str, err: LLMError | str, kind: str = "") -> None:
        kind = kind or getattr(err, "kind", "error")
        self.failures.append((self.chunk_id, stage, kind, str(err)[:500]))


def _named(chunk: ChunkGraph, stage: str, what: str, *names: str) -> bool:
    """True when every name has something left after normalizing; else a failure row."""
    empty = [n for n in names if n != NO_OBJECT and not normalize_name(n)]
    if empty:
        chunk.fail(stage, f"{what} with a name that normalizes to nothing: {empty[0]!r}", "empty_name")
    return not empty


def _add_graph(chunk: ChunkGraph, reply: Any, stage: str, settings: IndexSettings) -> None:
    """A graph_schema reply's elements as instances; a relation instance weighs its strength or 1
    (`settings.relation_weight`), so the merged edge weighs the summed strength or the occurrences.
    """
    for e in reply.entities:
        if _named(chunk, stage, "entity", e.name):
            chunk.add_entity(e.name, e.type, e.description)
    for r in reply.relations:
        if _named(chunk, stage, "relation", r.source, r.target):
            chunk.relations.append(
                (
                    chunk.endpoint(r.source),
                    chunk.endpoint(r.target),
                    r.description.strip(),
                    float(r.strength) if settings.relation_weight == "strength" else 1.0,
                    [chunk.chunk_id],
                )
            )


def extraction_request(
    text: str, settings: IndexSettings
) -> tuple[list[dict[str, str]], type[BaseModel], Prompt]:
    """The first extraction request of a chunk: its messages, reply schema and prompt (sent by
    `extract_chunk`, planned by `planned_calls`).
    """
    schema = graph_schema(tuple(settings.entity_types), settings.max_items, settings.text_max_chars)
    prompt = load_prompt("extract_graph")
    return prompt.render(entity_types=", ".join(settings.entity_types), text=text), schema, prompt


def extract_chunk(llm: LLM, chunk_id: str, text: str, settings: IndexSettings) -> ChunkGraph:
    """Entities and relations of one chunk (plus gleaning rounds and claims when enabled)."""
    chunk = ChunkGraph(chunk_id)
    messages, schema, prompt = extraction_request(text, settings)
    reply: Any  # a graph_schema model: its fields are made at run time
    try:
        reply = llm.structured(
            messages,
            schema,
            stage="extract_graph",
            method=ORIGIN,
            prompt=prompt,
            max_tokens=settings.extraction_max_tokens,
        )
    except LLMError as err:
        chunk.fail("extract_graph", err)
        return chunk
    _add_graph(chunk, reply, "extract_graph", settings)
    glean = load_prompt("glean_graph")
    for _ in range(settings.max_gleanings):
        messages = [*messages, {"role": "assistant", "content": reply.model_dump_json()}, *glean.render()]
        try:
            reply = llm.structured(
                messages,
                schema,
                stage="glean_graph",
                method=ORIGIN,
                prompt=glean,
                max_tokens=settings.extraction_max_tokens,
            )
        except LLMError as err:
            chunk.fail("glean_graph", err)
            break
        chunk.gleaning_rounds += 1
        known = chunk.entity_keys()
        chunk.gleaned_entities += len({normalize_name(e.name) for e in reply.entities} - known)
        # GraphRAG asks the model whether more is missing; an empty round answers that for free.
        if not reply.entities and not reply.relations:
            break
        _add_graph(chunk, reply, "glean_graph", settings)
    if settings.claims:
        _extract_claims(llm, chunk, text, settings)
    return chunk


def _extract_claims(llm: LLM, chunk: ChunkGraph, text: str, settings: IndexSettings) -> None:
    prompt = load_prompt("extract_claims")
    names = list(dict.fromkeys(row[1] for row in chunk.entities if row[2] != UNKNOWN_TYPE))
    try:
        reply: Any = llm.structured(  # a claims_schema model: its fields are made at run time
            prompt.render(entity_names=", ".join(names) or NO_OBJECT, text=text),
            claims_schema(settings.max_items, settings.text_max_chars),
            stage="extract_claims",
            method=ORIGIN,
            prompt=prompt,
            max_tokens=settings.extraction_max_tokens,
        )
    except LLMError as err:
        chunk.fail("extract_claims", err)
        return
    for c in reply.claims:
        if not _named(chunk, "extract_claims", "claim", c.subject, c.object):
            continue
        has_object = c.object.strip().upper() != NO_OBJECT
        chunk.claims.append(
            {
                "subject_id": chunk.endpoint(c.subject),
                "object_id": chunk.endpoint(c.object) if has_object else None,
                "claim_type": c.claim_type.strip().upper(),
                "status": c.status,
                "start_date": c.start_date,
                "end_date": c.end_date,
                "description": c.description.strip(),
                "chunk_ids": [chunk.chunk_id],
            }
        )


# ---------------------------------------------------------------- the corpus


@dataclass
class LLMGraph:
    entities: pd.DataFrame
    relations: pd.DataFrame
    claims: pd.DataFrame
    failures: pd.DataFrame
    stats: dict[str, Any]


def sample_chunks(chunks: pd.DataFrame, limit: int | None, seed: int) -> pd.DataFrame:
    """A seeded sample of `limit` chunks in corpus order (all chunks when limit is None)."""
    if limit is None or limit >= len(chunks):
        return chunks
    keep = sorted(random.Random(f"llm-chunks:{seed}").sample(range(len(chunks)), limit))
    return chunks.iloc[keep]


def merge_claims(instances: list[dict[str, Any]]) -> pd.DataFrame:
    """Identical claims (same subject, object, type, status, dates, description) become one row with
    the union of their chunk ids; the id hashes those fields.
    """
    merged: dict[str, dict[str, Any]] = {}
    for claim in instances:
        fields = [
            claim[k]
            for k in (
                "subject_id",
                "object_id",
                "claim_type",
                "status",
                "start_date",
                "end_date",
                "description",
            )
        ]
        claim_id = "clm-" + short_hash(*fields)
        row = merged.setdefault(claim_id, {"claim_id": claim_id, **claim, "chunk_ids": []})
        row["chunk_ids"] = ordered_union([row["chunk_ids"], claim["chunk_ids"]])
    return conform_table("claims", pd.DataFrame(list(merged.values()), columns=list(SCHEMAS["claims"])))


def distinct_descriptions(graphs: list[ChunkGraph]) -> dict[str, list[str]]:
    """Distinct non-empty descriptions per merged element: entity id, or relation pair "a|b" (sorted)."""
    found: dict[str, dict[str, None]] = {}
    for g in graphs:
        for eid, _, _, desc, _, _ in g.entities:
            if desc:
                found.setdefault(eid, {})[desc] = None
        for src, tgt, desc, _, _ in g.relations:
            if desc and src != tgt:
                found.setdefault("|".join(sorted((src, tgt))), {})[desc] = None
    return {k: list(v) for k, v in found.items()}


def _summary_candidates(
    entities: pd.DataFrame, relations: pd.DataFrame, descriptions: dict[str, list[str]]
) -> list[tuple[str, str, str, str]]:
    """(table, element id, label, descriptions key) of the elements from several chunks with differing
    descriptions, most descriptions first (ties by id, so the choice is deterministic).
    """
    names = dict(zip(entities["entity_id"], entities["name"], strict=True))
    found = []
    for eid, chunk_ids in zip(entities["entity_id"], entities["chunk_ids"], strict=True):
        found.append(("entities", eid, names[eid], eid, len(chunk_ids)))
    for rid, src, tgt, chunk_ids in zip(
        relations["relation_id"],
        relations["source_id"],
        relations["target_id"],
        relations["chunk_ids"],
        strict=True,
    ):
        found.append(
            ("relations", rid, f"{names[src]}, {names[tgt]}", "|".join(sorted((src, tgt))), len(chunk_ids))
        )
    ranked = sorted(
        (-len(descriptions.get(key, [])), element_id, table, label, key)
        for table, element_id, label, key, n_chunks in found
        if n_chunks > 1 and len(descriptions.get(key, [])) > 1
    )
    return [(table, element_id, label, key) for _, element_id, table, label, key in ranked]


def summarize_descriptions(
    llm: LLM, tables: dict[str, pd.DataFrame], descriptions: dict[str, list[str]], settings: IndexSettings
) -> tuple[list[tuple[str, str, str, str]], dict[str, int]]:
    """Replace, in `tables` ("entities", "relations"), the description of each element extracted from
    several chunks with differing descriptions by one LLM summary of them, at most `max_summaries`;
    the others keep their newline-joined descriptions. Returns failure rows and counts.
    """
    candidates = _summary_candidates(tables["entities"], tables["relations"], descriptions)
    chosen = candidates if settings.max_summaries is None else candidates[: settings.max_summaries]
    prompt = load_prompt("summarize_descriptions")

    def summarize(candidate: tuple[str, str, str, str]) -> str | LLMError:
        _, _, label, key = candidate
        lines = "\n".join(f"- {d}" for d in descriptions[key])
        try:
            reply = llm.complete(
                prompt.render(name=label, descriptions=lines),
                stage="summarize_descriptions",
                method=ORIGIN,
                prompt=prompt,
                max_tokens=settings.summary_max_tokens,
            )
        except LLMError as err:
            return err
        return reply.text.strip()

    failures = []
    summaries = llm.fan_out(
        summarize, chosen, label="summarize_descriptions", key=lambda c: (c[2], *descriptions[c[3]])
    )
    for (table, element_id, _, _), summary in zip(chosen, summaries, strict=True):
        if isinstance(summary, LLMError):
            failures.append(("", "summarize_descriptions", summary.kind, f"{element_id}: {summary}"[:500]))
            continue
        frame = tables[table]
        id_col = "entity_id" if table == "entities" else "relation_id"
        frame.loc[frame[id_col] == element_id, "description"] = summary
    done = len(chosen) - len(failures)
    return failures, {
        "candidates": len(candidates),
        "summarized": done,
        "failed": len(failures),
        "not_summarized": len(candidates) - done,
    }


def extract_chunks(llm: LLM, chunks: list[tuple[str, str]], settings: IndexSettings) -> list[ChunkGraph]:
    """`extract_chunk` of each (chunk id, text), concurrently, in input order: one unit per chunk (its
    gleaning rounds and claims call stay in order inside it); a chunk text that recurs is read from
    the cache after the first.
    """
    return llm.fan_out(
        lambda chunk: extract_chunk(llm, *chunk, settings), chunks, label="extract_graph", key=lambda c: c[1]
    )


def extract_llm_graph(
    llm: LLM,
    chunks: pd.DataFrame,
    settings: IndexSettings,
    extract: Callable[[list[tuple[str, str]]], list[ChunkGraph]] | None = None,
) -> LLMGraph:
    """The LLM graph of (a seeded sample of) the chunks, merged, summarized, with its failures.
    `extract` makes the per-chunk calls (default `extract_chunks` with `llm`; `index.distribute` makes
    them on a Ray cluster); the merge and the description summaries are made here.
    """
    attempted = sample_chunks(chunks, settings.llm_max_chunks, settings.seed)
    units = list(zip(attempted["chunk_id"], attempted["text"], strict=True))
    graphs = extract(units) if extract else extract_chunks(llm, units, settings)
    entities, relations = merge_extractions(
        [
            (
                pd.DataFrame(g.entities, columns=ENTITY_INSTANCE),
                pd.DataFrame(g.relations, columns=RELATION_INSTANCE),
            )
            for g in graphs
        ]
    )
    tables = {"entities": entities.copy(), "relations": relations.copy()}
    summary_failures, summaries = summarize_descriptions(llm, tables, distinct_descriptions(graphs), settings)
    entities, relations = tables["entities"], tables["relations"]
    failures = [f for g in graphs for f in g.failures] + summary_failures
    stages = Counter(f[1] for f in failures)
    failed_chunks = {g.chunk_id for g in graphs for f in g.failures if f[1] == "extract_graph"}
    stats = {
        "chunks": len(chunks),
        "attempted_chunks": len(attempted),
        "skipped_chunk_ids": sorted(set(chunks["chunk_id"]) - set(attempted["chunk_id"])),
        "failed_chunks": len(failed_chunks),
        "failures_by_stage": dict(sorted(stages.items())),
        "endpoint_instances_added": sum(g.endpoints_added for g in graphs),
        "entities_from_endpoints_only": int((entities["type"] == UNKNOWN_TYPE).sum()),
        "gleaning_rounds": sum(g.gleaning_rounds for g in graphs),
        "gleaned_entities": sum(g.gleaned_entities for g in graphs),
        "description_summaries": summaries,
    }
    return LLMGraph(
        entities,
        relations,
        merge_claims([c for g in graphs for c in g.claims]),
        conform_table(
            "extraction_failures", pd.DataFrame(failures, columns=list(SCHEMAS["extraction_failures"]))
        ),
        stats,
    )


# ---------------------------------------------------------------- before the calls (ragtrial estimate)


def planned_calls(llm: LLM, chunks: pd.DataFrame, settings: IndexSettings) -> list[StagePlan]:
    """The calls `extract_llm_graph` will make on `chunks`, none sent. The first extraction per
    sampled chunk is built exactly as `extract_chunk` builds it (tokens counted, cache looked up);
    gleaning rounds stop at the first empty reply (upper bound); the claims call follows the entities
    the model listed (count exact, tokens projected from the prompt with no names); description
    summaries need elements the model described differently in several chunks (projected: at most
    `max_summaries`, else one per sampled chunk).
    """
    attempted = sample_chunks(chunks, settings.llm_max_chunks, settings.seed)
    requests = [extraction_request(text, settings) for text in attempted["text"]]
    first = [
        llm.plan(
            messages, schema, stage="extract_graph", prompt=prompt, max_tokens=settings.extraction_max_tokens
        )
        for messages, schema, prompt in requests
    ]
    prompt, glean = load_prompt("extract_graph"), load_prompt("glean_graph")
    n, cap = len(first), settings.extraction_max_tokens
    plans = [counted("extract_graph", first)]
    if settings.max_gleanings:
        # round k repeats the conversation so far: the first prompt, k replies at their cap, k asks
        rounds = range(1, settings.max_gleanings + 1)
        tokens = sum(r.prompt_tokens + k * (cap + frame_tokens(glean)) for r in first for k in rounds)
        plans.append(
            projected(
                "glean_graph",
                n * len(rounds),
                tokens,
                cap,
                "upper bound",
                "json",
                "stops at the first round that finds nothing",
            )
        )
    if settings.claims:
        claims = load_prompt("extract_claims")
        chunk_text = sum(r.prompt_tokens for r in first) - n * frame_tokens(prompt)
        plans.append(
            projected(
                "extract_claims",
                n,
                n * frame_tokens(claims) + chunk_text,
                cap,
                "exact",
                "json",
                "tokens without the entity names the model will list",
            )
        )
    summarize = load_prompt("summarize_descriptions")
    bounded = settings.max_summaries is not None
    summaries = n if settings.max_summaries is None else settings.max_summaries
    plans.append(
        projected(
            "summarize_descriptions",
            summaries,
            summaries * (frame_tokens(summarize) + 3 * (settings.text_max_chars or 200) // 4),
            settings.summary_max_tokens,
            "upper bound" if bounded else "projected",
            "text",
            "elements described differently in several chunks"
            + (f" (index.max_summaries {summaries})" if bounded else ", projected one per sampled chunk"),
        )
    )
    return plans
