"""GraphRAG paper (seed 002) conditions of global search, run on the scripted server or on GraphRAG's
own published index: C1-C3 project the level above where a branch has no sub-communities (4.1.2),
and the paper batches send an answer cap that is not the paper's length limit.
"""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest
from conftest import PROJECT_ROOT, SHARED_DATASETS, make_llm
from methods.test_methods import QUESTION, Run, user_text
from retrieval.test_retrieval import graph_index

from ragtrial.config import Settings
from ragtrial.config.batch import load_batch
from ragtrial.index.community_levels import level_communities, levels_mapped
from ragtrial.index.create_communities import create_communities
from ragtrial.index.import_graphs import import_graphrag_output
from ragtrial.methods.registry import GLOBAL_LEVELS, make_methods
from ragtrial.records import Question

CAROL = SHARED_DATASETS / "graphrag_examples" / "a_christmas_carol_index" / "output"


def two_branch_index():
    """Root A splits into A1 and A2 at C1; root B never splits: C1 and deeper must project B, and C2
    (no community splits that far) projects all three.
    """
    index = graph_index(
        [("Alvor", "Beilun"), ("Cairdo", "Durmask"), ("Evran", "Fenno")],
        {"c1": ["Alvor", "Beilun"], "c2": ["Cairdo", "Durmask"], "c3": ["Evran", "Fenno"]},
    )
    members = {
        "A": ["e-Alvor", "e-Beilun", "e-Cairdo", "e-Durmask"],
        "B": ["e-Evran", "e-Fenno"],
        "A1": ["e-Alvor", "e-Beilun"],
        "A2": ["e-Cairdo", "e-Durmask"],
    }
    ids = list(members)
    communities = pd.DataFrame(
        {
            "community_id": ids,
            "level": [0, 0, 1, 1],
            "parent_id": [None, None, "A", "A"],
            "entity_ids": list(members.values()),
            "relation_ids": [[] for _ in ids],
            "chunk_ids": [[] for _ in ids],
            "size": [len(m) for m in members.values()],
        }
    )
    reports = pd.DataFrame(
        {
            "community_id": ids,
            "level": [0, 0, 1, 1],
            "title": ids,
            "summary": "",
            "findings": [[] for _ in ids],
            "rating": 5.0,
            "full_text": [f"Report of community {c}." for c in ids],
            "entity_ids": list(members.values()),
            "chunk_ids": [[] for _ in ids],
        }
    )
    return dataclasses.replace(index, communities=communities, community_reports=reports)


def asked_of(method: str) -> Question:
    """A question per method: the same request would replay from the response cache, unsent."""
    return QUESTION.model_copy(update={"question": f"What does {method} see?"})


def map_reply(body: dict) -> str:
    if "response_format" not in body:
        return "An answer."
    return json.dumps({"points": [{"description": "A point.", "score": 50}]})


def test_a_deeper_level_maps_the_branch_that_stopped_splitting_above_it(scripted, tmp_path):
    scripted.default_reply = map_reply
    llm = make_llm(scripted.base_url, tmp_path, max_retries=0)
    settings = Settings(methods={"map_budget": 8})  # one report per map call
    index = two_branch_index()
    names = [f"global_search_c{n}" for n in GLOBAL_LEVELS]
    methods, unavailable = make_methods(names, index, Run(settings, llm), settings.claims)
    assert unavailable.empty  # C2 and C3 have no communities of their own, yet they are run
    mapped = {}
    for method in methods:
        before = len(scripted.chat_requests())
        method.answer(asked_of(method.name))
        maps = [r for r in scripted.chat_requests()[before:] if "response_format" in r["body"]]
        mapped[method.name] = sorted(
            c for r in maps for c in "A B A1 A2".split() if f"Report of community {c}." in user_text(r)
        )
    assert mapped == {
        "global_search_c0": ["A", "B"],
        "global_search_c1": ["A1", "A2", "B"],  # B stands in at C1
        "global_search_c2": ["A1", "A2", "B"],
        "global_search_c3": ["A1", "A2", "B"],
    }
    levels = levels_mapped(index.communities, index.community_reports, GLOBAL_LEVELS)
    assert levels.to_dict("records") == [
        {"level": 0, "communities": 2, "native": 2, "projected": 0, "reported": 2},
        {"level": 1, "communities": 3, "native": 2, "projected": 1, "reported": 3},
        {"level": 2, "communities": 3, "native": 0, "projected": 3, "reported": 3},
        {"level": 3, "communities": 3, "native": 0, "projected": 3, "reported": 3},
    ]


def test_a_kit_copy_of_an_unsplit_cluster_counts_as_projected():
    # the kit carries an unsplit cluster down as "<cluster>@<level>" with its parent's members
    index = graph_index(
        [(f"N{i}", f"N{j}") for i in range(12) for j in range(i + 1, 12) if (i < 6) == (j < 6)]
        + [("N0", "N6"), ("P", "Q")],
        {"c1": ["N0"]},
    )
    communities = create_communities(index.entities, index.relations, max_cluster_size=4)
    table = levels_mapped(communities, communities.assign(level=communities["level"]), range(4))
    for level in range(4):
        chosen = level_communities(communities, level).merge(communities[["community_id", "entity_ids"]])
        covered = [e for members in chosen["entity_ids"] for e in members]
        assert sorted(covered) == sorted(index.entities["entity_id"])  # each level partitions them all
        copies = chosen[chosen["community_id"].str.contains("@")]
        assert chosen.set_index("community_id").loc[copies["community_id"], "projected"].all()
    assert (table["communities"] == table["native"] + table["projected"]).all()


@pytest.mark.skipif(not CAROL.is_dir(), reason="GraphRAG's published Christmas Carol index is not present")
def test_graphrags_christmas_carol_levels_are_native_plus_projected(scripted, tmp_path):
    index = import_graphrag_output(CAROL)
    levels = levels_mapped(index.communities, index.community_reports, GLOBAL_LEVELS)
    # GraphRAG's own levels hold 23, 65, 32 and 2 communities; the branches that stop splitting above
    # a level stand in for it, so every level partitions the same 504 clustered entities
    assert list(levels["native"]) == [23, 65, 32, 2]
    assert list(levels["projected"]) == [0, 11, 65, 96]
    assert (levels["communities"] == levels["native"] + levels["projected"]).all()
    for level in GLOBAL_LEVELS:
        chosen = level_communities(index.communities, level).merge(
            index.communities[["community_id", "entity_ids"]]
        )
        covered = [e for members in chosen["entity_ids"] for e in members]
        assert len(covered) == len(set(covered)) == 504
    llm = make_llm(scripted.base_url, tmp_path, max_retries=0)
    settings = Settings()
    names = [f"global_search_c{n}" for n in GLOBAL_LEVELS]
    methods, unavailable = make_methods(names, index, Run(settings, llm), settings.claims)
    assert unavailable.empty
    # what each condition maps: every report of its level, native and projected (no model call needed)
    assert [sum(len(b) for b in m.batches) for m in methods] == list(levels["reported"]) == [23, 76, 97, 98]


@pytest.mark.parametrize(
    ("params", "section"),
    [("params/paper_claims.yaml", "claims"), ("params/paper_graphrag_experiment1.yaml", "judge")],
)
def test_the_graphrag_paper_batches_send_graphrags_reply_budget_and_an_uncapped_map(
    params, section, scripted, tmp_path
):
    """The paper states no answer length: the answer request carries GraphRAG's own reduce reply budget
    (2,000 tokens), not a tighter cap; the map request asks for every point (no maxItems).
    """
    (spec,) = load_batch(PROJECT_ROOT / params, {"llm": {"base_url": scripted.base_url}})[0]
    settings = spec.settings
    scripted.default_reply = map_reply
    llm = make_llm(scripted.base_url, tmp_path, max_retries=0)
    answer_settings = getattr(settings, section)
    methods, _ = make_methods(
        ["global_search_c0", "ts"], two_branch_index(), Run(settings, llm), answer_settings
    )
    for method in methods:
        assert method.answer(asked_of(method.name)).failure == ""
    requests = scripted.chat_requests()
    answers = [r["body"] for r in requests if "response_format" not in r["body"]]
    maps = [r["body"] for r in requests if "response_format" in r["body"]]
    assert [a["max_tokens"] for a in answers] == [2000, 2000]
    assert maps and all("maxItems" not in json.dumps(m["response_format"]) for m in maps)
    assert all("at most" not in m["messages"][-1]["content"] for m in maps)
