"""Which questions an experiment asks: the data set's questions for a task (QA or summarization),
a seeded sample per question type, and the judge's questions (the data set's, or generated from
the graph).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pandas as pd

from ragtrial.config.base import ParamsError
from ragtrial.config.claims import ClaimsSettings
from ragtrial.config.judge import UnbiasedJudgeSettings
from ragtrial.config.questions import QuestionsSettings
from ragtrial.index.tables import GraphIndex
from ragtrial.llm.client import LLM
from ragtrial.questions.corpus_questions import persona_questions
from ragtrial.questions.generated_records import Failure
from ragtrial.questions.graph_questions import graph_questions
from ragtrial.records import Dataset, Question, records_frame


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
            "and data.path to its folder (docs/datasets.md)"
        )
    return select_questions(pool, per_type, seed)


def diagnosis_questions(
    dataset: Dataset, per_type: int | None, seed: int = 0, types: Sequence[str] | None = None
) -> list[Question]:
    """The questions notebook 09 diagnoses: every question of the listed types (all types when None),
    whatever gold it carries (a metric its gold cannot support is reported unavailable), sampled per
    type; an error naming the types the data set has when none is left.
    """
    pool = [q for q in dataset.questions if types is None or q.question_type in types]
    if not pool:
        have = sorted({q.question_type for q in dataset.questions})
        raise ValueError(
            f"data set {dataset.name!r} has no questions of the types diagnostics.question_types lists "
            f"({', '.join(types or [])}); its types: {', '.join(have) or 'none'}"
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
    llm: LLM,
    dataset: Dataset,
    index: GraphIndex,
    cfg: UnbiasedJudgeSettings,
    questions_cfg: QuestionsSettings,
    section: str = "judge",
) -> tuple[list[Question], pd.DataFrame]:
    """The questions to judge and the failures of generating them: the data set's own, a seeded
    few per question_type, or graph-text-grounded node/edge/subgraph questions (level as type).
    `section` names `cfg` in the settings ("upstream" for notebook 11), for the error a data set
    without questions of its own gets.
    """
    if cfg.question_source == "dataset":
        if not dataset.questions:
            raise ParamsError(
                f"key '{section}.question_source': 'dataset', but data set {dataset.name!r} has no "
                f"questions of its own; set {section}.question_source: graph to judge questions generated "
                "from the index"
            )
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


def claims_questions(
    llm: LLM, dataset: Dataset, cfg: ClaimsSettings, questions_cfg: QuestionsSettings
) -> tuple[list[Question], pd.DataFrame, bool]:
    """The first `n_questions` questions of the claims experiment, the failures of generating them,
    and whether the data set's questions stood in: persona questions (GraphRAG's Algorithm 1) unless
    `question_source` is "dataset" or persona generation yields none.
    """
    failures = records_frame([], Failure)
    questions: list[Question] = []
    if cfg.question_source == "persona":
        generated = persona_questions(llm, dataset.documents_frame(), questions_cfg)
        failures = generated.failures
        questions = [
            Question(question_id=r.question_id, question=r.question, question_type="persona")
            for r in generated.questions.itertuples(index=False)
        ][: cfg.n_questions]
    fell_back = cfg.question_source == "persona" and not questions
    if cfg.question_source == "dataset" and not dataset.questions:
        raise ParamsError(
            f"key 'claims.question_source': 'dataset', but data set {dataset.name!r} has no questions of "
            "its own; set claims.question_source: persona to ask questions generated from the corpus"
        )
    if not questions:
        questions = select_questions(dataset.questions, cfg.questions_per_type, cfg.seed)[: cfg.n_questions]
    return questions, failures, fell_back
