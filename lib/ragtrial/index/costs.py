"""What each part of a built index cost, and what re-indexing one changed document costs.

The manifest of a build (`index.build`) holds, per build stage, its wall time and calls, and the
ledger per (ledger stage, method): LLM extraction and community reports carry the graph origin as
their method, embedding calls what they embed (`index.embed_index.embedding_label`). `part_costs`
charges both to the index parts methods read (`methods.registry.index_parts`' vocabulary), one row
per (part, origin); a stage serving several parts has its wall time split in proportion to their
ledger latency, or, without model calls, to their rows. `reindex_costs` turns those costs into
per-row costs (per chunk, per LLM-attempted chunk, per entity, per report) and charges one
document its rows, plus the whole-graph stages (Leiden and relation dating rerun on the whole graph).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from ragtrial.index.embed_index import report_origins
from ragtrial.index.tables import GraphIndex

LLM_EXTRACTION_STAGES = ("extract_graph", "glean_graph", "extract_claims", "summarize_descriptions")
# ledger stage -> the build stage (`index.build.STAGES`) whose calls it records
_BUILD_STAGE_OF = {
    **dict.fromkeys(LLM_EXTRACTION_STAGES, "extract_llm"),
    "community_report": "community_reports",
    "index_embeddings": "embeddings",
}
# build stage -> (part, origin) it makes without a model call; "*": one row per graph origin
_MODEL_FREE_PART = {
    "chunk": ("chunks", ""),
    "extract_nlp": ("graph", "nlp"),
    "extract_llm": ("graph", "llm"),
    "import": ("graph", "import"),
    "communities": ("communities", "*"),
    "date_relations": ("graph", "*"),
}
# the rows a model-free stage serving several graphs is apportioned by
_ROWS_OF = {"communities": "entities", "date_relations": "relations"}
_EMBEDDED_PART = {"chunks": "chunk_embeddings", "entities": "entity_embeddings"}
_EMBEDDED_PART["community_reports"] = "report_embeddings"
UNLABELLED = "embeddings (unlabelled)"
_UNLABELLED_BASIS = "not split: built before embedding labels"
PART_ORDER = ["chunks", "chunk_embeddings", "graph", "communities", "community_reports"]
PART_ORDER += ["entity_embeddings", "report_embeddings", UNLABELLED]
ORIGIN_ORDER = ["nlp", "llm", "import", ""]
AMOUNTS = [
    "calls",
    "live_calls",
    "prompt_tokens",
    "completion_tokens",
    "embedding_tokens",
    "model_s",
    "wall_s",
]
COLUMNS = ["part", "origin", *AMOUNTS, "basis"]
REINDEX_COLUMNS = ["doc_id", "part", "origin", "chunks", *[a for a in AMOUNTS if a != "live_calls"], "basis"]
REINDEX_BASIS = "computed from per-chunk costs"


def _required(manifest: dict[str, Any], key: str) -> Any:
    if key not in manifest:
        where = manifest.get("config_hash", "(unsaved)")
        raise ValueError(f"index {where}: manifest.json has no {key!r}, so its costs cannot be split")
    return manifest[key]


def _graph_origins(stages: list[dict[str, Any]]) -> list[str]:
    """The graphs the build made, from its stages (an imported GraphRAG index is origin "import")."""
    built = {row["stage"] for row in stages}
    return [o for stage, (_, o) in _MODEL_FREE_PART.items() if stage in built and o not in ("", "*")]


def _ledger_part(row: dict[str, Any], origins: list[str], where: str) -> tuple[str, str]:
    """The (part, origin) one ledger row paid for."""
    stage, method = row["stage"], str(row["method"])
    if stage in LLM_EXTRACTION_STAGES:
        return "graph", method
    if stage == "community_report":
        return "community_reports", method
    if stage == "index_embeddings":
        if not method:
            return UNLABELLED, ""
        table, _, origin = method.partition(":")
        if table not in _EMBEDDED_PART:
            raise ValueError(f"index {where}: embedding label {method!r} names no embedded table")
        if table != "chunks" and not origin:  # an index with one graph labels its table only
            origin = origins[0] if len(origins) == 1 else ""
        return _EMBEDDED_PART[table], origin
    raise ValueError(f"index {where}: ledger stage {stage!r} belongs to no build stage")


def _origin_rows(index: GraphIndex, table: str) -> dict[str, int]:
    """Rows of `table` per graph origin (relations by their source entity's origin)."""
    entities = index.entities
    if table == "entities":
        origins = entities["origin"]
    else:
        origin_of = dict(zip(entities["entity_id"], entities["origin"], strict=True))
        origins = index.relations["source_id"].map(origin_of)
    return origins.value_counts().to_dict()


def _share(wall: float, weights: dict[tuple[str, str], float], what: str) -> list[tuple[tuple, float, str]]:
    """`wall` split over the weighted keys: (key, share, basis); equal shares when all weigh 0."""
    if len(weights) == 1:
        return [(key, wall, "measured") for key in weights]
    total = sum(weights.values())
    if total <= 0:
        return [(key, wall / len(weights), "apportioned equally (nothing to weigh)") for key in weights]
    return [(key, wall * w / total, f"apportioned by {what}") for key, w in weights.items()]


def stage_costs(index: GraphIndex) -> pd.DataFrame:
    """One row per (build stage, part, origin): its calls, tokens, model and wall time, and how the
    stage's wall time was split (`basis`). The unaggregated form of `part_costs`.
    """
    manifest = index.manifest
    where = manifest.get("config_hash", "(unsaved)")
    stages, ledger = _required(manifest, "stages"), _required(manifest, "ledger")
    origins = _graph_origins(stages)
    paid = pd.DataFrame(
        [
            {
                "stage": _BUILD_STAGE_OF.get(row["stage"], row["stage"]),
                "key": _ledger_part(row, origins, where),
                "calls": row["calls"],
                "live_calls": row["calls"] - row["cached"],
                "prompt_tokens": 0 if row["stage"] == "index_embeddings" else row["prompt_tokens"],
                "completion_tokens": row["completion_tokens"],
                "embedding_tokens": row["prompt_tokens"] if row["stage"] == "index_embeddings" else 0,
                "model_s": row["latency_s"],
            }
            for row in ledger
        ],
        columns=["stage", "key", *AMOUNTS[:-1]],
    )
    rows = []
    for stage in stages:
        name = stage["stage"]
        mine = paid[paid["stage"] == name].groupby("key", sort=False)[AMOUNTS[:-1]].sum()
        if not mine.empty:
            weights, what = mine["model_s"].to_dict(), "ledger latency"
        else:
            made = _MODEL_FREE_PART.get(name)
            if made is None:
                raise ValueError(f"index {where}: build stage {name!r} made no known index part")
            part, origin = made
            served = origins if origin == "*" else [origin]
            counts = _origin_rows(index, _ROWS_OF[name]) if len(served) > 1 else {}
            weights, what = {(part, o): counts.get(o, 0) for o in served}, _ROWS_OF.get(name, "")
        for key, wall, basis in _share(stage["wall_s"], weights, what):
            amounts = (
                mine.loc[[key]].iloc[0].to_dict() if key in mine.index else dict.fromkeys(AMOUNTS[:-1], 0)
            )
            rows.append(
                {
                    "stage": name,
                    "part": key[0],
                    "origin": key[1],
                    **amounts,
                    "wall_s": wall,
                    "basis": _UNLABELLED_BASIS if key[0] == UNLABELLED else basis,
                }
            )
    frame = pd.DataFrame(rows, columns=["stage", *COLUMNS])
    return frame.astype({c: "int64" for c in AMOUNTS[:5]})


def _ordered(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    rank = {"part": PART_ORDER.index, "origin": ORIGIN_ORDER.index}
    return frame.sort_values(keys, key=lambda c: c.map(rank[c.name]) if c.name in rank else c, kind="stable")


def upstream_part(system: str) -> str:
    """The index part an upstream system's own index is (its build is not the kit's)."""
    return f"upstream:{system}"


def upstream_part_costs(builds: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """Per upstream system, what its own index build cost (methods/upstream: the manifest of its
    build, measured by the kit's ledger through the model proxy), as `part_costs` rows.
    """
    rows = []
    for system, build in builds.items():
        ledger = build.get("ledger", {})
        rows.append(
            {
                "part": upstream_part(system),
                "origin": "",
                "calls": ledger.get("calls", 0),
                "live_calls": ledger.get("calls", 0) - ledger.get("cached_calls", 0),
                "prompt_tokens": ledger.get("prompt_tokens", 0),
                "completion_tokens": ledger.get("completion_tokens", 0),
                "embedding_tokens": build.get("embedding_tokens", 0),
                "model_s": build.get("model_s", float("nan")),
                "wall_s": build.get("wall_s", float("nan")),
                "basis": "measured (the system's own build)",
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def part_costs(index: GraphIndex) -> pd.DataFrame:
    """What each part of the index cost its build: one row per (part, origin) with calls, live calls,
    LLM prompt and completion tokens, embedding tokens, model seconds (the ledger's latency), wall
    seconds and the basis of the wall time ("measured", "apportioned by <what>", or for embeddings
    of an index built before they were labelled, "not split: ..."). The columns sum to the
    manifest's totals: its ledger's calls and tokens, its stages' wall time.
    A manifest without `stages` or `ledger`: ValueError naming the index.
    """
    stages = stage_costs(index)

    def bases(values: pd.Series) -> str:
        named = stages.loc[values.index, "stage"]
        unique = dict.fromkeys(zip(named, values, strict=True))
        if len({b for _, b in unique}) == 1:
            return next(iter(unique))[1]
        return "; ".join(f"{stage}: {basis}" for stage, basis in unique)

    frame = stages.groupby(["part", "origin"], sort=False).agg(
        **{a: (a, "sum") for a in AMOUNTS}, basis=("basis", bases)
    )
    return _ordered(frame.reset_index(), ["part", "origin"]).reset_index(drop=True)[COLUMNS]


def uncapped_extraction(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """The projected cost of LLM-extracting every chunk when `index.llm_max_chunks` left some out:
    the cost per attempted chunk (LLM extraction calls, gleaning, claims, summaries; the stage's wall
    time) times all chunks, basis "projected". None when no chunk was skipped.
    """
    note = manifest.get("llm_extraction")
    if not note or not note["skipped_chunk_ids"]:
        return None
    ledger = [r for r in _required(manifest, "ledger") if r["stage"] in LLM_EXTRACTION_STAGES]
    stage = next(s for s in _required(manifest, "stages") if s["stage"] == "extract_llm")
    scale = note["chunks"] / note["attempted_chunks"]
    return {
        "part": "graph",
        "origin": "llm",
        "chunks": note["chunks"],
        "attempted_chunks": note["attempted_chunks"],
        **{k: sum(r[k] for r in ledger) * scale for k in ("calls", "prompt_tokens", "completion_tokens")},
        "model_s": sum(r["latency_s"] for r in ledger) * scale,
        "wall_s": stage["wall_s"] * scale,
        "basis": "projected",
    }


# ---------------------------------------------------------------- re-indexing one document

_WHOLE_GRAPH = {"communities", "date_relations"}  # Leiden and the dating rerun over every relation
_EMBEDDING_PARTS = set(_EMBEDDED_PART.values()) | {UNLABELLED}


def _units(index: GraphIndex) -> dict[str, pd.Series | pd.DataFrame]:
    """Per document, the rows each per-row cost is charged by (columns: origins where per graph)."""
    chunks = index.chunks
    doc_of = dict(zip(chunks["chunk_id"], chunks["doc_id"], strict=True))
    docs = pd.Index(index.documents["doc_id"], name="doc_id")
    skipped = set(index.manifest.get("llm_extraction", {}).get("skipped_chunk_ids", ()))
    per_chunk = chunks["doc_id"].value_counts().reindex(docs, fill_value=0)
    attempted = chunks.loc[~chunks["chunk_id"].isin(skipped), "doc_id"].value_counts()

    def by_origin(ids: pd.Series, origins: pd.Series, members: pd.Series) -> pd.DataFrame:
        """Per document and origin: how many rows have a member from the document's chunks."""
        pairs = {
            (doc_of[c], origin, row_id)
            for row_id, origin, chunk_ids in zip(ids, origins, members, strict=True)
            for c in chunk_ids
            if c in doc_of
        }
        frame = pd.DataFrame(list(pairs), columns=["doc_id", "origin", "row"])
        if frame.empty:
            return pd.DataFrame(index=docs)
        return frame.groupby(["doc_id", "origin"]).size().unstack(fill_value=0).reindex(docs, fill_value=0)

    entities = index.entities
    chunks_of_entity = dict(zip(entities["entity_id"], entities["chunk_ids"], strict=True))
    members = index.communities.set_index("community_id")["entity_ids"].to_dict()
    reports = index.community_reports
    report_chunks = [
        [c for e in members.get(cid, ()) for c in chunks_of_entity.get(e, ())]
        for cid in reports["community_id"]
    ]
    return {
        "chunks": per_chunk,
        "attempted": attempted.reindex(docs, fill_value=0),
        "entities": by_origin(entities["entity_id"], entities["origin"], entities["chunk_ids"]),
        "reports": by_origin(
            reports["community_id"], pd.Series(report_origins(index)), pd.Series(report_chunks)
        ),
    }


def _rule(stage: str, part: str) -> str:
    """What a stage-part's cost is charged by when one document changes."""
    if stage in _WHOLE_GRAPH:
        return "whole"
    if stage == "extract_llm":
        return "attempted"
    if part in ("entity_embeddings",):
        return "entities"
    if part in ("community_reports", "report_embeddings"):
        return "reports"
    if part == UNLABELLED:
        return "embedded"
    return "chunks"


def reindex_costs(index: GraphIndex) -> pd.DataFrame:
    """Per document and (part, origin): what re-indexing that one document costs, computed from the
    build's per-row costs. Per chunk: chunking, NLP extraction, chunk embeddings; per LLM-attempted
    chunk of the document (the build's `index.llm_max_chunks` sample): LLM extraction with its
    gleaning, claims and summaries; per report of an origin: the reports of the reported communities
    holding an entity extracted from the document's chunks, and their embeddings; per entity: the
    embeddings of those entities; in full: the whole-graph stages (communities, date_relations).
    Embedding rows count the label's calls, not a share of them (the changed rows are one call).
    An index embedded before labels charges its unlabelled embeddings per embedded row.
    """
    stages = stage_costs(index)
    units = _units(index)
    entities, reports = units["entities"], units["reports"]
    totals = {
        "chunks": len(index.chunks),
        "attempted": int(units["attempted"].sum()),
        "entities": index.entities["origin"].value_counts().to_dict(),
        "reports": pd.Series(report_origins(index)).value_counts().to_dict(),
    }
    rows = []
    for doc_id in units["chunks"].index:
        chunks = int(units["chunks"][doc_id])
        for row in stages.to_dict("records"):
            rule = _rule(row["stage"], row["part"])
            if rule == "whole":
                mine, total = 1, 1
            elif rule in ("entities", "reports"):
                table = entities if rule == "entities" else reports
                mine = int(table.loc[doc_id, row["origin"]]) if row["origin"] in table.columns else 0
                total = totals[rule].get(row["origin"], 0)
            elif rule == "embedded":  # every embedded row: chunks, entities, reports
                mine = chunks + int(entities.loc[doc_id].sum()) + int(reports.loc[doc_id].sum())
                total = totals["chunks"] + len(index.entities) + len(index.community_reports)
            else:
                mine, total = int(units[rule][doc_id]), totals[rule]
            scale = mine / total if total else 0.0
            amounts = {a: row[a] * scale for a in AMOUNTS if a != "live_calls"}
            if row["part"] in _EMBEDDING_PARTS:
                amounts["calls"] = row["calls"] if mine else 0
            rows.append(
                {
                    "doc_id": doc_id,
                    "part": row["part"],
                    "origin": row["origin"],
                    "chunks": int(units["attempted"][doc_id]) if rule == "attempted" else chunks,
                    **amounts,
                    "basis": REINDEX_BASIS,
                }
            )
    frame = pd.DataFrame(rows, columns=REINDEX_COLUMNS)
    # a graph's LLM rows count its attempted chunks, its model-free rows all its chunks: the fewer
    summed = frame.groupby(["doc_id", "part", "origin"], sort=False).agg(
        chunks=("chunks", "min"), **{a: (a, "sum") for a in REINDEX_COLUMNS[4:-1]}, basis=("basis", "first")
    )
    return _ordered(summed.reset_index(), ["doc_id", "part", "origin"]).reset_index(drop=True)[
        REINDEX_COLUMNS
    ]


def reindex_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (part, origin) of `reindex_costs`: the mean and the max over documents of each amount."""
    amounts = [c for c in REINDEX_COLUMNS if c not in ("doc_id", "part", "origin", "basis")]
    summary = frame.groupby(["part", "origin"], sort=False)[amounts].agg(["mean", "max"])
    summary.columns = [f"{amount}_{stat}" for amount, stat in summary.columns]
    return _ordered(summary.reset_index(), ["part", "origin"]).reset_index(drop=True)
