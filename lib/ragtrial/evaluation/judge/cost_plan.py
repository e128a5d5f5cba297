"""What a judge run will cost before it is paid for: calls and tokens from the protocol's sizes,
and minutes on the embedded model from its measured throughput.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import pandas as pd

from ragtrial.evaluation.judge.protocols import POSITIONS, classic_prompt, scoring_prompt
from ragtrial.llm.plan import StagePlan, projected
from ragtrial.llm.tokens import count_tokens

if TYPE_CHECKING:
    from ragtrial.config.judge import JudgeSettings, UnbiasedJudgeSettings


# ---------------------------------------------------------------- cost before paying


def judge_prompt_tokens(
    aspects: Sequence[str] | None, question_tokens: int, answer_tokens: int, ties: bool = False
) -> int:
    """Prompt tokens of one judge call (cl100k): the unbiased scoring prompt for `aspects`, or the
    classic prompt (the one allowing ties when `ties`) when `aspects` is None, with a question and
    two answers of the given sizes.
    """
    prompt = classic_prompt(ties) if aspects is None else scoring_prompt(tuple(aspects))
    frame = "\n".join(m["content"] for m in prompt.render(question="", answer_1="", answer_2=""))
    return count_tokens(frame) + question_tokens + 2 * answer_tokens


def mean_question_tokens(questions: Sequence[str]) -> int:
    """The mean question length in tokens (cl100k) for the estimate; 0 without questions (every
    generation call failed: the estimate is then of nothing, and the failures say why).
    """
    return int(sum(map(count_tokens, questions)) / len(questions)) if questions else 0


# The embedded Gemma 3 270M on 2 cores: prompt tokens/s, free-text and grammar-constrained JSON tokens/s.
EMBEDDED_THROUGHPUT = {"prompt": 400.0, "text": 40.0, "json": 10.0}


def answer_rounds(settings: UnbiasedJudgeSettings, unbiased: bool = True) -> int:
    """How many times the answers are written and aligned: once per trial under `trial_scope: answers`
    when the unbiased protocol runs (the classic one alone judges one trial), else once.
    """
    return settings.trials if unbiased and settings.trial_scope == "answers" else 1


def estimate_cost(
    settings: UnbiasedJudgeSettings,
    n_questions: int,
    n_pairs: int,
    *,
    n_answers: int,
    question_tokens: int,
    answer_tokens: int,
    answer_prompt_tokens: int,
    classic_positions: int = 1,
    unbiased: bool = True,
    throughput: dict[str, float] | None = None,
) -> pd.DataFrame:
    """Dry-run estimate of calls and tokens, completion tokens at their maximum. Unbiased judge
    calls = M trials x N repeats x 2 positions x questions x pairs (all aspects in one call); length
    alignment is bounded by R regenerations plus one append per pair; answers count one generation
    each (a map-reduce method's map calls come on top); under `trial_scope: answers` (with the
    unbiased protocol) the answers and their alignment come once per trial. Classic judge calls =
    orders x `classic_repeats` x questions x pairs; without `unbiased` neither alignment nor the
    unbiased judge runs. With a `throughput` (keys prompt, text, json in tokens/s), also the seconds those
    tokens take.
    """
    s = settings
    classic = cast("JudgeSettings", s)  # classic positions come with JudgeSettings only (06, 07)
    pairs = n_questions * n_pairs
    unbiased_pairs = pairs if unbiased else 0
    rounds = answer_rounds(s, unbiased)
    plan = [
        ("answers", "text", n_answers * rounds, answer_prompt_tokens, s.answer_max_tokens),
        (
            "length alignment (at most)",
            "text",
            rounds * unbiased_pairs * (s.max_regenerations + 1),
            answer_prompt_tokens,
            s.answer_max_tokens,
        ),
        # notebook 11 runs the unbiased protocol alone: no classic order, so no classic keys
        *(
            [
                (
                    "classic judge",
                    "json",
                    pairs * classic_positions * classic.classic_repeats,
                    judge_prompt_tokens(None, question_tokens, answer_tokens, classic.classic_ties),
                    classic.classic_max_tokens,
                )
            ]
            if classic_positions
            else []
        ),
        (
            "unbiased judge",
            "json",
            s.trials * s.repeats * len(POSITIONS) * unbiased_pairs,
            judge_prompt_tokens(s.aspects, question_tokens, answer_tokens),
            s.judge_max_tokens,
        ),
    ]
    table = pd.DataFrame(
        [
            {
                "step": step,
                "output": output,
                "calls": calls,
                "prompt_tokens": calls * per_prompt,
                "completion_tokens_max": calls * per_completion,
            }
            for step, output, calls, per_prompt, per_completion in plan
        ]
    )
    if throughput:
        table["seconds_est"] = (
            table["prompt_tokens"] / throughput["prompt"]
            + table["completion_tokens_max"] / table["output"].map(throughput)
        ).round(0)
    return table


# How each step of `estimate_cost` is counted: answers and judge calls follow from the questions and
# pairs; alignment stops as soon as a pair's lengths agree, so its count is at most the stated one.
# Alignment's regenerations are answer calls and its appends `align_append` calls in the ledger.
# The judges' counts are upper bounds: a pair with a failed answer is not judged, nor (unbiased) one
# whose lengths stay apart after alignment; the paper-size judge rehearsal judged 55,236 of 07's
# 90,000 planned unbiased calls, the rest discarded by alignment.
STEP_BASIS = {
    "answers": ("answer", "exact", ()),
    "length alignment (at most)": ("length_alignment", "upper bound", ("answer", "align_append")),
    "classic judge": ("judge_classic", "upper bound", ()),
    "unbiased judge": ("judge_unbiased", "upper bound", ()),
}


def planned_calls(
    settings: UnbiasedJudgeSettings, n_questions: int, n_pairs: int, **sizes
) -> list[StagePlan]:
    """`estimate_cost` as stage plans for `ragtrial estimate` (the same counts, no second copy): the
    prompts need answers not yet written, so their tokens are projected.
    """
    plans = []
    for row in estimate_cost(settings, n_questions, n_pairs, **sizes).itertuples(index=False):
        stage, basis, recorded = STEP_BASIS[row.step]
        calls = int(row.calls)
        per_call = int(row.completion_tokens_max) // calls if calls else 0
        plans.append(
            projected(
                stage,
                calls,
                int(row.prompt_tokens),
                per_call,
                basis,
                row.output,
                row.step,
                ledger_stages=recorded,
            )
        )
    return plans
