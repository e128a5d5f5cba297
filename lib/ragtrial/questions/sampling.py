"""Which questions an experiment asks: the data set's questions for a task (QA or summarization),
a seeded sample per question type, and the judge's questions (the data set's, or generated from
the graph).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd

from ragtrial.records import Dataset, Question

if TYPE_CHECKING:  # experiment tables work on answer frames; only run_methods needs live methods
    from ragtrial.index.tables import GraphIndex


from typing import TYPE_CHECKING

from ragtrial.llm.client import LLM

if TYPE_CHECKING:
    from ragtrial.config.judge import JudgeSettings
    from ragtrial.config.questions import QuestionsSettings
    from ragtrial.index.tables import GraphIndex
    from ragtrial.records import Dataset, Question


# ---------------------------------------------------------------- questions and answers


def task_questions(dataset: Dataset, task: str, per_type: int | None, seed: int = 0) -> list[Question]:
    """The data set's questions for one task, sampled per type: "qa" (gold answers, or null questions
    that must be declined) or "summarization" (reference summaries); an error when it has none.
    """
    if task not in ("qa", "summarization"):
        raise ValueError(f"task must be 'qa' or 'summarization', not {task!r}")
    if task == "qa":
        pool = [q for q in dataset.questions if q.answers or q.metadata.get("is_null")]
    else:
        pool = [q for q in dataset.questions if q.reference_summaries]
    if not pool:
        hint = (
            "qmsum, squality or odsum"
            if task == "summarization"
            else "generated, multihop_rag, musique or hotpotqa"
        )
        raise ValueError(
            f"data set {dataset.name!r} has no {task} questions; set data.dataset to {hint} "
            "and data.path to its folder (README: Data sets)"
        )
    return select_questions(pool, per_type, seed)


def select_questions(questions: Sequence[Question], per_type: int | None, seed: int = 0) -> list[Question]:
    """A seeded sample of at most `per_type` questions of each question_type (all when None), in the
    original order, so every type is represented even when the budget allows only a few questions.
    """
    if per_type is None:
        return list(questions)
    rng = random.Random(f"{seed}:questions_per_type")
    by_type: dict[str, list[int]] = {}
    for i, q in enumerate(questions):
        by_type.setdefault(q.question_type, []).append(i)
    keep = {i for ids in by_type.values() for i in rng.sample(ids, min(per_type, len(ids)))}
    return [q for i, q in enumerate(questions) if i in keep]


def judge_questions(
    llm: LLM, dataset: Dataset, index: GraphIndex, cfg: JudgeSettings, questions_cfg: QuestionsSettings
) -> tuple[list[Question], pd.DataFrame]:
    """The questions to judge and the failures of generating them: the data set's own, a seeded
    few per question_type, or graph-text-grounded node/edge/subgraph questions (level as type).
    """
    from ragtrial.questions.graph_questions import graph_questions
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
