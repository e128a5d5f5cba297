"""Seeded generator of a fictional world with a known graph, rendered as a corpus with questions.

The kit's default corpus: it needs no download and gives exact ground truth. The world (entities
and typed relations, some time-bounded, some asserted differently by two outlets) is generated
first; rendering states every relation as one sentence in exactly one document, so each question's
gold documents, entities and edges are known by construction rather than annotated.
"""

from __future__ import annotations

import bisect
import random
import warnings
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any, cast

import pandas as pd
from pydantic import Field

from ragtrial.records import Dataset, Document, GoldEdge, Question, Record

LAST_YEAR = 2024  # the world's "now": an open-ended relation (valid_to=None) still holds in it

# A syllable is onset + vowel (+ a soft coda inside the word) and a word ends in a consonant. One
# syllable always carries a vowel digraph, which keeps invented words away from real names
# ("Madison", "Sudan", "Melon"); clusters only start a word, so names stay pronounceable.
ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z"]
CLUSTERS = ["br", "dr", "kr", "st", "tr"]
VOWELS = ["a", "e", "i", "o", "u"]
DIGRAPHS = ["ai", "ei", "ou"]
INNER_CODAS = ["", "", "l", "n", "r"]
FINAL_CODAS = ["k", "l", "m", "n", "r", "s"]

OCCUPATIONS = [
    "an engineer",
    "an architect",
    "an economist",
    "a chemist",
    "a lawyer",
    "a designer",
    "an accountant",
    "a journalist",
    "a geologist",
    "a pilot",
    "a teacher",
    "a surgeon",
]
INDUSTRIES = [  # (organisation description, product kinds it makes)
    ("a maker of delivery drones", ["Drone", "Glider"]),
    ("a manufacturer of solar equipment", ["Panel", "Inverter"]),
    ("a maker of kitchen appliances", ["Kettle", "Blender"]),
    ("a producer of outdoor gear", ["Tent", "Backpack"]),
    ("a medical device company", ["Monitor", "Scanner"]),
    ("a maker of electric bicycles", ["Bike", "Scooter"]),
    ("a manufacturer of farm machinery", ["Tractor", "Harvester"]),
    ("a consumer electronics firm", ["Tablet", "Headset"]),
]
ORG_SUFFIXES = ["Works", "Labs", "Systems", "Group", "Industries", "Foundry", "Holdings", "Dynamics"]
PRODUCT_ADJECTIVES = ["compact", "rugged", "lightweight", "budget", "premium", "modular"]
CITY_KINDS = ["a harbour city", "a mountain town", "a university town", "an industrial city", "a market town"]
REGION_KINDS = {
    "Valley": "a farming region",
    "Coast": "a coastal region",
    "Highlands": "an upland region",
    "Plains": "a grain-growing region",
    "Basin": "a river region",
}
EVENT_KINDS = {
    "Summit": "an industry summit",
    "Expo": "a trade exhibition",
    "Forum": "a policy forum",
    "Festival": "a music festival",
    "Fair": "a technology fair",
}
OUTLET_FORMS = ["The {} Courier", "{} Gazette", "{} Daily", "The {} Post", "{} Ledger", "{} Wire"]

# The document that states a relation is the profile of its owner: the target for these types,
# the source otherwise. Owners are chosen so every multi-hop chain crosses profiles
# (founded lives with the organisation, born_in with the founder).
OWNED_BY_TARGET = {"founded", "ceo_of", "manufactures"}

# {s}/{t} source/target, {a}/{b} valid_from/valid_to, {p} the predecessor (successor CEOs only).
# "<type>_open" variants render time-bounded relations that still hold (valid_to=None).
TEMPLATES: dict[str, list[str]] = {
    "born_in": [
        "{s} was born in {t}.",
        "{s} was born and raised in {t}.",
        "Records show that {s} was born in {t}.",
    ],
    "married_to": [
        "{s} is married to {t}.",
        "{s} and {t} are married.",
        "{s} has been married to {t} for years.",
    ],
    "attended": [
        "{s} attended {t}.",
        "{s} was among the guests at {t}.",
        "{s} travelled to {t} as a delegate.",
    ],
    "works_for": ["{s} worked for {t} from {a} to {b}.", "From {a} to {b}, {s} was employed by {t}."],
    "works_for_open": ["{s} has worked for {t} since {a}.", "Since {a}, {s} has been on the staff of {t}."],
    "ceo_of": [
        "{s} served as chief executive of {t} from {a} to {b}.",
        "From {a} to {b}, {s} was the CEO of {t}.",
        "In {a}, {s} succeeded {p} as chief executive of {t}, serving until {b}.",
    ],
    "ceo_of_open": [
        "{s} has been the chief executive of {t} since {a}.",
        "Since {a}, {t} has been led by CEO {s}.",
        "In {a}, {s} succeeded {p} as chief executive of {t}.",
    ],
    "founded": ["{s} founded {t} in {a}.", "{t} was founded in {a} by {s}.", "{s} started {t} in {a}."],
    "headquartered_in": [
        "{s} is headquartered in {t}.",
        "{s} has its headquarters in {t}.",
        "The head office of {s} is in {t}.",
    ],
    "manufactures": ["{t} is made by {s}.", "{s} manufactures {t}.", "{t} is produced by {s}."],
    "acquired": ["{s} acquired {t} in {a}.", "In {a}, {t} was bought by {s}.", "{s} took over {t} in {a}."],
    "partnered_with": ["{s} has a partnership with {t}.", "{s} and {t} signed a partnership agreement."],
    "located_in": ["{s} is a city in {t}.", "{s} lies in {t}.", "{s} is part of {t}."],
    "held_in": ["{s} was held in {t} in {a}.", "In {a}, {t} hosted {s}.", "{s} took place in {t} in {a}."],
}
# Sentences that mention an entity without stating any relation: hard negatives for retrieval.
DISTRACTORS = {
    "person": [
        "{x} gave a short talk at a local library.",
        "{x} declined to be interviewed for this story.",
        "{x} is said to enjoy long walks and chess.",
        "{x} was photographed at a charity dinner.",
    ],
    "organization": [
        "{x} did not respond to a request for comment.",
        "Shares in {x} barely moved this week.",
        "A staff newsletter from {x} was widely shared online.",
        "{x} plans to redesign its website.",
    ],
    "place": [
        "Heavy rain caused delays around {x} this spring.",
        "{x} is known for its old covered market.",
        "Visitor numbers in {x} rose slightly last year.",
        "Road works in {x} are expected to last a month.",
    ],
    "product": [
        "Early reviews of {x} were mixed.",
        "A software update for {x} fixed several minor bugs.",
        "{x} comes in three colours.",
        "Spare parts for {x} are hard to find.",
    ],
    "event": [
        "Tickets for {x} sold out within a week.",
        "Organisers of {x} promised a bigger venue.",
        "Dozens of volunteers helped run {x}.",
        "Photographs from {x} circulated widely.",
    ],
}

# Question kinds as walks from an anchor entity: (question, anchor type, [(relation, direction)]).
# A walk only counts when every step has exactly one result, which also drops contradicted facts.
Steps = list[tuple[str, str]]
Candidate = Callable[[str, str], Question]  # (question_id, question_type) -> Question
FOUNDER, MAKER, BORN = ("founded", "in"), ("manufactures", "in"), ("born_in", "out")
HQ, REGION, EVENT = ("headquartered_in", "out"), ("located_in", "out"), ("attended", "out")
SINGLE_HOP: dict[str, tuple[str, str, Steps]] = {
    "birthplace": ("Where was {a} born?", "person", [BORN]),
    "headquarters": ("In which city is {a} headquartered?", "organization", [HQ]),
    "founder": ("Who founded {a}?", "organization", [FOUNDER]),
    "maker": ("Which company manufactures {a}?", "product", [MAKER]),
    "spouse": ("Who is {a} married to?", "person", [("married_to", "out")]),
    "event_city": ("In which city was {a} held?", "event", [("held_in", "out")]),
    "city_region": ("In which region is {a}?", "place", [REGION]),
    "acquirer": ("Which company acquired {a}?", "organization", [("acquired", "in")]),
}
MULTI_HOP: dict[str, tuple[str, str, Steps]] = {
    "founder_birthplace": ("In which city was the founder of {a} born?", "organization", [FOUNDER, BORN]),
    "maker_headquarters": (
        "In which city is the company that manufactures {a} headquartered?",
        "product",
        [MAKER, HQ],
    ),
    "maker_founder": ("Who founded the company that manufactures {a}?", "product", [MAKER, FOUNDER]),
    "attended_event_city": (
        "In which city was the event attended by {a} held?",
        "person",
        [EVENT, ("held_in", "out")],
    ),
    "maker_acquirer": (
        "Which company acquired the manufacturer of {a}?",
        "product",
        [MAKER, ("acquired", "in")],
    ),
    "founder_birth_region": (
        "In which region was the founder of {a} born?",
        "organization",
        [FOUNDER, BORN, REGION],
    ),
    "maker_founder_birthplace": (
        "In which city was the founder of the company that manufactures {a} born?",
        "product",
        [MAKER, FOUNDER, BORN],
    ),
    "maker_headquarters_region": (
        "In which region is the manufacturer of {a} headquartered?",
        "product",
        [MAKER, HQ, REGION],
    ),
    "attended_event_region": (
        "In which region was the event attended by {a} held?",
        "person",
        [EVENT, ("held_in", "out"), REGION],
    ),
}
# Each walk kind's answer as a key fact (seed 004: the facts a correct answer must contain); {a} the
# anchor as the question mentions it, {x} the answer.
ANSWER_FACTS = {
    "birthplace": "{a} was born in {x}.",
    "headquarters": "{a} is headquartered in {x}.",
    "founder": "{a} was founded by {x}.",
    "maker": "{a} is made by {x}.",
    "spouse": "{a} is married to {x}.",
    "event_city": "{a} was held in {x}.",
    "city_region": "{a} is in {x}.",
    "acquirer": "{a} was acquired by {x}.",
    "founder_birthplace": "The founder of {a} was born in {x}.",
    "maker_headquarters": "The company that manufactures {a} is headquartered in {x}.",
    "maker_founder": "The company that manufactures {a} was founded by {x}.",
    "attended_event_city": "The event attended by {a} was held in {x}.",
    "maker_acquirer": "The manufacturer of {a} was acquired by {x}.",
    "founder_birth_region": "The founder of {a} was born in {x}.",
    "maker_founder_birthplace": "The founder of the company that manufactures {a} was born in {x}.",
    "maker_headquarters_region": "The manufacturer of {a} is headquartered in {x}.",
    "attended_event_region": "The event attended by {a} was held in {x}.",
}
CONTESTABLE = {"born_in": "birthplace", "headquartered_in": "headquarters"}  # functional: two values clash
# Query-focused summaries (for ROUGE / BERTScore against a reference): everything the world states
# about one entity. The reference is every such fact in its first template, in time order, so it is
# exact ground truth rather than a human summary. (question, entity type, fewest facts).
SUMMARY: dict[str, tuple[str, str, int]] = {
    "organization_profile": (
        "Summarize what the documents report about {a}: its founding, leadership, "
        "location, products and deals.",
        "organization",
        4,
    ),
    "person_profile": (
        "Summarize what the documents report about {a}: origins, family, career and appearances.",
        "person",
        3,
    ),
}


class Entity(Record):
    id: str
    name: str
    type: str  # person | organization | place | product | event
    description: str
    aliases: list[str] = Field(default_factory=list)


class Relation(Record):
    id: str
    source: str  # entity id
    target: str
    type: str
    valid_from: int | None = None
    valid_to: int | None = None  # None with valid_from set: still holds in LAST_YEAR
    sources: list[str] = Field(default_factory=list)  # outlets asserting it; a rival claim has its own


class World(Record):
    seed: int
    outlets: list[str]
    entities: list[Entity]
    relations: list[Relation]


class _Namer:
    """Invented capitalised words, each used once so no two names share a token."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.used: set[str] = set()

    def word(self, n_syllables: int) -> str:
        while True:
            vowels = [self.rng.choice(VOWELS) for _ in range(n_syllables)]
            vowels[self.rng.randrange(n_syllables)] = self.rng.choice(DIGRAPHS)
            onsets = [self.rng.choice(ONSETS + CLUSTERS)] + [self.rng.choice(ONSETS) for _ in vowels[1:]]
            codas = [self.rng.choice(INNER_CODAS) for _ in vowels[1:]] + [self.rng.choice(FINAL_CODAS)]
            word = "".join(o + v + c for o, v, c in zip(onsets, vowels, codas, strict=True))
            if word not in self.used:
                self.used.add(word)
                return word.capitalize()


def generate_world(
    n_people: int = 64,
    n_orgs: int = 16,
    n_cities: int = 14,
    n_regions: int = 4,
    n_products: int = 16,
    n_events: int = 8,
    n_contradictions: int = 6,
    n_outlets: int = 6,
    seed: int = 0,
) -> World:
    """A random world (defaults: the small preset); the same arguments always give the same world."""
    if min(n_orgs, n_cities, n_regions, n_outlets) < 2 or n_people < 2 * n_orgs:
        raise ValueError("need >= 2 organisations, cities, regions and outlets and 2 people per organisation")
    rng = random.Random(f"world:{seed}")
    namer = _Namer(rng)
    outlets = [rng.choice(OUTLET_FORMS).format(namer.word(2)) for _ in range(n_outlets)]
    entities: list[Entity] = []
    relations: list[Relation] = []
    outlet_of: dict[str, str] = {}  # each entity's profile is written by one outlet

    def entity(type_: str, name: str, description: str, aliases: list[str] | None = None) -> str:
        entities.append(
            Entity(
                id=f"{type_[:3]}-{len(entities):05d}",
                name=name,
                type=type_,
                description=description,
                aliases=aliases or [],
            )
        )
        outlet_of[entities[-1].id] = rng.choice(outlets)
        return entities[-1].id

    def relate(type_: str, source: str, target: str, start: int | None = None, end: int | None = None):
        owner = target if type_ in OWNED_BY_TARGET else source
        relations.append(
            Relation(
                id=f"rel-{len(relations):05d}",
                source=source,
                target=target,
                type=type_,
                valid_from=start,
                valid_to=end,
                sources=[outlet_of[owner]],
            )
        )

    regions = []
    for _ in range(n_regions):
        kind = rng.choice(list(REGION_KINDS))
        regions.append(entity("place", f"{namer.word(2)} {kind}", REGION_KINDS[kind]))
    cities = [
        entity("place", namer.word(rng.choice([2, 3])), rng.choice(CITY_KINDS)) for _ in range(n_cities)
    ]
    for city in cities:
        relate("located_in", city, rng.choice(regions))
    orgs, industry, founded_in = [], {}, {}
    for _ in range(n_orgs):
        stem, ind = namer.word(rng.choice([2, 3])), rng.choice(INDUSTRIES)
        orgs.append(entity("organization", f"{stem} {rng.choice(ORG_SUFFIXES)}", ind[0], [stem]))
        industry[orgs[-1]], founded_in[orgs[-1]] = ind, rng.randint(1970, 2004)
        relate("headquartered_in", orgs[-1], rng.choice(cities))
    people = [
        entity("person", f"{namer.word(2)} {namer.word(rng.choice([2, 3]))}", rng.choice(OCCUPATIONS))
        for _ in range(n_people)
    ]
    for person in people:
        relate("born_in", person, rng.choice(cities))

    # Each organisation gets a founder (its first CEO) and successors with contiguous terms, up to
    # a quota that leaves at least one person per organisation to hold ordinary jobs.
    pool = rng.sample(people, n_people)
    quota = max(1, min(4, n_people // n_orgs - 1))
    for org in orgs:
        ceo, start = pool.pop(), founded_in[org]
        relate("founded", ceo, org, start)
        for term in range(1, quota + 1):
            end = start + rng.randint(4, 14)
            if term == quota or end >= LAST_YEAR - 2:  # the last chief executive is still in office
                relate("ceo_of", ceo, org, start)
                break
            relate("ceo_of", ceo, org, start, end)
            ceo, start = pool.pop(), end
    by_age = sorted(orgs, key=founded_in.__getitem__)
    years = [founded_in[o] for o in by_age]
    for person in pool:  # everyone who leads nothing holds one or two consecutive jobs
        org = rng.choice(orgs)
        start = rng.randint(founded_in[org] + 1, 2016)
        for _ in range(2):
            end = start + rng.randint(3, 9)
            if end >= LAST_YEAR - 1:
                relate("works_for", person, org, start)
                break
            relate("works_for", person, org, start, end)
            successor = rng.choice(by_age[: bisect.bisect_left(years, end)])  # founded before the move
            if successor == org or rng.random() < 0.4:
                break
            org, start = successor, end

    couples = rng.sample(people, 2 * (n_people // 5))
    for a, b in zip(couples[::2], couples[1::2], strict=True):
        relate("married_to", a, b)
    for _ in range(n_products):
        maker = rng.choice(orgs)
        stem, kind = namer.word(2), rng.choice(industry[maker][1])
        description = f"a {rng.choice(PRODUCT_ADJECTIVES)} {kind.lower()}"
        relate("manufactures", maker, entity("product", f"{stem} {kind}", description, [stem]))
    events = []
    for _ in range(n_events):
        kind, year = rng.choice(list(EVENT_KINDS)), rng.randint(2000, 2023)
        events.append(entity("event", f"{namer.word(2)} {kind}", EVENT_KINDS[kind]))
        relate("held_in", events[-1], rng.choice(cities), year, year)
    for person in people:
        if events and rng.random() < 0.4:
            relate("attended", person, rng.choice(events))

    # Acquirers are never themselves acquired, so "who acquired X" has one answer and no cycles.
    targets = rng.sample(orgs, n_orgs // 4)
    buyers = sorted(set(orgs) - set(targets))
    for target in targets:
        buyer = rng.choice(buyers)
        relate("acquired", buyer, target, rng.randint(max(founded_in[buyer], founded_in[target]) + 2, 2023))
    for a, b in sorted({tuple(sorted(rng.sample(orgs, 2))) for _ in range(n_orgs // 3)}):
        relate("partnered_with", a, b)

    # A contradiction is a rival claim for a functional fact, asserted by a different outlet.
    contestable = [r for r in relations if r.type in CONTESTABLE]
    for rel in rng.sample(contestable, min(n_contradictions, len(contestable))):
        relations.append(
            rel.model_copy(
                update={
                    "id": f"rel-{len(relations):05d}",
                    "target": rng.choice([c for c in cities if c != rel.target]),
                    "sources": [rng.choice([o for o in outlets if o != rel.sources[0]])],
                }
            )
        )
    return World(seed=seed, outlets=outlets, entities=entities, relations=relations)


def _mention(entity: Entity) -> str:
    return f"the {entity.name}" if entity.type in ("product", "event") else entity.name


def _sentence(template: str, **fields: Any) -> str:
    text = template.format(**fields)
    return text[0].upper() + text[1:]


def _templates(rel: Relation) -> list[str]:
    """The sentences that can state `rel`: the "_open" variants when a time-bounded relation still holds."""
    open_key = f"{rel.type}_open"
    return TEMPLATES[open_key if rel.valid_to is None and open_key in TEMPLATES else rel.type]


def _by(relations: list[Relation], type_: str, key: str) -> dict[str, list[Relation]]:
    """Relations of one type grouped by source or target id, each group in time order."""
    groups: dict[str, list[Relation]] = defaultdict(list)
    for rel in relations:
        if rel.type == type_:
            groups[getattr(rel, key)].append(rel)
    return {k: sorted(v, key=lambda r: r.valid_from or 0) for k, v in groups.items()}


def _pack(keys: list[tuple[str, str]], n_documents: int) -> list[list[tuple[str, str]]]:
    """Split (entity, outlet) profile sections into exactly n_documents groups of one outlet each."""
    by_outlet: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for key in keys:
        by_outlet[key[1]].append(key)
    if not len(by_outlet) <= n_documents <= len(keys):
        raise ValueError(
            f"n_documents must be between {len(by_outlet)} (outlets) and {len(keys)} "
            f"(profile sections) for this world; got {n_documents}"
        )
    counts = dict.fromkeys(by_outlet, 1)
    for _ in range(n_documents - len(by_outlet)):  # the next document goes to the most crowded outlet
        outlet = max(
            (o for o in by_outlet if counts[o] < len(by_outlet[o])),
            key=lambda o: len(by_outlet[o]) / counts[o],
        )
        counts[outlet] += 1
    return [
        items[j * len(items) // c : (j + 1) * len(items) // c]
        for outlet, items in by_outlet.items()
        for c in [counts[outlet]]
        for j in range(c)
    ]


def render_corpus(
    world: World,
    n_documents: int | None = None,
    *,
    n_single_hop: int = 12,
    n_multi_hop: int = 12,
    n_temporal: int = 10,
    n_contradictory: int = 6,
    n_summary: int = 6,
    seed: int = 0,
) -> Dataset:
    """Documents (one sentence per relation, plus distractors) and questions with gold support.

    Without n_documents every (entity, outlet) profile is its own document; with it, profiles of
    one outlet are merged into briefings. Document metadata lists the relation ids it states.
    When the world offers fewer questions of a kind than asked, the shortfall is warned about.
    """
    rng = random.Random(f"render:{world.seed}:{seed}")
    ents = {e.id: e for e in world.entities}
    sections: dict[tuple[str, str], list[Relation]] = defaultdict(list)
    for rel in world.relations:
        sections[(rel.target if rel.type in OWNED_BY_TARGET else rel.source, rel.sources[0])].append(rel)
    keys = list(sections)
    rng.shuffle(keys)
    groups = _pack(keys, n_documents or len(keys))
    rng.shuffle(groups)  # so document ids do not cluster by outlet
    predecessor = {
        after.id: ents[before.source].name
        for terms in _by(world.relations, "ceo_of", "target").values()
        for before, after in zip(terms, terms[1:], strict=False)
    }

    documents, doc_of = [], {}
    width = max(4, len(str(len(groups) - 1)))
    for i, group in enumerate(groups):
        doc_id, sentences, rel_ids = f"doc-{i:0{width}d}", [], []
        for key in group:
            owner = ents[key[0]]
            rels = sorted(rng.sample(sections[key], len(sections[key])), key=lambda r: r.valid_from or 0)
            sentences.append(_sentence("{x} is {d}.", x=_mention(owner), d=owner.description))
            for rel in rels:  # untimed facts in random order, then timed ones chronologically
                template = rng.choice([t for t in _templates(rel) if rel.id in predecessor or "{p}" not in t])
                sentences.append(
                    _sentence(
                        template,
                        s=_mention(ents[rel.source]),
                        t=_mention(ents[rel.target]),
                        a=rel.valid_from,
                        b=rel.valid_to,
                        p=predecessor.get(rel.id),
                    )
                )
                rel_ids.append(rel.id)
                doc_of[rel.id] = doc_id
        n_words, target = sum(len(s.split()) for s in sentences), rng.randint(120, 200)
        for k in range(4):  # at least one distractor; a few more while the document is short
            if k and n_words >= target:
                break
            other = rng.choice(world.entities)
            line = _sentence(rng.choice(DISTRACTORS[other.type]), x=_mention(other))
            sentences.insert(rng.randint(1, len(sentences)), line)
            n_words += len(line.split())
        names = [ents[owner].name for owner, _ in group]
        documents.append(
            Document(
                doc_id=doc_id,
                title=names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1],
                text=" ".join(sentences),
                source=group[0][1],
                date=f"{rng.randint(2024, 2025)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                metadata={"relation_ids": rel_ids, "topic_ids": [owner for owner, _ in group]},
            )
        )

    wanted = {
        "single_hop": n_single_hop,
        "multi_hop": n_multi_hop,
        "temporal": n_temporal,
        "contradictory": n_contradictory,
        "summary": n_summary,
    }
    questions = []
    for qtype, candidates in _candidates(world, ents, doc_of, predecessor, rng).items():
        chosen = _round_robin(candidates, wanted[qtype], rng)
        if len(chosen) < wanted[qtype]:
            warnings.warn(
                f"world offers only {len(chosen)} {qtype} questions, {wanted[qtype]} asked", stacklevel=2
            )
        questions += [build(f"{qtype}-{j:03d}", qtype) for j, build in enumerate(chosen)]
    return Dataset(name="generated", documents=documents, questions=questions)


def _candidates(
    world: World,
    ents: dict[str, Entity],
    doc_of: dict[str, str],
    predecessor: dict[str, str],
    rng: random.Random,
) -> dict[str, dict[str, list[Candidate]]]:
    """Every question the world supports, by question type and then kind."""
    edges: dict[tuple[str, str, str], list[Relation]] = defaultdict(list)
    for rel in world.relations:
        edges[(rel.source, rel.type, "out")].append(rel)
        edges[(rel.target, rel.type, "in")].append(rel)
    by_kind: dict[str, dict[str, list[Candidate]]] = defaultdict(lambda: defaultdict(list))

    def add(
        qtype: str,
        kind: str,
        text: str,
        answers: list[str],
        rels: list[Relation],
        references: Sequence[str] = (),
        facts: Sequence[str] = (),
        **metadata: Any,
    ):
        def build(question_id: str, question_type: str) -> Question:  # deferred: most candidates go unused
            ids = dict.fromkeys(i for r in rels for i in (r.source, r.target))
            return Question(
                question_id=question_id,
                question=text,
                answers=answers,
                question_type=question_type,
                reference_summaries=list(references),
                gold_doc_ids=list(dict.fromkeys(doc_of[r.id] for r in rels)),
                gold_entities=[ents[i].name for i in ids],
                gold_edges=[
                    GoldEdge(
                        source=ents[r.source].name,
                        relation=r.type,
                        target=ents[r.target].name,
                        valid_from=r.valid_from,
                        valid_to=r.valid_to,
                    )
                    for r in rels
                ],
                key_facts=list(facts),
                metadata={"kind": kind, **metadata},
            )

        by_kind[qtype][kind].append(build)

    for qtype, table in [("single_hop", SINGLE_HOP), ("multi_hop", MULTI_HOP)]:
        for kind, (text, anchor_type, steps) in table.items():
            for anchor in (e for e in world.entities if e.type == anchor_type):
                node, rels = anchor.id, []
                for type_, direction in steps:
                    found = edges.get((node, type_, direction), [])
                    if len(found) != 1:
                        break
                    rels.append(found[0])
                    node = found[0].target if direction == "out" else found[0].source
                else:
                    if len({doc_of[r.id] for r in rels}) == len(rels):  # each hop from another document
                        hops: dict[str, Any] = {"hops": len(rels)} if qtype == "multi_hop" else {}
                        answers = [ents[node].name, *ents[node].aliases]
                        fact = _sentence(ANSWER_FACTS[kind], a=_mention(anchor), x=_mention(ents[node]))
                        add(qtype, kind, text.format(a=_mention(anchor)), answers, rels, facts=[fact], **hops)

    for org, terms in _by(world.relations, "ceo_of", "target").items():
        for before, rel in zip(terms, terms[1:], strict=False):
            add(
                "temporal",
                "ceo_successor",
                f"Who succeeded {ents[before.source].name} as chief executive of {ents[org].name}?",
                [ents[rel.source].name],
                [before, rel],
                facts=[
                    f"{ents[rel.source].name} succeeded {ents[before.source].name} as chief executive of "
                    f"{ents[org].name}."
                ],
                year=rel.valid_from,
            )
    for rel in world.relations:
        src, tgt = ents[rel.source], ents[rel.target]
        start, end = rel.valid_from, rel.valid_to or LAST_YEAR + 1
        # Ask strictly inside a term: in a boundary year both the old and the new holder are right.
        # cast: the world dates every ceo_of and works_for term (valid_from is set).
        inside = rel.type in ("ceo_of", "works_for") and end - cast(int, start) >= 2
        year = rng.randint(cast(int, start) + 1, end - 1) if inside else start
        if rel.type == "ceo_of" and inside:
            add(
                "temporal",
                "ceo_in_year",
                f"Who was the chief executive of {tgt.name} in {year}?",
                [src.name],
                [rel],
                facts=[f"{src.name} was the chief executive of {tgt.name} in {year}."],
                year=year,
            )
        elif rel.type == "works_for" and inside:
            add(
                "temporal",
                "employer_in_year",
                f"Which organisation did {src.name} work for in {year}?",
                [tgt.name, *tgt.aliases],
                [rel],
                facts=[f"{src.name} worked for {tgt.name} in {year}."],
                year=year,
            )
        elif rel.type == "acquired":
            add(
                "temporal",
                "acquisition_year",
                f"In which year did {src.name} acquire {tgt.name}?",
                [str(year)],
                [rel],
                facts=[f"{src.name} acquired {tgt.name} in {year}."],
                year=year,
            )
        elif rel.type == "founded":
            add(
                "temporal",
                "founding_year",
                f"In which year was {tgt.name} founded?",
                [str(year)],
                [rel],
                facts=[f"{tgt.name} was founded in {year}."],
                year=year,
            )

    contested: set[str] = set()
    for type_, kind in CONTESTABLE.items():
        for subject, claims in _by(world.relations, type_, "source").items():
            if len(claims) > 1:
                contested.update(c.id for c in claims)
                add(
                    "contradictory",
                    kind,
                    SINGLE_HOP[kind][0].format(a=_mention(ents[subject])),
                    [ents[c.target].name for c in claims],
                    claims,
                    facts=[
                        f"According to {c.sources[0]}, {_canonical(c, ents, predecessor, False)}"
                        for c in claims
                    ],
                    sources=[c.sources[0] for c in claims],
                    claims=[
                        {"value": ents[c.target].name, "source": c.sources[0], "doc_id": doc_of[c.id]}
                        for c in claims
                    ],
                )

    touching: dict[str, list[Relation]] = defaultdict(list)
    for rel in world.relations:
        touching[rel.source].append(rel)
        touching[rel.target].append(rel)
    for kind, (text, entity_type, min_facts) in SUMMARY.items():
        for entity in (
            e for e in world.entities if e.type == entity_type and len(touching[e.id]) >= min_facts
        ):
            rels = sorted(touching[entity.id], key=lambda r: (r.valid_from or 0, r.id))
            facts = [_canonical(r, ents, predecessor, r.id in contested) for r in rels]
            add(
                "summary",
                kind,
                text.format(a=_mention(entity)),
                [],
                rels,
                references=[" ".join(facts)],
                facts=facts,
            )
    return {
        qtype: by_kind[qtype] for qtype in ("single_hop", "multi_hop", "temporal", "contradictory", "summary")
    }


def _canonical(rel: Relation, ents: dict[str, Entity], predecessor: dict[str, str], contested: bool) -> str:
    """A relation in its first template, naming the outlet when another outlet says otherwise."""
    text = relation_sentence(
        rel.type,
        _mention(ents[rel.source]),
        _mention(ents[rel.target]),
        rel.valid_from,
        rel.valid_to,
        predecessor.get(rel.id),
    )
    return f"{text[:-1]}, according to {rel.sources[0]}." if contested else text


def relation_sentence(
    relation: str,
    source: str,
    target: str,
    valid_from: int | None = None,
    valid_to: int | None = None,
    predecessor: str | None = None,
) -> str:
    """The canonical sentence of a relation of the generated world's types (its first template)."""
    rel = Relation(
        id="", source=source, target=target, type=relation, valid_from=valid_from, valid_to=valid_to
    )
    return _sentence(_templates(rel)[0], s=source, t=target, a=valid_from, b=valid_to, p=predecessor)


def _round_robin(by_kind: dict[str, list[Candidate]], n: int, rng: random.Random) -> list[Candidate]:
    """N questions taken in turn from each kind (shuffled), so every kind is represented."""
    pools = [rng.sample(v, len(v)) for _, v in sorted(by_kind.items())]
    chosen: list[Candidate] = []
    while len(chosen) < n and any(pools):
        for pool in pools:
            if pool and len(chosen) < n:
                chosen.append(pool.pop())
    return chosen


def world_tables(world: World, dataset: Dataset | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The gold graph as (entities, relations) frames; doc_ids come from the rendered dataset."""
    stated: dict[str, list[str]] = defaultdict(list)
    for doc in dataset.documents if dataset else []:
        for rel_id in doc.metadata.get("relation_ids", []):
            stated[rel_id].append(doc.doc_id)
    entities = pd.DataFrame(
        [(e.id, e.name, e.type, e.description, e.aliases) for e in world.entities],
        columns=["entity_id", "name", "type", "description", "aliases"],
    )
    relations = pd.DataFrame(
        [
            (r.id, r.source, r.target, r.type, r.valid_from, r.valid_to, r.sources, stated[r.id])
            for r in world.relations
        ],
        columns=[
            "relation_id",
            "source_id",
            "target_id",
            "relation",
            "valid_from",
            "valid_to",
            "sources",
            "doc_ids",
        ],
    )
    return entities, relations.astype({"valid_from": "Int64", "valid_to": "Int64"})


# Sized for about 12 fact sentences per document (~145 words, ~240 tokens); large gives > 10,000
# chunks of 128 tokens. A row is the generate_world arguments, then the render_corpus ones.
WORLD_KEYS = (
    "n_people",
    "n_orgs",
    "n_cities",
    "n_regions",
    "n_products",
    "n_events",
    "n_contradictions",
    "n_outlets",
)
CORPUS_KEYS = ("n_documents", "n_single_hop", "n_multi_hop", "n_temporal", "n_contradictory", "n_summary")
PRESETS: dict[str, dict[str, int]] = {
    name: dict(zip(WORLD_KEYS + CORPUS_KEYS, row, strict=True))
    for name, row in {
        "tiny": (16, 5, 5, 2, 5, 3, 2, 3, 8, 3, 3, 3, 2, 2),
        "small": (64, 16, 14, 4, 16, 8, 6, 6, 26, 12, 12, 10, 6, 6),
        "medium": (480, 120, 100, 12, 120, 60, 40, 10, 200, 40, 40, 30, 20, 20),
        # seed 004's 200-500-question suite: the medium world with more rival claims, 380 questions
        # across the four categories (the world offers more of each)
        "diagnostics": (480, 120, 100, 12, 120, 60, 80, 10, 200, 100, 100, 100, 80, 20),
        "large": (12000, 3000, 2500, 120, 3000, 1500, 500, 16, 5000, 200, 200, 200, 100, 100),
    }.items()
}


def generate_corpus(size: str | dict[str, int] = "small", seed: int = 0) -> tuple[Dataset, World]:
    """A preset by name, or a dict of generate_world / render_corpus arguments over the small preset."""
    if isinstance(size, str) and size not in PRESETS:
        raise ValueError(f"unknown size {size!r}; presets: {', '.join(PRESETS)}")
    spec = PRESETS[size] if isinstance(size, str) else {**PRESETS["small"], **size}
    world = generate_world(**{k: v for k, v in spec.items() if k in WORLD_KEYS}, seed=seed)
    corpus = render_corpus(world, **{k: v for k, v in spec.items() if k not in WORLD_KEYS}, seed=seed)
    return corpus, world
