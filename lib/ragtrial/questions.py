"""Question generation and the question-quality measures: entity distribution and retrieval relevance.

Generators (each returns a `Generated`: question rows with provenance, plus recorded failures):
- summary-based (MGRAG / LightRAG practice): the head and tail of every document form a data-set
  description, from which the model asks the questions a user might ask;
- persona-based (GraphRAG, Algorithm 1): K personas, N tasks per persona, M questions per pair;
- graph-text-grounded (node / edge / subgraph level): a sampled entity, relation or random-walk
  subgraph plus its source chunks (for subgraphs: their summaries) prompt one question each;
- ground truth: the data set's own questions (the generated corpus has gold answers, entities,
  edges and documents), stratified by category.
Model output that fails validation is retried once by the LLM layer, then recorded in `failures`
(item id, generator, stage, kind) and never turned into an empty question.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Any

import networkx as nx
import numpy as np
import pandas as pd
from pydantic import BaseModel, Field, StringConstraints, create_model

from ragtrial.build import select_origin
from ragtrial.config import QuestionsSettings
from ragtrial.graph import normalize_name
from ragtrial.index import GraphIndex
from ragtrial.llm import LLM, LLMError
from ragtrial.metrics import normalize_answer
from ragtrial.prompts import load_prompt
from ragtrial.records import Question, Record, records_frame
from ragtrial.tokens import get_encoding

Embed = Callable[[list[str]], np.ndarray]
# maxLength bounds a grammar-constrained reply (a base model otherwise runs on inside the string until
# max_tokens); 140 characters hold a one-sentence question.
QuestionText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=8, max_length=140)]


class GeneratedQuestion(Record):
    question_id: str
    question: str
    generator: str  # summary | persona | graph | ground_truth
    level: str  # node | edge | subgraph; summary; persona; the ground-truth category
    anchor_id: str = ""  # sampled entity / relation / walk seed (or first gold entity): questions pair on it
    entity_ids: list[str] = Field(default_factory=list)  # sampled node(s), walk nodes, linked gold entities
    relation_ids: list[str] = Field(default_factory=list)
    chunk_ids: list[str] = Field(default_factory=list)  # source chunks of the structure: the gold support
    input_chunk_ids: list[str] = Field(default_factory=list)  # chunks (or their summaries) the model saw
    doc_ids: list[str] = Field(default_factory=list)
    answers: list[str] = Field(default_factory=list)  # gold answers, when the data set has them
    prompt: str = ""  # prompt tag name@vN of the generating call
    persona: str = ""
    task: str = ""
    walk_steps: int = 0
    distinct_hops: int = 0


class Failure(Record):
    item_id: str
    generator: str
    stage: str
    kind: str
    detail: str


@dataclass
class Generated:
    questions: pd.DataFrame
    failures: pd.DataFrame

    @classmethod
    def of(cls, questions: list[GeneratedQuestion], failures: list[Failure]) -> Generated:
        return cls(records_frame(questions, GeneratedQuestion), records_frame(failures, Failure))

    @classmethod
    def concat(cls, parts: Iterable[Generated]) -> Generated:
        parts = list(parts)
        return cls(
            pd.concat([p.questions for p in parts], ignore_index=True),
            pd.concat([p.failures for p in parts], ignore_index=True),
        )


class OneQuestion(BaseModel):
    question: QuestionText


@cache
def _list_schema(key: str, n: int) -> type[BaseModel]:
    """{key: [exactly n strings]}: the bound lets a constrained decoder stop, and a short list fail."""
    return create_model(f"{key.title()}{n}", **{key: (list[QuestionText], Field(min_length=n, max_length=n))})


@dataclass
class _Asker:
    """Structured calls for one generator; a failed call becomes a `Failure` row and returns None."""

    llm: LLM
    generator: str
    temperature: float | None = None
    failures: list[Failure] = field(default_factory=list)

    def __call__(
        self,
        prompt_name: str,
        schema: type[BaseModel],
        item_id: str,
        max_tokens: int,
        replicate: int = 0,
        **values: Any,
    ) -> Any:
        prompt = load_prompt(prompt_name)
        sampling = {} if self.temperature is None else {"temperature": self.temperature}
        try:
            return self.llm.structured(
                prompt.render(**values),
                schema,
                stage=prompt_name,
                method=self.generator,
                prompt=prompt,
                replicate=replicate,
                max_tokens=max_tokens,
                **sampling,
            )
        except LLMError as err:
            self.failures.append(
                Failure(
                    item_id=item_id,
                    generator=self.generator,
                    stage=prompt_name,
                    kind=err.kind,
                    detail=str(err)[:500],
                )
            )
            return None


def _short(text: str, chars: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= chars else text[:chars] + "..."


def clip_tokens(text: str, n_tokens: int) -> str:
    enc = get_encoding()
    tokens = enc.encode_ordinary(text)
    return text if len(tokens) <= n_tokens else enc.decode(tokens[:n_tokens]) + " ..."


# ---------------------------------------------------------------- summary- and persona-based


def dataset_description(
    documents: pd.DataFrame, head_tokens: int, tail_tokens: int, max_tokens: int, head_offset: int = 0
) -> tuple[str, list[str]]:
    """Head (from token `head_offset`) and tail of each document, stacked in corpus order until
    `max_tokens`; returns (text, ids of the documents described).
    """
    enc = get_encoding()
    lines, used, total = [], [], 0
    for doc_id, title, text in zip(documents["doc_id"], documents["title"], documents["text"], strict=True):
        tokens = enc.encode_ordinary(text)
        head = tokens[head_offset : head_offset + head_tokens]
        tail = tokens[max(head_offset + head_tokens, len(tokens) - tail_tokens) :]
        if used and total + len(head) + len(tail) > max_tokens:
            break
        excerpt = enc.decode(head) + (" ... " + enc.decode(tail) if tail else "")
        lines.append(f"- {title}: {' '.join(excerpt.split())}" if title else f"- {' '.join(excerpt.split())}")
        used.append(doc_id)
        total += len(head) + len(tail)
    return "\n".join(lines), used


def summary_questions(llm: LLM, documents: pd.DataFrame, cfg: QuestionsSettings) -> Generated:
    """`summary_questions` questions from ceil(n / per_call) seeded calls on the data-set description."""
    description, doc_ids = dataset_description(
        documents, cfg.head_tokens, cfg.tail_tokens, cfg.description_max_tokens, cfg.head_offset_tokens
    )
    ask = _Asker(llm, "summary", cfg.temperature)
    per_call, rows = cfg.summary_per_call, []
    for call in range(math.ceil(cfg.summary_questions / per_call)):
        n = min(per_call, cfg.summary_questions - call * per_call)
        reply = ask(
            "questions_summary_based",
            _list_schema("questions", n),
            f"summary-call-{call}",
            cfg.max_tokens * n,
            replicate=call,
            description=description,
            n=n,
        )
        rows += [
            GeneratedQuestion(
                question_id=f"summary-{call * per_call + i:03d}",
                question=q,
                generator="summary",
                level="summary",
                doc_ids=doc_ids,
                prompt=load_prompt("questions_summary_based").tag,
            )
            for i, q in enumerate(reply.questions if reply else [])
        ]
    return Generated.of(rows, ask.failures)


def persona_questions(llm: LLM, documents: pd.DataFrame, cfg: QuestionsSettings) -> Generated:
    """GraphRAG's Algorithm 1: K personas, N tasks each, M questions per (persona, task): K x N x M."""
    description, doc_ids = dataset_description(
        documents, cfg.head_tokens, cfg.tail_tokens, cfg.description_max_tokens, cfg.head_offset_tokens
    )
    if cfg.corpus_description:
        description = f"{cfg.corpus_description}\n\n{description}"
    ask = _Asker(llm, "persona", cfg.temperature)
    k, n, m, budget = cfg.personas, cfg.tasks_per_persona, cfg.questions_per_task, cfg.max_tokens
    personas = ask(
        "questions_personas", _list_schema("items", k), "personas", budget * k, description=description, k=k
    )
    tag, rows = load_prompt("questions_persona_questions").tag, []
    for i, persona in enumerate(personas.items if personas else []):
        tasks = ask(
            "questions_persona_tasks",
            _list_schema("items", n),
            f"persona-{i}",
            budget * n,
            description=description,
            persona=persona,
            n=n,
        )
        for j, task in enumerate(tasks.items if tasks else []):
            reply = ask(
                "questions_persona_questions",
                _list_schema("questions", m),
                f"persona-{i}-task-{j}",
                budget * m,
                description=description,
                persona=persona,
                task=task,
                m=m,
            )
            rows += [
                GeneratedQuestion(
                    question_id=f"persona-{i}-{j}-{q_no}",
                    question=q,
                    generator="persona",
                    level="persona",
                    doc_ids=doc_ids,
                    prompt=tag,
                    persona=persona,
                    task=task,
                )
                for q_no, q in enumerate(reply.questions if reply else [])
            ]
    return Generated.of(rows, ask.failures)


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
    node, nodes, edges = start, {start: None}, {}
    for step in range(1, max_steps + 1):
        neighbours = sorted(graph.neighbors(node))
        if not neighbours:
            return None
        nxt = neighbours[rng.integers(len(neighbours))]
        edges.setdefault(tuple(sorted((node, nxt))), None)
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
        return "\n\n".join(clip_tokens(self.chunks.at[c, "text"], self.cfg.chunk_tokens) for c in chunk_ids)

    def node(self, eid: str) -> _Structure:
        e, used = self.entities.loc[eid], list(self.entities.at[eid, "chunk_ids"])[: self.cfg.source_chunks]
        values = {
            "name": e["name"],
            "type": e["type"] or "entity",
            "description": _short(e["description"], 600),
            "source_text": self.source_text(used),
        }
        return _Structure(eid, [eid], [], list(e["chunk_ids"]), used, values)

    def edge(self, rid: str) -> _Structure:
        r = self.relations.loc[rid]
        a, b = self.entities.loc[r["source_id"]], self.entities.loc[r["target_id"]]
        chunks = list(r["chunk_ids"]) or list(dict.fromkeys([*a["chunk_ids"], *b["chunk_ids"]]))
        used = chunks[: self.cfg.source_chunks]
        values = {
            "source_name": a["name"],
            "target_name": b["name"],
            "source_description": _short(a["description"], 300),
            "target_description": _short(b["description"], 300),
            "relation_description": _short(r["description"], 400),
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
            f"- {self.entities.at[e, 'name']}: {_short(self.entities.at[e, 'description'], 80)}"
            for e in walk.nodes[: self.cfg.prompt_entities]
        ]
        relations = [
            f"- {self.entities.at[self.relations.at[r, 'source_id'], 'name']} -- "
            f"{self.entities.at[self.relations.at[r, 'target_id'], 'name']}: "
            f"{_short(self.relations.at[r, 'description'], 100)}"
            for r in rel_ids[: self.cfg.prompt_relations]
        ]
        values = {"entities": "\n".join(entities), "relations": "\n".join(relations)}
        return _Structure(walk.seed, walk.nodes, rel_ids, list(cited), used, values, walk)

    def doc_ids(self, chunk_ids: list[str]) -> list[str]:
        return list(dict.fromkeys(self.chunks.loc[chunk_ids, "doc_id"])) if chunk_ids else []


def _summaries(llm: LLM, ctx: _GraphContext, chunk_ids: list[str], ask: _Asker, item_id: str) -> list[str]:
    """One summary per chunk (shared through the cache by every walk that touches the chunk)."""
    prompt, out = load_prompt("summarize_chunks"), []
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
            ask.failures.append(
                Failure(
                    item_id=f"{item_id}:{cid}",
                    generator="graph",
                    stage="summarize_chunks",
                    kind=err.kind,
                    detail=str(err)[:500],
                )
            )
            continue
        if done.text.strip():
            out.append(f"- {' '.join(done.text.split())}")
        else:
            ask.failures.append(
                Failure(
                    item_id=f"{item_id}:{cid}",
                    generator="graph",
                    stage="summarize_chunks",
                    kind="empty",
                    detail="the model returned an empty summary",
                )
            )
    return out


def graph_questions(llm: LLM, index: GraphIndex, cfg: QuestionsSettings) -> Generated:
    """`per_level` questions for each of `levels`, one call per sampled structure."""
    ctx, ask, rows = _GraphContext(index, cfg), _Asker(llm, "graph", cfg.temperature), []
    for level in cfg.levels:
        if level == "node":
            items = [ctx.node(e) for e in sample_nodes(index, cfg.per_level, cfg.seed)]
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
                        detail=f"no walk reached {cfg.min_hops} distinct hops in {cfg.max_walk_attempts} seeds",
                    )
                )
            items = [ctx.subgraph(w) if w else None for w in walks]
        for k, item in enumerate(items):
            qid = f"graph-{level}-{k:03d}"
            if item is None:
                continue
            if level == "subgraph":
                summaries = _summaries(llm, ctx, item.input_chunk_ids, ask, qid)
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
                    continue
                item.values["summaries"] = "\n".join(summaries)
            reply = ask(f"questions_{level}", OneQuestion, qid, cfg.max_tokens, **item.values)
            if reply is None:
                continue
            walk = item.walk
            rows.append(
                GeneratedQuestion(
                    question_id=qid,
                    question=reply.question,
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
            )
    return Generated.of(rows, ask.failures)


def ground_truth_questions(
    questions: list[Question], index: GraphIndex, per_category: int, seed: int
) -> Generated:
    """The data set's own questions, `per_category` per question_type (seeded; a smaller count is a
    prefix). Gold entity names link to index entities by normalized name; gold documents give chunks.
    """
    by_name = dict(zip(index.entities["name"].map(normalize_name), index.entities["entity_id"], strict=True))
    chunks_of = index.chunks.groupby("doc_id")["chunk_id"].agg(list).to_dict()
    questions = [
        q for q in questions if not q.reference_summaries
    ]  # the four categories have short gold answers
    rows = []
    for k, category in enumerate(sorted({q.question_type for q in questions})):
        pool = [q for q in questions if q.question_type == category]
        for i in np.random.default_rng([seed, k]).permutation(len(pool))[:per_category]:
            q = pool[i]
            linked = list(
                dict.fromkeys(by_name[n] for n in map(normalize_name, q.gold_entities) if n in by_name)
            )
            rows.append(
                GeneratedQuestion(
                    question_id=q.question_id,
                    question=q.question,
                    generator="ground_truth",
                    level=category or "unknown",
                    anchor_id=linked[0] if linked else "",
                    entity_ids=linked,
                    chunk_ids=[c for d in q.gold_doc_ids for c in chunks_of.get(d, [])],
                    doc_ids=q.gold_doc_ids,
                    answers=q.answers,
                )
            )
    return Generated.of(rows, [])


def generate_questions(
    llm: LLM, index: GraphIndex, questions: list[Question], cfg: QuestionsSettings
) -> Generated:
    """Every generator of `cfg.generators` on the same corpus (the index's documents) and graph;
    `questions` are the data set's own (the ground-truth generator's source).
    """
    run = {
        "summary": lambda: summary_questions(llm, index.documents, cfg),
        "persona": lambda: persona_questions(llm, index.documents, cfg),
        "graph": lambda: graph_questions(llm, index, cfg),
        "ground_truth": lambda: ground_truth_questions(
            questions, index, cfg.ground_truth_per_category, cfg.seed
        ),
    }
    return Generated.concat(run[name]() for name in cfg.generators)


# ---------------------------------------------------------------- deduplication


def deduplicate(questions: pd.DataFrame, embed: Embed, threshold: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Within each generator, drop questions equal to an earlier one after SQuAD normalization, then
    those whose embedding cosine with an earlier kept question exceeds `threshold`.

    Returns (kept questions, dropped rows: question_id, generator, kind, duplicate_of, cosine).
    """
    dropped, keep = [], np.ones(len(questions), dtype=bool)
    vectors = embed(list(questions["question"])) if len(questions) else np.zeros((0, 1))
    for _, group in questions.groupby("generator", sort=False):
        first: dict[str, int] = {}
        kept_rows: list[int] = []
        for pos in (questions.index.get_loc(i) for i in group.index):
            qid, norm = questions["question_id"].iat[pos], normalize_answer(questions["question"].iat[pos])
            if norm in first:
                dropped.append(
                    (qid, group["generator"].iat[0], "exact", questions["question_id"].iat[first[norm]], 1.0)
                )
            elif kept_rows and (sims := vectors[kept_rows] @ vectors[pos]).max() > threshold:
                best = kept_rows[int(sims.argmax())]
                dropped.append(
                    (
                        qid,
                        group["generator"].iat[0],
                        "near",
                        questions["question_id"].iat[best],
                        float(sims.max()),
                    )
                )
            else:
                first[norm] = pos
                kept_rows.append(pos)
                continue
            keep[pos] = False
    report = pd.DataFrame(dropped, columns=["question_id", "generator", "kind", "duplicate_of", "cosine"])
    return questions[keep].reset_index(drop=True), report


def dedup_counts(questions: pd.DataFrame, dropped: pd.DataFrame) -> pd.DataFrame:
    """Per generator: generated, exact and near duplicates removed, kept."""
    generated = questions.groupby("generator", sort=False).size().rename("generated")
    kinds = dropped.groupby(["generator", "kind"]).size().unstack(fill_value=0)
    table = pd.concat([generated, kinds.reindex(columns=["exact", "near"], fill_value=0)], axis=1).fillna(0)
    table = table.astype(int).rename(columns={"exact": "exact_duplicates", "near": "near_duplicates"})
    table["kept"] = table["generated"] - table["exact_duplicates"] - table["near_duplicates"]
    return table.rename_axis("generator").reset_index()
