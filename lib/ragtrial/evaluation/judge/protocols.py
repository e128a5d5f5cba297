"""LLM-as-judge: the classic head-to-head protocol beside the unbiased one.

Classic (Edge et al. 2024, as LightRAG and later papers ran it): the two answers are shown in one
order, A then B; the judge names the better answer per criterion (comprehensiveness, diversity,
empowerment, directness) and overall; no ties, one trial. Its variants are settings: the
swapped order as a condition of its own (never merged with A-first), repeats of every call, and
the GraphRAG paper's judge that may call a tie (Experiment 1: five repeats, ties allowed).

Unbiased (the seed paper, Section IV): each pair is scored 0-5 per aspect against a written rubric
in both orders (AB and BA, separate prompts), N times per order, and the whole evaluation is re-run
M times (trials). An answer's aspect score is the mean over orders and repeats, its overall score
the sum over aspects; equal overall scores are a tie. A question with a failed judge call is left
out of that trial and counted, never scored. Judgments are long frames with one row per (trial,
repeat, position, pair, aspect).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, create_model

from ragtrial.config.judge import JudgeSettings
from ragtrial.evaluation.judge.pairs import METHOD_KEY, pair_label
from ragtrial.llm.client import LLM
from ragtrial.llm.errors import LLMError
from ragtrial.prompts import Prompt, load_prompt

CLASSIC_ASPECTS = ("comprehensiveness", "diversity", "empowerment", "directness")
POSITIONS = ("AB", "BA")
CALL_KEY = ["trial", "repeat", "position", "question_id", "question_type", *METHOD_KEY]
FAILURE_COLUMNS = [*CALL_KEY, "stage", "kind", "error"]
# One row per judge call, judged or failed: its own model calls (a repair round included) and tokens.
COST_COLUMNS = [*CALL_KEY, "stage", "failed", "calls", "cached_calls", "prompt_tokens", "completion_tokens"]
Score = Literal[0, 1, 2, 3, 4, 5]  # an enum, since llama.cpp's grammar ignores integer bounds


# ---------------------------------------------------------------- judge calls


@dataclass
class Judgments:
    judgments: pd.DataFrame  # successful calls, one row per aspect
    failures: pd.DataFrame  # calls that produced no usable reply (FAILURE_COLUMNS)
    # what each call cost (COST_COLUMNS); empty for judgments that were not made here (read, built)
    costs: pd.DataFrame = dataclasses.field(default_factory=lambda: pd.DataFrame(columns=COST_COLUMNS))


@cache
def scoring_prompt(aspects: tuple[str, ...]) -> Prompt:
    """judge_score with the rubrics of `aspects` filled in; its version names every rubric's."""
    base = load_prompt("judge_score")
    rubrics = [load_prompt(f"judge_rubric_{a}") for a in aspects]
    scores = "[" + ", ".join("<0-5>" for _ in aspects) + "]"
    template = base.template.replace("$rubrics", "\n\n".join(r.template for r in rubrics))
    template = template.replace("$aspect_order", ", ".join(aspects))
    template = template.replace("$reply_format", f'{{"answer_1": {scores}, "answer_2": {scores}}}')
    version = "+".join(
        [base.version, *(f"{r.name.removeprefix('judge_rubric_')}{r.version}" for r in rubrics)]
    )
    return dataclasses.replace(base, template=template, version=version)


@cache
def score_schema(aspects: tuple[str, ...]) -> type[BaseModel]:
    """{"answer_1": [one score per aspect], "answer_2": [...]}: half the tokens of per-aspect keys,
    which matters at ~10 constrained tokens/s.
    """
    scores: Any = (  # a pydantic field definition built at run time
        Annotated[list[Score], Field(min_length=len(aspects), max_length=len(aspects))],
        ...,
    )
    return create_model(
        "AspectScores", __config__=ConfigDict(extra="forbid"), answer_1=scores, answer_2=scores
    )


# A classic judgment's winner as A's outcome (stats.OUTCOME_CODES names).
CLASSIC_OUTCOME = {"a": "win", "tie": "tie", "b": "loss"}


@cache
def classic_schema(ties: bool = False) -> type[BaseModel]:
    """A winner slot per criterion and overall: 1 or 2, or also 0 (a tie) when `ties`."""
    slot = Literal[0, 1, 2] if ties else Literal[1, 2]
    fields: dict[str, Any] = {a: (slot, ...) for a in (*CLASSIC_ASPECTS, "overall")}
    return create_model("ClassicVerdict", __config__=ConfigDict(extra="forbid"), **fields)


def classic_prompt(ties: bool = False) -> Prompt:
    """The classic judge's prompt: judge_classic, or judge_classic_ties where 0 names a tie."""
    return load_prompt("judge_classic_ties" if ties else "judge_classic")


def _ordered(pair: Any, position: str) -> tuple[str, str]:
    return (pair.text_a, pair.text_b) if position == "AB" else (pair.text_b, pair.text_a)


def _call_key(pair: Any, trial: int, repeat: int, position: str) -> dict:
    return {
        "trial": trial,
        "repeat": repeat,
        "position": position,
        "question_id": pair.question_id,
        "question_type": pair.question_type,
        **{k: getattr(pair, k) for k in METHOD_KEY},
    }


def _judge(
    llm: LLM,
    pairs: pd.DataFrame,
    prompt: Prompt,
    schema: type[BaseModel],
    stage: str,
    calls: Sequence[tuple[int, int, str]],
    replicate_of: Callable[[int, int], int],
    max_tokens: int,
    temperature: float,
    rows_of: Callable[[BaseModel, str], list[dict]],
    row_columns: list[str],
) -> Judgments:
    """One structured call per (trial, repeat, position) in `calls` and per pair; `rows_of` turns a
    reply into rows of `row_columns`. The calls are independent: they run concurrently up to
    `llm.concurrency` and are combined in this order (calls, then pairs), whatever order they
    finished in; each call's cost is its own ledger tally.
    """
    units = [(call, pair) for call in calls for pair in pairs.itertuples(index=False)]

    def judge_one(unit: tuple[tuple[int, int, str], Any]) -> tuple[list[dict], dict | None, dict]:
        (trial, repeat, position), pair = unit
        first, second = _ordered(pair, position)
        key = _call_key(pair, trial, repeat, position)
        rows, failure = [], None
        with llm.ledger.tally() as tally:
            try:
                reply = llm.structured(
                    prompt.render(question=pair.question, answer_1=first, answer_2=second),
                    schema,
                    stage=stage,
                    method=pair_label(pair),
                    prompt=prompt,
                    replicate=replicate_of(trial, repeat),
                    max_tokens=max_tokens,
                    temperature=temperature,
                )
                rows = [key | row for row in rows_of(reply, position)]
            except LLMError as err:
                failure = key | {"stage": stage, "kind": err.kind, "error": str(err)}
        return rows, failure, key | {"stage": stage, "failed": failure is not None, **tally.totals()}

    judged = llm.fan_out(judge_one, units, label=stage)
    return Judgments(
        pd.DataFrame([row for rows, _, _ in judged for row in rows], columns=[*CALL_KEY, *row_columns]),
        pd.DataFrame([f for _, f, _ in judged if f is not None], columns=FAILURE_COLUMNS),
        pd.DataFrame([cost for _, _, cost in judged], columns=COST_COLUMNS),
    )


def judge_unbiased(
    llm: LLM,
    pairs: pd.DataFrame,
    aspects: Sequence[str],
    *,
    trials: int,
    repeats: int,
    max_tokens: int,
    temperature: float,
    first_trial: int = 0,
) -> Judgments:
    """Rubric scores of both answers, in both orders, `repeats` times per order, in `trials` trials
    numbered from `first_trial` (a trial judging answers of its own is judged alone, under its number).
    score_a / score_b are method_a's / method_b's scores whatever slot the answer was shown in.
    Every (trial, repeat) has its own replicate, so each is a distinct cached model call.
    """
    aspects = tuple(aspects)

    def rows(reply: Any, position: str) -> list[dict]:  # a score_schema model: fields made at run time
        out = []
        for aspect, first, second in zip(aspects, reply.answer_1, reply.answer_2, strict=True):
            a, b = (first, second) if position == "AB" else (second, first)
            out.append({"aspect": aspect, "score_a": a, "score_b": b})
        return out

    numbers = range(first_trial, first_trial + trials)
    calls = [(t, r, p) for t in numbers for r in range(repeats) for p in POSITIONS]
    return _judge(
        llm,
        pairs,
        scoring_prompt(aspects),
        score_schema(aspects),
        "judge_unbiased",
        calls,
        lambda t, r: t * repeats + r,
        max_tokens,
        temperature,
        rows,
        ["aspect", "score_a", "score_b"],
    )


def judge_classic(
    llm: LLM,
    pairs: pd.DataFrame,
    *,
    max_tokens: int,
    temperature: float,
    positions: Sequence[str] = ("AB",),
    repeats: int = 1,
    ties: bool = False,
) -> Judgments:
    """The classic protocol: a winner per criterion and overall, one trial. The protocol shows A
    first ("AB"); "BA" shows B first, a condition of its own (the judgments keep `position`, so
    the two fixed orders are never merged). Each (order, pair) is asked `repeats` times (replicate
    = repeat, so repeat 0 is the single call of the one-repeat protocol). With `ties` the judge may
    answer 0 for "equally good". winner is 'a', 'b' (the method) or 'tie'; winner_slot 1 or 2
    (where the winning answer was shown), 0 for a tie.
    """

    def rows(reply: BaseModel, position: str) -> list[dict]:
        out = []
        for aspect in (*CLASSIC_ASPECTS, "overall"):
            slot = getattr(reply, aspect)
            winner = "tie" if slot == 0 else "a" if (slot == 1) == (position == "AB") else "b"
            out.append({"aspect": aspect, "winner": winner, "winner_slot": slot})
        return out

    prompt = classic_prompt(ties)
    return _judge(
        llm,
        pairs,
        prompt,
        classic_schema(ties),
        "judge_classic",
        [(0, r, p) for r in range(repeats) for p in positions],
        lambda t, r: r,
        max_tokens,
        temperature,
        rows,
        ["aspect", "winner", "winner_slot"],
    )


def judge_classic_with_settings(
    llm: LLM, pairs: pd.DataFrame, cfg: JudgeSettings, positions: Sequence[str]
) -> Judgments:
    """`judge_classic` in the shown `positions` with a judge section's reply cap, temperature,
    repeats and ties.
    """
    return judge_classic(
        llm,
        pairs,
        max_tokens=cfg.classic_max_tokens,
        temperature=cfg.judge_temperature,
        positions=positions,
        repeats=cfg.classic_repeats,
        ties=cfg.classic_ties,
    )
