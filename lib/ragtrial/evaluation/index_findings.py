"""Notebook 01's findings, from the index and its manifest (what the build recorded), so that the
report words saved tables only: what the index holds and how it was chunked (`findings`), where it
is and what building it took (`index_build`, one row; its time in the timing columns `wall_s`,
`model_s`), the LLM extraction's and the community reports' counts (`findings`), and the paired
LLM-vs-NLP relation recall difference (`relation_recall_difference`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ragtrial.evaluation.findings import Finding, claim_alpha_finding, findings_table
from ragtrial.index.tables import GraphIndex
from ragtrial.stats import CONFIDENCE, Interval, McNemarResult

DOCUMENTS, CHUNKS, MEDIAN_CHUNK_TOKENS = "documents", "chunks", "median chunk tokens"
CHUNK_SIZE, CHUNK_OVERLAP = "chunk size", "chunk overlap"
COVERAGE_LEVEL = "coverage interval level"
LLM_EXTRACTION = "llm extraction"  # 1 when the index has an LLM extraction record, else 0
LLM_CHUNKS, LLM_CHUNKS_READ = "chunks for the llm", "chunks the llm read"
LLM_FAILURES = "llm failures"  # subject: the stage that failed
ENDPOINTS_ADDED, ENDPOINT_ONLY_ENTITIES = "endpoints added as entities", "entities known only as endpoints"
GLEANING_ROUNDS, GLEANED_ENTITIES = "gleaning rounds", "gleaned entities"
SUMMARIES = "description summaries"  # subject: candidates, summarized, not_summarized
REPORTS = "community reports"  # subject: selected, generated, reused, failed
REPORTS_SKIPPED = "community reports skipped"  # subject: the reason
# The LLM extraction's counts (manifest `llm_extraction`), as statements.
_LLM_COUNTS = {
    LLM_CHUNKS: "chunks",
    LLM_CHUNKS_READ: "attempted_chunks",
    ENDPOINTS_ADDED: "endpoint_instances_added",
    ENDPOINT_ONLY_ENTITIES: "entities_from_endpoints_only",
    GLEANING_ROUNDS: "gleaning_rounds",
    GLEANED_ENTITIES: "gleaned_entities",
}
MANIFEST = "manifest.json"


def index_build_table(index: GraphIndex, shown_path: Path, reused: bool) -> pd.DataFrame:
    """Where the index is (`shown_path`: as the settings name it) and how it came about: reused
    (with when and by which run it was built) or built in this run; its build wall time and the
    model time in it (`wall_s`, `model_s`, timing columns).
    """
    manifest = index.manifest
    index_settings = manifest["settings"]["index"]
    row = {
        "config_hash": manifest["config_hash"],
        "path": str(shown_path),
        "reused": reused,
        # another run's build: when and by which run (this run's own build time is `wall_s`)
        "built_at": manifest["built_at"] if reused else "",
        "built_by_run": manifest["built_by_run"] if reused else "",
        "dataset": manifest["settings"]["dataset"],
        "chunking": index_settings["chunking"],
        "graph_source": index_settings["graph_source"],
        "wall_s": manifest["build_wall_s"],
        "model_s": sum(stage["model_s"] for stage in manifest["stages"]),
    }
    return pd.DataFrame([row])


def index_findings(index: GraphIndex) -> pd.DataFrame:
    """Notebook 01's `findings` table: the index's documents and chunks, its chunk settings, and
    the counts the build's manifest recorded of the LLM extraction and the community reports.
    """
    manifest, chunk_settings = index.manifest, index.manifest["settings"]["index"]
    findings = [
        Finding(DOCUMENTS, "documents in the index", len(index.documents), "index"),
        Finding(CHUNKS, "chunks in the index", len(index.chunks), "index"),
        Finding(MEDIAN_CHUNK_TOKENS, "median tokens per chunk", index.chunks["n_tokens"].median(), "index"),
        Finding(CHUNK_SIZE, "tokens (index.chunk_size)", chunk_settings["chunk_size"], "run.json"),
        Finding(CHUNK_OVERLAP, "tokens (index.chunk_overlap)", chunk_settings["chunk_overlap"], "run.json"),
        Finding(COVERAGE_LEVEL, "confidence of the bootstrap intervals", CONFIDENCE, "extraction_coverage"),
    ]
    llm: dict[str, Any] = manifest.get("llm_extraction") or {}
    findings.append(Finding(LLM_EXTRACTION, "1 if an LLM extraction ran, else 0", bool(llm), MANIFEST))
    if llm:
        findings += [Finding(s, key.replace("_", " "), llm[key], MANIFEST) for s, key in _LLM_COUNTS.items()]
        findings += [
            Finding(LLM_FAILURES, "failed LLM calls", n, MANIFEST, subject=stage)
            for stage, n in llm["failures_by_stage"].items()
        ]
        findings += [
            Finding(SUMMARIES, "elements with differing descriptions", n, MANIFEST, subject=outcome)
            for outcome, n in llm["description_summaries"].items()
        ]
    reports: dict[str, Any] = manifest.get("community_reports") or {}
    if reports:
        findings += [
            Finding(REPORTS, "communities", reports[what], MANIFEST, subject=what)
            for what in ("selected", "generated", "reused")
        ]
        findings.append(Finding(REPORTS, "communities", len(reports["failed"]), MANIFEST, subject="failed"))
        findings += [
            Finding(REPORTS_SKIPPED, "communities skipped", len(ids), MANIFEST, subject=reason)
            for reason, ids in reports["skipped"].items()
        ]
    findings.append(claim_alpha_finding())
    return findings_table(findings)


def recall_difference_table(difference: tuple[Interval, McNemarResult] | None) -> pd.DataFrame:
    """The paired LLM-minus-NLP relation recall difference (`index.inspect.relation_recall_difference`)
    as one row: gold relations both read, the mean difference and its interval, McNemar's test and
    p-value; no row without both graphs.
    """
    columns = ["n", "mean_diff", "ci_low", "ci_high", "test", "p_value"]
    if difference is None:
        return pd.DataFrame(columns=columns)
    d, test = difference
    return pd.DataFrame([(d.n, d.mean, d.low, d.high, test.method, test.p_value)], columns=columns)
