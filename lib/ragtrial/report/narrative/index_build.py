"""What notebook 01 says of an index: where it is and what it holds, the extraction failure
share, the LLM graph's provenance counts, the community reports, and the findings; worded from its
saved tables (`findings`, `index_build`: `evaluation.index_findings`).
"""

from __future__ import annotations

import pandas as pd

from ragtrial.evaluation.findings import FINDINGS_TABLE, stated, stated_count, statements
from ragtrial.evaluation.index_findings import (
    CHUNK_OVERLAP,
    CHUNK_SIZE,
    CHUNKS,
    COVERAGE_LEVEL,
    DOCUMENTS,
    ENDPOINT_ONLY_ENTITIES,
    ENDPOINTS_ADDED,
    GLEANED_ENTITIES,
    GLEANING_ROUNDS,
    LLM_CHUNKS,
    LLM_CHUNKS_READ,
    LLM_EXTRACTION,
    LLM_FAILURES,
    MEDIAN_CHUNK_TOKENS,
    REPORTS,
    REPORTS_SKIPPED,
    SUMMARIES,
)
from ragtrial.report.narrative.narration import Narration, SavedTables, saved
from ragtrial.stats import claim_text


def index_note(build: pd.DataFrame, findings: pd.DataFrame) -> str:
    """Where the index is, whether this run built it, and what it holds (tables `index_build`,
    `findings`).
    """
    b = build.iloc[0]
    built = (
        f"**reused**, built on `{b['built_at']}` by run `{b['built_by_run']}`."
        if b["reused"]
        else f"**built in this run** in {b['wall_s']:.0f} s."
    )
    return (
        f"Index `{b['config_hash']}` at `{b['path']}`: {built}"
        f" Data set `{b['dataset']}`: {stated_count(findings, DOCUMENTS)} documents, "
        f"{stated_count(findings, CHUNKS)} chunks ({b['chunking']} chunking, size "
        f"{stated_count(findings, CHUNK_SIZE)}, overlap {stated_count(findings, CHUNK_OVERLAP)}, median "
        f"{stated(findings, MEDIAN_CHUNK_TOKENS)['value']:.0f} tokens); graph source `{b['graph_source']}`."
    )


def extraction_failed_fact(coverage: pd.DataFrame, findings: pd.DataFrame) -> str:
    """The headline fact: on how many of the chunks it read the LLM extraction failed."""
    failed = coverage[(coverage["origin"] == "llm") & (coverage["measure"] == "extraction failed")].iloc[0]
    level = stated(findings, COVERAGE_LEVEL)["value"]
    return (
        f"LLM extraction failed on {failed['count']} of {failed['of']} chunks read "
        f"({failed['share']:.0%}, {level:.0%} interval {failed['low']:.0%}–{failed['high']:.0%})."
    )


def extraction_headline(coverage: pd.DataFrame, findings: pd.DataFrame) -> str:
    if not stated_count(findings, LLM_EXTRACTION):
        return "No LLM extraction in this index (graph source without an LLM)."
    headline = f"**{extraction_failed_fact(coverage, findings)}** "
    read, chunks = stated_count(findings, LLM_CHUNKS_READ), stated_count(findings, LLM_CHUNKS)
    if read < chunks:
        headline += (
            f"To fit the embedded model's time budget the LLM read a seeded sample of "
            f"{read} of {chunks} chunks (`index.llm_max_chunks`); "
            "the other chunks have no LLM graph by design and are not counted as failures. "
        )
    failures = statements(findings, LLM_FAILURES)
    by_stage = {stage: int(n) for stage, n in zip(failures["subject"], failures["value"], strict=True)}
    return headline + f"Failures by stage: {by_stage or 'none'}."


def llm_graph_note(findings: pd.DataFrame) -> str:
    """How the LLM graph came about: endpoints added as entities, gleaning, description summaries."""

    def summaries(outcome: str) -> int:
        return stated_count(findings, SUMMARIES, outcome)

    return (
        f"LLM graph: {stated_count(findings, ENDPOINTS_ADDED)} relation/claim endpoints were added as "
        f"entities ({stated_count(findings, ENDPOINT_ONLY_ENTITIES)} entities are known only that way); "
        f"{stated_count(findings, GLEANING_ROUNDS)} gleaning rounds added "
        f"{stated_count(findings, GLEANED_ENTITIES)} entities; {summaries('candidates')} elements had "
        "differing descriptions from several chunks, "
        f"{summaries('summarized')} were summarized by the LLM, {summaries('not_summarized')} kept their "
        "joined descriptions (bound `index.max_summaries` or a failed call)."
    )


def reports_note(findings: pd.DataFrame) -> str:
    skipped = statements(findings, REPORTS_SKIPPED)
    by_reason = ", ".join(
        f"{n:.0f} by {r}" for r, n in zip(skipped["subject"], skipped["value"], strict=True)
    )

    def reports(what: str) -> int:
        return stated_count(findings, REPORTS, what)

    return (
        f"{reports('selected')} communities selected: {reports('generated')} reports "
        f"generated, {reports('reused')} reused (same members as a reported community), "
        f"{reports('failed')} failed. Skipped: " + (by_reason or "none") + "."
    )


def _index_findings(tables: SavedTables) -> str:
    """The closing paragraph: extraction failures, recovery of the gold graph per origin, the
    paired LLM-vs-NLP recall difference, and how much of the build was model time.
    """
    findings = saved(tables, FINDINGS_TABLE)
    parts = [
        extraction_failed_fact(saved(tables, "extraction_coverage"), findings)
        if stated_count(findings, LLM_EXTRACTION)
        else "No LLM graph was built."
    ]
    quality = tables.get("gold_graph_scores")
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
    difference = tables.get("relation_recall_difference")
    if difference is not None and len(difference):
        d = difference.iloc[0]
        more = f"the {'LLM' if d['mean_diff'] > 0 else 'NLP'} graph recalls more"
        parts.append(
            f"On the {d['n']} gold relations both extractors read, LLM minus NLP relation recall is "
            f"{d['mean_diff']:+.0%} [{d['ci_low']:+.0%}, {d['ci_high']:+.0%}] (McNemar {d['test']}, "
            f"p={d['p_value']:.3g}): {claim_text(d['ci_low'], d['ci_high'], d['p_value'], more)}."
        )
    build = saved(tables, "index_build").iloc[0]
    parts.append(
        f"The build took {build['wall_s']:.0f} s, {build['model_s']:.0f} s of it waiting for the model."
    )
    return " ".join(parts)


def index_headline(findings: pd.DataFrame, counts: pd.DataFrame, quality: pd.DataFrame | None) -> str:
    """The one line of notebook 01 for the index page: what each graph holds and, on the generated
    corpus, how much of the gold graph's relations it recovers. `counts`: `index.inspect.origin_counts`.
    """
    graphs = "; ".join(
        f"the {r['origin']} graph {r['entities']} entities, {r['relations']} relations, "
        f"{r['communities']} communities"
        for _, r in counts.iterrows()
    )
    documents = stated_count(findings, DOCUMENTS)
    line = (
        f"{documents} document{'' if documents == 1 else 's'} in {stated_count(findings, CHUNKS)} chunks: "
        f"{graphs or 'no graph'}."
    )
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


def narrate(tables: SavedTables) -> Narration:
    """Notebook 01: the headline (what each graph holds, its gold relation recall) and the findings."""
    headline = index_headline(
        saved(tables, FINDINGS_TABLE), saved(tables, "graph_counts"), tables.get("gold_graph_scores")
    )
    return Narration(headline, _index_findings(tables))
