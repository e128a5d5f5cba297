"""Seed 003's answer-entity coverage in words (notebooks 04 and 13), from the saved
`answer_entities_in_kg` and `answer_entities_published` tables alone.
"""

from __future__ import annotations

import pandas as pd

from ragtrial.evaluation.answer_entities import ALL_TYPES
from ragtrial.report.narrative.narration import SavedTables


def answer_entities_paragraph(tables: SavedTables) -> str:
    """How many gold-answer entities each graph holds (all question types), answers naming no entity
    counted apart, with the published shares beside it, said to be on the same or on other data; ""
    for a run saved before the table existed.
    """
    if "answer_entities_in_kg" not in tables:
        return ""
    coverage = tables["answer_entities_in_kg"]
    rows = coverage[coverage["question_type"] == ALL_TYPES]
    if rows.empty:
        return "Answer entities in the knowledge graph: the index holds no entity graph, so none is counted."
    parts = []
    for r in rows.itertuples(index=False):
        apart = f" ({r.no_entity_reasons}; counted apart, not as missing)" if r.no_entity else ""
        if not r.answer_entities:
            parts.append(
                f"for the `{r.graph}` graph, none of the {r.questions} questions has a gold answer that "
                f"names an entity{apart}"
            )
            continue
        parts.append(
            f"the `{r.graph}` graph holds {r.in_kg_exact} of the {r.answer_entities} gold answers that "
            f"name an entity by exact normalized name ({r.share_in_kg:.1%}), {r.in_kg_embedding} more only "
            f"by an embedding link ({r.share_linked:.1%} linked), and lacks {r.not_in_kg}; "
            f"{r.no_entity} of the {r.questions} answers name no entity{apart}"
        )
    text = (
        "Answer entities in the knowledge graph (the retrievers' linker on the gold answers): "
        + "; ".join(parts)
        + "."
    )
    published = tables.get("answer_entities_published", pd.DataFrame())
    if published.empty:
        return text
    figures = ", ".join(
        f"{p.published:.1%} on {p.published_dataset}" + (" (this data set)" if p.same_data_set else "")
        for p in published.itertuples(index=False)
    )
    first = published.iloc[0]
    return text + (
        f" Published beside it: {figures} for the {first['kg']} of `{first['paper']}` "
        f"(`{first['source']}, {first['section']}`; {first['note']}). "
        + (
            "Another graph and sample: set beside this run's share, not tested against it."
            if published["same_data_set"].any()
            else "Other data sets and another graph: set beside this run's share, not compared with it."
        )
    )
