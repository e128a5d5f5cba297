"""Han et al.'s Selection: a few-shot router sends fact questions to RAG, reasoning ones to GraphRAG."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from ragtrial.llm.client import LLM
from ragtrial.methods.base import Draft, Method
from ragtrial.methods.retrieval_method import RetrievalMethod
from ragtrial.prompts import Prompt
from ragtrial.records import Question
from ragtrial.retrieval.base import join_origins


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
        self.graph_origin = join_origins(m.graph_origin for m in routes.values())

    def fill(self, question: Question, draft: Draft) -> None:
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
        chosen.fill(question, draft)
