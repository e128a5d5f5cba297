"""Graph-text-grounded questions (node / edge / subgraph level): a sampled entity, relation or
random-walk subgraph plus its source chunks (for subgraphs: their summaries) prompt one question
each.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import networkx as nx
import numpy as np

from ragtrial.config.questions import QuestionsSettings
from ragtrial.index.tables import GraphIndex, select_origin
from ragtrial.llm.client import LLM
from ragtrial.llm.errors import LLMError
from ragtrial.llm.structured import at_length_cap
from ragtrial.prompts import load_prompt
from ragtrial.questions.generated_records import (
    Failure,
    Generated,
    GeneratedQuestion,
    QuestionAsker,
    one_question_schema,
    shorten,
)
from ragtrial.records import ordered_union
from ragtrial.retrieval.packing import clip_tokens

# ---------------------------------------------------------------- graph-text-grounded sampling


def question_graph(index: GraphIndex, origin: str | None) -> GraphIndex:
    """The graph questions are sampled from and linked to: the entities of one origin (all when
    None) and the relations between them. GraphRAG imports keep relations whose endpoint is not in
    the entities table (import_graphrag_output records them); those cannot be sampled or walked.
    """
    if origin is not None:
        index = select_origin(index, origin)
        if index.entities.empty:
            raise ValueError(f"questions.graph_origin {origin!r}: the index has no entities of that origin")
    known = set(index.entities["entity_id"])
    rels = index.relations
    return dataclasses.replace(
        index, relations=rels[rels["source_id"].isin(known) & rels["target_id"].isin(known)]
    )


def _rng(seed: int, level: str) -> np.random.Generator:
    # One stream per level, so changing one level's count leaves the other levels' samples alone.
    return np.random.default_rng([seed, ["node", "edge", "subgraph"].index(level)])


def sample_nodes(index: GraphIndex, n: int, seed: int) -> list[str]:
    """N entity ids with source chunks, uniformly without replacement (a smaller n is a prefix)."""
    pool = sorted(index.entities.loc[index.entities["chunk_ids"].map(len) > 0, "entity_id"])
    return [pool[i] for i in _rng(seed, "node").permutation(len(pool))[:n]]


def sample_edges(index: GraphIndex, n: int, seed: int) -> list[str]:
    """N relation ids whose two endpoints are entities of the index, uniformly without replacement."""
    known = set(index.entities["entity_id"])
    rels = index.relations
    pool = sorted(rels.loc[rels["source_id"].isin(known) & rels["target_id"].isin(known), "relation_id"])
    return [pool[i] for i in _rng(seed, "edge").permutation(len(pool))[:n]]


@dataclass(frozen=True)
class Walk:
    seed: str
    nodes: list[str]  # first-visit order
    edges: list[tuple[str, str]]  # distinct undirected edges, first-traversal order
    steps: int
    attempts: int  # seeds tried until this walk reached the threshold


def walk_graph(index: GraphIndex) -> nx.Graph:
    """The undirected entity graph of `question_graph(index)` without self-loops (no hop)."""
    graph = nx.Graph(question_graph(index, None).to_networkx())
    graph.remove_edges_from(list(nx.selfloop_edges(graph)))
    return graph


def random_walk(
    graph: nx.Graph, start: str, min_hops: int, max_steps: int, rng: np.random.Generator
) -> Walk | None:
    """Uniform random walk from `start` until it has crossed `min_hops` distinct edges (None if it
    does not within `max_steps`, e.g. because the start's component is too small).
    """
    node = start
    nodes: dict[str, None] = {start: None}
    edges: dict[tuple[str, str], None] = {}
    for step in range(1, max_steps + 1):
        neighbours = sorted(graph.neighbors(node))
        if not neighbours:
            return None
        nxt = neighbours[rng.integers(len(neighbours))]
        edges.setdefault((min(node, nxt), max(node, nxt)), None)
        nodes.setdefault(nxt, None)
        node = nxt
        if len(edges) >= min_hops:
            return Walk(start, list(nodes), list(edges), step, 0)
    return None


def sample_walks(index: GraphIndex, n: int, cfg: QuestionsSettings) -> list[Walk | None]:
    """N subgraphs by random walk from uniformly sampled seeds, resampling the seed (up to
    `max_walk_attempts` times) whenever a walk stays below `min_hops` distinct hops.
    """
    graph, rng = walk_graph(index), _rng(cfg.seed, "subgraph")
    seeds = sorted(node for node, degree in graph.degree if degree > 0)
    walks: list[Walk | None] = []
    for _ in range(n):
        walk = None
        for attempt in range(1, cfg.max_walk_attempts + 1 if seeds else 1):
            start = seeds[rng.integers(len(seeds))]
            if walk := random_walk(graph, start, cfg.min_hops, cfg.max_walk_steps, rng):
                walk = Walk(walk.seed, walk.nodes, walk.edges, walk.steps, attempt)
                break
        walks.append(walk)
    return walks


# ---------------------------------------------------------------- graph-text-grounded generation


@dataclass
class _Structure:
    """What one graph-level question is generated from, and the provenance it leaves."""

    anchor_id: str
    entity_ids: list[str]
    relation_ids: list[str]
    chunk_ids: list[str]
    input_chunk_ids: list[str]
    values: dict[str, str]
    walk: Walk | None = None


class _GraphContext:
    def __init__(self, index: GraphIndex, cfg: QuestionsSettings):
        self.cfg = cfg
        self.entities = index.entities.set_index("entity_id")
        self.relations = index.relations.set_index("relation_id")
        self.chunks = index.chunks.set_index("chunk_id")
        self.graph = walk_graph(index)

    def source_text(self, chunk_ids: list[str]) -> str:
        return "\n\n".join(
            clip_tokens(self.chunks.at[c, "text"], self.cfg.chunk_tokens, " ...") for c in chunk_ids
        )

    def node(self, eid: str) -> _Structure:
        e, used = self.entities.loc[eid], list(self.entities.at[eid, "chunk_ids"])[: self.cfg.source_chunks]
        values = {
            "name": e["name"],
            "type": e["type"] or "entity",
            "description": shorten(e["description"], 600),
            "source_text": self.source_text(used),
        }
        return _Structure(eid, [eid], [], list(e["chunk_ids"]), used, values)

    def edge(self, rid: str) -> _Structure:
        r = self.relations.loc[rid]
        a, b = self.entities.loc[r["source_id"]], self.entities.loc[r["target_id"]]
        chunks = list(r["chunk_ids"]) or ordered_union([a["chunk_ids"], b["chunk_ids"]])
        used = chunks[: self.cfg.source_chunks]
        values = {
            "source_name": a["name"],
            "target_name": b["name"],
            "source_description": shorten(a["description"], 300),
            "target_description": shorten(b["description"], 300),
            "relation_description": shorten(r["description"], 400),
            "source_text": self.source_text(used),
        }
        return _Structure(rid, [r["source_id"], r["target_id"]], [rid], chunks, used, values)

    def subgraph(self, walk: Walk) -> _Structure:
        rel_ids = [rid for a, b in walk.edges for rid in self.graph.edges[a, b]["relation_ids"]]
        cited = Counter(c for eid in walk.nodes for c in self.entities.at[eid, "chunk_ids"])
        cited.update(c for rid in rel_ids for c in self.relations.at[rid, "chunk_ids"])
        # The chunks most of the subgraph's elements come from are summarized (Counter keeps first-seen
        # order among ties).
        used = [c for c, _ in cited.most_common(self.cfg.summary_chunks)]
        entities = [
            f"- {self.entities.at[e, 'name']}: {shorten(self.entities.at[e, 'description'], 80)}"
            for e in walk.nodes[: self.cfg.prompt_entities]
        ]
        relations = [
            f"- {self.entities.at[self.relations.at[r, 'source_id'], 'name']} -- "
            f"{self.entities.at[self.relations.at[r, 'target_id'], 'name']}: "
            f"{shorten(self.relations.at[r, 'description'], 100)}"
            for r in rel_ids[: self.cfg.prompt_relations]
        ]
        values = {"entities": "\n".join(entities), "relations": "\n".join(relations)}
        return _Structure(walk.seed, walk.nodes, rel_ids, list(cited), used, values, walk)

    def doc_ids(self, chunk_ids: list[str]) -> list[str]:
        return list(dict.fromkeys(self.chunks.loc[chunk_ids, "doc_id"])) if chunk_ids else []


def _summaries(llm: LLM, ctx: _GraphContext, chunk_ids: list[str]) -> list[str | LLMError]:
    """One summary line (or the failure) per chunk of one walk, in the walk's order. A chunk several
    walks touch is summarized once and replayed from the cache; walks running at once send it once
    (the cache middleware holds the second request until the first is stored). Kept walk by walk:
    the embedded server reuses the previous request's prompt prefix, so its reply can depend on the
    request before it, and asking every summary first changed the default batch's questions.
    """
    prompt = load_prompt("summarize_chunks")
    out: list[str | LLMError] = []
    for cid in chunk_ids:
        try:
            done = llm.complete(
                prompt.render(text=ctx.source_text([cid])),
                stage="summarize_chunks",
                method="graph",
                prompt=prompt,
                max_tokens=ctx.cfg.summary_max_tokens,
            )
        except LLMError as err:
            out.append(err)
            continue
        out.append(f"- {' '.join(done.text.split())}")  # never blank: the client fails a blank reply
    return out


def _with_summaries(
    llm: LLM, ctx: _GraphContext, item: _Structure, ask: QuestionAsker, qid: str
) -> dict[str, str] | None:
    """The prompt values of a subgraph question: its chunks' summaries added (None when they all
    failed); each failed summary is a failure row of the question.
    """
    summaries = []
    for cid, summary in zip(item.input_chunk_ids, _summaries(llm, ctx, item.input_chunk_ids), strict=True):
        if isinstance(summary, LLMError):
            ask.failures.append(
                Failure(
                    item_id=f"{qid}:{cid}",
                    generator="graph",
                    stage="summarize_chunks",
                    kind=summary.kind,
                    detail=str(summary)[:500],
                )
            )
            continue
        summaries.append(summary)
    if not summaries:
        ask.failures.append(
            Failure(
                item_id=qid,
                generator="graph",
                stage="questions_subgraph",
                kind="no_summary",
                detail="every chunk summary failed",
            )
        )
        return None
    return {**item.values, "summaries": "\n".join(summaries)}


def graph_questions(llm: LLM, index: GraphIndex, cfg: QuestionsSettings) -> Generated:
    """`per_level` questions for each of `levels`, one call per sampled structure."""
    ctx, ask, rows = _GraphContext(index, cfg), QuestionAsker(llm, "graph", cfg.temperature), []
    schema = one_question_schema(cfg.question_max_chars)

    def question(ask: QuestionAsker, numbered: tuple[int, _Structure], level: str) -> list[GeneratedQuestion]:
        k, item = numbered
        qid = f"graph-{level}-{k:03d}"
        values: Mapping[str, Any] | None = (
            _with_summaries(llm, ctx, item, ask, qid) if level == "subgraph" else item.values
        )
        reply = (
            ask(f"questions_{level}", schema, qid, cfg.max_tokens, **values) if values is not None else None
        )
        if reply is None:
            return []
        walk = item.walk
        return [
            GeneratedQuestion(
                question_id=qid,
                question=reply.question,
                at_length_cap=at_length_cap(reply.question, cfg.question_max_chars),
                generator="graph",
                level=level,
                anchor_id=item.anchor_id,
                entity_ids=item.entity_ids,
                relation_ids=item.relation_ids,
                chunk_ids=item.chunk_ids,
                input_chunk_ids=item.input_chunk_ids,
                doc_ids=ctx.doc_ids(item.chunk_ids),
                prompt=load_prompt(f"questions_{level}").tag,
                walk_steps=walk.steps if walk else 0,
                distinct_hops=len(walk.edges) if walk else 0,
            )
        ]

    for level in cfg.levels:
        if level == "node":
            items: list[_Structure | None] = [
                ctx.node(e) for e in sample_nodes(index, cfg.per_level, cfg.seed)
            ]
        elif level == "edge":
            items = [ctx.edge(r) for r in sample_edges(index, cfg.per_level, cfg.seed)]
        else:
            walks = sample_walks(index, cfg.per_level, cfg)
            for k in (k for k, w in enumerate(walks) if w is None):
                ask.failures.append(
                    Failure(
                        item_id=f"graph-subgraph-{k:03d}",
                        generator="graph",
                        stage="random_walk",
                        kind="walk_too_small",
                        detail=f"no walk reached {cfg.min_hops} distinct hops "
                        f"in {cfg.max_walk_attempts} seeds",
                    )
                )
            items = [ctx.subgraph(w) if w else None for w in walks]

        numbered = [(k, item) for k, item in enumerate(items) if item is not None]
        rows += [
            q
            for done in ask.fan_out(
                partial(question, level=level),
                numbered,
                label=f"questions_{level}",
                key=lambda n: (*n[1].values.items(), *n[1].input_chunk_ids),
            )
            for q in done
        ]
    return Generated.of(rows, ask.failures)
