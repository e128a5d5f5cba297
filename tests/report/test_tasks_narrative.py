"""Notebooks 04 and 05: the findings table and the setup table computed from run frames, and the
narrative worded from the saved tables alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ragtrial.config.methods import QASettings
from ragtrial.config.retrieval import RetrievalSettings
from ragtrial.evaluation.findings import stated, statements
from ragtrial.evaluation.run_methods import fallback_table
from ragtrial.evaluation.task_findings import setup_table, task_findings
from ragtrial.report.narrative.common import setup_note
from ragtrial.report.narrative.tasks import narrate_qa, narrate_summarization


@dataclass
class FakeMethod:
    name: str
    graph_origin: str = ""
    routes: dict = field(default_factory=dict)


RAG, GRAPH = FakeMethod("naive_rag"), FakeMethod("graph_walk", "nlp")
METHODS = [RAG, GRAPH, FakeMethod("selection", "nlp", {"fact": RAG, "reasoning": GRAPH})]
SUMMARY = pd.DataFrame(
    {
        "method": ["naive_rag", "graph_walk", "selection"],
        "questions": [4, 4, 4],
        "failures": [0, 1, 0],
        "accuracy": [0.5, 0.75, 0.25],
        "accuracy_low": [0.1, 0.3, 0.0],
        "accuracy_high": [0.9, 1.0, 0.6],
        "accuracy_n": [4, 3, 4],
        "recall@2": [0.5, 0.25, 0.4],
    }
)
PAIRED = pd.DataFrame(
    {
        "method": ["graph_walk", "selection"],
        "baseline": ["naive_rag"] * 2,
        "metric": ["accuracy"] * 2,
        "subset": ["all"] * 2,
        "mean_diff": [0.25, -0.25],
        "ci_low": [-0.2, -0.5],
        "ci_high": [0.6, 0.1],
        "n": [3, 4],
        "wins": [1, 0],
        "losses": [0, 1],
        "test": ["exact binomial"] * 2,
        "p_value": [0.5, 1.0],
        "p_holm": [1.0, 1.0],
    }
)
ANSWERS = pd.DataFrame(
    {
        "method": ["naive_rag"] * 4 + ["graph_walk"] * 4 + ["selection"] * 4,
        "calls": [1] * 4 + [1, 1, 1, 2] + [2] * 4,
        "route": [""] * 8 + ["fact", "reasoning", "reasoning", "reasoning"],
        "context_ready": [True] * 12,
        "fallback": [""] * 4 + ["no usable entity -> vector", "", "", ""] + [""] * 4,
    }
)


def saved_tables(embedded: bool) -> dict[str, pd.DataFrame]:
    """What notebook 04 saves, as its narrative reads it back."""
    retrieval = RetrievalSettings(k=2, graph_fallback="vector")
    setup = setup_table(METHODS, QASettings(baseline="naive_rag"), 2, "naive_rag", retrieval)
    findings = task_findings(
        SUMMARY, PAIRED, ANSWERS, quality="accuracy", recall="recall@2", embedded=embedded
    )
    return {
        "summary": SUMMARY,
        "paired_vs_baseline": PAIRED,
        "fallbacks": fallback_table(ANSWERS),
        "setup": setup,
        "findings": findings,
    }


def test_the_findings_table_holds_the_figures_the_narrative_computed():
    found = saved_tables(embedded=False)["findings"]
    top = stated(found, "highest_mean", "graph_walk")
    assert (top["value"], top["ci_low"], top["ci_high"], top["source"]) == (0.75, 0.3, 1.0, "summary")
    assert stated(found, "compared_with_baseline", "accuracy")["value"] == 2
    model_free = statements(found, "answer_only_model_call").set_index("subject")["value"]
    assert model_free.to_dict() == {"graph_walk": 0.0, "naive_rag": 1.0, "selection": 0.0}
    assert statements(found, "routed").set_index("subject")["value"].to_dict() == {"reasoning": 3, "fact": 1}
    assert stated(found, "questions_per_method")["value"] == 4
    assert stated(found, "claim_alpha")["value"] == 0.05
    assert stated(found, "embedded_model")["source"] == "run.json"


def test_the_qa_narrative_words_the_saved_tables():
    narration = narrate_qa(saved_tables(embedded=True))
    assert narration.headline.startswith(
        "Highest mean accuracy: graph_walk 0.75 [0.30, 1.00] over 3 questions"
    )
    assert narration.headline.endswith(
        "no paired accuracy difference with the baseline is a finding (2 compared)."
    )
    text = narration.findings
    assert text.startswith("Answers lost to model failures (graph_walk 1 of 4)")
    assert "Methods whose only model call is the answer (naive_rag) retrieved without a model" in text
    assert "**graph_walk** 1 of 4 (25%; most often `no usable entity -> vector`)" in text
    assert "Every method saw the same 4 questions" in text and "rejects at 0.05;" in text
    assert "Gemma 3 270M" in text
    assert text.endswith(
        "Selection routed {'reasoning': 3, 'fact': 1} (fact → naive_rag, reasoning → graph_walk)."
    )
    assert "Gemma 3 270M" not in narrate_qa(saved_tables(embedded=False)).findings


def test_the_summarization_narrative_states_no_route_and_no_complementarity():
    summary = SUMMARY.rename(columns=lambda c: c.replace("accuracy", "rouge2_f"))
    paired = PAIRED.assign(metric="rouge2_f")
    found = task_findings(summary, paired, ANSWERS, quality="rouge2_f", recall="recall@2", embedded=False)
    tables = saved_tables(embedded=False) | {
        "summary": summary,
        "paired_vs_baseline": paired,
        "findings": found,
    }
    narration = narrate_summarization(tables | {"complementarity": pd.DataFrame()})
    assert narration.headline.startswith("Highest mean rouge2_f: graph_walk 0.75")
    assert "Selection routed" not in narration.findings and "was right where" not in narration.findings
    assert (
        "Supporting-passage recall@2 (share of gold documents among the passages shown)" in narration.findings
    )


def test_the_setup_note_words_the_saved_setup_table():
    setup = saved_tables(embedded=False)["setup"]
    unavailable = pd.DataFrame({"method": ["local_search"], "reason": ["no community reports"]})
    note = setup_note(setup, unavailable)
    assert note.startswith(
        "Methods: naive_rag, graph_walk, selection; baseline **naive_rag**; k = 2; context budget"
    )
    assert "Graph walked (retrieval.graph_origin = " in note and "graph_walk nlp, selection nlp." in note
    assert "shows the vector retrieval (retrieval.graph_fallback = vector)" in note
    assert note.endswith(
        "Not run, because the index cannot support them: **local_search**: no community reports"
    )
    without_retrieval = setup_table(METHODS, QASettings(), 2)
    assert "Graph walked" not in setup_note(without_retrieval, unavailable.iloc[:0])


def test_the_setup_note_says_when_answers_are_cut_to_their_first_line():
    cut = setup_note(setup_table(METHODS, QASettings(), 2), pd.DataFrame())
    assert "Each answer is cut to its first line (`first_line_only`)" in cut
    kept = setup_table(METHODS, QASettings(whole_answer_types=["contradictory"]), 2)
    assert "(answers to `contradictory` questions are kept whole)" in setup_note(kept, pd.DataFrame())
    whole = setup_table(METHODS, QASettings(first_line_only=False), 2)
    assert "first line" not in setup_note(whole, pd.DataFrame())
