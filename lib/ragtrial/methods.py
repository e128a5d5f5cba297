"""Retrieval-and-answer methods behind one interface: `answer(question) -> Answer`.

Every method hands the same `Generator` (one model, one answer prompt, one token budget) a
different context; nothing else differs, so a difference in the scores is a difference in what
the model was shown. Calls, tokens and latency of one answer are read from the ledger rows its
calls left, so a retriever's own model calls (question-entity listing, routing, map steps) are
counted too. A model failure that leaves no answer sets `Answer.failure`; it is never an empty
text that gets scored.
"""

from __future__ import annotations

import functools
import random
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd
from pydantic import BaseModel, Field, create_model

from ragtrial.config import MethodSettings
from ragtrial.index import GraphIndex
from ragtrial.ledger import CallRecord, Ledger
from ragtrial.llm import LLM, LLMError
from ragtrial.prompts import Prompt, load_prompt
from ragtrial.records import Question
from ragtrial.retrieval import ContextItem, Retrieval, Retriever, make_retriever
from ragtrial.tokens import count_tokens, get_encoding

if TYPE_CHECKING:
    from ragtrial.runner import RunContext

# What a method says when nothing it looked at helps (GraphRAG's global search returns a fixed
# "unable to answer" in that case instead of calling the model); metrics read it as a decline.
NO_DATA_ANSWER = "Insufficient information."
EMPTY_CONTEXT = "(no context)"


class MethodUnavailable(ValueError):
    """The index lacks what a method needs (e.g. community reports of the requested level)."""


@dataclass
class Answer:
    """What every method returns for one question (the contract in docs/design.md), plus
    `doc_ids` (documents of the passages shown, in context order), `notes` (routing decision,
    map statistics, retriever notes) and `failures` (every failed step, fatal or not).
    """

    question_id: str
    method: str
    text: str
    context: list[ContextItem]
    context_tokens: dict[str, int]
    calls: int
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    fallback: str = ""
    failure: str = ""  # LLMError kind when no answer could be produced
    doc_ids: list[str] = field(default_factory=list)
    context_ready: bool = False  # the context step finished (retrieval measures are defined)
    cached_calls: int = 0
    notes: dict[str, Any] = field(default_factory=dict)
    failures: list[dict[str, str]] = field(default_factory=list)  # stage, kind, detail


@dataclass
class _Draft:
    """An answer under construction; `Method.answer` adds the metering."""

    method: str
    text: str = ""
    context: list[ContextItem] = field(default_factory=list)
    context_tokens: dict[str, int] = field(default_factory=dict)
    fallback: str = ""
    context_ready: bool = False
    notes: dict[str, Any] = field(default_factory=dict)
    failures: list[dict[str, str]] = field(default_factory=list)


# ---------------------------------------------------------------- context


def format_context(items: Sequence[ContextItem]) -> str:
    """Numbered context lines as the generator sees them; the kind tells passages from graph facts."""
    if not items:
        return EMPTY_CONTEXT
    return "\n\n".join(f"[{i}] ({item.kind}) {item.text}" for i, item in enumerate(items, start=1))


def truncate_tokens(text: str, n_tokens: int) -> str:
    enc = get_encoding()
    return enc.decode(enc.encode(text, disallowed_special=())[:n_tokens])


def pack_context(items: Sequence[ContextItem], budget: int) -> tuple[list[ContextItem], dict[str, int]]:
    """The best-ranked items whose texts fit in `budget` cl100k tokens, and tokens per kind.

    Packing stops at the first item that does not fit (rank order is the retriever's claim about
    relevance; skipping ahead would let small low-ranked items jump the queue). A first item
    larger than the whole budget is truncated, so an oversized passage cannot empty the context.
    Repeated texts (the same chunk from two retrievers) are shown once.
    """
    kept: list[ContextItem] = []
    tokens: Counter[str] = Counter()
    seen: set[tuple[str, str]] = set()
    used = 0
    for item in items:
        if (item.kind, item.text) in seen:
            continue
        n = count_tokens(item.text)
        if used + n > budget:
            if kept:
                break
            item, n = replace(item, text=truncate_tokens(item.text, budget)), budget
        seen.add((item.kind, item.text))
        kept.append(item)
        tokens[item.kind] += n
        used += n
    return kept, dict(tokens)


# ---------------------------------------------------------------- the shared generator


@dataclass
class Generator:
    """The one answer step every method shares: same model, same prompt, same length limit."""

    llm: LLM
    prompt: Prompt
    max_tokens: int
    first_line_only: bool  # short-answer QA: a base model tends to keep writing after the answer

    def generate(
        self, question: str, items: Sequence[ContextItem], method: str, prompt: Prompt | None = None
    ) -> str:
        prompt = prompt or self.prompt
        messages = prompt.render(context=format_context(items), question=question)
        ask = functools.partial(
            self.llm.complete,
            messages,
            stage="answer",
            method=method,
            prompt=prompt,
            max_tokens=self.max_tokens,
        )
        if not self.first_line_only:
            text = ask().text.strip()
        else:
            # A short answer ends at the line break: stopping there saves the tokens a base model
            # writes after it. A reply that opens with the line break is asked again without the stop.
            text = ask(stop=["\n"]).text.strip() or ask().text.strip()
            text = text.split("\n", 1)[0].strip()
        if not text:
            raise LLMError("empty_answer", f"{method}: the model returned no answer text")
        return text


# ---------------------------------------------------------------- methods


class Method(ABC):
    """answer(question) -> Answer; subclasses fill a draft in `_run`."""

    def __init__(self, name: str, generator: Generator, ledger: Ledger, doc_of_chunk: dict[str, str]):
        self.name = name
        self.generator = generator
        self.ledger = ledger
        self.doc_of_chunk = doc_of_chunk

    @abstractmethod
    def _run(self, question: Question, draft: _Draft) -> None: ...

    def answer(self, question: Question) -> Answer:
        mark, started = _ledger_mark(self.ledger), time.perf_counter()
        draft = _Draft(self.name)
        failure = ""
        try:
            self._run(question, draft)
        except LLMError as err:
            failure = err.kind
            draft.failures.append(
                {"stage": _failed_stage(self.ledger, mark), "kind": err.kind, "detail": str(err)}
            )
        calls = [r for r in _ledger_rows_since(self.ledger, mark) if r.kind != "embedding"]
        doc_ids = [
            self.doc_of_chunk[c]
            for item in draft.context
            if item.kind == "chunk"
            for c in item.chunk_ids
            if c in self.doc_of_chunk
        ]
        return Answer(
            question_id=question.question_id,
            method=self.name,
            text="" if failure else draft.text,
            context=draft.context,
            context_tokens=draft.context_tokens,
            calls=len(calls),
            prompt_tokens=sum(r.prompt_tokens for r in calls),
            completion_tokens=sum(r.completion_tokens for r in calls),
            latency_s=time.perf_counter() - started,
            fallback=draft.fallback,
            failure=failure,
            doc_ids=list(dict.fromkeys(doc_ids)),
            context_ready=draft.context_ready,
            cached_calls=sum(bool(r.cached) for r in calls),
            notes=draft.notes,
            failures=draft.failures,
        )


class RetrievalMethod(Method):
    """Retrieve k items, pack them into the budget, generate once. No retriever = closed book."""

    def __init__(
        self,
        name: str,
        generator: Generator,
        ledger: Ledger,
        doc_of_chunk: dict[str, str],
        retriever: Retriever | None,
        k: int,
        budget: int,
    ):
        super().__init__(name, generator, ledger, doc_of_chunk)
        self.retriever, self.k, self.budget = retriever, k, budget

    def gather(self, question: Question, draft: _Draft) -> list[ContextItem]:
        """The retriever's ranked items for `question` (its fallback and notes go to the draft)."""
        if self.retriever is None:
            return []
        found: Retrieval = self.retriever.retrieve(question.question, self.k)
        draft.fallback = found.fallback
        draft.notes.update(found.notes)
        return found.items

    def _run(self, question: Question, draft: _Draft) -> None:
        draft.context, draft.context_tokens = pack_context(self.gather(question, draft), self.budget)
        draft.context_ready = True
        draft.text = self.generator.generate(question.question, draft.context, draft.method)


class IntegrationMethod(Method):
    """Han et al.'s Integration: each part's context packed in its own budget, concatenated, one
    generation (so it shows up to twice the context of a single method, which the cost table shows).
    """

    def __init__(self, name: str, parts: Sequence[RetrievalMethod]):
        first = parts[0]
        super().__init__(name, first.generator, first.ledger, first.doc_of_chunk)
        self.parts = list(parts)

    def _run(self, question: Question, draft: _Draft) -> None:
        items: list[ContextItem] = []
        for part in self.parts:
            part_draft = _Draft(draft.method)
            items += pack_context(part.gather(question, part_draft), part.budget)[0]
            draft.notes[part.name] = part_draft.notes
            if part_draft.fallback:
                draft.fallback = "; ".join(
                    filter(None, [draft.fallback, f"{part.name}: {part_draft.fallback}"])
                )
        # Each part already fits its budget, so repacking into their sum only drops repeats.
        draft.context, draft.context_tokens = pack_context(items, sum(p.budget for p in self.parts))
        draft.context_ready = True
        draft.text = self.generator.generate(question.question, draft.context, draft.method)


class RouteLabel(BaseModel):
    label: Literal["fact", "reasoning"]


class SelectionMethod(Method):
    """Han et al.'s Selection: a few-shot router labels the question fact- or reasoning-based;
    fact goes to the RAG method, reasoning to the graph method. The label is kept in notes.
    """

    def __init__(self, name: str, routes: dict[str, RetrievalMethod], llm: LLM, prompt: Prompt):
        rag = routes["fact"]
        super().__init__(name, rag.generator, rag.ledger, rag.doc_of_chunk)
        self.routes, self.llm, self.prompt = routes, llm, prompt

    def _run(self, question: Question, draft: _Draft) -> None:
        route = self.llm.structured(
            self.prompt.render(question=question.question),
            RouteLabel,
            stage="route",
            method=self.name,
            prompt=self.prompt,
            max_tokens=16,
        )
        chosen = self.routes[route.label]
        draft.notes.update(route=route.label, routed_to=chosen.name)
        chosen._run(question, draft)


class MapPoint(BaseModel):
    description: str = Field(max_length=160)  # bounded so a constrained reply ends before max_tokens
    score: int = Field(ge=0, le=100)


def map_schema(max_points: int) -> type[BaseModel]:
    """The map reply: at most `max_points` scored points (the bound is part of the JSON schema)."""
    return create_model("MapReply", points=(list[MapPoint], Field(max_length=max_points)))


class MapReduceMethod(Method):
    """GraphRAG's global search (units = the community reports of one level) and the paper's TS
    condition (units = source chunks): units are shuffled once (seeded) and cut into batches that
    fit `map_budget`; each batch yields points scored 0-100 for helpfulness (structured output);
    0-score points are dropped, the rest sorted by score and packed into `reduce_budget` for one
    final generation. A failed map batch is recorded and skipped; only when every batch failed
    has the method no answer.
    """

    def __init__(
        self,
        name: str,
        generator: Generator,
        ledger: Ledger,
        doc_of_chunk: dict[str, str],
        units: Sequence[ContextItem],
        llm: LLM,
        *,
        map_budget: int,
        map_max_tokens: int,
        max_points: int,
        reduce_budget: int,
        reduce_prompt: Prompt | None,
        seed: int,
    ):
        super().__init__(name, generator, ledger, doc_of_chunk)
        if not units:
            raise MethodUnavailable(f"{name}: the index has nothing to map over")
        shuffled = list(units)
        random.Random(seed).shuffle(shuffled)
        self.batches = batch_units(shuffled, map_budget)
        self.llm, self.map_prompt, self.schema = llm, load_prompt("global_map"), map_schema(max_points)
        self.map_max_tokens, self.max_points = map_max_tokens, max_points
        self.reduce_budget, self.reduce_prompt = reduce_budget, reduce_prompt

    def _map(self, question: Question, batch: list[ContextItem]) -> list[ContextItem]:
        messages = self.map_prompt.render(
            context=format_context(batch), question=question.question, max_points=self.max_points
        )
        reply = self.llm.structured(
            messages,
            self.schema,
            stage="map",
            method=self.name,
            prompt=self.map_prompt,
            max_tokens=self.map_max_tokens,
        )
        provenance = {
            attr: _union(getattr(u, attr) for u in batch)
            for attr in ("chunk_ids", "entity_ids", "relation_ids", "community_ids")
        }
        return [
            ContextItem(
                kind="map_answer", text=p.description, score=float(p.score), retriever=self.name, **provenance
            )
            for p in reply.points
        ]

    def _run(self, question: Question, draft: _Draft) -> None:
        points: list[ContextItem] = []
        for i, batch in enumerate(self.batches):
            try:
                points += self._map(question, batch)
            except LLMError as err:
                draft.failures.append({"stage": "map", "kind": err.kind, "detail": f"batch {i}: {err}"})
        failed = len(draft.failures)
        helpful = sorted((p for p in points if p.score > 0), key=lambda p: -p.score)
        draft.notes.update(
            map_batches=len(self.batches),
            map_failed=failed,
            points=len(points),
            points_zero=len(points) - len(helpful),
        )
        if failed == len(self.batches):
            raise LLMError(draft.failures[-1]["kind"], f"{self.name}: all {failed} map batches failed")
        draft.context_ready = True
        if not helpful:
            draft.text, draft.fallback = NO_DATA_ANSWER, "no map answer scored above 0"
            return
        draft.context, draft.context_tokens = pack_context(helpful, self.reduce_budget)
        draft.text = self.generator.generate(
            question.question, draft.context, draft.method, self.reduce_prompt
        )


def batch_units(units: Sequence[ContextItem], budget: int) -> list[list[ContextItem]]:
    """Consecutive units grouped so each batch's texts fit `budget` tokens (an oversized unit is
    truncated into a batch of its own).
    """
    batches: list[list[ContextItem]] = []
    used = budget + 1  # forces a new batch for the first unit
    for unit in units:
        n = count_tokens(unit.text)
        if n > budget:
            unit, n = replace(unit, text=truncate_tokens(unit.text, budget)), budget
        if used + n > budget:
            batches.append([])
            used = 0
        batches[-1].append(unit)
        used += n
    return batches


# ---------------------------------------------------------------- registry


class Toolkit:
    """What building methods needs, with retrievers built once and shared between methods."""

    def __init__(self, index: GraphIndex, ctx: RunContext, settings: MethodSettings):
        self.index, self.ctx, self.settings = index, ctx, settings
        self.generator = Generator(
            ctx.llm, load_prompt(settings.answer_prompt), settings.answer_max_tokens, settings.first_line_only
        )
        self.doc_of_chunk = dict(zip(index.chunks["chunk_id"], index.chunks["doc_id"], strict=True))
        self._retrievers: dict[tuple[str, str], Retriever] = {}

    def retriever(self, name: str, **overrides: Any) -> Retriever:
        """The run's retriever `name` (settings.retrieval, with `overrides`), built once."""
        key = (name, repr(sorted(overrides.items())))
        if key not in self._retrievers:
            settings = self.ctx.settings.retrieval.model_copy(update=overrides)
            self._retrievers[key] = make_retriever(name, self.index, self.ctx, settings)
        return self._retrievers[key]

    def retrieval(self, name: str, retriever: Retriever | None) -> RetrievalMethod:
        return RetrievalMethod(
            name,
            self.generator,
            self.ctx.ledger,
            self.doc_of_chunk,
            retriever,
            self.ctx.settings.retrieval.k,
            self.settings.context_budget,
        )

    def map_reduce(self, name: str, units: list[ContextItem]) -> MapReduceMethod:
        s = self.settings
        reduce_prompt = load_prompt(s.reduce_prompt) if s.reduce_prompt != s.answer_prompt else None
        return MapReduceMethod(
            name,
            self.generator,
            self.ctx.ledger,
            self.doc_of_chunk,
            units,
            self.ctx.llm,
            map_budget=s.map_budget,
            map_max_tokens=s.map_max_tokens,
            max_points=s.map_max_points,
            reduce_budget=s.context_budget,
            reduce_prompt=reduce_prompt,
            seed=s.seed,
        )


def report_units(index: GraphIndex, level: int) -> list[ContextItem]:
    """The community reports of `level` as map units (full text, as GraphRAG maps over)."""
    reports = index.community_reports[index.community_reports["level"] == level]
    return [
        ContextItem(
            kind="community_report",
            text=r.full_text or f"{r.title}\n{r.summary}",
            score=float(r.rating),
            retriever="global_search",
            chunk_ids=list(r.chunk_ids),
            entity_ids=list(r.entity_ids),
            relation_ids=[],
            community_ids=[r.community_id],
        )
        for r in reports.itertuples(index=False)
    ]


def chunk_units(index: GraphIndex) -> list[ContextItem]:
    return [
        ContextItem(
            kind="chunk",
            text=r.text,
            score=0.0,
            retriever="ts",
            chunk_ids=[r.chunk_id],
            entity_ids=[],
            relation_ids=[],
            community_ids=[],
        )
        for r in index.chunks.itertuples(index=False)
    ]


def _global_search(level: int | None) -> Callable[[str, Toolkit], Method]:
    def build(name: str, kit: Toolkit) -> Method:
        wanted = kit.settings.global_level if level is None else level
        levels = set(kit.index.community_reports["level"])
        if wanted not in levels:
            raise MethodUnavailable(
                f"{name}: no community reports at level C{wanted} "
                f"(levels with reports: {', '.join(f'C{x}' for x in sorted(levels)) or 'none'})"
            )
        return kit.map_reduce(name, report_units(kit.index, wanted))

    return build


def _retrieval(retriever: str) -> Callable[[str, Toolkit], Method]:
    return lambda name, kit: kit.retrieval(name, kit.retriever(retriever))


def _hybrid_parts(kit: Toolkit) -> list[RetrievalMethod]:
    graph = kit.settings.graph_method
    return [kit.retrieval("naive_rag", kit.retriever("vector")), kit.retrieval(graph, kit.retriever(graph))]


def _selection(name: str, kit: Toolkit) -> Method:
    rag, graph = _hybrid_parts(kit)
    return SelectionMethod(
        name, {"fact": rag, "reasoning": graph}, kit.ctx.llm, load_prompt("route_question")
    )


METHODS: dict[str, Callable[[str, Toolkit], Method]] = {
    "closed_book": lambda name, kit: kit.retrieval(name, None),
    "naive_rag": _retrieval("vector"),
    **{
        name: _retrieval(name)
        for name in (
            "bm25",
            "hybrid",
            "kg_triplets",
            "graph_walk",
            "graph_hybrid",
            "local_search",
            "lightrag",
            "fastgraphrag",
        )
    },
    # Han et al.'s KG-GraphRAG "Triplets+Text": the triplets, then the passages they came from.
    "kg_triplets_text": lambda name, kit: kit.retrieval(
        name, kit.retriever("kg_triplets", kg_with_source_text=True)
    ),
    "global_search": _global_search(None),
    **{f"global_search_c{level}": _global_search(level) for level in range(4)},
    "ts": lambda name, kit: kit.map_reduce(name, chunk_units(kit.index)),
    "selection": _selection,
    "integration": lambda name, kit: IntegrationMethod(name, _hybrid_parts(kit)),
}


def make_methods(
    names: Sequence[str], index: GraphIndex, ctx: RunContext, settings: MethodSettings
) -> tuple[list[Method], pd.DataFrame]:
    """The named methods sharing one generator and one set of retrievers, and a table of the ones
    the index cannot support (method, reason) so a report can say why they are missing.
    """
    unknown = [n for n in names if n not in METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; known: {', '.join(METHODS)}")
    kit = Toolkit(index, ctx, settings)
    methods, unavailable = [], []
    for name in names:
        try:
            methods.append(METHODS[name](name, kit))
        except MethodUnavailable as err:
            unavailable.append((name, str(err)))
    return methods, pd.DataFrame(unavailable, columns=["method", "reason"])


def make_method(name: str, index: GraphIndex, ctx: RunContext, settings: MethodSettings) -> Method:
    methods, unavailable = make_methods([name], index, ctx, settings)
    if not methods:
        raise MethodUnavailable(unavailable["reason"].iloc[0])
    return methods[0]


# ---------------------------------------------------------------- metering helpers


def _ledger_mark(ledger: Ledger) -> int:
    # Ledger.frame() copies every row (~0.2 s at 10k rows), too slow once per answer; the row list
    # is append-only, so its length marks where this answer's calls start.
    return len(ledger._rows)


def _ledger_rows_since(ledger: Ledger, mark: int) -> list[CallRecord]:
    return ledger._rows[mark:]


def _failed_stage(ledger: Ledger, mark: int) -> str:
    failed = [r.stage for r in _ledger_rows_since(ledger, mark) if r.failure]
    return failed[-1] if failed else "answer"


def _union(lists: Iterable[Iterable[str]]) -> list[str]:
    return list(dict.fromkeys(x for ids in lists for x in ids))
