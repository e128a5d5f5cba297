"""How good are generated questions: which entities they are about, and how relevant retrieval is.

Question entities are found by the retrievers' own linker (retrieval.entity_graph.EntityLinker) in two
modes, reported side by side when both run: "ngram" links question n-grams to entity names with no
model call (usable when the model is weak, but it finds only entities of the graph, so it favours
graph-grounded questions); "llm" has the model list the entities first, and every listed entity
counts, linked to the graph or not (the paper counts the extracted entities themselves: counting
only those that link would favour graph-grounded questions); the linked share is reported beside.
Distribution metrics follow the GraphRAG evaluation paper (Section V-A): top-10 shares, distinct
entities, share of the most frequent; plus Shannon entropy and graph / community coverage (of linked
entities).
Relevance (Section V-B): one 0-5 rating per (question, retrieved context); a reply that does not
parse is a recorded failure, never a score.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel
from scipy.stats import entropy

from ragtrial.config.questions import QuestionsSettings
from ragtrial.config.retrieval import RetrievalSettings
from ragtrial.index.merge_extractions import normalize_name
from ragtrial.index.tables import GraphIndex
from ragtrial.llm.client import LLM
from ragtrial.llm.errors import LLMError
from ragtrial.llm.plan import QUESTION_TOKENS, StagePlan, frame_tokens, projected
from ragtrial.prompts import load_prompt
from ragtrial.questions.generated_records import Failure
from ragtrial.records import records_frame
from ragtrial.retrieval.base import ChunkTable, Retriever, RetrieverParts
from ragtrial.retrieval.entity_graph import EntityGraph, EntityLinker, Link
from ragtrial.retrieval.packing import format_context, pack_context
from ragtrial.stats import (
    bootstrap_mean_ci,
    claim_supported,
    claim_text,
    holm_correction,
    paired_comparison_table,
)

MENTION_COLUMNS = [
    "question_id",
    "generator",
    "level",
    "linker",
    "mention",
    "entity",  # what is counted: the graph entity id, or "unlinked:<normalized name>"
    "entity_id",  # "" for a listed entity that links to no graph entity
    "name",
    "how",  # exact | embedding | unlinked
    "similarity",
]
UNLINKED = "unlinked"


class RelevanceRating(BaseModel):
    score: Literal[0, 1, 2, 3, 4, 5]  # an enum, so a constrained decoder can only write one of these


# ---------------------------------------------------------------- question entities

# Our linker names -> the retrieval linker's entity_source.
LINKERS = {"ngram": "string_embedding", "llm": "llm"}


def make_entity_linker(
    index: GraphIndex, parts: RetrieverParts, retrieval: RetrievalSettings, linker: str
) -> EntityLinker:
    """The retrievers' own question -> entity linker (retrieval.entity_graph.EntityLinker) with the
    run's retrieval settings, so questions are read the way graph retrieval reads them; `linker`
    picks its entity source. `index` is already the questions' graph (questions.graph_origin), so
    the linker reads all of it whatever graph retrieval.graph_origin names.
    """
    settings = retrieval.model_copy(update={"entity_source": LINKERS[linker], "graph_origin": "both"})
    return EntityLinker(EntityGraph(index, ChunkTable(index)), parts, settings, method="questions")


def entity_mentions(
    questions: pd.DataFrame, linker: EntityLinker, linker_name: str
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One row per (question, entity): for the n-gram linker each linked entity, for the LLM linker
    each listed entity, linked or not (once per question). A question whose model call failed has no
    rows and a failure row instead (it is left out of that linker's denominators, not counted as
    entity-free).
    """

    def mentions_of(q: Any) -> list[tuple] | Failure:
        try:
            found = _found_entities(linker, q.question)
        except LLMError as err:
            return Failure(
                item_id=q.question_id,
                generator=q.generator,
                stage="question_entities",
                kind=err.kind,
                detail=str(err)[:500],
            )
        return [(q.question_id, q.generator, q.level, linker_name, *entity) for entity in found]

    asked = list(questions.itertuples(index=False))
    if linker.settings.entity_source == "llm":  # one model call per question: they fan out
        assert linker.parts.llm is not None  # EntityLinker refuses an "llm" source without a model
        done = linker.parts.llm.fan_out(
            mentions_of, asked, label="question_entities", key=lambda q: q.question
        )
    else:  # the n-gram linker makes no model call
        done = [mentions_of(q) for q in asked]
    rows = [row for found in done if not isinstance(found, Failure) for row in found]
    failures = [found for found in done if isinstance(found, Failure)]
    return pd.DataFrame(rows, columns=MENTION_COLUMNS), records_frame(failures, Failure)


def _found_entities(linker: EntityLinker, question: str) -> list[tuple[str, str, str, str, str, float]]:
    """(mention, entity, entity_id, name, how, similarity) of each entity the question names, each once."""
    if linker.settings.entity_source != "llm":
        links: list[tuple[str, Link | None]] = [(x.mention, x) for x in linker.link(question)]
    else:
        names = linker.listed(question)
        links = list(zip(names, linker.link_each(names), strict=True))
    found: dict[str, tuple[str, str, str, str, str, float]] = {}
    for mention, link in links:
        if link is None:
            key = f"{UNLINKED}:{normalize_name(mention)}"
            found.setdefault(key, (mention, key, "", mention, UNLINKED, float("nan")))
        else:
            entity_id = linker.graph.ids[link.entity]
            found.setdefault(
                entity_id,
                (mention, entity_id, entity_id, linker.graph.names[link.entity], link.how, link.similarity),
            )
    return list(found.values())


# ---------------------------------------------------------------- distribution metrics


def _ranked(mentions: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Mentions per counted entity (column `entity`), most frequent first, ties by name (so pies
    and tables agree), and each entity's name.
    """
    names = mentions.groupby("entity")["name"].first()
    counts = mentions["entity"].value_counts()
    return counts.iloc[np.lexsort((names[counts.index].to_numpy(), -counts.to_numpy()))], names


def top_entities(mentions: pd.DataFrame, k: int = 10) -> pd.DataFrame:
    """Per (linker, generator): the k most frequent entities and 'other', with counts and shares."""
    rows = []
    for (linker, generator), group in mentions.groupby(["linker", "generator"], sort=False):
        counts, names = _ranked(group)
        total = int(counts.sum())
        for rank, (eid, n) in enumerate(counts.head(k).items(), start=1):
            rows.append((linker, generator, rank, names[eid], int(n), n / total))
        if len(counts) > k:
            rest = int(counts.iloc[k:].sum())
            rows.append((linker, generator, k + 1, f"other ({len(counts) - k} entities)", rest, rest / total))
    return pd.DataFrame(rows, columns=["linker", "generator", "rank", "entity", "count", "share"])


# entity_distribution's columns: without questions (every generation call failed) an empty table of them
DISTRIBUTION_COLUMNS = [
    "linker",
    "generator",
    "questions",
    "questions_with_entity",
    "mentions",
    "distinct_entities",
    "top_entity",
    "top_share",
    "top_question_share",
    "entropy_bits",
    "linked_mentions",
    "linked_share",
    "distinct_linked_entities",
    "entity_coverage",
    "community_coverage",
]


def entity_distribution(
    mentions: pd.DataFrame,
    questions: pd.DataFrame,
    linkers: dict[str, set[str]],
    entities: pd.DataFrame,
    communities: pd.DataFrame,
    community_level: int,
) -> pd.DataFrame:
    """One row per (linker, generator). `linkers` maps each linker that ran to the ids of questions it
    failed on (recorded failures); those are left out of its denominators.

    Every counted entity enters the distribution, linked to the graph or not. top_share: the most
    frequent entity's share of mentions (the pie); top_question_share: share of questions naming it
    (the paper's 53.3%); entropy_bits: Shannon entropy of the mention counts; linked_share: share of
    mentions that link to a graph entity; entity_coverage / community_coverage: share of graph
    entities / of level-`community_level` communities that some linked mention reaches.
    """
    level = communities[communities["level"] == community_level]
    rows = []
    for linker, failed in linkers.items():
        processed = questions[~questions["question_id"].isin(failed)]
        for generator, qs in processed.groupby("generator", sort=False):
            m = mentions[(mentions["linker"] == linker) & mentions["question_id"].isin(qs["question_id"])]
            counts, names = _ranked(m)
            top = counts.index[0] if len(counts) else None
            linked = m[m["entity_id"] != ""]
            linked_ids = set(linked["entity_id"])
            reached = level["entity_ids"].map(lambda ids, seen=linked_ids: bool(seen.intersection(ids)))
            rows.append(
                {
                    "linker": linker,
                    "generator": generator,
                    "questions": len(qs),
                    "questions_with_entity": m["question_id"].nunique(),
                    "mentions": len(m),
                    "distinct_entities": len(counts),
                    "top_entity": names[top] if top else "",
                    "top_share": counts.iloc[0] / len(m) if len(m) else float("nan"),
                    "top_question_share": m.loc[m["entity"] == top, "question_id"].nunique() / len(qs),
                    "entropy_bits": float(entropy(counts.to_numpy(), base=2)) if len(counts) else 0.0,
                    "linked_mentions": len(linked),
                    "linked_share": len(linked) / len(m) if len(m) else float("nan"),
                    "distinct_linked_entities": len(linked_ids),
                    "entity_coverage": len(linked_ids) / len(entities) if len(entities) else float("nan"),
                    "community_coverage": float(reached.mean()) if len(level) else float("nan"),
                }
            )
    return pd.DataFrame(rows, columns=DISTRIBUTION_COLUMNS)


# ---------------------------------------------------------------- retrieval relevance


def rate_relevance(
    llm: LLM, questions: pd.DataFrame, contexts: dict[str, str], max_tokens: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One 0-5 rating per question with its retrieved context (rubric prompt `rate_relevance`).
    Returns (ratings: question_id, generator, level, score; failures).
    """
    prompt = load_prompt("rate_relevance")

    def rate(q: pd.Series) -> tuple | Failure:
        try:
            reply = llm.structured(
                prompt.render(question=q["question"], context=contexts[q["question_id"]]),
                RelevanceRating,
                stage="rate_relevance",
                method=q["generator"],
                prompt=prompt,
                max_tokens=max_tokens,
            )
        except LLMError as err:
            return Failure(
                item_id=q["question_id"],
                generator=q["generator"],
                stage="rate_relevance",
                kind=err.kind,
                detail=str(err)[:500],
            )
        return (q["question_id"], q["generator"], q["level"], q.get("anchor_id", ""), reply.score)

    done = llm.fan_out(
        rate,
        [q for _, q in questions.iterrows()],
        label="rate_relevance",
        key=lambda q: (q["question"], contexts[q["question_id"]]),
    )
    rows = [r for r in done if not isinstance(r, Failure)]
    failures = [r for r in done if isinstance(r, Failure)]
    ratings = pd.DataFrame(rows, columns=["question_id", "generator", "level", "anchor_id", "score"])
    return ratings, records_frame(failures, Failure)


def relevance_summary(ratings: pd.DataFrame, by: list[str], seed: int = 0) -> pd.DataFrame:
    """Mean score and share of 0-1 scores per group, each with a bootstrap interval."""
    rows = []
    for key, group in ratings.groupby(by, sort=False):
        mean, low = (
            bootstrap_mean_ci(group["score"], seed=seed),
            bootstrap_mean_ci(group["score"] <= 1, seed=seed),
        )
        rows.append(
            {
                **dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True)),
                "n": mean.n,
                "mean": mean.mean,
                "ci_low": mean.low,
                "ci_high": mean.high,
                "share_0_1": low.mean,
                "share_0_1_low": low.low,
                "share_0_1_high": low.high,
            }
        )
    return pd.DataFrame(rows)


def compare_generators(
    ratings: pd.DataFrame, min_pairs: int = 5, min_n: int = 5, seed: int = 0
) -> pd.DataFrame:
    """Each pair of generators, with a `verdict` sentence. Paired (paired bootstrap and Wilcoxon on
    the mean score per shared anchor, Holm across the paired comparisons, the claim rule of
    `stats.claim_text`) when at least `min_pairs` anchors were rated for both; otherwise unpaired and
    labelled so: the two bootstrap intervals side by side, a difference claimed only when they are
    disjoint and both generators have at least `min_n` ratings (no paired test exists there).
    """
    generators = list(pd.unique(ratings["generator"]))
    rows: list[dict[str, Any]] = []
    paired: list[tuple[int, str, str, int, pd.DataFrame]] = []
    for i, a in enumerate(generators):
        for b in generators[i + 1 :]:
            pair = ratings[ratings["generator"].isin([a, b]) & (ratings["anchor_id"] != "")]
            per_anchor = pair.groupby(["anchor_id", "generator"], as_index=False)["score"].mean()
            shared = per_anchor.groupby("anchor_id")["generator"].nunique().loc[lambda n: n == 2].index
            if len(shared) >= min_pairs:
                long = per_anchor[per_anchor["anchor_id"].isin(shared)].rename(
                    columns={"anchor_id": "question_id", "generator": "method"}
                )
                paired.append(
                    (len(rows), a, b, len(shared), paired_comparison_table(long, b, False, seed=seed))
                )
                rows.append({})  # filled below, once the paired p-values are adjusted together
                continue
            ia, ib = (
                bootstrap_mean_ci(ratings.loc[ratings["generator"] == g, "score"], seed=seed) for g in (a, b)
            )
            evidence = (
                f"{a} {ia.mean:.2f} [{ia.low:.2f}, {ia.high:.2f}] (n={ia.n}) vs "
                f"{b} {ib.mean:.2f} [{ib.low:.2f}, {ib.high:.2f}] (n={ib.n})"
            )
            disjoint = ia.low > ib.high or ib.low > ia.high
            if min(ia.n, ib.n) < min_n:
                outcome = f"fewer than {min_n} ratings on one side: no claim."
            else:
                outcome = "the intervals do not overlap." if disjoint else "the intervals overlap: no claim."
            rows.append(
                _comparison(
                    a,
                    b,
                    "unpaired (different questions): intervals side by side, no test",
                    ia.mean - ib.mean,
                    float("nan"),
                    float("nan"),
                    evidence,
                    disjoint and min(ia.n, ib.n) >= min_n,
                    f"{a} vs {b}, unpaired (different questions): {evidence}; {outcome}",
                )
            )
    adjusted = holm_correction([t["p_value"].iloc[0] for *_, t in paired])["p_holm"] if paired else []
    for (at, a, b, n_shared, table), p_holm in zip(paired, adjusted, strict=True):
        t = table.iloc[0]
        evidence = (
            f"{t['test']} p={t['p_value']:.3g}, Holm over {len(paired)} paired comparison(s) {p_holm:.3g}"
        )
        direction = "more" if t["mean_diff"] > 0 else "less"
        claim = f"{a}'s questions got {direction} relevant retrievals than {b}'s"
        said = claim_text(t["ci_low"], t["ci_high"], p_holm, claim)
        verdict = (
            f"{a} minus {b}: {t['mean_diff']:+.2f} [{t['ci_low']:+.2f}, {t['ci_high']:+.2f}] "
            f"(paired on {n_shared} anchors; {evidence}): {said}."
        )
        supported = claim_supported(t["ci_low"], t["ci_high"], p_holm)
        design = f"paired on {n_shared} shared anchors"
        rows[at] = _comparison(
            a, b, design, t["mean_diff"], t["ci_low"], t["ci_high"], evidence, supported, verdict
        )
    return pd.DataFrame(
        rows,
        columns=[
            "generator",
            "versus",
            "design",
            "mean_diff",
            "ci_low",
            "ci_high",
            "evidence",
            "supported",
            "verdict",
        ],
    )


def _comparison(
    a: str,
    b: str,
    design: str,
    diff: float,
    low: float,
    high: float,
    evidence: str,
    supported: bool,
    verdict: str,
) -> dict[str, Any]:
    return {
        "generator": a,
        "versus": b,
        "design": design,
        "mean_diff": diff,
        "ci_low": low,
        "ci_high": high,
        "evidence": evidence,
        "supported": supported,
        "verdict": verdict,
    }


def retrieve_contexts(
    retriever: Retriever, questions: pd.DataFrame, k: int, budget: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per question, the context a method would be shown: the retriever's top `k` items packed into
    `budget` tokens and rendered as the shared generator renders them. A retriever's own failed model
    call (e.g. listing question entities) is a recorded failure. Returns (contexts, failures).
    """
    rows, failures = [], []
    for q in questions.itertuples(index=False):
        try:
            found = retriever.retrieve(q.question, k)
        except LLMError as err:
            failures.append(
                Failure(
                    item_id=q.question_id,
                    generator=q.generator,
                    stage="retrieve",
                    kind=err.kind,
                    detail=str(err)[:500],
                )
            )
            continue
        items, tokens = pack_context(found.items, budget)
        rows.append((q.question_id, format_context(items), len(items), sum(tokens.values()), found.fallback))
    contexts = pd.DataFrame(rows, columns=["question_id", "context", "items", "context_tokens", "fallback"])
    return contexts, records_frame(failures, Failure)


# ---------------------------------------------------------------- before the calls (ragtrial estimate)


def planned_calls(
    n_questions: int, cfg: QuestionsSettings, retrieval: RetrievalSettings, listing: bool, rating: bool
) -> list[StagePlan]:
    """Notebooks 02 and 03's calls after generation, before the questions exist: with `listing`, the
    LLM linker lists each question's entities (one call per question); with `rating`, one relevance
    rating per question with its context. `n_questions` is the generated count before
    de-duplication, so both are upper bounds.
    """
    plans = []
    if listing:
        entities = load_prompt("question_entities")
        plans.append(
            projected(
                "question_entities",
                n_questions,
                n_questions * (frame_tokens(entities) + 40),
                128,
                "upper bound",
                "json",
                "questions left after de-duplication",
            )
        )
    if rating:
        rate = load_prompt("rate_relevance")
        plans.append(
            projected(
                "rate_relevance",
                n_questions,
                n_questions * (frame_tokens(rate) + QUESTION_TOKENS + cfg.relevance.context_max_tokens),
                cfg.relevance.max_tokens,
                "upper bound",
                "json",
                "questions with a retrieved context",
            )
        )
    return plans
