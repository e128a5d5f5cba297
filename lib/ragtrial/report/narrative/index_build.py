"""What notebook 01 says of an index: where it is and what it holds, the extraction failure
share, the LLM graph's provenance counts, the community reports, and the findings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ragtrial.index.tables import GraphIndex
from ragtrial.stats import Interval, McNemarResult, claim_text


def index_note(index: GraphIndex, path: Path, reused: bool) -> str:
    manifest = index.manifest
    s = manifest["settings"]["index"]
    built = (
        f"**reused**, built on {manifest['built_at']} by run `{manifest['built_by_run']}`."
        if reused
        else f"**built in this run** in {manifest['build_wall_s']:.0f} s."
    )
    return (
        f"Index `{manifest['config_hash']}` at `{path}`: {built}"
        f" Data set `{manifest['settings']['dataset']}`: {len(index.documents)} documents, "
        f"{len(index.chunks)} chunks ({s['chunking']} chunking, size {s['chunk_size']}, overlap "
        f"{s['chunk_overlap']}, median {index.chunks['n_tokens'].median():.0f} tokens); graph source "
        f"`{s['graph_source']}`."
    )


def extraction_failed_fact(coverage: pd.DataFrame) -> str:
    """The headline fact: on how many of the chunks it read the LLM extraction failed."""
    failed = coverage[(coverage["origin"] == "llm") & (coverage["measure"] == "extraction failed")].iloc[0]
    return (
        f"LLM extraction failed on {failed['count']} of {failed['of']} chunks read "
        f"({failed['share']:.0%}, 95% interval {failed['low']:.0%}–{failed['high']:.0%})."
    )


def extraction_headline(coverage: pd.DataFrame, llm_stats: dict[str, Any] | None) -> str:
    if not llm_stats:
        return "No LLM extraction in this index (graph source without an LLM)."
    headline = f"**{extraction_failed_fact(coverage)}** "
    if llm_stats["skipped_chunk_ids"]:
        headline += (
            f"To fit the embedded model's time budget the LLM read a seeded sample of "
            f"{llm_stats['attempted_chunks']} of {llm_stats['chunks']} chunks (`index.llm_max_chunks`); "
            "the other chunks have no LLM graph by design and are not counted as failures. "
        )
    return headline + f"Failures by stage: {llm_stats['failures_by_stage'] or 'none'}."


def llm_graph_note(llm_stats: dict[str, Any]) -> str:
    """How the LLM graph came about: endpoints added as entities, gleaning, description summaries."""
    summaries = llm_stats["description_summaries"]
    return (
        f"LLM graph: {llm_stats['endpoint_instances_added']} relation/claim endpoints were added as "
        f"entities ({llm_stats['entities_from_endpoints_only']} entities are known only that way); "
        f"{llm_stats['gleaning_rounds']} gleaning rounds added {llm_stats['gleaned_entities']} entities; "
        f"{summaries['candidates']} elements had differing descriptions from several chunks, "
        f"{summaries['summarized']} were summarized by the LLM, {summaries['not_summarized']} kept their "
        "joined descriptions (bound `index.max_summaries` or a failed call)."
    )


def reports_note(report_stats: dict[str, Any]) -> str:
    skipped = {reason: len(ids) for reason, ids in report_stats["skipped"].items()}
    return (
        f"{report_stats['selected']} communities selected: {report_stats['generated']} reports "
        f"generated, {report_stats['reused']} reused (same members as a reported community), "
        f"{len(report_stats['failed'])} failed. Skipped: "
        + (", ".join(f"{n} by {reason}" for reason, n in skipped.items()) or "none")
        + "."
    )


def index_findings(
    manifest: dict[str, Any],
    coverage: pd.DataFrame,
    quality: pd.DataFrame | None,
    recall_difference: tuple[Interval, McNemarResult] | None,
) -> str:
    """The closing paragraph: extraction failures, recovery of the gold graph per origin, the
    paired LLM-vs-NLP recall difference, and how much of the build was model time.
    """
    parts = [
        extraction_failed_fact(coverage) if manifest.get("llm_extraction") else "No LLM graph was built."
    ]
    if quality is not None:
        q = quality.set_index(["origin", "measure"])

        def share(origin: str, measure: str) -> str:
            row = q.loc[(origin, measure)]
            return (
                "n/a"
                if pd.isna(row["share"])
                else f"{row['share']:.0%} [{row['low']:.0%}, {row['high']:.0%}]"
            )

        for origin in q.index.get_level_values(0).unique():
            parts.append(
                f"The {origin} graph recovers {share(origin, 'entity recall')} of the gold entities and "
                f"{share(origin, 'relation recall')} of the gold relations it could see; "
                f"{share(origin, 'entity precision')} of its entities and "
                f"{share(origin, 'relation precision')} of its relations are in the gold graph."
            )
    if recall_difference is not None:
        d, test = recall_difference
        more = f"the {'LLM' if d.mean > 0 else 'NLP'} graph recalls more"
        parts.append(
            f"On the {d.n} gold relations both extractors read, LLM minus NLP relation recall is "
            f"{d.mean:+.0%} [{d.low:+.0%}, {d.high:+.0%}] (McNemar {test.method}, p={test.p_value:.3g}): "
            f"{claim_text(d.low, d.high, test.p_value, more)}."
        )
    model_s = sum(row["model_s"] for row in manifest["stages"])
    parts.append(
        f"The build took {manifest['build_wall_s']:.0f} s, {model_s:.0f} s of it waiting for the model."
    )
    return " ".join(parts)


def index_headline(index: GraphIndex, counts: pd.DataFrame, quality: pd.DataFrame | None) -> str:
    """The one line of notebook 01 for the index page: what each graph holds and, on the generated
    corpus, how much of the gold graph's relations it recovers. `counts`: `index.inspect.origin_counts`.
    """
    graphs = "; ".join(
        f"the {r['origin']} graph {r['entities']} entities, {r['relations']} relations, "
        f"{r['communities']} communities"
        for _, r in counts.iterrows()
    )
    documents = f"{len(index.documents)} document{'' if len(index.documents) == 1 else 's'}"
    line = f"{documents} in {len(index.chunks)} chunks: {graphs or 'no graph'}."
    if quality is not None:
        recall = quality[quality["measure"] == "relation recall"]
        line += (
            " Gold relations recovered: "
            + ", ".join(
                f"{r['origin']} {r['share']:.0%} [{r['low']:.0%}, {r['high']:.0%}]"
                if pd.notna(r["share"])
                else f"{r['origin']} n/a"
                for _, r in recall.iterrows()
            )
            + "."
        )
    return line
