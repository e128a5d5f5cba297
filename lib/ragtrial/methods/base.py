"""Retrieval-and-answer methods behind one interface: `answer(question) -> Answer`.

Every method hands the same `Generator` (one model, one answer prompt, one token budget) a
different context; nothing else differs, so a difference in the scores is a difference in what
the model was shown. Calls, tokens and latency of one answer come from the ledger tally of its
calls, so a retriever's own model calls (question-entity listing, routing, map steps) are
counted too. A model failure that leaves no answer sets `Answer.failure`; it is never an empty
text that gets scored.
"""

from __future__ import annotations

import functools
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ragtrial.llm.client import LLM
from ragtrial.llm.errors import LLMError
from ragtrial.llm.ledger import Ledger
from ragtrial.prompts import Prompt
from ragtrial.records import Question
from ragtrial.retrieval.base import ContextItem
from ragtrial.retrieval.packing import format_context

# What a method says when nothing it looked at helps (GraphRAG's global search returns a fixed
# "unable to answer" in that case instead of calling the model); metrics read it as a decline.
NO_DATA_ANSWER = "Insufficient information."


class MethodUnavailable(ValueError):
    """The index lacks what a method needs (e.g. community reports of the requested level)."""


class NoContextForQuestion(ValueError):
    """A method cannot build a context for one question (the oracle on a question without gold):
    that answer is a counted failure, never an empty text that gets scored.
    """


class SystemFailure(RuntimeError):
    """An upstream system failed to answer one question (its worker's error, death or timeout, or an
    empty answer): a counted failure of kind `kind`, never scored.
    """

    def __init__(self, kind: str, detail: str):
        super().__init__(detail)
        self.kind = kind


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
class Draft:
    """An answer under construction; `Method.answer` adds the metering."""

    method: str
    text: str = ""
    context: list[ContextItem] = field(default_factory=list)
    context_tokens: dict[str, int] = field(default_factory=dict)
    fallback: str = ""
    context_ready: bool = False
    notes: dict[str, Any] = field(default_factory=dict)
    failures: list[dict[str, str]] = field(default_factory=list)


# ---------------------------------------------------------------- the shared generator


@dataclass
class Generator:
    """The one answer step every method shares: same model, same prompt, same length limit."""

    llm: LLM
    prompt: Prompt
    max_tokens: int
    first_line_only: bool  # short-answer QA: a base model tends to keep writing after the answer
    # Question types answered in full despite first_line_only (a conflict is stated after the first value).
    whole_answer_types: frozenset[str] = frozenset()

    def generate(
        self,
        question: str,
        items: Sequence[ContextItem],
        method: str,
        prompt: Prompt | None = None,
        question_type: str = "",
    ) -> str:
        """The answer to `question` from `items`; first line only when so set and the type is not exempt."""
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
        if not self.first_line_only or question_type in self.whole_answer_types:
            text = ask().text.strip()
        else:
            # A short answer ends at the line break: stopping there saves the tokens a base model
            # writes after it. A reply that opens with the line break is asked again without the stop.
            text = ask(stop=["\n"]).text.strip() or ask().text.strip()
            text = text.split("\n", 1)[0].strip()
        return text  # never blank: the client fails a blank reply unless a stop sequence ended it


# ---------------------------------------------------------------- methods


class Method(ABC):
    """answer(question) -> Answer; subclasses fill a draft in `fill`. `graph_origin`: the graph(s)
    of the index the method's retrievers use ("nlp", "llm", "nlp+llm"; "" for none).
    """

    graph_origin = ""
    # Length alignment regenerates an answer with the shared generator over the method's context;
    # an answer the kit did not write (imported, an upstream system's) cannot be regenerated so.
    regenerable = True
    not_regenerable = ""

    def __init__(self, name: str, generator: Generator, ledger: Ledger, doc_of_chunk: dict[str, str]):
        self.name = name
        self.generator = generator
        self.ledger = ledger
        self.doc_of_chunk = doc_of_chunk

    @abstractmethod
    def fill(self, question: Question, draft: Draft) -> None:
        """Retrieve, pack and generate into `draft`; a model failure propagates as LLMError."""

    def answer(self, question: Question) -> Answer:
        started = time.perf_counter()
        draft = Draft(self.name)
        failure = ""
        # The tally holds exactly this answer's calls, retrievers' own model calls included, and
        # none of the answers running beside it (each runs in its own context, ragtrial.llm.fanout).
        with self.ledger.tally() as tally:
            try:
                self.fill(question, draft)
            except LLMError as err:
                failure = err.kind
                failed_stages = [r.stage for r in tally.rows if r.failure]
                stage = failed_stages[-1] if failed_stages else "answer"
                draft.failures.append({"stage": stage, "kind": err.kind, "detail": str(err)})
            except NoContextForQuestion as err:  # e.g. the oracle on a question without gold
                failure = "no_context"
                draft.failures.append({"stage": "context", "kind": failure, "detail": str(err)})
            except SystemFailure as err:  # an upstream system; a model failure under it names its kind
                failed = [r.failure for r in tally.rows if r.failure]
                failure = failed[-1] if failed else err.kind
                draft.failures.append({"stage": "system", "kind": failure, "detail": str(err)})
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
            **tally.totals(),
            latency_s=time.perf_counter() - started,
            fallback=draft.fallback,
            failure=failure,
            doc_ids=list(dict.fromkeys(doc_ids)),
            context_ready=draft.context_ready,
            notes=draft.notes,
            failures=draft.failures,
        )
