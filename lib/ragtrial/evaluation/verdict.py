"""The verdict (notebook 10): per question type, each graph method against the strongest non-graph
baseline on every measure the combined runs hold, with the cost per query that includes the index
build amortized over N queries, break-even and power.

The baseline is chosen by a rule stated before any result is read (`verdict.baseline_order`: the
first non-graph method the run answered with; for a judged pair, the first among the graph method's
judged partners), never by its scores. Paired differences are graph minus baseline on the questions
both answered; every left-out question is counted with its reason. Holm adjusts across every
comparison of one measure (methods x question types, "all" included), and a difference is a finding
only under the claim rule (`stats.claim_supported`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ragtrial import stats
from ragtrial.config.base import ParamsError
from ragtrial.config.notebooks import answer_cost_tables
from ragtrial.config.verdict import VerdictSettings
from ragtrial.evaluation.verdict_measures import MEASURES, MissingTable, observations
from ragtrial.methods.registry import METHODS, index_parts

if TYPE_CHECKING:
    from ragtrial.config.settings import Settings

ALL_TYPES = "all"
GRAPH_FAMILIES = ("graph", "community_reports", "both")  # methods that read a graph built at indexing
COST_UNITS = ("calls", "tokens", "embedding_tokens", "seconds", "money")


def is_graph_method(method: str) -> bool:
    """Whether the method's context comes from a graph the index build made (METHODS `family`)."""
    return method in METHODS and METHODS.entry(method).metadata["family"] in GRAPH_FAMILIES


def check_measure_keys(settings: VerdictSettings) -> None:
    """The measures named as keys of `quality_value` and `target_difference` exist."""
    for key in ("quality_value", "target_difference"):
        unknown = MEASURES.unknown(list(getattr(settings, key)))
        if unknown:
            raise ParamsError(
                f"key 'verdict.{key}': unknown measure(s) {', '.join(unknown)}; known: {', '.join(MEASURES)}"
            )


# ---------------------------------------------------------------- inputs

RunTable = Callable[[str, str], pd.DataFrame | None]  # (notebook, table) -> the combined run's table


def read_measures(
    table: RunTable, notebooks: Collection[str]
) -> tuple[dict[str, pd.DataFrame], dict[str, str]]:
    """Every measure the combined runs hold (measure -> observations), and why each other one is not
    read (no run of its notebook, a table that run did not save, no answer in it).
    """
    read, unread = {}, {}
    for measure in MEASURES:
        notebook = MEASURES.entry(measure).metadata["notebook"]
        if notebook not in notebooks:
            unread[measure] = f"no run of {notebook} combined"
            continue
        try:
            frame = observations(measure, partial(table, notebook))
        except MissingTable as err:
            unread[measure] = str(err)
            continue
        if frame.empty:
            unread[measure] = f"the run of {notebook} holds no answer"
        else:
            read[measure] = frame
    return read, unread


def read_answers(table: RunTable, notebooks: Collection[str]) -> dict[str, pd.DataFrame]:
    """The answers table of each combined notebook that answers (what its per-query cost is read from)."""
    found = {nb: table(nb, name) for nb, name in answer_cost_tables().items() if nb in notebooks}
    return {nb: frame for nb, frame in found.items() if frame is not None}


def parts_read(
    answers: Mapping[str, pd.DataFrame], settings_of: Callable[[str], Settings]
) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """Per (notebook, method), the index parts the method read under that run's settings."""
    return {
        (notebook, method): index_parts(method, settings_of(notebook))
        for notebook, frame in answers.items()
        for method in pd.unique(frame["method"])
        if method in METHODS
    }


# ---------------------------------------------------------------- pairing


def _baseline(candidates: Sequence[str], order: Sequence[str]) -> str | None:
    present = set(candidates)
    return next((m for m in order if m in present and not is_graph_method(m)), None)


def pair_with_baselines(
    observations: pd.DataFrame, baseline_order: Sequence[str]
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(pairs, left_out, baselines) for one measure's observations.

    pairs: measure, method, baseline, question_id, question_type, method_value, baseline_value, diff
    (graph minus baseline, signed so that positive is better). left_out: measure, method, baseline,
    question_id, question_type, reason. baselines: measure, method, baseline, rule.
    """
    measure = str(observations["measure"].iloc[0])
    sign = 1.0 if MEASURES.entry(measure).metadata["higher_is_better"] else -1.0
    pairs, left_out, chosen = [], [], []
    for method in [m for m in pd.unique(observations["method"]) if is_graph_method(m)]:
        own = observations[observations["method"] == method]
        pairwise = bool((own["partner"] != "").any())
        candidates = own["partner"] if pairwise else observations["method"]
        baseline = _baseline(list(pd.unique(candidates)), baseline_order)
        where = "its judged partners" if pairwise else "the methods the run answered with"
        if baseline is None:
            rule = f"no method of verdict.baseline_order among {where}"
            chosen.append({"measure": measure, "method": method, "baseline": "", "rule": rule})
            continue
        rule = f"the first of verdict.baseline_order among {where}"
        chosen.append({"measure": measure, "method": method, "baseline": baseline, "rule": rule})
        if pairwise:
            mine = own[own["partner"] == baseline]
            theirs = observations[(observations["method"] == baseline) & (observations["partner"] == method)]
        else:
            mine = own
            theirs = observations[(observations["method"] == baseline) & (observations["partner"] == "")]
        joined = mine.merge(theirs, on="question_id", how="outer", suffixes=("_m", "_b"))
        for row in joined.itertuples(index=False):
            question_type = (
                row.question_type_m if isinstance(row.question_type_m, str) else row.question_type_b
            )
            key = {"measure": measure, "method": method, "baseline": baseline, "question_id": row.question_id}
            key["question_type"] = question_type
            reason = _left_out_reason(row, method, baseline)
            if reason:
                left_out.append({**key, "reason": reason})
                continue
            diff = sign * (row.value_m - row.value_b)
            pairs.append({**key, "method_value": row.value_m, "baseline_value": row.value_b, "diff": diff})
    pair_columns = ["measure", "method", "baseline", "question_id", "question_type"]
    return (
        pd.DataFrame(pairs, columns=[*pair_columns, "method_value", "baseline_value", "diff"]),
        pd.DataFrame(left_out, columns=[*pair_columns, "reason"]),
        pd.DataFrame(chosen, columns=["measure", "method", "baseline", "rule"]),
    )


def _left_out_reason(row: object, method: str, baseline: str) -> str:
    for who, status in ((method, row.status_m), (baseline, row.status_b)):  # type: ignore[attr-defined]
        if not isinstance(status, str):
            return f"{who} has no answer to this question"
        if status != "ok":
            return f"{who}: {status}"
    return ""


# ---------------------------------------------------------------- comparisons


def compare(
    pairs: pd.DataFrame, left_out: pd.DataFrame, settings: VerdictSettings, types: Sequence[str]
) -> pd.DataFrame:
    """One row per (measure, method, baseline, question type incl. "all"): n, left_out, mean_diff with
    its paired bootstrap interval, the measure's paired test, p_holm across the measure's comparisons,
    supported (the claim rule), and the power analysis of the observed paired differences.
    """
    rows, differences = [], []  # a comparison's row, and its paired differences for the power analysis
    groups = pairs.groupby(["measure", "method", "baseline"], sort=False)
    for (measure, method, baseline), group in groups:
        entry = MEASURES.entry(measure)
        target = settings.target_difference.get(measure, entry.metadata["difference"])
        dropped = left_out[(left_out["measure"] == measure) & (left_out["method"] == method)]
        present = set(group["question_type"]) | set(dropped["question_type"])
        for question_type in [ALL_TYPES, *(t for t in types if t in present)]:
            part = group if question_type == ALL_TYPES else group[group["question_type"] == question_type]
            out = (
                dropped if question_type == ALL_TYPES else dropped[dropped["question_type"] == question_type]
            )
            row = {"measure": measure, "method": method, "baseline": baseline, "question_type": question_type}
            row |= {"n": len(part), "left_out": len(out), "target_difference": target}
            rows.append(row | _difference(part, entry.metadata["binary"], settings))
            differences.append(part["diff"].to_numpy(float))
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    return _adjusted(table, differences, settings)


def _difference(part: pd.DataFrame, binary: bool, settings: VerdictSettings) -> dict[str, object]:
    if part.empty:
        nan = math.nan
        return {
            "mean_diff": nan,
            "ci_low": nan,
            "ci_high": nan,
            "test": "none: no paired question",
            "p_value": nan,
        }
    ci = stats.paired_bootstrap_diff(
        part["diff"], np.zeros(len(part)), settings.bootstrap_resamples, seed=settings.seed
    )
    if binary:  # both tests are two-sided, so the sign of the measure does not change p
        test = stats.mcnemar_test(part["method_value"], part["baseline_value"])
        name, p = test.method, test.p_value
    else:
        result = stats.wilcoxon_signed_rank(part["diff"], np.zeros(len(part)))
        name, p = result.method, result.p_value
    return {"mean_diff": ci.mean, "ci_low": ci.low, "ci_high": ci.high, "test": name, "p_value": p}


def _adjusted(table: pd.DataFrame, differences: list[np.ndarray], settings: VerdictSettings) -> pd.DataFrame:
    """p_holm per measure (comparisons that ran a test), the claim rule, and the power analysis at
    the family's size.
    """
    table["p_holm"] = math.nan
    for _, rows in table.groupby("measure", sort=False):
        tested = rows[rows["p_value"].notna()]
        if not tested.empty:
            adjusted = stats.holm_correction(tested["p_value"].tolist(), settings.alpha)["p_holm"]
            table.loc[tested.index, "p_holm"] = adjusted.to_numpy()
    table["supported"] = [
        stats.claim_supported(lo, hi, p, settings.alpha)
        for lo, hi, p in zip(table["ci_low"], table["ci_high"], table["p_holm"], strict=True)
    ]
    family = table.groupby("measure")["p_value"].transform(lambda p: max(int(p.notna().sum()), 1))
    power_rows = []
    for row, m, diffs in zip(table.itertuples(index=False), family, differences, strict=True):
        result = stats.power_analysis(diffs, settings.alpha, settings.power, row.target_difference, int(m))
        power_rows.append(
            {
                "sd_diff": result.sd,
                "detectable": result.mde,
                "detectable_adjusted": result.mde_adjusted,
                "questions_needed": result.n_needed,
                "questions_needed_adjusted": result.n_needed_adjusted,
                "enough_questions": result.enough,
                "power_status": result.status,
            }
        )
    return pd.concat([table, pd.DataFrame(power_rows, index=table.index)], axis=1)


# ---------------------------------------------------------------- costs


def answer_costs(answers: pd.DataFrame, notebook: str) -> pd.DataFrame:
    """Per method, what answering one question cost in the run of `notebook`: calls, prompt and
    completion tokens (cache hits included: what the work costs), and model seconds from the answers
    paid live (a replayed answer took no model time; `live_answers` says how many the mean is over).
    """
    frame = answers[answers["replicate"] == 0] if "replicate" in answers.columns else answers
    rows = []
    for method, group in frame.groupby("method", sort=False):
        live = group[group["cached_calls"] == 0]
        rows.append(
            {
                "notebook": notebook,
                "method": method,
                "questions": len(group),
                "calls": float(group["calls"].mean()),
                "prompt_tokens": float(group["prompt_tokens"].mean()),
                "completion_tokens": float(group["completion_tokens"].mean()),
                "seconds": float(live["latency_s"].mean()) if len(live) else math.nan,
                "live_answers": len(live),
            }
        )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Pricing:
    """Prices per million tokens of the LLM (prompt, completion) and the embedding model, in the price
    settings' currency (None: not priced).
    """

    prompt: float | None
    completion: float | None
    embedding: float | None = None

    @classmethod
    def of(cls, settings: Settings) -> Pricing:
        llm = settings.llm
        return cls(
            llm.price_prompt_per_mtok, llm.price_completion_per_mtok, settings.embeddings.price_per_mtok
        )

    @property
    def priced(self) -> bool:
        return self.prompt is not None and self.completion is not None

    def money(self, prompt: float, completion: float, embedding: float = 0.0) -> float:
        """The money of these tokens; NaN when the LLM is not priced (an unpriced embedding model
        counts nothing: a local model's tokens cost no money, and `note` says so).
        """
        if self.prompt is None or self.completion is None:
            return math.nan
        return (
            prompt * self.prompt + completion * self.completion + embedding * (self.embedding or 0.0)
        ) / 1e6

    def note(self) -> str:
        if not self.priced:
            return "not reported: set llm.price_prompt_per_mtok and llm.price_completion_per_mtok"
        if self.embedding is None:
            return "the LLM's tokens at its prices; embedding tokens unpriced (embeddings.price_per_mtok): 0"
        return "the LLM's and the embedding model's tokens at their prices"


def index_costs(
    parts: pd.DataFrame, method_parts: Mapping[tuple[str, str], list[tuple[str, str]]], pricing: Pricing
) -> pd.DataFrame:
    """Per (notebook, method), what building the index parts the method reads under that run's
    settings cost (a part shared by several methods is charged in full to each: it is what that
    method alone needs built): calls, LLM tokens, embedding tokens, wall seconds, model seconds, USD.
    """
    rows = []
    for (notebook, method), wanted in method_parts.items():
        keys = set(wanted)
        mine = parts[[(p, o) in keys for p, o in zip(parts["part"], parts["origin"], strict=True)]]
        if any(part.endswith("embeddings") for part, _ in wanted):  # an index built before labels
            mine = pd.concat([mine, parts[parts["part"].str.startswith("embeddings (")]])
        prompt, completion = float(mine["prompt_tokens"].sum()), float(mine["completion_tokens"].sum())
        embedding = float(mine["embedding_tokens"].sum())
        rows.append(
            {
                "notebook": notebook,
                "method": method,
                "parts": ", ".join(f"{p}:{o}" if o else p for p, o in wanted) or "none",
                "calls": float(mine["calls"].sum()),
                "tokens": prompt + completion,
                "embedding_tokens": embedding,
                "seconds": float(mine["wall_s"].sum()),
                "model_seconds": float(mine["model_s"].sum()),
                "money": pricing.money(prompt, completion, embedding),
            }
        )
    return pd.DataFrame(rows)


def refresh_costs(
    reindex: pd.DataFrame, method_parts: Mapping[tuple[str, str], list[tuple[str, str]]], pricing: Pricing
) -> pd.DataFrame:
    """Per (notebook, method), what re-indexing one changed document costs it: the mean and the
    largest over the index's documents of its parts' re-indexing costs (`index.costs.reindex_summary`,
    computed from per-chunk costs).
    """
    amounts = ["calls", "prompt_tokens", "completion_tokens", "embedding_tokens", "model_s", "wall_s"]
    frames = []
    for statistic in ("mean", "max"):
        per_part = reindex[["part", "origin"]].assign(**{a: reindex[f"{a}_{statistic}"] for a in amounts})
        frames.append(index_costs(per_part, method_parts, pricing).assign(per_document=statistic))
    return pd.concat(frames, ignore_index=True).assign(basis="computed from per-chunk costs")


def amortized_costs(
    index: pd.DataFrame, answers: pd.DataFrame, queries: Sequence[int], pricing: Pricing
) -> pd.DataFrame:
    """Long table: per (notebook, method, unit, queries N), the index cost, the answering cost per
    query and the total per query = index / N + answering. N is each of `queries` and the notebook's
    own question count ("this evaluation").
    """
    rows = []
    built = index.set_index(["notebook", "method"])
    for answer in answers.itertuples(index=False):
        if (answer.notebook, answer.method) not in built.index:
            continue
        per_query = {
            "calls": answer.calls,
            "tokens": answer.prompt_tokens + answer.completion_tokens,
            "embedding_tokens": 0.0,  # question embeddings are not metered per answer
            "seconds": answer.seconds,
            "money": pricing.money(answer.prompt_tokens, answer.completion_tokens),
        }
        points = [(answer.questions, "this evaluation")]
        points += [(n, "setting") for n in queries if n != answer.questions]
        for unit in COST_UNITS:
            for n, basis in points:
                cost = float(built.at[(answer.notebook, answer.method), unit])
                rows.append(
                    {
                        "notebook": answer.notebook,
                        "method": answer.method,
                        "unit": unit,
                        "queries": int(n),
                        "queries_from": basis,
                        "index": cost,
                        "answer_per_query": float(per_query[unit]),
                        "per_query": cost / n + float(per_query[unit]),
                    }
                )
    return pd.DataFrame(rows)


def cost_unit(settings: VerdictSettings, pricing: Pricing) -> str:
    """The unit of break-even and ratios: `verdict.cost_unit`, auto = money when the LLM is priced."""
    if settings.cost_unit == "auto":
        return "money" if pricing.priced else "tokens"
    if settings.cost_unit == "money" and not pricing.priced:
        raise ParamsError(
            "key 'verdict.cost_unit': money needs llm.price_prompt_per_mtok and llm.price_completion_per_mtok"
        )
    return settings.cost_unit


# ---------------------------------------------------------------- break-even


def break_even(
    comparisons: pd.DataFrame, costs: pd.DataFrame, unit: str, quality_value: Mapping[str, float]
) -> pd.DataFrame:
    """Per comparison and amortization point N: the graph method's extra index cost over its
    baseline, its extra cost per query (extra index / N + extra answering), and
    - with a value for the measure (`verdict.quality_value`): the queries after which the quality
      gain has paid the extra index cost (`pays_back_after`, with the interval the difference's
      interval gives; inf = never: the gain does not cover the extra answering cost);
    - always: the extra cost per extra unit of quality, NaN unless the difference's interval lies
      above zero (a gain that may be none has no price).
    """
    rows = []
    for row in comparisons.itertuples(index=False):
        notebook = MEASURES.entry(row.measure).metadata["notebook"]
        mine = _cost_rows(costs, notebook, row.method, unit)
        theirs = _cost_rows(costs, notebook, row.baseline, unit).set_index("queries")
        if mine.empty or theirs.empty:
            continue
        value = quality_value.get(row.measure, math.nan)
        differences = (row.mean_diff, row.ci_high, row.ci_low)  # N falls as the gain grows
        for point in mine.itertuples(index=False):
            extra_index = point.index - float(theirs.at[point.queries, "index"])
            extra_answer = point.answer_per_query - float(theirs.at[point.queries, "answer_per_query"])
            extra = extra_index / point.queries + extra_answer
            paid = [_queries_to_pay_back(extra_index, extra_answer, value * d) for d in differences]
            priced = row.ci_low > 0 and row.mean_diff > 0
            per_unit = [extra / d if priced else math.nan for d in differences]
            rows.append(
                {
                    "measure": row.measure,
                    "method": row.method,
                    "baseline": row.baseline,
                    "question_type": row.question_type,
                    "unit": unit,
                    "queries": point.queries,
                    "queries_from": point.queries_from,
                    "extra_index": extra_index,
                    "extra_answer_per_query": extra_answer,
                    "extra_per_query": extra,
                    "value_per_unit": value,
                    "pays_back_after": paid[0],
                    "pays_back_low": paid[1],
                    "pays_back_high": paid[2],
                    "cost_per_unit": per_unit[0],
                    "cost_per_unit_low": per_unit[1],
                    "cost_per_unit_high": per_unit[2],
                }
            )
    return pd.DataFrame(rows)


def _cost_rows(costs: pd.DataFrame, notebook: str, method: str, unit: str) -> pd.DataFrame:
    return costs[(costs["notebook"] == notebook) & (costs["method"] == method) & (costs["unit"] == unit)]


def _queries_to_pay_back(extra_index: float, extra_answer: float, gain_per_query: float) -> float:
    """N with N * (gain - extra answering cost) = extra index cost; inf when the gain never covers
    the extra answering cost, NaN without a value for the measure.
    """
    net = gain_per_query - extra_answer
    if math.isnan(net):
        return math.nan
    if net <= 0:
        return math.inf
    return max(extra_index, 0.0) / net


# ---------------------------------------------------------------- the verdict


@dataclass
class Verdict:
    """Every table of the verdict (each saved by notebook 10)."""

    unit: str
    baselines: pd.DataFrame
    pairs: pd.DataFrame
    left_out: pd.DataFrame
    comparisons: pd.DataFrame
    index_costs: pd.DataFrame
    refresh_costs: pd.DataFrame
    costs: pd.DataFrame
    break_even: pd.DataFrame
    verdicts: pd.DataFrame


def build_verdict(
    observations: Mapping[str, pd.DataFrame],
    parts: pd.DataFrame,
    method_parts: Mapping[tuple[str, str], list[tuple[str, str]]],
    answers: Mapping[str, pd.DataFrame],
    settings: VerdictSettings,
    pricing: Pricing,
    reindex: pd.DataFrame,
) -> Verdict:
    """The verdict from per-measure observations, the index's part costs, the index parts each
    (notebook, method) reads, and each answering notebook's answers table (notebook -> table).
    """
    check_measure_keys(settings)
    unit = cost_unit(settings, pricing)
    paired = [
        pair_with_baselines(frame, settings.baseline_order) for frame in observations.values() if len(frame)
    ]
    pairs, left_out, baselines = (
        pd.concat([p[i] for p in paired], ignore_index=True) if paired else pd.DataFrame() for i in range(3)
    )
    types = sorted({t for frame in observations.values() for t in frame["question_type"]} - {ALL_TYPES})
    comparisons = compare(pairs, left_out, settings, types) if len(pairs) else pd.DataFrame()
    built = index_costs(parts, method_parts, pricing)
    per_query = pd.concat([answer_costs(table, nb) for nb, table in answers.items()], ignore_index=True)
    costs = amortized_costs(built, per_query, settings.queries, pricing)
    paying = (
        break_even(comparisons, costs, unit, settings.quality_value) if len(comparisons) else pd.DataFrame()
    )
    verdicts = verdict_rows(comparisons, costs, paying, settings, unit)
    refresh = refresh_costs(reindex, method_parts, pricing)
    return Verdict(unit, baselines, pairs, left_out, comparisons, built, refresh, costs, paying, verdicts)


@dataclass(frozen=True)
class VerdictInputs:
    """One combination of runs the verdict reads: their tables, the notebooks combined, and each one's
    recorded settings (validated).
    """

    table: RunTable
    notebooks: Collection[str]
    settings_of: Callable[[str], Settings]


@dataclass(frozen=True)
class VerdictRead:
    """A verdict with what it was built from: the measures read (and why each other one was not) and the
    answers tables its per-query costs come from.
    """

    verdict: Verdict
    observations: dict[str, pd.DataFrame]
    unread: dict[str, str]
    answers: dict[str, pd.DataFrame]


def verdict_of(
    inputs: VerdictInputs,
    parts: pd.DataFrame,
    settings: VerdictSettings,
    pricing: Pricing,
    reindex: pd.DataFrame,
) -> VerdictRead:
    """`build_verdict` on one combination of runs (`read_measures`, `read_answers`, `parts_read`)."""
    observed, unread = read_measures(inputs.table, inputs.notebooks)
    answers = read_answers(inputs.table, inputs.notebooks)
    method_parts = parts_read(answers, inputs.settings_of)
    verdict = build_verdict(observed, parts, method_parts, answers, settings, pricing, reindex)
    return VerdictRead(verdict, observed, unread, answers)


def point_verdicts(
    points: Sequence[tuple[str, str, VerdictInputs]],
    parts: pd.DataFrame,
    settings: VerdictSettings,
    pricing: Pricing,
    reindex: pd.DataFrame,
) -> pd.DataFrame:
    """The verdict rows (`verdict_rows`) of each grid point (name, the point's run id, its combination),
    with `point` and `run_id` columns first; empty without a grid.
    """
    frames = [
        verdict_of(inputs, parts, settings, pricing, reindex).verdict.verdicts.assign(
            point=name, run_id=run_id
        )
        for name, run_id, inputs in points
    ]
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame(columns=["point", "run_id"])
    table = pd.concat(frames, ignore_index=True)
    return table[["point", "run_id", *(c for c in table.columns if c not in ("point", "run_id"))]]


# A verdict row leads with the first measure of its kind: how well the graph method answers (the
# answers, a judge, claims), and how well it retrieves (against gold, no model in the measurement:
# on the embedded model these are the findings, the answer rows prove the pipeline).
VERDICT_KINDS = {"answers": ("answer", "judge"), "retrieval": ("gold",)}


def verdict_rows(
    comparisons: pd.DataFrame, costs: pd.DataFrame, paying: pd.DataFrame, settings: VerdictSettings, unit: str
) -> pd.DataFrame:
    """Per (question type, graph method, kind): the first of `verdict.primary_measures` of that kind
    compared for it (then any other measure of the kind, in registry order), its difference and claim,
    the power figures, the cost ratio per query including indexing at this evaluation's question count
    and at the largest `verdict.queries`, break-even, the other measures whose difference is a
    finding, and every measure of the question type weighed (`_weighed_measures`: better on which,
    worse on which), so that the sentence says "mixed" when they disagree.
    """
    rows: list[dict[str, object]] = []
    if comparisons.empty:
        return pd.DataFrame(rows)
    measured = comparisons[comparisons["n"] > 0]
    order = [*settings.primary_measures, *(m for m in MEASURES if m not in settings.primary_measures)]
    for _, group in measured.groupby(["question_type", "method"], sort=False):
        for kind, sources in VERDICT_KINDS.items():
            ranked = [m for m in order if m in set(group["measure"]) and _measured_by(m) in sources]
            if ranked:
                rows.append(_verdict_row(group, ranked[0], kind, costs, paying, unit))
    return pd.DataFrame(rows)


def _measured_by(measure: str) -> str:
    return str(MEASURES.entry(measure).metadata["measured_by"])


def _verdict_row(
    group: pd.DataFrame, measure: str, kind: str, costs: pd.DataFrame, paying: pd.DataFrame, unit: str
) -> dict[str, object]:
    lead = group.set_index("measure").loc[measure]
    question_type, method = lead["question_type"], lead["method"]
    others = group[(group["measure"] != measure) & group["supported"]]
    row: dict[str, object] = {"question_type": question_type, "method": method, "kind": kind}
    row |= {"measure": measure, "measured_by": _measured_by(measure), "baseline": lead["baseline"]}
    keys = ["n", "left_out", "mean_diff", "ci_low", "ci_high", "p_holm", "supported", "target_difference"]
    keys += ["detectable", "detectable_adjusted", "questions_needed_adjusted", "enough_questions"]
    row |= {key: lead[key] for key in [*keys, "power_status"]}
    notebook = MEASURES.entry(measure).metadata["notebook"]
    ratios = _cost_ratios(costs, notebook, method, str(lead["baseline"]), unit)
    row |= ratios
    row |= _pay_back(paying, measure, method, question_type, float(ratios["max_queries"]))
    row["other_findings"] = "; ".join(
        f"{o.measure} {o.mean_diff:+.3g} [{o.ci_low:.3g}, {o.ci_high:.3g}]" for o in others.itertuples()
    )
    return row | _weighed_measures(group)


def _weighed_measures(group: pd.DataFrame) -> dict[str, object]:
    """Every measure of one question type and graph method under the claim rule: how many were
    compared, and on which (and how many) the method is better or worse (a difference is signed so
    that positive is better); a verdict with both is mixed.
    """
    supported = group[group["supported"].astype(bool)]
    better = supported.loc[supported["mean_diff"] > 0, "measure"].tolist()
    worse = supported.loc[supported["mean_diff"] < 0, "measure"].tolist()
    return {
        "measures_compared": len(group),
        "measures_better": len(better),
        "measures_worse": len(worse),
        "better_on": ", ".join(better),
        "worse_on": ", ".join(worse),
    }


def _cost_ratios(
    costs: pd.DataFrame, notebook: str, method: str, baseline: str, unit: str
) -> dict[str, str | float]:
    own = _cost_rows(costs, notebook, method, unit)
    mine = own.set_index("queries")["per_query"]
    theirs = _cost_rows(costs, notebook, baseline, unit).set_index("queries")["per_query"]
    if mine.empty or theirs.empty:
        nan = math.nan
        return {
            "unit": unit,
            "eval_queries": nan,
            "cost_ratio_eval": nan,
            "max_queries": nan,
            "cost_ratio_max": nan,
        }
    evaluation = int(own.query("queries_from == 'this evaluation'")["queries"].iloc[0])
    largest = int(mine.index.max())
    return {
        "unit": unit,
        "eval_queries": evaluation,
        "cost_ratio_eval": _ratio(mine[evaluation], theirs[evaluation]),
        "max_queries": largest,
        "cost_ratio_max": _ratio(mine[largest], theirs[largest]),
    }


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else math.nan


def _pay_back(
    paying: pd.DataFrame, measure: str, method: str, question_type: str, queries: float
) -> dict[str, float]:
    keys = (
        "pays_back_after",
        "pays_back_low",
        "pays_back_high",
        "cost_per_unit",
        "cost_per_unit_low",
        "cost_per_unit_high",
    )
    if paying.empty or math.isnan(queries):
        return dict.fromkeys(keys, math.nan)
    hit = paying[
        (paying["measure"] == measure)
        & (paying["method"] == method)
        & (paying["question_type"] == question_type)
        & (paying["queries"] == queries)
    ]
    return {k: float(hit[k].iloc[0]) if len(hit) else math.nan for k in keys}
