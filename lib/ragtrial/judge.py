"""LLM-as-judge: the classic head-to-head protocol beside the unbiased one.

Classic (Edge et al. 2024, as LightRAG and later papers ran it): the two answers are shown in one
order, A then B; the judge names the better answer per criterion (comprehensiveness, diversity,
empowerment, directness) and overall; no ties, one trial.

Unbiased (the seed paper, Sections IV-B/C): the shorter answer is regenerated with the longer one's
length added to its answer prompt (up to R times; then the model is asked to append the missing
words; a pair still apart by more than the tolerance is discarded and counted). Each pair is
scored 0-5 per aspect against a written rubric in both orders (AB and BA, separate prompts), N
times per order, and the whole evaluation is re-run M times (trials). An answer's aspect score is
the mean over orders and repeats, its overall score the sum over aspects; equal overall scores
are a tie. A question with a failed judge call is left out of that trial and counted, never scored.

Tables: `pairs` (question_id, question, question_type, method_a, replicate_a, text_a, method_b,
replicate_b, text_b); judgments are long frames with one row per (trial, repeat, position, pair,
aspect). A method is identified by (method, replicate) so a method can be paired with itself.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import combinations
from typing import TYPE_CHECKING, Annotated, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, create_model

from ragtrial.llm import LLM, LLMError
from ragtrial.prompts import Prompt, load_prompt
from ragtrial.tokens import count_tokens

if TYPE_CHECKING:
    from ragtrial.config import JudgeSettings, QuestionsSettings
    from ragtrial.index import GraphIndex
    from ragtrial.methods import Method
    from ragtrial.records import Dataset, Question

CLASSIC_ASPECTS = ("comprehensiveness", "diversity", "empowerment", "directness")
POSITIONS = ("AB", "BA")
METHOD_KEY = ["method_a", "replicate_a", "method_b", "replicate_b"]
PAIR_COLUMNS = [
    "question_id",
    "question",
    "question_type",
    "method_a",
    "replicate_a",
    "text_a",
    "method_b",
    "replicate_b",
    "text_b",
]
CALL_KEY = ["trial", "repeat", "position", "question_id", "question_type", *METHOD_KEY]
FAILURE_COLUMNS = [*CALL_KEY, "stage", "kind", "error"]
# Bounds the forced append's generation near the missing word count (BPE prose: ~1.3 tokens/word).
TOKENS_PER_WORD = 1.4
Score = Literal[0, 1, 2, 3, 4, 5]  # an enum, since llama.cpp's grammar ignores integer bounds

# (question_id, method, replicate, target_words) -> the method's answer written to that length
Regenerate = Callable[[str, str, int, int], str]
# (question, answer, n_words, method) -> words to append to the answer
Append = Callable[[str, str, int, str], str]


def word_count(text: str) -> int:
    return len(text.split())


def pair_label(row: pd.Series | tuple) -> str:
    """'a vs b', with run numbers when a method meets itself."""
    if row.method_a == row.method_b:
        return f"{row.method_a} #{row.replicate_a} vs #{row.replicate_b}"
    return f"{row.method_a} vs {row.method_b}"


# ---------------------------------------------------------------- pairs and length alignment


def all_pairs(methods: Sequence[str]) -> list[tuple[str, str]]:
    return list(combinations(methods, 2))


def make_pairs(
    questions: pd.DataFrame,
    answers: pd.DataFrame,
    method_pairs: Sequence[tuple[str, str]],
    replicates: tuple[int, int] = (0, 0),
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One row per (method pair, question) whose two answers exist, and the answers that were
    missing (question_id, method, replicate) so their pairs can be reported, not silently lost.
    """
    text = answers.set_index(["question_id", "method", "replicate"])["text"]
    rows, missing = [], []
    for method_a, method_b in method_pairs:
        for q in questions.itertuples(index=False):
            key_a, key_b = (q.question_id, method_a, replicates[0]), (q.question_id, method_b, replicates[1])
            absent = [k for k in (key_a, key_b) if k not in text.index]
            if absent:
                missing += absent
                continue
            rows.append(
                (
                    q.question_id,
                    q.question,
                    q.question_type,
                    method_a,
                    replicates[0],
                    text[key_a],
                    method_b,
                    replicates[1],
                    text[key_b],
                )
            )
    return (
        pd.DataFrame(rows, columns=PAIR_COLUMNS),
        pd.DataFrame(missing, columns=["question_id", "method", "replicate"]).drop_duplicates(),
    )


def _gap(text: dict[str, str]) -> int:
    return abs(word_count(text["a"]) - word_count(text["b"]))


def _shorter_first(text: dict[str, str]) -> tuple[str, str]:
    return ("a", "b") if word_count(text["a"]) < word_count(text["b"]) else ("b", "a")


def _align_pair(
    pair: tuple, regenerate: Regenerate, append: Append, tolerance: int, max_attempts: int
) -> tuple[dict[str, str], dict]:
    text = {"a": pair.text_a, "b": pair.text_b}
    method = {"a": (pair.method_a, pair.replicate_a), "b": (pair.method_b, pair.replicate_b)}
    log = {
        "question_id": pair.question_id,
        **{k: getattr(pair, k) for k in METHOD_KEY},
        "words_a_before": word_count(text["a"]),
        "words_b_before": word_count(text["b"]),
        "gap_before": _gap(text),
        "regenerations": 0,
        "forced": False,
        "error": "",
    }
    requested: dict[str, int] = {}
    try:
        while _gap(text) > tolerance and log["regenerations"] < max_attempts:
            short, long = _shorter_first(text)
            # Ask past the target by as much as the last request for this side fell short.
            missed = requested[short] - word_count(text[short]) if short in requested else 0
            requested[short] = max(1, word_count(text[long]) + missed)
            text[short] = regenerate(pair.question_id, *method[short], requested[short])
            log["regenerations"] += 1
        if _gap(text) > tolerance:
            short, _ = _shorter_first(text)
            log["forced"] = True
            added = append(pair.question, text[short], _gap(text), method[short][0])
            text[short] = f"{text[short].rstrip()} {added.strip()}".strip()
    except LLMError as err:
        log["error"] = f"{err.kind}: {err}"
    status = "failed" if log["error"] else "aligned" if _gap(text) <= tolerance else "discarded"
    return text, log | {"gap_after": _gap(text), "status": status}


def align_lengths(
    pairs: pd.DataFrame, regenerate: Regenerate, append: Append, tolerance: int, max_attempts: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Generate-adjust length alignment. Returns the aligned pairs and a log with one row per pair.

    Each attempt regenerates the currently shorter answer, asking for the longer one's length
    corrected by how far the previous request for that answer missed (so repeated attempts are
    different requests, even for a deterministic model). After `max_attempts` the model is asked
    to append the missing words (forced alignment). Pairs still apart by more than `tolerance`
    words are `discarded`; pairs whose regeneration or append call failed are `failed`.
    """
    aligned, log = [], []
    for pair in pairs.itertuples(index=False):
        text, row = _align_pair(pair, regenerate, append, tolerance, max_attempts)
        log.append(row)
        if row["status"] == "aligned":
            aligned.append(pair._replace(text_a=text["a"], text_b=text["b"]))
    return pd.DataFrame(aligned, columns=PAIR_COLUMNS), pd.DataFrame(log)


def length_hint_prompt(prompt: Prompt, target_words: int) -> Prompt:
    """`prompt` with the target length added to its instructions (the generate-adjust step)."""
    hint = load_prompt("align_regenerate")
    sentence = hint.render(target_words=target_words)[-1]["content"]
    system = f"{prompt.system} {sentence}".strip()
    return dataclasses.replace(prompt, system=system, version=f"{prompt.version}+{hint.tag}")


def llm_appender(llm: LLM, temperature: float) -> Append:
    """Forced alignment: the model writes the missing words, with a generation budget sized to
    them so a rambling reply cannot overshoot by much.
    """
    prompt = load_prompt("align_append")

    def append(question: str, answer: str, n_words: int, method: str) -> str:
        messages = prompt.render(question=question, answer=answer, n_words=n_words)
        return llm.complete(
            messages,
            stage="align_append",
            method=method,
            prompt=prompt,
            temperature=temperature,
            max_tokens=math.ceil(n_words * TOKENS_PER_WORD) + 4,
        ).text

    return append


# ---------------------------------------------------------------- judge calls


@dataclass
class Judgments:
    judgments: pd.DataFrame  # successful calls, one row per aspect
    failures: pd.DataFrame  # calls that produced no usable reply (FAILURE_COLUMNS)


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
    scores = (Annotated[list[Score], Field(min_length=len(aspects), max_length=len(aspects))], ...)
    return create_model(
        "AspectScores", __config__=ConfigDict(extra="forbid"), answer_1=scores, answer_2=scores
    )


@cache
def classic_schema() -> type[BaseModel]:
    fields = {a: (Literal[1, 2], ...) for a in (*CLASSIC_ASPECTS, "overall")}
    return create_model("ClassicVerdict", __config__=ConfigDict(extra="forbid"), **fields)


def _ordered(pair: tuple, position: str) -> tuple[str, str]:
    return (pair.text_a, pair.text_b) if position == "AB" else (pair.text_b, pair.text_a)


def _call_key(pair: tuple, trial: int, repeat: int, position: str) -> dict:
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
    reply into rows of `row_columns`.
    """
    rows, failures = [], []
    for trial, repeat, position in calls:
        for pair in pairs.itertuples(index=False):
            first, second = _ordered(pair, position)
            key = _call_key(pair, trial, repeat, position)
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
            except LLMError as err:
                failures.append(key | {"stage": stage, "kind": err.kind, "error": str(err)})
                continue
            rows += [key | row for row in rows_of(reply, position)]
    return Judgments(
        pd.DataFrame(rows, columns=[*CALL_KEY, *row_columns]), pd.DataFrame(failures, columns=FAILURE_COLUMNS)
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
) -> Judgments:
    """Rubric scores of both answers, in both orders, `repeats` times per order, in `trials` trials.
    score_a / score_b are method_a's / method_b's scores whatever slot the answer was shown in.
    Every (trial, repeat) has its own replicate, so each is a distinct cached model call.
    """
    aspects = tuple(aspects)

    def rows(reply: BaseModel, position: str) -> list[dict]:
        out = []
        for aspect, first, second in zip(aspects, reply.answer_1, reply.answer_2, strict=True):
            a, b = (first, second) if position == "AB" else (second, first)
            out.append({"aspect": aspect, "score_a": a, "score_b": b})
        return out

    calls = [(t, r, p) for t in range(trials) for r in range(repeats) for p in POSITIONS]
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
    llm: LLM, pairs: pd.DataFrame, *, max_tokens: int, temperature: float, positions: Sequence[str] = ("AB",)
) -> Judgments:
    """The classic protocol: a winner per criterion and overall, no ties, one trial. The protocol
    shows A first ("AB"); ("AB", "BA") adds the swapped order for the position-bias audit.
    winner is 'a' or 'b' (the method), winner_slot 1 or 2 (where its answer was shown).
    """

    def rows(reply: BaseModel, position: str) -> list[dict]:
        out = []
        for aspect in (*CLASSIC_ASPECTS, "overall"):
            slot = getattr(reply, aspect)
            winner = "a" if (slot == 1) == (position == "AB") else "b"
            out.append({"aspect": aspect, "winner": winner, "winner_slot": slot})
        return out

    prompt = load_prompt("judge_classic")
    return _judge(
        llm,
        pairs,
        prompt,
        classic_schema(),
        "judge_classic",
        [(0, 0, p) for p in positions],
        lambda t, r: 0,
        max_tokens,
        temperature,
        rows,
        ["aspect", "winner", "winner_slot"],
    )


# ---------------------------------------------------------------- cost before paying


def judge_prompt_tokens(aspects: Sequence[str] | None, question_tokens: int, answer_tokens: int) -> int:
    """Prompt tokens of one judge call (cl100k): the unbiased scoring prompt for `aspects`, or the
    classic prompt when `aspects` is None, with a question and two answers of the given sizes.
    """
    prompt = load_prompt("judge_classic") if aspects is None else scoring_prompt(tuple(aspects))
    frame = "\n".join(m["content"] for m in prompt.render(question="", answer_1="", answer_2=""))
    return count_tokens(frame) + question_tokens + 2 * answer_tokens


# The embedded Gemma 3 270M on 2 cores: prompt tokens/s, free-text and grammar-constrained JSON tokens/s.
EMBEDDED_THROUGHPUT = {"prompt": 400.0, "text": 40.0, "json": 10.0}


def estimate_cost(
    settings: JudgeSettings,
    n_questions: int,
    n_pairs: int,
    *,
    n_answers: int,
    question_tokens: int,
    answer_tokens: int,
    answer_prompt_tokens: int,
    classic_positions: int = 1,
    throughput: dict[str, float] | None = None,
) -> pd.DataFrame:
    """Dry-run estimate of calls and tokens, completion tokens at their maximum. Unbiased judge
    calls = M trials x N repeats x 2 positions x questions x pairs (all aspects in one call); length
    alignment is bounded by R regenerations plus one append per pair; answers count one generation
    each (a map-reduce method's map calls come on top). With a `throughput` (keys prompt, text,
    json in tokens/s), also the seconds those tokens take.
    """
    s = settings
    pairs = n_questions * n_pairs
    plan = [
        ("answers", "text", n_answers, answer_prompt_tokens, s.answer_max_tokens),
        (
            "length alignment (at most)",
            "text",
            pairs * (s.max_regenerations + 1),
            answer_prompt_tokens,
            s.answer_max_tokens,
        ),
        (
            "classic judge",
            "json",
            pairs * classic_positions,
            judge_prompt_tokens(None, question_tokens, answer_tokens),
            s.classic_max_tokens,
        ),
        (
            "unbiased judge",
            "json",
            s.trials * s.repeats * len(POSITIONS) * pairs,
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


def judge_questions(
    llm: LLM, dataset: Dataset, index: GraphIndex, cfg: JudgeSettings, questions_cfg: QuestionsSettings
) -> tuple[list[Question], pd.DataFrame]:
    """The questions to judge and the failures of generating them: the data set's own, a seeded
    few per question_type, or graph-text-grounded node/edge/subgraph questions (level as type).
    """
    from ragtrial.experiment import select_questions
    from ragtrial.questions import graph_questions
    from ragtrial.records import Question

    if cfg.question_source == "dataset":
        return select_questions(dataset.questions, cfg.questions_per_type, cfg.seed), pd.DataFrame()
    generated = graph_questions(llm, index, questions_cfg)
    return (
        [
            Question(question_id=r.question_id, question=r.question, question_type=r.level)
            for r in generated.questions.itertuples(index=False)
        ],
        generated.failures,
    )


def questions_frame(questions: Sequence[Question]) -> pd.DataFrame:
    return pd.DataFrame(
        [(q.question_id, q.question, q.question_type) for q in questions],
        columns=["question_id", "question", "question_type"],
    )


@dataclass
class AnswerSet:
    frame: pd.DataFrame  # experiment.answers_frame plus `replicate`
    regenerate: Regenerate  # the same method, same context, with a target length in its answer prompt


def answer_questions(methods: dict[tuple[str, int], Method], questions: Sequence[Question]) -> AnswerSet:
    """Every (method, replicate) answers every question; regeneration reuses the context the method
    retrieved and its own answer prompt (the reduce prompt for map-reduce methods) plus the length.
    """
    from ragtrial.experiment import answers_frame

    answers = {
        (q.question_id, name, replicate): method.answer(q)
        for q in questions
        for (name, replicate), method in methods.items()
    }
    frame = answers_frame(answers.values()).assign(replicate=[key[2] for key in answers])
    question_text = {q.question_id: q.question for q in questions}

    def regenerate(question_id: str, method: str, replicate: int, target_words: int) -> str:
        runner = methods[(method, replicate)]
        prompt = getattr(runner, "reduce_prompt", None) or runner.generator.prompt
        return runner.generator.generate(
            question_text[question_id],
            answers[(question_id, method, replicate)].context,
            method,
            prompt=length_hint_prompt(prompt, target_words),
        )

    return AnswerSet(frame, regenerate)
