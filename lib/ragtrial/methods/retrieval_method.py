"""Retrieve, pack, generate: every single-retriever method (and closed book, with none)."""

from __future__ import annotations

from ragtrial.llm.ledger import Ledger
from ragtrial.methods.base import Draft, Generator, Method
from ragtrial.records import Question
from ragtrial.retrieval.base import ContextItem, Retrieval, Retriever
from ragtrial.retrieval.packing import pack_context


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
        # Only graph retrievers (and fusions of them) have a graph origin.
        self.graph_origin = getattr(retriever, "graph_origin", "")

    def gather(self, question: Question, draft: Draft) -> list[ContextItem]:
        """The retriever's ranked items for `question` (its fallback and notes go to the draft)."""
        if self.retriever is None:
            return []
        found: Retrieval = self.retriever.retrieve(question.question, self.k)
        draft.fallback = found.fallback
        draft.notes.update(found.notes)
        return found.items

    def fill(self, question: Question, draft: Draft) -> None:
        draft.context, draft.context_tokens = pack_context(self.gather(question, draft), self.budget)
        draft.context_ready = True
        draft.text = self.generator.generate(
            question.question, draft.context, draft.method, question_type=question.question_type
        )
