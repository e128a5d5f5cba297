"""Hierarchical Leiden communities (graspologic's Leiden core), as GraphRAG builds them: levels
C0..Cn that partition all entities, a cluster that stopped splitting carried down, isolated
entities in singleton communities.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import graspologic_native as gn
import networkx as nx
import pandas as pd

from ragtrial.index.tables import SCHEMAS, conform_table
from ragtrial.records import ordered_union

# ---------------------------------------------------------------- hierarchical Leiden

# How relations become Leiden's weighted edge list (IndexSettings.community_input).
EdgeRule = Literal["summed", "graphrag"]


def _summed_edges(relations: Iterable[tuple[str, str, float]]) -> dict[tuple[str, str], float]:
    """Pairs ordered by id; parallel and reversed relations add their weights; self-loops dropped."""
    weights: dict[tuple[str, str], float] = {}
    for src, tgt, weight in relations:
        if src != tgt:
            pair = (src, tgt) if src < tgt else (tgt, src)
            weights[pair] = weights.get(pair, 0.0) + weight
    return weights


def _graphrag_edges(
    relations: Iterable[tuple[str, str, float]], name_of: dict[str, str]
) -> dict[tuple[str, str], float]:
    """GraphRAG's cluster_graph input: each pair's ends ordered by entity name (GraphRAG's node key is
    the title), the last relation of a pair (either direction) giving its weight, self-loops kept.
    """
    weights: dict[tuple[str, str], float] = {}
    for src, tgt, weight in relations:
        a, b = sorted((src, tgt), key=lambda e: (name_of[e], e))
        weights[(a, b)] = weight
    return weights


def create_communities(
    entities_df: pd.DataFrame,
    relations_df: pd.DataFrame,
    max_cluster_size: int = 10,
    seed: int = 0xDEADBEEF,
    use_lcc: bool = False,
    resolution: float = 1.0,
    edge_rule: EdgeRule = "summed",
) -> pd.DataFrame:
    """Hierarchical Leiden (graspologic's core, GraphRAG's defaults) as levels C0 (root) … Cn.

    Every level is a partition of all clustered nodes, as the GraphRAG paper describes: a node whose
    cluster was not split further keeps it at deeper levels, as a copy with id "<cluster>@<level>"
    whose parent is the same cluster one level up (so a copy has the same members as its parent).
    Clusters keep graspologic's ids (unique across levels). Entities without edges get singleton
    communities numbered after the clusters; `use_lcc=True` clusters the largest connected
    component only (GraphRAG's default; of each entity origin's graph when the index holds two side by
    side) and leaves every other entity out.

    `edge_rule` "summed": parallel and reversed relations add their weights, self-loops are
    ignored, edges go to Leiden in entity-id order. "graphrag": GraphRAG 3.3's cluster_graph input
    (its communities exactly, with use_lcc and graspologic-native 1.2): a pair's last relation in
    table order gives its weight, self-loops stay, and edges go to Leiden sorted by entity name
    (Leiden's result depends on that order). GraphRAG keys nodes by title and, with use_lcc,
    upper-cases titles; the kit keys them by entity id, which is the same whenever names are unique.
    """
    entity_ids = list(entities_df["entity_id"])
    known = set(entity_ids)
    relations = []
    for rid, src, tgt, weight in zip(
        relations_df["relation_id"],
        relations_df["source_id"],
        relations_df["target_id"],
        relations_df["weight"],
        strict=True,
    ):
        if src not in known or tgt not in known:
            raise ValueError(
                f"relation {rid!r} has an endpoint that is not in the entities table; "
                "drop dangling relations before clustering"
            )
        relations.append((src, tgt, float(weight)))
    name_of = dict(zip(entities_df["entity_id"], entities_df["name"], strict=True))
    by_name = edge_rule == "graphrag"
    weights = _graphrag_edges(relations, name_of) if by_name else _summed_edges(relations)

    def order(edge: tuple[str, str, float]) -> tuple[str, ...]:
        a, b, _ = edge
        return (name_of[a], a, name_of[b], b) if by_name else (a, b)

    nodes = known
    if use_lcc and weights:
        # one graph per entity origin (an index of two graphs side by side keeps both)
        origin_of = dict(zip(entities_df["entity_id"], entities_df["origin"], strict=True))
        components = nx.connected_components(nx.Graph(list(weights)))
        largest: dict[str, set[str]] = {}
        for component in components:
            origin = origin_of[next(iter(component))]
            if len(component) > len(largest.get(origin, ())):
                largest[origin] = component
        nodes = set().union(*largest.values())
    edges = sorted(((a, b, w) for (a, b), w in weights.items() if a in nodes), key=order)
    clusters = (
        gn.hierarchical_leiden(
            edges,
            starting_communities=None,
            resolution=resolution,
            randomness=0.001,  # GraphRAG's (and graspologic's default)
            iterations=1,
            use_modularity=True,
            max_cluster_size=max_cluster_size,
            seed=seed,
        )
        if edges
        else []
    )
    # Each node's clusters from level 0 down to its final one; isolated nodes become singletons.
    path: dict[str, list[int]] = {}
    for c in sorted(clusters, key=lambda c: c.level):
        path.setdefault(c.node, []).append(c.cluster)
    next_id = max((c.cluster for c in clusters), default=-1) + 1
    for eid in entity_ids:
        if eid in nodes and eid not in path:
            path[eid] = [next_id]
            next_id += 1
    depth = max((len(p) for p in path.values()), default=0)

    def community(node: str, level: int) -> tuple[str, int]:
        """(community id, cluster it stems from) of `node` at `level`."""
        own = path[node]
        base = own[min(level, len(own) - 1)]
        return (str(base) if level < len(own) else f"{base}@{level}"), base

    chunks_of = dict(zip(entities_df["entity_id"], entities_df["chunk_ids"], strict=True))
    rows = []
    for level in range(depth):
        members: dict[tuple[str, int], list[str]] = {}
        for eid in entity_ids:
            if eid in path:
                members.setdefault(community(eid, level), []).append(eid)
        inside: dict[str, list[str]] = {}
        for rid, src, tgt in zip(
            relations_df["relation_id"], relations_df["source_id"], relations_df["target_id"], strict=True
        ):
            if src in path and tgt in path and community(src, level) == community(tgt, level):
                inside.setdefault(community(src, level)[0], []).append(rid)
        for (cid, _), ids in sorted(members.items(), key=lambda item: item[0][1]):
            parent_id = community(ids[0], level - 1)[0] if level else None
            rows.append(
                (
                    cid,
                    level,
                    parent_id,
                    ids,
                    inside.get(cid, []),
                    ordered_union(chunks_of[e] for e in ids),
                    len(ids),
                )
            )
    return conform_table("communities", pd.DataFrame(rows, columns=list(SCHEMAS["communities"])))
