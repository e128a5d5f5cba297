"""Running methods over questions: one row per question x method with the answer or its failure,
the context shown, calls, tokens and latency; every recorded failure as a table; and how often each
method's retrieval fell back.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

import pandas as pd

from ragtrial.llm.plan import QUESTION_TOKENS, StagePlan, frame_tokens, projected, unknown
from ragtrial.prompts import load_prompt
from ragtrial.records import Question, ordered_union
from ragtrial.retrieval.packing import format_context

if TYPE_CHECKING:  # experiment tables work on answer frames; only run_methods needs live methods
    from ragtrial.config.methods import AnswerSettings
    from ragtrial.config.settings import Settings
    from ragtrial.methods.base import Answer, Method


def run_methods(methods: Sequence[Method], questions: Sequence[Question]) -> pd.DataFrame:
    """One row per question x method: the answer or its failure, the context shown (ids, tokens per
    kind), calls, tokens and latency.
    """
    return answers_frame(answer_all([(method, question) for question in questions for method in methods]))


def answer_all(units: Sequence[tuple[Method, Question]]) -> list[Answer]:
    """Each method's answer to its question, concurrently up to `llm.concurrency` (the methods'
    shared model client), in the order of `units`. Each answer's calls and tokens are its own:
    `Method.answer` tallies them in the context its unit runs in.
    """
    if not units:
        return []
    llm = units[0][0].generator.llm
    return llm.fan_out(lambda unit: unit[0].answer(unit[1]), units, label="answers")


# The columns of an answers table (`tokens_<kind>` come with the kinds the answers showed).
ANSWER_COLUMNS = [
    "question_id",
    "method",
    "text",
    "failure",
    "fallback",
    "route",
    "context_ready",
    "doc_ids",
    "context_ids",
    "context_entity_ids",
    "context_relation_ids",
    "context_community_ids",
    "context_kinds",
    "passage_ids",
    "context_text",
    "context_items",
    "context_tokens",
    "calls",
    "cached_calls",
    "prompt_tokens",
    "completion_tokens",
    "latency_s",
    "notes",
    "failures",
]


def answers_frame(answers: Iterable[Answer]) -> pd.DataFrame:
    """Answers as rows; `tokens_<kind>` columns hold context tokens per kind (0 where absent).
    `context_text` is an object column of interned strings: equal contexts are one string in memory,
    in this frame and in every other frame holding it (a judge at paper size keeps 25 trials' answers,
    where most contexts repeat: 07's 781 MB of context text held 250 MB distinct, issue 36).
    """
    rows, contexts = [], []
    for a in answers:
        contexts.append(sys.intern(format_context(a.context)) if a.context_ready else "")
        rows.append(
            {
                "question_id": a.question_id,
                "method": a.method,
                "text": a.text,
                "failure": a.failure,
                "fallback": a.fallback,
                "route": a.notes.get("route", ""),
                "context_ready": a.context_ready,
                "doc_ids": a.doc_ids,
                "context_ids": ordered_union(item.chunk_ids for item in a.context),
                # What the context held, as index ids, so every retrieval diagnostic is recomputable
                # without a model call (evaluation.diagnostics adds the entities of shown passages).
                "context_entity_ids": ordered_union(item.entity_ids for item in a.context),
                "context_relation_ids": ordered_union(item.relation_ids for item in a.context),
                "context_community_ids": ordered_union(item.community_ids for item in a.context),
                "context_kinds": [item.kind for item in a.context],
                "passage_ids": ordered_union(item.chunk_ids for item in a.context if item.kind == "chunk"),
                "context_items": len(a.context),
                "context_tokens": sum(a.context_tokens.values()),
                **{f"tokens_{kind}": n for kind, n in a.context_tokens.items()},
                "calls": a.calls,
                "cached_calls": a.cached_calls,
                "prompt_tokens": a.prompt_tokens,
                "completion_tokens": a.completion_tokens,
                "latency_s": a.latency_s,
                "notes": json.dumps(a.notes, sort_keys=True, default=str),
                "failures": a.failures,
            }
        )
    # no answer: still the columns
    frame = pd.DataFrame(rows, columns=None if rows else [c for c in ANSWER_COLUMNS if c != "context_text"])
    # an object column holds the interned strings themselves (a str column would copy each one)
    frame.insert(ANSWER_COLUMNS.index("context_text"), "context_text", pd.Series(contexts, dtype=object))
    kinds = [c for c in frame.columns if c.startswith("tokens_")]
    return frame.fillna({c: 0 for c in kinds}).astype({c: int for c in kinds})


def failures_table(answers: pd.DataFrame) -> pd.DataFrame:
    """Every recorded failure (item id, method, stage, kind, detail), fatal or not; `answer_lost`
    says whether the method ended with no answer for that question.
    """
    rows = [
        (r.question_id, r.method, f["stage"], f["kind"], f["detail"], r.failure != "")
        for r in answers.itertuples(index=False)
        for f in r.failures
    ]
    return pd.DataFrame(rows, columns=["question_id", "method", "stage", "kind", "detail", "answer_lost"])


def fallback_table(answers: pd.DataFrame) -> pd.DataFrame:
    """Per method: the questions whose context was built (`retrieved`), how many of them fell back
    (`fallbacks`: e.g. a graph retriever that linked no entity showed vector results or no context,
    per retrieval.graph_fallback), their share (`fallback_rate`; undefined, NaN, when nothing was
    retrieved) and the most common reason (`most_common`).
    """
    rows = []
    for method, group in answers.groupby("method", sort=False):
        built = group.loc[group["context_ready"], "fallback"]
        fell_back = built[built != ""]
        rows.append(
            {
                "method": method,
                "retrieved": len(built),
                "fallbacks": len(fell_back),
                "fallback_rate": len(fell_back) / len(built) if len(built) else float("nan"),
                "most_common": fell_back.value_counts().index[0] if len(fell_back) else "",
            }
        )
    return pd.DataFrame(rows, columns=["method", "retrieved", "fallbacks", "fallback_rate", "most_common"])


# ---------------------------------------------------------------- before the calls (ragtrial estimate)


def answered_by_the_kit(method_names: Sequence[str], settings: Settings) -> list[str]:
    """The methods whose answers the kit's generator writes: not imported, not an upstream system's."""
    from ragtrial.methods.registry import METHODS

    return [
        name
        for name in method_names
        if name not in settings.methods.answer_files
        and not (name in METHODS and "system" in METHODS.entry(name).metadata)
    ]


def planned_answers(
    method_names: Sequence[str],
    n_questions: int,
    cfg: AnswerSettings,
    settings: Settings,
    basis: str = "exact",
    map_batches: Mapping[str, MapBatches] | None = None,
) -> list[StagePlan]:
    """The calls `run_methods` makes for `method_names` over `n_questions` questions, none sent: one
    answer per question and method (a short answer whose reply opens with a line break is asked again,
    so with `first_line_only` that is at most twice); a retriever that lists the question's entities
    or keywords with the model adds one call per question; a map-reduce method adds its map calls,
    one per batch of its units per question: `map_batches` by method where the planner counted or
    projected them (`runner.batch_estimate`), else projected at one per `methods.map_budget` tokens of
    `max_reports` (or `max_cluster_size`) reports. Prompts are projected at the context budget: the
    contexts need retrieval over an index.
    """
    from ragtrial.methods.registry import METHODS
    from ragtrial.retrieval.registry import planned_listing

    answer = load_prompt(cfg.answer_prompt)
    plans = []
    for name in method_names:
        if name in settings.methods.answer_files:
            continue  # imported answers: no model call
        if name in METHODS and "system" in METHODS.entry(name).metadata:
            plans.append(
                unknown(
                    "upstream", f"{name}: the system decides its own calls (its prompts, its index build)"
                )
            )
            continue
        metadata = METHODS.entry(name).metadata if name in METHODS else {}
        family, map_reduce = metadata.get("family", ""), metadata.get("map_reduce", False)
        answer_calls = n_questions * (2 if cfg.first_line_only else 1)
        why = [
            *(["a reply opening with a line break is asked again"] if cfg.first_line_only else []),
            *(["no reduce call when no map point helps"] if map_reduce else []),
        ]
        plans.append(
            projected(
                "answer",
                answer_calls,
                answer_calls * (frame_tokens(answer) + cfg.context_budget + QUESTION_TOKENS),
                cfg.answer_max_tokens,
                "upper bound" if why else basis,
                "text",
                "; ".join(why),
                method=name,
            )
        )
        if "route_prompt" in metadata:  # one routing call, then the routed method's retrieval
            route = load_prompt(metadata["route_prompt"])
            plans.append(
                projected(
                    "route",
                    n_questions,
                    n_questions * (frame_tokens(route) + QUESTION_TOKENS),
                    16,
                    basis,
                    "json",
                    method=name,
                )
            )
        # Integration and Selection retrieve with the graph method too (Selection only when routed there)
        retriever = settings.methods.graph_method if family == "both" else metadata.get("retriever", name)
        plans += planned_listing(
            retriever,
            settings.retrieval,
            n_questions,
            "upper bound" if "route_prompt" in metadata else basis,
            name,
        )
        if map_reduce:
            batches = (map_batches or {}).get(name) or unknown_map_batches(settings)
            maps = n_questions * batches.per_question
            plans.append(
                projected(
                    "map",
                    maps,
                    maps * settings.methods.map_budget,
                    settings.methods.map_max_tokens,
                    batches.basis,
                    "json",
                    batches.note,
                    method=name,
                )
            )
    return plans


class MapBatches(NamedTuple):
    """A map-reduce method's map calls per question (one per batch of its units), on what basis."""

    per_question: int
    basis: str
    note: str


def unknown_map_batches(settings: Settings) -> MapBatches:
    """Without the units: `max_reports` (else `max_cluster_size`) reports at `report_max_tokens`."""
    index = settings.index
    mapped = (index.max_reports or index.max_cluster_size) * index.report_max_tokens
    return MapBatches(
        max(1, -(-mapped // settings.methods.map_budget)),
        "projected",
        "map calls follow the reports (chunks) found",
    )
