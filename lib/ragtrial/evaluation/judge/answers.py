"""The answers a judge compares: each method answers the questions, and a method can answer
twice (two sampled runs) so it can be judged against itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from ragtrial.evaluation.judge.pairs import CannotRegenerate, Regenerate, length_hint_prompt
from ragtrial.llm.client import LLM

if TYPE_CHECKING:
    from ragtrial.methods.base import Method
    from ragtrial.records import Question


# ---------------------------------------------------------------- answers from ragtrial.methods


class SampledLLM:
    """A view of an LLM whose every call is sample `replicate` at `temperature`: one run of a
    method, with seeds and cache keys of its own (the self-vs-self check compares two runs).
    """

    def __init__(self, llm: LLM, replicate: int, temperature: float):
        self._llm, self.replicate, self.temperature = llm, replicate, temperature

    def __getattr__(self, name: str) -> object:  # settings, model, ledger, cache of the wrapped LLM
        return getattr(self._llm, name)

    def _sampled(self, overrides: dict) -> dict:
        return overrides | {
            "replicate": self.replicate + overrides.get("replicate", 0),
            "temperature": self.temperature,
        }

    def complete(self, messages, **overrides):
        return self._llm.complete(messages, **self._sampled(overrides))

    def structured(self, messages, schema, **overrides):
        return self._llm.structured(messages, schema, **self._sampled(overrides))


@dataclass
class AnswerSet:
    frame: pd.DataFrame  # experiment.answers_frame plus `replicate`
    regenerate: Regenerate  # the same method, same context, with a target length in its answer prompt


def answer_questions(methods: dict[tuple[str, int], Method], questions: Sequence[Question]) -> AnswerSet:
    """Every (method, replicate) answers every question; regeneration reuses the context the method
    retrieved and its own answer prompt (the reduce prompt for map-reduce methods) plus the length.
    """
    from ragtrial.evaluation.run_methods import answer_all, answers_frame

    keys = [(q, name, replicate) for q in questions for name, replicate in methods]
    answered = answer_all([(methods[(name, replicate)], q) for q, name, replicate in keys])
    answers = {
        (q.question_id, name, replicate): answer
        for (q, name, replicate), answer in zip(keys, answered, strict=True)
    }
    frame = answers_frame(answers.values()).assign(replicate=[key[2] for key in answers])
    question_text = {q.question_id: q.question for q in questions}

    def regenerate(question_id: str, method: str, replicate: int, target_words: int) -> str:
        runner = methods[(method, replicate)]
        if not runner.regenerable:
            raise CannotRegenerate(f"{method}: {runner.not_regenerable}")
        prompt = getattr(runner, "reduce_prompt", None) or runner.generator.prompt
        return runner.generator.generate(
            question_text[question_id],
            answers[(question_id, method, replicate)].context,
            method,
            prompt=length_hint_prompt(prompt, target_words),
        )

    return AnswerSet(frame, regenerate)
