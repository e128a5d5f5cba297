"""The gold-context ("oracle") method: the question's own gold shown to the shared generator, the
upper bound of every retrieval method and the seed-004 protocol's gold-context injection (a
question answered wrongly from retrieved context that passed the recall thresholds is re-answered
from its gold: right now -> a retrieval failure the metrics missed, still wrong -> a reasoning one).

The gold context is the gold subgraph's facts, each with its validity where the corpus states it,
followed by the source passages: the index chunks of the gold documents (on corpora that only have
gold documents, those alone). Packed into the same budget as every method.
"""

from __future__ import annotations

from ragtrial.index.tables import GraphIndex
from ragtrial.llm.ledger import Ledger
from ragtrial.methods.base import Draft, Generator, Method, NoContextForQuestion
from ragtrial.records import GoldEdge, Question
from ragtrial.retrieval.base import ContextItem
from ragtrial.retrieval.packing import pack_context


def gold_fact(edge: GoldEdge) -> str:
    """A gold edge as the sentence-like fact the oracle shows ("A ceo of B (2001 to 2010)")."""
    span = ""
    if edge.valid_from is not None:
        span = (
            f" ({edge.valid_from} to {edge.valid_to})"
            if edge.valid_to is not None
            else f" (since {edge.valid_from})"
        )
    return f"{edge.source} {edge.relation.replace('_', ' ')} {edge.target}{span}"


class OracleMethod(Method):
    """Answer from the question's gold subgraph and gold passages (see the module docstring)."""

    def __init__(
        self,
        name: str,
        generator: Generator,
        ledger: Ledger,
        doc_of_chunk: dict[str, str],
        index: GraphIndex,
        budget: int,
    ):
        super().__init__(name, generator, ledger, doc_of_chunk)
        self.budget = budget
        self.chunks_of: dict[str, list[tuple[str, str]]] = {}
        for chunk_id, doc_id, text in zip(
            index.chunks["chunk_id"], index.chunks["doc_id"], index.chunks["text"], strict=True
        ):
            self.chunks_of.setdefault(doc_id, []).append((chunk_id, text))

    def gold_items(self, question: Question) -> list[ContextItem]:
        facts = [
            ContextItem(kind="gold_fact", text=gold_fact(e), score=1.0, retriever=self.name)
            for e in question.gold_edges
        ]
        passages = [
            ContextItem(kind="chunk", text=text, score=1.0, retriever=self.name, chunk_ids=[chunk_id])
            for doc_id in question.gold_doc_ids
            for chunk_id, text in self.chunks_of.get(doc_id, [])
        ]
        return facts + passages

    def fill(self, question: Question, draft: Draft) -> None:
        items = self.gold_items(question)
        if not items:
            raise NoContextForQuestion(
                f"question {question.question_id!r} has no gold edges and no gold documents in the index"
            )
        draft.context, draft.context_tokens = pack_context(items, self.budget)
        draft.context_ready = True
        draft.text = self.generator.generate(
            question.question, draft.context, draft.method, question_type=question.question_type
        )
