"""The communities of one level C<n> as the GraphRAG paper reads its levels (4.1.2): C1 is "the
sub-communities of C0 if present, otherwise C0 communities projected down", and so on to C3. A level
holds its own (native) communities and, for every branch that stopped splitting above it, that
branch's deepest community standing in (projected), so each level covers every clustered entity.

A kit index already carries a cluster that was not split down to the deepest level as a copy
"<cluster>@<level>" (`create_communities`); such a copy (its parent's members exactly) counts as
projected. An imported GraphRAG index has no copies: its leaves above a level are added here.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

LEVEL_COLUMNS = ["community_id", "level", "projected"]
MAPPED_COLUMNS = ["level", "communities", "native", "projected", "reported"]


def level_communities(communities: pd.DataFrame, level: int) -> pd.DataFrame:
    """The communities of C<level> (community_id, level: the community's own, projected): the
    communities of that level, then every leaf of a shallower level (a community no other names as
    its parent). `projected` marks the leaves and the copies of an unsplit parent.
    """
    at = communities[communities["level"] == level]
    members = dict(zip(communities["community_id"], communities["entity_ids"].map(frozenset), strict=True))
    copies = [
        parent is not None and members.get(parent) == members[cid]
        for cid, parent in zip(at["community_id"], at["parent_id"], strict=True)
    ]
    parents = set(communities["parent_id"].dropna())
    leaves = communities[(communities["level"] < level) & ~communities["community_id"].isin(parents)]
    return pd.DataFrame(
        {
            "community_id": [*at["community_id"], *leaves["community_id"]],
            "level": [*at["level"], *leaves["level"]],
            "projected": [*copies, *[True] * len(leaves)],
        },
        columns=LEVEL_COLUMNS,
    ).astype({"level": int, "projected": bool})


def level_reports(communities: pd.DataFrame, reports: pd.DataFrame, level: int) -> pd.DataFrame:
    """The community reports global search maps at C<level>: those of `level_communities` (a
    community without a report is not mapped), in report-table order, with a `projected` column.
    An index without a communities table maps the reports of the level itself.
    """
    if communities.empty:
        return reports[reports["level"] == level].assign(projected=False)
    chosen = level_communities(communities, level).set_index("community_id")["projected"]
    mapped = reports[reports["community_id"].isin(chosen.index)]
    return mapped.assign(projected=mapped["community_id"].map(chosen).astype(bool))


def levels_mapped(communities: pd.DataFrame, reports: pd.DataFrame, levels: Sequence[int]) -> pd.DataFrame:
    """Per level C<n>: its communities (= native + projected), and how many of them have a report
    (what global search at that level maps).
    """
    rows = []
    for level in levels:
        chosen = level_communities(communities, level)
        projected = int(chosen["projected"].sum())
        reported = int(reports["community_id"].isin(set(chosen["community_id"])).sum())
        rows.append((level, len(chosen), len(chosen) - projected, projected, reported))
    return pd.DataFrame(rows, columns=MAPPED_COLUMNS)
