"""Questions from the corpus text: summary-based (MGRAG / LightRAG practice: the head and tail of
every document form a data-set description, from which the model asks the questions a user might
ask) and persona-based (GraphRAG, Algorithm 1: K personas, N tasks per persona, M questions per
pair).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
from pydantic import Field, create_model

from ragtrial.config.questions import QuestionsSettings
from ragtrial.llm.client import LLM
from ragtrial.llm.structured import at_length_cap
from ragtrial.llm.tokens import get_encoding
from ragtrial.prompts import load_prompt
from ragtrial.questions.generated_records import (
    Generated,
    GeneratedQuestion,
    QuestionAsker,
    list_schema,
)

# ---------------------------------------------------------------- summary- and persona-based


def dataset_description(
    documents: pd.DataFrame, head_tokens: int, tail_tokens: int, max_tokens: int, head_offset: int = 0
) -> tuple[str, list[str]]:
    """Head (from token `head_offset`) and tail of each document, stacked in corpus order until
    `max_tokens`; returns (text, ids of the documents described).
    """
    enc = get_encoding()
    lines: list[str] = []
    used: list[str] = []
    total = 0
    for doc_id, title, text in zip(documents["doc_id"], documents["title"], documents["text"], strict=True):
        tokens = enc.encode_ordinary(text)
        head = tokens[head_offset : head_offset + head_tokens]
        tail = tokens[max(head_offset + head_tokens, len(tokens) - tail_tokens) :]
        if used and total + len(head) + len(tail) > max_tokens:
            break
        excerpt = enc.decode(head) + (" ... " + enc.decode(tail) if tail else "")
        lines.append(f"- {title}: {' '.join(excerpt.split())}" if title else f"- {' '.join(excerpt.split())}")
        used.append(doc_id)
        total += len(head) + len(tail)
    return "\n".join(lines), used


def summary_call_count(cfg: QuestionsSettings) -> int:
    """The seeded calls that ask for `summary_questions` questions, `summary_per_call` at a time."""
    return math.ceil(cfg.summary_questions / cfg.summary_per_call)


def summary_call(cfg: QuestionsSettings, description: str, call: int) -> dict[str, Any]:
    """The `QuestionAsker` arguments of summary call number `call`: sent by `summary_questions`,
    planned by `questions.generate.planned_generation`.
    """
    n = min(cfg.summary_per_call, cfg.summary_questions - call * cfg.summary_per_call)
    return {
        "prompt_name": "questions_summary_based",
        "schema": list_schema("questions", n, cfg.question_max_chars),
        "max_tokens": cfg.max_tokens * n,
        "replicate": call,
        "description": description,
        "n": n,
    }


def summary_questions(llm: LLM, documents: pd.DataFrame, cfg: QuestionsSettings) -> Generated:
    """`summary_questions` questions from ceil(n / per_call) seeded calls on the data-set description."""
    description, doc_ids = dataset_description(
        documents, cfg.head_tokens, cfg.tail_tokens, cfg.description_max_tokens, cfg.head_offset_tokens
    )
    ask = QuestionAsker(llm, "summary", cfg.temperature)
    per_call, tag = cfg.summary_per_call, load_prompt("questions_summary_based").tag

    def one_call(ask: QuestionAsker, call: int) -> list[GeneratedQuestion]:
        reply = ask(item_id=f"summary-call-{call}", **summary_call(cfg, description, call))
        return [
            GeneratedQuestion(
                question_id=f"summary-{call * per_call + i:03d}",
                question=q,
                at_length_cap=at_length_cap(q, cfg.question_max_chars),
                generator="summary",
                level="summary",
                doc_ids=doc_ids,
                prompt=tag,
            )
            for i, q in enumerate(reply.questions if reply else [])
        ]

    calls = range(summary_call_count(cfg))
    rows = [q for done in ask.fan_out(one_call, calls, label="questions_summary_based") for q in done]
    return Generated.of(rows, ask.failures)


# a description shorter than a few words is a failed reply, recorded, not an empty description
DESCRIPTION_SCHEMA = create_model("CorpusDescription", description=(str, Field(min_length=20)))


def description_max_tokens(words: int) -> int:
    """Reply cap of the corpus-description call: about 1.3 tokens a word, doubled, and the JSON."""
    return 2 * words + 32


def description_call(documents: pd.DataFrame, cfg: QuestionsSettings) -> tuple[dict[str, Any], list[str]]:
    """The `QuestionAsker` arguments of the corpus-description call (a sample of document heads and
    tails up to `corpus_sample_tokens`), and the ids of the documents sampled.
    """
    sample, doc_ids = dataset_description(
        documents, cfg.head_tokens, cfg.tail_tokens, cfg.corpus_sample_tokens, cfg.head_offset_tokens
    )
    words = cfg.corpus_description_words
    return {
        "prompt_name": "questions_corpus_description",
        "schema": DESCRIPTION_SCHEMA,
        "max_tokens": description_max_tokens(words),
        "sample": sample,
        "words": words,
    }, doc_ids


def corpus_description(
    ask: QuestionAsker, documents: pd.DataFrame, cfg: QuestionsSettings
) -> tuple[str | None, list[str]]:
    """The high-level description GraphRAG's Algorithm 1 starts from, and the documents it was
    written from: `questions.corpus_description` as given (no document), else one model call on a
    small sample (None when that call fails: `ask` records the failure).
    """
    if cfg.corpus_description:
        return cfg.corpus_description, []
    request, doc_ids = description_call(documents, cfg)
    reply = ask(item_id="corpus-description", **request)
    return (" ".join(reply.description.split()) if reply else None), doc_ids


def persona_questions(llm: LLM, documents: pd.DataFrame, cfg: QuestionsSettings) -> Generated:
    """GraphRAG's Algorithm 1: K personas, N tasks each, M questions per (persona, task): K x N x M,
    every prompt given the corpus description only ("avoid generating questions from the corpus
    itself"): the corpus text reaches the description call alone.
    """
    ask = QuestionAsker(llm, "persona", cfg.temperature)
    description, doc_ids = corpus_description(ask, documents, cfg)
    if description is None:
        return Generated.of([], ask.failures)
    k, n, m, budget = cfg.personas, cfg.tasks_per_persona, cfg.questions_per_task, cfg.max_tokens
    personas = ask(
        "questions_personas",
        list_schema("items", k, cfg.question_max_chars),
        "personas",
        budget * k,
        description=description,
        k=k,
    )
    tag = load_prompt("questions_persona_questions").tag

    def task_questions(
        ask: QuestionAsker, i: int, persona: str, j: int, task: str
    ) -> list[GeneratedQuestion]:
        reply = ask(
            "questions_persona_questions",
            list_schema("questions", m, cfg.question_max_chars),
            f"persona-{i}-task-{j}",
            budget * m,
            description=description,
            persona=persona,
            task=task,
            m=m,
        )
        return [
            GeneratedQuestion(
                question_id=f"persona-{i}-{j}-{q_no}",
                question=q,
                at_length_cap=at_length_cap(q, cfg.question_max_chars),
                generator="persona",
                level="persona",
                doc_ids=doc_ids,
                prompt=tag,
                persona=persona,
                task=task,
            )
            for q_no, q in enumerate(reply.questions if reply else [])
        ]

    def persona_rows(ask: QuestionAsker, numbered: tuple[int, str]) -> list[GeneratedQuestion]:
        i, persona = numbered
        tasks = ask(
            "questions_persona_tasks",
            list_schema("items", n, cfg.question_max_chars),
            f"persona-{i}",
            budget * n,
            description=description,
            persona=persona,
            n=n,
        )
        # the persona's tasks fan out in turn (nested: llm.concurrency still bounds the requests)
        done = ask.fan_out(
            lambda ask, task: task_questions(ask, i, persona, *task),
            list(enumerate(tasks.items if tasks else [])),
            label="questions_persona_questions",
            key=lambda task: task[1],
        )
        return [q for questions in done for q in questions]

    numbered = list(enumerate(personas.items if personas else []))
    rows = [
        q
        for done in ask.fan_out(
            persona_rows, numbered, label="questions_persona_tasks", key=lambda persona: persona[1]
        )
        for q in done
    ]
    return Generated.of(rows, ask.failures)
