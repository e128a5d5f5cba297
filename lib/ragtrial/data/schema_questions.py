"""Questions generated from a typed gold graph's schema, as seed 004 describes for a pre-launch graph.

"For each relationship type in your schema, write at least two questions that require traversing
it. For each entity type with a time-indexed property, write at least one temporal question."
`schema_questions` walks the gold tables (`data.synthetic.world_tables`' shape) with one question
template per relation type and direction, and `schema_coverage` says how far a question set meets
those two rules. Every question carries its gold answer, entities, edges (with validity), documents
and key facts, so the diagnostics can score it without annotation.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass

import pandas as pd

from ragtrial.data.synthetic import LAST_YEAR, TEMPLATES, relation_sentence
from ragtrial.records import GoldEdge, Question

# Per (relation, direction): (question, noun phrase naming the answer, question at a year {y}), {a} the
# anchor; "out" asks for the target given the source, "in" the source given the target. A multi-hop
# question is the second hop's question with the first hop's noun phrase as its anchor.
GENERATED_TEMPLATES: dict[tuple[str, str], tuple[str, str, str]] = {
    ("born_in", "out"): ("Where was {a} born?", "the birthplace of {a}", "Where was {a} born?"),
    ("born_in", "in"): ("Who was born in {a}?", "the person born in {a}", "Who was born in {a}?"),
    ("married_to", "out"): ("Who is {a} married to?", "the spouse of {a}", "Who was {a} married to in {y}?"),
    ("married_to", "in"): ("Who is married to {a}?", "the spouse of {a}", "Who was married to {a} in {y}?"),
    ("attended", "out"): (
        "Which event did {a} attend?",
        "the event attended by {a}",
        "Which event did {a} attend in {y}?",
    ),
    ("attended", "in"): ("Who attended {a}?", "the person who attended {a}", "Who attended {a} in {y}?"),
    ("works_for", "out"): (
        "Which organisation did {a} work for?",
        "the employer of {a}",
        "Which organisation did {a} work for in {y}?",
    ),
    ("works_for", "in"): ("Who worked for {a}?", "the employee of {a}", "Who worked for {a} in {y}?"),
    ("ceo_of", "in"): (
        "Who was the chief executive of {a}?",
        "the chief executive of {a}",
        "Who was the chief executive of {a} in {y}?",
    ),
    ("ceo_of", "out"): (
        "Which organisation did {a} lead as chief executive?",
        "the company led by {a}",
        "Which organisation did {a} lead as chief executive in {y}?",
    ),
    ("founded", "in"): ("Who founded {a}?", "the founder of {a}", "By {y}, who had founded {a}?"),
    ("founded", "out"): (
        "Which organisation did {a} found?",
        "the organisation founded by {a}",
        "By {y}, which organisation had {a} founded?",
    ),
    ("headquartered_in", "out"): (
        "In which city is {a} headquartered?",
        "the headquarters city of {a}",
        "In which city was {a} headquartered in {y}?",
    ),
    ("headquartered_in", "in"): (
        "Which organisation is headquartered in {a}?",
        "the organisation headquartered in {a}",
        "Which organisation was headquartered in {a} in {y}?",
    ),
    ("manufactures", "in"): (
        "Which company manufactures {a}?",
        "the manufacturer of {a}",
        "Which company manufactured {a} in {y}?",
    ),
    ("manufactures", "out"): (
        "Which product does {a} manufacture?",
        "the product made by {a}",
        "Which product did {a} manufacture in {y}?",
    ),
    ("acquired", "in"): (
        "Which company acquired {a}?",
        "the acquirer of {a}",
        "By {y}, which company had acquired {a}?",
    ),
    ("acquired", "out"): (
        "Which company did {a} acquire?",
        "the company acquired by {a}",
        "By {y}, which company had {a} acquired?",
    ),
    ("partnered_with", "out"): (
        "Which company has a partnership with {a}?",
        "the partner of {a}",
        "Which company had a partnership with {a} in {y}?",
    ),
    ("partnered_with", "in"): (
        "Which company has a partnership with {a}?",
        "the partner of {a}",
        "Which company had a partnership with {a} in {y}?",
    ),
    ("located_in", "out"): (
        "In which region is {a}?",
        "the region of {a}",
        "In which region was {a} in {y}?",
    ),
    ("located_in", "in"): ("Which city is in {a}?", "the city in {a}", "Which city was in {a} in {y}?"),
    ("held_in", "out"): (
        "In which city was {a} held?",
        "the host city of {a}",
        "In which city was {a} held in {y}?",
    ),
    ("held_in", "in"): (
        "Which event was held in {a}?",
        "the event held in {a}",
        "Which event was held in {a} in {y}?",
    ),
}
QUESTION_TYPES = ("single_hop", "multi_hop", "temporal", "contradictory")
# A relation type is functional (one value per subject) when at most this share of its subjects has
# several undated values; a subject with several values of a functional type is a conflict.
FUNCTIONAL_SHARE = 0.2


@dataclass(frozen=True)
class _Edge:
    id: str
    source: str
    target: str
    relation: str
    valid_from: int | None
    valid_to: int | None
    doc_ids: tuple[str, ...]
    sources: tuple[str, ...]

    def holds_in(self, year: int, now: int) -> bool:
        return self.valid_from is not None and self.valid_from <= year <= (self.valid_to or now)


def schema_questions(
    entities: pd.DataFrame,
    relations: pd.DataFrame,
    n_per_relation: int = 2,
    seed: int = 0,
    *,
    templates: dict[tuple[str, str], tuple[str, str, str]] | None = None,
    now: int = LAST_YEAR,
) -> list[Question]:
    """Questions in the four diagnostic categories, generated from the gold graph's schema.

    `entities`: entity_id, name, type, aliases; `relations`: relation_id, source_id, target_id,
    relation, valid_from, valid_to, doc_ids (and optionally sources, the outlets asserting each).
    Per relation type, up to `n_per_relation` (seeded choice) of each: single_hop (one traversal whose
    answer is unique), temporal (a dated relation asked at a year inside its validity, strictly
    inside when the window allows, where exactly one such relation holds that year) and multi_hop
    (two chained unique traversals ending with that type, through an intermediate entity). Every
    conflict becomes a contradictory question: a subject with several undated values of a functional
    type, asserted by disjoint sources where the table names them. `templates` maps (relation,
    direction) to (question, noun phrase, question at year {y}), default the generated world's; a
    pair without one gets a generic phrasing from the relation type's name. `now` closes open
    validity windows.
    """
    templates = GENERATED_TEMPLATES if templates is None else templates
    names = dict(zip(entities["entity_id"], entities["name"], strict=True))
    aliases = dict(zip(entities["entity_id"], entities["aliases"], strict=True))
    kinds = dict(zip(entities["entity_id"], entities["type"], strict=True))
    edges = [_edge(row) for row in relations.to_dict("records")]
    steps: dict[tuple[str, str, str], list[_Edge]] = defaultdict(list)  # (anchor, relation, direction)
    for e in edges:
        steps[(e.source, e.relation, "out")].append(e)
        steps[(e.target, e.relation, "in")].append(e)
    rng = random.Random(f"schema:{seed}")
    relation_types = sorted({e.relation for e in edges})

    def phrase(relation: str, direction: str, which: int, anchor: str, year: int | None = None) -> str:
        """Part `which` (0 question, 1 noun phrase, 2 question at `year`) of the pair's template."""
        words = relation.replace("_", " ")
        generic: tuple[str, ...] = (
            (f"Which entity is {{a}} linked to by '{words}'?", f"the entity {{a}} is linked to by '{words}'")
            if direction == "out"
            else (
                f"Which entity is linked by '{words}' to {{a}}?",
                f"the entity linked by '{words}' to {{a}}",
            )
        )
        generic += (f"As of {{y}}, {generic[0][0].lower()}{generic[0][1:]}",)
        return templates.get((relation, direction), generic)[which].format(a=anchor, y=year)

    def fact(e: _Edge) -> str:
        source, target = names[e.source], names[e.target]
        if e.relation in TEMPLATES:
            return relation_sentence(e.relation, source, target, e.valid_from, e.valid_to)
        window = "" if e.valid_from is None else f" from {e.valid_from} to {e.valid_to or 'now'}"
        return f"{source} {e.relation.replace('_', ' ')} {target}{window}."

    def question(
        qtype: str, kind: str, text: str, answer_ids: list[str], path: list[_Edge], facts: list[str], **meta
    ) -> Question:
        ids = dict.fromkeys(i for e in path for i in (e.source, e.target))
        answers = [names[a] for a in answer_ids]
        if len(answer_ids) == 1:
            answers += list(aliases[answer_ids[0]])
        return Question(
            question_id="",  # numbered once every category is chosen
            question=text,
            answers=answers,
            question_type=qtype,
            gold_doc_ids=list(dict.fromkeys(d for e in path for d in e.doc_ids)),
            gold_entities=[names[i] for i in ids],
            gold_edges=[
                GoldEdge(
                    source=names[e.source],
                    relation=e.relation,
                    target=names[e.target],
                    valid_from=e.valid_from,
                    valid_to=e.valid_to,
                )
                for e in path
            ],
            key_facts=facts,
            metadata={"kind": kind, "plan": "schema", **meta},
        )

    def other_end(e: _Edge, direction: str) -> str:
        return e.target if direction == "out" else e.source

    unique_into: dict[str, list[tuple[str, _Edge, str, str]]] = defaultdict(list)  # first hops by end
    for (anchor, r, d), es in sorted(steps.items()):
        if len(es) == 1:
            unique_into[other_end(es[0], d)].append((anchor, es[0], r, d))
    chosen: dict[str, list[Question]] = {t: [] for t in QUESTION_TYPES}
    for relation in relation_types:
        # single hop: each direction in turn, anchors whose traversal has exactly one answer
        pools: list[list] = []  # per direction; the temporal pools' items carry a year too
        for direction in ("out", "in"):
            found = [
                (a, es[0])
                for (a, r, d), es in steps.items()
                if (r, d) == (relation, direction) and len(es) == 1
            ]
            pools.append([(direction, a, e) for a, e in rng.sample(sorted(found, key=str), len(found))])
        for direction, anchor, e in _interleave(pools, n_per_relation):
            end = other_end(e, direction)
            chosen["single_hop"].append(
                question(
                    "single_hop",
                    f"{relation}:{direction}",
                    phrase(relation, direction, 0, names[anchor]),
                    [end],
                    [e],
                    [fact(e)],
                    anchor_type=kinds[anchor],
                )
            )
        # temporal: a year inside a dated relation's window where it is the anchor's only one
        pools = []
        for direction in ("out", "in"):
            dated = []
            for (anchor, r, d), es in sorted(steps.items()):
                if (r, d) != (relation, direction):
                    continue
                for e in es:
                    if e.valid_from is None:
                        continue
                    until = e.valid_to or now
                    year = (
                        rng.randint(e.valid_from + 1, until - 1)
                        if until - e.valid_from >= 2
                        else e.valid_from
                    )
                    if [o for o in es if o.holds_in(year, now)] == [e]:
                        dated.append((direction, anchor, e, year))
            pools.append(rng.sample(dated, len(dated)))
        for direction, anchor, e, year in _interleave(pools, n_per_relation):
            chosen["temporal"].append(
                question(
                    "temporal",
                    f"{relation}:{direction}@year",
                    phrase(relation, direction, 2, names[anchor], year),
                    [other_end(e, direction)],
                    [e],
                    [fact(e)],
                    anchor_type=kinds[anchor],
                    year=year,
                )
            )
        # multi hop: a unique first hop into a unique second hop of this type, to a third entity
        chains = []
        for direction in ("out", "in"):
            for (middle, r, d), onward in sorted(steps.items()):
                if (r, d) != (relation, direction) or len(onward) != 1:
                    continue
                for anchor, first, r1, d1 in unique_into[middle]:
                    if first != onward[0] and other_end(onward[0], direction) != anchor:
                        chains.append((anchor, first, r1, d1, onward[0], direction))
        for anchor, first, r1, d1, second, direction in rng.sample(chains, min(n_per_relation, len(chains))):
            text = phrase(relation, direction, 0, phrase(r1, d1, 1, names[anchor]))
            chosen["multi_hop"].append(
                question(
                    "multi_hop",
                    f"{r1}:{d1}>{relation}:{direction}",
                    text,
                    [other_end(second, direction)],
                    [first, second],
                    [fact(second)],
                    anchor_type=kinds[anchor],
                    hops=2,
                )
            )
        # contradictory: every conflict of a functional type
        for subject, claims in _conflicts(steps, relation):
            text = phrase(relation, "out", 0, names[subject])
            facts = [
                f"According to {', '.join(c.sources)}, {fact(c)}" if c.sources else fact(c) for c in claims
            ]
            # the generated corpus's claim shape (value, source, doc_id: the first document stating it)
            claim_meta = [
                {
                    "value": names[c.target],
                    "source": ", ".join(c.sources),
                    "doc_id": c.doc_ids[0] if c.doc_ids else None,
                }
                for c in claims
            ]
            chosen["contradictory"].append(
                question(
                    "contradictory",
                    f"{relation}:conflict",
                    text,
                    [c.target for c in claims],
                    claims,
                    facts,
                    anchor_type=kinds[subject],
                    claims=claim_meta,
                )
            )
    return [
        q.model_copy(update={"question_id": f"schema-{qtype}-{j:03d}"})
        for qtype in QUESTION_TYPES
        for j, q in enumerate(chosen[qtype])
    ]


def schema_coverage(
    questions: list[Question], relations: pd.DataFrame, entities: pd.DataFrame
) -> pd.DataFrame:
    """How far `questions` meet seed 004's rules for a schema-driven test set.

    One row per relation type (questions whose gold edges traverse it; required 2) and per entity type
    with a time-indexed property, i.e. at an end of a dated relation (temporal questions whose gold
    entities include one of that type; required 1). Columns: kind ("relation" | "entity type"),
    name, questions, by_category (counts per question type), required, met.
    """
    type_of_name = dict(zip(entities["name"], entities["type"], strict=True))
    type_of_id = dict(zip(entities["entity_id"], entities["type"], strict=True))
    dated = relations[relations["valid_from"].notna()]
    timed_types = sorted({type_of_id[i] for i in [*dated["source_id"], *dated["target_id"]]})
    rows = []
    for relation in sorted(relations["relation"].unique()):
        using = [q for q in questions if any(e.relation == relation for e in q.gold_edges)]
        rows.append(("relation", relation, using, 2))
    for entity_type in timed_types:
        using = [
            q
            for q in questions
            if q.question_type == "temporal"
            and any(type_of_name.get(n) == entity_type for n in q.gold_entities)
        ]
        rows.append(("entity type", entity_type, using, 1))
    return pd.DataFrame(
        [
            {
                "kind": kind,
                "name": name,
                "questions": len(using),
                "by_category": dict(
                    sorted(pd.Series([q.question_type for q in using], dtype=object).value_counts().items())
                ),
                "required": required,
                "met": len(using) >= required,
            }
            for kind, name, using, required in rows
        ],
        columns=["kind", "name", "questions", "by_category", "required", "met"],
    )


def _edge(row: dict) -> _Edge:
    def year(value) -> int | None:
        return None if pd.isna(value) else int(value)

    return _Edge(
        id=str(row["relation_id"]),
        source=row["source_id"],
        target=row["target_id"],
        relation=row["relation"],
        valid_from=year(row["valid_from"]),
        valid_to=year(row["valid_to"]),
        doc_ids=tuple(row["doc_ids"]),
        sources=tuple(row.get("sources") or ()),
    )


def _interleave(pools: list[list], n: int) -> list:
    """Up to n items taken in turn from each pool, so every direction with candidates is asked."""
    out: list = []
    pools = [list(p) for p in pools]
    while len(out) < n and any(pools):
        for pool in pools:
            if pool and len(out) < n:
                out.append(pool.pop(0))
    return out


def _conflicts(
    steps: dict[tuple[str, str, str], list[_Edge]], relation: str
) -> list[tuple[str, list[_Edge]]]:
    """Subjects asserting several undated values of `relation` when the type is functional."""
    subjects = {a: es for (a, r, d), es in sorted(steps.items()) if (r, d) == (relation, "out")}
    several = {
        a: es
        for a, es in subjects.items()
        if len({e.target for e in es}) > 1 and all(e.valid_from is None for e in es)
    }
    if not subjects or len(several) > FUNCTIONAL_SHARE * len(subjects):
        return []
    # Where outlets are known, one outlet asserting two values is a list (partners), not a conflict.
    return [
        (a, es)
        for a, es in several.items()
        if not all(e.sources for e in es)
        or len({s for e in es for s in e.sources}) == sum(len(e.sources) for e in es)
    ]
