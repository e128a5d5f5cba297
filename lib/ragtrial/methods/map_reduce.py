"""Map-reduce methods: GraphRAG's global search over the community reports of one level, and the
paper's TS condition over source chunks.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field, create_model

from ragtrial.index.community_levels import level_reports
from ragtrial.index.tables import GraphIndex
from ragtrial.llm.client import LLM
from ragtrial.llm.errors import LLMError
from ragtrial.llm.fanout import fan_out
from ragtrial.llm.ledger import Ledger
from ragtrial.llm.structured import TOO_LONG, at_length_cap, failure_kind
from ragtrial.methods.base import NO_DATA_ANSWER, Draft, Generator, Method, MethodUnavailable
from ragtrial.prompts import Prompt, load_prompt
from ragtrial.records import Question, ordered_union
from ragtrial.retrieval.base import ContextItem, entity_names, named_entities, report_item
from ragtrial.retrieval.packing import batch_units, format_context, pack_context


def map_schema(max_points: int | None, point_max_chars: int | None) -> type[BaseModel]:
    """The map reply: at most `max_points` scored points, each description at most `point_max_chars`
    characters (None: unbounded, as GraphRAG, which bounds a map reply by tokens only); both bounds
    are part of the JSON schema, so a constrained reply ends before max_tokens.
    """
    point = create_model(
        "MapPoint",
        description=(str, Field(max_length=point_max_chars)),
        score=(int, Field(ge=0, le=100)),
    )
    return create_model("MapReply", points=(list[point], Field(max_length=max_points)))


def point_provenance(
    text: str, batch: Sequence[ContextItem], entity_names: Mapping[str, str]
) -> dict[str, list[str]]:
    """A map point's own provenance, not its whole batch's: the entities of the batch's units that
    the point's text names (`named_entities`), and the chunks, relations and communities of the
    units those entities came from. A point naming none carries nothing. A batch whose units carry
    no entities (TS's source chunks) has nothing to trace a point by, so its points carry the
    whole batch's provenance.
    """
    traceable = [u for u in batch if u.entity_ids]
    if not traceable:
        sources, named = list(batch), []
    else:
        candidates = ((e, entity_names[e]) for e in ordered_union(u.entity_ids for u in traceable))
        named = named_entities(text, candidates)
        sources = [u for u in traceable if not set(named).isdisjoint(u.entity_ids)]
    return {
        "chunk_ids": ordered_union(u.chunk_ids for u in sources),
        "entity_ids": named,
        "relation_ids": ordered_union(u.relation_ids for u in sources),
        "community_ids": ordered_union(u.community_ids for u in sources),
    }


class MapReduceMethod(Method):
    """GraphRAG's global search (units = the community reports of one level) and the paper's TS
    condition (units = source chunks): units are shuffled once (seeded) and cut into batches that
    fit `map_budget`; each batch yields points scored 0-100 for helpfulness (structured output);
    0-score points are dropped, the rest sorted by score and packed into `reduce_budget` for one
    final generation. A failed map batch is recorded and skipped; only when every batch failed
    has the method no answer. Each point carries its own provenance (`point_provenance`: the
    entities it names, by `entity_names`, entity id -> name), so the diagnostics count what the
    reduce context shows, not every member of every report mapped beside it.
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
        max_points: int | None,
        point_max_chars: int | None,
        reduce_budget: int,
        reduce_prompt: Prompt | None,
        seed: int,
        entity_names: Mapping[str, str],
    ):
        super().__init__(name, generator, ledger, doc_of_chunk)
        if not units:
            raise MethodUnavailable(f"{name}: the index has nothing to map over")
        shuffled = list(units)
        random.Random(seed).shuffle(shuffled)
        self.batches = batch_units(shuffled, map_budget)
        # uncapped (None): the prompt asks for every helpful point instead of "at most n"
        self.llm = llm
        self.map_prompt = load_prompt("global_map_all" if max_points is None else "global_map")
        self.schema = map_schema(max_points, point_max_chars)
        self.map_max_tokens, self.max_points, self.point_max_chars = (
            map_max_tokens,
            max_points,
            point_max_chars,
        )
        self.reduce_budget, self.reduce_prompt = reduce_budget, reduce_prompt
        self.entity_names = entity_names

    def _map(self, question: Question, batch: list[ContextItem]) -> list[ContextItem]:
        cap = {} if self.max_points is None else {"max_points": self.max_points}
        messages = self.map_prompt.render(context=format_context(batch), question=question.question, **cap)
        reply: Any = self.llm.structured(  # a map_schema model: its fields are made at run time
            messages,
            self.schema,
            stage="map",
            method=self.name,
            prompt=self.map_prompt,
            max_tokens=self.map_max_tokens,
        )
        return [
            ContextItem(
                kind="map_answer",
                text=p.description,
                score=float(p.score),
                retriever=self.name,
                **point_provenance(p.description, batch, self.entity_names),
            )
            for p in reply.points
        ]

    def _map_batch(self, question: Question, i: int) -> list[ContextItem] | dict[str, str]:
        """Batch `i`'s points, or its failure (stage, kind, detail): a failed batch is skipped."""
        try:
            return self._map(question, self.batches[i])
        except LLMError as err:
            return {"stage": "map", "kind": failure_kind(err, self.schema), "detail": f"batch {i}: {err}"}

    def fill(self, question: Question, draft: Draft) -> None:
        # The batches are mapped concurrently (inside an answer that may itself run beside others:
        # the client's limit bounds the requests in flight), then combined in batch order. No
        # progress lines: the answering stage around it shows them.
        mapped = fan_out(
            lambda i: self._map_batch(question, i),
            range(len(self.batches)),
            concurrency=self.llm.settings.in_flight,
        )
        points = [p for batch in mapped if isinstance(batch, list) for p in batch]
        draft.failures += [batch for batch in mapped if isinstance(batch, dict)]
        failed = len(draft.failures)
        helpful = sorted((p for p in points if p.score > 0), key=lambda p: -p.score)
        draft.notes.update(
            map_batches=len(self.batches),
            map_failed=failed,
            map_too_long=sum(f["kind"] == TOO_LONG for f in draft.failures),
            points=len(points),
            points_zero=len(points) - len(helpful),
            # a constrained decoder closes a description at the cap, so it may be cut short
            points_at_cap=sum(at_length_cap(p.text, self.point_max_chars) for p in points),
        )
        if failed == len(self.batches):
            raise LLMError(draft.failures[-1]["kind"], f"{self.name}: all {failed} map batches failed")
        draft.context_ready = True
        if not helpful:
            draft.text, draft.fallback = NO_DATA_ANSWER, "no map answer scored above 0"
            return
        draft.context, draft.context_tokens = pack_context(helpful, self.reduce_budget)
        draft.text = self.generator.generate(
            question.question, draft.context, draft.method, self.reduce_prompt, question.question_type
        )


def report_units(index: GraphIndex, level: int) -> list[ContextItem]:
    """The community reports of C<level> as map units (full text, as GraphRAG maps over): the
    level's own and, where a branch stopped splitting above it, its deepest community projected down
    (`level_reports`).
    """
    reports = level_reports(index.communities, index.community_reports, level)
    names = entity_names(index)
    return [report_item(r, names, "global_search") for r in reports.itertuples(index=False)]


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
