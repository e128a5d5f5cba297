"""Retrieval diagnostics by question category (seed 004, FalkorDB's evaluation methodology).

Per answer: the graph elements its context held (`retrieved_elements`), the gold entities and
edges linked to the index (`link_gold`), entity and relationship recall (`recall_table`), citation
coverage (`citation_table`), and the seed's failure attribution (`attribute_failures`); per method x
category: every metric with a bootstrap interval and its threshold flag (`diagnostics_summary`) and
the attribution shares (`attribution_shares`). All of it is computed from the answers table and the
index, without a model call; grounding, key-fact correctness, temporal and contradiction checks
live beside it (`evaluation.grounding`, `key_facts`, `temporal`, `contradictions`).

Definitions (the seed's):
- entity recall = |retrieved ∩ gold entities| / |gold entities|; a gold entity the index never
  extracted (no link) counts as missed, and is also counted apart (`entities_not_indexed`: an
  indexing failure, not a retrieval miss).
- relationship recall = |retrieved ∩ gold edges| / |gold edges|. A gold edge is retrieved when an
  index relation joining its two linked ends (either direction: extracted relations are untyped, so
  the gold relation type is not matched) is among the retrieved relations **and both its ends are
  among the retrieved entities** (the seed's Cypher note: otherwise edges to nodes never retrieved
  inflate recall).
- citation coverage = share of the `[n]` references an answer cites that name an entry of the
  context it was shown; the others are invented and counted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ragtrial.evaluation.answer_metrics import cited_entries
from ragtrial.evaluation.grounding import CHECK_STAGE as GROUNDING_CHECK_STAGE
from ragtrial.evaluation.grounding import CLAIMS_STAGE as GROUNDING_CLAIMS_STAGE
from ragtrial.evaluation.key_facts import STAGE as KEY_FACTS_STAGE
from ragtrial.index.merge_extractions import normalize_name
from ragtrial.index.tables import GraphIndex
from ragtrial.records import Question, ordered_union
from ragtrial.retrieval.base import ChunkTable, Embeds, RetrieverParts
from ragtrial.retrieval.entity_graph import EntityGraph, EntityLinker
from ragtrial.retrieval.packing import context_entries
from ragtrial.stats import bootstrap_mean_ci
from ragtrial.text import occurs_as_words

if TYPE_CHECKING:
    from ragtrial.config.diagnostics import DiagnosticsSettings
    from ragtrial.config.retrieval import RetrievalSettings

OUTCOMES = ("correct", "retrieval failure", "missed retrieval failure", "reasoning failure")


def category_of(question_type: str, settings: DiagnosticsSettings) -> str:
    """The seed's category a data-set question type is reported under (its own name when unmapped)."""
    return settings.categories.get(question_type, question_type)


# ---------------------------------------------------------------- what each answer's context held


class IndexElements:
    """The index's element lookups the mapping needs: the entities and relations extracted from each
    chunk, each community's members, and each relation's ends.
    """

    def __init__(self, index: GraphIndex):
        self.entities_of_chunk: dict[str, list[str]] = {}
        for eid, chunks in zip(index.entities["entity_id"], index.entities["chunk_ids"], strict=True):
            for c in chunks:
                self.entities_of_chunk.setdefault(c, []).append(eid)
        self.relations_of_chunk: dict[str, list[str]] = {}
        for rid, chunks in zip(index.relations["relation_id"], index.relations["chunk_ids"], strict=True):
            for c in chunks:
                self.relations_of_chunk.setdefault(c, []).append(rid)
        self.ends = {
            rid: (s, t)
            for rid, s, t in zip(
                index.relations["relation_id"],
                index.relations["source_id"],
                index.relations["target_id"],
                strict=True,
            )
        }
        self.community = {
            cid: (list(ents), list(rels))
            for cid, ents, rels in zip(
                index.communities["community_id"],
                index.communities["entity_ids"],
                index.communities["relation_ids"],
                strict=True,
            )
        }
        self.between: dict[frozenset[str], list[str]] = {}
        for rid, (s, t) in self.ends.items():
            self.between.setdefault(frozenset((s, t)), []).append(rid)

    def relations_among(self, entities: set[str]) -> set[str]:
        """The index relations whose two ends are both among `entities` (the seed's "edges among
        retrieved nodes"; `CypherGraphStore.relations_among` asks a graph store the same).
        """
        return {r for r, (s, t) in self.ends.items() if s in entities and t in entities}


def retrieved_elements(answers: pd.DataFrame, index: GraphIndex) -> pd.DataFrame:
    """`answers` with the entities and relations its context held, as index ids: the ids graph items
    carry, for the communities of shown reports and map points the community's relations between
    two entities the context names, and for shown passages (items of kind chunk) the entities and
    relations the index extracted from those chunks (`element_mapping` says which sources an
    answer's sets came from). A community counts by its text, never by membership: a report or a
    map point carries as entities only the members its text names (`retrieval.base.named_entities`;
    the kit's reports cite no ids), and of the community's relations only those joining two named
    entities (the seed's edges among retrieved nodes, within the community the text summarises).
    Relation items carry their two ends as entity ids (their text names them); no other end is
    added, so the recall guard sees what was really retrieved.
    """
    elements = IndexElements(index)
    rows = []
    for a in answers.itertuples(index=False):
        how = []
        entities = [list(a.context_entity_ids)]
        relations = [list(a.context_relation_ids)]
        if len(a.context_entity_ids) or len(a.context_relation_ids):
            how.append("graph items")
        named = set(a.context_entity_ids)
        communities = [c for c in a.context_community_ids if c in elements.community]
        between_named = [
            [r for r in elements.community[c][1] if set(elements.ends[r]) <= named] for c in communities
        ]
        if any(between_named):
            how.append("community relations between named entities")
            relations += between_named
        if len(a.passage_ids):
            how.append("passage mentions")
            entities += [elements.entities_of_chunk.get(c, []) for c in a.passage_ids]
            relations += [elements.relations_of_chunk.get(c, []) for c in a.passage_ids]
        how_text = " + ".join(how) if how else "nothing retrieved"
        rows.append((ordered_union(entities), ordered_union(relations), how_text))
    return answers.assign(
        retrieved_entity_ids=[r[0] for r in rows],
        retrieved_relation_ids=[r[1] for r in rows],
        element_mapping=[r[2] for r in rows],
    )


# ---------------------------------------------------------------- gold -> index


def link_gold(
    questions: Sequence[Question], index: GraphIndex, embedder: Embeds, retrieval: RetrievalSettings
) -> pd.DataFrame:
    """Each question's gold entities and edges linked to the index through the kit's entity linker
    (exact normalized name, else the nearest name embedding at `retrieval.link_threshold`, in every
    graph `retrieval.graph_origin` selects). Rows: question_id, kind (entity | edge), gold (the name,
    or "source | relation | target"), index_ids (linked entity ids; for an edge, the index relations
    joining its linked ends), how (exact / embedding / "not indexed"), and for edges source / target.
    """
    graph = EntityGraph(index, ChunkTable(index))
    # the gold names are given, never listed by a model: a run whose retrievers have the model list a
    # question's entities (retrieval.entity_source llm) links its gold the same way, without one
    by_name = retrieval.model_copy(update={"entity_source": "string_embedding"})
    linker = EntityLinker(graph, RetrieverParts(embedder), by_name, method="diagnostics")
    names = list(
        dict.fromkeys(
            n
            for q in questions
            for n in [*q.gold_entities, *(x for e in q.gold_edges for x in (e.source, e.target))]
        )
    )
    per_table = [linker.link_in(table, names) for table in linker.tables] if names else []
    linked: dict[str, tuple[list[str], str]] = {}
    for i, name in enumerate(names):
        links = [x for x in (table_links[i] for table_links in per_table) if x is not None]
        ids = list(dict.fromkeys(graph.ids[x.entity] for x in links))
        linked[name] = (ids, "+".join(dict.fromkeys(x.how for x in links)) or "not indexed")
    elements = IndexElements(index)
    rows = []
    for q in questions:
        for name in dict.fromkeys(q.gold_entities):
            rows.append((q.question_id, "entity", name, linked[name][0], linked[name][1], "", ""))
        for e in q.gold_edges:
            ends = [linked[e.source][0], linked[e.target][0]]
            rel_ids = ordered_union(
                elements.between.get(frozenset((s, t)), []) for s in ends[0] for t in ends[1] if s != t
            )
            rows.append(
                (
                    q.question_id,
                    "edge",
                    f"{e.source} | {e.relation} | {e.target}",
                    rel_ids,
                    "indexed" if rel_ids else "not indexed",
                    e.source,
                    e.target,
                )
            )
    return pd.DataFrame(rows, columns=["question_id", "kind", "gold", "index_ids", "how", "source", "target"])


def linking_rates(
    links: pd.DataFrame, questions: Sequence[Question], settings: DiagnosticsSettings
) -> pd.DataFrame:
    """Per category and kind: gold items, how many link to the index, and the linking rate (the rest
    are indexing failures: no retrieval can return them).
    """
    category = {q.question_id: category_of(q.question_type, settings) for q in questions}
    frame = links.assign(category=links["question_id"].map(category), indexed=links["index_ids"].map(len) > 0)
    table = (
        frame.groupby(["category", "kind"], sort=False)
        .agg(gold=("gold", "size"), indexed=("indexed", "sum"))
        .reset_index()
    )
    return table.assign(linking_rate=table["indexed"] / table["gold"])


# ---------------------------------------------------------------- recall


def edge_retrieved(
    relation_ids: Iterable[str],
    ends: dict[str, tuple[str, str]],
    retrieved_relations: set[str],
    retrieved_entities: set[str],
) -> bool:
    """A gold edge (the index relations `relation_ids` that join its linked ends) counts as retrieved
    when one of them was retrieved with both its ends (the seed's guard against inflated recall).
    """
    return any(
        r in retrieved_relations and set(ends[r]) <= retrieved_entities for r in relation_ids if r in ends
    )


def _name_found(name: str, texts: Sequence[str]) -> list[int]:
    """Indices of the texts in which `name` occurs as whole words (normalized)."""
    key = normalize_name(name)
    return [i for i, t in enumerate(texts) if occurs_as_words(key, t)]


def recall_table(
    elements: pd.DataFrame,
    links: pd.DataFrame,
    index: GraphIndex,
    questions: Sequence[Question],
    settings: DiagnosticsSettings,
    relations_among: Callable[[set[str]], set[str]] | None = None,
) -> pd.DataFrame:
    """Per answer (question_id, method): entity and relationship recall with their counts. Recall is
    unavailable (NaN value, the reason in `*_status`) when the question has no gold entities / edges
    or the answer's context was never built; it is never a 0 standing for "could not compute".

    `settings.passage_mapping = "name_match"`: a gold entity is retrieved when its name occurs in the
    shown context, an edge when both its ends occur in one context entry (independent of extraction).
    `settings.relationship_edges = "induced"`: every index relation among the retrieved entities
    counts as retrieved (the seed's Cypher query), instead of the relations the context held; those
    relations come from `relations_among` (a graph store's query, `store.graph`), else from the index.
    """
    in_index = IndexElements(index)
    ends = in_index.ends
    relations_among = relations_among or in_index.relations_among
    by_question = {qid: group for qid, group in links.groupby("question_id", sort=False)}
    kind_of = {q.question_id: q for q in questions}
    rows = []
    for a in elements.itertuples(index=False):
        q = kind_of[a.question_id]
        gold = by_question.get(a.question_id, links.iloc[0:0])
        gold_entities = gold[gold["kind"] == "entity"]
        gold_edges = gold[gold["kind"] == "edge"]
        row = {
            "question_id": a.question_id,
            "method": a.method,
            "category": category_of(q.question_type, settings),
        }
        row |= {
            "gold_entities": len(gold_entities),
            "entities_not_indexed": int((gold_entities["index_ids"].map(len) == 0).sum()),
            "gold_edges": len(gold_edges),
            "edges_not_indexed": int((gold_edges["index_ids"].map(len) == 0).sum()),
        }
        if not a.context_ready:
            found_entities = found_edges = None
            why = "no context built (the answer failed first)"
        elif settings.passage_mapping == "name_match":
            texts = [normalize_name(t) for t in context_entries(a.context_text).values()]
            found_entities = sum(bool(_name_found(n, texts)) for n in gold_entities["gold"])
            found_edges = sum(
                bool(set(_name_found(s, texts)) & set(_name_found(t, texts)))
                for s, t in zip(gold_edges["source"], gold_edges["target"], strict=True)
            )
            why = ""
        else:
            entities = set(a.retrieved_entity_ids)
            relations = set(a.retrieved_relation_ids)
            if settings.relationship_edges == "induced":
                relations = relations_among(entities)
            found_entities = sum(bool(entities & set(ids)) for ids in gold_entities["index_ids"])
            found_edges = sum(
                edge_retrieved(ids, ends, relations, entities) for ids in gold_edges["index_ids"]
            )
            why = ""
        for metric, n_gold, found, absent in (
            ("entity_recall", len(gold_entities), found_entities, "no gold entities"),
            ("relationship_recall", len(gold_edges), found_edges, "no gold edges"),
        ):
            status = absent if n_gold == 0 else why or "ok"
            row[f"{metric}_retrieved"] = found if status == "ok" else None
            row[metric] = found / n_gold if status == "ok" and found is not None else np.nan
            row[f"{metric}_status"] = status
        rows.append(row)
    return pd.DataFrame(rows)


def retrieved_subgraphs(
    elements: pd.DataFrame, edges_among: Callable[[list[str]], pd.DataFrame]
) -> pd.DataFrame:
    """Per answer, the edges among the entities its context held as a graph store returns them (the
    seed's Cypher query, `CypherGraphStore.edges_among`): question_id, method, source, relation_id,
    relation, target, valid_from, valid_to; an answer whose entities have no edge among them has no row.
    """
    frames = [
        edges_among(list(a.retrieved_entity_ids)).assign(question_id=a.question_id, method=a.method)
        for a in elements.itertuples(index=False)
        if len(a.retrieved_entity_ids)
    ]
    columns = [
        "question_id",
        "method",
        "source",
        "relation_id",
        "relation",
        "target",
        "valid_from",
        "valid_to",
    ]
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)


# ---------------------------------------------------------------- citations


def citation_table(answers: pd.DataFrame) -> pd.DataFrame:
    """Per answer: the `[n]` references it cites (each distinct number once), how many name an entry
    of the context it was shown (`citations_valid`) and how many were invented, and the coverage
    (valid / cited). Unavailable (`citation_coverage_status`) when the answer failed or cites nothing.
    """
    rows = []
    for a in answers.itertuples(index=False):
        cited = list(dict.fromkeys(cited_entries(a.text or "")))
        shown = int(a.context_items) if a.context_ready else 0
        valid = sum(1 <= n <= shown for n in cited)
        status = "no answer" if a.failure else "no citation" if not cited else "ok"
        rows.append(
            {
                "question_id": a.question_id,
                "method": a.method,
                "cited": len(cited),
                "citations_valid": valid if cited else 0,
                "citations_invented": len(cited) - valid,
                "citation_coverage": valid / len(cited) if status == "ok" else np.nan,
                "citation_coverage_status": status,
            }
        )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- attribution (the seed's protocol)


def retrieval_failed(row: pd.Series, settings: DiagnosticsSettings) -> bool | None:
    """Step 1: entity or relationship recall under its threshold; None when entity recall is unavailable."""
    if pd.isna(row["entity_recall"]):
        return None
    entity_threshold = settings.entity_recall_thresholds.get(
        row["category"], settings.default_entity_recall_threshold
    )
    below_relations = not pd.isna(row["relationship_recall"]) and (
        row["relationship_recall"] < settings.relationship_recall_threshold
    )
    return bool(row["entity_recall"] < entity_threshold or below_relations)


def attribute_failures(
    recall: pd.DataFrame, correctness: pd.DataFrame, oracle: str, settings: DiagnosticsSettings
) -> pd.DataFrame:
    """The seed's failure attribution per answer of every method but `oracle`: a retrieval failure
    when recall is under threshold (step 1); else correct, or (step 2, gold-context injection) a
    missed retrieval failure when the oracle answers the question correctly and a reasoning failure
    when it does not. `correctness` has question_id, method, answer_correct (bool, NaN when its check
    failed) and status. An answer that cannot be attributed says why in `outcome` ("unattributed: ...").
    """
    correct = correctness.set_index(["question_id", "method"])["answer_correct"]
    frame = recall[recall["method"] != oracle].copy()
    outcomes, failed_retrieval = [], []
    for _, row in frame.iterrows():
        failed = retrieval_failed(row, settings)
        failed_retrieval.append(failed)
        answer_ok = correct.get((row["question_id"], row["method"]), np.nan)
        oracle_ok = correct.get((row["question_id"], oracle), np.nan)
        if failed is None:
            outcomes.append(f"unattributed: {row['entity_recall_status']}")
        elif failed:
            outcomes.append("retrieval failure")
        elif pd.isna(answer_ok):
            outcomes.append("unattributed: correctness unavailable")
        elif answer_ok:
            outcomes.append("correct")
        elif pd.isna(oracle_ok):
            outcomes.append("unattributed: the gold-context answer is unavailable")
        else:
            outcomes.append("missed retrieval failure" if oracle_ok else "reasoning failure")
    return frame[["question_id", "method", "category"]].assign(
        retrieval_failure=failed_retrieval,
        answer_correct=[
            correct.get((q, m), np.nan) for q, m in zip(frame["question_id"], frame["method"], strict=True)
        ],
        outcome=outcomes,
    )


def attribution_shares(attribution: pd.DataFrame, n_resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Per method x category and outcome: answers, their share among the attributed ones with a
    bootstrap interval, and the unattributed answers counted apart.
    """
    rows = []
    for (method, category), group in attribution.groupby(["method", "category"], sort=False):
        attributed = group[group["outcome"].isin(OUTCOMES)]
        for outcome in OUTCOMES:
            hits = (attributed["outcome"] == outcome).astype(float)
            ci = bootstrap_mean_ci(hits, n_resamples, seed=seed) if len(hits) else None
            rows.append(
                {
                    "method": method,
                    "category": category,
                    "outcome": outcome,
                    "answers": int(hits.sum()),
                    "attributed": len(attributed),
                    "share": ci.mean if ci else np.nan,
                    "ci_low": ci.low if ci else np.nan,
                    "ci_high": ci.high if ci else np.nan,
                    "unattributed": len(group) - len(attributed),
                }
            )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- per method x category


def metric_threshold(metric: str, category: str, settings: DiagnosticsSettings) -> float:
    """The seed's starting threshold of `metric` in `category` (NaN for a metric without one)."""
    if metric == "entity_recall":
        return settings.entity_recall_thresholds.get(category, settings.default_entity_recall_threshold)
    return {
        "relationship_recall": settings.relationship_recall_threshold,
        "grounding": settings.grounding_threshold,
        "citation_coverage": settings.citation_threshold,
    }.get(metric, np.nan)


def diagnostics_summary(
    per_answer: pd.DataFrame, metrics: Sequence[str], settings: DiagnosticsSettings
) -> pd.DataFrame:
    """Per method x category x metric: n (answers with a value), mean with a bootstrap interval, the
    threshold, `below_threshold` (mean under it) and `unavailable` (why no answer has a value, with the
    counts of each status, e.g. "no gold edges: 4"). `per_answer` has one row per answer with a
    `category` column, each metric's value column and, where it has one, its `<metric>_status`.
    """
    rows = []
    for (method, category), group in per_answer.groupby(["method", "category"], sort=False):
        for metric in metrics:
            values = pd.to_numeric(group[metric], errors="coerce").dropna()
            status = group.get(f"{metric}_status")
            reasons = (
                status[status != "ok"].value_counts().to_dict()
                if status is not None
                else {"not computed": len(group) - len(values)}
            )
            threshold = metric_threshold(metric, category, settings)
            ci = (
                bootstrap_mean_ci(values, settings.bootstrap_resamples, seed=settings.seed)
                if len(values)
                else None
            )
            rows.append(
                {
                    "method": method,
                    "category": category,
                    "metric": metric,
                    "n": len(values),
                    "mean": ci.mean if ci else np.nan,
                    "ci_low": ci.low if ci else np.nan,
                    "ci_high": ci.high if ci else np.nan,
                    "threshold": threshold,
                    "below_threshold": bool(
                        ci is not None and not np.isnan(threshold) and ci.mean < threshold
                    ),
                    "unavailable": ""
                    if ci
                    else "; ".join(f"{k}: {v}" for k, v in reasons.items() if v) or "no answers",
                    "not_scored": "; ".join(f"{k}: {v}" for k, v in reasons.items() if v) if ci else "",
                }
            )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- assembling the per-answer table


def diagnosis_frame(
    recall: pd.DataFrame, citations: pd.DataFrame, grounding: pd.DataFrame, correctness: pd.DataFrame
) -> pd.DataFrame:
    """One row per answer: its category, recall, citation, grounding and correctness values with
    their statuses (`<metric>_status`: "ok" or why the value is missing; "not measured" where a
    table has no row for the answer, e.g. diagnostics.grounding = none), as `diagnostics_summary`
    reads them.
    """
    keys = ["question_id", "method"]
    correct = correctness[[*keys, "answer_correct", "status"]].rename(
        columns={"status": "answer_correct_status"}
    )
    frame = (
        recall.merge(citations, on=keys, how="left")
        .merge(grounding[[*keys, "grounding", "grounding_status"]], on=keys, how="left")
        .merge(correct, on=keys, how="left")
    )
    statuses = {
        c: "not measured" for c in ("citation_coverage_status", "grounding_status", "answer_correct_status")
    }
    return frame.fillna(statuses).assign(
        answer_correct=pd.to_numeric(frame["answer_correct"], errors="coerce").astype(float)
    )


def model_retrieval_methods(ledger: pd.DataFrame, methods: Sequence[str]) -> list[str]:
    """The methods whose context came through model calls (a call at a stage other than the answer
    and the diagnostics' own checks: map steps, routing, question-entity listing), from the ledger.
    """
    own = {"answer", KEY_FACTS_STAGE, GROUNDING_CLAIMS_STAGE, GROUNDING_CHECK_STAGE}
    if ledger.empty:
        return []
    calls = ledger[(ledger["kind"] != "embedding") & ~ledger["stage"].isin(own)]
    return [m for m in methods if m in set(calls["method"])]
