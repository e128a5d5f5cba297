"""Community report contexts (prominence order, token budget, sub-report substitution) and generation."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
from conftest import make_llm

from ragtrial.config.index import IndexSettings
from ragtrial.index.create_community_reports import (
    Elements,
    community_context,
    context_tokens,
    create_community_reports,
    render_context,
)
from ragtrial.index.tables import SCHEMAS, conform_table, produced_columns
from ragtrial.llm.tokens import count_tokens


def tables(
    entities: dict[str, str], relations: list[tuple[str, str]], claims: list[tuple[str, str]] = ()
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Entities {id: description} (name = id), relations (source, target) with id r<i>, degree from them."""
    degree = {e: sum(e in pair for pair in relations) for e in entities}
    ents = conform_table(
        "entities",
        pd.DataFrame(
            [(e, e, "person", d, [f"chunk-{e}"], degree[e], "llm") for e, d in entities.items()],
            columns=list(SCHEMAS["entities"]),
        ),
    )
    rels = conform_table(
        "relations",
        pd.DataFrame(
            [(f"r{i}", s, t, f"{s} knows {t}", 1.0, []) for i, (s, t) in enumerate(relations, 1)],
            columns=produced_columns("relations"),
        ),
    )
    cls = conform_table(
        "claims",
        pd.DataFrame(
            [(f"k{i}", s, None, "FACT", "TRUE", None, None, d, []) for i, (s, d) in enumerate(claims, 1)],
            columns=list(SCHEMAS["claims"]),
        ),
    )
    return ents, rels, cls


def community(cid: str, level: int, parent: str | None, members: list[str], relations: pd.DataFrame) -> dict:
    inside = [
        r
        for r, s, t in zip(
            relations["relation_id"], relations["source_id"], relations["target_id"], strict=True
        )
        if s in members and t in members
    ]
    return {
        "community_id": cid,
        "level": level,
        "parent_id": parent,
        "entity_ids": members,
        "relation_ids": inside,
        "chunk_ids": [f"chunk-{m}" for m in members],
        "size": len(members),
    }


def frame(*rows: dict) -> pd.DataFrame:
    return conform_table("communities", pd.DataFrame(list(rows), columns=list(SCHEMAS["communities"])))


def test_leaf_context_follows_edge_prominence() -> None:
    ents, rels, cls = tables(
        {"A": "a", "B": "b", "C": "c", "D": "d", "E": "e"},
        [("A", "B"), ("A", "C"), ("A", "D"), ("B", "D")],
        claims=[("C", "c did it")],
    )
    comm = frame(community("0", 0, None, list("ABCDE"), rels)).iloc[0]
    items, substituted = community_context(Elements.of(ents, rels, cls), comm, [], budget=10_000)
    # prominence: r1 A-B 3+2, r3 A-D 3+2, r2 A-C 3+1, r4 B-D 2+2 (ties by id); E has no internal edge
    assert [i.key for i in items] == ["A", "B", "r1", "D", "r3", "C", "k1", "r2", "r4", "E"]
    assert substituted == []
    text = render_context(items)
    assert (
        text.startswith("Entities:\n- A (person): a\n- B (person): b")
        and "Relationships:\n- A -> B: A knows B" in text
    )
    assert "Claims:\n- C [FACT, TRUE]: c did it" in text


@pytest.mark.parametrize("budget", [12, 25, 40, 60, 90])
def test_context_is_the_longest_prefix_within_the_budget(budget: int) -> None:
    ents, rels, cls = tables(
        {e: f"the description of {e} " * 3 for e in "ABCDEF"},
        [("A", "B"), ("B", "C"), ("C", "D"), ("D", "E"), ("E", "F"), ("A", "F")],
    )
    comm = frame(community("0", 0, None, list("ABCDEF"), rels)).iloc[0]
    elements = Elements.of(ents, rels, cls)
    everything = elements.prioritized(list("ABCDEF"), list(comm["relation_ids"]))
    items, _ = community_context(elements, comm, [], budget)
    assert items == everything[: len(items)] and len(items) < len(everything)
    assert count_tokens(render_context(items)) <= context_tokens(items) <= budget
    assert context_tokens(everything[: len(items) + 1]) > budget


def two_children(long_left: bool = True):
    long, short = "a long description " * 12, "short"
    ents, rels, cls = tables(
        {
            "A": long if long_left else short,
            "B": long if long_left else short,
            "C": short,
            "D": short,
            "E": short,
            "F": long if not long_left else short,
        },
        [("A", "B"), ("B", "C"), ("D", "E"), ("E", "F"), ("C", "D")],
    )
    comms = frame(
        community("P", 0, None, list("ABCDEF"), rels),
        community("X", 1, "P", list("ABC"), rels),
        community("Y", 1, "P", list("DEF"), rels),
    )
    return Elements.of(ents, rels, cls), comms


def test_higher_level_substitutes_largest_sub_community_first_until_it_fits() -> None:
    elements, comms = two_children()
    parent, x, y = (comms.iloc[i] for i in range(3))
    children = [(x, "X report: A, B and C"), (y, "Y report: D, E and F")]
    everything = elements.prioritized(list("ABCDEF"), list(parent["relation_ids"]))
    assert community_context(elements, parent, children, 10_000) == (
        everything,
        [],
    )  # all fits: elements only
    budget = context_tokens(everything) - 20
    items, substituted = community_context(elements, parent, children, budget)
    assert substituted == ["X"]  # X holds the long descriptions, so it goes first
    assert items[0].text == "- X report: A, B and C" and context_tokens(items) <= budget
    keys = [i.key for i in items]
    assert {"D", "E", "F", "r4", "r5"} <= set(keys) and not {"A", "B", "C", "r1", "r2"} & set(keys)
    assert "r3" in keys  # C-D crosses the two children, so it stays an element

    items, substituted = community_context(elements, parent, children, budget=30)
    assert substituted == ["X", "Y"] and context_tokens(items) <= 30


def report_reply(body: dict) -> str:
    asked = next(m["content"] for m in body["messages"] if m["role"] == "user")  # a repair round repeats it
    context = asked.rsplit("\nData\n", 1)[1]
    first = re.search(r"^- (\w+) \(", context, re.M)
    sub = re.search(r"^- # (.+)$", context, re.M)
    title = f"About {first.group(1)}" if first else f"Above {sub.group(1)}"
    if "About E" in title:
        return "not json"
    return json.dumps(
        {
            "title": title,
            "summary": "s",
            "rating": 4,
            "rating_explanation": "why",
            "findings": [{"summary": "f", "explanation": "because"}],
        }
    )


def test_reports_are_built_bottom_up_with_failures_reuse_and_skips_listed(scripted, tmp_path) -> None:
    ents, rels, cls = tables(
        {e: "a long description " * 12 for e in "ABCDEFGH"},
        [("A", "B"), ("B", "C"), ("C", "D"), ("E", "F"), ("G", "H")],
    )
    comms = frame(
        community("P", 0, None, list("ABCD"), rels),
        community("X", 1, "P", list("AB"), rels),
        community("Y", 1, "P", list("CD"), rels),
        community("X@2", 2, "X", list("AB"), rels),
        community("Q", 0, None, list("EF"), rels),
        community("R", 0, None, list("GH"), rels),
        community("S", 1, "R", ["G"], rels),
    )
    scripted.default_reply = report_reply
    settings = IndexSettings(
        report_levels=None, max_reports=None, report_context_tokens=60, report_min_size=2
    )
    result = create_community_reports(make_llm(scripted.base_url, tmp_path), ents, rels, cls, comms, settings)
    reports = result.reports.set_index("community_id")
    assert list(reports.index) == ["X@2", "X", "Y", "P", "R"]  # deepest level first; Q failed
    assert reports.loc["X", "title"] == reports.loc["X@2", "title"] == "About A"  # X reuses its copy's report
    assert reports.loc["X", "level"] == 1 and reports.loc["X@2", "level"] == 2
    assert reports.loc["P", "title"] == "Above About A"  # P's context starts with its children's reports
    assert reports.loc["P", "findings"] == [{"summary": "f", "explanation": "because"}]
    assert reports.loc["P", "rating"] == 4.0 and reports.loc["P", "chunk_ids"] == [
        f"chunk-{e}" for e in "ABCD"
    ]
    assert reports.loc["P", "full_text"].startswith("# Above About A\n\ns\n\nRating: 4/10. why\n\n## f")
    assert result.stats["failed"][0]["community_id"] == "Q" and result.stats["failed"][0]["kind"] == "parse"
    assert result.stats["skipped"] == {"size": ["S"]}
    assert (result.stats["generated"], result.stats["reused"]) == (4, 1)
    contexts = {c["community_id"]: c for c in result.stats["contexts"]}
    assert contexts["P"]["context"] == "sub-reports" and contexts["P"]["tokens"] <= 60
    # at concurrency 1 the calls go deepest level first, in community order (Q's repair round too)
    sent = [report_reply(r["body"]) for r in scripted.chat_requests()]
    titles = [json.loads(reply)["title"] if reply != "not json" else "About E" for reply in sent]
    assert titles == ["About A", "About C", "Above About A", "About E", "About E", "About G"]

    bounded = IndexSettings(report_levels=[0], max_reports=1)
    llm = make_llm(scripted.base_url, tmp_path / "b")
    result = create_community_reports(llm, ents, rels, cls, comms, bounded)
    assert list(result.reports["community_id"]) == ["P"]  # the largest level-0 community of the one origin
    assert result.stats["skipped"] == {"level": ["S", "X", "X@2", "Y"], "max_reports": ["Q", "R"]}
