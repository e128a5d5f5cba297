"""Narrative sentences every report shares: the one failure sentence, the one embedded-model
disclaimer, the data set's warnings, and the setup note of the notebooks that run methods
(worded from their saved `setup` table, `evaluation.task_findings.setup_table`).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ragtrial.report.markdown import escape_markdown


def setup_note(setup: pd.DataFrame, unavailable: pd.DataFrame) -> str:
    """What ran, from the saved `setup` table: methods, baseline (when the experiment has one), k,
    budget, prompt, whether answers are cut to their first line, which methods the index could not
    support (`unavailable`), and (when the table has the retrieval settings) the retrieval choices
    that decide what a method shows.
    """
    first = setup.iloc[0]
    compared = f"; baseline **{first['baseline']}**" if first["baseline"] else ""
    note = (
        f"Methods: {', '.join(setup['method'])}{compared}; k = {first['k']}; context budget "
        f"{first['context_budget']} tokens; prompt `{first['answer_prompt']}`, at most "
        f"{first['answer_max_tokens']} tokens."
    )
    if first.get("first_line_only", False):
        kept_whole = f" (answers to `{first['whole_answer_types']}` questions are kept whole)"
        note += (
            " Each answer is cut to its first line (`first_line_only`), so text after a line break is "
            f"never scored{kept_whole if first['whole_answer_types'] else ''}."
        )
    if "graph_fallback" in setup:
        note += "\n\n" + retrieval_note(setup)
    if not unavailable.empty:
        note += "\n\nNot run, because the index cannot support them: " + "; ".join(
            f"**{m}**: {r}" for m, r in unavailable.itertuples(index=False)
        )
    return note


def retrieval_note(setup: pd.DataFrame) -> str:
    """The retrieval choices behind the methods' context, each named by its settings key."""
    first = setup.iloc[0]
    walked = [f"{r.method} {r.graph_origin}" for r in setup.itertuples(index=False) if r.graph_origin]
    fallback = {"vector": "the vector retrieval", "none": "no context"}[first["graph_fallback"]]
    lines = [
        f"Graph walked (retrieval.graph_origin = {first['retrieval_graph_origin']}): {', '.join(walked)}."
        if walked
        else "No method retrieves from the graph.",
        f"A graph retriever that links no entity shows {fallback} (retrieval.graph_fallback = "
        f"{first['graph_fallback']}); every such question is counted as a fallback.",
        f"Keyword half of hybrid: {first['keyword']} (retrieval.keyword).",
    ]
    if first["naive_rag_fills_budget"]:
        lines.append(
            "naive_rag shows chunks in rank order until the context budget is full, not the top k "
            "(retrieval.naive_rag_fills_budget)."
        )
    return " ".join(lines)


EMBEDDED_MODEL = (
    "the embedded default model, Gemma 3 270M (a base model, not instruction-tuned, quantized to 4 bits)"
)


def embedded_disclaimer(what: str) -> str:
    """The one thing every report on the embedded default says of its model-made numbers."""
    return (
        f"{what} come from {EMBEDDED_MODEL}: they prove that the pipeline runs end to end offline, "
        "and are not research findings."
    )


def failure_sentence(counts: dict[str, str], nothing_failed: str, what_failed: str, handling: str) -> str:
    """The one shape of "what failed and what was done about it": failures are counted, listed in
    the failures table and never scored. `counts`: label -> count text, e.g. {"naive_rag": "2 of 8"}.
    """
    if not counts:
        return nothing_failed
    listed = ", ".join(f"{label} {count}" for label, count in counts.items())
    return f"{what_failed} ({listed}): {handling}; each is listed in the failures table, none is scored."


def data_warnings_note(dataset_name: str, warnings: Sequence[str], shown: int = 5) -> str:
    """The flaws of a published data set that the loader kept as published, counted and named."""
    listed = "; ".join(escape_markdown(w) for w in warnings[:shown])
    more = f"; and {len(warnings) - shown} more" if len(warnings) > shown else ""
    return (
        f"**Data warnings.** The data set {escape_markdown(dataset_name)} has {len(warnings)} flaw(s) "
        f"kept as published (listed in the data_warnings table): {listed}{more}."
    )
