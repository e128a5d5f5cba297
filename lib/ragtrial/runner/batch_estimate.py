"""`ragtrial estimate`: a dry run of a batch. Per run and stage, the model calls its notebook would
make, on what basis (exact, upper bound, projected), their prompt tokens (counted on the real
prompts where the inputs exist, else projected), the completion tokens at their caps, how many the
response cache already holds, and the wall time and money they would take. No request is sent and
no model server starts: the estimate's LLM has an endpoint that refuses to resolve.

Each notebook's planner (`plan_*` here, named by its registry entry in `config.notebooks`) follows
what the notebook calls, composing the planning functions that sit beside the stages
(`planned_calls` / `planned_*`, built with the stages' own prompts and schemas). An index
that an earlier run of the batch builds is counted once, where it is built. A data set that is not
under the data root leaves the counts that need it projected from the params' sizes, with a note.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

import pandas as pd

from ragtrial.config.base import ExistingPath, ParamsError, Section
from ragtrial.config.batch import RunSpec, load_batch
from ragtrial.config.data import data_path, data_root_origin
from ragtrial.config.judge import UnbiasedJudgeSettings
from ragtrial.config.llm import LLMSettings
from ragtrial.config.methods import AnswerSettings, SummarizationSettings
from ragtrial.config.notebooks import NOTEBOOKS
from ragtrial.config.paths import notebooks_dir, output_path, outputs_dir
from ragtrial.config.settings import Settings, marked_values
from ragtrial.data.experiment_dataset import load_experiment_dataset
from ragtrial.data.gold import require_gold
from ragtrial.evaluation.claim_verdicts import planned_calls as planned_verdicts
from ragtrial.evaluation.claims import planned_calls as planned_claims
from ragtrial.evaluation.grounding import planned_grounding
from ragtrial.evaluation.judge.cost_plan import EMBEDDED_THROUGHPUT, answer_rounds
from ragtrial.evaluation.judge.pipeline import (
    JudgeDesign,
    comparison_design,
    planned_judge_calls,
    self_check_design,
    unbiased_design,
)
from ragtrial.evaluation.key_facts import planned_key_fact_checks
from ragtrial.evaluation.run_methods import MapBatches, answered_by_the_kit, planned_answers
from ragtrial.index.build import planned_build, saved_index
from ragtrial.index.chunk_documents import chunks_for
from ragtrial.index.tables import GraphIndex
from ragtrial.llm.backend_check import planned_calls as planned_probes
from ragtrial.llm.cache import ResponseCache, cache_location
from ragtrial.llm.client import LLM
from ragtrial.llm.context import ModelContext
from ragtrial.llm.ledger import Ledger, read_ledger
from ragtrial.llm.plan import BASES, StagePlan, unknown
from ragtrial.questions.quality import planned_calls as planned_quality
from ragtrial.questions.run_generators import generated_at_most, planned_generation
from ragtrial.questions.sampling import diagnosis_questions, select_questions, task_questions
from ragtrial.records import Dataset
from ragtrial.registry import resolve
from ragtrial.retrieval.registry import planned_listing
from ragtrial.runner.checks import select_runs
from ragtrial.runner.preflight import check_settings

SectionT = TypeVar("SectionT", bound=Section)
UNKNOWN_QUESTIONS = unknown(
    "questions", "the data set is absent and data.limit_questions is not set: its calls are unknown"
)


class NoModelCall(RuntimeError):
    """A planned call reached the endpoint: the estimate never sends a request."""


def _no_endpoint() -> str:
    raise NoModelCall("ragtrial estimate sends no request; a planning function made a model call")


@dataclass
class PlanContext:
    """A `ModelContext` whose model doors cannot reach a model: the planning functions build
    requests and look up their cache keys with it, and nothing else.
    """

    settings: Settings
    run_id: str
    ledger: Ledger
    llm: LLM
    embedder: Any = None


@dataclass
class RunPlanner:
    """What one run's notebook needs planned: its settings, its data set (None when absent) and the
    index folders the batch's earlier runs build.
    """

    spec: RunSpec
    ctx: PlanContext
    dataset: Dataset | None
    built: set[Path]
    absent: list[str]  # the data-root paths of the settings that do not exist
    notes: list[str] = field(default_factory=list)

    @property
    def settings(self) -> Settings:
        return self.ctx.settings

    def index(self, dataset: Dataset | None = None) -> list[StagePlan]:
        """The index build's calls, once per index folder in the batch (later runs load it)."""
        dataset = dataset or self.dataset
        if dataset is None or "index.import_path" in self.absent:
            return [unknown("index", "data absent: the index and so its calls are unknown")]
        if not dataset.documents:  # no corpus: load_or_build_index builds nothing
            return []
        # cast: the build's plan reads the settings and the model door, never run_dir or the embedder
        path, plans = planned_build(cast(ModelContext, self.ctx), dataset)
        if path in self.built:
            return []
        self.built.add(path)
        return plans

    def map_batches(self, names: Sequence[str], cfg: AnswerSettings) -> dict[str, MapBatches]:
        """The map calls per question of the map-reduce methods among `names`, counted by building
        each method as its notebook does (its units shuffled and cut to `methods.map_budget`) on the
        saved index; before the index exists, on the chunks its build will make, which TS maps over.
        A community level's reports are not known before the build: projected at TS's count (the
        GraphRAG paper's Table 2 has the source text as the condition with the most context tokens).
        """
        from ragtrial.methods.map_reduce import MapReduceMethod
        from ragtrial.methods.registry import METHODS, make_methods

        wanted = [n for n in names if n in METHODS and METHODS.entry(n).metadata.get("map_reduce")]
        if not wanted or self.dataset is None or not self.dataset.documents:
            return {}
        # cast: building a map-reduce method reads the settings and keeps the model door, unused here
        ctx = cast(ModelContext, self.ctx)
        try:
            index, saved = saved_index(ctx, self.dataset), True
        except FileNotFoundError:
            index, saved = (
                GraphIndex(chunks=chunks_for(self.dataset.documents_frame(), self.settings.index)),
                False,
            )
        # before the build, TS's batches stand in for the levels' reports not yet written
        built, _ = make_methods(wanted if saved else list(dict.fromkeys([*wanted, "ts"])), index, ctx, cfg)
        # an imported index has chunks of its own: these project them
        basis = "projected" if not saved and self.settings.index.graph_source == "import" else "exact"
        counted = {
            m.name: MapBatches(len(m.batches), basis, "one map call per batch of its units")
            for m in built
            if isinstance(m, MapReduceMethod)
        }
        if not saved and "ts" in counted:
            note = "before the index exists: at the source chunks' map calls (TS)"
            before = counted["ts"]._replace(basis="projected", note=note)
            return {name: counted.get(name, before) for name in wanted}
        # else a method left out (no chunk, or a level without reports) is projected by `planned_answers`
        return {name: counted[name] for name in wanted if name in counted}

    def answers(
        self, names: Sequence[str], n: int, cfg: AnswerSettings, counted: bool = True
    ) -> list[StagePlan]:
        """`planned_answers` of `names` over `n` questions, map calls counted (`map_batches`) when
        `counted` (not for an index per document, whose batches differ by document).
        """
        batches = self.map_batches(names, cfg) if counted else {}
        return planned_answers(names, n, cfg, self.settings, map_batches=batches)

    def questions(self, per_type: int | None, seed: int, task: str | None = None) -> int | None:
        """How many of the data set's questions a notebook takes; without the data set,
        `data.limit_questions` when set (a projection), else None (unknown).
        """
        if self.dataset is not None:
            chosen = (
                task_questions(self.dataset, task, per_type, seed)
                if task
                else select_questions(self.dataset.questions, per_type, seed)
            )
            return len(chosen)
        n = self.settings.data.limit_questions
        if n is not None:
            self.notes.append(f"the data set's questions projected at data.limit_questions = {n}")
        return n

    def diagnosed_questions(self) -> int | None:
        """How many questions notebook 09 diagnoses (`diagnostics.question_types`, sampled per type)."""
        cfg = self.settings.diagnostics
        if self.dataset is None:
            return self.questions(cfg.questions_per_type, cfg.seed)
        return len(diagnosis_questions(self.dataset, cfg.questions_per_type, cfg.seed, cfg.question_types))

    def sourced_questions(
        self, generator: str | None, per_type: int | None, seed: int
    ) -> tuple[list[StagePlan], int | None]:
        """A judge or claims notebook's questions: generated by `generator` (its calls and how many
        it yields at most), else the data set's (no calls; None when unknown).
        """
        if generator is not None:
            return self.generation([generator])
        return [], self.questions(per_type, seed)

    def generation(self, generators: Iterable[str]) -> tuple[list[StagePlan], int]:
        """Question generation's calls and the number of questions it yields at most."""
        cfg = self.settings.questions
        documents = self.dataset.documents_frame() if self.dataset is not None else None
        generators = list(generators)
        questions = self.dataset.questions if self.dataset is not None else []
        return planned_generation(self.ctx.llm, documents, cfg, generators), generated_at_most(
            cfg, generators, questions
        )


def plan_backend_check(p: RunPlanner) -> list[StagePlan]:
    """Notebook 00: its probes."""
    return planned_probes(p.ctx.llm, p.settings.backend_check)


def plan_index_build(p: RunPlanner) -> list[StagePlan]:
    """Notebook 01: the index build."""
    return p.index()


def plan_no_model_call(p: RunPlanner) -> list[StagePlan]:
    """A notebook that calls no model (10 reads saved tables and the saved index; 12 simulates its judge)."""
    return []


def _question_notebook(listing: bool, rating: bool) -> Callable[[RunPlanner], list[StagePlan]]:
    def plan(p: RunPlanner) -> list[StagePlan]:
        cfg = p.settings.questions
        generated, n = p.generation(cfg.generators)
        # 03's contexts come from its retriever, which may list each question's entities itself
        retrieving = (
            planned_listing(cfg.relevance.retriever, p.settings.retrieval, n, "upper bound") if rating else []
        )
        return (
            p.index()
            + generated
            + planned_quality(n, cfg, p.settings.retrieval, listing and cfg.llm_entities, rating)
            + retrieving
        )

    return plan


def _task_notebook(task: str) -> Callable[[RunPlanner], list[StagePlan]]:
    def plan(p: RunPlanner) -> list[StagePlan]:
        cfg = p.settings.qa if task == "qa" else p.settings.summarization
        n = p.questions(cfg.questions_per_type, cfg.seed, task)
        index = p.index()
        if n is None:
            return index + [UNKNOWN_QUESTIONS]
        if isinstance(cfg, SummarizationSettings) and cfg.index_per_document and p.dataset is not None:
            questions = task_questions(p.dataset, task, cfg.questions_per_type, cfg.seed)
            docs = {d.doc_id: d for d in p.dataset.documents}
            index = []
            for doc_id in dict.fromkeys(q.gold_doc_ids[0] for q in questions if len(q.gold_doc_ids) == 1):
                index += p.index(p.dataset.model_copy(update={"documents": [docs[doc_id]]}))
        per_document = isinstance(cfg, SummarizationSettings) and cfg.index_per_document
        return index + p.answers(cfg.methods, n, cfg, counted=not per_document)

    return plan


def _judge_notebook(self_check: bool) -> Callable[[RunPlanner], list[StagePlan]]:
    def plan(p: RunPlanner) -> list[StagePlan]:
        cfg = p.settings.judge
        return _judge_pipeline(
            p, cfg, self_check_design(cfg) if self_check else comparison_design(cfg, cfg.methods)
        )

    return plan


def plan_upstream_comparison(p: RunPlanner) -> list[StagePlan]:
    """Notebook 11: the kit's twins as in 07 (their answers, length alignment, the unbiased judge);
    an upstream system's own calls (its prompts, its map batches, its index build) are its to decide.
    """
    cfg = p.settings.upstream
    return _judge_pipeline(p, cfg, unbiased_design(cfg, cfg.methods))


def _judge_pipeline(p: RunPlanner, cfg: UnbiasedJudgeSettings, design: JudgeDesign) -> list[StagePlan]:
    """A judge notebook's calls: its questions (generated from the graph or the data set's), the
    answerers' retrieval, then `run_judge_pipeline`'s answers, alignment and judges.
    """
    generated, n = p.sourced_questions(
        "graph" if cfg.question_source == "graph" else None, cfg.questions_per_type, cfg.seed
    )
    plans = p.index() + generated
    if n is None:
        return plans + [UNKNOWN_QUESTIONS]
    # every answerer run retrieves for itself: 06's two runs of one method are samples of their own,
    # so each lists the questions' keywords or entities anew; and every trial's answers retrieve again
    # under `trial_scope: answers` (their calls are samples too)
    runs = [method for method, _ in design.answerers]
    asked = n * answer_rounds(cfg, design.unbiased)
    retrieval = [r for r in p.answers(runs, asked, cfg) if r.stage != "answer"]
    judged = retrieval + planned_judge_calls(cfg, design, n, answered_by_the_kit(runs, p.settings))
    return plans + (at_most(judged) if generated else judged)


def plan_claims(p: RunPlanner) -> list[StagePlan]:
    """Notebook 08: its questions, answers, claim extraction and claim verdicts."""
    cfg = p.settings.claims
    generated, n = p.sourced_questions(
        "persona" if cfg.question_source == "persona" else None, cfg.questions_per_type, cfg.seed
    )
    plans = p.index() + generated
    if n is None:
        return plans + [UNKNOWN_QUESTIONS]
    n = min(n, cfg.n_questions or n)
    answered = (
        p.answers(cfg.methods, n, cfg)
        + planned_claims(n * len(cfg.methods), cfg.answer_max_tokens, cfg.extraction_max_tokens)
        + planned_verdicts(cfg, p.settings.judge, n, cfg.methods, cfg.answer_max_tokens)
    )
    return plans + (at_most(answered) if generated else answered)


def at_most(plans: list[StagePlan]) -> list[StagePlan]:
    """Plans over generated questions, whose number is a bound (the generators yield fewer when the
    graph has fewer structures): an exact count per question is then an upper bound.
    """
    why = "at most: per generated question, and fewer may be generated"
    return [
        dataclasses.replace(plan, basis="upper bound", note="; ".join(filter(None, [plan.note, why])))
        if plan.basis == "exact"
        else plan
        for plan in plans
    ]


def plan_diagnostics(p: RunPlanner) -> list[StagePlan]:
    """Notebook 09: each method's answers and the oracle's, their grounding and key-fact checks."""
    cfg = p.settings.diagnostics
    index = p.index()
    n = p.diagnosed_questions()
    if n is None:
        return index + [UNKNOWN_QUESTIONS]
    methods = [*cfg.methods, "oracle"]  # the oracle answers every question: the gold-context injection
    n_answers = n * len(methods)
    return (
        index
        + p.answers(methods, n, cfg)
        + planned_grounding(n_answers, p.settings)
        + planned_key_fact_checks(n_answers, p.settings)
    )


# The planners the factories above make, one per notebook
plan_entity_distribution = _question_notebook(listing=True, rating=False)  # 02
plan_question_relevance = _question_notebook(listing=False, rating=True)  # 03
plan_qa = _task_notebook("qa")  # 04
plan_summarization = _task_notebook("summarization")  # 05
plan_bias_audit = _judge_notebook(self_check=True)  # 06
plan_pairwise_comparison = _judge_notebook(self_check=False)  # 07


# ---------------------------------------------------------------- time and money


def measured_latency(outputs: Path) -> dict[tuple[str, str], float]:
    """Mean latency of live successful calls per (stage, model) in the ledgers under `outputs`."""
    frames = [read_ledger(p) for p in sorted(Path(outputs).glob("*/ledger*.csv"))]
    ledger = pd.concat([f for f in frames if not f.empty], ignore_index=True) if frames else pd.DataFrame()
    if ledger.empty:
        return {}
    live = ledger[
        ~ledger["cached"].astype(bool) & (ledger["failure"] == "") & (ledger["kind"] != "embedding")
    ]
    return {key: float(v) for key, v in live.groupby(["stage", "model"])["latency_s"].mean().items()}


def _latency(
    plan: StagePlan, settings: Settings, measured: dict[tuple[str, str], float]
) -> tuple[float | None, str]:
    """Seconds per call of `plan` and where that figure comes from."""
    llm = settings.llm
    if (plan.stage, llm.model) in measured:
        return measured[(plan.stage, llm.model)], "measured"
    if llm.estimate_latency_s is not None:
        return llm.estimate_latency_s, "configured"
    if llm.backend == "embedded" and plan.calls:
        per_call = (
            plan.prompt_tokens / EMBEDDED_THROUGHPUT["prompt"]
            + plan.completion_tokens_max / EMBEDDED_THROUGHPUT[plan.output]
        ) / plan.calls
        return per_call, "embedded throughput"
    return None, "unknown"


def _parallel_calls(latency_source: str, llm: LLMSettings) -> int:
    """How many calls' latencies overlap: the run's calls of one stage go out `in_flight` at a time,
    but the embedded model's throughput is the whole machine's (its slots share the cores), so a
    latency derived from it does not shrink with slots.
    """
    return 1 if latency_source == "embedded throughput" else llm.in_flight


def plan_row(spec: RunSpec, plan: StagePlan, measured: dict[tuple[str, str], float]) -> dict[str, Any]:
    """One stage of a run's estimate: its plan with live calls, latency, wall time and cost."""
    llm = spec.settings.llm
    live = plan.calls - (plan.cached or 0)
    share = live / plan.calls if plan.calls else 0.0
    latency, source = (
        (None, "unknown") if plan.basis == "unknown" else _latency(plan, spec.settings, measured)
    )
    prompt_price, completion_price = llm.price_prompt_per_mtok, llm.price_completion_per_mtok
    cost = (
        share * (plan.prompt_tokens * prompt_price + plan.completion_tokens_max * completion_price) / 1e6
        if plan.basis != "unknown" and prompt_price is not None and completion_price is not None
        else None
    )
    return {
        "notebook": spec.notebook,
        "run_id": spec.run_id,
        **{k: v for k, v in asdict(plan).items() if k != "uncached_keys"},
        "live_calls": live,
        "latency_s": latency,
        "latency_source": source,
        "wall_s": None if latency is None else live * latency / _parallel_calls(source, llm),
        "cost": cost,
    }


# ---------------------------------------------------------------- the batch


def absent_data(settings: Settings, root: Path) -> list[str]:
    """The keys of the data-root paths (`ExistingPath(under="data")`) that do not exist."""
    return [
        key
        for key, marker, value in marked_values(settings)
        if isinstance(marker, ExistingPath)
        and marker.under == "data"
        and value
        and not data_path(value, root).exists()
    ]


def _without(section: SectionT, keys: list[str]) -> SectionT:
    """`section` with the dotted `keys` set to None (not validated again: only for the name checks)."""
    nested: dict[str, list[str]] = {}
    for key in keys:
        head, _, rest = key.partition(".")
        nested.setdefault(head, []).append(rest)
    return section.model_copy(
        update={
            head: _without(getattr(section, head), rests) if all(rests) else None
            for head, rests in nested.items()
        }
    )


def asked_earlier(plan: StagePlan, asked: set[str]) -> StagePlan:
    """`plan` with the requests an earlier stage or run of the batch asks (or this stage asks
    twice) counted as cached: they are cache hits by then. Adds this plan's requests to `asked`.
    """
    repeats = 0
    for key in plan.uncached_keys:
        repeats += key in asked
        asked.add(key)
    if not repeats:
        return plan
    return dataclasses.replace(
        plan,
        cached=(plan.cached or 0) + repeats,
        note=f"{plan.note}; {repeats} asked earlier in the batch".lstrip("; "),
    )


def estimate_batch(
    batch_path: str | Path,
    overrides: dict[str, Any] | None = None,
    root: str | Path = ".",
    outputs: str | Path | None = None,
    only: list[str] | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """One row per run and stage (see `StagePlan`, plus live calls, latency, wall time and cost), and
    the notes (absent data sets). The batch is loaded, `--set` applied, `--only` selected and checked
    as `ragtrial run` does; a missing data set is a note, not an error.
    """
    root = Path(root).resolve()
    outputs = outputs_dir(root, outputs)
    specs, _ = load_batch(batch_path, overrides, notebooks_dir=notebooks_dir(root))
    specs = select_runs(specs, only, batch_path)
    measured = measured_latency(outputs)
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    built: set[Path] = set()
    asked: set[str] = set()  # the cache keys the batch's runs so far will have asked
    caches: dict[str, ResponseCache] = {}
    for spec in specs:
        settings = spec.settings
        where = f"{spec.source or batch_path} [{spec.label or spec.notebook}]"
        absent = absent_data(settings, root)
        # the preflight of `ragtrial run`, but absent data is a note
        check_settings(_without(settings, absent), where, root)
        note = (
            f"absent under the data root ({data_root_origin()}): {', '.join(absent)}; the counts that need "
            "it are projected from the params' sizes or marked unknown"
            if absent
            else ""
        )
        if spec.notebook not in NOTEBOOKS:
            raise ParamsError(
                f"{where}: no estimate for notebook {spec.notebook!r} (known: {', '.join(NOTEBOOKS)})"
            )
        plan_notebook = resolve(NOTEBOOKS.get(spec.notebook).planner)
        dataset = None if "data.path" in absent else load_experiment_dataset(settings.data)
        try:  # as `ragtrial run` stops the run at its data set, before any model call
            if dataset is not None:
                require_gold(dataset, spec.notebook)
        except ParamsError as err:
            rows.append(
                plan_row(spec, unknown("run", f"the run stops before any model call: {err}"), measured)
            )
            notes.append(f"{spec.run_id}: {err}")
            continue
        location = cache_location(settings.cache, root, outputs)
        if str(location) not in caches:
            caches[str(location)] = ResponseCache(location, settings.cache.password_env)
        cache = caches[str(location)]
        ledger = Ledger(spec.run_id)
        # the settings' `outputs/` paths under this outputs folder, as `ragtrial run --outputs` tells its
        # kernels: the saved indexes are looked for where the batch's runs save them
        store = output_path(settings.index.store_path, root, outputs)
        planning = settings.model_copy(
            update={"index": settings.index.model_copy(update={"store_path": str(store)})}
        )
        ctx = PlanContext(planning, spec.run_id, ledger, LLM(settings.llm, cache, ledger, _no_endpoint))
        planner = RunPlanner(spec, ctx, dataset, built, absent)
        plans = plan_notebook(planner)
        for plan in plans:
            rows.append(plan_row(spec, asked_earlier(plan, asked), measured))
        notes += [f"{spec.run_id}: {n}" for n in ([note] if note else []) + planner.notes]
        if not plans:
            notes.append(f"{spec.run_id} ({spec.notebook}): no model call (0 calls, 0 tokens)")
    for cache in caches.values():
        cache.close()
    return pd.DataFrame(rows), notes


def totals(table: pd.DataFrame) -> pd.DataFrame:
    """Per run and for the batch: calls, live calls, tokens, wall time and cost (None when a part of
    it is unknown: an unpriced or unmeasured stage makes the total unknown, never zero), and how
    many stages could not be counted (their data is absent).
    """

    def total(group: pd.DataFrame) -> dict[str, Any]:
        def known_sum(column: str) -> float | None:
            # a stage of unknown count is left out (and counted in unknown_stages), any other
            # unknown figure makes the total unknown
            values = group.loc[group["basis"] != "unknown", column]
            return None if values.isna().any() else float(values.sum())

        return {
            **{
                c: int(group[c].sum())
                for c in ("calls", "live_calls", "prompt_tokens", "completion_tokens_max")
            },
            "wall_s": known_sum("wall_s"),
            "cost": known_sum("cost"),
            "unknown_stages": int((group["basis"] == "unknown").sum()),  # their calls are not in the sums
        }

    groups = list(table.groupby("run_id", sort=False))
    return pd.DataFrame(
        [total(g) for _, g in groups] + [total(table)], index=[r for r, _ in groups] + ["batch"]
    )


def compare_with_ledger(table: pd.DataFrame, ledger: pd.DataFrame) -> pd.DataFrame:
    """One run's estimate (rows of one run_id) against the model calls its ledger recorded: per group
    of ledger stages (plans recorded under a shared stage are one group, on the loosest basis of its
    plans), planned and made calls, and whether they agree (equal when exact, at most the bound when
    an upper bound; a projection always agrees). Stages the ledger has and no plan names form a group
    planned at 0 calls, exact, so they disagree.
    """
    made = ledger[ledger["kind"] != "embedding"].groupby("stage").size()
    groups: list[tuple[set[str], list[dict[str, Any]]]] = []
    for row in table.to_dict("records"):
        stages = set(row["ledger_stages"] or (row["stage"],))
        joined = [g for g in groups if g[0] & stages]
        for g in joined:
            groups.remove(g)
            stages |= g[0]
        groups.append((stages, [r for g in joined for r in g[1]] + [row]))
    planned_stages = set().union(*(g[0] for g in groups)) if groups else set()
    groups += [({stage}, []) for stage in made.index if stage not in planned_stages]
    rows = []
    for stages, plans in groups:
        basis = max((p["basis"] for p in plans), key=BASES.index, default="exact")
        planned = sum(p["calls"] for p in plans)
        n = int(made.reindex(sorted(stages)).fillna(0).sum())
        agrees = n == planned if basis == "exact" else n <= planned if basis == "upper bound" else True
        rows.append(
            {
                "stages": ", ".join(sorted(stages)),
                "basis": basis,
                "planned": planned,
                "made": n,
                "agrees": agrees,
            }
        )
    return pd.DataFrame(rows)


def _duration(seconds: float | None) -> str:
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "unknown"
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def render(table: pd.DataFrame, notes: list[str]) -> str:
    """The readable estimate: a table per run, then the batch total and the notes."""
    if table.empty:
        return "\n".join(
            [
                "== totals: no run of this batch calls a model (0 calls, 0 tokens, cost 0)",
                "",
                *(f"note: {n}" for n in notes),
            ]
        )
    out = []
    shown = [
        "stage",
        "method",
        "basis",
        "calls",
        "cached",
        "tokens",
        "prompt_tokens",
        "completion_tokens_max",
        "wall",
        "cost",
        "note",
    ]
    for run_id, group in table.groupby("run_id", sort=False):
        frame = group.assign(
            cached=group["cached"].map(lambda v: "-" if pd.isna(v) else int(v)),
            wall=group["wall_s"].map(_duration) + " (" + group["latency_source"] + ")",
            cost=group["cost"].map(lambda v: "-" if pd.isna(v) else f"{v:,.2f}"),
        )[shown]
        out += [f"== {group['notebook'].iloc[0]} ({run_id})", frame.to_string(index=False), ""]
    summary = totals(table)
    summary["wall"] = summary["wall_s"].map(_duration)
    summary["cost"] = summary["cost"].map(lambda v: "unknown" if v is None or pd.isna(v) else f"{v:,.2f}")
    out += [
        "== totals (wall time at llm.concurrency; cost in the price settings' currency)",
        summary.drop(columns=["wall_s"]).to_string(),
        "",
    ]
    out += [f"note: {n}" for n in notes]
    return "\n".join(out)
