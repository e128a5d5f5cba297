"""Merging extraction instances into one graph.

Every extraction source (NLP, OpenIE triples, the LLM extractor, imports) produces *instance*
rows, one per mention, in the entities/relations columns of the index contract;
`merge_extractions` folds them into one graph keyed by normalized name, as GraphRAG folds
repeated element instances into nodes and edges: an edge's weight is the sum of its instances'
weights (an instance's weight is the extractor's: 1 per co-occurring chunk for the NLP graph, 1 per
OpenIE triple, the model's strength or 1 per instance for the LLM graph, see `index.relation_weight`).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import pandas as pd

from ragtrial.index.tables import SCHEMAS, conform_table, produced_columns, short_hash

Frames = tuple[pd.DataFrame, pd.DataFrame]
# The columns an extraction's instance frames need (relation/entity ids and degree are derived).
ENTITY_INSTANCE = ["entity_id", "name", "type", "description", "chunk_ids", "origin"]
RELATION_INSTANCE = ["source_id", "target_id", "description", "weight", "chunk_ids"]

# ---------------------------------------------------------------- names and ids


@lru_cache(maxsize=1 << 17)  # names repeat across mentions; bounded for long sessions
def normalize_name(name: str) -> str:
    """Merge key: NFKC, case-folded, possessive 's / s' stripped, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", name).replace("’", "'").casefold()
    text = re.sub(r"(?<=\w)'s\b|(?<=s)'(?!\w)", "", text)
    return " ".join(text.strip(" \t\n\"'.,;:!?()[]{}").split())


@lru_cache(maxsize=1 << 17)
def entity_key(normalized: str) -> str:
    return "ent-" + short_hash(normalized)


def relation_key(id_a: str, id_b: str) -> str:
    return "rel-" + short_hash(*sorted((id_a, id_b)))


# ---------------------------------------------------------------- merging


@dataclass
class _Fold:
    descriptions: dict[str, None] = field(default_factory=dict)
    chunks: dict[str, None] = field(default_factory=dict)

    def add(self, description: str, chunk_ids: Iterable[str], bound: int | None) -> None:
        if description and (bound is None or len(self.descriptions) < bound):
            self.descriptions[description] = None
        self.chunks.update(dict.fromkeys(chunk_ids))


@dataclass
class _EntityFold(_Fold):
    names: Counter = field(default_factory=Counter)
    types: Counter = field(default_factory=Counter)
    origins: Counter = field(default_factory=Counter)


@dataclass
class _RelationFold(_Fold):
    ends: tuple[str, str] = ("", "")
    weight: float = 0.0


def _top(counter: Counter) -> str:
    # Most common value, ties to the earliest seen (Counter keeps insertion order for equal counts).
    return max(counter, key=counter.__getitem__) if counter else ""


def merge_extractions(extractions: Sequence[Frames], max_descriptions: int | None = None) -> Frames:
    """Fold entity/relation instances from any number of extractions into one graph.

    Entities merge by `normalize_name(name)` (id `entity_key` of it): chunk_ids are unioned in
    order, distinct non-empty descriptions are joined with newlines (at most `max_descriptions`),
    and name/type/origin take the most common value among the instances. Relations merge by the
    unordered pair of merged endpoints (Leiden and degree treat the graph as undirected), keeping
    the first instance's direction and summing weights; self-loops left by merging aliases of one
    entity are dropped. Degree is recomputed.
    """
    ents: dict[str, _EntityFold] = {}
    rels: dict[tuple[str, str], _RelationFold] = {}
    for i, (entities, relations) in enumerate(extractions):
        key_of: dict[str, str] = {}
        for eid, name, typ, desc, chunks, origin in zip(
            *(entities[c].tolist() for c in ENTITY_INSTANCE), strict=True
        ):
            key = normalize_name(name)
            if not key:
                raise ValueError(
                    f"extraction {i}: entity {eid!r} has no name left after normalizing {name!r}"
                )
            if key_of.setdefault(eid, key) != key:
                raise ValueError(f"extraction {i}: entity id {eid!r} is used for {key_of[eid]!r} and {key!r}")
            fold = ents.get(entity_key(key)) or ents.setdefault(entity_key(key), _EntityFold())
            fold.names[name] += 1
            fold.types.update([typ] if typ else [])
            fold.origins[origin] += 1
            fold.add(desc, chunks, max_descriptions)
        for src, tgt, desc, weight, chunks in zip(
            *(relations[c].tolist() for c in RELATION_INSTANCE), strict=True
        ):
            for end in (src, tgt):
                if end not in key_of:
                    raise ValueError(
                        f"extraction {i}: relation {src!r} -> {tgt!r} names unknown entity {end!r}"
                    )
            a, b = entity_key(key_of[src]), entity_key(key_of[tgt])
            if a == b:
                continue
            pair = (a, b) if a < b else (b, a)
            rel_fold = rels.get(pair) or rels.setdefault(pair, _RelationFold(ends=(a, b)))
            rel_fold.weight += float(weight)
            rel_fold.add(desc, chunks, max_descriptions)
    relations_df = pd.DataFrame(
        [
            (relation_key(*pair), *f.ends, "\n".join(f.descriptions), f.weight, list(f.chunks))
            for pair, f in rels.items()
        ],
        columns=produced_columns("relations"),
    )
    neighbours = Counter(end for pair in rels for end in pair)
    entities_df = pd.DataFrame(
        [
            (
                eid,
                _top(f.names),
                _top(f.types),
                "\n".join(f.descriptions),
                list(f.chunks),
                neighbours[eid],
                _top(f.origins),
            )
            for eid, f in ents.items()
        ],
        columns=list(SCHEMAS["entities"]),
    )
    return conform_table("entities", entities_df), conform_table("relations", relations_df)
