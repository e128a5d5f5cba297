"""`ragtrial estimate` plans a method's model calls from its registry entry alone: a map-reduce
method's map calls and a routing method's routing call follow its metadata, not its name.
"""

from __future__ import annotations

from ragtrial.config.methods import QASettings
from ragtrial.config.settings import Settings
from ragtrial.evaluation.run_methods import planned_answers
from ragtrial.methods import registry
from ragtrial.registry import Registry


def stages(methods: list[str]) -> set[tuple[str, str]]:
    return {(plan.method, plan.stage) for plan in planned_answers(methods, 4, QASettings(), Settings())}


def test_map_and_route_calls_follow_the_method_metadata(monkeypatch):
    planned = stages(["selection", "ts", "naive_rag"])
    assert {("selection", "route"), ("ts", "map")} <= planned
    assert {stage for method, stage in planned if method == "naive_rag"} == {"answer"}

    copy: Registry = Registry("method")
    for name in registry.METHODS:
        entry = registry.METHODS.entry(name)
        copy.add(name, entry.target, entry.description, **entry.metadata)
    copy.add("routed_ts", lambda name, kit: None, "a new method", family="passages", index_parts=("chunks",),
             map_reduce=True, route_prompt="route_question")  # fmt: skip
    monkeypatch.setattr(registry, "METHODS", copy)
    assert {stage for method, stage in stages(["routed_ts"]) if method == "routed_ts"} == {
        "answer",
        "route",
        "map",
    }


def test_a_method_plans_the_listing_of_the_retriever_it_is_built_on():
    """kg_triplets_text retrieves with the kg_triplets retriever, which lists each question's entities
    (its second listing comes from the cache, still a call made: `paper_rag_vs_graphrag` at its stated
    size made 500 listings per run where 400 were planned, issue 36).
    """
    settings = Settings.model_validate({"retrieval": {"entity_source": "llm"}})
    plans = planned_answers(["kg_triplets", "kg_triplets_text"], 4, QASettings(), settings)
    listed = {plan.method: plan.calls for plan in plans if plan.stage == "question_entities"}
    assert listed == {"kg_triplets": 4, "kg_triplets_text": 4}
