"""Answer correctness by key facts (seed 004): an answer is correct when it states every fact a
correct answer must contain (`Question.key_facts`).

`diagnostics.correctness` chooses how a fact is found in an answer:
- "judge" (`check_key_facts`): a judge prompt (`check_key_facts`) is given the question, the numbered
  facts and the answer (citation markers stripped) and replies one boolean per fact, paraphrase-
  tolerant; the reply schema fixes the array's length to the number of facts.
- "contains" (`contains_correctness`): a fact is stated when one of its forms, normalized, is contained
  in the normalized answer (`metrics.answer_contained`), no model call.
A question without key facts takes its gold answers (`key_fact_source` "gold answers"): the first gold
answer with its aliases is one fact, except on a contradictory question, whose gold answers are the
values its sources state: each is a fact, so a correct answer names every value.

Frames: answers (question_id, method, text, failure) -> one row per answer (question_id, method,
key_fact_source, key_facts, facts_present, answer_correct, status). Status "ok" rows are scored;
"no answer" (the method failed), "no key facts" (nothing to check against) and "failed" (the check's
reply stayed unparseable after the client's repair round, listed in the failures) are counted, never
scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any

import pandas as pd
from pydantic import BaseModel, Field, create_model

from ragtrial.evaluation.answer_metrics import CONTRADICTORY_TYPE, answer_contained, is_declined
from ragtrial.evaluation.grounding import NO_ANSWER, answer_text
from ragtrial.llm.errors import LLMError
from ragtrial.llm.plan import QUESTION_TOKENS, StagePlan, frame_tokens, projected
from ragtrial.prompts import load_prompt

if TYPE_CHECKING:
    from ragtrial.config.settings import Settings
    from ragtrial.llm.client import LLM
    from ragtrial.records import Question

STAGE, PROMPT = "key_facts", "check_key_facts"
OK, FAILED, NO_KEY_FACTS = "ok", "failed", "no key facts"
KEY_FACTS, GOLD_ANSWERS = "key facts", "gold answers"
COLUMNS = [
    "question_id",
    "method",
    "key_fact_source",
    "key_facts",
    "facts_present",
    "answer_correct",
    "status",
]
FAILURE_COLUMNS = ["question_id", "method", "stage", "kind", "detail"]
# cl100k tokens projected for a question's key facts before the questions are sampled
FACTS_TOKENS = 24


@cache
def facts_reply_schema(n_facts: int) -> type[BaseModel]:
    """Reply schema: `present`, one boolean per numbered fact, exactly `n_facts` of them."""
    present = Annotated[list[bool], Field(min_length=n_facts, max_length=n_facts)]
    return create_model("KeyFactsPresent", present=(present, ...))


def question_facts(question: Question) -> tuple[str, list[list[str]]]:
    """The facts an answer to `question` must state, each as its accepted forms, and where they come
    from: `Question.key_facts` ("key facts"), else its gold answers ("gold answers": one fact with its
    aliases, or on a contradictory question one fact per conflicting value); none when it has neither.
    """
    if question.key_facts:
        return KEY_FACTS, [[fact] for fact in question.key_facts]
    return gold_answer_facts(question)


def gold_answer_facts(question: Question) -> tuple[str, list[list[str]]]:
    """The question's gold answers as facts: the first with its aliases, or on a contradictory
    question each conflicting value (the containment check's facts: a key-fact sentence is never
    contained word for word in a short answer).
    """
    golds = [g for g in question.answers if g.strip()]
    if not golds:
        return GOLD_ANSWERS, []
    if question.question_type == CONTRADICTORY_TYPE:
        return GOLD_ANSWERS, [[value] for value in golds]
    return GOLD_ANSWERS, [golds]


def fact_text(forms: Sequence[str]) -> str:
    """One fact as the judge reads it: its first form, its other forms as accepted spellings."""
    return forms[0] if len(forms) == 1 else f"{forms[0]} (also written: {'; '.join(forms[1:])})"


def _questions_by_id(questions: Sequence[Question]) -> dict[str, Question]:
    return {q.question_id: q for q in questions}


def _question_of(by_id: dict[str, Question], question_id: str) -> Question:
    if question_id not in by_id:
        raise KeyError(f"answers: question_id {question_id!r} is not among the questions given")
    return by_id[question_id]


def _row(
    r: dict[str, Any], source: str, facts: list[list[str]], status: str, present: int | None = None
) -> dict:
    return {
        "question_id": r["question_id"],
        "method": r["method"],
        "key_fact_source": source,
        "key_facts": [fact_text(forms) for forms in facts],
        "facts_present": present,
        "answer_correct": None if present is None else present == len(facts),
        "status": status,
    }


def _frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=COLUMNS).astype({"facts_present": "Int64", "answer_correct": "boolean"})


def _unscored(r: dict[str, Any], source: str, facts: list[list[str]]) -> dict | None:
    """The row of an answer that is not checked (no answer, no key facts); None when it is."""
    if not answer_text(r):
        return _row(r, source, facts, NO_ANSWER)
    if not facts:
        return _row(r, source, facts, NO_KEY_FACTS)
    return None


def contains_correctness(answers: pd.DataFrame, questions: Sequence[Question]) -> pd.DataFrame:
    """Per answer, no model call: each gold answer (a fact, with its aliases as forms) is present when
    one of its forms is contained in the answer (normalized, `metrics.answer_contained`); correct
    when every one is, so a contradictory question is answered correctly only by naming every value.
    A question without gold answers falls back to its key facts, matched as strings.
    """
    by_id = _questions_by_id(questions)
    rows = []
    for r in answers.to_dict("records"):
        question = _question_of(by_id, r["question_id"])
        source, facts = gold_answer_facts(question) if question.answers else question_facts(question)
        unscored = _unscored(r, source, facts)
        if unscored:
            rows.append(unscored)
            continue
        text = answer_text(r)
        rows.append(_row(r, source, facts, OK, sum(answer_contained(text, forms) == 1.0 for forms in facts)))
    return _frame(rows)


def check_key_facts(
    answers: pd.DataFrame, questions: Sequence[Question], llm: LLM, settings: Settings
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per answer, the judge's verdict on each key fact (`check_key_facts` prompt, stage "key_facts",
    one fan-out unit per answer, `diagnostics.check_max_tokens`); a declining answer states no fact
    and is scored without a call. Returns the correctness frame and the failed checks (question_id,
    method, stage, kind, detail), which are counted and not scored.
    """
    by_id = _questions_by_id(questions)
    prompt = load_prompt(PROMPT)

    def check(r: dict[str, Any]) -> tuple[dict, dict | None]:
        question = _question_of(by_id, r["question_id"])
        source, facts = question_facts(question)
        unscored = _unscored(r, source, facts)
        if unscored:
            return unscored, None
        text = answer_text(r)
        if is_declined(text):
            return _row(r, source, facts, OK, 0), None
        listed = "\n".join(f"{i}. {fact_text(forms)}" for i, forms in enumerate(facts, start=1))
        try:
            reply: Any = llm.structured(  # a facts_reply_schema model: its fields are made at run time
                prompt.render(question=question.question, facts=listed, n_facts=len(facts), answer=text),
                facts_reply_schema(len(facts)),
                stage=STAGE,
                method=r["method"],
                prompt=prompt,
                max_tokens=settings.diagnostics.check_max_tokens,
            )
        except LLMError as err:
            failure = {"question_id": r["question_id"], "method": r["method"], "stage": STAGE}
            return _row(r, source, facts, FAILED), failure | {"kind": err.kind, "detail": str(err)}
        return _row(r, source, facts, OK, sum(reply.present)), None

    checked = llm.fan_out(check, answers.to_dict("records"), label=STAGE)
    failures = [failure for _, failure in checked if failure]
    return _frame([row for row, _ in checked]), pd.DataFrame(failures, columns=FAILURE_COLUMNS)


def answer_correctness(
    answers: pd.DataFrame, questions: Sequence[Question], llm: LLM, settings: Settings
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Correctness as `diagnostics.correctness` says: "judge" (`check_key_facts`) or "contains"
    (`contains_correctness`, no model call and no failures).
    """
    if settings.diagnostics.correctness == "judge":
        return check_key_facts(answers, questions, llm, settings)
    return contains_correctness(answers, questions), pd.DataFrame(columns=FAILURE_COLUMNS)


def planned_key_fact_checks(n_answers: int, settings: Settings) -> list[StagePlan]:
    """The judge's calls before the answers exist (`ragtrial estimate`): one per answer, an upper
    bound (a failed or declining answer, or a question without facts, has none); none with
    `diagnostics.correctness` "contains". Prompts projected with a question, its facts and an answer
    of `answer_max_tokens`.
    """
    cfg = settings.diagnostics
    if cfg.correctness != "judge":
        return []
    per_call = frame_tokens(load_prompt(PROMPT)) + QUESTION_TOKENS + FACTS_TOKENS + cfg.answer_max_tokens
    return [
        projected(
            STAGE,
            n_answers,
            n_answers * per_call,
            cfg.check_max_tokens,
            "upper bound",
            "json",
            "one per answer with key facts (gold answers where a question has none); none for a failed "
            "or declining answer",
        )
    ]
