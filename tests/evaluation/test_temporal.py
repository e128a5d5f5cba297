import dataclasses
import json

import pandas as pd
from conftest import make_llm
from methods.test_methods import Run
from retrieval.test_time_window import WINDOWED, walk_index

from ragtrial.config import Settings
from ragtrial.evaluation.run_methods import run_methods
from ragtrial.evaluation.temporal import temporal_checks
from ragtrial.index.tables import GraphIndex
from ragtrial.methods.registry import make_methods
from ragtrial.records import GoldEdge, Question

# Kest Works' chief executives: Ada Lind 2001-2010, then Cal Moor since 2010.
GOLD_ENTITIES = pd.DataFrame(
    {
        "entity_id": ["per-1", "per-2", "org-1"],
        "name": ["Ada Lind", "Cal Moor", "Kest Works"],
        "type": ["person", "person", "organization"],
        "description": "",
        "aliases": [[], [], ["Kest"]],
    }
)
GOLD_RELATIONS = pd.DataFrame(
    {
        "relation_id": ["rel-1", "rel-2"],
        "source_id": ["per-1", "per-2"],
        "target_id": ["org-1", "org-1"],
        "relation": ["ceo_of", "ceo_of"],
        "valid_from": pd.array([2001, 2010], dtype="Int64"),
        "valid_to": pd.array([2010, None], dtype="Int64"),
        "sources": [["A"], ["A"]],
        "doc_ids": [["d0"], ["d0"]],
    }
)
INDEX = GraphIndex(
    entities=pd.DataFrame(
        {
            "entity_id": ["e-ada", "e-cal", "e-kest", "e-vorn"],
            "name": ["Ada Lind", "CEO Cal Moor", "Kest Works", "Vorn"],
            "type": "",
            "description": "",
            "chunk_ids": [[], [], [], []],
            "degree": 1,
            "origin": "nlp",
        }
    ),
    relations=pd.DataFrame(
        {
            "relation_id": ["r-ada", "r-cal", "r-hq"],
            "source_id": ["e-ada", "e-cal", "e-kest"],
            "target_id": ["e-kest", "e-kest", "e-vorn"],
            "description": "",
            "weight": 1.0,
            "chunk_ids": [[], [], []],
            "valid_from": pd.array([2001, 2010, None], dtype="Int64"),
            "valid_to": pd.array([2010, None, None], dtype="Int64"),
        }
    ),
)
QUESTIONS = [
    Question(
        question_id="temporal-000",
        question="Who was the chief executive of Kest Works in 2014?",
        answers=["Cal Moor"],
        question_type="temporal",
        gold_entities=["Cal Moor", "Kest Works"],
        gold_edges=[GoldEdge(source="Cal Moor", relation="ceo_of", target="Kest Works", valid_from=2010)],
        metadata={"kind": "ceo_in_year", "year": 2014},
    ),
    Question(question_id="single_hop-000", question="Where is Kest Works headquartered?", answers=["Vorn"]),
]


def _answers(*rows: tuple[str, str, list[str]], failure: str = "") -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"question_id": q, "method": m, "text": text, "failure": failure, "context_relation_ids": ids}
            for q, (m, text, ids) in zip(["temporal-000"] * len(rows), rows, strict=True)
        ]
    )


def test_respects_violates_and_undetermined():
    answers = pd.concat(
        [
            _answers(
                ("right", "Cal Moor has led it since 2010.", ["r-cal", "r-hq"]),
                ("wrong", "Ada Lind.", ["r-ada", "r-cal"]),
                ("unknown", "Someone else entirely.", []),
            ),
            _answers(("failed", "", ["r-cal"]), failure="timeout"),
            pd.DataFrame(
                [
                    {
                        "question_id": "single_hop-000",
                        "method": "right",
                        "text": "Vorn",
                        "failure": "",
                        "context_relation_ids": ["r-hq"],
                    }
                ]
            ),
        ],
        ignore_index=True,
    )
    checks = temporal_checks(answers, QUESTIONS, INDEX, (GOLD_ENTITIES, GOLD_RELATIONS)).set_index("method")
    assert list(checks["question_id"].unique()) == ["temporal-000"]  # no window: not checked
    assert (checks["window_start"] == 2014).all() and (checks["window_end"] == 2014).all()
    assert checks.loc["right", "answer_respects"] is True
    assert checks.loc["wrong", "answer_respects"] is False  # Ada Lind was chief executive, but not in 2014
    assert checks.loc["unknown", "answer_respects"] is None
    assert checks.loc["failed", "answer_respects"] is None and checks.loc["failed", "failure"] == "timeout"
    # r-hq is undated, so not counted; r-ada ended in 2010.
    assert checks.loc["right", ["dated_relations", "in_window", "out_of_window"]].tolist() == [1, 1, 0]
    assert checks.loc["wrong", ["dated_relations", "in_window", "out_of_window"]].tolist() == [2, 1, 1]
    assert checks.loc["right", "subgraph_respects"] is True
    assert checks.loc["wrong", "subgraph_respects"] is False
    assert checks.loc["unknown", "subgraph_respects"] is None


def test_without_a_gold_graph_a_non_gold_answer_is_undetermined_and_the_text_window_is_used():
    question = QUESTIONS[0].model_copy(update={"metadata": {}})
    answers = _answers(("wrong", "Ada Lind.", ["r-ada"]))
    checks = temporal_checks(answers, [question], INDEX)
    assert checks["answer_respects"].tolist() == [None]
    assert checks[["window_start", "window_end"]].iloc[0].tolist() == [2014, 2014]  # from "in 2014"


def test_relations_mapped_from_shown_passages_are_checked_too():
    """A passage method's context holds the relations extracted from its chunks (retrieved_elements)."""
    answers = _answers(("passages", "Ada Lind.", [])).assign(retrieved_relation_ids=[["r-ada"]])
    checks = temporal_checks(answers, QUESTIONS, INDEX, (GOLD_ENTITIES, GOLD_RELATIONS)).set_index("method")
    assert checks.loc["passages", ["dated_relations", "out_of_window"]].tolist() == [1, 1]


def test_global_search_is_marked_unfiltered_and_a_walk_counts_what_the_window_dropped(scripted, tmp_path):
    """Seed 004 step 3 ("filter during retrieval"), run end to end with the filter on: graph_walk never
    shows Ada Lind's Tarn passage in 2012 and its answer counts the dropped relation; global search
    still shows the report on her 2001-2010 tenure (reports summarise every date) and is marked
    unfiltered (<NA>), never as a filter that dropped nothing.
    """
    index, chunk = walk_index()
    ada = index.entities.loc[index.entities["name"] == "Ada Lind", "entity_id"].iloc[0]
    kest = index.entities.loc[index.entities["name"] == "Kest Works", "entity_id"].iloc[0]
    report = "Ada Lind led Kest Works from 2001 to 2010."
    reports = pd.DataFrame(
        {
            "community_id": ["A"],
            "level": 0,
            "title": ["Kest Works"],
            "summary": "",
            "findings": [[]],
            "rating": 5.0,
            "full_text": [report],
            "entity_ids": [[ada, kest]],
            "chunk_ids": [[]],
        }
    )
    index = dataclasses.replace(index, community_reports=reports)
    scripted.default_reply = lambda body: (
        json.dumps({"points": [{"description": report, "score": 80}]})
        if "response_format" in body
        else "Cal Moor."
    )
    llm = make_llm(scripted.base_url, tmp_path, max_retries=0)
    settings = Settings(retrieval={"time_filter": True})
    question = Question(question_id="t1", question=WINDOWED, answers=["Cal Moor"], question_type="temporal")
    methods, _ = make_methods(["graph_walk", "global_search_c0"], index, Run(settings, llm), settings.qa)
    answers = run_methods(methods, [question]).set_index("method", drop=False)
    assert chunk["Tarn"] not in answers.loc["graph_walk", "context_ids"]
    assert report in answers.loc["global_search_c0", "context_text"]  # the out-of-window tenure is shown
    checks = temporal_checks(answers, [question], index).set_index("method")
    assert checks.loc["graph_walk", "time_filtered"] == 1
    assert pd.isna(checks.loc["global_search_c0", "time_filtered"])
