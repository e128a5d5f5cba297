"""The kit's notebooks, listed once: the question each answers (the index page shows it), the gold
data it needs from a data set, and what `ragtrial init` sets so that it runs on a corpus without gold.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

# What a data set may provide beyond documents (`ragtrial datasets` lists it per loader): "questions" of
# its own, with gold or not (a query log's carry none), then the gold its questions carry.
Gold = Literal["questions", "answers", "gold passages", "gold entities", "reference summaries"]


@dataclass(frozen=True)
class NotebookSpec:
    """One notebook: `question` in one line; `needs`, the gold it cannot run without (empty: it runs on
    documents alone, perhaps after `without_gold` settings); `without_gold`, dotted settings that make it
    ask generated questions instead of a data set's; `why_not`, the one line saying why it cannot run
    without gold when `needs` is not empty; `methods`, the dotted settings keys naming the methods it
    runs (`ragtrial check` finds the upstream systems a run needs from them); `narrative`, the
    "module:attribute" of its narrative (`report.narrative.narration.Narrative`), imported when used.
    """

    name: str
    question: str
    needs: tuple[Gold, ...] = ()
    without_gold: dict[str, Any] = field(default_factory=dict)
    why_not: str = ""
    methods: tuple[str, ...] = ()
    narrative: str = ""


NOTEBOOKS: dict[str, NotebookSpec] = {
    spec.name: spec
    for spec in (
        NotebookSpec(
            "00_backend_check",
            "Which model answered, and does every kind of call the kit makes work against it?",
        ),
        NotebookSpec(
            "01_build_index",
            "What graph does the kit build from the corpus, at what cost, and how close is it to the truth?",
        ),
        NotebookSpec(
            "02_question_entity_distribution",
            "Which entities do generated questions talk about, and how concentrated are they?",
        ),
        NotebookSpec(
            "03_question_relevance",
            "Does retrieval find context relevant to the questions each generator asks?",
        ),
        NotebookSpec(
            "04_rag_vs_graphrag_qa",
            "Which method answers questions best, on which question types, and at what cost?",
            needs=("answers",),
            why_not="it scores answers against a data set's gold answers (EM, F1, accuracy)",
            methods=("qa.methods",),
        ),
        NotebookSpec(
            "05_rag_vs_graphrag_summarization",
            "Which method writes the summaries closest to human references (ROUGE-2, BERTScore)?",
            needs=("reference summaries",),
            why_not="it scores summaries against a data set's reference summaries",
            methods=("summarization.methods",),
        ),
        NotebookSpec(
            "06_judge_bias_audit",
            "Is the LLM judge biased (position, length, trials), and does it call equal answers a draw?",
            without_gold={"judge.question_source": "graph"},
            methods=("judge.self_method",),
            narrative="ragtrial.report.narrative.judge:narrate_bias_audit",
        ),
        NotebookSpec(
            "07_pairwise_method_comparison",
            "Which method answers better, judged pairwise by the classic and the unbiased protocol?",
            without_gold={"judge.question_source": "graph"},
            methods=("judge.methods",),
            narrative="ragtrial.report.narrative.judge:narrate_pairwise",
        ),
        NotebookSpec(
            "08_claims_comprehensiveness_diversity",
            "Do community-summary answers state more, and more distinct, facts than vector retrieval's?",
            without_gold={"claims.question_source": "persona"},
            methods=("claims.methods",),
        ),
        NotebookSpec(
            "09_retrieval_diagnostics",
            "Where does retrieval fail, on which question category: the retriever's fault or the model's?",
            # a query log's questions carry no gold, and 09 measures what they support; a folder of
            # text files has no question to diagnose
            needs=("questions",),
            why_not="it diagnoses a data set's own questions (a benchmark's, measured against their gold "
            "passages and entities, or a query log's)",
            methods=("diagnostics.methods",),
        ),
        NotebookSpec(
            "10_verdict",
            "Per question type: is the graph worth its indexing bill here?",
        ),
        NotebookSpec(
            "11_upstream_systems",
            "How do the real GraphRAG, LightRAG and fast-graphrag answer beside the kit's versions of them?",
            methods=("upstream.methods",),
            narrative="ragtrial.report.narrative.upstream:narrate",
        ),
        NotebookSpec(
            "12_judge_calibration",
            "Does the judge protocol find a known truth with this judge, and how many trials, repeats and "
            "questions does it need?",
        ),
    )
}


def narrative_of(notebook: str) -> Callable[..., Any]:
    """The narrative of `notebook` (its `NotebookSpec.narrative`), imported now."""
    spec = NOTEBOOKS.get(notebook)
    if spec is None or not spec.narrative:
        raise ValueError(f"notebook {notebook!r} has no narrative registered (config/notebooks.py)")
    module, attribute = spec.narrative.split(":")
    return getattr(importlib.import_module(module), attribute)
