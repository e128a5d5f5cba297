"""The build step that dates relations from their text, without a model.

A relation's validity is read from the sentences of its source chunks that name both of its
endpoints: "from 2001 to 2010" / "between 2001 and 2005" / "2001-2010" give both years, "since
2005" a start that still holds, "until 2010" an end, "in 2003" the year the relation began (an
acquisition, a founding, a succession holds from then on; with "until" in the same sentence it
is the start of that term). Of several such sentences, those naming the fewest other entities of
the chunk speak most directly of the pair and alone are read. A relation no dated sentence
states stays missing in both columns (`valid_from`, `valid_to`), never 0.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

import pandas as pd

from ragtrial.index.merge_extractions import normalize_name
from ragtrial.index.phrases import sentences
from ragtrial.index.tables import GraphIndex

Validity = tuple[int | None, int | None]  # (valid_from, valid_to); None: not stated / still holds

_YEAR = r"((?:1[0-9]|20|21)\d\d)(?!\d)"
_RANGES = [
    re.compile(
        rf"\b(?:from|between)\s+{_YEAR}\s*(?:\b(?:to|until|till|through|and)\b|[-–—])\s*{_YEAR}", re.I
    ),
    re.compile(rf"(?<!\d){_YEAR}\s*[-–—]\s*{_YEAR}"),
]
_START = re.compile(rf"\b(?:since|from|starting(?:\s+in)?|beginning(?:\s+in)?)\s+{_YEAR}", re.IGNORECASE)
_END = re.compile(rf"\b(?:until|till|through|up\s+to|ending(?:\s+in)?)\s+{_YEAR}", re.IGNORECASE)
_WORD = re.compile(r"[^\W_]+")
_IN = re.compile(rf"\b(?:in|during)\s+(?:(?:early|late|mid-?)\s*)?{_YEAR}", re.IGNORECASE)


def sentence_validity(sentence: str) -> Validity | None:
    """The years a sentence states for what it says, or None when it states none (see the module doc).

    A range gives (first, last); otherwise the start is the earliest "since"/"from"/"in" year and
    the end the latest "until" year, missing when not stated ("since 2005" -> (2005, None)).
    """
    ranges = [(int(a), int(b)) for pattern in _RANGES for a, b in pattern.findall(sentence)]
    if ranges:
        return min(a for a, _ in ranges), max(b for _, b in ranges)
    starts = [int(y) for y in _START.findall(sentence) + _IN.findall(sentence)]
    ends = [int(y) for y in _END.findall(sentence)]
    if not starts and not ends:
        return None
    return (min(starts) if starts else None), (max(ends) if ends else None)


def combined_validity(validities: Sequence[Validity]) -> Validity:
    """One span for several dated statements of a relation: the earliest stated start and, unless
    one statement still holds (a start without an end), the latest stated end.
    """
    starts = [a for a, _ in validities if a is not None]
    ends = [b for _, b in validities if b is not None]
    ongoing = any(a is not None and b is None for a, b in validities)
    return (min(starts) if starts else None), (None if ongoing or not ends else max(ends))


def _words(text: str) -> str:
    """Normalized text as space-delimited words, so a name is found only as whole words."""
    return " " + " ".join(_WORD.findall(normalize_name(text))) + " "


# A chunk's dated sentences, each as (its normalized words, `_words`; its validity).
DatedSentences = list[tuple[str, Validity]]


def chunk_dates(text: str) -> DatedSentences:
    """The dated sentences of a chunk, whatever they name: the part of dating that reads the text
    (the sentence split, most of the work), which needs no graph.
    """
    found = []
    for sentence in sentences(text):
        if (validity := sentence_validity(sentence)) is not None:
            found.append((_words(sentence), validity))
    return found


def chunks_dates(chunks: pd.DataFrame) -> dict[str, DatedSentences]:
    """`chunk_dates` of every chunk, by chunk id."""
    return {c: chunk_dates(text) for c, text in zip(chunks["chunk_id"], chunks["text"], strict=True)}


def dated_sentences(
    text: str, names: set[str], dates: DatedSentences | None = None
) -> list[tuple[frozenset[str], Validity]]:
    """The dated sentences of a chunk, each as (the `names` it mentions, its validity); `dates`: the
    chunk's `chunk_dates`, when read already.
    """
    keyed = {n: _words(n) for n in names if n}
    return [
        (frozenset(n for n, w in keyed.items() if w in words), validity)
        for words, validity in (chunk_dates(text) if dates is None else dates)
    ]


def relation_validity(
    pair: frozenset[str], dated: Iterable[tuple[frozenset[str], Validity]]
) -> Validity | None:
    """The validity of the relation between the normalized names `pair`, from the dated sentences of
    its source chunks (`dated_sentences`): those that name both, and of them the ones naming the
    fewest other entities; None when no dated sentence names both.
    """
    naming = [(len(named - pair), validity) for named, validity in dated if pair <= named]
    if not naming:
        return None
    fewest = min(n for n, _ in naming)
    return combined_validity([v for n, v in naming if n == fewest])


def date_relations(index: GraphIndex, dates: Mapping[str, DatedSentences] | None = None) -> GraphIndex:
    """`index` with each relation's `valid_from` / `valid_to` read from its source chunks (missing
    when no sentence naming both endpoints states a year); every other column unchanged. `dates`:
    `chunks_dates` of the index's chunks, when read already (the build reads them while the model
    calls are in flight).
    """
    name_of = {
        e: normalize_name(n) for e, n in zip(index.entities["entity_id"], index.entities["name"], strict=True)
    }
    rels = index.relations
    pairs = [
        frozenset((name_of.get(s, ""), name_of.get(t, "")))
        for s, t in zip(rels["source_id"], rels["target_id"], strict=True)
    ]
    names_of: dict[str, set[str]] = {}  # chunk -> the names of the entities it mentions or relates
    for name, chunk_ids in zip(index.entities["name"], index.entities["chunk_ids"], strict=True):
        for c in chunk_ids:
            names_of.setdefault(c, set()).add(normalize_name(name))
    for pair, chunk_ids in zip(pairs, rels["chunk_ids"], strict=True):
        for c in chunk_ids:
            names_of.setdefault(c, set()).update(pair)
    cited = set(names_of)
    dated = {
        c: dated_sentences(text, names_of[c], None if dates is None else dates[c])
        for c, text in zip(index.chunks["chunk_id"], index.chunks["text"], strict=True)
        if c in cited
    }
    spans = [
        (
            relation_validity(pair, [d for c in chunk_ids for d in dated.get(c, [])])
            if len(pair) == 2 and "" not in pair
            else None
        )
        or (None, None)
        for pair, chunk_ids in zip(pairs, rels["chunk_ids"], strict=True)
    ]
    return replace(
        index,
        relations=rels.assign(
            valid_from=pd.array([a for a, _ in spans], dtype="Int64"),
            valid_to=pd.array([b for _, b in spans], dtype="Int64"),
        ),
    )
