"""Generated questions as records: each generator returns a `Generated` (question rows with
provenance, plus recorded failures). Model output that fails validation is retried once by the
LLM layer, then recorded in `failures` (item id, generator, stage, kind) and never turned into an
empty question.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Annotated, Any, TypeVar, cast

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field, StringConstraints, create_model

from ragtrial.llm.client import LLM
from ragtrial.llm.errors import LLMError
from ragtrial.llm.plan import PlannedRequest
from ragtrial.llm.structured import failure_kind
from ragtrial.prompts import load_prompt
from ragtrial.records import Record, records_frame

Embed = Callable[[list[str]], np.ndarray]
T = TypeVar("T")
R = TypeVar("R")


def question_text(max_chars: int | None) -> Any:
    """A generated question, persona or task: at least 8 characters, at most `max_chars`
    (questions.question_max_chars; None: no maxLength in the schema).
    """
    return Annotated[str, StringConstraints(strip_whitespace=True, min_length=8, max_length=max_chars)]


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
    at_length_cap: bool = False  # the question reached questions.question_max_chars (it may be cut short)


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


@cache
def one_question_schema(max_chars: int | None) -> type[BaseModel]:
    """{question: one string of at most `max_chars` characters}."""
    return create_model("OneQuestion", question=(question_text(max_chars), ...))


@cache
def list_schema(key: str, n: int, max_chars: int | None) -> type[BaseModel]:
    """{key: [exactly n strings of at most `max_chars` characters]}: the bounds let a constrained
    decoder stop, and a short list fail.
    """
    # cast: the item type is built at run time, which a static checker cannot follow
    items = cast(Any, list)[question_text(max_chars)]
    fields: dict[str, Any] = {key: (items, Field(min_length=n, max_length=n))}
    return create_model(f"{key.title()}{n}", **fields)


@dataclass
class QuestionAsker:
    """Structured calls for one generator; a failed call becomes a `Failure` row and returns None."""

    llm: LLM
    generator: str
    temperature: float | None = None
    failures: list[Failure] = field(default_factory=list)

    def _request(self, prompt_name: str, max_tokens: int, replicate: int, values: dict[str, Any]) -> dict:
        """The keyword arguments of the structured call, as `__call__` sends it and `plan` plans it."""
        prompt = load_prompt(prompt_name)
        sampling = {} if self.temperature is None else {"temperature": self.temperature}
        return {
            "messages": prompt.render(**values),
            "stage": prompt_name,
            "prompt": prompt,
            "replicate": replicate,
            "max_tokens": max_tokens,
            **sampling,
        }

    def plan(
        self, prompt_name: str, schema: type[BaseModel], max_tokens: int, replicate: int = 0, **values: Any
    ) -> PlannedRequest:
        """The request `__call__` would send with these arguments, planned and not sent."""
        return self.llm.plan(schema=schema, **self._request(prompt_name, max_tokens, replicate, values))

    def __call__(
        self,
        prompt_name: str,
        schema: type[BaseModel],
        item_id: str,
        max_tokens: int,
        replicate: int = 0,
        **values: Any,
    ) -> Any:
        try:
            return self.llm.structured(
                schema=schema,
                method=self.generator,
                **self._request(prompt_name, max_tokens, replicate, values),
            )
        except LLMError as err:
            self.failures.append(
                Failure(
                    item_id=item_id,
                    generator=self.generator,
                    stage=prompt_name,
                    kind=failure_kind(err, schema),
                    detail=str(err)[:500],
                )
            )
            return None

    def fan_out(
        self,
        work: Callable[[QuestionAsker, T], R],
        items: Iterable[T],
        *,
        label: str,
        key: Callable[[T], Hashable] | None = None,
    ) -> list[R]:
        """`[work(self, item) for item in items]`, concurrently (`LLM.fan_out`, `key` as there): each
        unit asks with its own asker, whose failure rows join this one's in input order.
        """

        def unit(item: T) -> tuple[R, list[Failure]]:
            ask = replace(self, failures=[])
            return work(ask, item), ask.failures

        done = self.llm.fan_out(unit, items, label=label, key=key)
        for _, failures in done:
            self.failures.extend(failures)
        return [result for result, _ in done]


def shorten(text: str, chars: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= chars else text[:chars] + "..."
