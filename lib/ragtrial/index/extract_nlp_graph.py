"""The entity graph without an LLM: noun phrases as entities, co-occurrence (in a sentence or a
chunk) as relations, the way GraphRAG's NLP graph extraction builds it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from itertools import combinations

import pandas as pd

from ragtrial.index.merge_extractions import (
    ENTITY_INSTANCE,
    RELATION_INSTANCE,
    Frames,
    entity_key,
    merge_extractions,
    normalize_name,
)
from ragtrial.index.phrases import lower_case_vocabulary, noun_phrases, sentences

# ---------------------------------------------------------------- NLP extraction

_MAX_SENTENCE_CHARS = 400


# One chunk's sentences (whitespace-collapsed, bounded), each with the names it mentions
# (normalized key, surface, type).
ParsedChunk = list[tuple[str, list[tuple[str, str, str]]]]
Parse = Callable[[list[str], set[str], bool], list[ParsedChunk]]


def parse_chunks(texts: list[str], lower_vocab: set[str], common_nouns: bool) -> list[ParsedChunk]:
    """Pass 1 of `extract_nlp_graph`, chunk by chunk (each chunk's result depends on its text and the
    corpus's lower-case vocabulary only, so the chunks may be parsed in partitions anywhere).
    """
    per_chunk: list[ParsedChunk] = []
    for text in texts:
        parsed = []
        for sentence in sentences(text):
            found = [(normalize_name(s), s, t) for s, t in noun_phrases(sentence, lower_vocab, common_nouns)]
            parsed.append((" ".join(sentence.split())[:_MAX_SENTENCE_CHARS], [f for f in found if f[0]]))
        per_chunk.append(parsed)
    return per_chunk


def extract_nlp_graph(
    chunks_df: pd.DataFrame,
    *,
    cooccurrence: str = "chunk",
    common_nouns: bool = False,
    min_chunks: int = 1,
    max_descriptions: int = 5,
    parse: Parse = parse_chunks,
) -> Frames:
    """GraphRAG's NLP ("fast") graph, without an LLM or a tagger model.

    Entities are the noun phrases of `noun_phrases` found in at least `min_chunks` chunks; two
    entities are linked when they co-occur in a chunk (`cooccurrence="chunk"`) or in one sentence
    of a chunk (`"sentence"`); edge weight = number of such chunks. Descriptions are the first
    `max_descriptions` distinct sentences mentioning the entity (for an edge: both endpoints).
    Deterministic: the output depends only on the chunks and the options. `parse` runs pass 1
    (`parse_chunks`; `index.distribute` runs it over a Ray cluster).
    """
    if cooccurrence not in ("chunk", "sentence"):
        raise ValueError(f"cooccurrence must be 'chunk' or 'sentence', got {cooccurrence!r}")
    texts = list(chunks_df["text"])
    # Pass 1: per chunk, each sentence with the names it mentions.
    per_chunk = parse(texts, lower_case_vocabulary(texts), common_nouns)
    chunk_count = Counter(key for parsed in per_chunk for key in {f[0] for _, found in parsed for f in found})
    keep = {key for key, n in chunk_count.items() if n >= min_chunks}
    # Pass 2: one entity instance per mention, one relation instance per linked pair and chunk.
    ent_rows, rel_rows = [], []
    for chunk_id, parsed in zip(chunks_df["chunk_id"], per_chunk, strict=True):
        sentence_of_pair: dict[tuple[str, str], str] = {}
        for sentence, found in parsed:
            ent_rows += [
                (entity_key(k), surface, typ, sentence, [chunk_id], "nlp")
                for k, surface, typ in found
                if k in keep
            ]
            for pair in combinations(sorted({f[0] for f in found} & keep), 2):
                sentence_of_pair.setdefault(pair, sentence)
        pairs: Iterator[tuple[str, str]]
        if cooccurrence == "chunk":
            pairs = combinations(sorted({f[0] for _, found in parsed for f in found} & keep), 2)
        else:
            pairs = iter(sentence_of_pair)
        rel_rows += [
            (entity_key(a), entity_key(b), sentence_of_pair.get((a, b), ""), 1.0, [chunk_id])
            for a, b in pairs
        ]
    return merge_extractions(
        [
            (
                pd.DataFrame(ent_rows, columns=ENTITY_INSTANCE),
                pd.DataFrame(rel_rows, columns=RELATION_INSTANCE),
            )
        ],
        max_descriptions=max_descriptions,
    )
