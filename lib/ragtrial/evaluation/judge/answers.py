"""The answers a judge compares: each method answers the questions, and a method can answer
twice (two sampled runs) so it can be judged against itself. Under `trial_scope: answers` every
trial has answers of its own (seed 000, Section IV-B: "the evaluation process is re-executed for
each trial"): each run answers again through an LLM sampled for that trial.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

import pandas as pd

from ragtrial.evaluation.judge.pairs import CannotRegenerate, Regenerate, length_hint_prompt
from ragtrial.llm.client import LLM

if TYPE_CHECKING:
    from ragtrial.config.judge import UnbiasedJudgeSettings
    from ragtrial.index.tables import GraphIndex
    from ragtrial.methods.base import Method
    from ragtrial.records import Question

MethodRun = tuple[str, int]  # (method, replicate): one run of a method


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
    # trial t's answers (t >= 1), written again as fresh samples; None: these answers are the only ones
    # (they serve every trial: `trial_scope: judge_only`)
    resample: Callable[[int], AnswerSet] | None = None


def answer_questions(
    methods: dict[MethodRun, Method],
    questions: Sequence[Question],
    *,
    runs_for_trial: Callable[[int], dict[MethodRun, Method]] | None = None,
) -> AnswerSet:
    """Every (method, replicate) answers every question; regeneration reuses the context the method
    retrieved and its own answer prompt (the reduce prompt for map-reduce methods) plus the length.
    With `runs_for_trial` (trial -> the same runs built to sample that trial, `answer_context`), the
    set can `resample` trial t's answers: the runs that can write again answer anew; an imported or
    an upstream system's answers (not `regenerable`) are this set's in every trial.
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

    if runs_for_trial is None:
        return AnswerSet(frame, regenerate)
    fixed = [key for key, method in methods.items() if not method.regenerable]

    def resample(trial: int) -> AnswerSet:
        runs = {key: method for key, method in runs_for_trial(trial).items() if key not in fixed}
        fresh = answer_questions(runs, questions)
        kept = frame.set_index(["method", "replicate"]).index.isin(fixed)

        def regenerate_in_trial(question_id: str, method: str, replicate: int, target_words: int) -> str:
            source = regenerate if (method, replicate) in fixed else fresh.regenerate
            return source(question_id, method, replicate, target_words)

        return AnswerSet(pd.concat([fresh.frame, frame[kept]], ignore_index=True), regenerate_in_trial)

    return AnswerSet(frame, regenerate, resample)


Context = TypeVar("Context")  # a run context (a dataclass with an `llm`, `ModelContext`)


def answer_context(
    ctx: Context,
    cfg: UnbiasedJudgeSettings,
    trial: int,
    run: int = 0,
    runs: int = 1,
    *,
    sampled: bool = False,
) -> Context:
    """The context run `run` (of `runs` per trial) of a method answers through in `trial`: an LLM
    sampled at `answer_temperature` with replicate trial x runs + run, so every trial's answers are
    distinct samples with cache keys of their own (a rerun reuses them), when `sampled` (06's two
    runs always are) or under `trial_scope: answers`; otherwise `ctx` itself (07's answers as the
    model's defaults write them, once).
    """
    if not (sampled or cfg.trial_scope == "answers"):
        return ctx
    held: Any = ctx  # a dataclass: `dataclasses.replace` swaps its llm
    return dataclasses.replace(held, llm=SampledLLM(held.llm, trial * runs + run, cfg.answer_temperature))


def answer_in_trials(
    methods: Sequence[Method],
    questions: Sequence[Question],
    index: GraphIndex,
    ctx: Context,
    cfg: UnbiasedJudgeSettings,
) -> AnswerSet:
    """Every one of `methods` (built on `ctx`) answers every question as run 0, and the set can
    `resample` any trial: the kit's own methods are built again on `answer_context(ctx, cfg, trial)`
    (under `trial_scope: answers` trial 0's answers are such samples too); an upstream system or
    imported answers (not `regenerable`) are built once, on `ctx`, and their answers serve every trial.
    """
    from ragtrial.methods.registry import make_methods

    rewritten = [m.name for m in methods if m.regenerable]

    def runs(trial: int) -> dict[MethodRun, Method]:
        built, _ = make_methods(rewritten, index, cast(Any, answer_context(ctx, cfg, trial)), cfg)
        return {(m.name, 0): m for m in built}

    first = {(m.name, 0): m for m in methods} | (runs(0) if cfg.trial_scope == "answers" else {})
    return answer_questions(first, questions, runs_for_trial=runs)
