"""What a report shows of an index: sizes, entities per origin, chunk coverage, entities that no
chunk grounds, and scores of the extracted graph against a gold graph (the generated corpus's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ragtrial.index.merge_extractions import normalize_name
from ragtrial.index.tables import ORIGINS, GraphIndex, select_origin
from ragtrial.stats import Interval, McNemarResult, bootstrap_mean_ci, mcnemar_test, paired_bootstrap_diff

if TYPE_CHECKING:  # experiment tables work on answer frames; only run_methods needs live methods
    from ragtrial.index.tables import GraphIndex


def ungrounded(index: GraphIndex) -> pd.Series:
    """Per entity: its name occurs (case-insensitively) in none of the chunks it cites, i.e. the
    extractor invented it or copied it from a prompt's few-shot example.
    """
    text = {c: t.casefold() for c, t in zip(index.chunks["chunk_id"], index.chunks["text"], strict=True)}
    return pd.Series(
        [
            not any(name.casefold() in text.get(c, "") for c in ids)
            for name, ids in zip(index.entities["name"], index.entities["chunk_ids"], strict=True)
        ],
        index=index.entities.index,
        dtype=bool,
    )


def origin_counts(index: GraphIndex) -> pd.DataFrame:
    """What each graph of the index holds: one row per origin."""
    rows = []
    for origin in [o for o in ORIGINS if (index.entities["origin"] == o).any()]:
        part = select_origin(index, origin)
        ents = part.entities
        rows.append(
            {
                "origin": origin,
                "entities": len(ents),
                "relations": len(part.relations),
                "claims": len(part.claims),
                "isolated entities": int((ents["degree"] == 0).sum()),
                "unknown-type entities": int((ents["type"] == "").sum()),
                "entities not in their chunks": int(ungrounded(part).sum()),
                "chunks cited": len({c for ids in ents["chunk_ids"] for c in ids}),
                "communities": len(part.communities),
                "levels": part.communities["level"].nunique(),
                "community reports": len(part.community_reports),
            }
        )
    return pd.DataFrame(rows)


def chunk_outcomes(index: GraphIndex) -> pd.DataFrame:
    """Per origin and chunk: `graph` (some entity cites it), `failed` (the extraction reply was
    unusable), `empty` (a valid reply with nothing in it) or `skipped` (outside the LLM sample).
    """
    failed = set(
        index.extraction_failures.loc[index.extraction_failures["stage"] == "extract_graph", "chunk_id"]
    )
    skipped = set(index.manifest.get("llm_extraction", {}).get("skipped_chunk_ids", []))
    attempted_llm = "llm_extraction" in index.manifest  # an LLM graph may have no entity at all
    rows = []
    for origin in [
        o for o in ORIGINS if (index.entities["origin"] == o).any() or (o == "llm" and attempted_llm)
    ]:
        cited = {
            c for ids in index.entities.loc[index.entities["origin"] == origin, "chunk_ids"] for c in ids
        }
        for chunk_id in index.chunks["chunk_id"]:
            if origin == "llm" and chunk_id in skipped:
                outcome = "skipped"
            elif origin == "llm" and chunk_id in failed:
                outcome = "failed"
            else:
                outcome = "graph" if chunk_id in cited else "empty"
            rows.append((origin, chunk_id, outcome))
    return pd.DataFrame(rows, columns=["origin", "chunk_id", "outcome"])


def _share(hits: np.ndarray, what: str, origin: str) -> dict[str, Any]:
    if not len(hits):
        return {
            "origin": origin,
            "measure": what,
            "count": 0,
            "of": 0,
            "share": None,
            "low": None,
            "high": None,
        }
    ci = bootstrap_mean_ci(hits.astype(float))
    return {
        "origin": origin,
        "measure": what,
        "count": int(hits.sum()),
        "of": len(hits),
        "share": ci.mean,
        "low": ci.low,
        "high": ci.high,
    }


def coverage_summary(outcomes: pd.DataFrame) -> pd.DataFrame:
    """Per origin: share of attempted chunks whose extraction failed, and with no graph at all
    (failed or empty), with 95% bootstrap intervals over chunks.
    """
    rows = []
    for origin, group in outcomes.groupby("origin", sort=False):
        attempted = group[group["outcome"] != "skipped"]["outcome"].to_numpy()
        rows.append(_share(attempted == "failed", "extraction failed", origin))
        rows.append(_share(attempted != "graph", "no graph (failed or empty)", origin))
    return pd.DataFrame(rows)


def gold_key(name: str) -> str:
    """Name key for comparing with the gold graph: the merge key without a leading article."""
    key = normalize_name(name)
    return key[4:] if key.startswith("the ") else key


def gold_hits(
    index: GraphIndex,
    gold_entities: pd.DataFrame,
    gold_relations: pd.DataFrame,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per origin, each gold item's fate and each extracted item's truth, against the generated
    world's graph (synthetic.world_tables).

    Recall rows (origin, kind, item_id, read, found): every gold relation and entity; `read` when a
    document stating it (for an entity: a relation it takes part in) was read by the origin's
    extractor (every document, or the LLM sample). Entities match by `gold_key` of the name or an
    alias, relations by their unordered pair of matched endpoints. Precision rows (origin, kind,
    item_id, in_gold): every extracted entity and relation of the origin.
    """
    gold_of: dict[str, set[str]] = {}
    for gid, name, aliases in zip(
        gold_entities["entity_id"], gold_entities["name"], gold_entities["aliases"], strict=True
    ):
        for n in [name, *aliases]:
            gold_of.setdefault(gold_key(n), set()).add(gid)
    gold_pairs = [
        frozenset(p) for p in zip(gold_relations["source_id"], gold_relations["target_id"], strict=True)
    ]
    outcomes = chunk_outcomes(index)
    doc_of = dict(zip(index.chunks["chunk_id"], index.chunks["doc_id"], strict=True))
    recall, precision = [], []
    for origin in outcomes["origin"].unique():
        mine = outcomes[(outcomes["origin"] == origin) & (outcomes["outcome"] != "skipped")]
        read_docs = {doc_of[c] for c in mine["chunk_id"]}
        part = select_origin(index, origin)
        matches = {
            eid: gold_of.get(gold_key(name), set())
            for eid, name in zip(part.entities["entity_id"], part.entities["name"], strict=True)
        }
        found_pairs = [
            {frozenset((a, b)) for a in matches[s] for b in matches[t] if a != b}
            for s, t in zip(part.relations["source_id"], part.relations["target_id"], strict=True)
        ]
        found_entities = set().union(set(), *matches.values())
        all_found_pairs = set().union(set(), *found_pairs)
        read_relations = [bool(read_docs & set(d)) for d in gold_relations["doc_ids"]]
        read_entities = {
            e for pair, read in zip(gold_pairs, read_relations, strict=True) if read for e in pair
        }
        recall += [
            (origin, "relation", rid, read, pair in all_found_pairs)
            for rid, pair, read in zip(gold_relations["relation_id"], gold_pairs, read_relations, strict=True)
        ]
        recall += [
            (origin, "entity", gid, gid in read_entities, gid in found_entities)
            for gid in gold_entities["entity_id"]
        ]
        precision += [(origin, "entity", eid, bool(m)) for eid, m in matches.items()]
        precision += [
            (origin, "relation", rid, bool(p & set(gold_pairs)))
            for rid, p in zip(part.relations["relation_id"], found_pairs, strict=True)
        ]
    return (
        pd.DataFrame(recall, columns=["origin", "kind", "item_id", "read", "found"]),
        pd.DataFrame(precision, columns=["origin", "kind", "item_id", "in_gold"]),
    )


def gold_graph_scores(
    index: GraphIndex, gold_entities: pd.DataFrame, gold_relations: pd.DataFrame
) -> pd.DataFrame:
    """Entity and relation recall (over the gold items each origin read) and precision (over what
    it extracted) per origin, with 95% bootstrap intervals; see `gold_hits`.
    """
    recall, precision = gold_hits(index, gold_entities, gold_relations)
    rows = []
    for origin in recall["origin"].unique():
        for kind in ("entity", "relation"):
            seen = recall[(recall["origin"] == origin) & (recall["kind"] == kind) & recall["read"]]
            made = precision[(precision["origin"] == origin) & (precision["kind"] == kind)]
            rows.append(_share(seen["found"].to_numpy(), f"{kind} recall", origin))
            rows.append(_share(made["in_gold"].to_numpy(), f"{kind} precision", origin))
    return pd.DataFrame(rows)


def relation_recall_difference(
    index: GraphIndex, gold_entities: pd.DataFrame, gold_relations: pd.DataFrame
) -> tuple[Interval, McNemarResult] | None:
    """LLM minus NLP relation recall, paired on the gold relations both extractors read (the LLM's
    sample of documents): a paired bootstrap interval and McNemar's test on the same pairs (the one
    comparison, so no adjustment); None unless the index holds both graphs.
    """
    recall, _ = gold_hits(index, gold_entities, gold_relations)
    if not {"nlp", "llm"} <= set(recall["origin"]):
        return None
    wide = recall[recall["kind"] == "relation"].pivot(
        index="item_id", columns="origin", values=["read", "found"]
    )
    both_read = wide["read"].all(axis=1)
    llm, nlp = wide["found"]["llm"][both_read].astype(bool), wide["found"]["nlp"][both_read].astype(bool)
    return paired_bootstrap_diff(llm.astype(float), nlp.astype(float)), mcnemar_test(llm, nlp)


def with_origin(frame: pd.DataFrame, index: GraphIndex) -> pd.DataFrame:
    """Communities or reports with the origin of their graph (Leiden communities are connected, so
    a community's first entity tells its origin).
    """
    origin_of = dict(zip(index.entities["entity_id"], index.entities["origin"], strict=True))
    return frame.assign(origin=[origin_of[ids[0]] for ids in frame["entity_ids"]])


def communities_per_level(index: GraphIndex) -> pd.DataFrame:
    """Per origin and level: how many communities, their median and largest size."""
    return (
        with_origin(index.communities, index)
        .groupby(["origin", "level"])["size"]
        .agg(communities="size", median_size="median", largest="max")
        .reset_index()
    )


def hubs(index: GraphIndex, per_origin: int = 5) -> pd.DataFrame:
    """The highest-degree entities of each graph (a walk through a hub pulls in unrelated context)."""
    return (
        index.entities.sort_values(["origin", "degree", "name"], ascending=[True, False, True])
        .groupby("origin")
        .head(per_origin)[["origin", "name", "type", "degree"]]
    )


def index_sizes(index: GraphIndex) -> pd.DataFrame:
    tables = ("documents", "chunks", "entities", "relations", "communities", "community_reports")
    return pd.DataFrame([{t: len(getattr(index, t)) for t in tables}], index=["rows"])
