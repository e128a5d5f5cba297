"""Running the configured question generators, ground-truth questions from the data set, and
de-duplication of near-identical questions.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ragtrial.config.questions import QuestionsSettings
from ragtrial.index.merge_extractions import normalize_name
from ragtrial.index.tables import GraphIndex
from ragtrial.llm.client import LLM
from ragtrial.llm.plan import StagePlan, counted, frame_tokens, projected
from ragtrial.llm.tokens import count_tokens
from ragtrial.prompts import load_prompt
from ragtrial.questions.corpus_questions import (
    dataset_description,
    description_call,
    description_max_tokens,
    persona_questions,
    summary_call,
    summary_call_count,
    summary_questions,
)
from ragtrial.questions.generated_records import Embed, Generated, GeneratedQuestion, QuestionAsker
from ragtrial.questions.graph_questions import graph_questions
from ragtrial.records import Question
from ragtrial.text import normalize_answer


def ground_truth_questions(
    questions: list[Question], index: GraphIndex, per_category: int, seed: int
) -> Generated:
    """The data set's own questions, `per_category` per question_type (seeded; a smaller count is a
    prefix). Gold entity names link to index entities by normalized name; gold documents give chunks.
    """
    by_name = dict(zip(index.entities["name"].map(normalize_name), index.entities["entity_id"], strict=True))
    chunks_of = index.chunks.groupby("doc_id")["chunk_id"].agg(list).to_dict()
    questions = [
        q for q in questions if not q.reference_summaries
    ]  # the four categories have short gold answers
    rows = []
    for k, category in enumerate(sorted({q.question_type for q in questions})):
        pool = [q for q in questions if q.question_type == category]
        for i in np.random.default_rng([seed, k]).permutation(len(pool))[:per_category]:
            q = pool[i]
            linked = list(
                dict.fromkeys(by_name[n] for n in map(normalize_name, q.gold_entities) if n in by_name)
            )
            rows.append(
                GeneratedQuestion(
                    question_id=q.question_id,
                    question=q.question,
                    generator="ground_truth",
                    level=category or "unknown",
                    anchor_id=linked[0] if linked else "",
                    entity_ids=linked,
                    chunk_ids=[c for d in q.gold_doc_ids for c in chunks_of.get(d, [])],
                    doc_ids=q.gold_doc_ids,
                    answers=q.answers,
                )
            )
    return Generated.of(rows, [])


def generate_questions(
    llm: LLM, index: GraphIndex, questions: list[Question], cfg: QuestionsSettings
) -> Generated:
    """Every generator of `cfg.generators` on the same corpus (the index's documents) and graph;
    `questions` are the data set's own (the ground-truth generator's source).
    """
    run = {
        "summary": lambda: summary_questions(llm, index.documents, cfg),
        "persona": lambda: persona_questions(llm, index.documents, cfg),
        "graph": lambda: graph_questions(llm, index, cfg),
        "ground_truth": lambda: ground_truth_questions(
            questions, index, cfg.ground_truth_per_category, cfg.seed
        ),
    }
    return Generated.concat(run[name]() for name in cfg.generators)


# ---------------------------------------------------------------- deduplication


def deduplicate(questions: pd.DataFrame, embed: Embed, threshold: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Within each generator, drop questions equal to an earlier one after SQuAD normalization, then
    those whose embedding cosine with an earlier kept question exceeds `threshold`.

    Returns (kept questions, dropped rows: question_id, generator, kind, duplicate_of, cosine).
    """
    dropped, keep = [], np.ones(len(questions), dtype=bool)
    vectors = embed(list(questions["question"])) if len(questions) else np.zeros((0, 1))
    for _, group in questions.groupby("generator", sort=False):
        first: dict[str, int] = {}
        kept_rows: list[int] = []
        for pos in (questions.index.get_loc(i) for i in group.index):
            qid, norm = questions["question_id"].iat[pos], normalize_answer(questions["question"].iat[pos])
            if norm in first:
                dropped.append(
                    (qid, group["generator"].iat[0], "exact", questions["question_id"].iat[first[norm]], 1.0)
                )
            elif kept_rows and (sims := vectors[kept_rows] @ vectors[pos]).max() > threshold:
                best = kept_rows[int(sims.argmax())]
                dropped.append(
                    (
                        qid,
                        group["generator"].iat[0],
                        "near",
                        questions["question_id"].iat[best],
                        float(sims.max()),
                    )
                )
            else:
                first[norm] = pos
                kept_rows.append(pos)
                continue
            keep[pos] = False
    report = pd.DataFrame(dropped, columns=["question_id", "generator", "kind", "duplicate_of", "cosine"])
    return questions[keep].reset_index(drop=True), report


def dedup_counts(questions: pd.DataFrame, dropped: pd.DataFrame) -> pd.DataFrame:
    """Per generator: generated, exact and near duplicates removed, kept."""
    generated = questions.groupby("generator", sort=False).size().rename("generated")
    kinds = dropped.groupby(["generator", "kind"]).size().unstack(fill_value=0)
    table = pd.concat([generated, kinds.reindex(columns=["exact", "near"], fill_value=0)], axis=1).fillna(0)
    table = table.astype(int).rename(columns={"exact": "exact_duplicates", "near": "near_duplicates"})
    table["kept"] = table["generated"] - table["exact_duplicates"] - table["near_duplicates"]
    return table.rename_axis("generator").reset_index()


# ---------------------------------------------------------------- before the calls (ragtrial estimate)


def generated_at_most(cfg: QuestionsSettings, generators: Sequence[str], questions: list[Question]) -> int:
    """The questions `generators` yield at most (before de-duplication); `questions` are the data
    set's own (the ground-truth generator's categories; none known without the data set).
    """
    categories = {q.question_type for q in questions if not q.reference_summaries}
    made = {
        "summary": cfg.summary_questions,
        "persona": cfg.personas * cfg.tasks_per_persona * cfg.questions_per_task,
        "graph": cfg.per_level * len(cfg.levels),
        "ground_truth": cfg.ground_truth_per_category * len(categories),
    }
    return sum(made[g] for g in generators)


def planned_generation(
    llm: LLM, documents: pd.DataFrame | None, cfg: QuestionsSettings, generators: Sequence[str]
) -> list[StagePlan]:
    """The calls `generate_questions` makes for `generators`, none sent. Summary-based calls are
    built from the documents as `summary_questions` builds them (exact, counted; projected when the
    documents are absent); persona-based: one corpus-description call unless a description is
    given (counted from the documents' sample, projected without them), one persona call, then at
    most K task calls and K x N question calls (fewer when the model returns fewer items);
    graph-grounded: at most `per_level` calls per level (fewer structures may exist) and, for
    subgraphs, `summary_chunks` chunk summaries per walk.
    """
    plans: list[StagePlan] = []
    described = (
        dataset_description(
            documents, cfg.head_tokens, cfg.tail_tokens, cfg.description_max_tokens, cfg.head_offset_tokens
        )[0]
        if documents is not None
        else None
    )
    if "summary" in generators:
        prompt, calls = load_prompt("questions_summary_based"), summary_call_count(cfg)
        if described is None:
            tokens = calls * (frame_tokens(prompt) + cfg.description_max_tokens)
            plans.append(
                projected(prompt.name, calls, tokens, cfg.max_tokens * cfg.summary_per_call, "exact", "json")
            )
        else:
            ask = QuestionAsker(llm, "summary", cfg.temperature)
            plans.append(
                counted(prompt.name, [ask.plan(**summary_call(cfg, described, c)) for c in range(calls)])
            )
    if "persona" in generators:
        if cfg.corpus_description:
            description = count_tokens(cfg.corpus_description)
        else:
            description = description_max_tokens(cfg.corpus_description_words)
            if documents is None:
                prompt = load_prompt("questions_corpus_description")
                tokens = frame_tokens(prompt) + cfg.corpus_sample_tokens
                plans.append(projected(prompt.name, 1, tokens, description, "upper bound", "json"))
            else:
                request, _ = description_call(documents, cfg)
                plans.append(
                    counted(
                        request["prompt_name"],
                        [QuestionAsker(llm, "persona", cfg.temperature).plan(**request)],
                    )
                )
        k, n, m = cfg.personas, cfg.tasks_per_persona, cfg.questions_per_task
        for name, calls, basis, per_reply in (
            ("questions_personas", 1, "exact", k),
            ("questions_persona_tasks", k, "upper bound", n),
            ("questions_persona_questions", k * n, "upper bound", m),
        ):
            prompt = load_prompt(name)
            plans.append(
                projected(
                    name,
                    calls,
                    calls * (frame_tokens(prompt) + description + 2 * cfg.max_tokens),
                    cfg.max_tokens * per_reply,
                    basis,
                    "json",
                    "fewer when the model returns fewer items",
                )
            )
    if "graph" in generators:
        for level in cfg.levels:
            prompt = load_prompt(f"questions_{level}")
            context = (
                cfg.source_chunks * cfg.chunk_tokens
                if level != "subgraph"
                else cfg.summary_chunks * cfg.summary_max_tokens
            )
            if level == "subgraph":
                summarize = load_prompt("summarize_chunks")
                calls = cfg.per_level * cfg.summary_chunks
                plans.append(
                    projected(
                        "summarize_chunks",
                        calls,
                        calls * (frame_tokens(summarize) + cfg.chunk_tokens),
                        cfg.summary_max_tokens,
                        "upper bound",
                        "text",
                        "chunks of the walks (a chunk two walks share is a cache hit)",
                    )
                )
            plans.append(
                projected(
                    prompt.name,
                    cfg.per_level,
                    cfg.per_level * (frame_tokens(prompt) + context),
                    cfg.max_tokens,
                    "upper bound",
                    "json",
                    "fewer when the graph has fewer structures",
                )
            )
    return plans
