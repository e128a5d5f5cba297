"""Han et al.'s Integration: the RAG and the GraphRAG context side by side, one generation."""

from __future__ import annotations

from collections.abc import Sequence

from ragtrial.methods.base import Draft, Method
from ragtrial.methods.retrieval_method import RetrievalMethod
from ragtrial.records import Question
from ragtrial.retrieval.base import ContextItem, join_origins
from ragtrial.retrieval.packing import pack_context


class IntegrationMethod(Method):
    """Han et al.'s Integration: each part's context packed in its own budget, concatenated, one
    generation (so it shows up to twice the context of a single method, which the cost table shows).
    """

    def __init__(self, name: str, parts: Sequence[RetrievalMethod]):
        first = parts[0]
        super().__init__(name, first.generator, first.ledger, first.doc_of_chunk)
        self.parts = list(parts)
        self.graph_origin = join_origins(p.graph_origin for p in self.parts)

    def fill(self, question: Question, draft: Draft) -> None:
        items: list[ContextItem] = []
        for part in self.parts:
            part_draft = Draft(draft.method)
            items += pack_context(part.gather(question, part_draft), part.budget)[0]
            draft.notes[part.name] = part_draft.notes
            if part_draft.fallback:
                draft.fallback = "; ".join(
                    filter(None, [draft.fallback, f"{part.name}: {part_draft.fallback}"])
                )
        # Each part already fits its budget, so repacking into their sum only drops repeats.
        draft.context, draft.context_tokens = pack_context(items, sum(p.budget for p in self.parts))
        draft.context_ready = True
        draft.text = self.generator.generate(
            question.question, draft.context, draft.method, question_type=question.question_type
        )
