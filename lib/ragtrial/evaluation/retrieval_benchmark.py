"""Notebook 13: the retrieval benchmark. Retrievers rank passages for a benchmark's questions without
any model call; other systems' published retrieval results are read as bring-your-own retrieval
files; both are scored against the questions' gold passages with the retrieval metrics of `METRICS`
(task "retrieval"), summarized per method x question type with bootstrap intervals, and each method
is paired with its group's strongest plain retriever (McNemar for 0/1 measures, Wilcoxon otherwise,
Holm across the methods of one comparison), on all questions and without the questions a graph
retriever fell back on.

Tables (one row per):
- `retrievals`: question x method: group, reads_graph, ranked, doc_ids (ranked, distinct),
  fallback, latency_s (NaN for imported results), failure (a question the file lacks: not scored).
- `scores`: question x method x measure: value.
- `summary`: method x question type ("all" too) x measure: n, mean, ci_low, ci_high.
- `comparisons`: variant (all questions / without fallbacks) x question type x measure x method: the
  baseline, n, mean_diff with its interval, test, p_value, p_holm, supported.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ragtrial.config.benchmark import BenchmarkSettings
from ragtrial.config.data import data_path
from ragtrial.config.index import IndexSettings
from ragtrial.config.methods import AnswerFile
from ragtrial.config.retrieval import RetrievalSettings
from ragtrial.data.answer_files import answer_file_path, method_answers
from ragtrial.evaluation.answer_metrics import METRICS, metric_entry
from ragtrial.evaluation.findings import Finding, claim_alpha_finding, findings_table
from ragtrial.evaluation.published_figures import read_published
from ragtrial.index.import_graphs import openie_stated_cost
from ragtrial.records import DataError, Document, Question
from ragtrial.retrieval.base import Retriever
from ragtrial.retrieval.registry import RETRIEVERS
from ragtrial.stats import (
    McNemarResult,
    TestResult,
    claim_supported,
    holm_correction,
    latency_summary,
    mcnemar_test,
    paired_bootstrap_diff,
    summary_by_group,
    wilcoxon_signed_rank,
)

KIT_GROUP = "kit"
ALL_TYPES = "all"
WITHOUT_FALLBACKS = "without fallbacks"
ALL_QUESTIONS = "all questions"
UNRESOLVED = "title:"


def reads_graph(retriever: str) -> bool:
    return bool(RETRIEVERS.entry(retriever).metadata["reads_graph"])


def check_model_free(retrievers: Sequence[str], settings: RetrievalSettings) -> None:
    """The benchmark makes no model call: a retriever that would (its `llm_setting` set to "llm")
    is a ValueError naming the setting.
    """
    for name in retrievers:
        setting = RETRIEVERS.entry(name).metadata["llm_setting"]
        if setting and getattr(settings, setting) == "llm":
            raise ValueError(
                f"benchmark.retrievers: {name!r} asks the model under retrieval.{setting}: llm, and the "
                f"benchmark makes no model call; set retrieval.{setting}: string_embedding"
            )


def benchmark_questions(questions: Sequence[Question], settings: BenchmarkSettings) -> list[Question]:
    """The questions with gold passages, of `question_types` (all types when None), a seeded sample of
    `questions_per_type` per type (all when None), in data-set order.
    """
    kept = [q for q in questions if q.gold_doc_ids]
    if settings.question_types is not None:
        kept = [q for q in kept if q.question_type in settings.question_types]
    if settings.questions_per_type is None:
        return kept
    rng = np.random.default_rng(settings.seed)
    chosen: set[str] = set()
    for kind in dict.fromkeys(q.question_type for q in kept):
        ids = [q.question_id for q in kept if q.question_type == kind]
        take = min(settings.questions_per_type, len(ids))
        chosen.update(ids[i] for i in rng.choice(len(ids), size=take, replace=False))
    return [q for q in kept if q.question_id in chosen]


def method_name(retriever: str, graph: str) -> str:
    """A graph retriever's method name on one of the benchmark's graphs; plain retrievers keep theirs."""
    return f"{retriever}:{graph}" if reads_graph(retriever) else retriever


# ---------------------------------------------------------------- retrieving


def run_retrievers(
    retrievers: Mapping[str, Retriever],
    questions: Sequence[Question],
    depth: int,
    doc_of_chunk: Mapping[str, str],
) -> pd.DataFrame:
    """Each retriever's ranking of `depth` passages for each question, as distinct document ids in
    rank order (the chunk items' documents), its fallback and its latency (wall seconds in this
    process; question embeddings are cached per text, so a repeated question is not re-embedded).
    """
    rows = []
    for method, retriever in retrievers.items():
        graph = reads_graph(method.split(":")[0])
        for q in questions:
            start = time.perf_counter()
            found = retriever.retrieve(q.question, depth)
            latency = time.perf_counter() - start
            chunks = [c for item in found.items if item.kind == "chunk" for c in item.chunk_ids]
            rows.append(
                {
                    "question_id": q.question_id,
                    "question_type": q.question_type,
                    "method": method,
                    "group": KIT_GROUP,
                    "reads_graph": graph,
                    "ranked": True,
                    "doc_ids": list(dict.fromkeys(doc_of_chunk[c] for c in chunks)),
                    "fallback": found.fallback,
                    "latency_s": latency,
                    "failure": "",
                    "unresolved_titles": 0,
                }
            )
    return pd.DataFrame(rows)


def _doc_by_title(documents: Sequence[Document]) -> dict[str, list[str]]:
    titles: dict[str, list[str]] = {}
    for doc in documents:
        titles.setdefault(doc.title, []).append(doc.doc_id)
    return titles


def imported_retrievals(
    name: str,
    spec: AnswerFile,
    reads_graph: bool,
    group: str,
    questions: Sequence[Question],
    documents: Sequence[Document],
) -> pd.DataFrame:
    """The retrieval results of file `name` for `questions`, in the `run_retrievers` shape (latency
    NaN: the file states none unless it has latency_s). A question the file lacks is a row with a
    failure ("not in the file"), never scored. A title that names no passage of the data set, or
    several, keeps its rank as "title:<title>" (it cannot be a gold passage, whose titles are unique)
    and is counted in `unresolved_titles`; an unknown passage id is a DataError naming the file,
    record and field.
    """
    if not spec.retrieval:
        raise ValueError(
            f"benchmark.retrieval_files.{name}: methods.answer_files.{name} needs retrieval: true"
        )
    path = answer_file_path(spec)
    rows = method_answers(name, spec)
    known = {d.doc_id for d in documents}
    by_title = _doc_by_title(documents)
    out = []
    for q in questions:
        # the file's fields are read stripped (a published question may end in a space)
        row = rows.get(q.question.strip() if spec.match == "question" else q.question_id)
        doc_ids: list[str] = []
        unresolved = 0
        if row is not None:
            for title in row.titles:
                found = by_title.get(title, [])
                # a title of no passage here (or of several) keeps its rank, and can be no gold passage
                doc_ids.append(found[0] if len(found) == 1 else f"{UNRESOLVED}{title}")
                unresolved += len(found) != 1
            for i, doc_id in enumerate(row.passage_ids):
                if doc_id not in known:
                    raise DataError(str(path), row.record, f"passage_ids[{i}]", f"unknown passage {doc_id!r}")
                doc_ids.append(doc_id)
        out.append(
            {
                "question_id": q.question_id,
                "question_type": q.question_type,
                "method": name,
                "group": group,
                "reads_graph": reads_graph,
                "ranked": spec.ranked,
                "doc_ids": list(dict.fromkeys(doc_ids)),
                "fallback": "",
                "latency_s": row.latency_s if row is not None and row.latency_s else np.nan,
                "failure": "not in the file" if row is None else row.failure,
                "unresolved_titles": unresolved,
            }
        )
    return pd.DataFrame(out)


# ---------------------------------------------------------------- scoring


def measure_names(ks: Sequence[int], ranked: bool) -> list[str]:
    """The retrieval measures of `METRICS` a list supports: each "@k" one at every k when ranked,
    and the rank-free ones always.
    """
    names = []
    for name in METRICS:
        entry = METRICS.entry(name)
        if entry.metadata["task"] != "retrieval" or "summary" not in entry.metadata["reported"].get(
            "retrieval", ()
        ):
            continue
        if name.endswith("@k"):
            names += [name.replace("@k", f"@{k}") for k in ks] if ranked else []
        else:
            names.append(name)
    return names


def score_retrievals(
    retrievals: pd.DataFrame, questions: Sequence[Question], ks: Sequence[int]
) -> pd.DataFrame:
    """One row per scored (question, method, measure): question_type, group, reads_graph, fallback,
    value. Failed rows are not scored (they stay in `retrievals` with their failure).
    """
    gold = {q.question_id: q.gold_doc_ids for q in questions}
    rows = []
    for r in retrievals[retrievals["failure"] == ""].itertuples(index=False):
        for measure in measure_names(ks, bool(r.ranked)):
            name, _, k = measure.partition("@")
            score = metric_entry(measure).load()
            value = score(r.doc_ids, gold[r.question_id], int(k) if k else None)
            rows.append(
                {
                    "question_id": r.question_id,
                    "question_type": r.question_type,
                    "method": r.method,
                    "group": r.group,
                    "reads_graph": r.reads_graph,
                    "fallback": r.fallback,
                    "measure": measure,
                    "value": float(value),
                }
            )
    return pd.DataFrame(rows)


def _with_all_types(scores: pd.DataFrame) -> pd.DataFrame:
    """The scores under their question type and under "all"; a data set of one type is "all" only."""
    everything = scores.assign(question_type=ALL_TYPES)
    if scores["question_type"].nunique() < 2:
        return everything
    return pd.concat([scores, everything], ignore_index=True)


def benchmark_summary(scores: pd.DataFrame, n_resamples: int, seed: int) -> pd.DataFrame:
    """Mean of each measure per method x question type (and "all") with a bootstrap interval."""
    keys = ["group", "method", "reads_graph", "question_type", "measure"]
    return summary_by_group(_with_all_types(scores), keys, "value", n_resamples, seed=seed)


def failure_counts(retrievals: pd.DataFrame) -> pd.DataFrame:
    """Per method: questions, fallbacks (a graph retriever that linked no usable entity) and rows not
    scored (a question an imported file lacks), with the reasons, and retrieved titles that name no
    passage of the data set.
    """
    rows = []
    for (group, method), part in retrievals.groupby(["group", "method"], sort=False):
        fell = part[part["fallback"] != ""]
        failed = part[part["failure"] != ""]
        rows.append(
            {
                "group": group,
                "method": method,
                "questions": len(part),
                "fallbacks": len(fell),
                "fallback_reasons": "; ".join(
                    f"{k}: {v}" for k, v in fell["fallback"].value_counts().items()
                ),
                "not_scored": len(failed),
                "not_scored_reasons": "; ".join(
                    f"{k}: {v}" for k, v in failed["failure"].value_counts().items()
                ),
                "unresolved_titles": int(part["unresolved_titles"].sum()),
            }
        )
    return pd.DataFrame(rows)


def latency_table(retrievals: pd.DataFrame) -> pd.DataFrame:
    """Per method with measured latencies: n, p50 and p95 milliseconds per question."""
    timed = retrievals.dropna(subset=["latency_s"])
    rows = [
        {
            "group": group,
            "method": method,
            "n": len(part),
            "p50_ms": 1000 * float(latency["p50"]),
            "p95_ms": 1000 * float(latency["p95"]),
        }
        for (group, method), part in timed.groupby(["group", "method"], sort=False)
        for latency in [latency_summary(part["latency_s"])]
    ]
    return pd.DataFrame(rows, columns=["group", "method", "n", "p50_ms", "p95_ms"])


# ---------------------------------------------------------------- comparisons


def group_measure(summary: pd.DataFrame, group: str, lead_measure: str) -> str:
    """The measure a group is compared on: the lead measure, or for a group whose lists are unranked
    (no "@k" measure computed) `all_supporting` over the whole list.
    """
    measures = set(summary.loc[summary["group"] == group, "measure"])
    return lead_measure if lead_measure in measures else "all_supporting"


def baselines(summary: pd.DataFrame, settings: BenchmarkSettings) -> pd.DataFrame:
    """Per group: its compared measure and the baseline every method of the group is paired with:
    the named retriever, or the plain method with the highest mean measure over all its questions
    (ties: the first in the group's order). A group without a plain method has no baseline.
    """
    rows = []
    for group in dict.fromkeys(summary["group"]):
        measure = group_measure(summary, group, settings.lead_measure)
        mine = summary[
            (summary["group"] == group)
            & (summary["measure"] == measure)
            & (summary["question_type"] == ALL_TYPES)
        ]
        if settings.compare_with != "strongest" and group == KIT_GROUP:
            baseline, rule = settings.compare_with, "named (benchmark.compare_with)"
        else:
            plain = mine[~mine["reads_graph"].astype(bool)]
            if plain.empty:
                continue
            best = plain.iloc[int(np.argmax(plain["mean"].to_numpy()))]
            baseline, rule = (
                best["method"],
                "the plain method with the highest mean of this measure, on these questions",
            )
        rows.append({"group": group, "measure": measure, "baseline": baseline, "rule": rule})
    return pd.DataFrame(rows, columns=["group", "measure", "baseline", "rule"])


def _paired(scores: pd.DataFrame, method: str, baseline: str, drop_fallbacks: bool) -> pd.DataFrame:
    mine = scores[scores["method"] == method]
    if drop_fallbacks:
        mine = mine[mine["fallback"] == ""]
    base = scores[scores["method"] == baseline][["question_id", "value"]]
    return mine.merge(base, on="question_id", suffixes=("", "_baseline"))


def comparisons(scores: pd.DataFrame, chosen: pd.DataFrame, n_resamples: int, seed: int) -> pd.DataFrame:
    """Each method against its group's baseline on the questions both have, per question type (and
    "all"), on the group's measure and on all_supporting: mean difference (method - baseline) with a
    paired bootstrap interval, McNemar (0/1 measures) or Wilcoxon, Holm across the methods of one
    (variant, group, question type, measure), and the claim rule. Variant "without fallbacks" drops
    the questions the method fell back on.
    """
    rows: list[dict[str, Any]] = []
    typed = _with_all_types(scores)
    for c in chosen.itertuples(index=False):
        for measure in dict.fromkeys([c.measure, "all_supporting"]):
            binary = metric_entry(measure).metadata["paired_test"] == "mcnemar"
            of_measure = typed[(typed["group"] == c.group) & (typed["measure"] == measure)]
            for variant in (ALL_QUESTIONS, WITHOUT_FALLBACKS):
                for qtype, part in of_measure.groupby("question_type", sort=False):
                    block = []
                    for method in dict.fromkeys(part["method"]):
                        if method == c.baseline:
                            continue
                        pairs = _paired(part, method, c.baseline, variant == WITHOUT_FALLBACKS)
                        if variant == WITHOUT_FALLBACKS and len(pairs) == len(
                            _paired(part, method, c.baseline, False)
                        ):
                            continue  # no fallback: the same comparison as on all questions
                        row = {
                            "variant": variant,
                            "group": c.group,
                            "question_type": qtype,
                            "measure": measure,
                        }
                        graph = bool(part.loc[part["method"] == method, "reads_graph"].iloc[0])
                        row |= {"method": method, "graph": graph, "baseline": c.baseline, "n": len(pairs)}
                        block.append(row | _difference(pairs, binary, n_resamples, seed))
                    _holm(block)
                    rows += block
    columns = [
        "variant",
        "group",
        "question_type",
        "measure",
        "method",
        "graph",
        "baseline",
        "n",
        "mean_diff",
    ]
    columns += ["ci_low", "ci_high", "wins", "losses", "test", "p_value", "p_holm", "supported", "status"]
    return pd.DataFrame(rows, columns=columns)


def _difference(pairs: pd.DataFrame, binary: bool, n_resamples: int, seed: int) -> dict[str, Any]:
    a, b = pairs["value"].to_numpy(float), pairs["value_baseline"].to_numpy(float)
    if len(pairs) < 2:
        return {"status": f"{len(pairs)} paired question(s): no interval or test"}
    ci = paired_bootstrap_diff(a, b, n_resamples, seed=seed)
    diff = a - b
    test: McNemarResult | TestResult | None = mcnemar_test(a, b) if binary else None
    if not binary and np.any(diff != 0):
        test = wilcoxon_signed_rank(a, b)
    return {
        "mean_diff": ci.mean,
        "ci_low": ci.low,
        "ci_high": ci.high,
        "wins": int((diff > 0).sum()),
        "losses": int((diff < 0).sum()),
        "test": test.method if test else "none (no difference)",
        "p_value": test.p_value if test else 1.0,
        "status": "ok",
    }


def _holm(block: list[dict[str, Any]]) -> None:
    tested = [row for row in block if row["status"] == "ok"]
    if not tested:
        return
    adjusted = holm_correction([row["p_value"] for row in tested])["p_holm"].to_numpy()
    for row, p in zip(tested, adjusted, strict=True):
        row["p_holm"] = float(p)
        row["supported"] = claim_supported(row["ci_low"], row["ci_high"], float(p))


# ---------------------------------------------------------------- the graph's bill


GRAPH_PARTS = ("graph", "communities", "entity_embeddings")


def stated_graph_costs(settings: IndexSettings, graphs: Sequence[str]) -> dict[str, tuple[float | None, str]]:
    """The cost the published graph's own file states (a HippoRAG OpenIE file's approx_total_cost),
    by graph; a GraphRAG output folder states none.
    """
    if "import" not in graphs or not settings.import_path:
        return {}
    location = data_path(settings.import_path)
    if location.is_file():
        return {"import": openie_stated_cost(location)}
    return {"import": (None, f"{settings.import_path} states no cost")}


def graph_bills(
    costs: Mapping[str, pd.DataFrame], stated: Mapping[str, tuple[float | None, str]]
) -> pd.DataFrame:
    """Per graph: what building it cost here (model calls, and wall seconds of its parts: the graph,
    its communities and its entity embeddings; `index.costs.part_costs` of the graph's index) and,
    for a published graph, the cost its publication states with where it is stated.
    """
    rows = []
    for graph, parts in costs.items():
        own = parts[parts["part"].isin(GRAPH_PARTS)]
        value, where = stated.get(graph, (None, ""))
        rows.append(
            {
                "graph": graph,
                "model_calls": int(own["calls"].sum()),
                "wall_s": float(own["wall_s"].sum()),
                "passages_wall_s": float(parts.loc[~parts["part"].isin(GRAPH_PARTS), "wall_s"].sum()),
                "published_cost_usd": np.nan if value is None else value,
                "published_cost_source": where,
            }
        )
    return pd.DataFrame(rows)


def benchmark_findings(dataset: str, questions: Sequence[Question]) -> pd.DataFrame:
    """The figures the prose states that no other table holds: the questions benchmarked (subject:
    the data set) and the claim rule's level.
    """
    return findings_table(
        [
            Finding(
                "dataset_questions",
                "questions with gold passages benchmarked",
                len(questions),
                "retrievals",
                dataset,
            ),
            claim_alpha_finding(),
        ]
    )


# ---------------------------------------------------------------- published figures


PUBLISHED_RETRIEVAL = "retrieval.csv"


def published_figures(dataset: str) -> pd.DataFrame:
    """The published retrieval figures the kit reproduces on loader `dataset` (the data file
    `evaluation/published/retrieval.csv`: each with its paper, source, table and row, the kit's
    method and measure it compares with, and the published sample and corpus), values as shares.
    """
    table = read_published(PUBLISHED_RETRIEVAL)
    return table[table["dataset"] == dataset].reset_index(drop=True)


def reproduction_table(summary: pd.DataFrame, published: pd.DataFrame) -> pd.DataFrame:
    """Each published figure whose kit method ran beside the kit's mean for it (all questions) and
    interval: whether the published value lies in the interval, whether the kit's mean rounds to it
    at its printed precision, and each method's rank by the published and by the kit's figure within
    its (paper, table, measure).
    """
    overall = summary[summary["question_type"] == ALL_TYPES].set_index(["method", "measure"])
    rows = []
    for p in published.itertuples(index=False):
        key = (p.kit_method, p.kit_measure)
        if key not in overall.index:
            continue
        kit = overall.loc[key]
        rows.append(
            {
                "paper": p.paper,
                "source": p.source,
                "table": p.table,
                "published_row": p.row,
                "kit_method": p.kit_method,
                "kit_measure": p.kit_measure,
                "published": p.published,
                "kit_n": int(kit["n"]),
                "kit_mean": float(kit["mean"]),
                "kit_ci_low": float(kit["ci_low"]),
                "kit_ci_high": float(kit["ci_high"]),
                "in_interval": bool(kit["ci_low"] <= p.published <= kit["ci_high"]),
                "same_as_printed": bool(
                    round(float(kit["mean"]) * (100 if p.scale == "percent" else 1), p.decimals)
                    == float(p.value)
                ),
                "published_sample": p.sample,
                "published_corpus": p.corpus,
                "note": p.note,
            }
        )
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    group = table.groupby(["paper", "table", "kit_measure"], sort=False)
    table["published_rank"] = group["published"].rank(ascending=False, method="min").astype(int)
    table["kit_rank"] = group["kit_mean"].rank(ascending=False, method="min").astype(int)
    return table


# ---------------------------------------------------------------- the verdict's real evidence


REAL_EVIDENCE_COLUMNS = [
    "run_id",
    "data_set",
    "question_type",
    "measure",
    "method",
    "baseline",
    "n",
    "mean_diff",
    "ci_low",
    "ci_high",
    "p_holm",
    "supported",
    "graph",
    "graph_model_calls",
    "graph_wall_s",
    "passages_wall_s",
    "published_cost_usd",
    "published_cost_source",
]


def best_graph_comparisons(comparisons: pd.DataFrame, group: str, measure: str) -> pd.DataFrame:
    """Per question type (in the table's order), the graph method of `group` with the largest mean
    difference from the baseline on `measure`, on all questions.
    """
    rows = comparisons[
        (comparisons["variant"] == ALL_QUESTIONS)
        & (comparisons["group"] == group)
        & (comparisons["measure"] == measure)
        & comparisons["graph"].astype(bool)
        & (comparisons["status"] == "ok")
    ]
    best = [part.loc[part["mean_diff"].idxmax()] for _, part in rows.groupby("question_type", sort=False)]
    return pd.DataFrame(best, columns=comparisons.columns)


def real_evidence(runs: Sequence[tuple[str, str, Mapping[str, pd.DataFrame]]]) -> pd.DataFrame:
    """Notebook 10's real evidence, from the notebook-13 runs of its batch (run id, data set, saved
    tables): per data set and question type, the kit's graph retriever with the largest mean
    difference from the strongest plain retriever on the lead measure, on all questions, with its
    interval, Holm-adjusted p (across that run's graph and plain retrievers) and the claim rule,
    and the bill of the graph it read (built here: model calls and wall seconds; published: the cost
    its publication states).
    """
    rows = []
    for run_id, data_set, tables in runs:
        chosen = tables["baselines"].set_index("group")
        if KIT_GROUP not in chosen.index:
            continue
        best_rows = best_graph_comparisons(tables["comparisons"], KIT_GROUP, chosen.loc[KIT_GROUP, "measure"])
        bills = tables["graph_bills"].set_index("graph")
        for _, best in best_rows.iterrows():
            graph = str(best["method"]).rpartition(":")[2]
            bill = bills.loc[graph]
            rows.append(
                {
                    "run_id": run_id,
                    "data_set": data_set,
                    **{c: best[c] for c in ("question_type", "measure", "method", "baseline", "n")},
                    **{c: best[c] for c in ("mean_diff", "ci_low", "ci_high", "p_holm", "supported")},
                    "graph": graph,
                    "graph_model_calls": int(bill["model_calls"]),
                    "graph_wall_s": float(bill["wall_s"]),
                    "passages_wall_s": float(bill["passages_wall_s"]),
                    "published_cost_usd": bill["published_cost_usd"],
                    "published_cost_source": bill["published_cost_source"],
                }
            )
    return pd.DataFrame(rows, columns=REAL_EVIDENCE_COLUMNS)
