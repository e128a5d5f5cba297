"""Index build orchestration: data set -> chunks -> graph(s) -> communities -> reports -> embeddings.

`build_index` runs the stages that `settings.index` asks for, times each one, and saves the result
to `<store_path>/<config hash>/`. The hash covers everything that changes the tables: the index
settings, the documents' fingerprint, the LLM and embedding models, the prompt versions and, for
imports, the imported files' bytes; so any notebook asking for the same index finds it
(`load_or_build_index`), and a rebuild replays the response cache into identical tables.

`graph_source: both` keeps the NLP graph and the LLM graph side by side in one index: entity,
relation and claim ids are prefixed with their origin (`nlp:`, `llm:`), nothing merges across the
two, and since Leiden communities are connected, every community belongs to one origin.
`select_origin` cuts one graph out of such an index.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ragtrial import stats
from ragtrial.community_reports import generate_reports
from ragtrial.config import DataSettings, IndexSettings, ParamsError
from ragtrial.extraction import PROMPTS as EXTRACTION_PROMPTS
from ragtrial.extraction import extract_llm_graph
from ragtrial.graph import (
    build_communities,
    extract_nlp_graph,
    import_graphrag_output,
    import_openie,
    normalize_name,
)
from ragtrial.index import (
    EMBEDDINGS,
    GraphIndex,
    chunk_documents,
    config_hash,
    documents_as_chunks,
    embed_index,
    empty_tables,
    fingerprint_documents,
)
from ragtrial.ledger import by_stage
from ragtrial.prompts import load_prompt
from ragtrial.records import Dataset
from ragtrial.runner import RunContext

ORIGINS = ("nlp", "llm", "import")


def load_experiment_dataset(data: DataSettings) -> Dataset:
    """The data set the settings name: the generated corpus, or a real one through ragtrial.data."""
    if data.dataset == "generated":
        from ragtrial.synthetic import generate_corpus

        return generate_corpus(data.size, data.seed)[0]
    if not data.path:
        raise ParamsError(f"key 'data.path': required for data set {data.dataset!r}")
    from ragtrial.data import load_dataset

    return load_dataset(
        data.dataset,
        data.path,
        limit_questions=data.limit_questions,
        limit_documents=data.limit_documents,
        seed=data.seed,
        **data.options,
    )


# ---------------------------------------------------------------- identity of an index


def _imports_graphrag(settings: IndexSettings) -> bool:
    return settings.graph_source == "import" and Path(settings.import_path or "").is_dir()


def _files_fingerprint(path: Path) -> str:
    files = sorted(path.rglob("*.parquet")) if path.is_dir() else [path]
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.name.encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()


def index_identity(ctx: RunContext, dataset: Dataset, settings: IndexSettings) -> dict[str, Any]:
    """Everything the index tables depend on; its hash names the index folder."""
    if settings.graph_source == "import" and not (
        settings.import_path and Path(settings.import_path).exists()
    ):
        raise ParamsError(
            f"key 'index.import_path': graph_source 'import' needs an existing GraphRAG output "
            f"folder or OpenIE file, got {settings.import_path!r}"
        )
    prompts = list(EXTRACTION_PROMPTS) if settings.graph_source in ("llm", "both") else []
    if settings.reports == "llm" and not _imports_graphrag(settings):
        prompts.append("community_report")
    llm = ctx.settings.llm
    return {
        "index": settings.model_dump(mode="json", exclude={"store_path"}),
        "dataset": dataset.name,
        "documents": fingerprint_documents(dataset.documents_frame()),
        "imported_files": _files_fingerprint(Path(settings.import_path)) if settings.import_path else None,
        "llm": {
            "model": llm.model,
            "temperature": llm.temperature,
            "top_p": llm.top_p,
            "seed": llm.seed,
            "json_mode": llm.json_mode,
        }
        if prompts
        else None,
        "embeddings": ctx.settings.embeddings.model,
        "prompts": [load_prompt(p).tag for p in prompts],
    }


def index_path(ctx: RunContext, dataset: Dataset, settings: IndexSettings | None = None) -> Path:
    settings = settings or ctx.settings.index
    return Path(settings.store_path) / config_hash(index_identity(ctx, dataset, settings))


# ---------------------------------------------------------------- stages


class _Stages:
    """Wall time per build stage, and the model time (live-call latency in the ledger) inside it."""

    def __init__(self, ctx: RunContext):
        self.ctx = ctx
        self.first_row = len(ctx.ledger.frame())
        self.times: list[dict[str, Any]] = []  # in build order (a JSON list keeps it)

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        rows_before, started = len(self.ctx.ledger.frame()), time.perf_counter()
        yield
        calls = self.ctx.ledger.frame().iloc[rows_before:]
        live = calls[~calls["cached"].astype(bool)]
        self.times.append(
            {
                "stage": name,
                "wall_s": round(time.perf_counter() - started, 3),
                "model_s": round(float(live["latency_s"].sum()), 3),
                "calls": len(calls),
                "live_calls": len(live),
            }
        )

    def ledger(self) -> list[dict[str, Any]]:
        return by_stage(self.ctx.ledger.frame().iloc[self.first_row :]).to_dict("records")


def _namespaced(origin: str, tables: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Ids prefixed with the origin, so two graphs that name the same things stay apart."""

    def tag(values: pd.Series) -> list[Any]:
        return [None if v is None else f"{origin}:{v}" for v in values]

    entities, relations, claims = tables["entities"], tables["relations"], tables["claims"]
    return {
        "entities": entities.assign(entity_id=tag(entities["entity_id"])),
        "relations": relations.assign(
            relation_id=tag(relations["relation_id"]),
            source_id=tag(relations["source_id"]),
            target_id=tag(relations["target_id"]),
        ),
        "claims": claims.assign(
            claim_id=tag(claims["claim_id"]),
            subject_id=tag(claims["subject_id"]),
            object_id=tag(claims["object_id"]),
        ),
    }


def _graphs(
    ctx: RunContext,
    s: IndexSettings,
    documents: pd.DataFrame,
    chunks: pd.DataFrame,
    stage: _Stages,
    notes: dict[str, Any],
) -> dict[str, pd.DataFrame]:
    """Entities, relations, claims and extraction failures of the configured source(s)."""
    empty = empty_tables()
    graphs: dict[str, dict[str, pd.DataFrame]] = {}
    failures = [empty["extraction_failures"]]
    if s.graph_source in ("nlp", "both"):
        with stage("extract_nlp"):
            entities, relations = extract_nlp_graph(chunks, cooccurrence=s.nlp_cooccurrence)
        graphs["nlp"] = {"entities": entities, "relations": relations, "claims": empty["claims"]}
    if s.graph_source in ("llm", "both"):
        with stage("extract_llm"):
            llm = extract_llm_graph(ctx.llm, chunks, s)
        graphs["llm"] = {"entities": llm.entities, "relations": llm.relations, "claims": llm.claims}
        failures.append(llm.failures)
        notes["llm_extraction"] = llm.stats
    if s.graph_source == "import":
        with stage("import"):
            entities, relations, failed = import_openie(s.import_path, documents, chunks)
        graphs["import"] = {"entities": entities, "relations": relations, "claims": empty["claims"]}
        failures.append(failed)
    if len(graphs) > 1:
        graphs = {origin: _namespaced(origin, tables) for origin, tables in graphs.items()}
    merged = {
        t: pd.concat([g[t] for g in graphs.values()], ignore_index=True)
        for t in ("entities", "relations", "claims")
    }
    return {**merged, "extraction_failures": pd.concat(failures, ignore_index=True)}


def build_index(ctx: RunContext, dataset: Dataset, settings: IndexSettings | None = None) -> GraphIndex:
    """Build the index the settings describe and save it under `<store_path>/<config hash>/`."""
    s = settings or ctx.settings.index
    identity = index_identity(ctx, dataset, s)
    stage = _Stages(ctx)
    started = time.perf_counter()
    notes: dict[str, Any] = {}
    if _imports_graphrag(s):
        with stage("import"):
            index = import_graphrag_output(s.import_path)
        notes["imported_from"] = s.import_path
    else:
        with stage("chunk"):
            documents = dataset.documents_frame()
            chunks = (
                documents_as_chunks(documents)
                if s.chunking == "documents"
                else chunk_documents(documents, s.chunk_size, s.chunk_overlap)
            )
        tables = _graphs(ctx, s, documents, chunks, stage, notes)
        with stage("communities"):
            communities = build_communities(
                tables["entities"], tables["relations"], max_cluster_size=s.max_cluster_size, seed=s.seed
            )
        index = GraphIndex(documents=documents, chunks=chunks, communities=communities, **tables)
        if s.reports == "llm":
            with stage("community_reports"):
                result = generate_reports(
                    ctx.llm, index.entities, index.relations, index.claims, communities, s
                )
            index = dataclasses.replace(index, community_reports=result.reports)
            notes["community_reports"] = result.stats
    with stage("embeddings"):
        index = embed_index(index, lambda texts: ctx.embedder.embed(texts, stage="index_embeddings"))
    manifest = {
        "settings": identity,
        "data_settings": ctx.settings.data.model_dump(mode="json"),
        "built_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "built_by_run": ctx.run_id,
        "build_wall_s": round(time.perf_counter() - started, 3),
        "stages": stage.times,
        "ledger": stage.ledger(),
        **notes,
    }
    saved = dataclasses.replace(index, manifest=manifest).save(Path(s.store_path) / config_hash(identity))
    return GraphIndex.load(saved)  # exactly what a later load_or_build_index returns, full manifest included


def load_or_build_index(
    ctx: RunContext, dataset: Dataset, settings: IndexSettings | None = None
) -> GraphIndex:
    """The saved index for these settings and data if there is one, else a fresh build."""
    settings = settings or ctx.settings.index
    path = index_path(ctx, dataset, settings)
    if (path / "manifest.json").is_file():
        return GraphIndex.load(path)
    return build_index(ctx, dataset, settings)


# ---------------------------------------------------------------- reading an index


def select_origin(index: GraphIndex, origin: str) -> GraphIndex:
    """The part of the index extracted by one source (its entities, the relations, claims,
    communities and reports among them, and their embedding rows); chunks and documents stay.
    """
    keep = (index.entities["origin"] == origin).to_numpy()
    ids = set(index.entities.loc[keep, "entity_id"])
    rel = index.relations["source_id"].isin(ids).to_numpy()
    communities = index.communities[
        np.array([len(e) > 0 and e[0] in ids for e in index.communities["entity_ids"]], dtype=bool)
    ]
    rep = index.community_reports["community_id"].isin(set(communities["community_id"])).to_numpy()

    def rows(attr: str, mask: np.ndarray) -> np.ndarray | None:
        array = getattr(index, attr)
        return None if array is None else array[mask]

    return dataclasses.replace(
        index,
        entities=index.entities[keep],
        relations=index.relations[rel],
        claims=index.claims[index.claims["subject_id"].isin(ids)],
        communities=communities,
        community_reports=index.community_reports[rep],
        entity_embeddings=rows(EMBEDDINGS["entities"][0], keep),
        report_embeddings=rows(EMBEDDINGS["community_reports"][0], rep),
    )


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
    ci = stats.bootstrap_mean_ci(hits.astype(float))
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
