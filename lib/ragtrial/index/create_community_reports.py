"""Community reports as the GraphRAG paper builds them (section 3.1.5), bottom-up.

Leaf communities: element summaries enter the context window in order of edge prominence (sum of
the endpoint degrees): source description, target description, edge description, the endpoints'
claims; then entities without an internal edge, by degree; until the token budget is reached.
Higher-level communities: if all their element summaries fit, the same; otherwise the elements
of each sub-community are replaced by its (shorter) report, largest sub-community (in tokens)
first, until the context fits. A report is generated once its children's reports are done (each
community waits for its own children, not for their whole level), so a parent finds them. A
community whose members equal an already reported one (the copies a hierarchy level makes of a
cluster that was not split) reuses that report. A community whose own element summaries fit reads
no sub-community report, so it waits for none: it is asked for at once, as GraphRAG's
substitution rule allows (the same context either way).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Any, Literal

import pandas as pd
from pydantic import BaseModel, Field, create_model

from ragtrial.config.index import IndexSettings
from ragtrial.index.tables import SCHEMAS, conform_table
from ragtrial.llm.client import LLM
from ragtrial.llm.errors import LLMError
from ragtrial.llm.plan import StagePlan, frame_tokens, projected
from ragtrial.llm.tokens import count_tokens
from ragtrial.prompts import load_prompt

SECTIONS = {
    "reports": "Sub-community reports",
    "entities": "Entities",
    "relations": "Relationships",
    "claims": "Claims",
}
Rating = Literal[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]  # an enum, so llama.cpp's grammar enforces the range


@cache
def report_schema(max_findings: int | None, max_chars: int | None) -> type[BaseModel]:
    text = Annotated[str, Field(max_length=max_chars)]
    finding = create_model("Finding", summary=(text, ...), explanation=(text, ...))
    return create_model(
        "CommunityReport",
        title=(Annotated[str, Field(min_length=1, max_length=80)], ...),
        summary=(text, ...),
        rating=(Rating, ...),
        rating_explanation=(text, ...),
        findings=(Annotated[list[finding], Field(max_length=max_findings)], ...),
    )


# ---------------------------------------------------------------- context selection


@dataclass(frozen=True)
class Item:
    """One line of a report context: an element summary or a sub-community report."""

    section: str  # a key of SECTIONS
    key: str  # entity, relation, claim or community id
    text: str
    tokens: int
    about: tuple[str, ...] = ()  # entity ids the line describes (decides which sub-community owns it)


def _item(section: str, key: str, text: str, about: tuple[str, ...] = ()) -> Item:
    return Item(section, key, text, count_tokens(text) + 1, about)  # + 1 for the newline


@cache
def _header_tokens(section: str) -> int:
    return count_tokens(f"{SECTIONS[section]}:") + 1


def header_tokens(items: Iterable[Item]) -> int:
    return sum(_header_tokens(s) for s in {i.section for i in items})


def context_tokens(items: list[Item]) -> int:
    return sum(i.tokens for i in items) + header_tokens(items)


def render_context(items: list[Item]) -> str:
    """Items grouped by section (in SECTIONS order), each section in priority order."""
    blocks = []
    for section, title in SECTIONS.items():
        lines = [i.text for i in items if i.section == section]
        if lines:
            blocks.append("\n".join([f"{title}:", *lines]))
    return "\n".join(blocks)


@dataclass
class Elements:
    """Element summaries of a graph, rendered once, with what prominence ordering needs."""

    entities: dict[str, Item]
    relations: dict[str, Item]
    ends: dict[str, tuple[str, str]]
    degree: dict[str, int]
    claims_of: dict[str, list[Item]] = field(default_factory=dict)

    @classmethod
    def of(cls, entities: pd.DataFrame, relations: pd.DataFrame, claims: pd.DataFrame) -> Elements:
        name = dict(zip(entities["entity_id"], entities["name"], strict=True))
        ents = {
            eid: _item("entities", eid, f"- {n} ({t or 'unknown'}): {d}", (eid,))
            for eid, n, t, d in zip(
                entities["entity_id"],
                entities["name"],
                entities["type"],
                entities["description"],
                strict=True,
            )
        }
        rels = {
            rid: _item("relations", rid, f"- {name[s]} -> {name[t]}: {d}", (s, t))
            for rid, s, t, d in zip(
                relations["relation_id"],
                relations["source_id"],
                relations["target_id"],
                relations["description"],
                strict=True,
            )
        }
        claims_of: dict[str, list[Item]] = {}
        for row in claims.itertuples(index=False):
            subject = name.get(row.subject_id, row.subject_id)
            text = f"- {subject} [{row.claim_type}, {row.status}]: {row.description}"
            claims_of.setdefault(row.subject_id, []).append(
                _item("claims", row.claim_id, text, (row.subject_id,))
            )
        ends = dict(
            zip(
                relations["relation_id"],
                zip(relations["source_id"], relations["target_id"], strict=True),
                strict=True,
            )
        )
        return cls(
            ents, rels, ends, dict(zip(entities["entity_id"], entities["degree"], strict=True)), claims_of
        )

    def prioritized(self, entity_ids: list[str], relation_ids: list[str]) -> list[Item]:
        """A community's element summaries in GraphRAG's order: per edge by decreasing prominence,
        source, target, edge, claims; then the entities no internal edge mentions, by degree.
        """
        order = sorted(
            relation_ids, key=lambda r: (-(self.degree[self.ends[r][0]] + self.degree[self.ends[r][1]]), r)
        )
        items: list[Item] = []
        seen: set[str] = set()

        def entity(eid: str) -> None:
            if eid not in seen:
                seen.add(eid)
                items.append(self.entities[eid])
                items.extend(self.claims_of.get(eid, []))

        for rid in order:
            src, tgt = self.ends[rid]
            entity(src)
            entity(tgt)
            items.append(self.relations[rid])
        for eid in sorted(set(entity_ids) - seen, key=lambda e: (-self.degree[e], e)):
            entity(eid)
        return items


def fit(items: list[Item], budget: int) -> list[Item]:
    """The longest prefix of `items` whose context stays within `budget` tokens."""
    kept: list[Item] = []
    used, sections = 0, set()
    for item in items:
        cost = item.tokens + (0 if item.section in sections else _header_tokens(item.section))
        if used + cost > budget:
            break
        kept.append(item)
        used += cost
        sections.add(item.section)
    return kept


def own_elements(elements: Elements, community: pd.Series) -> list[Item]:
    """A community's own element summaries, in GraphRAG's order."""
    return elements.prioritized(list(community["entity_ids"]), list(community["relation_ids"]))


def overflows(items: list[Item], budget: int) -> bool:
    """Whether a community's own element summaries exceed the context window: only then may its
    children's reports replace some of them (so only then does its report wait for theirs).
    """
    return context_tokens(items) > budget


def community_context(
    elements: Elements, community: pd.Series, children: list[tuple[pd.Series, str]], budget: int
) -> tuple[list[Item], list[str]]:
    """Context items of one community and the ids of the sub-communities whose report replaced
    their elements. `children` are (sub-community row, its report text) for reported children.
    """
    items = own_elements(elements, community)
    if not overflows(items, budget) or not children:
        return fit(items, budget), []
    owner = {eid: str(child["community_id"]) for child, _ in children for eid in child["entity_ids"]}

    def child_of(item: Item) -> str | None:
        owners = {owner.get(eid) for eid in item.about}
        return owners.pop() if len(owners) == 1 else None  # an edge between two children stays an element

    sizes: Counter[str] = Counter()
    for item in items:
        if (cid := child_of(item)) is not None:
            sizes[cid] += item.tokens
    report_of = {str(child["community_id"]): text for child, text in children}
    substituted: list[str] = []
    for cid in sorted(report_of, key=lambda c: (-sizes[c], c)):
        substituted.append(cid)
        reports = [_item("reports", c, f"- {report_of[c]}") for c in substituted]
        rest = [i for i in items if child_of(i) not in substituted]
        if context_tokens(reports + rest) <= budget:
            return reports + rest, substituted
    return fit(reports + rest, budget), substituted


# ---------------------------------------------------------------- generation


@dataclass
class ReportsResult:
    reports: pd.DataFrame
    stats: dict[str, Any]


def community_origin(communities: pd.DataFrame, origin_of: dict[str, str]) -> list[str]:
    return [origin_of[ids[0]] if len(ids) else "" for ids in communities["entity_ids"]]


def select_communities(
    communities: pd.DataFrame,
    origins: list[str],
    settings: IndexSettings,
) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    """Communities to report, deepest level first, and the skipped ones by reason."""
    frame = communities.assign(_origin=origins)
    skipped: dict[str, list[str]] = {}
    if settings.report_levels is not None:
        out = ~frame["level"].isin(settings.report_levels)
        skipped["level"] = sorted(frame.loc[out, "community_id"])
        frame = frame[~out]
    small = frame["size"] < settings.report_min_size
    skipped["size"] = sorted(frame.loc[small, "community_id"])
    frame = frame[~small]
    if settings.max_reports is not None:
        ranked = frame.sort_values(["size", "level", "community_id"], ascending=[False, True, True])
        keep = ranked.groupby("_origin", sort=False).head(settings.max_reports).index
        skipped["max_reports"] = sorted(frame.loc[~frame.index.isin(keep), "community_id"])
        frame = frame.loc[frame.index.isin(keep)]
    return frame.sort_values(["level", "community_id"], ascending=[False, True]).drop(
        columns="_origin"
    ), skipped


def full_text(reply: Any) -> str:  # a report_schema model
    findings = "\n\n".join(f"## {f.summary}\n\n{f.explanation}" for f in reply.findings)
    return f"# {reply.title}\n\n{reply.summary}\n\nRating: {reply.rating}/10. {reply.rating_explanation}" + (
        f"\n\n{findings}" if findings else ""
    )


def start_order(after: list[set[int]], critical: bool) -> list[int]:
    """Units (unit i waits for the units `after[i]`, with no cycle) in the order to start them, each
    after the units it waits for: the longest chain of units waiting on a unit (itself included)
    first when `critical` (list scheduling on the critical path), else by index wherever the waits
    allow (the order concurrency 1 sends its calls in).
    """
    waiting_on: list[list[int]] = [[] for _ in after]
    for i, before in enumerate(after):
        for j in before:
            waiting_on[j].append(i)

    @cache
    def chain(i: int) -> int:
        return 1 + max((chain(k) for k in waiting_on[i]), default=0)

    def rank(i: int) -> tuple[int, int]:
        return (-chain(i) if critical else 0, i)

    left = [len(before) for before in after]
    ready = [rank(i) for i, n in enumerate(left) if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, i = heapq.heappop(ready)
        order.append(i)
        for k in waiting_on[i]:
            left[k] -= 1
            if left[k] == 0:
                heapq.heappush(ready, rank(k))
    return order


def _members(community: pd.Series) -> tuple[str, ...]:
    return tuple(sorted(community["entity_ids"]))


@dataclass
class _Outcome:
    """What became of one selected community: its context (kind, tokens, sub-reports), and its
    report fields or its failure.
    """

    context: tuple[str, int, int]
    report: dict[str, Any] | None = None
    failure: dict[str, str] | None = None


def create_community_reports(
    llm: LLM,
    entities: pd.DataFrame,
    relations: pd.DataFrame,
    claims: pd.DataFrame,
    communities: pd.DataFrame,
    settings: IndexSettings,
    sending: Callable[[], None] | None = None,
) -> ReportsResult:
    """Reports for the selected communities; failed and skipped communities are listed in `stats`.
    `sending` is called once the set-up is done, as the first calls go out (the build starts work
    there that runs beside them).
    """
    elements = Elements.of(entities, relations, claims)
    origin_of = dict(zip(entities["entity_id"], entities["origin"], strict=True))
    chosen, skipped = select_communities(communities, community_origin(communities, origin_of), settings)
    prompt = load_prompt("community_report")
    schema = report_schema(settings.max_items, settings.text_max_chars)
    children_of: dict[str, list[pd.Series]] = {}
    for _, row in communities.iterrows():
        if pd.notna(row["parent_id"]):
            children_of.setdefault(str(row["parent_id"]), []).append(row)
    # The communities with the same members (copies a level makes of a cluster it did not split)
    # form one unit, deepest first: the first report that succeeds is reused by the rest. A unit
    # whose elements overflow the context window comes after the units holding its communities'
    # children (fewer members: no cycle), so it starts as soon as those are done, not when their
    # whole level is (`after` in `ragtrial.llm.fanout`), the longest chain of reports waiting on it
    # first; a unit whose elements fit waits for nothing (`community_context` then reads no child
    # report). At concurrency 1 the units go deepest level first, in community order, as the
    # reports' calls always went.
    groups: dict[tuple[str, ...], list[pd.Series]] = {}
    for _, community in chosen.iterrows():
        groups.setdefault(_members(community), []).append(community)
    unit_of = {str(c["community_id"]): i for i, group in enumerate(groups.values()) for c in group}
    children_units = [
        {
            unit_of[str(child["community_id"])]
            for community in group
            for child in children_of.get(str(community["community_id"]), [])
            if str(child["community_id"]) in unit_of
        }
        - {i}
        if overflows(own_elements(elements, group[0]), settings.report_context_tokens)
        else set()
        for i, group in enumerate(groups.values())
    ]
    order = start_order(children_units, critical=llm.settings.in_flight > 1)
    position = {unit: at for at, unit in enumerate(order)}
    units = [list(groups.values())[i] for i in order]
    after = [{position[j] for j in children_units[i]} for i in order]
    # community id -> report fields: written by a unit, read by the units that come after it
    reports_of: dict[str, dict[str, Any]] = {}

    def report_group(group: list[pd.Series]) -> list[_Outcome]:
        """The communities with the same members, deepest first: the first whose report succeeds
        is reused by the rest.
        """
        outcomes: list[_Outcome] = []
        done: dict[str, Any] | None = None
        for community in group:
            if done is not None:
                outcomes.append(_Outcome(("reused", 0, 0), done))
                continue
            cid = str(community["community_id"])
            children = [
                (child, reports_of[str(child["community_id"])]["full_text"])
                for child in children_of.get(cid, [])
                if str(child["community_id"]) in reports_of
            ]
            items, substituted = community_context(
                elements, community, children, settings.report_context_tokens
            )
            context = ("sub-reports" if substituted else "elements", context_tokens(items), len(substituted))
            members = _members(community)
            try:
                reply: Any = llm.structured(  # a report_schema model: its fields are made at run time
                    prompt.render(context=render_context(items)),
                    schema,
                    stage="community_report",
                    method=origin_of.get(members[0], "") if members else "",
                    prompt=prompt,
                    max_tokens=settings.report_max_tokens,
                )
            except LLMError as err:
                outcomes.append(_Outcome(context, failure={"kind": err.kind, "detail": str(err)[:500]}))
                continue
            done = {
                "title": reply.title,
                "summary": reply.summary,
                "rating": float(reply.rating),
                "findings": [{"summary": f.summary, "explanation": f.explanation} for f in reply.findings],
                "full_text": full_text(reply),
            }
            outcomes.append(_Outcome(context, done))
        for community, outcome in zip(group, outcomes, strict=True):
            if outcome.report is not None:
                reports_of[str(community["community_id"])] = outcome.report
        return outcomes

    if sending is not None:
        sending()
    unit_outcomes = llm.fan_out(report_group, units, label="community_report", after=after)
    # the outcomes come unit by unit; rows, contexts and failures go in community order
    outcome_of = {
        str(community["community_id"]): outcome
        for group, outcomes in zip(units, unit_outcomes, strict=True)
        for community, outcome in zip(group, outcomes, strict=True)
    }
    rows: list[dict[str, Any]] = []
    failed, contexts = [], []
    for _, community in chosen.iterrows():
        cid = str(community["community_id"])
        outcome = outcome_of[cid]
        contexts.append((cid, *outcome.context))
        if outcome.failure is not None:
            failed.append({"community_id": cid, **outcome.failure})
            continue
        assert outcome.report is not None  # an outcome without a failure has its report
        base = {
            "community_id": cid,
            "level": int(community["level"]),
            "entity_ids": list(community["entity_ids"]),
            "chunk_ids": list(community["chunk_ids"]),
        }
        rows.append({**base, **outcome.report})
    reports = conform_table(
        "community_reports", pd.DataFrame(rows, columns=list(SCHEMAS["community_reports"]))
    )
    stats = {
        "selected": len(chosen),
        "generated": len(rows) - sum(c[1] == "reused" for c in contexts),
        "reused": sum(c[1] == "reused" for c in contexts),
        "failed": failed,
        "skipped": {reason: ids for reason, ids in skipped.items() if ids},
        "contexts": [
            dict(zip(("community_id", "context", "tokens", "sub_reports"), c, strict=True)) for c in contexts
        ],
    }
    return ReportsResult(reports, stats)


def planned_calls(settings: IndexSettings, origins: int) -> list[StagePlan]:
    """The report calls before the communities exist (they come from the graph the model extracts):
    at most `max_reports` per graph origin, else projected at one per `max_cluster_size` entities of
    an unknown graph, so stated as projected; each prompt at most its context budget.
    """
    if settings.max_reports is not None:
        calls, basis, note = (
            settings.max_reports * origins,
            "upper bound",
            "index.max_reports per graph origin",
        )
    else:
        calls, basis, note = (
            settings.max_cluster_size * origins,
            "projected",
            "depends on the communities found",
        )
    frame = frame_tokens(load_prompt("community_report"))
    return [
        projected(
            "community_report",
            calls,
            calls * (frame + settings.report_context_tokens),
            settings.report_max_tokens,
            basis,
            "json",
            note,
        )
    ]
