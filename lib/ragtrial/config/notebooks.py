"""The kit's notebooks, each declared once as an entry of `NOTEBOOKS` (the kit's one registry shape):
the question it answers (the index page, `ragtrial init`, the README and docs/notebooks.md show it),
the gold it needs, its settings, the questions it asks, its estimate planner, its narrative and what
the verdict reads of it. Every reader (`ragtrial estimate`, `check`, `init`, `questions export`,
`query`, the verdict, the gold check, the index page) reads it here.

The planner, the narrative and the question sampler are "module:attribute" strings, imported when
used: declaring a notebook imports nothing above `config`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ragtrial.registry import Registry, resolve

# What a data set may provide beyond documents (`ragtrial datasets` lists it per loader): "questions" of
# its own, with gold or not (a query log's carry none), then the gold its questions carry.
Gold = Literal["questions", "answers", "gold passages", "gold entities", "reference summaries"]


@dataclass(frozen=True)
class AskedQuestions:
    """The data set's questions a notebook asks (`ragtrial questions export` writes them): `sampler`,
    the "module:attribute" of the function `(dataset, settings) -> list[Question]` that makes the
    notebook's own choice; `section`, the settings section whose `question_source` may have the model
    generate them instead (empty: always the data set's), and `dataset_source`, its value that means
    the data set's questions.
    """

    sampler: str
    section: str = ""
    dataset_source: str = "dataset"


@dataclass(frozen=True)
class NotebookSpec:
    """One notebook.

    `question`: what it answers, in one line. `sections`: the settings sections it is configured by.
    `planner`: the "module:attribute" of its estimate planner (`runner.batch_estimate`: RunPlanner ->
    its StagePlans). `narrative`: the "module:attribute" of its narrative
    (`report.narrative.narration.Narrative`). `needs`: the gold it cannot run without (empty: it runs
    on documents alone, perhaps after `without_gold`); `why_not`: the one line saying why, when `needs`
    is not empty; `without_gold`: dotted settings that make it ask generated questions instead of a data
    set's. `methods`: the dotted settings keys naming the methods it runs (`ragtrial check` finds the
    upstream systems a run needs from them; `ragtrial query` its answer settings). `asks`: the data
    set's questions it asks, if any. `on_embedded`: dotted settings `ragtrial init` adds for the
    embedded model. `verdict_input`: the verdict (notebook 10) reads its result tables;
    `answer_costs`: the saved table of answers whose per-query cost the verdict reads. `real_evidence`:
    it measures real data without any model call (the index page lists its runs first; the verdict
    reads a batch's runs of it whatever their data set). `added_by_batch`: a batch adds its runs itself
    (the sweep report after a grid's points), so `ragtrial init` plans none. `reads_batch_runs`: it
    reads the result tables of its batch's other runs, so it starts once every run before it has
    ended (`runner.schedule`).
    """

    name: str
    question: str
    sections: tuple[str, ...]
    planner: str
    narrative: str
    needs: tuple[Gold, ...] = ()
    why_not: str = ""
    without_gold: dict[str, Any] = field(default_factory=dict)
    methods: tuple[str, ...] = ()
    asks: AskedQuestions | None = None
    on_embedded: dict[str, Any] = field(default_factory=dict)
    verdict_input: bool = False
    answer_costs: str = ""
    real_evidence: bool = False
    added_by_batch: bool = False
    reads_batch_runs: bool = False


NOTEBOOKS: Registry[NotebookSpec] = Registry("notebook")
# The sweep report a batch adds after a grid's points (`config.batch.load_batch`), and the index links.
SWEEP_NOTEBOOK = "15_sweep_report"


def add_notebook(spec: NotebookSpec) -> None:
    """Register `spec` under its name, described by its question."""
    NOTEBOOKS.add(spec.name, spec, spec.question)


def notebook_specs() -> list[NotebookSpec]:
    """Every registered notebook, in registration order (the flow's)."""
    return [NOTEBOOKS.get(name) for name in NOTEBOOKS]


def narrative_of(notebook: str) -> Callable[..., Any]:
    """The narrative of `notebook` (its `NotebookSpec.narrative`), imported now."""
    if notebook not in NOTEBOOKS:
        raise ValueError(f"notebook {notebook!r} has no narrative registered (config/notebooks.py)")
    return resolve(NOTEBOOKS.get(notebook).narrative)


def verdict_inputs() -> tuple[str, ...]:
    """The notebooks whose result tables the verdict reads, in the order of the flow."""
    return tuple(spec.name for spec in notebook_specs() if spec.verdict_input)


def answer_cost_tables() -> dict[str, str]:
    """Notebook -> the saved table of answers the verdict reads its per-query cost from."""
    return {spec.name: spec.answer_costs for spec in notebook_specs() if spec.answer_costs}


add_notebook(
    NotebookSpec(
        "00_backend_check",
        "Which model answered, and does every kind of call the kit makes work against it?",
        sections=("backend_check",),
        planner="ragtrial.runner.batch_estimate:plan_backend_check",
        narrative="ragtrial.report.narrative.backend:narrate",
    )
)
add_notebook(
    NotebookSpec(
        "01_build_index",
        "What graph does the kit build from the corpus, at what cost, and how close is it to the truth?",
        sections=("index",),
        planner="ragtrial.runner.batch_estimate:plan_index_build",
        narrative="ragtrial.report.narrative.index_build:narrate",
        verdict_input=True,
    )
)
add_notebook(
    NotebookSpec(
        "02_question_entity_distribution",
        "Which entities do generated questions talk about, and how concentrated are they?",
        sections=("questions",),
        planner="ragtrial.runner.batch_estimate:plan_entity_distribution",
        narrative="ragtrial.report.narrative.questions:narrate_entity_distribution",
    )
)
add_notebook(
    NotebookSpec(
        "03_question_relevance",
        "Does retrieval find context relevant to the questions each generator asks?",
        sections=("questions",),
        planner="ragtrial.runner.batch_estimate:plan_question_relevance",
        narrative="ragtrial.report.narrative.questions:narrate_relevance",
    )
)
add_notebook(
    NotebookSpec(
        "04_rag_vs_graphrag_qa",
        "Which method answers questions best, on which question types, and at what cost?",
        sections=("qa",),
        planner="ragtrial.runner.batch_estimate:plan_qa",
        narrative="ragtrial.report.narrative.tasks:narrate_qa",
        needs=("answers",),
        why_not="it scores answers against a data set's gold answers (EM, F1, accuracy)",
        methods=("qa.methods",),
        asks=AskedQuestions("ragtrial.questions.sampling:qa_questions"),
        verdict_input=True,
        answer_costs="scores",
    )
)
add_notebook(
    NotebookSpec(
        "05_rag_vs_graphrag_summarization",
        "Which method writes the summaries closest to human references (ROUGE-2, BERTScore)?",
        sections=("summarization",),
        planner="ragtrial.runner.batch_estimate:plan_summarization",
        narrative="ragtrial.report.narrative.tasks:narrate_summarization",
        needs=("reference summaries",),
        why_not="it scores summaries against a data set's reference summaries",
        methods=("summarization.methods",),
        asks=AskedQuestions("ragtrial.questions.sampling:summarization_questions"),
        verdict_input=True,
        answer_costs="scores",
    )
)
add_notebook(
    NotebookSpec(
        "06_judge_bias_audit",
        "Is the LLM judge biased (position, length, trials), and does it call equal answers a draw?",
        sections=("judge",),
        planner="ragtrial.runner.batch_estimate:plan_bias_audit",
        narrative="ragtrial.report.narrative.judge:narrate_bias_audit",
        without_gold={"judge.question_source": "graph"},
        methods=("judge.self_method",),
        asks=AskedQuestions("ragtrial.questions.sampling:judged_questions", section="judge"),
    )
)
add_notebook(
    NotebookSpec(
        "07_pairwise_method_comparison",
        "Which method answers better, judged pairwise by the classic and the unbiased protocol?",
        sections=("judge",),
        planner="ragtrial.runner.batch_estimate:plan_pairwise_comparison",
        narrative="ragtrial.report.narrative.judge:narrate_pairwise",
        without_gold={"judge.question_source": "graph"},
        methods=("judge.methods",),
        asks=AskedQuestions("ragtrial.questions.sampling:judged_questions", section="judge"),
        verdict_input=True,
        answer_costs="answers",
    )
)
add_notebook(
    NotebookSpec(
        "08_claims_comprehensiveness_diversity",
        "Do community-summary answers state more, and more distinct, facts than vector retrieval's?",
        sections=("claims",),
        planner="ragtrial.runner.batch_estimate:plan_claims",
        narrative="ragtrial.report.narrative.claims:narrate",
        without_gold={"claims.question_source": "persona"},
        methods=("claims.methods",),
        asks=AskedQuestions("ragtrial.questions.sampling:claims_dataset_questions", section="claims"),
        verdict_input=True,
        answer_costs="answers",
    )
)
add_notebook(
    NotebookSpec(
        "09_retrieval_diagnostics",
        "Where does retrieval fail, on which question category: the retriever's fault or the model's?",
        sections=("diagnostics",),
        planner="ragtrial.runner.batch_estimate:plan_diagnostics",
        narrative="ragtrial.report.narrative.diagnostics:narrate",
        # a query log's questions carry no gold, and 09 measures what they support; a folder of
        # text files has no question to diagnose
        needs=("questions",),
        why_not="it diagnoses a data set's own questions (a benchmark's, measured against their gold "
        "passages and entities, or a query log's)",
        methods=("diagnostics.methods",),
        asks=AskedQuestions("ragtrial.questions.sampling:diagnosed_questions"),
        verdict_input=True,
        answer_costs="answers",
    )
)
add_notebook(
    NotebookSpec(
        "10_verdict",
        "Per question type: is the graph worth its indexing bill here?",
        sections=("verdict",),
        # it reads saved tables and the saved index
        planner="ragtrial.runner.batch_estimate:plan_no_model_call",
        narrative="ragtrial.report.narrative.verdict:narrate",
        reads_batch_runs=True,
    )
)
add_notebook(
    NotebookSpec(
        "11_upstream_systems",
        "How do the real GraphRAG, LightRAG and fast-graphrag answer beside the kit's versions of them?",
        sections=("upstream", "systems"),
        planner="ragtrial.runner.batch_estimate:plan_upstream_comparison",
        narrative="ragtrial.report.narrative.upstream:narrate",
        methods=("upstream.methods",),
        # what the embedded model needs (params/default.yaml measured it): the systems bring context
        # budgets of 12k-30k tokens its 8k-token window cannot hold, GraphRAG's calls set no reply cap,
        # and each question costs minutes of answering over six methods
        on_embedded={
            "llm.max_tokens": 128,
            "systems.graphrag.max_context_tokens": 1500,
            "systems.graphrag.graphrag_settings": {
                "global_search": {"map_max_length": 100, "reduce_max_length": 200}
            },
            "systems.lightrag.top_k": 10,
            "systems.lightrag.chunk_top_k": 5,
            "systems.lightrag.max_entity_tokens": 500,
            "systems.lightrag.max_relation_tokens": 500,
            "systems.lightrag.max_total_tokens": 1500,
            "questions.levels": ["node", "edge"],
            "questions.per_level": 1,
            "upstream.trials": 1,
        },
    )
)
add_notebook(
    NotebookSpec(
        "12_judge_calibration",
        "Does the judge protocol find a known truth with this judge, and how many trials, repeats and "
        "questions does it need?",
        sections=("calibration",),
        planner="ragtrial.runner.batch_estimate:plan_no_model_call",  # it simulates its judge: no call
        narrative="ragtrial.report.narrative.calibration:narrate",
        reads_batch_runs=True,
    )
)
add_notebook(
    NotebookSpec(
        "13_retrieval_benchmark",
        "On a benchmark's own gold evidence, without any model call: does graph retrieval find the passages "
        "plain retrieval misses, and what did the graph cost to build?",
        sections=("benchmark", "retrieval", "index"),
        # embeddings are local; the graphs are built without a model (nlp) or imported
        planner="ragtrial.runner.batch_estimate:plan_no_model_call",
        narrative="ragtrial.report.narrative.benchmark:narrate",
        needs=("questions", "gold passages"),
        why_not="it scores retrieval against a data set's gold passages",
        real_evidence=True,
    )
)

add_notebook(
    NotebookSpec(
        "14_compare_runs",
        "Two runs compared on the same questions: which settings differ, and which differences are real?",
        sections=("compare",),
        planner="ragtrial.runner.batch_estimate:plan_no_model_call",  # it reads saved tables
        narrative="ragtrial.report.narrative.compare:narrate",
        reads_batch_runs=True,
    )
)
add_notebook(
    NotebookSpec(
        SWEEP_NOTEBOOK,
        "A grid's points read as one report: how does each measure move with each setting, which point is "
        "best, and is it distinguishable from the runner-up?",
        sections=("sweep",),
        planner="ragtrial.runner.batch_estimate:plan_no_model_call",  # it reads saved tables
        narrative="ragtrial.report.narrative.sweep:narrate",
        added_by_batch=True,
        reads_batch_runs=True,
    )
)


def real_evidence_notebooks() -> tuple[str, ...]:
    """The notebooks that measure real data without any model call."""
    return tuple(spec.name for spec in notebook_specs() if spec.real_evidence)
