"""Answer pairs and length alignment (the unbiased protocol, Sections IV-B/C of the seed paper).

Pairs: (question_id, question, question_type, method_a, replicate_a, text_a, method_b,
replicate_b, text_b); a method is identified by (method, replicate), so a method can be paired
with itself. The answer shorter as generated is regenerated with the longer one's length added to
its answer prompt (up to R times, the longer answer left as it is); then the model is asked to
append the missing words to it; a pair still apart by more than the tolerance is discarded and
counted.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from itertools import combinations
from typing import Any

import pandas as pd

from ragtrial.llm.client import LLM
from ragtrial.llm.errors import LLMError
from ragtrial.prompts import Prompt, load_prompt

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
# (question_id, method, replicate, target_words) -> the method's answer written to that length
Regenerate = Callable[[str, str, int, int], str]
# (question, answer, n_words, method) -> words to append to the answer
Append = Callable[[str, str, int, str], str]

# A pair left apart because the answer that had to change is one the kit cannot write again (an
# imported answer, an upstream system's answer): it stays as it is.
NOT_ALIGNABLE = "not alignable (imported or upstream answer)"


class CannotRegenerate(Exception):
    """`Regenerate` of an answer that cannot be written again (imported, or an upstream system's):
    alignment leaves it.
    """


# Bounds the forced append's generation near the missing word count (BPE prose: ~1.3 tokens/word).
TOKENS_PER_WORD = 1.4


def word_count(text: str) -> int:
    return len(text.split())


def pair_label(row: Any) -> str:  # a pairs row: a Series or an itertuples() namedtuple
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


ALIGNMENT_LOG_COLUMNS = [
    "question_id",
    *METHOD_KEY,
    "words_a_before",
    "words_b_before",
    "gap_before",
    "regenerations",
    "forced",
    "error",
    "gap_after",
    "status",
    # the pair's own regeneration and append calls (embeddings not counted) and their tokens
    "calls",
    "cached_calls",
    "prompt_tokens",
    "completion_tokens",
]


def _align_pair(
    pair: Any,  # an itertuples() row of the pairs frame
    regenerate: Regenerate,
    append: Append,
    tolerance: int,
    max_attempts: int,
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
    # The paper adjusts "the shorter answer to match the length of the longer": the answer shorter as
    # generated is the one rewritten (and appended to), toward the longer one's length, even after a
    # rewrite overshoots it; the longer answer is never rewritten. Only when the shorter one cannot be
    # written again (imported, upstream) is the longer one rewritten to its length instead.
    side, other = _shorter_first(text)
    fixed: set[str] = set()  # sides whose answer cannot be regenerated (imported answers)
    missed = 0  # how far the last request missed: the next one asks past the target by as much
    try:
        while _gap(text) > tolerance and log["regenerations"] < max_attempts:
            requested = max(1, word_count(text[other]) + missed)
            try:
                text[side] = regenerate(pair.question_id, *method[side], requested)
            except CannotRegenerate:
                fixed.add(side)
                if other in fixed:
                    break
                side, other, missed = other, side, 0
                continue
            missed = requested - word_count(text[side])
            log["regenerations"] += 1
        if _gap(text) > tolerance and side not in fixed and word_count(text[side]) < word_count(text[other]):
            log["forced"] = True
            added = append(pair.question, text[side], _gap(text), method[side][0])
            text[side] = f"{text[side].rstrip()} {added.strip()}".strip()
    except LLMError as err:
        log["error"] = f"{err.kind}: {err}"
    status = (
        "failed"
        if log["error"]
        else "aligned"
        if _gap(text) <= tolerance
        else NOT_ALIGNABLE
        if fixed
        else "discarded"
    )
    return text, log | {"gap_after": _gap(text), "status": status}


def _first_regeneration(pair: Any) -> tuple:
    """What a pair's first attempt asks for: its shorter answer written to the other's length. Two
    pairs that ask the same (one answer against two answers of one length) make one request; as the
    fan-out's key, the second pair runs after the first ones and replays it from the cache at any
    concurrency, as at 1, so each pair's calls and cached calls are the same whatever the timing.
    """
    text = {"a": pair.text_a, "b": pair.text_b}
    side, other = _shorter_first(text)
    answer = (getattr(pair, f"method_{side}"), getattr(pair, f"replicate_{side}"))
    return (pair.question_id, *answer, word_count(text[other]))


def align_lengths(
    pairs: pd.DataFrame,
    regenerate: Regenerate,
    append: Append,
    tolerance: int,
    max_attempts: int,
    *,
    llm: LLM | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Generate-adjust length alignment. Returns the aligned pairs and a log with one row per pair.

    Each attempt regenerates the answer that was shorter as generated (never the longer one, even
    after a rewrite overshot it), asking for the longer one's length corrected by how far the
    previous request missed (so repeated attempts are different requests, even for a deterministic
    model). After `max_attempts` the model is asked to append the missing words to it when it is
    still the shorter (forced alignment). Pairs still apart by more than `tolerance` words are
    `discarded`; pairs whose regeneration or append call failed are `failed`.

    With `llm` (the client `regenerate` and `append` call), the pairs are aligned concurrently up
    to `llm.concurrency`; one pair's attempts stay in sequence, each depends on the one before.
    The log's calls and tokens are each pair's own (a ledger tally per pair); without `llm` the
    pairs run in sequence and those columns are empty (no ledger to tally).
    """

    def align(pair: tuple) -> tuple[dict[str, str], dict]:
        if llm is None:
            return _align_pair(pair, regenerate, append, tolerance, max_attempts)
        with llm.ledger.tally() as tally:
            text, row = _align_pair(pair, regenerate, append, tolerance, max_attempts)
        return text, row | tally.totals()

    units = list(pairs.itertuples(index=False))
    done = (
        llm.fan_out(align, units, label="length alignment", key=_first_regeneration)
        if llm
        else [align(p) for p in units]
    )
    aligned, log = [], []
    for pair, (text, row) in zip(units, done, strict=True):
        log.append(row)
        if row["status"] == "aligned":
            aligned.append(pair._replace(text_a=text["a"], text_b=text["b"]))
    # The log keeps its columns with no pair (every answer failed): the report still tabulates it.
    return pd.DataFrame(aligned, columns=PAIR_COLUMNS), pd.DataFrame(log, columns=ALIGNMENT_LOG_COLUMNS)


def length_hint_prompt(prompt: Prompt, target_words: int) -> Prompt:
    """`prompt` with the target length added to its instructions (the generate-adjust step). The
    prompt's own length rule (e.g. summarize_query's "at most about 80 words") is removed first,
    so the request never states two lengths; the tag says so ("-length_rule").
    """
    hint = load_prompt("align_regenerate")
    sentence = hint.render(target_words=target_words)[-1]["content"]
    system, version = prompt.system, prompt.version
    if prompt.length_rule:
        system, version = system.replace(f" {prompt.length_rule}", ""), f"{version}-length_rule"
    return dataclasses.replace(
        prompt, system=f"{system} {sentence}".strip(), version=f"{version}+{hint.tag}", length_rule=""
    )


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
