"""How many gold answers are entities of the knowledge graph (seed 003: Han et al., "RAG vs.
GraphRAG", §4.3 observation 4, measured "the ratio of answer entities present in the constructed KG"
to explain why KG-only retrieval underperforms), LLM-free.

A question's answer entity is its gold answer with its aliases (one per question; the paper does
not say how it counts). Some answers name no entity: a null question's
("insufficient information", metadata is_null), a yes/no answer, an answer with no name left once
normalized, a question with no gold answer (2WikiMultihopQA's retrieval-only file). They are
counted apart (`answer_kind`), never as entities missing from the graph.

Matching is the retrievers' own linker (`retrieval.entity_graph.EntityLinker`), graph by graph: the
answer is in the graph by an exact name when the answer or an alias equals an entity's name after
`normalize_name` (NFKC, case-folded, possessive and edge punctuation stripped); otherwise the linker's
name-embedding step may link it (cosine at least `retrieval.link_threshold`), reported apart. The share
in the KG is the exact-name share; the share linked adds the embedding links.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ragtrial.evaluation.published_figures import read_published
from ragtrial.index.tables import GraphIndex
from ragtrial.records import Question
from ragtrial.retrieval.base import ChunkTable, Embeds, RetrieverParts
from ragtrial.retrieval.entity_graph import EntityGraph, EntityLinker, Link
from ragtrial.text import normalize_answer

if TYPE_CHECKING:
    from ragtrial.config.retrieval import RetrievalSettings

ENTITY = "entity"
NULL_QUESTION = "no entity: null question"
YES_NO = "no entity: yes/no"
NO_NAME = "no entity: no name"
NO_ANSWER = "no entity: no gold answer"
EXACT, EMBEDDING, NOT_IN_KG = "exact", "embedding", "not in KG"
ALL_TYPES = "all"
LINK_COLUMNS = [
    "question_id",
    "question_type",
    "graph",  # the entity origin of the graph matched (llm, nlp, import)
    "answer",  # the gold answer (aliases are matched too)
    "answer_kind",  # ENTITY or the reason the answer names none
    "in_kg",  # exact | embedding | not in KG; "" for an answer that names no entity
    "matched_answer",  # the answer or alias that linked
    "entity_id",
    "entity_name",
    "similarity",
]
COVERAGE_COLUMNS = [
    "graph",
    "question_type",
    "questions",
    "no_entity",
    "no_entity_reasons",
    "answer_entities",
    "in_kg_exact",
    "in_kg_embedding",
    "not_in_kg",
    "share_in_kg",  # by exact normalized name
    "share_linked",  # exact or embedding link
]
PUBLISHED_ANSWER_ENTITIES = "answer_entities_in_kg.csv"


def answer_kind(question: Question) -> str:
    """ENTITY, or why the question's gold answer names no entity."""
    if question.metadata.get("is_null"):
        return NULL_QUESTION
    if not question.answers:
        return NO_ANSWER
    names = [normalize_answer(a) for a in question.answers]
    if all(n in ("yes", "no") for n in names):
        return YES_NO
    return ENTITY if any(names) else NO_NAME


def link_answer_entities(
    questions: Sequence[Question], index: GraphIndex, embedder: Embeds, retrieval: RetrievalSettings
) -> pd.DataFrame:
    """`answer_entity_links` with the retrievers' linker over every graph the index holds (no model
    call: the linker's entity source is set to names, and only its name matching is used).
    """
    settings = retrieval.model_copy(update={"entity_source": "string_embedding", "graph_origin": "both"})
    linker = EntityLinker(
        EntityGraph(index, ChunkTable(index)), RetrieverParts(embedder), settings, "answer_entities"
    )
    return answer_entity_links(questions, linker)


def _best(links: Sequence[Link | None]) -> Link | None:
    """An exact link of any alias first, else the most similar embedding link."""
    found = [x for x in links if x is not None]
    return max(found, key=lambda x: (x.how == EXACT, x.similarity), default=None)


def answer_entity_links(questions: Sequence[Question], linker: EntityLinker) -> pd.DataFrame:
    """One row per (question, graph of the linker): the answer's kind and, for an answer entity,
    whether the graph holds it (exact name, embedding link, or not in KG) and the entity it linked to.
    """
    kinds = {q.question_id: answer_kind(q) for q in questions}
    names = list(dict.fromkeys(a for q in questions if kinds[q.question_id] == ENTITY for a in q.answers))
    rows = []
    for origin, table in zip(linker.origins, linker.tables, strict=True):
        link_of = dict(zip(names, linker.link_in(table, names), strict=True)) if names else {}
        for q in questions:
            kind = kinds[q.question_id]
            answer = q.answers[0] if q.answers else ""
            best = _best([link_of[a] for a in q.answers]) if kind == ENTITY else None
            if best is None:
                in_kg = NOT_IN_KG if kind == ENTITY else ""
                rows.append((q.question_id, q.question_type, origin, answer, kind, in_kg, "", "", "", np.nan))
                continue
            rows.append(
                (
                    q.question_id,
                    q.question_type,
                    origin,
                    answer,
                    kind,
                    best.how,
                    best.mention,
                    linker.graph.ids[best.entity],
                    linker.graph.names[best.entity],
                    best.similarity,
                )
            )
    return pd.DataFrame(rows, columns=LINK_COLUMNS)


def _counts(graph: str, question_type: str, links: pd.DataFrame) -> dict:
    entities = links[links["answer_kind"] == ENTITY]
    reasons = links.loc[links["answer_kind"] != ENTITY, "answer_kind"].value_counts().sort_index()
    exact, embedding = int((entities["in_kg"] == EXACT).sum()), int((entities["in_kg"] == EMBEDDING).sum())
    n = len(entities)
    return {
        "graph": graph,
        "question_type": question_type,
        "questions": len(links),
        "no_entity": int(reasons.sum()),
        "no_entity_reasons": "; ".join(f"{k.removeprefix('no entity: ')} {v}" for k, v in reasons.items()),
        "answer_entities": n,
        "in_kg_exact": exact,
        "in_kg_embedding": embedding,
        "not_in_kg": n - exact - embedding,
        "share_in_kg": exact / n if n else np.nan,
        "share_linked": (exact + embedding) / n if n else np.nan,
    }


def answer_entity_coverage(links: pd.DataFrame) -> pd.DataFrame:
    """Per graph (in link order), over all questions and then per question type by name (when the
    data set has types): questions, answers naming no entity (with their reasons), answer entities,
    how many the graph holds by exact name and by embedding link only, how many it lacks, and the
    shares of the answer entities. A share is NaN only when no answer names an entity; questions
    without one are never counted as missing from the graph. An index with no graph: no rows.
    """
    rows = []
    for graph, mine in links.groupby("graph", sort=False):
        rows.append(_counts(str(graph), ALL_TYPES, mine))
        if (mine["question_type"] != "").any():
            rows += [_counts(str(graph), str(t), typed) for t, typed in mine.groupby("question_type")]
    return pd.DataFrame(rows, columns=COVERAGE_COLUMNS)


def published_answer_entity_shares(dataset: str) -> pd.DataFrame:
    """The published shares of answer entities present in the KG (the data file
    `evaluation/published/answer_entities_in_kg.csv`, each with its paper, source, section and
    row), values as shares in `published`, and whether each was measured on loader `dataset`'s data.
    """
    table = read_published(PUBLISHED_ANSWER_ENTITIES)
    return table.assign(same_data_set=table["dataset"] == dataset)
